"""heldout_m first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import multibuffer
from bot.strategies.base import Refusal, Variant

FLAG_OFF_WITH_REASON = """
import tilelang
import tilelang.language as T


@tilelang.jit(
    target="npuir",
    pass_configs={
        # Keep auto multi-buffering off here: the doubled buffers of the three
        # matmuls overflow the on-chip budget.
        "npuir.enable_auto_multi_buffer": False,
    },
)
def scale(n, block=64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block) as bx:
            buf = T.alloc_shared((block,), "float16")
            T.copy(X[bx * block], buf)
            T.copy(buf, Y[bx * block])

    return main
"""


def test_a_flag_turned_off_with_a_stated_reason_is_not_turned_on():
    r = multibuffer.set_flag(FLAG_OFF_WITH_REASON, True)
    assert isinstance(r, Refusal)
    assert "on purpose" in r.reason and "on-chip budget" in r.reason


def test_a_flag_turned_off_without_a_reason_is_still_turned_on():
    bare = FLAG_OFF_WITH_REASON.replace(
        "        # Keep auto multi-buffering off here: the doubled buffers of the three\n"
        "        # matmuls overflow the on-chip budget.\n",
        "",
    )
    assert isinstance(multibuffer.set_flag(bare, True), Variant)
    # a trailing comment on the entry states a reason as well
    trailing = bare.replace(
        '": False,', '": False,  # off: the manual double buffer below replaces it'
    )
    assert isinstance(multibuffer.set_flag(trailing, True), Refusal)
    # a comment about something else is not a reason for this flag
    other = bare.replace("    pass_configs={\n", "    pass_configs={\n        # tuned on 910B\n")
    assert isinstance(multibuffer.set_flag(other, True), Variant)
