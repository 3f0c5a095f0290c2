"""The latency target stated in an op's DESIGN.md (its performance-target section), and the
section finder the other DESIGN.md readers share (bot/config/shapes.py)."""

from __future__ import annotations

import re

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_TARGET_TITLE = re.compile(
    r"性能目标|性能指标|目标性能|performance\s+(target|goal)s?|latency\s+(target|goal)s?",
    re.IGNORECASE,
)
_LATENCY = re.compile(r"(\d+(?:\.\d+)?)\s*(us|μs|µs|微秒|ms|毫秒)(?![A-Za-z])", re.IGNORECASE)
_TARGET_WORDS = re.compile(
    r"<=|≤|<|目标|target|goal|不超过|不高于|以内|以下|at most|under|below", re.IGNORECASE
)
_BASELINE_WORDS = re.compile(r"基线|当前|现状|baseline|current", re.IGNORECASE)


def design_target_us(design_md_text: str) -> float | None:
    """The latency target in DESIGN.md's performance-target section, in microseconds.

    Understands headings like `## 性能目标` or `## Performance target` and values like
    `latency <= 120 us`, `目标: 120us`, `120 μs`, `0.5 ms`. A line with a target word
    (目标, target, <=, 以内, ...) wins; lines naming only a baseline are skipped; otherwise
    the first value in the section. None when there is no such section or value.
    """
    section = find_section(design_md_text.splitlines(), _TARGET_TITLE)
    if section is None:
        return None
    fallback: float | None = None
    for line in section:
        values = [(m.start(), _microseconds(m)) for m in _LATENCY.finditer(line)]
        values = [(pos, us) for pos, us in values if us > 0]
        if not values:
            continue
        word = _TARGET_WORDS.search(line)
        if word:
            after = [us for pos, us in values if pos >= word.end()]
            before = [us for pos, us in values if pos < word.start()]
            # "目标: 120us" names the value after the word; "120us 以内" names it before.
            return after[0] if after else before[-1]
        if fallback is None and not _BASELINE_WORDS.search(line):
            fallback = values[0][1]
    return fallback


def _microseconds(match: re.Match) -> float:
    scale = 1000.0 if match.group(2).lower() in ("ms", "毫秒") else 1.0
    return float(match.group(1)) * scale


def find_section(lines: list[str], title: re.Pattern) -> list[str] | None:
    """The lines under the first heading whose text matches `title`, up to the next heading of
    the same or a higher level (subsections included; headings inside code blocks do not count)."""
    numbered = find_numbered_section(lines, title)
    return None if numbered is None else [line for _, line in numbered]


def find_numbered_section(lines: list[str], title: re.Pattern) -> list[tuple[int, str]] | None:
    """`find_section` with each line's 1-based line number in the file."""
    in_fence = False
    level = 0
    section: list[tuple[int, str]] | None = None
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            if section is not None:
                section.append((number, line))
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            if section is not None and len(heading.group(1)) <= level:
                return section
            if section is None and title.search(heading.group(2)):
                level = len(heading.group(1))
                section = []
                continue
        if section is not None:
            section.append((number, line))
    return section
