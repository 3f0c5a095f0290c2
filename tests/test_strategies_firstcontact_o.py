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
