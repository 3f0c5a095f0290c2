"""Block rules read from a kernel whose tile count does not follow the knob, from counts of
several knob-sized tiles, and from where buffers must live (accumulators, vector-only
kernels, `T.float32` dtypes)."""

from __future__ import annotations

from bot.config.schema import Knob
from bot.strategies.base import Refusal, Variant
from bot.strategies.knobs import set_knob

ONE_TILE = """
import tilelang
import tilelang.language as T

ROWS = 64
COLS = 64
DEPTH = 256
TILE_R = 64
TILE_C = 64
TILE_D = 64


@tilelang.jit(target="npuir")
def single():
    @T.prim_func
    def main(
        X: T.Tensor((ROWS, DEPTH), "float16"),
        W: T.Tensor((DEPTH, COLS), "float16"),
        Y: T.Tensor((ROWS, COLS), "float16"),
    ):
        with T.Kernel(1, is_npu=True) as (core, sub):
            x_l1 = T.alloc_shared((TILE_R, TILE_D), "float16")
            w_l1 = T.alloc_shared((TILE_D, TILE_C), "float16")
            acc = T.alloc_fragment((TILE_R, TILE_C), "float32")
            for d in T.serial(DEPTH // TILE_D):
                T.copy(X[0, d * TILE_D], x_l1)
                T.copy(W[d * TILE_D, 0], w_l1)
                T.gemm(x_l1, w_l1, acc, initC=(d == 0))
            T.copy(acc, Y[0, 0])

    return main
"""


def bs(name: str) -> Knob:
    return Knob(name, "block_size", (8, 16, 32, 64, 128, 256))


def test_a_knob_no_tile_count_follows_keeps_its_value():
    for value in (32, 128):
        r = set_knob(ONE_TILE, bs("TILE_R"), value)
        assert isinstance(r, Refusal), value
        assert "no tile count" in r.reason and "the current 64" in r.reason
    assert isinstance(set_knob(ONE_TILE, bs("TILE_C"), 32), Refusal)
    # the depth loop counts TILE_D's tiles: it may move to another divisor
    assert isinstance(set_knob(ONE_TILE, bs("TILE_D"), 128), Variant)


def test_a_grid_that_counts_the_knob_lifts_the_rule():
    src = ONE_TILE.replace("T.Kernel(1,", "T.Kernel(ROWS // TILE_R,").replace(
        "X[0, d * TILE_D]", "X[core * TILE_R, d * TILE_D]"
    )
    src = src.replace("Y[0, 0]", "Y[core * TILE_R, 0]")
    assert isinstance(set_knob(src, bs("TILE_R"), 32), Variant)


def test_an_unreadable_count_makes_no_rule():
    src = ONE_TILE.replace("def single():", "def single(cores):").replace(
        "T.Kernel(1,", "T.Kernel(cores,"
    )
    r = set_knob(src, bs("TILE_R"), 32)
    # no tile-count rule; TILE_R is still held, by the copy that reads it from the fixed row
    # 0 whatever the grid (bot/strategies/coverage.py)
    assert isinstance(r, Refusal) and "no tile count" not in r.reason
    assert "fixed origin of `X`" in r.reason


PAIRED = """
import tilelang
import tilelang.language as T

M = 256
BM = 128


@tilelang.jit(target="npuir")
def pairs(M, bm):
    pair_num = M // (2 * bm)

    @T.prim_func
    def main(X: T.Tensor((M, 64), "float16"), Y: T.Tensor((M, 64), "float16")):
        with T.Kernel(pair_num, is_npu=True) as (cid, _):
            lo = T.alloc_ub((bm, 64), "float16")
            hi = T.alloc_ub((bm, 64), "float16")
            T.copy(X[cid * 2 * bm, 0], lo)
            T.copy(X[cid * 2 * bm + bm, 0], hi)
            T.copy(lo, Y[cid * 2 * bm, 0])
            T.copy(hi, Y[cid * 2 * bm + bm, 0])

    return main


def main():
    kernel = pairs(M, BM)
    kernel(X, Y)
"""


def test_a_count_of_pairs_of_tiles_needs_the_knob_to_divide_half_the_extent():
    r = set_knob(PAIRED, bs("bm"), 256)
    assert isinstance(r, Refusal)
    assert "does not divide 128" in r.reason and "M // (2 * bm)" in r.reason
    assert isinstance(set_knob(PAIRED, bs("bm"), 64), Variant)


ACCUMULATOR = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npu")
def mm(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.max(acc[i, j], 0)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


M, N, K = 2048, 2048, 512
block_M, block_N, block_K = 128, 128, 64
kernel = mm(M, N, K, block_M, block_N, block_K)
"""


def test_an_accumulator_also_read_by_vector_code_must_fit_l0c():
    # 512 x 128 x 4 B = 256 KiB: over L0C's 128 KiB, though under 512 KiB of L1 or UB + L0C
    r = set_knob(ACCUMULATOR, Knob("block_M", "block_size", (64, 128, 256, 512)), 512)
    assert isinstance(r, Refusal)
    assert "L0C" in r.reason and "acc (line" in r.reason
    assert isinstance(set_knob(ACCUMULATOR, bs("block_M"), 256), Variant)  # 128 KiB fits


VECTOR_ONLY = """
import tilelang
import tilelang.language as T


def scale(M=2048, N=512, rows=16):
    @T.prim_func
    def main(X: T.Buffer((M, N), "float32"), Y: T.Buffer((M, N), "float32")):
        with T.Kernel(M // rows) as bx:
            x_s = T.alloc_shared((rows, N), "float32")
            y_s = T.alloc_shared((rows, N), "float32")
            T.copy(X[bx * rows : (bx + 1) * rows, 0:N], x_s)
            for r in range(0, rows):
                for i in range(0, N):
                    y_s[r, i] = x_s[r, i] * 2.0
            T.copy(y_s, Y[bx * rows : (bx + 1) * rows, 0:N])

    return main


func = scale()
"""


def test_a_kernel_without_a_matrix_multiply_keeps_its_buffers_in_ub():
    # two rows x 2 KiB buffers: 64 rows take 256 KiB, more than UB's 192 KiB (L1 would hold it)
    r = set_knob(VECTOR_ONLY, bs("rows"), 64)
    assert isinstance(r, Refusal)
    assert "UB" in r.reason and "192 KiB" in r.reason
    assert isinstance(set_knob(VECTOR_ONLY, bs("rows"), 32), Variant)


GEMV_SLICES = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemv(N, K, bn, bk, dtype="float16"):
    @T.prim_func
    def main(
        W: T.Tensor((N, K), dtype), v: T.Tensor((K,), dtype), out: T.Tensor((N,), "float32")
    ):
        with T.Kernel(N // bn, is_npu=True) as (cid, _):
            w_l1 = T.alloc_L1((bn, bk), dtype)
            v_l1 = T.alloc_L1((16, bk), dtype)
            acc = T.alloc_L0C((16, bn), "float32")
            for kk in T.serial(K // bk):
                T.copy(v[kk * bk], v_l1)
                T.copy(W[cid * bn, kk * bk], w_l1)
                T.gemm_v0(v_l1, w_l1, acc, transpose_B=True, init=(kk == 0))
            T.copy(acc, out[cid * bn])

    return main


def main():
    kernel = gemv(4096, 4096, 128, 128)
    kernel()
"""


def test_a_gemm_v0_operand_slice_must_fit_l0b():
    big = Knob("bn", "block_size", (64, 128, 256, 512, 1024))
    # transposed B is (bn, bk): its L0B slice is bn x 128 fp16; 512 x 128 x 2 B = 128 KiB
    r = set_knob(GEMV_SLICES, big, 512)
    assert isinstance(r, Refusal)
    assert "L0B" in r.reason and "w_l1 (line" in r.reason
    assert isinstance(set_knob(GEMV_SLICES, big, 256), Variant)  # 64 KiB: fits
    # the reduction axis passes in slices of 128: a long bk never overflows L0
    assert isinstance(set_knob(GEMV_SLICES, Knob("bk", "block_size", (128, 1024)), 1024), Variant)


SCRATCH = """
import torch
import tilelang
import tilelang.language as T

R = 256
C = 256


@tilelang.jit(target="npuir")
def stage(R, C, tr, tc):
    tiles = (R // tr) * (C // tc)

    @T.prim_func
    def main(
        X: T.Tensor((R, C), "float16"),
        scratch: T.Tensor((tiles, tr, tc), "float16"),
        Y: T.Tensor((R, C), "float16"),
    ):
        with T.Kernel(tiles, is_npu=True) as (cid, _):
            bx = cid // (C // tc)
            by = cid % (C // tc)
            buf = T.alloc_shared((tr, tc), "float16")
            T.copy(X[bx * tr, by * tc], buf)
            T.copy(buf, scratch[cid, 0, 0])
            T.copy(scratch[cid, 0, 0], buf)
            T.copy(buf, Y[bx * tr, by * tc])

    return main


def check():
    tr = 64
    tc = 128
    kernel = stage(R, C, tr, tc)
    x = torch.randn(size=[R, C], dtype=torch.float16).npu()
    space = torch.empty(size=[16, tr, tc], dtype=torch.float16).npu()
    y = torch.zeros(size=[R, C], dtype=torch.float16).npu()
    kernel(x, space, y)
"""


def test_a_tensor_the_caller_allocates_bounds_the_declared_shape():
    # tiles = (256 / tr) * 2: tr = 16 declares 32 slices, the caller allocates 16
    r = set_knob(SCRATCH, bs("tr"), 16)
    assert isinstance(r, Refusal)
    assert "`scratch`" in r.reason and "= 16" in r.reason and "32" in r.reason
    assert isinstance(set_knob(SCRATCH, bs("tr"), 32), Variant)  # 16 slices: fits exactly


ROUND_ROBIN = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def add(M, N, bm, bn):
    m_num = M // bm
    n_num = N // bn
    CORES = 24

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(CORES, is_npu=True) as (cid, _):
            buf = T.alloc_ub((bm, bn), "float16")
            for i in T.serial(T.ceildiv(m_num * n_num, CORES)):
                t = i * CORES + cid
                if t < m_num * n_num:
                    T.copy(A[(t // n_num) * bm, (t % n_num) * bn], buf)
                    T.copy(buf, C[(t // n_num) * bm, (t % n_num) * bn])

    return main


def main():
    kernel = add(256, 256, 64, 64)
    kernel()
"""


def test_tiles_dealt_round_robin_over_a_fixed_grid_are_still_counted():
    # 16 tiles of 64 and 4 of 128 both take one round over 24 cores: the count is read
    # far from the two values too, where it does fall as the block grows
    assert isinstance(set_knob(ROUND_ROBIN, bs("bm"), 128), Variant)


def test_a_knob_taken_as_a_ring_modulus_is_not_a_tile_size():
    ring = ONE_TILE.replace("TILE_C = 64\n", "TILE_C = 64\nSLOTS = 2\n")
    ring = ring.replace(
        "x_l1 = T.alloc_shared((TILE_R, TILE_D)", "x_l1 = T.alloc_shared((SLOTS, TILE_R, TILE_D)"
    )
    ring = ring.replace(
        "T.copy(X[0, d * TILE_D], x_l1)", "T.copy(X[0, d * TILE_D], x_l1[d % SLOTS, 0, 0])"
    )
    assert isinstance(set_knob(ring, bs("SLOTS"), 4), Variant)
