"""Classes of failure the review of the fourteenth session's rules and the first contacts with
heldout_ah, heldout_ai and heldout_aj found (tests/data/upstream_kernels/README.md), each on a
kernel written here:

- a pipeline depth a factory takes and its kernel never reads is listed under pipeline_depth,
  the strategy that would have tuned it, not under block_size."""

from __future__ import annotations

from bot.strategies import inventory

DEAD_STAGES = """
import tilelang
import tilelang.language as T


def gemm(M, N, K, block_M=64, block_N=64, num_stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float16")
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, C[cid * block_M, 0])

    return main


kernel = gemm(1024, 1024, 1024)
"""


def test_a_dead_pipeline_depth_is_listed_under_pipeline_depth():
    dropped = {d.name: d for d in inventory.inventory(DEAD_STAGES).dropped}
    assert dropped["num_stages"].strategy == "pipeline_depth"
    assert "never read by the kernel" in dropped["num_stages"].reason
    live = DEAD_STAGES.replace(
        "            T.copy(a, C[cid * block_M, 0])",
        "            for k in T.Pipelined(4, num_stages=num_stages):\n"
        "                T.copy(a, C[cid * block_M, 0])",
    )
    assert "num_stages" not in {d.name for d in inventory.inventory(live).dropped}
