"""达目标: the best latency is at or under the target (`--target-us`, DESIGN.md, tune.yaml)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class TargetReached:
    name = "达目标"
    english = "target reached"

    def check(self, ctx: StopContext) -> bool:
        target, best = ctx.limits.target_us, ctx.state.best_us
        return target is not None and best is not None and best <= target

    def explain(self, limits: Limits) -> str:
        if limits.target_us is None:
            return self.english
        return f"target {limits.target_us:g} us reached"
