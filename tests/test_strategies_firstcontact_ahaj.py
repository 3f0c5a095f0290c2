"""Classes of failure the review of the fourteenth session's rules and the first contacts with
heldout_ah, heldout_ai and heldout_aj found (tests/data/upstream_kernels/README.md), each on a
kernel written here:

- a pipeline depth a factory takes and its kernel never reads is listed under pipeline_depth,
  the strategy that would have tuned it, not under block_size;
- a launch whose body calls a function the file does not hold (an imported helper, a method)
  may read the core index there: its grid stays a knob (corecount._index_call)."""

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


BARRIER = """
import tilelang
import tilelang.language as T
{IMPORT}

def barrier(M, N, dtype="float16"):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            T.pipe_barrier("PIPE_MTE2"){USE}

    return main


kernel = tilelang.compile(barrier(512, 512), target="npuir")
"""


def _knobs(src: str) -> list[str]:
    return [k.name for k in inventory.inventory(src).knobs]


def test_a_launch_calling_a_helper_the_file_does_not_hold_keeps_the_grid_a_knob():
    # `tile_body` comes from another module: it may read the core index itself
    use = "\n            tile_body(A)"
    src = BARRIER.replace("{IMPORT}", "from my_kernels.helpers import tile_body").replace(
        "{USE}", use
    )
    assert "BLOCK_SIZE" in _knobs(src)
    # a method of a helper object: the same
    src = BARRIER.replace("{IMPORT}", "import my_kernels").replace(
        "{USE}", "\n            my_kernels.tile_body(A)"
    )
    assert "BLOCK_SIZE" in _knobs(src)


def test_language_operations_and_builtins_do_not_keep_an_unread_grid():
    use = "\n            for i in range(min(4, 8)):\n                T.pipe_barrier('PIPE_V')"
    src = BARRIER.replace("{IMPORT}", "").replace("{USE}", use)
    assert "BLOCK_SIZE" not in _knobs(src)
    # the language under another name
    src = (
        BARRIER.replace("{IMPORT}", "import tilelang.language as tll")
        .replace("{USE}", "\n            tll.pipe_barrier('PIPE_V')")
    )
    assert "BLOCK_SIZE" not in _knobs(src)
