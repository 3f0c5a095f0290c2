"""已取消: `tunebot cancel` left the cancel flag beside the records, or the forge says `/tune cancel`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class Cancelled:
    name = "已取消"
    english = "cancelled"

    def check(self, ctx: StopContext) -> bool:
        return ctx.cancel_file.exists() or ctx.forge_cancel()

    def explain(self, limits: Limits) -> str:
        return self.english
