"""Issue 13, "every refusal with a true reason": three general rules, each on a small kernel
written for the test.

1. padflow.py reads a gemm's transpose flags where each spelling's signature puts them (by
   keyword, or by position: tilelang-ascend `gemm(A, B, C, transpose_A, transpose_B)`,
   TileLang-NPUIR `npuir_dot` / `gemm(A, B, C, size, initC, a_transpose, b_transpose)`).
2. copyfit.py, slicefill.py and liveness.py read a buffer as the statement naming it sees it:
   a buffer of the same name in another kernel (or a helper) is not that buffer.
3. An extent the host pads up to a multiple of the knob itself demands no divisibility.
"""

from __future__ import annotations

import pytest

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# P is stored transposed (L x 64) and walked in block_K rows the compiler clips at L; the gemm
# sums the rows of each tile (B: ones, no padding). The padded rows of p_l1 are the K axis of
# the gemm because A is transposed, which GEMM says by keyword or by position.
PT_V = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def pv(L, D, block_K=16):
    @T.prim_func
    def main(P: T.Tensor((L, 64), "float16"), O: T.Tensor((64, D), "float")):
        with T.Kernel(1, is_npu=True) as (c, _):
            p_l1 = T.alloc_L1((block_K, 64), "float16")
            ones = T.alloc_L1((block_K, D), "float16")
            acc = T.alloc_L0C((64, D), "float")
            for k in T.serial(T.ceildiv(L, block_K)):
                T.copy(P[k * block_K : (k + 1) * block_K, 0:64], p_l1)
                T.tile.fill(ones, 1.0)
                GEMM
            T.copy(acc, O[0:64, 0:D])

    return main


kernel = pv(2000, 64)
"""


@pytest.mark.parametrize(
    "gemm",
    [
        "T.gemm_v0(p_l1, ones, acc, True, False, init=(k == 0))",  # tilelang-ascend gemm_v0
        "T.gemm(p_l1, ones, acc, True, False)",  # tilelang-ascend gemm
        "T.gemm(p_l1, ones, acc, [64, block_K, D], k == 0, True, False)",  # NPUIR gemm
        "T.npuir_dot(p_l1, ones, acc, [64, block_K, D], k == 0, True, False)",
        "T.gemm(p_l1, ones, acc, transpose_A=True)",  # by keyword, as before
    ],
)
def test_a_positional_transpose_puts_the_padded_rows_on_k(gemm):
    legal, refused = knobs.legal_values(PT_V.replace("GEMM", gemm), "block_K", BS)
    assert set(legal) <= {8, 16}, (
        refused
    )  # 2000 = 16 * 125 (8: a part fractal where GEMMS has the call)
    assert "the gemm accumulation" in dict(refused)[32]


def test_a_transpose_flag_that_is_not_a_literal_may_put_the_padding_on_k():
    src = PT_V.replace("GEMM", "T.gemm_v0(p_l1, ones, acc, flip, False)").replace(
        "def pv(L, D, block_K=16):", "def pv(L, D, block_K=16, flip=True):"
    )
    legal, refused = knobs.legal_values(src, "block_K", BS)
    assert 32 not in legal
    assert "is not a literal" in dict(refused)[32]
