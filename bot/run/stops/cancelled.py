"""已取消: `tunebot cancel` (or `/tune cancel`) left the cancel flag beside the records."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.run.stops import Limits, StopContext


class Cancelled:
    name = "已取消"
    english = "cancelled"

    def check(self, ctx: StopContext) -> bool:
        return ctx.cancel_file.exists()

    def explain(self, limits: Limits) -> str:
        return self.english
