"""A buffer whose shape mixes the knob with a size the file never fixes (`block_Q * heads`,
heads read from a tensor at run time) still takes at least the knob's part of it: unknown
factors count as 1 (a buffer has no empty dims), `max(block, dim)` as block, a local as the
expression it is computed from, so an overflow shows even without the open size
(bot/strategies/capacity.py)."""

from __future__ import annotations

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# scores of block_Q query rows x heads against block_N keys, scaled and summed per row on
# the vector cores; heads comes from the query tensor's shape at run time
SCORES = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def row_scores(heads, block_Q=16, block_N=64):
    rows = T.symbolic("rows")
    width = {WIDTH}

    @T.prim_func
    def main(S: T.Tensor((rows * heads, 4096), "float"), O: T.Tensor((rows, 4096), "float")):
        with T.Kernel(T.ceildiv(rows, block_Q), is_npu=True) as (cid, _):
            acc = T.alloc_ub((block_Q * heads, width), "float")
            out = T.alloc_ub((block_Q, width), "float")
            for k in T.serial(4096 // block_N):
                T.copy(S[cid * block_Q * heads, k * block_N], acc)
                for i in T.serial(block_Q):
                    T.reduce_sum(acc[i * heads : (i + 1) * heads, :], out[i : i + 1, :], dim=0)
                T.copy(out, O[cid * block_Q, k * block_N])

    return main


def run(q):
    rows, heads, _ = q.shape
    return row_scores(heads, block_Q=16, block_N=64)
"""


def test_an_open_factor_counts_as_one_and_the_known_part_still_overflows():
    legal, refused = knobs.legal_values(SCORES.replace("{WIDTH}", "block_N"), "block_N", BS)
    # acc is at least 16 x 2048 floats (128 KiB) and out 16 x 2048 (128 KiB): over 192 KiB UB
    assert 2048 not in legal and 1024 in legal
    reason = dict(refused)[2048]
    assert "UB buffers" in reason and "at least 262144 bytes" in reason
    assert "acc (line 13, unknown sizes as 1)" in reason


def test_the_larger_of_the_knob_and_an_open_size_is_at_least_the_knob():
    src = SCORES.replace("{WIDTH}", "max(block_N, heads)")
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert 2048 not in legal and "at least" in dict(refused)[2048]


def test_a_buffer_with_nothing_known_but_its_dtype_is_left_out():
    src = SCORES.replace("{WIDTH}", "block_N").replace(
        'acc = T.alloc_ub((block_Q * heads, width), "float")',
        'acc = T.alloc_ub((heads, heads), "float")',
    )
    _, refused = knobs.legal_values(src, "block_N", BS)
    assert "acc (line" not in dict(refused).get(2048, "")
