"""A block that sizes a matrix-multiply operand keeps it in whole cube fractals."""

from __future__ import annotations

from bot.strategies import inventory

GEMM = """
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M, N, K, block_M=32, block_N=64, block_K=64, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float")):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            bx = cid // T.ceildiv(N, block_N)
            by = cid % T.ceildiv(N, block_N)
            A_L1 = T.alloc_L1((block_M, block_K), dtype)
            B_L1 = T.alloc_L1((block_K, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), "float")
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[bx * block_M, k * block_K], A_L1)
                T.copy(B[k * block_K, by * block_N], B_L1)
                T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
            T.copy(C_L0, C[bx * block_M, by * block_N])

    return main


if __name__ == "__main__":
    matmul(1024, 1024, 1024)
"""


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_a_gemm_tile_dimension_below_a_fractal_is_refused():
    ok, refused = _knob(GEMM, "block_M").legal((8, 16, 24, 64))
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [8, 24]
    why = refused[0][1]
    assert "A_L1" in why and "not a multiple of 16" in why and "fractal" in why


def test_the_reduction_axis_of_a_one_byte_operand_takes_32_elements():
    int8 = GEMM.replace('dtype="float16"', 'dtype="int8"').replace("block_K=64", "block_K=64")
    ok, refused = _knob(int8, "block_K").legal((16, 32, 128))
    assert ok == (32, 128) and [v for v, _ in refused] == [16]
    assert "reduction axis" in refused[0][1] and "multiple of 32" in refused[0][1]
    # the same 16 is a whole fractal for fp16
    ok16, _ = _knob(GEMM, "block_K").legal((16, 32, 128))
    assert ok16 == (16, 32, 128)


def test_a_transposed_operand_takes_its_reduction_axis_from_the_flag():
    int8 = (
        GEMM.replace('dtype="float16"', 'dtype="int8"')
        .replace(
            "B_L1 = T.alloc_L1((block_K, block_N), dtype)",
            "B_L1 = T.alloc_L1((block_N, block_K), dtype)",
        )
        .replace("init=(k == 0))", "init=(k == 0), transpose_B=True)")
        .replace("B: T.Tensor((K, N), dtype)", "B: T.Tensor((N, K), dtype)")
        .replace("B[k * block_K, by * block_N], B_L1", "B[by * block_N, k * block_K], B_L1")
    )
    assert "B[by * block_N, k * block_K]" in int8 and "B: T.Tensor((N, K)" in int8
    # B is N x K now: 16 along N is whole, 16 along K is not
    ok, refused = _knob(int8, "block_N").legal((16, 128))
    assert ok == (16, 128) and not refused


def test_a_kernel_that_already_runs_a_part_fractal_is_not_judged_there():
    part = GEMM.replace("block_M=32", "block_M=8")
    ok, refused = _knob(part, "block_M").legal((4, 16))
    assert ok == (4, 16) and not refused


def test_a_block_that_sizes_no_matrix_multiply_operand_is_free():
    vector = """
import tilelang
import tilelang.language as T


@tilelang.jit
def add(n, block_N=64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_N) as bx:
            buf = T.alloc_ub((block_N,), "float16")
            T.copy(X[bx * block_N], buf)
            T.copy(buf, Y[bx * block_N])

    return main


if __name__ == "__main__":
    add(4096)
"""
    ok, refused = _knob(vector, "block_N").legal((8, 16, 128))
    assert ok == (8, 16, 128) and not refused


def test_a_32_byte_row_of_fp32_is_a_whole_fractal_on_the_reduction_axis():
    fp32 = GEMM.replace('dtype="float16"', 'dtype="float32"')
    ok, refused = _knob(fp32, "block_K").legal((8, 16, 128))
    assert ok == (8, 16, 128) and not refused  # 8 fp32 = 32 bytes, one fractal row
    ok, refused = _knob(fp32, "block_M").legal((8, 16))
    assert ok == (16,) and "multiple of 16" in refused[0][1]  # rows stay 16 per fractal
