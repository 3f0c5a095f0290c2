"""heldout_q first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant


def _move(src: str, name: str, value: int) -> Variant | Refusal:
    return knobs.set_knob(src, Knob(name, "block_size", (8, 16, 32, 64, 128, 256, 512)), value)


# One AscendC whole-reduce instruction per tile whose element count (mask x repeat) is fixed
# by module constants, beside a row buffer the knob sizes: the call covers 64 x 4 = 256
# values, all of `row` only while block_C is 256.
FIXED_REDUCE = """
import tilelang
import tilelang.language as T
import torch

ROWS = 16
COLS = 1024
block_R = 8
block_C = 256
mask = 64
repeat = 4


@tilelang.jit(out_idx=[-1])
def row_max(ROWS, COLS, block_R, block_C, mask, repeat):
    r_num = ROWS // block_R
    c_num = COLS // block_C

    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS), "float32"), Y: T.Tensor((ROWS, COLS // mask), "float32")):
        with T.Kernel(r_num * c_num, is_npu=True) as (cid, vid):
            br = cid // c_num
            bc = cid % c_num
            for i in T.serial(block_R // 2):
                row = T.alloc_ub((1, block_C), "float32")
                out = T.alloc_ub((1, block_C // mask), "float32")
                r = br * block_R + vid * (block_R // 2) + i
                T.copy(X[r, bc * block_C], row)
                T.tile.wholereducemax(out, row, mask, repeat, 1, 1, 8)
                T.copy(out, Y[r, bc * block_C // mask])

    return main


kernel = row_max(ROWS, COLS, block_R, block_C, mask, repeat)
x = torch.randn(ROWS, COLS)
y = kernel(x)
torch.testing.assert_close(y, x.reshape(ROWS, -1, mask).amax(-1))
"""


def test_a_fixed_instruction_count_beside_a_knob_sized_buffer_pins_the_knob():
    for value in (128, 512):
        r = _move(FIXED_REDUCE, "block_C", value)
        assert isinstance(r, Refusal), value
        assert "T.tile.wholereducemax(out, row, mask, repeat, 1, 1, 8)" in r.reason
        assert "mask = 64 x repeat = 4 = 256" in r.reason and "`row` (256 elements)" in r.reason
    # the rows the other knob walks are not what the instruction covers: block_R moves freely
    assert isinstance(_move(FIXED_REDUCE, "block_R", 4), Variant)
    # a repeat that follows the knob covers the whole buffer at every value: no pin
    follows = FIXED_REDUCE.replace(
        "T.tile.wholereducemax(out, row, mask, repeat, 1, 1, 8)",
        "T.tile.wholereducemax(out, row, mask, block_C // mask, 1, 1, 8)",
    )
    assert isinstance(_move(follows, "block_C", 128), Variant)
    assert isinstance(_move(follows, "block_C", 512), Variant)


# An element count written to follow the knob (the corpus's `T.tile.cast(dst, src, mode,
# sub_block_M * block_N)`) is no fixed count, and a fixed count that is not a whole buffer's
# size (a cast of the first `width` values of a larger buffer) says nothing about the knob.
CAST_COUNTS = """
import tilelang
import tilelang.language as T
import torch

M = 256
N = 512
block_M = 64
block_N = 128
width = 32


@tilelang.jit(out_idx=[-1])
def to_float(M, N, block_M, block_N, width):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            bx = cid // (N // block_N)
            by = cid % (N // block_N)
            half = block_M // 2
            a_ub = T.alloc_ub((half, block_N), "float16")
            b_ub = T.alloc_ub((half, block_N), "float32")
            head = T.alloc_ub((half, block_N), "float32")
            T.copy(A[bx * block_M + vid * half, by * block_N], a_ub)
            T.tile.cast(b_ub, a_ub, "CAST_NONE", half * block_N)
            T.tile.cast(head, a_ub, mode="CAST_NONE", count=width)
            T.copy(b_ub, B[bx * block_M + vid * half, by * block_N])

    return main


kernel = to_float(M, N, block_M, block_N, width)
a = torch.randn(M, N).half()
torch.testing.assert_close(kernel(a), a.float())
"""


def test_a_count_that_follows_the_knob_or_covers_part_of_a_buffer_pins_nothing():
    for name, value in (("block_N", 64), ("block_N", 256), ("block_M", 32), ("block_M", 128)):
        assert isinstance(_move(CAST_COUNTS, name, value), Variant), (name, value)


# A repeat count the kernel computes from the knob and passes by name: AscendC takes it as a
# uint8, so block_R = 256 repeats cannot be issued, 128 can.
GROWING_REPEAT = (
    FIXED_REDUCE.replace("block_R = 8", "block_R = 128")
    .replace(
        "T.tile.wholereducemax(out, row, mask, repeat, 1, 1, 8)",
        "T.tile.wholereducemax(out, row, mask, repeat_times, 1, 1, 8)",
    )
    .replace(
        'row = T.alloc_ub((1, block_C), "float32")',
        'row = T.alloc_ub((1, block_C), "float32")\n                repeat_times = block_R',
    )
    .replace("ROWS = 16", "ROWS = 512")
)


def test_a_repeat_count_past_eight_bits_is_refused():
    r = _move(GROWING_REPEAT, "block_R", 256)
    assert isinstance(r, Refusal)
    assert "repeat count repeat_times = 256" in r.reason and "8-bit limit of 255" in r.reason
    assert isinstance(_move(GROWING_REPEAT, "block_R", 64), Variant)


# T.tile.sort32 sorts 32-value groups; TileLang-Ascend issues one AscendC Sort32 with
# prod(src.shape) // 32 repeats, unsplit. Each of two vector cores sorts (block_M, block_N / 2).
SORT_GROUPS = """
import tilelang
import tilelang.language as T
import torch

M = 512
N = 2048
block_M = 32
block_N = 256


@tilelang.jit(out_idx=[-1])
def sort_groups(M, N, block_M, block_N):
    n_num = N // block_N

    @T.prim_func
    def main(
        V: T.Tensor((M, N), "float"),
        I: T.Tensor((M, N), "uint32"),
        O: T.Tensor((M, 2 * N), "float"),
    ):
        with T.Kernel((M // block_M) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            col = by * block_N + vid * (block_N // 2)
            v_ub = T.alloc_ub((block_M, block_N // 2), "float")
            i_ub = T.alloc_ub((block_M, block_N // 2), "uint32")
            o_ub = T.alloc_ub((block_M, block_N), "float")
            T.copy(V[bx * block_M, col], v_ub)
            T.copy(I[bx * block_M, col], i_ub)
            T.tile.sort32(o_ub, v_ub, i_ub)
            T.copy(o_ub, O[bx * block_M, 2 * col])

    return main


kernel = sort_groups(M, N, block_M, block_N)
v = torch.randn(M, N)
out = kernel(v, torch.zeros(M, N, dtype=torch.uint32))
torch.testing.assert_close(out[:, ::2], v.reshape(M, -1, 32).sort(-1, descending=True)[0].reshape(M, N))
"""


def test_sort32_repeats_stay_within_eight_bits_and_groups_within_rows():
    # 32 x 128 values = 128 repeats now; 64 x 128 = 256 repeats
    r = _move(SORT_GROUPS, "block_M", 64)
    assert isinstance(r, Refusal)
    assert "T.tile.sort32(o_ub, v_ub, i_ub)" in r.reason and "256 repeats" in r.reason
    r = _move(SORT_GROUPS, "block_N", 512)
    assert isinstance(r, Refusal) and "256 repeats" in r.reason
    assert isinstance(_move(SORT_GROUPS, "block_M", 16), Variant)
    # a vector core's row of 16 or 8 values splits no 32-value group evenly
    for value in (32, 16):
        r = _move(SORT_GROUPS, "block_N", value)
        assert isinstance(r, Refusal), value
        assert "whole number of 32-value groups" in r.reason and "`v_ub`" in r.reason
    assert isinstance(_move(SORT_GROUPS, "block_N", 128), Variant)  # rows of 64: two groups
    assert isinstance(_move(SORT_GROUPS, "block_N", 64), Variant)  # rows of 32: one group


def test_sort32_on_the_pto_target_takes_whole_tiles_and_no_repeat_count():
    pto = SORT_GROUPS.replace(
        "@tilelang.jit(out_idx=[-1])", '@tilelang.jit(out_idx=[-1], target="pto")'
    )
    assert isinstance(_move(pto, "block_M", 64), Variant)
    # the groups are still 32 values: rows of 16 are refused on either target
    assert isinstance(_move(pto, "block_N", 32), Refusal)
