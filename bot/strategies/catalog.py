"""The strategy catalog: one row per optimization the bot knows, read from the registry.

references/strategies.md renders the same table for people; a test keeps
the two in step. Expected gains are the seed's figures (what an engineer can
hope for when the strategy applies), not promises; the planner multiplies
them by the repository's own evidence (bot/strategies/evidence.py).
"""

from __future__ import annotations

from bot.strategies.protocol import KINDS, Entry
from bot.strategies.registry import STRATEGIES

__all__ = ["CATALOG", "IDS", "KINDS", "Entry", "get", "is_style", "markdown_table", "unknown_ids"]

CATALOG: tuple[Entry, ...] = tuple(
    sorted((s.entry for s in STRATEGIES.values()), key=lambda e: e.priority)
)
IDS: tuple[str, ...] = tuple(e.id for e in CATALOG)


def get(strategy_id: str) -> Entry:
    """The catalog entry `strategy_id`; KeyError names the known ids."""
    try:
        return STRATEGIES[strategy_id].entry
    except KeyError:
        raise KeyError(f"unknown strategy '{strategy_id}'; known: {', '.join(IDS)}") from None


def is_style(strategy_id: str) -> bool:
    """True for entries whose verdict is "style": never an improvement."""
    s = STRATEGIES.get(strategy_id)
    return bool(s and s.entry.style_only)


def unknown_ids(ids: tuple[str, ...] | list[str]) -> list[str]:
    """The ids in `ids` that are not in the catalog (for clear config errors)."""
    return [i for i in ids if i not in STRATEGIES]


def markdown_table() -> str:
    """The catalog as the table kept in references/strategies.md."""
    lines = [
        "| id | strategy | when | expected gain | kernel kinds | priority | applied by |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in CATALOG:
        gain = (
            "style only, no expected gain" if s.gain is None else f"{s.gain[0]:.0%}-{s.gain[1]:.0%}"
        )
        lines.append(
            f"| `{s.id}` | {s.title} | {s.when} | {gain} | {', '.join(s.kinds)} "
            f"| {s.priority} | {s.applied} |"
        )
    return "\n".join(lines) + "\n"
