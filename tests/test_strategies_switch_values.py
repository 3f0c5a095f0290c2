"""Block-like names that are no tile size are dropped with the reason, never tuned
(bot/strategies/inventory.py): a literal of 0 or less is a switch (`block_C=0`: no channel
split, another kernel when set), and `block_row_warps` counts warps a block runs."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import OpConfig
from bot.strategies.planner import Planner

POOL = """\
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def pool(M, C, block_C=0, block_M=32):
    split = block_C if block_C > 0 else C
    c_num = C // split

    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, block_M) * c_num, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, split), "float32")
            bm = cid // c_num
            bc = cid % c_num
            T.copy(X[bm * block_M, bc * split], buf)
            T.copy(buf, Y[bm * block_M, bc * split])

    return main


kernel = pool(1024, 256)
"""


def _plan(src: str):
    op = OpConfig(project="x", name="pool", dir=Path("ops/pool"), kernel_kind="mix")
    return Planner(op).specs(src, ["block_size"])


def test_a_block_set_to_zero_is_a_switch_and_is_not_tuned():
    specs, skipped = _plan(POOL)
    assert [s.key for s in specs] == ["block_M"]
    why = next(s for s in skipped if s.startswith("block_size: block_C: "))
    assert "set to 0 (default at line 6)" in why and "a switch" in why


def test_the_same_name_with_a_size_is_tuned():
    specs, _ = _plan(POOL.replace("block_C=0", "block_C=64"))
    assert {s.key for s in specs} == {"block_C", "block_M"}


WARPS = """\
import tilelang
import tilelang.language as T


def gemm(M, N, K, block_row_warps=2, block_col_warps=2, block_K=32):
    block_M = block_row_warps * 32
    block_N = block_col_warps * 32
    threads = 32 * block_row_warps * block_col_warps

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "float16")
            b = T.alloc_shared((block_K, block_N), "float16")
            c = T.alloc_fragment((block_M, block_N), "float")
            T.clear(c)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * block_M, bx * block_N])

    return main


kernel = gemm(1024, 1024, 1024)
"""


def test_a_count_of_warps_is_not_a_tile_size():
    specs, skipped = _plan(WARPS)
    assert [s.key for s in specs] == ["block_K"]
    for name in ("block_row_warps", "block_col_warps"):
        why = next(s for s in skipped if s.startswith(f"block_size: {name}: "))
        assert "counts warps" in why
