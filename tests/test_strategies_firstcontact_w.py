"""Classes of failure the first contact with heldout_w found (tests/data/upstream_kernels/
README.md), each on a kernel written here:

- capacity counts a buffer at the largest dtype the file runs it with, where every dtype
  runs (parametrize entries, call sites), and at the smallest where only one of two sides
  of `a if c else b` runs (capacity.py, strings.py `Reading`); the row rule still counts the
  smallest;
- one AscendC instruction whose counts (repeat, mask) do not follow the knob, given a buffer
  that does, keeps only the current value even where the counts are not one whole buffer
  (instrcount.py), and AscendC intrinsics called under their camelCase name count as such;
- a tensor the host allocates at module level with a size written for the current value,
  passed to a kernel built at module level whose declared shape is a name the factory binds,
  past the parameters `out_idx` makes, holds the knob to that size (callerbuffers.py)."""

from __future__ import annotations

from bot.strategies import inventory

# a (block_M, block_N) tile and K of them: 3 x 64 x 512 x 4 bytes = 384 KiB at fp32,
# exactly 192 KiB at fp16
STACKED = """
import pytest
import tilelang
import tilelang.language as T

DTYPES = ["float16", "float32"]


@tilelang.jit(target="npuir", out_idx=[2])
def stacked(M, N, K, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((K, M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            mid = cid // T.ceildiv(N, block_N)
            nid = cid % T.ceildiv(N, block_N)
            a = T.alloc_ub((block_M, block_N), dtype)
            b = T.alloc_ub((K, block_M, block_N), dtype)
            T.copy(A[mid * block_M, nid * block_N], a)
            T.copy(B[0, mid * block_M, nid * block_N], b)
            for i in T.serial(K):
                T.vadd(a, b[i, :, :], a)
            T.copy(a, C[mid * block_M, nid * block_N])

    return main


@pytest.mark.parametrize("dtype", DTYPES)
def test_stacked(dtype):
    M, N, K, BLOCK_M, BLOCK_N = 512, 512, 2, 64, 64
    stacked(M, N, K, BLOCK_M, BLOCK_N, dtype)
"""

REDUCE = """
import tilelang
import tilelang.language as T

M = 2
N = 512
block_M = 2
block_N = 128
groups = 16
mask = 64
repeat = 1


@tilelang.jit(out_idx=[-1])
def reduce_max(M, N, block_M, block_N, repeat, mask, groups, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N // groups), dtype)):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            by = cid % (N // block_N)
            a_ub = T.alloc_ub((block_M // 2, block_N), dtype)
            b_ub = T.alloc_ub((block_M // 2, block_N // groups), dtype)
            with T.Scope("V"):
                T.copy(A[vid, by * block_N], a_ub)
                T.blockReduceMax(b_ub, a_ub, repeat, mask, 1, 1, 8)
                T.copy(b_ub, B[vid, by * block_N // groups])

    return main


func = reduce_max(M, N, block_M, block_N, repeat, mask, groups)
"""

WORKSPACE = """
import torch
import tilelang
import tilelang.language as T

B, S = 2, 128


@tilelang.jit(out_idx=[1], target="pto")
def gather(rows, topk=2048, block_I=64):
    BI = block_I
    NI = topk // BI
    ws_shape = [rows, BI]

    @T.prim_func
    def main(
        X: T.Tensor((rows, topk), "float16"),
        Out: T.Tensor((rows, topk), "float16"),
        ws: T.Tensor(ws_shape, "float16"),
    ):
        with T.Kernel(rows, is_npu=True) as (cid, vid):
            tile = T.alloc_ub([1, BI], "float16")
            for k in T.serial(NI):
                T.copy(X[cid, k * BI], tile)
                T.copy(tile, ws[cid, 0])
                T.copy(ws[cid, 0], tile)
                T.copy(tile, Out[cid, k * BI])

    return main


x = torch.randn((B * S, 2048), dtype=torch.float16)
ws = torch.zeros((B * S, 64), dtype=torch.float16)
func = gather(rows=B * S)
out = func(x, ws)
"""


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_capacity_counts_the_largest_dtype_every_parametrize_entry_runs():
    ok, refused = _knob(STACKED, "block_M").legal((128, 256, 512))
    # 3 x 512 x 64 elements: 192 KiB at fp16 (fits), 384 KiB at fp32, which the file also runs
    assert ok == (128, 256)
    why = dict(refused)[512]
    assert "UB" in why and "393216 bytes" in why


def test_the_row_rule_still_counts_the_smallest_dtype():
    ok, refused = _knob(STACKED, "block_N").legal((8, 16))
    # 8 fp16 values are a 16-byte row (8 fp32 values would be a whole 32-byte block)
    assert ok == (16,)
    assert "16 bytes" in dict(refused)[8]


def test_one_side_of_a_conditional_dtype_is_not_held_to_the_larger():
    either = STACKED.replace(
        "stacked(M, N, K, BLOCK_M, BLOCK_N, dtype)",
        'stacked(M, N, K, BLOCK_M, BLOCK_N, "float16" if dtype == "float16" else "bfloat16")',
    )
    ok, refused = _knob(either, "block_M").legal((256, 512))
    assert ok == (256, 512), refused


def test_an_instruction_with_fixed_counts_over_a_knob_sized_tile_keeps_the_current_value():
    ok, refused = _knob(REDUCE, "block_N").legal((64, 128, 256))
    assert ok == (128,)
    why = dict(refused)[256]
    assert "T.blockReduceMax" in why and "repeat = 1, mask = 64" in why
    assert "16 elements instead of 8" in why


def test_counts_that_follow_the_knob_make_no_rule():
    follows = REDUCE.replace(
        "T.blockReduceMax(b_ub, a_ub, repeat, mask, 1, 1, 8)",
        "T.blockReduceMax(b_ub, a_ub, block_N // 128, mask, 1, 1, 8)",
    )
    ok, _ = _knob(follows, "block_N").legal((128, 256))
    assert ok == (128, 256)


def test_a_module_level_host_tensor_written_for_the_current_block_caps_it():
    ok, refused = _knob(WORKSPACE, "block_I").legal((32, 64, 128))
    assert 128 not in ok and 64 in ok
    why = dict(refused)[128]
    assert "`ws`" in why and "`64` = 64 (line" in why and "past the tensor" in why


def test_a_host_tensor_that_follows_the_block_makes_no_cap():
    follows = WORKSPACE.replace(
        "ws = torch.zeros((B * S, 64), dtype=torch.float16)",
        "ws = torch.zeros((B * S, 4096), dtype=torch.float16)",
    )
    ok, _ = _knob(follows, "block_I").legal((64, 128))
    assert ok == (64, 128)
