"""策略耗尽: nothing left to try. Fires here after MAX_REJECTIONS proposals were refused before
evaluation; the run also records it when the planner has no move left."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext

MAX_REJECTIONS = 20  # refused proposals per run before the planner counts as exhausted


class Exhausted:
    name = "策略耗尽"
    english = "nothing left to try"

    def check(self, ctx: StopContext) -> bool:
        return ctx.state.rejections >= MAX_REJECTIONS

    def explain(self, limits: Limits) -> str:
        return self.english
