"""迭代上限: as many iterations recorded as `max_iters` allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class MaxIters:
    name = "迭代上限"
    english = "iteration limit reached"

    def check(self, ctx: StopContext) -> bool:
        limit = ctx.limits.max_iters
        return limit is not None and len(ctx.state.iterations) >= limit

    def explain(self, limits: Limits) -> str:
        return f"iteration limit {limits.max_iters} reached" if limits.max_iters else self.english
