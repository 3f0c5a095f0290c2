"""Rows of vector (UB) tiles in whole 32-byte blocks.

The Ascend vector unit and the copies into and out of the Unified Buffer work in 32-byte
blocks: a row of a 2-D UB tile starts on a 32-byte boundary and the DataCopy that fills it
moves whole blocks. A knob that makes the last dimension of a UB tile a part block (8 fp16
elements, 16 bytes) leaves each row's copy half a block: whether the toolchain pads it or
mis-addresses it is not documented upstream, and the hand-written expectations of the
upstream corpus (tests/data/upstream_kernels/expected.yaml, most recent sets) take the
32-byte row as a floor. A tile that narrow is never the fast one either, so the move is
not worth a compile and a profiling run.

So a move is refused when it changes the last dimension of a 2-D (or wider) buffer in UB
from whole 32-byte blocks to a part block; a `(1, N)` row counts as a tile, as the recent
expectations hold it (tns_if_yield_dev). A buffer whose rows are already a part block at
the current value is left alone: the file shows its toolchain handles that row. A `@T.macro`'s
buffers count: its body runs inside the kernel that calls it. 1-D
buffers (per-row statistics, scale vectors) are not judged: the corpus's expectations take
short vectors to work (padded copies), and the convention is about tile rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.strategies.capacity import Buffer, buffers, kernel_buffers, macros
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function

BLOCK_BYTES = 32


@dataclass
class RowCheck:
    """Refuses a knob value that cuts the rows of a UB tile into part 32-byte blocks."""

    name: str
    tiles: list[Buffer]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for b in self.tiles:
            now = evaluate(b.dims[-1], env(b.chain, current))
            new = evaluate(b.dims[-1], env(b.chain, value))
            if type(now) is not int or type(new) is not int or now == new or new <= 0:
                continue
            now_bytes, new_bytes = now * b.dtype_bytes, new * b.dtype_bytes
            if now_bytes % BLOCK_BYTES or not new_bytes % BLOCK_BYTES:
                continue  # a part block already (the toolchain handles it), or still whole
            return (
                f"{self.name}={value}: the UB tile `{b.name}` (line {b.line}) would have rows "
                f"of {new} elements, {new_bytes} bytes, not a whole number of the "
                f"{BLOCK_BYTES}-byte blocks the vector unit and its copies work in; the "
                f"current {current} gives {now_bytes}-byte rows"
            )
        return None


def row_check(f: Facts, name: str, factories: list[Function]) -> RowCheck | None:
    """The 32-byte row rule of knob `name` over the UB tiles of `factories`' kernels, those
    a `@T.macro` of the factory allocates included."""
    tiles = [
        b
        for factory in factories
        for b in [
            *buffers(f, factory),
            *(b for m in macros(f, factory) for b in kernel_buffers(f, m)),
        ]
        if b.memory == "UB" and len(b.dims) >= 2
    ]
    return RowCheck(name, tiles) if tiles else None
