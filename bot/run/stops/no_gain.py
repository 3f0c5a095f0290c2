"""连续无提升: `patience` different things tried without a gain since the last win
(bot.run.state.patience_count)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class NoGain:
    name = "连续无提升"
    english = "no gain from several different things tried"

    def check(self, ctx: StopContext) -> bool:
        patience = ctx.limits.patience
        return patience is not None and ctx.state.no_gain_streak >= patience

    def explain(self, limits: Limits) -> str:
        if not limits.patience:
            return self.english
        return f"no gain from {limits.patience} different things tried, patience {limits.patience}"
