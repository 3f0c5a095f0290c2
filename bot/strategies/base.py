"""Records shared by the planner and the loop. CONTRACT.

The planner is a pure function of (best-so-far source, history): the loop
rebuilds the history from results.jsonl on resume, so no planner state is
kept anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Verdict = Literal["better", "not_better", "fail_l0", "timeout", "error", "rejected", "style"]


@dataclass(frozen=True)
class Change:
    """One logical change to a kernel source."""

    strategy: str  # catalog id: block_size | pipeline_depth | multi_buffer | vprefix | ...
    description: str  # human text, e.g. "BLOCK_M: 64 -> 128"
    knob: str | None = None
    old: object = None
    new: object = None


@dataclass(frozen=True)
class Variant:
    change: Change
    source: str  # the complete new source text
    diff: str  # unified diff parent -> variant
    source_hash: str  # sha256 of `source`, used to never evaluate a source twice


@dataclass(frozen=True)
class Attempt:
    """What the planner learns from one evaluated (or rejected) variant."""

    change: Change
    source_hash: str
    parent_hash: str
    verdict: Verdict
    gain: float | None = None  # relative gain vs parent, positive = faster


@dataclass(frozen=True)
class PlanContext:
    """Everything `Planner.next` may look at."""

    best_source: str
    history: tuple[Attempt, ...] = ()
    allowed: tuple[str, ...] | None = None  # restrict to these strategy ids
    profile_summary: dict = field(default_factory=dict)  # latest latency/profile facts
    last_failure: str | None = None


@dataclass(frozen=True)
class Refusal:
    """No variant: why not. Added by the strategies work package (additive).

    `exhausted=True`: nothing is left to try (the loop stops: 策略耗尽).
    `exhausted=False` with `attempt` set: a proposal was rejected (invalid
    Python, changed signature, duplicate source...); the loop records
    `attempt` (verdict "rejected") in results.jsonl and calls `next` again,
    and the planner, seeing it in the history, moves on.
    """

    reasons: tuple[str, ...]
    exhausted: bool = False
    strategy: str | None = None
    attempt: Attempt | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


# Implemented by the strategies work package (bot/strategies/planner.py):
#   class Planner:
#       def __init__(self, op: OpConfig, evidence: Evidence | None = None, proposer: Proposer | None = None)
#       def next(self, ctx: PlanContext) -> Variant | Refusal   # Refusal(exhausted=True, reasons) when nothing is left
#       def plan(self, ctx: PlanContext) -> list[str]            # human-readable plan for --dry-run
