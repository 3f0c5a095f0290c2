"""Shapes an op runs with, declared by name: tune.yaml's `shapes:` and DESIGN.md's shapes section.

They feed the kernel's own rules (bot/strategies/constraints.py, "Kernel constraints" in
docs/strategies.md) for sizes the kernel leaves open: `M = T.symbolic("M")`, a parameter bound
at run time. tune.yaml:

    shapes:
      M: 4096            # one size
      N: [1024, 7168]    # the op runs with each: a rule must hold for every one

DESIGN.md: a section whose heading names shapes or sizes (`## Shapes`, `## 形状`, `## 输入规模`,
`## Problem sizes`, any level), holding `M = 4096` / `M: 4096` / `M ∈ {1024, 4096}` / `M = 1024 / 4096` /
`M, N = 4096, 1024` lines or a table whose first column is the name and second the sizes
(`| M | 1024, 4096 |`); or, anywhere, a line labelled `Shapes:` / `形状：` followed by such
pairs. Reading is lenient (prose that assigns no number to a name is skipped), claims are precise:
a name given a number that is not a size (0, negative, fractional) is an error naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.config.checker import Checker, kind
from bot.config.design import find_numbered_section
from bot.config.schema import DeclaredShape
from bot.errors import ConfigError

TUNE_ORIGIN = "tune.yaml shapes"
EXAMPLE = "write e.g. `M: 4096` or `M: [1024, 4096]` (a whole number > 0, or a list of them)"

_SHAPES_TITLE = re.compile(
    r"^(?!.*(?:block|tile|knob|调优|分块)).*(?:形状|尺寸|规模|维度|shapes?\b|sizes?\b|dimensions?\b)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"(?:shapes?|形状|尺寸|规模)\s*[:：]", re.IGNORECASE)
_TILE_WORD = re.compile(r"(?:block|tile|分块|块)\s*$", re.IGNORECASE)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NUMBER = r"-?\d+(?:\.\d+)?"
_VALUES = rf"{_NUMBER}(?:\s*(?:,|/|、|，|\bor\b|或)\s*{_NUMBER})*"
# without brackets a comma would swallow the next pair (`M = 4096, 1024 heads`): / or 或 、 only
_ALTERNATIVES = rf"{_NUMBER}(?:\s*(?:/|、|\bor\b|或)\s*{_NUMBER})*"
# a product (`4096 x 1024`) or a quantity with a unit (`120 us`, `64 KiB`) is not one size
_NOT_A_SIZE = r"\s*(?:[x×*]|(?:[uμµmn]?s|[KMG]i?B|bytes?|B)\b)"
# `M = 4096`, `M: 4096`, `M ∈ {1024, 4096}`, `M in [1024, 4096]`, `M = 1024 / 4096`
_PAIR = re.compile(
    rf"(?<![\w.])`?(?P<name>{_NAME})`?\s*(?:=|:|：|∈|\bin\b)\s*`?"
    rf"(?:[\[{{(]\s*(?P<listed>{_VALUES})\s*[\]}})]|(?P<plain>{_ALTERNATIVES}))`?"
    rf"(?!\d|\.\d|{_NOT_A_SIZE})"
)
# `M, N, K = 1024, 512, 2048`
_TUPLE = re.compile(
    rf"(?<![\w.])(?P<names>{_NAME}(?:\s*,\s*{_NAME})+)\s*=\s*"
    rf"\(?(?P<values>{_NUMBER}(?:\s*,\s*{_NUMBER})+)\)?(?!\d|\.\d|{_NOT_A_SIZE})"
)
_ROW = re.compile(r"^\s*\|(.*)\|\s*$")


@dataclass(frozen=True)
class Shapes:
    """tune.yaml `shapes:`: a mapping of names to a size or a list of sizes."""

    def read(self, check: Checker, value: object, key: str) -> tuple[DeclaredShape, ...]:
        mapping = check.mapping(value, key)
        out: list[DeclaredShape] = []
        for name, sizes in mapping.items():
            entry = f"{key}.{name}"
            if not isinstance(name, str) or not re.fullmatch(_NAME, name):
                check.fail(
                    entry,
                    f"{name!r} is not a name the kernel could use",
                    "use the Python name the kernel reads, e.g. `M` for `M = T.symbolic('M')`",
                )
            items = sizes if isinstance(sizes, list) else [sizes]
            if not items:
                check.fail(entry, "the list is empty", EXAMPLE)
            for i, v in enumerate(items):
                where = f"{entry}[{i}]" if isinstance(sizes, list) else entry
                if isinstance(v, bool) or not isinstance(v, int):
                    check.fail(where, f"expected a whole number, got {kind(v)}", EXAMPLE)
                if v <= 0:
                    check.fail(where, f"{v} is not a size", EXAMPLE)
            out.append(DeclaredShape(name, tuple(dict.fromkeys(items)), TUNE_ORIGIN))
        return tuple(out)


def design_shapes(text: str, shown: str) -> tuple[DeclaredShape, ...]:
    """The shapes DESIGN.md declares (`shown`: the file as errors name it)."""
    lines = text.splitlines()
    numbered = find_numbered_section(lines, _SHAPES_TITLE) or []
    in_section = {n for n, _ in numbered}
    found: dict[tuple[str, int], list[int]] = {}  # (name, line) -> sizes declared there
    for number, line in enumerate(lines, start=1):
        if number in in_section:
            part = line
        else:
            label = _LABEL.search(line)
            if label is None or _TILE_WORD.search(line[: label.start()]):
                continue  # no label, or `Tile shape: block_M = 128`: the tuning space
            part = line[label.end() :]
        for name, value in _pairs(part):
            sizes = found.setdefault((name, number), [])
            size = _size(value, name, number, shown)
            if size not in sizes:
                sizes.append(size)
    return tuple(
        DeclaredShape(name, tuple(sizes), f"DESIGN.md line {number}")
        for (name, number), sizes in found.items()
    )


def _pairs(line: str) -> list[tuple[str, str]]:
    row = _ROW.match(line)
    if row:
        cells = [c.strip().strip("`").strip() for c in row.group(1).split("|")]
        if len(cells) >= 2 and re.fullmatch(_NAME, cells[0]):
            cell = re.fullmatch(rf"[\[{{(]?\s*({_VALUES})\s*[\]}})]?", cells[1])
            if cell:
                return [(cells[0], v) for v in re.findall(_NUMBER, cell.group(1))]
        return []
    out: list[tuple[str, str]] = []
    for m in _TUPLE.finditer(line):
        names = [n.strip() for n in m.group("names").split(",")]
        values = [v.strip() for v in m.group("values").split(",")]
        if len(names) == len(values):
            out.extend(zip(names, values, strict=True))
    if out:
        return out
    for m in _PAIR.finditer(line):
        listed = m.group("listed")
        for v in re.findall(_NUMBER, listed or m.group("plain")):
            out.append((m.group("name"), v))
    return out


def _size(text: str, name: str, line: int, shown: str) -> int:
    if re.fullmatch(r"\d+", text) and int(text) > 0:
        return int(text)
    raise ConfigError(
        shown,
        f"{name} (line {line})",
        f"{text} is not a size (declared as a shape of the op)",
        f"write a whole number > 0, e.g. `{name} = 4096`, or move the line out of the "
        "shapes section",
    )
