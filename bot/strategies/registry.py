"""Every strategy tunebot knows, by catalog id: the one list to extend.

A new strategy is one module defining an object that satisfies
bot/strategies/protocol.py's `Strategy`, plus one line below (docs/architecture.md).
The catalog, config validation, the planner and the records all read this dict.
"""

from __future__ import annotations

from bot.strategies import builtin
from bot.strategies.protocol import Strategy

STRATEGIES: dict[str, Strategy] = {
    s.entry.id: s
    for s in (
        builtin.BLOCK_SIZE,
        builtin.PIPELINE_DEPTH,
        builtin.MULTI_BUFFER,
        builtin.VECTORIZE,
        builtin.DATA_REUSE,
        builtin.FEWER_BUFFERS,
        builtin.VPREFIX,
    )
}
