"""Classes of failure the first contact with heldout_u found (tests/data/upstream_kernels/
README.md), each on a kernel written here: whole buffers an elementwise operation combines
keep one shape (bot/strategies/sameshape.py), the UB tiles a `@T.macro` allocates are
held to the 32-byte row rule like the kernel's own (ubrows.py), and a loop that copies a
whole knob-sized tile from a point it places needs full tiles, whatever a `T.min` clips in
its body (exprrules.py `whole_tile_copy`), and a host wrapper's assert inside a loop over
sizes the file does not fix (`for size in sizes: assert size % block_K == 0`) leaves only
divisors of the current value (hostasserts.py, constraints.py). From heldout_w: a factory
that holds a per-factory knob's name and never reads it is listed as dropped beside the
knobs of the others, and a block-named host local that no factory is given (a padding
granularity) is listed as dropped with why (inventory.py)."""

from __future__ import annotations

from bot.strategies import inventory

# the output accumulator is sized by the head dim, the score tile by block_N: equal at 128
RESCALE = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def rescale(seq_len, dim=128, dtype="float32"):
    block_M, block_N = 64, 128

    @T.prim_func
    def main(
        A: T.Tensor((seq_len, dim), dtype),
        S: T.Tensor((seq_len, seq_len), dtype),
        Out: T.Tensor((seq_len, dim), dtype),
    ):
        with T.Kernel(seq_len // block_M, is_npu=True) as (cid, vid):
            acc_o = T.alloc_ub([block_M, dim], dtype)
            scale = T.alloc_ub([block_M, block_N], dtype)
            col = T.alloc_ub([block_M, 1], dtype)
            T.copy(A[cid * block_M, 0], acc_o)
            for k in T.serial(seq_len // block_N):
                T.copy(S[cid * block_M, k * block_N], scale)
                T.tile.mul(acc_o, acc_o, scale)
            T.tile.mul(acc_o, acc_o, col)
            T.copy(acc_o, Out[cid * block_M, 0])

    return main


if __name__ == "__main__":
    rescale(4096)
"""

MASKED = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def masked(M, N, block=64, dtype="float16"):
    @T.macro
    def load_mask(src, row):
        valid = T.alloc_ub([1, block], "bool")
        tile = T.alloc_ub([1, block], dtype)
        T.copy(src[row, 0:block], tile)
        T.vcmp(tile, 0, valid)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(M, is_npu=True) as (cid, _):
            load_mask(A, cid)

    return main


if __name__ == "__main__":
    masked(128, 64)
"""


# the sparse-attention gather: the index tile is copied whole from a point of the index row,
# while `T.min` only bounds the loop that walks it; the output loop clips its own copies
GATHER = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def gather(batch, top_k, dim, block_vec, dtype="float16"):
    @T.prim_func
    def main(
        Idx: T.Tensor((batch, top_k), "int32"),
        KV: T.Tensor((4096, dim), dtype),
        Out: T.Tensor((batch, top_k, dim), dtype),
    ):
        with T.Kernel(batch, is_npu=True) as (cid, _):
            idxs = T.alloc_ub((block_vec,), "int32")
            rows = T.alloc_ub((block_vec, dim), dtype)
            for k in T.serial(T.ceildiv(top_k, block_vec)):
                real = T.min(top_k - k * block_vec, block_vec)
                T.copy(Idx[cid, k * block_vec], idxs)
                for i in T.serial(real):
                    T.copy(KV[idxs[i], 0], rows[i, 0], size=[1, dim])
                T.copy(rows, Out[cid, k * block_vec, 0], size=[real, dim])

    return main


def run(idx, kv):
    batch, top_k = idx.shape
    return gather(batch, top_k, kv.shape[-1], 32)(idx, kv)
"""

CLIPPED_GATHER = GATHER.replace(
    "T.copy(Idx[cid, k * block_vec], idxs)", "T.copy(Idx[cid, k * block_vec], idxs, size=[real])"
)


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_a_move_that_parts_the_shapes_an_elementwise_op_combines_is_refused():
    ok, refused = _knob(RESCALE, "block_N").legal((64, 128))
    assert ok == (128,)
    why = dict(refused)[64]
    assert "`mul` at line 23" in why and "acc_o" in why and "[64, 64]" in why


def test_a_knob_that_sizes_every_operand_alike_keeps_its_moves():
    # block_M sizes acc_o, scale and col alike; the (block_M, 1) column is a broadcast
    ok, refused = _knob(RESCALE, "block_M").legal((32, 64, 128))
    assert ok == (32, 64, 128), refused


def test_shapes_that_already_differ_are_not_judged():
    differ = RESCALE.replace("block_M, block_N = 64, 128", "block_M, block_N = 64, 64")
    ok, _ = _knob(differ, "block_N").legal((32, 64, 128))
    assert ok == (32, 64, 128)


def test_a_macro_s_ub_rows_are_held_to_whole_32_byte_blocks():
    ok, refused = _knob(MASKED, "block").legal((16, 32, 128))
    # a (1, 16) bool row is 16 bytes; the fp16 tile at 16 would be 32 bytes
    assert ok == (32, 128)
    why = dict(refused)[16]
    assert "`valid`" in why and "16 bytes" in why


def test_a_whole_tile_copied_from_a_point_needs_full_tiles_despite_a_min():
    ok, refused = _knob(GATHER, "block_vec").legal((16, 64))
    # top_k is a run-time size: only divisors of the current 32 are provably whole tiles
    assert ok == (16,)
    why = dict(refused)[64]
    assert "the copy at line 19 moves a whole block_vec-sized tile" in why
    assert "only divisors of the current 32" in why


def test_a_copy_clipped_to_the_tail_keeps_the_larger_blocks():
    ok, _ = _knob(CLIPPED_GATHER, "block_vec").legal((16, 64))
    assert ok == (16, 64)


GROUPED = """
import argparse
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1], target="pto")
def grouped(total, dim, block_K, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((total, dim), dtype), Out: T.Tensor((total, dim), dtype)):
        with T.Kernel(T.ceildiv(total, block_K), is_npu=True) as (cid, _):
            a_l1 = T.alloc_L1((block_K, dim), dtype)
            T.copy(A[cid * block_K : (cid + 1) * block_K, 0:dim], a_l1)
            T.copy(a_l1, Out[cid * block_K : (cid + 1) * block_K, 0:dim])

    return main


def run(sizes, dim, block_K):
    for size in sizes:
        assert size % block_K == 0, "every group is whole blocks"
    return grouped(sum(sizes), dim, block_K)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=str, default="64, 128")
    parser.add_argument("--block_K", type=int, default=64)
    args = parser.parse_args()
    run([int(x) for x in args.sizes.split(",")], 128, args.block_K)
"""


def test_a_wrapper_assert_in_a_loop_over_unknown_sizes_leaves_only_divisors():
    ok, refused = _knob(GROUPED, "block_K").legal((32, 128))
    assert ok == (32,)
    why = dict(refused)[128]
    assert (
        "the assert at line 21" in why and "`size`" in why and "divisors of the current 64" in why
    )


def _factory(name: str, read: bool) -> str:
    grid = "BLOCK_SIZE" if read else "4"
    return f"""
@tilelang.jit(target="npuir")
def {name}(N, dtype="float16"):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((N,), dtype)):
        with T.Kernel({grid}, is_npu=True) as (cid, _):
            buf = T.alloc_ub((32,), dtype)
            T.copy(A[cid * 32 : cid * 32 + 32], buf)
            T.copy(buf, A[cid * 32 : cid * 32 + 32])

    return main
"""


CORES = (
    "import tilelang\nimport tilelang.language as T\n"
    + _factory("one", True)
    + _factory("two", True)
    + _factory("three", False)
    + "\n\nif __name__ == '__main__':\n    one(640)\n    two(640)\n    three(128)\n"
)


def test_a_factory_that_never_reads_its_copy_of_a_split_knob_is_listed_as_dropped():
    found = inventory.inventory(CORES)
    assert {k.name for k in found.knobs} >= {"one.BLOCK_SIZE", "two.BLOCK_SIZE"}
    dropped = {d.name: d.reason for d in found.dropped}
    assert "never read by the kernel (three())" in dropped["three.BLOCK_SIZE"]


PADDED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def double(M, block_M, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, 64), dtype), B: T.Tensor((M, 64), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, 64), dtype)
            T.copy(A[cid * block_M, 0], buf)
            T.copy(buf, B[cid * block_M, 0])

    return main


def forward(tokens):
    BLOCK_M = 128
    padded = (tokens + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    return double(padded, 64)


if __name__ == "__main__":
    forward(1000)
"""


def test_a_block_named_host_local_no_factory_is_given_is_listed_with_why():
    found = inventory.inventory(PADDED)
    assert [k.name for k in found.knobs] == ["block_M"]
    dropped = {d.name: d.reason for d in found.dropped}
    assert "BLOCK_M = 128 at line 19, in forward()" in dropped["BLOCK_M"]
    assert "no kernel factory is given" in dropped["BLOCK_M"]


def test_a_host_local_passed_on_is_left_to_the_binding_rules():
    passed = PADDED.replace("return double(padded, 64)", "return double(padded, BLOCK_M)")
    found = inventory.inventory(passed)
    assert "BLOCK_M" not in {d.name for d in found.dropped}
