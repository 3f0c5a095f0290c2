"""连续无提升: `patience` different things tried without a gain since the last win
(bot.run.state.patience_count), once every knob the planner can move has been tried."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class NoGain:
    name = "连续无提升"
    english = "no gain from several different things tried"

    def check(self, ctx: StopContext) -> bool:
        patience = ctx.limits.patience
        if patience is None or ctx.state.no_gain_streak < patience:
            return False
        return not ctx.untried()  # every knob gets its first probe before patience ends the run

    def explain(self, limits: Limits) -> str:
        if not limits.patience:
            return self.english
        return f"no gain from {limits.patience} different things tried, patience {limits.patience}"
