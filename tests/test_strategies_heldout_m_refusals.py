"""Refusal reasons found untrue by the heldout_m refusal audit
(tests/data/upstream_kernels/heldout_m_refusals.md), each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import pipeline
from bot.strategies.base import Refusal, Variant

# A kernel that already runs its pipeline deeper than the depths tunebot writes (0 ... 4), with
# the depth bound to a local that also sizes a workspace ring.
DEEP_PIPELINE = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def copy_rows(rows, cols, block, stages):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, _):
            buf = T.alloc_shared((block, cols), "float16")
            ring = T.alloc_workspace((2, block, cols), "float16", multi_buffer=stages)
            for k in T.Pipelined(T.ceildiv(rows, block), num_stages=stages):
                T.copy(X[k * block, 0], buf)
                T.copy(buf, ring[0, 0, 0])
                T.copy(ring[0, 0, 0], Y[k * block, 0])

    return main


def main():
    block = 64
    stages = 6
    kernel = copy_rows(4096, 128, block, stages)


if __name__ == "__main__":
    main()
"""


def test_a_depth_above_the_cap_may_be_lowered():
    # one stage fewer holds one copy fewer on chip: the cap on deeper pipelines says nothing
    r = pipeline.set_depth(DEEP_PIPELINE, 5)
    assert isinstance(r, Variant), r
    assert r.change.old == 6 and r.change.new == 5
    assert "stages = 5" in r.source


def test_a_depth_above_the_cap_is_not_raised_further():
    r = pipeline.set_depth(DEEP_PIPELINE, 7)
    assert isinstance(r, Refusal)
    assert "past the deepest pipeline tunebot writes" in r.reason


def test_a_literal_depth_above_the_cap_may_be_lowered():
    src = DEEP_PIPELINE.replace("num_stages=stages", "num_stages=6")
    r = pipeline.set_depth(src, 5)
    assert isinstance(r, Variant), r
    assert "num_stages=5" in r.source
    assert isinstance(pipeline.set_depth(src, 7), Refusal)
