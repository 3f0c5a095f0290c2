"""A tail a kernel clips is handled only when its padded elements never reach a reduction
unmasked (bot/strategies/padflow.py), only when the clip is at the extent the tiles walk,
and an extent the file pads to whole blocks (bot/strategies/roundup.py) or runs with per
call (bot/strategies/callsizes.py) is read as such."""

from __future__ import annotations

import pytest
from conftest import upstream_kernel

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# one row of scores per core, walked in block_N tiles of a row of N=1000; the tile is
# loaded through a slice the compiler clips at the row's end. {LOAD} and {MASK} vary.
ROW_MAX = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def row_max(rows, N, block_N=8):
    tiles = T.ceildiv(N, block_N)

    @T.prim_func
    def main(S: T.Tensor((rows, N), "float"), O: T.Tensor((rows, 1), "float")):
        with T.Kernel(rows, is_npu=True) as (r, _):
            buf = T.alloc_ub((1, block_N), "float")
            part = T.alloc_ub((1, 1), "float")
            best = T.alloc_ub((1, 1), "float")
            T.tile.fill(best, -T.infinity("float"))
            for t in T.serial(tiles):
                {LOAD}
{MASK}
                T.reduce_max(buf, part, dim=-1)
                T.tile.max(best, best, part)
            T.copy(best, O[r : r + 1, 0:1])

    return main


kernel = row_max(16, 1000)
"""
PLAIN = "T.copy(S[r : r + 1, t * block_N : (t + 1) * block_N], buf)"
NEG_INF_PAD = (
    'T.copy(S[r : r + 1, t * block_N : (t + 1) * block_N], buf, pad_value=-T.infinity("float"))'
)
IF_THEN_ELSE = """\
                for j in T.Parallel(block_N):
                    buf[0, j] = T.if_then_else(t * block_N + j < N, buf[0, j], -T.infinity("float"))
"""

IF_VALID_LANE = """\
                valid = N - t * block_N
                for j in T.Parallel(block_N):
                    buf[0, j] = T.if_then_else(j < valid, buf[0, j], -T.infinity("float"))
"""
PAST_END = """\
                for j in T.Parallel(block_N):
                    if t * block_N + j >= N:
                        buf[0, j] = -T.infinity("float")
"""


def _row_max(load: str, mask: str = "") -> str:
    return ROW_MAX.replace("{LOAD}", load).replace("{MASK}", mask)


def test_padded_elements_in_an_unmasked_max_need_full_tiles():
    src = _row_max(PLAIN)
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert legal == (8,)  # 1000 = 8 * 125: the only value of BS that divides it
    reason = dict(refused)[64]
    assert "does not divide 1000" in reason
    assert "would enter the max `T.reduce_max(buf, part, dim=-1)` at line 19 unmasked" in reason
    assert "clipped at line 17" in reason and "needs -inf" in reason


@pytest.mark.parametrize(
    "load, mask",
    [(NEG_INF_PAD, ""), (PLAIN, IF_THEN_ELSE), (PLAIN, IF_VALID_LANE), (PLAIN, PAST_END)],
    ids=["pad_value=-inf", "if_then_else mask", "lane below a valid length", "if past the end"],
)
def test_a_neutral_pad_or_a_mask_handles_the_tail(load, mask):
    legal, refused = knobs.legal_values(_row_max(load, mask), "block_N", BS)
    assert legal == (8, 16, 32, 64, 128, 256, 512), refused  # a tile may not exceed N=1000
    assert all("exceeds the extent 1000" in r for _, r in refused)


# a sum of exp(x - max): the -inf pad becomes exp(-inf) = 0 (neutral for the sum); a pad of 0
# becomes exp(0) = 1, which the sum counts
SOFTMAX_SUM = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def row_sum(rows, N, block_N=8):
    @T.prim_func
    def main(S: T.Tensor((rows, N), "float"), M: T.Tensor((rows, 1), "float"),
             O: T.Tensor((rows, 1), "float")):
        with T.Kernel(rows, is_npu=True) as (r, _):
            buf = T.alloc_ub((1, block_N), "float")
            part = T.alloc_ub((1, 1), "float")
            total = T.alloc_ub((1, 1), "float")
            m = T.alloc_ub((1, 1), "float")
            T.copy(M[r : r + 1, 0:1], m)
            T.tile.fill(total, 0.0)
            for t in T.serial(T.ceildiv(N, block_N)):
                T.copy(S[r : r + 1, t * block_N : (t + 1) * block_N], buf, pad_value=PAD)
                T.tile.sub(buf, buf, m[0, 0])
                T.tile.exp(buf, buf)
                T.reduce_sum(buf, part, dim=-1)
                T.tile.add(total, total, part)
            T.copy(total, O[r : r + 1, 0:1])

    return main


kernel = row_sum(16, 1000)
"""


def test_the_pad_value_is_followed_through_element_wise_ops():
    ok = SOFTMAX_SUM.replace("PAD", '-T.infinity("float")')
    legal, _ = knobs.legal_values(ok, "block_N", BS)
    assert 64 in legal
    bad = SOFTMAX_SUM.replace("PAD", "0.0")
    legal, refused = knobs.legal_values(bad, "block_N", BS)
    assert legal == (8,)
    # 0 - max is unknown data, which the sum counts
    assert (
        "(unknown data) would enter the sum `T.reduce_sum(buf, part, dim=-1)`" in dict(refused)[64]
    )


# P @ V over the key axis: the clipped V rows are stale data and P's padded columns were never
# masked, so the accumulation sums garbage; a zero pad on the K axis of P makes it neutral
PV = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def pv(L, D, block_K=16):
    @T.prim_func
    def main(P: T.Tensor((64, L), "float16"), V: T.Tensor((L, D), "float16"),
             O: T.Tensor((64, D), "float")):
        with T.Kernel(1, is_npu=True) as (c, _):
            p_l1 = T.alloc_L1((64, block_K), "float16")
            v_l1 = T.alloc_L1((block_K, D), "float16")
            acc = T.alloc_L0C((64, D), "float")
            for k in T.serial(T.ceildiv(L, block_K)):
                T.copy(P[0:64, k * block_K : (k + 1) * block_K], p_l1PPAD)
                T.copy(V[k * block_K : (k + 1) * block_K, 0:D], v_l1)
                T.gemm_v0(p_l1, v_l1, acc, init=(k == 0))
            T.copy(acc, O[0:64, 0:D])

    return main


kernel = pv(2000, 64)
"""


def test_padded_elements_on_a_gemm_k_axis_need_a_zero_pad():
    legal, refused = knobs.legal_values(PV.replace("PPAD", ""), "block_K", BS)
    assert legal == (16,)  # 2000 = 16 * 125; 8 is a part cube fractal (fractal.py)
    assert "fractal" in dict(refused)[8]
    reason = dict(refused)[32]
    assert "the gemm accumulation `T.gemm_v0(p_l1, v_l1, acc, init=(k == 0))`" in reason
    legal, _ = knobs.legal_values(PV.replace("PPAD", ", pad_value=0.0"), "block_K", BS)
    assert 32 in legal and 1024 in legal


# rows of several groups stacked in one tensor; each group is walked in block_M tiles, and a
# slice clips only at the tensor's end: a partial tile of one group reads the next group's rows
GROUPS = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def stacked(sizes, D, block_M):
    total = sum(sizes)
    tiles = sum((n + block_M - 1) // block_M for n in sizes)

    @T.prim_func
    def main(X: T.Tensor((total, D), "float16"), Starts: T.Tensor((tiles,), "int32"),
             Y: T.Tensor((total, D), "float16")):
        with T.Kernel(tiles, is_npu=True) as (c, _):
            buf = T.alloc_ub((block_M, D), "float16")
            start = Starts[c]
            T.copy(X[start : start + block_M, 0:D], buf)
            T.tile.mul(buf, buf, 2)
            T.copy(buf, Y[start : start + block_M, 0:D])

    return main


if __name__ == "__main__":
    import sys

    sizes = [int(s) for s in sys.argv[1].split(",")]
    kernel = stacked(tuple(sizes), 128, 32)
"""


def test_a_slice_clipped_at_another_extent_does_not_handle_a_group_tail():
    legal, refused = knobs.legal_values(GROUPS, "block_M", BS)
    assert legal == (8, 16, 32)  # the group sizes come from a runtime string
    reason = dict(refused)[64]
    assert "`(n + block_M - 1) // block_M`" in reason and "could not resolve its extent" in reason
    assert "clip it at `total`, not at `n`" in reason
    # the same tiles over the whole tensor: the clip is at the extent they walk
    whole = GROUPS.replace("sum((n + block_M - 1) // block_M for n in sizes)", "0").replace(
        "tiles = 0", "tiles = (total + block_M - 1) // block_M"
    )
    legal, _ = knobs.legal_values(whole, "block_M", BS)
    assert 64 in legal and 512 in legal  # 1024 would overflow UB


# the caller pads M up to whole blocks before it builds the kernel
PADDED = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scale(M, block_M=64):
    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (c, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[c * block_M], buf)
            T.tile.mul(buf, buf, 2)
            T.copy(buf, A[c * block_M])

    return main


def run(x):
    M = x.shape[0]
    block_M = 64
    M_pad = ROUND
    return scale(M_pad, block_M)
"""


@pytest.mark.parametrize(
    "rounded",
    ["((M + block_M - 1) // block_M) * block_M", "T.ceildiv(M, block_M) * block_M"],
)
def test_an_extent_the_caller_pads_to_whole_blocks_takes_any_block(rounded):
    legal, refused = knobs.legal_values(PADDED.replace("ROUND", rounded), "block_M", BS)
    assert legal == BS, refused


def test_an_extent_padded_with_another_literal_is_still_unknown():
    legal, refused = knobs.legal_values(
        PADDED.replace("ROUND", "(M + 63) // 64 * 64"), "block_M", BS
    )
    assert legal == (8, 16, 32, 64)
    assert "only divisors of the current 64 are planned" in dict(refused)[128]


# a split-K gemm run from a helper: the sizes are the pairs the file runs, not their cross product
SPLIT = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def chunks(K, split_k, block_K):
    chunk = K // split_k

    @T.prim_func
    def main(A: T.Tensor((K,), "float16")):
        with T.Kernel(split_k, is_npu=True) as (c, _):
            buf = T.alloc_ub((block_K,), "float16")
            for k in T.serial(T.ceildiv(chunk, block_K)):
                T.copy(A[c * chunk + k * block_K], buf)

    return main


def run(K, split_k):
    block_K = 32
    return chunks(K, split_k, block_K)


def main():
    run(128, 2)
    run(1024, 4)
"""


def test_sizes_bound_together_by_one_call_are_checked_together():
    legal, refused = knobs.legal_values(SPLIT, "block_K", BS)
    assert legal == (8, 16, 32, 64)  # chunks of 64 and 256 (never 128 // 4 = 32)
    reason = dict(refused)[128]
    assert "does not divide 64" in reason and "K=128" in reason and "split_k=2" in reason


# ---- the upstream kernels that showed each case (skip when the corpus is absent) ----


def test_upstream_flash_attention_padded_keys_enter_the_row_max():
    src = upstream_kernel("aog_flash_attention.py")
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert legal == (16, 32, 64)  # 8: a part cube fractal (fractal.py)
    reason = dict(refused)[128]
    assert "would enter the max `T.reduce_max(acc_s_ub, m_i, tmp_ub, dim=-1)` at line 105" in reason


def test_upstream_gqa_padded_keys_enter_the_row_max():
    src = upstream_kernel("aog_flash_attention_gqa.py")
    legal, refused = knobs.legal_values(src, "block_kv_seq", BS)
    assert legal == (16, 32, 64)  # 8: a part cube fractal (fractal.py)
    assert "T.reduce_max(acc_s_ub, m_i, tmp_ub, dim=-1)` at line 129" in dict(refused)[128]


def test_upstream_grouped_gemm_row_tail_is_per_group():
    src = upstream_kernel("pto_grouped_gemm_fwd.py")
    legal, refused = knobs.legal_values(src, "block_M", BS)
    assert legal == (16, 32, 64)  # 8: a part cube fractal (fractal.py)
    reason = dict(refused)[128]
    assert "(size + block_M - 1) // block_M" in reason
    assert "clip it at `batch_sum`, not at `size`" in reason
    legal, _ = knobs.legal_values(src, "block_K", BS)
    assert 1024 in legal  # K = 8192 through two callers and the argparse default


def test_upstream_convolution_pads_to_whole_blocks():
    src = upstream_kernel("pto_convolution.py")
    for name in ("block_M", "block_N", "block_K"):
        legal, refused = knobs.legal_values(src, name, BS)
        assert 256 in legal, (name, refused)


def test_upstream_splitk_runs_its_own_chunk_sizes():
    src = upstream_kernel("pto_gemm_splitk.py")
    legal, refused = knobs.legal_values(src, "block_K", BS)
    assert legal == (16, 32, 64)  # 8: a part cube fractal (fractal.py)
    assert "does not divide 64" in dict(refused)[128]


def test_a_mask_with_a_value_the_reduction_counts_does_not_handle_the_tail():
    zero_mask = IF_THEN_ELSE.replace('-T.infinity("float")', "0.0")
    legal, refused = knobs.legal_values(_row_max(PLAIN, zero_mask), "block_N", BS)
    assert legal == (8,)
    assert "(0) would enter the max" in dict(refused)[64]
