"""The heldout_o and issue 13 rules at the edge of the class of code each names.

Each kernel is written for the test: one just outside a rule's class (the rule must not fire:
a refusal would give an untrue reason, a knob kept would be moved wrongly) beside the form the
rule was written for.
"""

from __future__ import annotations

from bot.strategies import inventory


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
