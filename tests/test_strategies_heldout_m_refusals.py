"""Refusal reasons found untrue by the heldout_m refusal audit
(tests/data/upstream_kernels/heldout_m_refusals.md), each on a small kernel written for the test."""

from __future__ import annotations

from bot.config.schema import Knob
from bot.strategies import knobs, pipeline
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


# The head count reaches the kernel through a tensor's shape, and that tensor reaches its
# wrapper only inside `**inputs`, a dict the file builds at run time: tunebot cannot size it.
HEADS_THROUGH_KWARGS = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def attend(block_H, heads, dim):
    rows = T.symbolic("rows")

    @T.prim_func
    def main(Q: T.Tensor((rows, heads, dim), "float16"), O: T.Tensor((rows, heads, dim), "float16")):
        with T.Kernel(rows, is_npu=True) as (cid, _):
            q_ub = T.alloc_shared((block_H, dim), "float16")
            for h in T.serial(T.ceildiv(heads, block_H)):
                T.copy(Q[cid, h * block_H, 0], q_ub)
                T.copy(q_ub, O[cid, h * block_H, 0])

    return main


def run(q):
    block_H = 16
    rows, heads, dim = q.size()
    kernel = attend(block_H, heads, dim)
    return kernel(q)


def load_inputs():
    return torch.load("inputs.pt")


def main():
    inputs = load_inputs()
    run(**inputs)


if __name__ == "__main__":
    main()
"""


def _refuse(src: str, value: int) -> str:
    r = knobs.set_knob(src, Knob("block_H", "block_size", (8, 16, 32, 64)), value, "block_size")
    assert isinstance(r, Refusal), r
    return r.reason


def test_an_unsized_extent_names_the_step_where_its_size_is_lost():
    reason = _refuse(HEADS_THROUGH_KWARGS, 32)
    assert "`T.ceildiv(heads, block_H)`" in reason and "needs full tiles" in reason
    # the file may well fix the head count; the reason says where tunebot stops reading it
    assert "could not resolve its extent from this file" not in reason
    assert "unpacked from `q.size()` in run() (line 24)" in reason
    assert "(line 35) leaves it to" in reason and "`**inputs`" in reason
    assert "only divisors of the current 16" in reason


def test_an_extent_with_no_caller_keeps_the_general_reason():
    # a library: nothing calls run(), so the head count comes from outside the file
    src = HEADS_THROUGH_KWARGS.split("\ndef load_inputs():", maxsplit=1)[0]
    reason = _refuse(src, 32)
    assert "could not resolve its extent from this file" in reason


# A `T.symbolic` row count, sized by the tensor the compiled kernel is called with; the test
# builds that tensor with a helper it imports, whose result's shape is not in this file. (The
# row counts come from the helper module too: a parametrize list spelled out here would size
# `M` by its test parameter of the same name, tests/test_strategies_sizes_h15.py.)
ROWS_FROM_AN_IMPORTED_HELPER = """
import pytest
import tilelang
import tilelang.language as T

from helpers import ROW_COUNTS, make_tensor


def scale_rows(block_M, dtype="float16"):
    M = T.symbolic("M")
    x_shape = (M, 64)

    @T.prim_func
    def main(X: T.Tensor(x_shape, dtype), Y: T.Tensor(x_shape, dtype)):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            buf = T.alloc_shared((block_M, 64), dtype)
            T.copy(X[cid * block_M, 0], buf)
            T.copy(buf, Y[cid * block_M, 0])

    return main


@pytest.mark.parametrize("M", ROW_COUNTS)
def test_scale_rows(M):
    block_M = 32
    X = make_tensor((M, 64))
    Y = make_tensor((M, 64))
    program = scale_rows(block_M)
    kernel = tilelang.compile(program, target="npuir")
    kernel(X, Y)
"""


def test_a_symbolic_extent_names_the_imported_helper_that_builds_its_tensor():
    r = knobs.set_knob(
        ROWS_FROM_AN_IMPORTED_HELPER, Knob("block_M", "block_size", (16, 32)), 64, "block_size"
    )
    assert isinstance(r, Refusal), r
    assert "could not resolve its extent from this file" not in r.reason
    assert "`M` is a `T.symbolic` size the kernel takes from its tensor `X`" in r.reason
    assert "`X` set to `make_tensor((M, 64))` in test_scale_rows() (line 26)" in r.reason
    assert "imports from `helpers`" in r.reason
