"""Issue 13, "every refusal with a true reason": three general rules, each on a small kernel
written for the test.

1. padflow.py reads a gemm's transpose flags where each spelling's signature puts them (by
   keyword, or by position: tilelang-ascend `gemm(A, B, C, transpose_A, transpose_B)`,
   TileLang-NPUIR `npuir_dot` / `gemm(A, B, C, size, initC, a_transpose, b_transpose)`).
2. copyfit.py, slicefill.py and liveness.py read a buffer as the statement naming it sees it:
   a buffer of the same name in another kernel (or a helper) is not that buffer.
3. An extent the host pads up to a multiple of the knob itself demands no divisibility.
"""

from __future__ import annotations

import pytest

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# P is stored transposed (L x 64) and walked in block_K rows the compiler clips at L; the gemm
# sums the rows of each tile (B: ones, no padding). The padded rows of p_l1 are the K axis of
# the gemm because A is transposed, which GEMM says by keyword or by position.
PT_V = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def pv(L, D, block_K=16):
    @T.prim_func
    def main(P: T.Tensor((L, 64), "float16"), O: T.Tensor((64, D), "float")):
        with T.Kernel(1, is_npu=True) as (c, _):
            p_l1 = T.alloc_L1((block_K, 64), "float16")
            ones = T.alloc_L1((block_K, D), "float16")
            acc = T.alloc_L0C((64, D), "float")
            for k in T.serial(T.ceildiv(L, block_K)):
                T.copy(P[k * block_K : (k + 1) * block_K, 0:64], p_l1)
                T.tile.fill(ones, 1.0)
                GEMM
            T.copy(acc, O[0:64, 0:D])

    return main


kernel = pv(2000, 64)
"""


@pytest.mark.parametrize(
    "gemm",
    [
        "T.gemm_v0(p_l1, ones, acc, True, False, init=(k == 0))",  # tilelang-ascend gemm_v0
        "T.gemm(p_l1, ones, acc, True, False)",  # tilelang-ascend gemm
        "T.gemm(p_l1, ones, acc, [64, block_K, D], k == 0, True, False)",  # NPUIR gemm
        "T.npuir_dot(p_l1, ones, acc, [64, block_K, D], k == 0, True, False)",
        "T.gemm(p_l1, ones, acc, transpose_A=True)",  # by keyword, as before
    ],
)
def test_a_positional_transpose_puts_the_padded_rows_on_k(gemm):
    legal, refused = knobs.legal_values(PT_V.replace("GEMM", gemm), "block_K", BS)
    assert set(legal) <= {8, 16}, (
        refused
    )  # 2000 = 16 * 125 (8: a part fractal where GEMMS has the call)
    assert "the gemm accumulation" in dict(refused)[32]


def test_a_transpose_flag_that_is_not_a_literal_may_put_the_padding_on_k():
    src = PT_V.replace("GEMM", "T.gemm_v0(p_l1, ones, acc, flip, False)").replace(
        "def pv(L, D, block_K=16):", "def pv(L, D, block_K=16, flip=True):"
    )
    legal, refused = knobs.legal_values(src, "block_K", BS)
    assert 32 not in legal
    assert "is not a literal" in dict(refused)[32]


# 2. a buffer is the one its statement sees: never a same-named buffer of another kernel

# main copies block_n rows into `buf` of block_m rows; `other`, another kernel of the factory,
# allocates its own `buf` of 256 rows
COPY_FIT = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, block_m=64, block_n=32):
    @T.prim_func
    def main(X: T.Tensor((M, 64), "float16"), Y: T.Tensor((M, 64), "float16")):
        with T.Kernel(M // block_n, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_m, 64), "float16")
            T.copy(X[cid * block_n, 0], buf, size=[block_n, 64])
            T.copy(buf, Y[cid * block_n, 0], size=[block_n, 64])

    @T.prim_func
    def other(X: T.Tensor((M, 64), "float16"), Y: T.Tensor((M, 64), "float16")):
        with T.Kernel(M // 256, is_npu=True) as (cid, _):
            buf = T.alloc_ub((256, 64), "float16")
            T.copy(X[cid * 256, 0], buf)
            T.copy(buf, Y[cid * 256, 0])

    return main, other


kernel = rows(4096)
"""


def test_an_explicit_size_copy_fits_the_buffer_of_its_own_kernel():
    legal, refused = knobs.legal_values(COPY_FIT, "block_n", BS)
    assert legal == (8, 16, 32, 64), refused
    assert "into `buf` (line 11), which holds 64" in dict(refused)[128]


def test_a_larger_buffer_of_the_same_name_elsewhere_does_not_refuse():
    # the other way round: main's buffer holds 256 rows, other's 64
    src = COPY_FIT.replace("(block_m, 64)", "(256, 64)", 1).replace(
        'T.alloc_ub((256, 64), "float16")\n            T.copy(X[cid * 256',
        'T.alloc_ub((64, 64), "float16")\n            T.copy(X[cid * 256',
    )
    legal, refused = knobs.legal_values(src, "block_n", BS)
    assert legal == (8, 16, 32, 64, 128, 256), refused


# main fills the D columns of `k_l1` from a slice and multiplies the whole buffer; `other`
# allocates a `k_l1` of 64 columns whatever BLOCK_K is (`q_l1` is cleared: zeros add nothing)
SLICE_FILL = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scores(L, D, BLOCK_N=64, BLOCK_K=64):
    @T.prim_func
    def main(Q: T.Tensor((64, D), "float16"), KEY: T.Tensor((L, D), "float16"),
             S: T.Tensor((64, L), "float")):
        with T.Kernel(L // BLOCK_N, is_npu=True) as (n, _):
            q_l1 = T.alloc_L1((64, BLOCK_K), "float16")
            k_l1 = T.alloc_L1((BLOCK_N, BLOCK_K), "float16")
            acc = T.alloc_L0C((64, BLOCK_N), "float")
            T.clear(q_l1)
            T.copy(Q[0:64, 0:D], q_l1)
            T.copy(KEY[n * BLOCK_N : (n + 1) * BLOCK_N, 0:D], k_l1)
            T.gemm_v0(q_l1, k_l1, acc, transpose_B=True, init=True)
            T.copy(acc, S[0:64, n * BLOCK_N : (n + 1) * BLOCK_N])

    @T.prim_func
    def other(KEY: T.Tensor((L, D), "float16"), OUT: T.Tensor((L, D), "float16")):
        with T.Kernel(L // BLOCK_N, is_npu=True) as (n, _):
            k_l1 = T.alloc_L1((BLOCK_N, 64), "float16")
            T.copy(KEY[n * BLOCK_N : (n + 1) * BLOCK_N, 0:D], k_l1)
            T.copy(k_l1, OUT[n * BLOCK_N : (n + 1) * BLOCK_N, 0:D])

    return main, other


kernel = scores(4096, 64)
"""


def test_a_slice_fill_reads_the_buffer_of_its_own_kernel():
    legal, refused = knobs.legal_values(SLICE_FILL, "BLOCK_K", BS)
    assert legal == (64,), refused
    assert "a matrix multiply reads the whole buffer" in dict(refused)[128]
    assert "`k_l1` (line 13)" in dict(refused)[128]


# the UB of main is over-allocated (5 x 48 KiB) but at most two buffers are live at once; a
# helper defined in the kernel reuses the name `a` for a small buffer of its own, after
# everything else (read by bare name, main's `a` would live until then, with the helper's size)
LIVE = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, block_m=16):
    @T.prim_func
    def main(X: T.Tensor((M, 768), "float"), Y: T.Tensor((M, 768), "float")):
        with T.Kernel(M // block_m, is_npu=True) as (cid, _):
            a = T.alloc_ub((block_m, 768), "float")
            b = T.alloc_ub((block_m, 768), "float")
            c = T.alloc_ub((block_m, 768), "float")
            d = T.alloc_ub((block_m, 768), "float")
            e = T.alloc_ub((block_m, 768), "float")
            T.copy(X[cid * block_m, 0], a)
            T.copy(a, Y[cid * block_m, 0])
            T.copy(X[cid * block_m, 0], b)
            T.copy(X[cid * block_m, 0], c)
            T.vadd(b, c, b)
            T.copy(b, Y[cid * block_m, 0])
            T.copy(c, Y[cid * block_m, 0])

            def tail():
                a = T.alloc_ub((8, 8), "float")
                T.copy(X[0, 0], a)
                T.copy(a, Y[0, 0])

            tail()

    return main


kernel = rows(4096)
"""


def test_a_helpers_buffer_of_the_same_name_is_another_lifetime():
    # 32 rows: b and c take 2 x 96 KiB = 192 KiB, which UB holds; 64 rows do not
    legal, refused = knobs.legal_values(LIVE, "block_m", BS)
    assert legal == (8, 16, 32), refused
    assert "(b, c) would take 393216 bytes" in dict(refused)[64]


# 3. an extent the host pads up to a multiple of the knob itself demands no divisibility

# the factory asserts whole tiles; the host rounds the row count up with the same block
# before building the kernel (HOST varies: how it rounds, and how it spells the rounding)
ROUNDED = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scale(M, block_M):
    assert M % block_M == 0, "whole tiles only"

    @T.prim_func
    def main(A: T.Tensor((M, 128), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (c, _):
            buf = T.alloc_ub((block_M, 128), "float16")
            T.copy(A[c * block_M, 0], buf)
            T.tile.mul(buf, buf, 2)
            T.copy(buf, A[c * block_M, 0])

    return main


def round_up(num, divisor):
    return num + divisor - (num % divisor) if num % divisor != 0 else num


def run(x):
    rows = x.shape[0]
    block_M = 64
HOST
    return scale(rows, block_M)
"""

HOSTS = {
    # the flow of tan_sparse_attn_bwd: the padded size replaces the raw one only when they differ
    "in_order": (
        "    padded = (rows + block_M - 1) // block_M * block_M\n"
        "    if padded != rows:\n"
        "        x = torch.nn.functional.pad(x, (0, 0, 0, padded - rows))\n"
        "        rows = padded"
    ),
    "remainder_test": (
        "    if rows % block_M != 0:\n        rows = T.ceildiv(rows, block_M) * block_M"
    ),
    "helper": "    rows = round_up(rows, block_M)",  # next_divisible_number of tan_sparse_attn
    "inline": "    rows = rows + (block_M - rows % block_M) % block_M",
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_an_extent_the_host_rounds_up_to_the_knob_takes_any_block(host):
    legal, refused = knobs.legal_values(ROUNDED.replace("HOST", HOSTS[host]), "block_M", BS)
    assert legal == BS[:-2], refused  # 1024 rows of 128 halves overflow UB
    assert all("UB" in why for _, why in refused), refused


@pytest.mark.parametrize(
    "host",
    [
        "    rows = rows + block_M",  # not a multiple of block_M unless rows is
        "    rows = round_up(rows, 64)",  # a multiple of 64 only
        "    if rows > block_M:\n        rows = (rows + block_M - 1) // block_M * block_M",
        "    padded = (rows + block_M - 1) // block_M * block_M\n"
        "    if padded != rows:\n"
        "        rows = padded\n"
        "    rows = rows + 1",
    ],
)
def test_a_rounding_that_does_not_make_a_multiple_of_the_knob_keeps_the_rule(host):
    legal, refused = knobs.legal_values(ROUNDED.replace("HOST", host), "block_M", BS)
    assert 128 not in legal, (host, legal)
    assert "only divisors of the current 64" in dict(refused)[128] or "assert" in dict(refused)[128]


# a run-time extent walked in whole blocks over tensors the host allocates padded to a multiple
# of the same block (tan_sparse_attn's SparseKVBuffer); `whole` takes every padded row at once
PADDED_TENSORS = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def gather(block):
    n = T.symbolic("n")
    n_pad = T.symbolic("n_pad")

    @T.prim_func
    def main(Idx: T.Tensor((n,), "int32"), Buf: T.Tensor((n_pad, 64), "float16"),
             Out: T.Tensor((n_pad, 64), "float16")):
        with T.Kernel(1, is_npu=True) as (c, _):
            tile = T.alloc_ub((block, 64), "float16")
            whole = T.alloc_ub((256, 64), "float16")
            for k in T.serial(T.ceildiv(n, block)):
                T.copy(Buf[k * block, 0], tile)
                T.copy(tile, Out[k * block, 0])
            T.copy(Out[0, 0], whole, size=[n_pad, 64])

    return main


def round_up(num, divisor):
    return (num // divisor + (1 if num % divisor else 0)) * divisor


def run(idx):
    n = idx.shape[0]
    block = 64
    kernel = gather(block)
    buf = torch.empty((PAD, 64), dtype=torch.float16)
    out = torch.zeros((PAD, 64), dtype=torch.float16)
    return kernel(idx, buf, out)
"""


def test_tiles_over_tensors_the_host_pads_to_the_knob_may_end_past_the_extent():
    legal, refused = knobs.legal_values(
        PADDED_TENSORS.replace("PAD", "round_up(n, block)"), "block", BS
    )
    assert legal == (8, 16, 32, 64, 128, 256), refused
    # the padded rows are at least one block: 512 of them do not fit `whole`
    assert "moves a tile of at least 512 along dimension 0 into `whole`" in dict(refused)[512]


@pytest.mark.parametrize("pad", ["n", "round_up(n, 64)"])
def test_tensors_not_padded_to_the_knob_keep_the_whole_tile_rule(pad):
    legal, refused = knobs.legal_values(PADDED_TENSORS.replace("PAD", pad), "block", BS)
    assert legal == (8, 16, 32, 64), refused
    assert "only divisors of the current 64" in dict(refused)[128]
