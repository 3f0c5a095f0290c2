"""Block-like names that count execution units (`block_row_warps`: warps a block runs) are
no tile size: dropped with the reason, never tuned (bot/strategies/inventory.py)."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import OpConfig
from bot.strategies.planner import Planner


def _plan(src: str):
    op = OpConfig(project="x", name="gemm", dir=Path("ops/gemm"), kernel_kind="mix")
    return Planner(op).specs(src, ["block_size"])


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
