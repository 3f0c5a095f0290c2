"""Classes of failure the first contact with heldout_r (tests/data/upstream_kernels/README.md)
found, each on a kernel written here: a UB tile's rows stay whole 32-byte blocks (bot/strategies/
ubrows.py), a vector-only kernel's copied-only buffers count in UB (capacity.py), and a block
name the kernel computes at run time is listed as dropped with why (inventory.py)."""

from __future__ import annotations

from bot.strategies import inventory

ADD = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def vec_add(M, N, block_M=32, block_N=32, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            bx = cid // T.ceildiv(N, block_N)
            by = cid % T.ceildiv(N, block_N)
            A_VEC = T.alloc_ub((block_M, block_N), dtype)
            B_VEC = T.alloc_ub((block_M, block_N), dtype)
            C_VEC = T.alloc_ub((block_M, block_N), dtype)
            T.copy(A[bx * block_M, by * block_N], A_VEC)
            T.copy(B[bx * block_M, by * block_N], B_VEC)
            T.vadd(A_VEC, B_VEC, C_VEC)
            T.copy(C_VEC, C[bx * block_M, by * block_N])

    return main


if __name__ == "__main__":
    vec_add(1024, 1024)
"""


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_a_ub_row_below_32_bytes_is_refused_with_the_tile_and_its_bytes():
    ok, refused = _knob(ADD, "block_N").legal((8, 16, 24, 64))
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [8, 24]
    why = dict(refused)[8]
    assert "A_VEC" in why and "16 bytes" in why and "32-byte" in why and "64-byte rows" in why


def test_the_row_floor_follows_the_element_size():
    fp32 = ADD.replace('dtype="float16"', 'dtype="float32"')
    ok, refused = _knob(fp32, "block_N").legal((4, 8))
    assert ok == (8,) and [v for v, _ in refused] == [4]
    int8 = ADD.replace('dtype="float16"', 'dtype="int8"')
    ok8, refused8 = _knob(int8, "block_N").legal((16, 32, 64))
    assert ok8 == (32, 64) and [v for v, _ in refused8] == [16]


def test_the_leading_dimension_is_not_a_row():
    ok, refused = _knob(ADD, "block_M").legal((1, 2, 8, 64))
    assert ok == (1, 2, 8, 64) and not refused


def test_a_kernel_whose_rows_are_already_a_part_block_is_not_judged_there():
    part = ADD.replace("block_N=32", "block_N=8")
    ok, refused = _knob(part, "block_N").legal((4, 16))
    assert ok == (4, 16) and not refused


def test_a_one_dimensional_buffer_is_not_judged():
    flat = (
        ADD.replace("T.alloc_ub((block_M, block_N), dtype)", "T.alloc_ub((block_N,), dtype)")
        .replace("A[bx * block_M, by * block_N], A_VEC", "A[bx, by * block_N], A_VEC")
        .replace("B[bx * block_M, by * block_N], B_VEC", "B[bx, by * block_N], B_VEC")
        .replace("C_VEC, C[bx * block_M, by * block_N]", "C_VEC, C[bx, by * block_N]")
    )
    assert "T.alloc_ub((block_N,), dtype)" in flat
    ok, refused = _knob(flat, "block_N").legal((8, 64))
    assert not any("32-byte" in why for _, why in refused)
    assert 8 in ok


SHARED = """
import tilelang
import tilelang.language as T


def add(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            by = cid // T.ceildiv(N, block_N)
            bx = cid % T.ceildiv(N, block_N)
            A_s = T.alloc_shared((block_M, block_N), dtype)
            B_s = T.alloc_shared((block_M, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), dtype)
            C_s = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], A_s)
            T.copy(B[by * block_M, bx * block_N], B_s)
            T.npuir_add(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


def test():
    add(256, 256, 64, 64)
"""


def test_a_vector_kernels_copied_only_buffer_counts_in_ub():
    # three vector operands (A_s, B_s, C_l) and C_s, only copied: four fp32 tiles of
    # 256 x 64 are 256 KiB, past UB's 192 KiB, although the three alone fill it exactly
    ok, refused = _knob(SHARED, "block_M").legal((128, 256))
    assert ok == (128,)
    ((value, why),) = refused
    assert value == 256 and "C_s" in why and "262144 bytes" in why and "UB" in why


def test_a_block_name_the_kernel_computes_at_run_time_is_listed_with_why():
    src = ADD.replace(
        "            A_VEC = T.alloc_ub((block_M, block_N), dtype)\n",
        "            block_m = (M + 19) // 20\n"
        "            bm = block_M\n"
        "            block_id = cid // 2\n"
        "            block_h = block_N // 2\n"
        "            block_k = 16\n"
        "            A_VEC = T.alloc_ub((block_M, block_N), dtype)\n",
    )
    assert "block_m = (M + 19) // 20" in src
    inv = inventory.inventory(src)
    reasons = {d.name: d.reason for d in inv.dropped}
    assert "computed inside the kernel main()" in reasons["block_m"]
    assert "not bound to a literal" in reasons["block_m"] and "(M + 19) // 20" in reasons["block_m"]
    assert "bm" not in reasons  # an alias of block_M: judged as block_M
    assert "block_id" not in reasons  # an index, not a tile size
    assert "block_h" not in reasons  # derived from the knob block_N: judged under it
    assert "block_k" not in reasons  # a literal: no "no literal sets it" claim
    assert {k.name for k in inv.knobs} == {"block_M", "block_N"}


def test_a_kernel_that_may_multiply_out_of_sight_keeps_copied_buffers_unplaced():
    # the same kernel with a cube call under a name the placement does not list (or a
    # `@T.macro` that holds one): C_s may be in L1, so only the buffers placed by use count
    # in UB, and 256 fits as before
    for extra in (
        "            T.gemm_v2(A_s, B_s, C_l)\n",
        "            mma(A_s, B_s, C_l)\n",
    ):
        src = SHARED.replace(
            "            T.npuir_add(A_s, B_s, C_l)\n",
            extra + "            T.npuir_add(A_s, B_s, C_l)\n",
        )
        if "mma(" in extra:
            src = src.replace(
                "    @T.prim_func\n",
                "    @T.macro\n    def mma(a, b, c):\n        T.gemm(a, b, c)\n\n    @T.prim_func\n",
            )
        assert extra in src
        ok, refused = _knob(src, "block_M").legal((128, 256))
        assert ok == (128, 256), refused
