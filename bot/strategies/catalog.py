"""The strategy catalog: one record per optimization the bot knows.

references/strategies.md renders the same table for people; a test keeps
the two in step. Expected gains are the seed's figures (what an engineer can
hope for when the strategy applies), not promises; the planner multiplies
them by the repository's own evidence (bot/strategies/evidence.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KernelKind = Literal["vector", "cube", "mix"]
Applied = Literal["transform", "proposer"]
KINDS: tuple[str, ...] = ("vector", "cube", "mix")


@dataclass(frozen=True)
class Strategy:
    id: str
    title: str
    when: str  # the situation in which it helps
    gain: tuple[float, float] | None  # expected relative gain (low, high); None: no speed effect
    kinds: tuple[str, ...]  # kernel kinds it applies to
    priority: int  # 1 = tried first (before evidence reorders)
    applied: Applied  # "transform": a libcst rule; "proposer": the external proposer
    style_only: bool = False  # never counted as an improvement (verdict "style")

    @property
    def expected_gain(self) -> float:
        """Midpoint of the expected gain; 0 for style-only entries."""
        if self.gain is None:
            return 0.0
        return (self.gain[0] + self.gain[1]) / 2

    def applies_to(self, kind: str) -> bool:
        return kind in self.kinds


CATALOG: tuple[Strategy, ...] = (
    Strategy(
        id="block_size",
        title="block (tile) size",
        when="memory/compute imbalance: tiles too small to hide latency or too big for UB/L1",
        gain=(0.10, 0.30),
        kinds=("vector", "cube", "mix"),
        priority=1,
        applied="transform",
    ),
    Strategy(
        id="pipeline_depth",
        title="deeper T.Pipelined pipeline (num_stages)",
        when="a loop with several iterations whose copies can overlap compute",
        gain=(0.10, 0.20),
        kinds=("cube", "mix", "vector"),
        priority=2,
        applied="transform",
    ),
    Strategy(
        id="multi_buffer",
        title="double / multi buffer",
        when="copy-in, compute and copy-out of successive tiles can overlap",
        gain=(0.10, 0.15),
        kinds=("vector", "cube", "mix"),
        priority=3,
        applied="transform",
    ),
    Strategy(
        id="vectorize",
        title="scalar T.Parallel loops -> vector ops",
        when="element-wise work written as scalar T.Parallel loops (the real gain behind the v-prefix row)",
        gain=(0.05, 0.15),
        kinds=("vector", "mix"),
        priority=4,
        applied="proposer",
    ),
    Strategy(
        id="data_reuse",
        title="data reuse / registerization",
        when="the same global data is loaded more than once per tile",
        gain=(0.05, 0.15),
        kinds=("vector", "cube", "mix"),
        priority=5,
        applied="proposer",
    ),
    Strategy(
        id="fewer_buffers",
        title="fewer intermediate buffers",
        when="UB pressure: temporaries that could be fused or reused",
        gain=(0.05, 0.10),
        kinds=("vector", "mix"),
        priority=6,
        applied="proposer",
    ),
    Strategy(
        id="vprefix",
        title="v-prefix API instead of npuir_xxx (style only)",
        when="vector kernels calling T.npuir_xxx; T.vxxx is the same function (a plain alias)",
        gain=None,
        kinds=("vector", "mix"),
        priority=7,
        applied="transform",
        style_only=True,
    ),
)

_BY_ID = {s.id: s for s in CATALOG}
IDS: tuple[str, ...] = tuple(s.id for s in CATALOG)


def get(strategy_id: str) -> Strategy:
    """The catalog entry `strategy_id`; KeyError names the known ids."""
    try:
        return _BY_ID[strategy_id]
    except KeyError:
        raise KeyError(f"unknown strategy '{strategy_id}'; known: {', '.join(IDS)}") from None


def is_style(strategy_id: str) -> bool:
    """True for entries whose verdict is "style": never an improvement."""
    entry = _BY_ID.get(strategy_id)
    return bool(entry and entry.style_only)


def unknown_ids(ids: tuple[str, ...] | list[str]) -> list[str]:
    """The ids in `ids` that are not in the catalog (for clear config errors)."""
    return [i for i in ids if i not in _BY_ID]


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
            f"| `{s.id}` | {s.title} | {s.when} | {gain} | {', '.join(s.kinds)} | {s.priority} | {s.applied} |"
        )
    return "\n".join(lines) + "\n"
