"""The completion report (the seed's "Stage Result" block), rendered and parsed round-trip.

Numbers use bot.record.fmt's canonical forms: latencies "12.34 us" ("-" when
unknown), improvement "+12.3%". skills_consulted is a ", "-separated list of
paths ("none" when empty), so a path may not contain a comma.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.record.errors import RecordFormatError
from bot.record.fmt import fmt_pct, fmt_us, one_line, parse_pct, parse_us
from bot.run.stops import STOP_REASONS

HEADING = "## Stage Result"
NONE = "none"
KEYS: tuple[str, ...] = (
    "stage",
    "project",
    "operator",
    "output",
    "verdict",
    "iterations",
    "baseline_latency",
    "final_latency",
    "improvement",
    "stop_reason",
    "skills_consulted",
    "summary",
    "issues",
)


def default_output(project: str, operator: str) -> str:
    return f"examples/{project}/{operator}/perf_opt/{operator}.py"


@dataclass
class CompletionReport:
    """Field names follow the report's keys. After construction `output` is always set,
    `skills_consulted` holds no "none" entries and `issues` is one string ("none" if empty),
    so parse_report(render_report(r)) == r."""

    project: str
    operator: str
    iterations: int
    baseline_latency: float | None  # us; None: not measured
    final_latency: float | None  # us
    improvement: float | None  # percent vs the baseline, positive = faster
    stop_reason: str  # one of STOP_REASONS
    summary: str  # one sentence
    skills_consulted: list[str] = field(default_factory=list)  # paths of references used
    issues: str | list[str] = NONE  # a list is joined with "; "
    output: str | None = None  # None: derived from project/operator (see default_output)
    stage: int = 4
    verdict: str = "TUNING_COMPLETED"

    def __post_init__(self) -> None:
        if self.output is None:
            self.output = default_output(self.project, self.operator)
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {self.stop_reason!r}")
        self.issues = _issues_text(self.issues)
        self.skills_consulted = [
            one_line(p) for p in self.skills_consulted if one_line(p).lower() != NONE
        ]
        for path in self.skills_consulted:
            if "," in path or not path:
                raise ValueError(
                    f"skills_consulted entry {path!r} must be a non-empty path without commas"
                )


def _issues_text(issues: str | list[str]) -> str:
    if isinstance(issues, str):
        issues = [issues]
    return (
        "; ".join(one_line(i) for i in issues if one_line(i) and one_line(i).lower() != NONE)
        or NONE
    )


def render_report(report: CompletionReport) -> str:
    skills = ", ".join(one_line(p) for p in report.skills_consulted) or NONE
    values = {
        "stage": str(report.stage),
        "project": one_line(report.project),
        "operator": one_line(report.operator),
        "output": one_line(report.output or ""),
        "verdict": one_line(report.verdict),
        "iterations": str(report.iterations),
        "baseline_latency": f"{fmt_us(report.baseline_latency)} us",
        "final_latency": f"{fmt_us(report.final_latency)} us",
        "improvement": fmt_pct(report.improvement),
        "stop_reason": report.stop_reason,
        "skills_consulted": skills,
        "summary": one_line(report.summary),
        "issues": _issues_text(report.issues),
    }
    return "\n".join([HEADING] + [f"- {k}: {values[k]}" for k in KEYS]) + "\n"


_BULLET = re.compile(r"^[-*]\s*([A-Za-z_]+)\s*[:：]\s*(.*?)\s*$")


def parse_report(text: str, source: str = "completion report") -> CompletionReport:
    """Read the report back, also from inside a larger markdown body (a PR description):
    the block starts at '## Stage Result' and ends at the next heading or the end."""

    def error(line: int | None, problem: str, fix: str) -> RecordFormatError:
        return RecordFormatError(source, line, problem, fix)

    lines = text.splitlines()
    start = next((i for i, raw in enumerate(lines) if raw.strip() == HEADING), None)
    if start is None:
        raise error(
            None, f"'{HEADING}' heading not found", f"the report starts with a '{HEADING}' line"
        )
    found: dict[str, tuple[int, str]] = {}
    for i in range(start + 1, len(lines)):
        number, raw = i + 1, lines[i].strip()
        if not raw:
            continue
        if raw.startswith("#"):
            break
        m = _BULLET.match(raw)
        if not m:
            raise error(
                number,
                f"expected '- <key>: <value>', got {raw!r}",
                f"use the keys: {', '.join(KEYS)}",
            )
        key, value = m.group(1), m.group(2)
        if key not in KEYS:
            raise error(number, f"unknown key '{key}'", f"use the keys: {', '.join(KEYS)}")
        if key in found:
            raise error(number, f"key '{key}' appears twice", "keep one line per key")
        found[key] = (number, value)
    for key in KEYS:
        if key not in found:
            raise error(start + 1, f"'- {key}: ...' is missing", f"add the line '- {key}: ...'")

    def integer(key: str) -> int:
        number, value = found[key]
        if not value.isdigit():
            raise error(
                number, f"{key} {value!r} is not a whole number", f"write e.g. '- {key}: 4'"
            )
        return int(value)

    def latency(key: str) -> float | None:
        number, value = found[key]
        try:
            return parse_us(value)
        except ValueError as exc:
            raise error(
                number, f"{key} {value!r} is not a latency", f"{exc}, e.g. '12.34 us'"
            ) from None

    number, improvement = found["improvement"]
    try:
        improvement_pct = parse_pct(improvement)
    except ValueError as exc:
        raise error(number, f"improvement {improvement!r} is not a percentage", str(exc)) from None
    number, reason = found["stop_reason"]
    if reason not in STOP_REASONS:
        raise error(
            number,
            f"stop_reason {reason!r} is not valid",
            f"use one of: {' / '.join(STOP_REASONS)}",
        )
    skills_text = found["skills_consulted"][1]
    skills = (
        []
        if skills_text.lower() == NONE
        else [p.strip() for p in skills_text.split(",") if p.strip()]
    )
    return CompletionReport(
        project=found["project"][1],
        operator=found["operator"][1],
        iterations=integer("iterations"),
        baseline_latency=latency("baseline_latency"),
        final_latency=latency("final_latency"),
        improvement=improvement_pct,
        stop_reason=reason,
        summary=found["summary"][1],
        skills_consulted=skills,
        issues=found["issues"][1] or NONE,
        output=found["output"][1],
        stage=integer("stage"),
        verdict=found["verdict"][1],
    )
