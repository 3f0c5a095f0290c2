"""What a run will not try, and why: one line per dropped knob, loop, flag or refused value.

The same lines appear in three places:

- the dry run, under the plan (Planner.plan);
- the stop record of results.jsonl (`not_planned`), written by the loop from
  `not_planned(planner, ctx)` for the best source when the run stops;
- from that record, opt_log.md (a `## 未计划` section of one bullet per line,
  read back by `parse_section`) and the completion report's issues
  (`report_issues`), so a run that tried nothing says why instead of
  "issues: none".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the planner imports the strategies; this module stays light for bot/record
    from bot.run.records import Stop
    from bot.strategies.base import Attempt, PlanContext
    from bot.strategies.planner import Planner

SECTION = "未计划"  # opt_log.md section: what was not planned, and why


def not_planned(planner: Planner, ctx: PlanContext) -> list[str]:
    """Sentences for every knob, value, loop or flag of `ctx.best_source` left out of its plan.

    Whole strategies left out by configuration (no external proposer, another kernel kind)
    are in the dry run's plan only: they say nothing about this kernel."""
    strategies, _ = planner.allowed(ctx)
    _, dropped = planner.specs(ctx.best_source, strategies)
    refused = planner.once_refused(ctx.best_source, strategies)
    lines = [*dropped, *refused, *failed_moves(ctx.history)]
    return list(dict.fromkeys(_one_line(s) for s in lines if s.strip()))


def failed_moves(history: tuple[Attempt, ...] | list[Attempt]) -> list[str]:
    """One line per knob value whose variant failed L0, timed out or errored: the planner never
    plans it again, from any parent, and says so here rather than leaving it out silently."""
    from bot.strategies.space import FAILED_VERDICTS

    lines = []
    for a in history:
        if a.verdict in FAILED_VERDICTS and a.change.knob is not None:
            lines.append(
                f"{a.change.strategy}: {a.change.knob}={a.change.new} not tried again: its "
                f"variant ended in {a.verdict} ({a.change.description}); a failed move is never "
                "retried from any parent"
            )
    return list(dict.fromkeys(lines))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def from_stop(stop: Stop | None) -> list[str]:
    """The lines a stop record carries (none for runs recorded before the field existed)."""
    found = stop.not_planned if stop is not None else []
    return [_one_line(str(s)) for s in found if str(s).strip()]


def render_section(lines: list[str]) -> list[str]:
    """opt_log.md lines of the section (nothing when the list is empty)."""
    if not lines:
        return []
    return ["", f"## {SECTION}", *(f"- {_one_line(s)}" for s in lines)]


def parse_section(lines: list[tuple[int, str]]) -> list[str]:
    """The section's bullets back, as rendered (a line without '- ' is kept as written)."""
    return [text[2:].strip() if text.startswith("- ") else text for _, text in lines]


def report_issues(lines: list[str], limit: int = 12) -> list[str]:
    """The completion report's issue entries: a count, then the first `limit` lines."""
    if not lines:
        return []
    shown = lines[:limit]
    more = f" (+{len(lines) - limit} more in opt_log.md)" if len(lines) > limit else ""
    return [f"not planned ({len(lines)}){more}: " + shown[0], *shown[1:]]
