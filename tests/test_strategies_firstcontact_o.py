"""heldout_o first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import inventory, multibuffer, pipeline
from bot.strategies.base import Refusal, Variant


def _knob(src: str, name: str) -> inventory.KnobInfo:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


# Automatic multi-buffering turned off in a kernel whose cube and vector halves hand a
# workspace across by hand: the author rotates two workspace slots and pairs them with
# cross-core flags; the compiler's extra copies would not be paired by those flags.
HAND_SYNCED = """
import tilelang
import tilelang.language as T


@tilelang.jit(
    target="npuir",
    pass_configs={
        tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,
    },
)
def relay(M, N, block_M=64):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), "float16"),
        W: T.Tensor((2, block_M, N), "float16"),
        B: T.Tensor((M, N), "float16"),
    ):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            with T.Scope("Cube"):
                l1 = T.alloc_L1([block_M, N], "float16")
                T.copy(A[cid * block_M, 0], l1)
                T.copy(l1, W[cid % 2, :, :])
                T.sync_block_set(cid % 2)
            with T.Scope("Vector"):
                ub = T.alloc_ub([block_M, N], "float16")
                T.sync_block_wait(cid % 2)
                T.copy(W[cid % 2, :, :], ub)
                T.copy(ub, B[cid * block_M, 0])

    return main
"""


def test_multi_buffering_is_not_turned_on_over_hand_paired_flags():
    r = multibuffer.set_flag(HAND_SYNCED, True)
    assert isinstance(r, Refusal)
    assert "by hand" in r.reason and "sync_block_set" in r.reason
    # without the hand-made flags the same explicit False is an ordinary setting to flip
    plain = HAND_SYNCED.replace("T.sync_block_set(cid % 2)", "pass").replace(
        "T.sync_block_wait(cid % 2)", "pass"
    )
    assert isinstance(multibuffer.set_flag(plain, True), Variant)


# Parity-split accumulators in a pipelined loop (ascendc: the depth is planned): trip si adds
# into sum_a when si is even, into sum_b when odd, so two trips may overlap and no more.
PARITY = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def row_sums(M, N, block_N=256):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, block_N), "float32")):
        with T.Kernel(M, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([1, block_N], "float32")
            sum_a = T.alloc_ub([1, block_N], "float32")
            sum_b = T.alloc_ub([1, block_N], "float32")
            with T.Scope("V"):
                T.tile.fill(sum_a, 0.0)
                T.tile.fill(sum_b, 0.0)
                for si in T.Pipelined(N // block_N, num_stages=2):
                    T.copy(X[cid, si * block_N], buf)
                    if si % 2 == 0:
                        T.tile.add(sum_a, sum_a, buf)
                    else:
                        T.tile.add(sum_b, sum_b, buf)
                T.tile.add(sum_a, sum_a, sum_b)
                T.copy(sum_a, Y[cid, 0])

    return main


row_sums(64, 4096)
"""


def test_a_depth_past_the_hand_rotated_slots_is_refused():
    for depth in (0, 1):
        assert isinstance(pipeline.set_depth(PARITY, depth), Variant)
    for depth in (3, 4):
        r = pipeline.set_depth(PARITY, depth)
        assert isinstance(r, Refusal), depth
        assert "one of 2 slots" in r.reason and "si % 2" in r.reason
    # a slot index assigned from a count the trip moves, used as a buffer index
    rotated = PARITY.replace(
        "if si % 2 == 0:\n                        T.tile.add(sum_a, sum_a, buf)\n"
        "                    else:\n                        T.tile.add(sum_b, sum_b, buf)",
        "slot = (si * 3 + 1) % 2\n                    T.copy(buf, X[cid, slot])",
    )
    assert "slot =" in rotated
    assert isinstance(pipeline.set_depth(rotated, 3), Refusal)
    # without a remainder of the trip nothing caps the depth
    serial = PARITY.replace("if si % 2 == 0:", "if cid % 2 == 0:")
    assert isinstance(pipeline.set_depth(serial, 3), Variant)


# Gemm operands passed as regions of their buffers (`A_s[:block_M, :block_K]`, one slot of a
# ring `kv[t % 2, :, :]`), in the kernel and inside a @T.macro the kernel calls with them.
REGIONS = """
import tilelang
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K):
    A_shape = (block_M, block_K)

    @T.macro
    def mma(a, kv, acc, t):
        T.gemm(a[:, :], kv[t % 2, :, :], acc[:, :block_N], initC=True)

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            by = cid // T.ceildiv(N, block_N) * block_M
            bx = cid % T.ceildiv(N, block_N) * block_N
            A_s = T.alloc_shared(A_shape, "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_s = T.alloc_shared((block_M, block_N), "float32")
            ring = T.alloc_L1([2, block_K, block_N], "float16")
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by, k * block_K], A_s, size=[block_M, block_K])
                T.copy(B[k * block_K, bx], B_s, size=[block_K, block_N])
                T.gemm(A_s[:block_M, :block_K], B_s[:block_K, :block_N], C_s[:block_M, :block_N])
                T.copy(B[k * block_K, bx], ring[k % 2, :, :])
                mma(A_s, ring, C_s, k)
            T.copy(C_s, C[by, bx], size=[block_M, block_N])

    return main


def test():
    kernel = tilelang.compile(matmul(256, 256, 512, 32, 32, 32), target="npuir")
    return kernel
"""


def test_gemm_operands_passed_as_regions_are_held_to_whole_fractals():
    ok, refused = _knob(REGIONS, "block_K").legal((8, 16, 64))
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [8] and "fractal" in refused[0][1]
    assert "A_s" in refused[0][1] or "B_s" in refused[0][1]
    # the ring slot reaches the gemm only through the macro: its rows are block_K too
    macro_only = REGIONS.replace(
        "T.gemm(A_s[:block_M, :block_K], B_s[:block_K, :block_N], C_s[:block_M, :block_N])",
        "pass",
    )
    ok, refused = _knob(macro_only, "block_K").legal((8, 16, 64))
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [8] and "`kv`" in refused[0][1]  # the macro's name for ring


# gemm_v0 reading one slot of a two-slot L1 ring: the slot, not the ring, goes through L0B.
RING_SLOT = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def pv(seq):
    block_M = 64
    block_N = 64

    @T.prim_func
    def main(
        P: T.Tensor((seq, seq), "bfloat16"),
        V: T.Tensor((seq, 512), "bfloat16"),
        O: T.Tensor((seq, 512), "float"),
    ):
        with T.Kernel(seq // block_M, is_npu=True) as (cid, vid):
            p_l1 = T.alloc_L1([block_M, block_N], "bfloat16")
            v_l1 = T.alloc_L1([2, block_N, 512], "bfloat16")
            acc = T.alloc_L0C([block_M, 512], "float")
            for k in T.serial(seq // block_N):
                T.copy(P[cid * block_M, k * block_N], p_l1)
                T.copy(V[k * block_N, 0], v_l1[k % 2, :, :])
                T.gemm_v0(p_l1, v_l1[k % 2, :, :], acc, init=(k == 0))
            T.copy(acc, O[cid * block_M, 0])

    return main


pv(4096)
"""


def test_a_ring_slot_passed_to_gemm_v0_must_fit_l0b():
    ok, refused = _knob(RING_SLOT, "block_N").legal((32, 128))
    assert ok == (32,)
    assert [v for v, _ in refused] == [128] and "L0B" in refused[0][1]


# A head offset that steps by a literal 64 beside `block_M = 64` sizing the slice it starts.
PINNED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def heads_copy(heads, dim):
    block_M = 64
    h_blocks = heads // block_M

    @T.prim_func
    def main(Q: T.Tensor((8, heads, dim), "float16"), O: T.Tensor((8, heads, dim), "float16")):
        with T.Kernel(8 * h_blocks, is_npu=True) as (cid, vid):
            q_ub = T.alloc_ub([block_M, dim], "float16")
            b = cid // h_blocks
            h0 = (cid % h_blocks) * 64
            h1 = h0 + block_M
            T.copy(Q[b, h0:h1, :], q_ub)
            T.copy(q_ub, O[b, h0:h1, :])

    return main


heads_copy(128, 128)
"""


def test_a_tile_offset_that_writes_out_the_knob_pins_it():
    ok, refused = _knob(PINNED, "block_M").legal((16, 32, 128))
    assert ok == ()
    assert [v for v, _ in refused] == [16, 32, 128]
    assert all("steps by the literal 64" in why for _, why in refused)
    # the same offset written with the knob is an ordinary tile walk
    named = PINNED.replace("(cid % h_blocks) * 64", "(cid % h_blocks) * block_M")
    ok, _ = _knob(named, "block_M").legal((16, 32, 128))
    assert ok == (16, 32, 128)


# A grid of one core that walks every tile in a guarded persistent loop: the 1 is a core count.
CORES = """
import tilelang
import tilelang.language as T


def fill(M, N, block_M, block_N):
    block_size = 1
    m_num = M // block_M
    n_num = N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16")):
        with T.Kernel(block_size, is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float16")
            for i in T.serial(T.ceildiv(m_num * n_num, block_size)):
                tile = i * block_size + cid
                if tile < m_num * n_num:
                    bx = tile // n_num * block_M
                    by = tile % n_num * block_N
                    T.vbrc(1.0, a)
                    T.copy(a, A[bx : bx + block_M, by : by + block_N])

    return main


def test():
    return tilelang.compile(fill(256, 256, 32, 32), target="npuir")
"""


def test_a_grid_of_one_core_walking_guarded_tiles_is_a_core_count():
    ok, refused = _knob(CORES, "block_size").legal((8, 20, 2048))
    assert ok == (8, 20, 2048) and not refused
    # a grid whose core index the kernel never reads: every core would redo the work
    idle = CORES.replace("as (cid, _)", "as (_, _)").replace(" + cid", "")
    inv = inventory.inventory(idle)
    assert not [k for k in inv.knobs if k.name == "block_size"]
    assert any(d.name == "block_size" and "set to 1" in d.reason for d in inv.dropped)
