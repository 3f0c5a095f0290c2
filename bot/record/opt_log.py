"""opt_log.md: the seed's per-op tuning log, rendered and parsed (round-trip exact).

Format (docs/records.md): a title, the 基线 section, the 迭代记录 table and, once
the run has stopped, the 结论 section. Numbers use the canonical forms of
bot.record.fmt, so render_opt_log(parse_opt_log(text)) == text for rendered text.
Parsing tolerates hand edits (blank lines, spaces, full-width colons, a missing
outer pipe) and names the line of anything it cannot read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from bot.record.errors import RecordFormatError
from bot.record.fmt import (
    escape_cell,
    fmt_pct,
    fmt_us,
    is_separator_row,
    one_line,
    parse_pct,
    parse_us,
    split_row,
)
from bot.run.stops import STOP_REASONS  # the names of the registered stop rules
from bot.strategies import explain

Accuracy = Literal["pass", "fail", "timeout", "error"]
ACCURACY_VALUES: tuple[str, ...] = ("pass", "fail", "timeout", "error")

TITLE_SUFFIX = "性能调优日志"
SEC_BASELINE, SEC_ITERS, SEC_CONCLUSION = "基线", "迭代记录", "结论"
TABLE_HEADER = ("iter", "策略", "latency(us)", "提升", "精度")  # the seed's columns, unchanged
EXTRA_HEADER = ("verdict", "reason")  # tunebot's trailing columns (a seed-only table still parses)
_SEPARATOR = "|------|------|-------------|------|------|"
_EXTRA_SEPARATOR = "---------|--------|"
BASELINE_ITER_LABEL = "baseline"


@dataclass
class LogRow:
    iter: int
    strategy: str  # strategy + short change, e.g. "block_size BLOCK_M 64->128"
    latency_us: float | None  # None: not measured (L0 failed, timeout, error)
    gain_pct: float | None  # vs the baseline, positive = faster; None when not measured
    accuracy: Accuracy
    verdict: str | None = (
        None  # the loop's verdict (better, not_better, fail_l0, ...); None: not given
    )
    reason: str | None = None  # one line: why that verdict


@dataclass
class Conclusion:
    best_source: (
        str  # the seed's file name of the best version: always "<op>.py" (perf_opt/<op>.py)
    )
    best_iter: int | None  # None: the baseline stayed best
    final_us: float | None
    total_gain_pct: float | None
    stop_reason: str  # one of STOP_REASONS


@dataclass
class OptLog:
    op: str
    baseline_us: float | None
    baseline_source: str  # e.g. "rms_norm.py"
    rows: list[LogRow] = field(default_factory=list)
    conclusion: Conclusion | None = None  # None until the run stops: the 结论 section is omitted
    not_planned: list[str] = field(default_factory=list)  # bot/strategies/explain.py


def render_opt_log(log: OptLog) -> str:
    """The seed's layout; the verdict and reason columns follow the seed's five when any row has them."""
    extra = any(row.verdict is not None or row.reason is not None for row in log.rows)
    lines = [
        f"# {one_line(log.op)} {TITLE_SUFFIX}",
        "",
        f"## {SEC_BASELINE}",
        f"- latency: {fmt_us(log.baseline_us)} us",
        f"- 来源: {one_line(log.baseline_source)}",
        "",
        f"## {SEC_ITERS}",
        "| " + " | ".join(TABLE_HEADER + (EXTRA_HEADER if extra else ())) + " |",
        _SEPARATOR + (_EXTRA_SEPARATOR if extra else ""),
    ]
    for row in log.rows:
        if row.accuracy not in ACCURACY_VALUES:
            raise ValueError(
                f"iter {row.iter}: accuracy must be one of {ACCURACY_VALUES}, got {row.accuracy!r}"
            )
        cells = [
            str(row.iter),
            escape_cell(row.strategy),
            fmt_us(row.latency_us),
            fmt_pct(row.gain_pct),
            row.accuracy,
        ]
        if extra:
            cells += [
                escape_cell(one_line(row.verdict or "-")),
                escape_cell(one_line(row.reason or "-")),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    c = log.conclusion
    if c is not None:
        if c.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {c.stop_reason!r}")
        which = BASELINE_ITER_LABEL if c.best_iter is None else f"iter {c.best_iter}"
        lines += [
            "",
            f"## {SEC_CONCLUSION}",
            f"- 最优版本: {one_line(c.best_source)} ({which})",
            f"- 最终 latency: {fmt_us(c.final_us)} us",
            f"- 总提升: {fmt_pct(c.total_gain_pct)}",
            f"- 中止原因: {c.stop_reason}",
        ]
    lines += explain.render_section(log.not_planned)
    return "\n".join(lines) + "\n"


class _Reader:
    """Line-numbered access to the text, with errors that name the line."""

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    def error(self, line: int | None, problem: str, fix: str) -> RecordFormatError:
        return RecordFormatError(self.source, line, problem, fix)


_HEADING = re.compile(r"^(#{1,6})\s*(.*?)\s*$")
_BULLET = re.compile(r"^[-*]\s*([^:：]+?)\s*[:：]\s*(.*?)\s*$")
_BEST = re.compile(
    r"^(.*?)\s*[(（]\s*(?:iter\s*(\d{1,9})|(baseline))\s*[)）]$", re.IGNORECASE | re.ASCII
)
_ITER = re.compile(r"[0-9]{1,9}")  # ASCII digits only: '²'.isdigit() is true but int('²') fails


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else text[:keep] + "..."


def _cells(text: str) -> list[str] | None:
    """A table row's cells; the outer pipes may be missing (docs/records.md)."""
    if not text.startswith("|") and "|" in text:
        text = "|" + text
    return split_row(text)


def _sections(r: _Reader) -> tuple[str, dict[str, list[tuple[int, str]]]]:
    """The op from the title and, per '## ' section, its non-blank (line number, text) lines."""
    op: str | None = None
    sections: dict[str, list[tuple[int, str]]] = {}
    current: str | None = None
    for number, raw in enumerate(r.lines, start=1):
        text = raw.strip()
        if not text:
            continue
        m = _HEADING.match(text)
        if m and len(m.group(1)) == 1:
            if op is not None:
                raise r.error(
                    number, "a second '# ' title", "keep one '# <op> 性能调优日志' line at the top"
                )
            if (
                not m.group(2).endswith(TITLE_SUFFIX)
                or not m.group(2)[: -len(TITLE_SUFFIX)].strip()
            ):
                raise r.error(
                    number,
                    f"title {text!r} is not '# <op> {TITLE_SUFFIX}'",
                    f"write '# <op> {TITLE_SUFFIX}'",
                )
            op = m.group(2)[: -len(TITLE_SUFFIX)].strip()
            continue
        if m and len(m.group(1)) == 2:
            current = m.group(2)
            if current not in (SEC_BASELINE, SEC_ITERS, SEC_CONCLUSION, explain.SECTION):
                raise r.error(
                    number,
                    f"unknown section '## {current}'",
                    f"sections are '## {SEC_BASELINE}', '## {SEC_ITERS}' and '## {SEC_CONCLUSION}'",
                )
            if current in sections:
                raise r.error(
                    number,
                    f"section '## {current}' appears twice",
                    "merge the two sections into one",
                )
            sections[current] = []
            continue
        if op is None:
            raise r.error(
                number, "text before the title", f"start the file with '# <op> {TITLE_SUFFIX}'"
            )
        if current is None:
            raise r.error(
                number,
                "text outside any section",
                f"put it under '## {SEC_BASELINE}' or '## {SEC_ITERS}'",
            )
        sections[current].append((number, text))
    if op is None:
        raise r.error(
            None, "the title line is missing", f"start the file with '# <op> {TITLE_SUFFIX}'"
        )
    for required in (SEC_BASELINE, SEC_ITERS):
        if required not in sections:
            raise r.error(
                None, f"section '## {required}' is missing", f"add the '## {required}' section"
            )
    return op, sections


def _bullets(
    r: _Reader, section: str, lines: list[tuple[int, str]], keys: tuple[str, ...]
) -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    for number, text in lines:
        m = _BULLET.match(text)
        if not m:
            raise r.error(
                number,
                f"expected '- <key>: <value>' in '## {section}', got {text!r}",
                f"use one of: {', '.join(keys)}",
            )
        key = " ".join(m.group(1).split())
        if key not in keys:
            raise r.error(
                number, f"unknown key '{key}' in '## {section}'", f"use one of: {', '.join(keys)}"
            )
        if key in found:
            raise r.error(number, f"key '{key}' appears twice", "keep one line per key")
        found[key] = (number, m.group(2))
    last = lines[-1][0] if lines else None
    for key in keys:
        if key not in found:
            raise r.error(
                last,
                f"'- {key}: ...' is missing from '## {section}'",
                f"add the line '- {key}: ...'",
            )
    return found


def _us(r: _Reader, number: int, value: str, what: str) -> float | None:
    try:
        return parse_us(value)
    except ValueError as exc:
        raise r.error(
            number, f"{what}: {_short(value)!r} is not a latency", f"{exc}, e.g. '12.34 us'"
        ) from None


def _pct(r: _Reader, number: int, value: str, what: str) -> float | None:
    try:
        return parse_pct(value)
    except ValueError as exc:
        raise r.error(number, f"{what}: {_short(value)!r} is not a percentage", str(exc)) from None


def _rows(r: _Reader, lines: list[tuple[int, str]]) -> list[LogRow]:
    if not lines:
        raise r.error(
            None,
            "the 迭代记录 table header is missing",
            "add '| " + " | ".join(TABLE_HEADER) + " |'",
        )
    number, text = lines[0]
    header = _cells(text)
    if header is None or tuple(header) not in (TABLE_HEADER, TABLE_HEADER + EXTRA_HEADER):
        raise r.error(
            number,
            f"table header is {_short(text)!r}",
            "use '| "
            + " | ".join(TABLE_HEADER + EXTRA_HEADER)
            + " |' (or the seed's first five columns)",
        )
    width = len(header)
    if len(lines) < 2 or not is_separator_row(_cells(lines[1][1]) or []):
        raise r.error(
            lines[1][0] if len(lines) > 1 else number,
            "the table separator row is missing",
            f"put '{_SEPARATOR}' under the header",
        )
    rows: list[LogRow] = []
    for number, text in lines[2:]:
        cells = _cells(text)
        if cells is None or len(cells) != width:
            raise r.error(
                number,
                f"table row needs {width} cells, got {_short(text, 80)!r}",
                "write '| <iter> | <策略> | <latency> | <提升> | <精度> |"
                + (" <verdict> | <reason> |" if width > len(TABLE_HEADER) else "")
                + "' and escape '|' in text as '\\|'",
            )
        it, strategy, latency, gain, accuracy = cells[: len(TABLE_HEADER)]
        verdict, reason = (cells[len(TABLE_HEADER) :] + ["-", "-"])[:2]
        if not _ITER.fullmatch(it):
            raise r.error(
                number,
                f"iter {it[:20]!r} is not a whole number (up to 9 digits)",
                "write the iteration number, e.g. '3'",
            )
        if any(row.iter == int(it) for row in rows):
            raise r.error(number, f"iter {it} appears twice", "keep one row per iteration")
        if accuracy not in ACCURACY_VALUES:
            raise r.error(
                number,
                f"精度 {accuracy!r} is not valid",
                f"use one of: {', '.join(ACCURACY_VALUES)}",
            )
        rows.append(
            LogRow(
                int(it),
                strategy,
                _us(r, number, latency, "latency(us)"),
                _pct(r, number, gain, "提升"),
                accuracy,  # type: ignore[arg-type]
                None if verdict == "-" else verdict,
                None if reason == "-" else reason,
            )
        )
    return rows


def parse_opt_log(text: str, source: str = "opt_log.md") -> OptLog:
    """Read an opt_log.md; `source` names the file in errors (RecordFormatError, exit code 2)."""
    r = _Reader(text, source)
    op, sections = _sections(r)
    base = _bullets(r, SEC_BASELINE, sections[SEC_BASELINE], ("latency", "来源"))
    baseline_us = _us(r, *base["latency"], "baseline latency")
    rows = _rows(r, sections[SEC_ITERS])
    conclusion = None
    if SEC_CONCLUSION in sections:
        c = _bullets(
            r,
            SEC_CONCLUSION,
            sections[SEC_CONCLUSION],
            ("最优版本", "最终 latency", "总提升", "中止原因"),
        )
        number, best = c["最优版本"]
        m = _BEST.match(best)
        if not m or not m.group(1):
            raise r.error(
                number,
                f"最优版本 {_short(best)!r} is not '<file> (iter N)' or '<file> (baseline)'",
                "write e.g. 'rms_norm.py (iter 3)'",
            )
        number, reason = c["中止原因"]
        if reason not in STOP_REASONS:
            raise r.error(
                number,
                f"中止原因 {reason!r} is not valid",
                f"use one of: {' / '.join(STOP_REASONS)}",
            )
        conclusion = Conclusion(
            best_source=m.group(1),
            best_iter=int(m.group(2)) if m.group(2) else None,
            final_us=_us(r, *c["最终 latency"], "最终 latency"),
            total_gain_pct=_pct(r, *c["总提升"], "总提升"),
            stop_reason=reason,
        )
    return OptLog(
        op=op,
        baseline_us=baseline_us,
        baseline_source=base["来源"][1],
        rows=rows,
        conclusion=conclusion,
        not_planned=explain.parse_section(sections.get(explain.SECTION, [])),
    )
