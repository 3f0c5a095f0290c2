"""The heldout_o and issue 13 rules at the edge of the class of code each names.

Each kernel is written for the test: one just outside a rule's class (the rule must not fire:
a refusal would give an untrue reason, a knob kept would be moved wrongly) beside the form the
rule was written for.
"""

from __future__ import annotations

from bot.strategies import inventory, knobs, multibuffer, pipeline
from bot.strategies.base import Refusal, Variant

BS = (8, 16, 32, 64, 128, 256)


def _knob(src: str, name: str) -> inventory.KnobInfo:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


# pinned.py: a flattened (batch * 64 heads) axis; the batch stride is the literal 64, and the
# head tiles inside a batch step by block_M through a local. block_M = 64 is a coincidence:
# the offset steps by the knob, so any block dividing the 64 heads covers the axis.
FLAT_HEADS = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def heads_copy(batch, dim):
    block_M = 64
    h_blocks = 64 // block_M

    @T.prim_func
    def main(Q: T.Tensor((batch * 64, dim), "float16"), O: T.Tensor((batch * 64, dim), "float16")):
        with T.Kernel(batch * h_blocks, is_npu=True) as (cid, vid):
            q_ub = T.alloc_ub([block_M, dim], "float16")
            b = cid // h_blocks
            h0 = (cid % h_blocks) * block_M
            lo = b * 64 + h0
            T.copy(Q[lo : lo + block_M, :], q_ub)
            T.copy(q_ub, O[lo : lo + block_M, :])

    return main


heads_copy(8, 128)
"""


def test_an_offset_that_steps_by_the_knob_through_a_local_is_not_pinned():
    ok, refused = _knob(FLAT_HEADS, "block_M").legal((16, 32, 64, 128))
    assert ok == (16, 32, 64), refused
    assert [v for v, _ in refused] == [128] and "divide 64" in refused[0][1]
    # the head offset written out as the literal: the tiles cover the axis only at 64
    pinned = FLAT_HEADS.replace("(cid % h_blocks) * block_M", "(cid % h_blocks) * 64")
    ok, refused = _knob(pinned, "block_M").legal((16, 32, 64, 128))
    assert ok == (64,)
    assert all("steps by the literal 64" in why for v, why in refused if v != 128)


# multibuffer.py: the pass_configs entry belongs to `scale`'s jit; the flags set and waited on
# by hand are in `relay`, another kernel of the file, which that entry does not configure
TWO_KERNELS = """
import tilelang
import tilelang.language as T


@tilelang.jit(
    target="npuir",
    pass_configs={
        tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,
    },
)
def scale(M, N, block_M=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            ub = T.alloc_ub([block_M, N], "float16")
            T.copy(A[cid * block_M, 0], ub)
            T.copy(ub, B[cid * block_M, 0])

    return main


@tilelang.jit(target="npuir")
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


def test_hand_made_flags_in_another_kernel_do_not_refuse_the_flag():
    r = multibuffer.set_flag(TWO_KERNELS, True)
    assert isinstance(r, Variant), r
    assert r.change.old is False and r.change.new is True
    # the same flags in the kernel the entry configures refuse it
    own = TWO_KERNELS.replace(
        '@tilelang.jit(target="npuir")\ndef relay',
        '@tilelang.jit(\n    target="npuir",\n    pass_configs={\n'
        "        tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,\n    },\n)\n"
        "def relay",
    ).replace(
        '@tilelang.jit(\n    target="npuir",\n    pass_configs={\n'
        "        tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,\n    },\n)\n"
        "def scale",
        '@tilelang.jit(target="npuir")\ndef scale',
    )
    r = multibuffer.set_flag(own, True)
    assert isinstance(r, Refusal) and "by hand" in r.reason, r
    # an entry no decorator owns (a dict assigned at module level) may configure any kernel
    shared = TWO_KERNELS.replace(
        '@tilelang.jit(\n    target="npuir",\n    pass_configs={\n'
        "        tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,\n    },\n)\n",
        "pass_configs = {tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False}\n\n\n"
        '@tilelang.jit(target="npuir", pass_configs=pass_configs)\n',
    )
    r = multibuffer.set_flag(shared, True)
    assert isinstance(r, Refusal) and "by hand" in r.reason, r


# roundup.py: the host rounds the rows up to whole blocks only on one side of a condition that
# does not read the knob; on the other side the raw rows reach the kernel's assert
ROUNDED_IF = """
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


def run(x, pad=False):
    rows = x.shape[0]
    block_M = 64
    rows = T.ceildiv(rows, block_M) * block_M if PAD else rows
    return scale(rows, block_M)
"""


def test_a_round_up_on_one_side_of_a_condition_keeps_the_whole_tile_rule():
    for cond in ("pad", "rows > 4096"):
        legal, refused = knobs.legal_values(ROUNDED_IF.replace("PAD", cond), "block_M", BS)
        assert 128 not in legal, (cond, legal)
        assert "assert" in dict(refused)[128] or "divisors" in dict(refused)[128]
    # rounded on every path: any block fits the rows
    always = ROUNDED_IF.replace(" if PAD else rows", "")
    legal, _ = knobs.legal_values(always, "block_M", BS)
    assert 128 in legal


# slots.py: the trip's parity picks a row of a table the loop only reads (`W[si % 2, 0]`): no
# trip writes it, so trips two apart share nothing they could overwrite
PARITY_TABLE = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def row_sums(M, N, block_N=256):
    @T.prim_func
    def main(
        X: T.Tensor((M, N), "float32"),
        Y: T.Tensor((M, block_N), "float32"),
        W: T.Tensor((2, block_N), "float32"),
    ):
        with T.Kernel(M, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([1, block_N], "float32")
            w = T.alloc_ub([1, block_N], "float32")
            acc = T.alloc_ub([1, block_N], "float32")
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                for si in T.Pipelined(N // block_N, num_stages=2):
                    T.copy(X[cid, si * block_N], buf)
                    T.copy(W[si % 2, 0], w)
                    T.tile.mul(buf, buf, w)
                    T.tile.add(acc, acc, buf)
                T.copy(acc, Y[cid, 0])

    return main


row_sums(64, 4096)
"""


def test_a_parity_that_picks_a_row_the_loop_only_reads_is_no_slot():
    assert isinstance(pipeline.set_depth(PARITY_TABLE, 3), Variant)
    # the loop writes the table at that row: two slots, trips two apart share one
    written = PARITY_TABLE.replace(
        "T.tile.add(acc, acc, buf)",
        "T.tile.add(acc, acc, buf)\n                    T.copy(buf, W[si % 2, 0])",
    )
    r = pipeline.set_depth(written, 3)
    assert isinstance(r, Refusal) and "one of 2 slots" in r.reason, r


# corecount.py: a grid of one core whose index the kernel reads, but whose work is not split by
# the grid (`bx = (cid + i) * block_M`, every trip count fixed): with more cores each would walk
# m_num tiles from its own index, past the end. The 1 is how the kernel is written, not a count.
ONE_CORE = """
import tilelang
import tilelang.language as T


def fill(M, N, block_M):
    block_size = 1
    m_num = M // block_M

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16")):
        with T.Kernel(block_size, is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), "float16")
            for i in T.serial(m_num):
                bx = (cid + i) * block_M
                T.vbrc(1.0, a)
                T.copy(a, A[bx : bx + block_M, 0:N])

    return main


def test():
    return tilelang.compile(fill(256, 256, 32), target="npuir")
"""


def test_a_grid_of_one_that_does_not_split_the_work_is_no_core_count():
    inv = inventory.inventory(ONE_CORE)
    assert not [k for k in inv.knobs if k.name == "block_size"]
    assert any(d.name == "block_size" and "set to 1" in d.reason for d in inv.dropped)
    # the work split by the grid (through a local of the factory): a core count
    split = (
        ONE_CORE.replace(
            "    m_num = M // block_M\n",
            "    m_num = M // block_M\n    per_core = T.ceildiv(m_num, block_size)\n",
        )
        .replace("T.serial(m_num)", "T.serial(per_core)")
        .replace("(cid + i) * block_M", "(cid * per_core + i) * block_M")
    )
    assert [k.name for k in inventory.inventory(split).knobs if k.name == "block_size"]


# capacity.Scoped (copy fit, slice fills, live UB): a helper in the kernel whose parameter is
# named like a kernel buffer (`a`) sees what its caller passes (`head`, 16 rows), not the
# kernel's `a` of block_M rows: its 16-row copy out of `a` says nothing of block_M
SHADOWED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def rows(M, block_M=32):
    @T.prim_func
    def main(
        X: T.Tensor((M, 64), "float16"),
        O: T.Tensor((M, 64), "float16"),
        H: T.Tensor((16, 64), "float16"),
    ):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            a = T.alloc_ub([block_M, 64], "float16")
            head = T.alloc_ub([16, 64], "float16")

            def store(a):
                T.copy(a, H[0, 0], size=[16, 64])

            T.copy(X[cid * block_M, 0], a)
            T.tile.fill(head, 1.0)
            store(head)
            T.copy(a, O[cid * block_M, 0])

    return main


rows(1024)
"""


def test_a_helper_parameter_is_not_the_kernel_buffer_of_its_name():
    ok, refused = _knob(SHADOWED, "block_M").legal((8, 16, 32))
    assert ok == (8, 16, 32), refused
    # the helper reading the kernel's own `a` (no parameter): its 16 rows need block_M >= 16
    own = SHADOWED.replace("def store(a):", "def store(h):")
    ok, refused = _knob(own, "block_M").legal((8, 16, 32))
    assert ok == (16, 32) and "out of `a`" in refused[0][1]


# slots.py: an `if` on the trip's parity whose two sides work on the same buffers (adding even
# tiles, subtracting odd ones, into one accumulator) picks no slot: nothing is kept apart
ALTERNATING = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def row_diffs(M, N, block_N=256):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, block_N), "float32")):
        with T.Kernel(M, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([1, block_N], "float32")
            acc = T.alloc_ub([1, block_N], "float32")
            other = T.alloc_ub([1, block_N], "float32")
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                for si in T.Pipelined(N // block_N, num_stages=2):
                    T.copy(X[cid, si * block_N], buf)
                    if si % 2 == 0:
                        T.tile.add(acc, acc, buf)
                    else:
                        T.tile.sub(acc, acc, buf)
                T.copy(acc, Y[cid, 0])

    return main


row_diffs(64, 4096)
"""


def test_a_parity_test_whose_sides_touch_the_same_buffers_is_no_slot():
    assert isinstance(pipeline.set_depth(ALTERNATING, 3), Variant)
    # the odd side accumulates into a second buffer: two slots
    split = ALTERNATING.replace("T.tile.sub(acc, acc, buf)", "T.tile.sub(other, other, buf)")
    r = pipeline.set_depth(split, 3)
    assert isinstance(r, Refusal) and "one of 2 slots" in r.reason, r
