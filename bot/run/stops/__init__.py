"""Stop rules: when an op run stops, in ONE list.

A rule is an object with a `name` (the seed's term, written to results.jsonl, opt_log.md and
the report), an `english` meaning, `check(ctx) -> bool` and `explain(settings) -> str`. The run
asks every rule in STOP_RULES, in order, before each iteration; the first that fires is the
stop reason. The record modules (bot/record/opt_log.py, report.py, verdicts.py) read the names
from STOP_REASONS, so a new rule is one module in this folder plus one line in STOP_RULES
(docs/architecture.md). tests/test_run_stops.py checks every registered rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.run.stops.cancelled import Cancelled
from bot.run.stops.exhausted import Exhausted
from bot.run.stops.max_iters import MaxIters
from bot.run.stops.no_gain import NoGain
from bot.run.stops.target import TargetReached

if TYPE_CHECKING:
    from pathlib import Path

    from bot.run.state import RunState


@dataclass(frozen=True)
class Limits:
    """The settings a rule may read (bot.config.RunSettings has them all)."""

    max_iters: int | None = None
    patience: int | None = None
    target_us: float | None = None


@dataclass(frozen=True)
class StopContext:
    state: RunState
    limits: Limits
    cancel_file: Path  # exists once `tunebot cancel` asked the run to stop
    forge_cancel: Callable[[], bool] = lambda: (
        False
    )  # the forge says someone cancelled (`/tune cancel`)
    # knobs never tried in this run that the planner could still try (asked only when the
    # patience is spent: a knob not tried yet has not had its most promising move)
    untried: Callable[[], list[str]] = lambda: []


class StopRule(Protocol):
    name: str  # the seed's term (Chinese), recorded as the stop reason
    english: str  # what it means, for people who do not read the term

    def check(self, ctx: StopContext) -> bool:
        """True when the run must stop now, before planning the next iteration."""
        ...

    def explain(self, limits: Limits) -> str:
        """The English meaning with the settings that made it fire."""
        ...


STOP_RULES: list[StopRule] = [TargetReached(), MaxIters(), NoGain(), Cancelled(), Exhausted()]

STOP_REASONS: tuple[str, ...] = tuple(rule.name for rule in STOP_RULES)
RULES: dict[str, StopRule] = {rule.name: rule for rule in STOP_RULES}

TARGET_REACHED = TargetReached.name
MAX_ITERS = MaxIters.name
NO_GAIN = NoGain.name
CANCELLED = Cancelled.name
EXHAUSTED = Exhausted.name  # also the reason when the planner has no move left


def first_firing(ctx: StopContext) -> str | None:
    """The name of the first rule that fires, or None: plan the next iteration."""
    return next((rule.name for rule in STOP_RULES if rule.check(ctx)), None)


def stop_reason_text(
    reason: str,
    *,
    max_iters: int | None = None,
    patience: int | None = None,
    target_us: float | None = None,
) -> str:
    """'连续无提升 (no gain from 3 different things tried, patience 3)': the term and its meaning."""
    rule = RULES.get(reason)
    if rule is None:
        return reason
    return f"{reason} ({rule.explain(Limits(max_iters, patience, target_us))})"
