"""heldout_p first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from conftest import install_tilelang_language

from bot.config.schema import Knob
from bot.strategies import inventory, knobs
from bot.strategies.base import Refusal, Variant


def _knob(src: str, name: str) -> inventory.KnobInfo:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def _move(src: str, name: str, value: int) -> Variant | Refusal:
    return knobs.set_knob(src, Knob(name, "block_size", (8, 16, 32, 64, 128, 256)), value)


# A per-tile table the host lays out at its own granularity: one gate byte per 32-row chunk of
# the input (`chunks = -(-rows // BLOCK_GATE)`), read by the kernel at its row-tile index. The tile
# and the chunk agree only while block_R is 32.
CHUNK_GATE = """
import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[2])
def gated_copy(rows, cols, chunks):
    block_R = 32
    gate_shape = [chunks]

    @T.prim_func
    def main(
        X: T.Tensor((rows, cols), "float16"),
        Gate: T.Tensor(gate_shape, "int8"),
        Y: T.Tensor((rows, cols), "float16"),
    ):
        with T.Kernel(T.ceildiv(rows, block_R), is_npu=True) as (cid, _):
            r = cid % T.ceildiv(rows, block_R)
            buf = T.alloc_ub([block_R, cols], "float16")
            T.copy(X[r * block_R : (r + 1) * block_R, :], buf)
            if Gate[r] == 0:
                T.tile.fill(buf, 0.0)
            T.copy(buf, Y[r * block_R : (r + 1) * block_R, :])

    return main


def check():
    BLOCK_GATE = 32
    rows, cols = 256, 64
    chunks = -(-rows // BLOCK_GATE)
    kernel = gated_copy(rows, cols, chunks)
    x = torch.randn(rows, cols).half()
    gate = torch.randint(0, 2, (chunks,), dtype=torch.int8)
    y = kernel(x, gate)
    ref = x * gate.repeat_interleave(BLOCK_GATE)[:rows, None]
    torch.testing.assert_close(y, ref)


if __name__ == "__main__":
    check()
"""


def test_a_table_laid_out_per_host_chunk_pins_the_tile_to_the_chunk():
    for value in (16, 64):
        r = _move(CHUNK_GATE, "block_R", value)
        assert isinstance(r, Refusal), value
        assert "`Gate[r]`" in r.reason and "-(-rows // BLOCK_GATE)" in r.reason
        assert "32-wide blocks" in r.reason
    # the host's chunk is a data layout, listed with its reason
    dropped = {d.name: d.reason for d in inventory.inventory(CHUNK_GATE).dropped}
    assert "granularity (32)" in dropped["BLOCK_GATE"]
    # a table the host sizes by the kernel's own tile count follows the tile: no pin
    follows = CHUNK_GATE.replace("block_R = 32", "block_R = BLOCK_R").replace(
        "BLOCK_GATE = 32", "BLOCK_GATE = BLOCK_R"
    )
    follows = follows.replace("import torch\n", "import torch\n\nBLOCK_R = 32\n", 1)
    r = _move(follows, "BLOCK_R", 64)
    assert isinstance(r, Variant), r
    # a name the kernel binds again (an inner loop's `r`) is no tile index where it is read
    shadowed = CHUNK_GATE.replace(
        "            if Gate[r] == 0:",
        "            for r in T.serial(1):\n                pass\n            if Gate[r] == 0:",
    )
    assert isinstance(_move(shadowed, "block_R", 64), Variant)


# Every M-tile re-derives the same rows of a scaled weight into a workspace (the rows depend on
# the N tile only) before its gemm: the workspace write does not move with bm, but neither does
# what it writes, so a second M-tile rewrites the same bytes. block_M may take any value that
# divides M; only a write whose value moves with bm makes one tile the only correct count.
SHARED_UNPACK = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scaled_gemm(M, N, K):
    block_M = 64
    block_N = 32
    m_num = T.ceildiv(M, block_M)
    n_num = T.ceildiv(N, block_N)

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        W: T.Tensor((N, K), "float16"),
        S: T.Tensor((N,), "float16"),
        Work: T.Tensor((N, K), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bm = cid // n_num
            bn = cid % n_num
            row_ub = T.alloc_ub((K,), "float16")
            for r in T.serial(block_N):
                w_row = bn * block_N + r
                T.copy(W[w_row, 0], row_ub)
                T.tile.mul(row_ub, row_ub, S[w_row])
                T.copy(row_ub, Work[w_row, 0])
            a_l1 = T.alloc_L1((block_M, K), "float16")
            w_l1 = T.alloc_L1((block_N, K), "float16")
            c_l0 = T.alloc_L0C((block_M, block_N), "float32")
            T.copy(A[bm * block_M, 0], a_l1)
            T.copy(Work[bn * block_N, 0], w_l1)
            T.gemm_v0(a_l1, w_l1, c_l0, transpose_B=True, init=True)
            T.copy(c_l0, C[bm * block_M, bn * block_N])

    return main


def check():
    for M, N, K in ((64, 64, 256), (64, 128, 512)):
        scaled_gemm(M, N, K)


if __name__ == "__main__":
    check()
"""


def test_a_repeated_write_of_the_same_value_is_no_overwrite():
    assert isinstance(_move(SHARED_UNPACK, "block_M", 32), Variant)
    assert "block_M" in {k.name for k in inventory.inventory(SHARED_UNPACK).knobs}
    # what is written depends on bm (rows of A): every M-tile overwrites the row with its own
    moving = SHARED_UNPACK.replace(
        "T.copy(W[w_row, 0], row_ub)", "T.copy(A[bm * block_M + r, 0], row_ub)"
    )
    r = _move(moving, "block_M", 32)
    assert isinstance(r, Refusal) and "overwrite" in r.reason, r


# A persistent kernel: CORES cores each take a contiguous share ceildiv(n_items, CORES) of the
# tiles, every tile taken under `if item < n_items`. More cores than tiles leave cores idle; the
# count is no tile of the items, so nothing caps it at the item count.
SHARED_CORES = """
import tilelang
import tilelang.language as T
import torch


@tilelang.jit(target="npuir")
def scale_rows(rows, cols, block_rows, dtype="float16"):
    BLOCK_CORES = 24

    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(BLOCK_CORES, is_npu=True) as (core, _):
            buf = T.alloc_ub((block_rows, cols), dtype)
            n_items = T.ceildiv(rows, block_rows)
            first = core * T.ceildiv(n_items, BLOCK_CORES)
            for i in T.serial(T.ceildiv(n_items, BLOCK_CORES)):
                item = first + i
                if item < n_items:
                    r0 = item * block_rows
                    size = T.min(rows - r0, block_rows)
                    T.copy(X[r0 : r0 + size, 0:cols], buf)
                    T.vmul(buf, buf, buf)
                    T.copy(buf, Y[r0 : r0 + size, 0:cols])

    return main


def check():
    kernel = scale_rows(256, 64, 32)
    x = torch.randn(256, 64).half()
    y = torch.empty_like(x)
    kernel(x, y)
    torch.testing.assert_close(y, x * x)


if __name__ == "__main__":
    check()
"""


def test_a_core_count_sharing_guarded_items_is_no_tile():
    # 256 rows in 32-row tiles: 8 items; 24 cores already exceed them, and 48 or 64 are fine too
    for value in (16, 48, 64):
        assert isinstance(_move(SHARED_CORES, "BLOCK_CORES", value), Variant), value
    # without the guard the cores past the items would take tiles beyond the rows: the share
    # rule stays
    unguarded = SHARED_CORES.replace("if item < n_items:", "if True:")
    assert isinstance(_move(unguarded, "BLOCK_CORES", 48), Refusal)


# An MX block-scaled cube multiply (`T.mma_mx`, tilelang-ascend's npu_gemm_mx) on L0A / L0B
# tiles: its operands are cube fractals like any gemm's, so an 8-row tile is part of one.
MX_TILE = """
import argparse

import tilelang
import tilelang.language as T

FP8 = "float8_e4m3"


def mx_kernel(M, N, K, block_M, block_N):
    assert M % block_M == 0 and N % block_N == 0

    @tilelang.jit(out_idx=[-1], target="pto")
    def build():
        @T.prim_func
        def main(
            A: T.Tensor((M, K), FP8),
            B: T.Tensor((K, N), FP8),
            SA: T.Tensor((M, K // 32), "uint8"),
            SB: T.Tensor((K // 32, N), "uint8"),
            C: T.Tensor((M, N), "float32"),
        ):
            with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
                bm = cid // (N // block_N)
                bn = cid % (N // block_N)
                a_l1 = T.alloc_L1((block_M, K), FP8)
                b_l1 = T.alloc_L1((K, block_N), FP8)
                a_l0 = T.alloc_L0A((block_M, K), FP8)
                b_l0 = T.alloc_L0B((K, block_N), FP8)
                c_l0 = T.alloc_L0C((block_M, block_N), "float32")
                sa = T.alloc_L1((block_M, K // 32), "uint8")
                sb = T.alloc_L1((K // 32, block_N), "uint8")
                T.copy(A[bm * block_M, 0], a_l1)
                T.copy(B[0, bn * block_N], b_l1)
                T.copy(a_l1, a_l0)
                T.copy(b_l1, b_l0)
                T.copy(SA[bm * block_M, 0], sa)
                T.copy(SB[0, bn * block_N], sb)
                T.mma_mx(a_l0, b_l0, c_l0, sa, sb, init=True)
                T.copy(c_l0, C[bm * block_M, bn * block_N])

        return main

    return build()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--block_M", type=int, default=64)
    parser.add_argument("--block_N", type=int, default=64)
    args = parser.parse_args()
    mx_kernel(128, 128, 64, args.block_M, args.block_N)


if __name__ == "__main__":
    main()
"""


def test_an_mx_cube_multiply_keeps_whole_fractals():
    r = _move(MX_TILE, "block_M", 8)
    assert isinstance(r, Refusal) and "fractal" in r.reason and "a_l0" in r.reason, r
    assert isinstance(_move(MX_TILE, "block_M", 32), Variant)


# The host reads a parameter's shape, then rebinds the parameter to a flattened view: the read
# comes first, so it sees the tensor as passed (rows = 8 * 32 = 256), and block_M may take any
# divisor of 256 beyond the current 16.
FLATTENED = """
import tilelang
from tilelang import language as T
import torch


@tilelang.jit(out_idx=[-1])
def square(M, D, block_M, dtype="float16"):
    m_num = M // block_M

    @T.prim_func
    def main(x: T.Tensor((M, D), dtype), y: T.Tensor((M, D), dtype)):
        with T.Kernel(m_num, is_npu=True) as (cid, vid):
            ub = T.alloc_shared([block_M, D], dtype)
            T.copy(x[cid * block_M : (cid + 1) * block_M, :], ub)
            T.tile.mul(ub, ub, ub)
            T.copy(ub, y[cid * block_M : (cid + 1) * block_M, :])

    return main


def run(h):
    batch, heads, dim = h.shape
    rows = batch * heads
    h = h.view(rows, dim)
    block_M = 16
    return square(rows, dim, block_M)(h).view(batch, heads, dim)


if __name__ == "__main__":
    h = torch.randn(8, 32, 64, dtype=torch.float16)
    torch.testing.assert_close(run(h), h * h)
"""


def test_a_shape_read_before_the_parameter_is_rebound_sees_the_tensor_as_passed():
    assert isinstance(_move(FLATTENED, "block_M", 32), Variant)
    r = _move(FLATTENED, "block_M", 96)
    assert isinstance(r, Refusal) and "does not divide 256" in r.reason, r
    # read after the rebinding, the shape is the view's own (256, 64)
    late = FLATTENED.replace(
        "    batch, heads, dim = h.shape\n    rows = batch * heads\n    h = h.view(rows, dim)\n",
        "    h = h.view(256, 64)\n    rows, dim = h.shape\n    batch, heads = 8, 32\n",
    )
    assert isinstance(_move(late, "block_M", 32), Variant)


# An argparse block size read into a local and handed to a host function that picks a kernel
# by it: the option is read, so "not passed to any kernel factory" would be untrue; the
# factory parameter it reaches is listed under its own name.
PICKED = """
import argparse

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def chunked(b, n, block_size, dtype="float"):
    @T.prim_func
    def main(A: T.Tensor((b, n), dtype), B: T.Tensor((b, n), dtype)):
        with T.Kernel(b * (n // block_size), is_npu=True) as (cid, _):
            ub = T.alloc_ub((block_size,), dtype)
            row = cid // (n // block_size)
            col = cid % (n // block_size) * block_size
            T.copy(A[row, col : col + block_size], ub)
            T.copy(ub, B[row, col : col + block_size])

    return main


def build(b, n, block_size=1024):
    if n <= block_size:
        return chunked(b, n, n)
    return chunked(b, n, block_size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--block_size", type=int, default=2048)
    args = parser.parse_args()
    block_size = args.block_size
    build(4, args.dim, block_size)


if __name__ == "__main__":
    main()
"""


def test_an_option_read_into_a_local_is_not_said_to_reach_no_factory():
    reasons = [d.reason for d in inventory.inventory(PICKED).dropped if d.name == "block_size"]
    option = [r for r in reasons if r.startswith("argparse option")]
    assert option and "is read at line 33" in option[0], reasons
    assert not any("not passed to any kernel factory" in r for r in reasons)


# The v-aliases came into TileLang-NPUIR later than the npuir_ ops: a TileLang from before them
# has `npuir_add` and no `vadd`. Where one is installed, only the aliases it defines are used.
NPUIR_OPS = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def accumulate(n, M, N, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((n, M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, _):
            acc = T.alloc_shared([M, N], dtype=dtype)
            src = T.alloc_shared([M, N], dtype=dtype)
            T.npuir_brc(0, acc)
            for i in T.serial(n):
                T.copy(X[i, :, :], src)
                T.npuir_add(src, acc, acc)
            T.copy(acc, Y)

    return main
"""


def _language(tmp_path, monkeypatch, text: str) -> None:
    install_tilelang_language(tmp_path, monkeypatch, text)


def test_an_installed_tilelang_without_v_aliases_is_not_renamed_into(tmp_path, monkeypatch):
    from bot.strategies import vprefix

    r = vprefix.rename(NPUIR_OPS)  # nothing installed, and the file calls no v-alias itself
    assert isinstance(r, Refusal) and "no NPUIR TileLang is installed" in r.reason, r
    _language(
        tmp_path,
        monkeypatch,
        "from .customize_npuir import (\n    npuir_add,\n    npuir_brc,\n    npuir_reduce,\n)\n",
    )
    r = vprefix.rename(NPUIR_OPS)
    assert isinstance(r, Refusal), r
    assert "installed TileLang" in r.reason and "npuir_add, npuir_brc" in r.reason


def test_only_the_aliases_the_installed_tilelang_defines_are_used(tmp_path, monkeypatch):
    from bot.strategies import vprefix

    _language(
        tmp_path,
        monkeypatch,
        "from .customize_npuir import (\n    npuir_add,\n    npuir_add as vadd,\n    npuir_brc,\n)\n",
    )
    r = vprefix.rename(NPUIR_OPS)
    assert isinstance(r, Variant), r
    assert "T.vadd(src, acc, acc)" in r.source and "T.npuir_brc(0, acc)" in r.source
