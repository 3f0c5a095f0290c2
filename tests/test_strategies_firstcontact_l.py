"""heldout_l first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs
from bot.strategies.base import Refusal
from bot.strategies.planner import Planner
from bot.strategies.registry import STRATEGIES

PARSED_NOT_BUILT = """
import ast
import inspect
import textwrap

import tilelang.language as T

n = 4096


def staged_copy(block_M, num_steps=8):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // (block_M * num_steps)) as bx:
            buf = T.alloc_shared((block_M,), "float16")
            for k in T.Pipelined(num_steps, num_stages=2):
                T.copy(X[(bx * num_steps + k) * block_M], buf)
                T.copy(buf, Y[(bx * num_steps + k) * block_M])

    return main


tree = ast.parse(textwrap.dedent(inspect.getsource(staged_copy)))
print(len(tree.body))
"""


def _specs(src: str):
    op = OpConfig(project="t", name="k", dir=".", kernel_kind="vector")
    return Planner(op).specs(src, list(STRATEGIES))


def test_a_factory_only_read_by_inspect_getsource_is_never_built():
    specs, skipped = _specs(PARSED_NOT_BUILT)
    # the file only parses the factory's text: no depth or block move changes anything
    assert not [s for s in specs if s.kind in ("stages", "knob")], specs
    (why,) = [s for s in skipped if s.startswith("pipeline_depth: T.Pipelined at line 16")]
    assert "inspect.getsource" in why and "never builds" in why


def test_a_factory_the_file_calls_beside_reading_its_source_is_built():
    src = PARSED_NOT_BUILT.replace("print(len(tree.body))", "kernel = staged_copy(64)")
    specs, _ = _specs(src)
    assert any(s.kind == "stages" for s in specs)


ROW_PER_VECTOR_CORE = """
import tilelang
import tilelang.language as T


@tilelang.jit
def row_scale(width):
    n = T.symbolic("n")
    block_rows = 2
    CORES = 2
    blocks = tilelang.cdiv(n, block_rows)

    @T.prim_func
    def main(X: T.Tensor((n, width), "float"), Y: T.Tensor((n, width), "float")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            row = T.alloc_ub(width, "float")
            if cid * block_rows + vid * block_rows // CORES < n:
                T.copy(X[cid * block_rows + vid * block_rows // CORES, :], row)
                T.tile.mul(row, row, 2.0)
                T.copy(row, Y[cid * block_rows + vid * block_rows // CORES, :])

    return main
"""


def _space(src: str, name: str) -> list[int]:
    specs, _ = _specs(src)
    (spec,) = [s for s in specs if s.key == name]
    return sorted(spec.values)  # type: ignore[type-var]


def test_a_block_that_only_places_one_row_per_vector_core_is_pinned():
    assert _space(ROW_PER_VECTOR_CORE, "block_rows") == [2]
    r = knobs.set_knob(
        ROW_PER_VECTOR_CORE, Knob("block_rows", "block_size", (2, 4, 8)), 8, "block_size"
    )
    assert isinstance(r, Refusal) and "each vector core handles the one row" in r.reason


def test_a_block_that_sizes_the_rows_each_vector_core_loops_over_is_free():
    # the same position, but each core now walks its share of rows: another value still covers
    # every row
    src = ROW_PER_VECTOR_CORE.replace(
        "            if cid * block_rows + vid * block_rows // CORES < n:\n",
        "            for r in T.serial(block_rows // CORES):\n"
        "             if cid * block_rows + vid * block_rows // CORES + r < n:\n",
    ).replace("block_rows // CORES, :]", "block_rows // CORES + r, :]")
    assert 8 in _space(src, "block_rows")


FIXED_WINDOW = """
import tilelang
import tilelang.language as T


@tilelang.jit
def scores(rows, heads, head_dim):
    block_r = 64
    block_d = 64

    @T.prim_func
    def main(
        Q: T.Tensor((rows, heads * head_dim), "float16"),
        K: T.Tensor((rows, head_dim), "float16"),
        S: T.Tensor((heads, rows, rows), "float"),
    ):
        with T.Kernel(heads, is_npu=True) as (cid, vid):
            q = T.alloc_L1((block_r, block_d), "float16")
            k = T.alloc_L1((block_r, block_d), "float16")
            s = T.alloc_L0C((block_r, block_r), "float")
            for i in T.serial(rows // block_r):
                for j in T.serial(rows // block_r):
                    T.copy(Q[i * block_r, cid * head_dim], q)
                    T.copy(K[j * block_r, 0], k)
                    T.gemm_v0(q, k, s, transpose_B=True, init=True)
                    T.copy(s, S[cid, i * block_r, j * block_r])

    return main
"""


def test_a_block_that_only_sizes_a_window_read_from_a_fixed_origin_is_pinned():
    assert _space(FIXED_WINDOW, "block_d") == [64]
    r = knobs.set_knob(FIXED_WINDOW, Knob("block_d", "block_size", (32, 64, 128)), 32, "block_size")
    assert isinstance(r, Refusal) and "fills from a fixed origin of `Q`" in r.reason
    # the block the loops step by keeps its divisors
    assert 32 in _space(FIXED_WINDOW, "block_r")


def test_a_block_the_kernel_steps_by_is_not_a_fixed_window():
    src = FIXED_WINDOW.replace(
        "                    T.copy(Q[i * block_r, cid * head_dim], q)\n"
        "                    T.copy(K[j * block_r, 0], k)\n"
        "                    T.gemm_v0(q, k, s, transpose_B=True, init=True)\n",
        "                    for kk in T.serial(head_dim // block_d):\n"
        "                        T.copy(Q[i * block_r, cid * head_dim + kk * block_d], q)\n"
        "                        T.copy(K[j * block_r, kk * block_d], k)\n"
        "                        T.gemm_v0(q, k, s, transpose_B=True, init=(kk == 0))\n",
    )
    assert 32 in _space(src, "block_d")


WIDENED_ACCUMULATOR = """
import tilelang
import tilelang.language as T


@tilelang.jit
def row_exp(M, N, block_M, block_N, dtype="float16"):
    widen = dtype in ["float16", "bfloat16"]
    acc_dtype = "float32" if widen else dtype

    @T.prim_func
    def main(A: T.Tensor([M, N], dtype), B: T.Tensor([M, N], dtype)):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, vid):
            a = T.alloc_ub([block_M, block_N], dtype)
            acc = T.alloc_ub([block_M, block_N], acc_dtype)
            tmp = T.alloc_ub([block_M, block_N], acc_dtype)
            T.copy(A[cid * block_M : (cid + 1) * block_M, 0:block_N], a)
            T.tile.cast(acc, a, "CAST_NONE", block_M * block_N)
            T.tile.exp(tmp, acc)
            T.tile.cast(a, tmp, "CAST_RINT", block_M * block_N)
            T.copy(a, B[cid * block_M : (cid + 1) * block_M, 0:block_N])

    return main


def get_kernel(M, N, dtype):
    block_M = 64
    block_N = 256
    return row_exp(M, N, block_M, block_N, dtype=dtype)
"""


def test_a_dtype_a_switch_picks_the_same_way_for_every_input_counts_at_that_width():
    # fp16 in, fp32 work buffers: 128 x 256 takes 64 KiB + 2 x 128 KiB, past UB's 192 KiB
    # (counted at fp16, the narrower side of the switch, it would fit exactly)
    assert 128 not in _space(WIDENED_ACCUMULATOR, "block_M")
    r = knobs.set_knob(
        WIDENED_ACCUMULATOR, Knob("block_M", "block_size", (64, 128)), 128, "block_size"
    )
    assert isinstance(r, Refusal) and "327680 bytes" in r.reason


def test_a_switch_the_inputs_decide_both_ways_still_counts_the_narrower_side():
    src = WIDENED_ACCUMULATOR.replace('dtype="float16"', "dtype=None").replace(
        "dtype=dtype)", 'dtype="float16" if N > 4096 else "float32")'
    )
    # dtype "float16" or "float32": the switch goes both ways, so its buffers count at the
    # narrower side (a lower bound: a refusal never rests on a guess)
    assert 128 in _space(src, "block_M")
