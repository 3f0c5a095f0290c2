"""Classes of failure the first contact with heldout_w found (tests/data/upstream_kernels/
README.md), each on a kernel written here:

- capacity counts a buffer at the largest dtype the file runs it with, where every dtype
  runs (parametrize entries, call sites), and at the smallest where only one of two sides
  of `a if c else b` runs (capacity.py, strings.py `Reading`); the row rule still counts the
  smallest;
- one AscendC instruction whose counts (repeat, mask) do not follow the knob, given a buffer
  that does, keeps only the current value even where the counts are not one whole buffer
  (instrcount.py), and AscendC intrinsics called under their camelCase name count as such;
- a tensor the host allocates at module level with a size written for the current value,
  passed to a kernel built at module level whose declared shape is a name the factory binds,
  past the parameters `out_idx` makes, holds the knob to that size (callerbuffers.py).

From heldout_x and heldout_y: sizes a test walks as a list of dicts (`cfg["dim"]`,
callsizes.py); a branch naming a loop's last pass by number (passmarks.py); NPUIR's
`T.npuir_load_nd2nz` as an explicit-size copy (copyfit.py); buffers at hand-written addresses
(addresses.py); block-named module-level host locals passed only to other modules' functions,
and blocks read only into `_` (inventory.py); a part of a part of the knob (exprrules.py).

From heldout_z: a factory picked only by an environment mode the file never sets is never built
(unbuilt.py); work items dealt to a fixed number of cores without a guard stay a multiple of
them (coreshare.py)."""

from __future__ import annotations

from bot.strategies import inventory

# a (block_M, block_N) tile and K of them: 3 x 64 x 512 x 4 bytes = 384 KiB at fp32,
# exactly 192 KiB at fp16
STACKED = """
import pytest
import tilelang
import tilelang.language as T

DTYPES = ["float16", "float32"]


@tilelang.jit(target="npuir", out_idx=[2])
def stacked(M, N, K, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((K, M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            mid = cid // T.ceildiv(N, block_N)
            nid = cid % T.ceildiv(N, block_N)
            a = T.alloc_ub((block_M, block_N), dtype)
            b = T.alloc_ub((K, block_M, block_N), dtype)
            T.copy(A[mid * block_M, nid * block_N], a)
            T.copy(B[0, mid * block_M, nid * block_N], b)
            for i in T.serial(K):
                T.vadd(a, b[i, :, :], a)
            T.copy(a, C[mid * block_M, nid * block_N])

    return main


@pytest.mark.parametrize("dtype", DTYPES)
def test_stacked(dtype):
    M, N, K, BLOCK_M, BLOCK_N = 512, 512, 2, 64, 64
    stacked(M, N, K, BLOCK_M, BLOCK_N, dtype)
"""

REDUCE = """
import tilelang
import tilelang.language as T

M = 2
N = 512
block_M = 2
block_N = 128
groups = 16
mask = 64
repeat = 1


@tilelang.jit(out_idx=[-1])
def reduce_max(M, N, block_M, block_N, repeat, mask, groups, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N // groups), dtype)):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            by = cid % (N // block_N)
            a_ub = T.alloc_ub((block_M // 2, block_N), dtype)
            b_ub = T.alloc_ub((block_M // 2, block_N // groups), dtype)
            with T.Scope("V"):
                T.copy(A[vid, by * block_N], a_ub)
                T.blockReduceMax(b_ub, a_ub, repeat, mask, 1, 1, 8)
                T.copy(b_ub, B[vid, by * block_N // groups])

    return main


func = reduce_max(M, N, block_M, block_N, repeat, mask, groups)
"""

WORKSPACE = """
import torch
import tilelang
import tilelang.language as T

B, S = 2, 128


@tilelang.jit(out_idx=[1], target="pto")
def gather(rows, topk=2048, block_I=64):
    BI = block_I
    NI = topk // BI
    ws_shape = [rows, BI]

    @T.prim_func
    def main(
        X: T.Tensor((rows, topk), "float16"),
        Out: T.Tensor((rows, topk), "float16"),
        ws: T.Tensor(ws_shape, "float16"),
    ):
        with T.Kernel(rows, is_npu=True) as (cid, vid):
            tile = T.alloc_ub([1, BI], "float16")
            for k in T.serial(NI):
                T.copy(X[cid, k * BI], tile)
                T.copy(tile, ws[cid, 0])
                T.copy(ws[cid, 0], tile)
                T.copy(tile, Out[cid, k * BI])

    return main


x = torch.randn((B * S, 2048), dtype=torch.float16)
ws = torch.zeros((B * S, 64), dtype=torch.float16)
func = gather(rows=B * S)
out = func(x, ws)
"""


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_capacity_counts_the_largest_dtype_every_parametrize_entry_runs():
    ok, refused = _knob(STACKED, "block_M").legal((128, 256, 512))
    # 3 x 512 x 64 elements: 192 KiB at fp16 (fits), 384 KiB at fp32, which the file also runs
    assert ok == (128, 256)
    why = dict(refused)[512]
    assert "UB" in why and "393216 bytes" in why


def test_the_row_rule_still_counts_the_smallest_dtype():
    ok, refused = _knob(STACKED, "block_N").legal((8, 16))
    # 8 fp16 values are a 16-byte row (8 fp32 values would be a whole 32-byte block)
    assert ok == (16,)
    assert "16 bytes" in dict(refused)[8]


def test_one_side_of_a_conditional_dtype_is_not_held_to_the_larger():
    either = STACKED.replace(
        "stacked(M, N, K, BLOCK_M, BLOCK_N, dtype)",
        'stacked(M, N, K, BLOCK_M, BLOCK_N, "float16" if dtype == "float16" else "bfloat16")',
    )
    ok, refused = _knob(either, "block_M").legal((256, 512))
    assert ok == (256, 512), refused


def test_an_instruction_with_fixed_counts_over_a_knob_sized_tile_keeps_the_current_value():
    ok, refused = _knob(REDUCE, "block_N").legal((64, 128, 256))
    assert ok == (128,)
    why = dict(refused)[256]
    assert "T.blockReduceMax" in why and "repeat = 1, mask = 64" in why
    assert "16 elements instead of 8" in why


def test_counts_that_follow_the_knob_make_no_rule():
    follows = REDUCE.replace(
        "T.blockReduceMax(b_ub, a_ub, repeat, mask, 1, 1, 8)",
        "T.blockReduceMax(b_ub, a_ub, block_N // 128, mask, 1, 1, 8)",
    )
    ok, _ = _knob(follows, "block_N").legal((128, 256))
    assert ok == (128, 256)


def test_a_module_level_host_tensor_written_for_the_current_block_caps_it():
    ok, refused = _knob(WORKSPACE, "block_I").legal((32, 64, 128))
    assert 128 not in ok and 64 in ok
    why = dict(refused)[128]
    assert "`ws`" in why and "`64` = 64 (line" in why and "past the tensor" in why


def test_a_host_tensor_that_follows_the_block_makes_no_cap():
    follows = WORKSPACE.replace(
        "ws = torch.zeros((B * S, 64), dtype=torch.float16)",
        "ws = torch.zeros((B * S, 4096), dtype=torch.float16)",
    )
    ok, _ = _knob(follows, "block_I").legal((64, 128))
    assert ok == (64, 128)


# ---- classes the first contact with heldout_x and heldout_y found ----

# sizes kept in a list of dicts the test walks, read as `cfg["dim"]` (callsizes.py)
CONFIGS = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def attention(seq_len, dim):
    block_M = 64

    @T.prim_func
    def main(Q: T.Tensor((seq_len, dim), "float16"), O: T.Tensor((seq_len, dim), "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), is_npu=True) as (bx, vid):
            acc = T.alloc_L0C([block_M, dim], "float")
            q = T.alloc_L1([block_M, dim], "float16")
            T.copy(Q[bx * block_M : (bx + 1) * block_M, :], q)
            T.copy(q, O[bx * block_M : (bx + 1) * block_M, :])

    return main


def run_single(seq_len, dim):
    attention(seq_len=seq_len, dim=dim)


def run_all():
    configs = [
        {"seq_len": 128, "dim": 512},
        {"seq_len": 256, "dim": 64},
    ]
    for i, cfg in enumerate(configs, 1):
        run_single(cfg["seq_len"], cfg["dim"])


if __name__ == "__main__":
    run_all()
"""

# a branch that names the last pass of a loop whose pass count follows the knob (passmarks.py)
FLAGGED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], target="ascendc")
def matmul(M, N, K, block_K, K_L1=256):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(20, is_npu=True) as (cid, _):
            A_L1 = T.alloc_L1((128, K_L1), "float16")
            A_L0 = T.alloc_L0A((128, block_K), "float16")
            for k in T.serial(T.ceildiv(K, K_L1)):
                loop_kk = T.ceildiv(K_L1, block_K)
                for kk in T.serial(loop_kk):
                    T.copy(A_L1[0, kk * block_K], A_L0)
                    if kk == 3:
                        T.set_flag("mte1", "mte2", k % 2)

    return main


if __name__ == "__main__":
    matmul(1024, 1024, 1024, 64)
"""

# an NPUIR load with an explicit size into a buffer another knob sizes (copyfit.py)
NPUIR_LOAD = """
import tilelang
import tilelang.language as T


def flashattn(seq_len, dim, block_m, block_n, block_k):
    @T.prim_func
    def main(K: T.Tensor((seq_len, dim), "float16"), O: T.Tensor((seq_len, dim), "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_m), is_npu=True) as (cid, subid):
            l1_b = T.alloc_L1([block_m, block_k], "float16")
            for i in T.serial(T.ceildiv(seq_len, block_n)):
                tail_n = T.min(block_n, seq_len - i * block_n)
                for k in T.serial(T.ceildiv(dim, block_k)):
                    tail_k = T.min(block_k, dim - k * block_k)
                    T.npuir_load_nd2nz(K[i * block_n, k * block_k], l1_b, [tail_n, tail_k])

    return main


def test_compile():
    flashattn(seq_len=4096, dim=128, block_m=128, block_n=128, block_k=128)
"""

# buffers at hand-written addresses (addresses.py)
PLACED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def gather(rows, topk=1024, block_I=64):
    BI = block_I

    @T.prim_func
    def main(X: T.Tensor((rows, topk), "float"), Out: T.Tensor((rows, topk), "float")):
        with T.Kernel(rows, is_npu=True) as (cid, vid):
            scores = T.alloc_ub([32, BI], "float")
            other = T.alloc_ub([32, 16], "float")
            T.annotate_address({
                scores: 0,       # 32 x 64 fp32
                other: 8192,
            })
            for i in T.serial(topk // BI):
                T.copy(X[cid, i * BI], scores)
                T.copy(scores, Out[cid, i * BI])

    return main


if __name__ == "__main__":
    BLOCK_SIZE = 64
    BLOCK_SELECT = 16
    func = gather(rows=128)
    table = reference(block_size=BLOCK_SIZE, count=BLOCK_SELECT)
"""

# a design skeleton: a block read only into `_`, and rows split twice (inventory.py,
# exprrules.py)
SKELETON = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def rms_norm(M, N, dtype="float32"):
    block_M = 64
    block_N = 1024
    m_num = M // block_M
    sub_block_M = block_M // 2
    row_factor = 8
    row_loops = sub_block_M // row_factor
    n_num = (N + block_N - 1) // block_N

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(m_num, is_npu=True) as (cid, vid):
            for r in T.serial(row_loops):
                row = cid * block_M + vid * sub_block_M + r * row_factor
                _ = X
                _ = row
                _ = n_num

    return main


if __name__ == "__main__":
    rms_norm(4096, 4096)
"""


def test_sizes_a_test_walks_as_a_list_of_dicts_are_read():
    ok, refused = _knob(CONFIGS, "block_M").legal((32, 128, 512))
    # the 128 x 512 fp32 accumulator is all of L0C at 64; 512 is past every seq_len
    assert ok == (32,)
    assert "L0C" in dict(refused)[128]
    assert "seq_len=256" in dict(refused)[512]


def test_a_branch_on_the_last_pass_by_number_pins_the_pass_count():
    ok, refused = _knob(FLAGGED, "block_K").legal((32, 64, 128))
    assert ok == (64,)
    assert "`if kk == 3:` (line 17)" in dict(refused)[32]
    assert "pass 4 of 8, not the last" in dict(refused)[32]
    assert "would never fire" in dict(refused)[128]


def test_a_branch_on_the_count_itself_makes_no_rule():
    follows = FLAGGED.replace("if kk == 3:", "if kk == loop_kk - 1:")
    ok, _ = _knob(follows, "block_K").legal((32, 64))
    assert ok == (32, 64)


def test_an_npuir_load_with_a_size_must_fit_the_buffer_another_knob_sizes():
    ok, refused = _knob(NPUIR_LOAD, "block_n").legal((64, 128, 256))
    assert ok == (64, 128)
    assert "into `l1_b`" in dict(refused)[256]
    ok, refused = _knob(NPUIR_LOAD, "block_m").legal((64, 128))
    assert ok == (128,)


def test_a_buffer_at_a_hand_written_address_may_not_grow_into_the_next():
    ok, refused = _knob(PLACED, "block_I").legal((32, 64, 128))
    assert ok == (32, 64)
    why = dict(refused)[128]
    assert "`scores`" in why and "address 8192 of `other`" in why


def test_module_level_host_locals_passed_only_to_other_modules_are_listed():
    dropped = {d.name: d.reason for d in inventory.inventory(PLACED).dropped}
    assert "at module level" in dropped["BLOCK_SIZE"]
    assert "BLOCK_SELECT" in dropped


def test_a_block_read_only_into_underscore_is_dead():
    inv = inventory.inventory(SKELETON)
    assert [k.name for k in inv.knobs] == ["block_M"]
    assert "never read by the kernel" in {d.name: d.reason for d in inv.dropped}["block_N"]


def test_a_part_of_a_part_of_the_knob_needs_whole_parts_of_both():
    ok, refused = _knob(SKELETON, "block_M").legal((8, 16, 32))
    # block_M // 2 rows per vector core, walked 8 rows at a time
    assert ok == (16, 32)
    assert "not a multiple of 16" in dict(refused)[8]


# ---- classes the first contact with heldout_z found ----

# a factory picked by `os.environ[...] == "Dev"` while the file sets only "dev" and "Expert"
# (unbuilt.py `never_taken`)
MODES = """
import os
import tilelang
import tilelang.language as T


def fill_dev(M, block_M):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            buf = T.alloc_shared((block_M,), "float16")
            for i in T.serial(T.ceildiv(M // block_M, BLOCK_SIZE)):
                tile = i * BLOCK_SIZE + cid
                if tile < M // block_M:
                    T.copy(buf, A[tile * block_M])

    return main


def fill_exp(M, block_M):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            for i in T.serial(T.ceildiv(M // block_M, BLOCK_SIZE)):
                tile = i * BLOCK_SIZE + cid
                if tile < M // block_M:
                    T.copy(buf, A[tile * block_M])

    return main


def run(M, block_M):
    if os.environ["TILELANG_ASCEND_MODE"] == "Dev":
        func = fill_dev(M, block_M)
    else:
        func = fill_exp(M, block_M)
    tilelang.compile(func, target="npuir")


if __name__ == "__main__":
    os.environ["TILELANG_ASCEND_MODE"] = "{MODE}"
    run(1024, 32)
    os.environ["TILELANG_ASCEND_MODE"] = "Expert"
    run(1024, 32)
"""

# tiles dealt to 8 cores one per pass with no guard (coreshare.py)
DEALT = """
import tilelang
import tilelang.language as T

M = 128
N = 64


def interleave(M, N, block_M, block_N, dtype="float16"):
    m_num = M // block_M
    n_num = N // block_N
    BLOCK_SIZE = 8

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            A_VEC = T.alloc_ub((block_M, block_N), dtype)
            for i in T.serial(T.ceildiv(m_num * n_num, BLOCK_SIZE)):
                block_id = i * BLOCK_SIZE + cid
                bx = block_id // n_num * block_M
                by = block_id % n_num * block_N
                T.copy(A[bx, by], A_VEC)
                T.copy(A_VEC, C[bx, by])

    return main


def test_interleave():
    interleave(M, N, 16, 32)
"""


def test_a_factory_only_a_mode_the_file_never_sets_builds_is_not_tuned():
    inv = inventory.inventory(MODES.replace("{MODE}", "dev"))  # never "Dev": fill_dev unbuilt
    names = [k.name for k in inv.knobs]
    assert "BLOCK_SIZE" in names and "fill_dev.BLOCK_SIZE" not in names
    (knob,) = [k for k in inv.knobs if k.name == "BLOCK_SIZE"]
    assert knob.site.line == 23  # fill_exp's
    # the file sets "Dev" too: both factories run, each with its own BLOCK_SIZE
    both = [k.name for k in inventory.inventory(MODES.replace("{MODE}", "Dev")).knobs]
    assert "fill_dev.BLOCK_SIZE" in both and "fill_exp.BLOCK_SIZE" in both
    # a key the file may also set another way is not read as known
    other = MODES.replace("{MODE}", "dev").replace(
        "    run(1024, 32)\n    os.environ",
        '    run(1024, 32)\n    os.environ.setdefault("TILELANG_ASCEND_MODE", "Dev")\n    os.environ',
        1,
    )
    assert "setdefault" in other
    names = [k.name for k in inventory.inventory(other).knobs]
    assert "fill_dev.BLOCK_SIZE" in names


def test_items_dealt_to_cores_without_a_guard_stay_a_multiple_of_the_cores():
    ok, refused = _knob(DEALT, "block_M").legal((8, 16, 32, 64))
    # 128 / block_M x 2 tiles: 32, 16, 8 are multiples of 8; 4 is not
    assert ok == (8, 16, 32)
    why = dict(refused)[64]
    assert "4 work items to `BLOCK_SIZE` = 8 cores" in why and "4 cores past" in why


def test_a_guard_on_the_item_lets_extra_cores_idle():
    guarded = DEALT.replace(
        "                T.copy(A[bx, by], A_VEC)\n                T.copy(A_VEC, C[bx, by])",
        "                if block_id < m_num * n_num:\n"
        "                    T.copy(A[bx, by], A_VEC)\n"
        "                    T.copy(A_VEC, C[bx, by])",
    )
    ok, _ = _knob(guarded, "block_M").legal((16, 64))
    assert ok == (16, 64)


# ---- cases an independent review of the rules above found ----


def test_a_mode_the_file_sets_only_under_a_condition_or_after_a_run_decides_nothing():
    conditional = MODES.replace("{MODE}", "dev").replace(
        '    os.environ["TILELANG_ASCEND_MODE"] = "dev"\n',
        '    if "--expert" in sys.argv:\n        os.environ["TILELANG_ASCEND_MODE"] = "dev"\n',
    )
    assert 'if "--expert"' in conditional
    assert "fill_dev.BLOCK_SIZE" in [k.name for k in inventory.inventory(conditional).knobs]
    defaulted = MODES.replace("{MODE}", "dev").replace(
        'os.environ["TILELANG_ASCEND_MODE"] == "Dev"',
        'os.environ.get("TILELANG_ASCEND_MODE", "Dev") == "Dev"',
    )
    assert "fill_dev.BLOCK_SIZE" in [k.name for k in inventory.inventory(defaulted).knobs]
    late = MODES.replace("{MODE}", "dev").replace(
        '    os.environ["TILELANG_ASCEND_MODE"] = "dev"\n    run(1024, 32)\n',
        '    run(1024, 32)\n    os.environ["TILELANG_ASCEND_MODE"] = "dev"\n',
    )
    assert "fill_dev.BLOCK_SIZE" in [k.name for k in inventory.inventory(late).knobs]


def test_any_bound_on_a_core_derived_item_leaves_the_deal_unjudged():
    for guard in ("if bx < M:", "if block_id < m_num * n_num:"):
        guarded = DEALT.replace(
            "                T.copy(A[bx, by], A_VEC)\n                T.copy(A_VEC, C[bx, by])",
            f"                {guard}\n"
            "                    T.copy(A[bx, by], A_VEC)\n"
            "                    T.copy(A_VEC, C[bx, by])",
        )
        ok, _ = _knob(guarded, "block_M").legal((16, 64))
        assert ok == (16, 64), guard
    clamped = DEALT.replace(
        "block_id = i * BLOCK_SIZE + cid",
        "block_id = T.min(i * BLOCK_SIZE + cid, m_num * n_num - 1)",
    )
    ok, _ = _knob(clamped, "block_M").legal((16, 64))
    assert ok == (16, 64)
    literal = DEALT.replace("T.Kernel(BLOCK_SIZE", "T.Kernel(8").replace(
        "T.ceildiv(m_num * n_num, BLOCK_SIZE)", "T.ceildiv(m_num * n_num, 8)"
    )
    ok, refused = _knob(literal, "block_M").legal((16, 64))
    assert ok == (16,) and "cores past" in dict(refused)[64]


def test_a_call_thrown_into_underscore_still_reads_its_arguments():
    extern = SKELETON.replace("_ = n_num", '_ = T.call_extern("handle", "flush", n_num)')
    assert "block_N" in [k.name for k in inventory.inventory(extern).knobs]


def test_a_part_bound_again_is_no_longer_a_part():
    rebound = SKELETON.replace(
        "    row_factor = 8\n", "    sub_block_M = block_M\n    row_factor = 8\n"
    )
    ok, _ = _knob(rebound, "block_M").legal((8, 16))
    assert ok == (8, 16)


def test_a_loop_counted_from_zero_to_n_names_its_passes_too():
    ranged = FLAGGED.replace("T.serial(loop_kk)", "T.serial(0, loop_kk)")
    ok, refused = _knob(ranged, "block_K").legal((32, 64))
    assert ok == (64,) and "the last one at the current block_K" in dict(refused)[32]


# a design skeleton that binds an L1 stage's K extent and never reads it (inventory.py)
STAGED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul(M, N, K):
    block_M, block_N, K_L1 = 128, 256, 256

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            _ = A

    return main
"""


def test_a_stage_tile_the_kernel_never_reads_is_listed_as_dead():
    dropped = {d.name: d.reason for d in inventory.inventory(STAGED).dropped}
    assert "never read by the kernel" in dropped["K_L1"]
    live = STAGED.replace(
        "            _ = A", "            buf = T.alloc_L1((block_M, K_L1), 'float16')"
    )
    # read by the kernel: not dead; listed as a tile discovery leaves to tune.yaml
    why = {d.name: d.reason for d in inventory.inventory(live).dropped}["K_L1"]
    assert "never read" not in why and "tune.yaml" in why
