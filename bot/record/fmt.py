"""Number and table-cell formatting shared by opt_log.md, the report and status tables.

Canonical forms (render(parse(x)) == x relies on them):
- latency: 2 decimals, no unit inside table cells ("12.34"); "-" when not measured;
- gain: 1 decimal with an explicit sign and a percent sign ("+12.3%", "-4.0%"); "-" when unknown.
"""

from __future__ import annotations

import math
import re

MISSING = "-"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")


def gain_pct(reference_us: float | None, latency_us: float | None) -> float | None:
    """Relative speed-up in percent: positive = faster than the reference.

    None when either side is unknown (not measured) or the reference is 0.
    """
    if not reference_us or latency_us is None:
        return None
    return (reference_us - latency_us) / reference_us * 100.0


def fmt_us(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}"


def fmt_pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.1f}%"


def parse_number(text: str) -> float | None:
    """A plain decimal number, or None if `text` is not one (nan/inf are not numbers here)."""
    text = text.strip()
    if not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_us(text: str) -> float | None:
    """'12.34', '12.34 us' or '-' (None). Raises ValueError for anything else."""
    text = text.strip()
    if text.endswith("us"):
        text = text[:-2].strip()
    if text == MISSING:
        return None
    value = parse_number(text)
    if value is None:
        raise ValueError("expected a latency like '12.34' (microseconds) or '-'")
    return value


def parse_pct(text: str) -> float | None:
    """'+12.3%', '12.3 %', '-4%' or '-' (None). Raises ValueError for anything else."""
    text = text.strip()
    if text == MISSING:
        return None
    if not text.endswith("%"):
        raise ValueError("expected a percentage like '+12.3%' or '-'")
    value = parse_number(text[:-1])
    if value is None:
        raise ValueError("expected a percentage like '+12.3%' or '-'")
    return value


def one_line(text: str) -> str:
    """Record fields are single lines: line breaks become spaces, ends are stripped."""
    return " ".join(text.replace("\r", "\n").split("\n")).strip()


def escape_cell(text: str) -> str:
    """Markdown table cell: backslash and pipe are backslash-escaped (GitHub renders both)."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|")


def split_row(line: str) -> list[str] | None:
    """Cells of a markdown table row, unescaped and stripped; None if `line` is not a row."""
    line = line.strip()
    if not line.startswith("|"):
        return None
    cells: list[str] = []
    current: list[str] = []
    chars = iter(line[1:])
    closed = False
    for ch in chars:
        closed = False
        if ch == "\\":
            nxt = next(chars, "")
            # only \\ and \| are our escapes; keep any other backslash literally
            current.append(nxt if nxt in ("\\", "|") else ch + nxt)
        elif ch == "|":
            cells.append("".join(current).strip())
            current = []
            closed = True
        else:
            current.append(ch)
    if not closed:  # tolerate a missing trailing pipe
        cells.append("".join(current).strip())
    return cells


def is_separator_row(cells: list[str]) -> bool:
    return bool(cells) and all(re.fullmatch(r":?-+:?", c) for c in cells)
