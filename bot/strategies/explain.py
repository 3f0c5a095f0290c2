"""What a run will not try, and why: one line per dropped knob, loop, flag or refused value.

The dry run prints these lines under the plan (Planner.plan); the loop and the
records can print the same list in opt_log.md and the completion report by
calling `not_planned` with the run's planner and best source.
"""

from __future__ import annotations

from bot.strategies.base import PlanContext
from bot.strategies.planner import Planner


def not_planned(planner: Planner, ctx: PlanContext) -> list[str]:
    """Sentences for every strategy, knob, value, loop or flag left out of the plan of `ctx.best_source`."""
    strategies, skipped = planner.allowed(ctx)
    _, dropped = planner.specs(ctx.best_source, strategies)
    return list(dict.fromkeys([*skipped, *dropped]))
