"""Ascend hardware names as the docs write them, and limits stated in prose.

The docs write one server as "Atlas 800I A2服务器", "Atlas 800I A2 推理服务器",
"A2" or "（A2/A3）", and a card as "Atlas 300I DUO 推理卡", "300I Duo" or "DUO";
all of them get one canonical name here. Short forms are read through a
legend when the doc has one ("A2代表Atlas 800I A2", "DUO代表300I DUO"), else
through DEFAULT_ALIASES. "A5" has no Atlas name in the docs and stays "A5".

A limit is recorded only when a sentence names a product *and* restricts to it
("仅 ... 支持", "支持 A5", "only") or excludes it ("不支持"): a product merely
mentioned (its default compute power, "A3/A5 硬件使用 dynamic dispatcher") is no
limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATLAS = re.compile(
    r"Atlas\s*(\d{3,4}[A-Za-z]{0,2})(?:\s*(A\d|DUO|PRO|SuperPoD)(?![A-Za-z0-9]))?", re.I
)
_ASCEND = re.compile(r"Ascend\s*(9\d{2}[A-Z]{0,2})(?![A-Za-z0-9])")
# Short forms: "A2", "A3", "A5", "DUO"/"Duo", "300I DUO"; never "A2A" (all-to-all) or "W8A8".
_SHORT = re.compile(
    r"(?<![A-Za-z0-9_])(?:Atlas\s*)?(300I\s*(?:DUO|Duo|duo)|DUO|Duo|A[235])(?![A-Za-z0-9_])"
)
DEFAULT_ALIASES = {
    "A2": "Atlas 800I A2",
    "A3": "Atlas 800I A3",
    "A5": "A5",
    "DUO": "Atlas 300I DUO",
}
_LEGEND = re.compile(
    r"(?<![A-Za-z0-9])(A[2-9]|DUO|Duo)\s*(?:代表|表示|指|即|stands for|means|refers to)\s*[:：]?\s*"
    r"((?:Atlas\s*)?[0-9A-Za-z][0-9A-Za-z ]{1,30})"
)
_ONLY = re.compile(
    r"(?:仅|只|限于)\s*(?:限|在|于|支持|适用于|能在|可在|面向|可用于)?\s*(?:在|于)?\s*(?:Atlas|Ascend|A[235]\b|300I)"
    r"|硬件要求|支持的硬件|\bonly\b[^.;]{0,30}(?:Atlas|Ascend)|(?:Atlas|Ascend)[^.;,，。]{0,30}\bonly\b"
    r"|hardware requirement",
    re.I,
)
_SUPPORTS = re.compile(r"(?:支持|supports?|supported on|available on)\s*[:：]?\s*$", re.I)
_EXCLUDE = re.compile(r"不支持|暂不支持|不适用|not supported|unsupported|does not support", re.I)


@dataclass(frozen=True, order=True)
class HardwareLimit:
    kind: str  # "仅" (only these) | "不支持" (all but these)
    product: str  # canonical name, e.g. "Atlas 800I A2"

    def render(self) -> str:
        return f"{self.kind} {self.product}"


def _atlas(match: re.Match) -> str:
    model = match.group(1).upper()
    variant = (match.group(2) or "").upper()
    if variant == "SUPERPOD":
        variant = "SuperPoD"
    return f"Atlas {model} {variant}".strip()


def _short(token: str, aliases: dict[str, str]) -> str:
    key = re.sub(r"\s+", " ", token.strip()).upper()
    key = "DUO" if key.endswith("DUO") else key
    return aliases.get(key) or DEFAULT_ALIASES.get(key, key)


def find(text: str, aliases: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(position, canonical name) of every product named in `text`, in order."""
    aliases = aliases or {}
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for regex, name in ((_ATLAS, _atlas), (_ASCEND, lambda m: f"Ascend {m.group(1)}")):
        for m in regex.finditer(text):
            found.append((m.start(), name(m)))
            taken.append(m.span())
    for m in _SHORT.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            found.append((m.start(), _short(m.group(1), aliases)))
    return sorted(found)


def products(text: str, aliases: dict[str, str] | None = None) -> list[str]:
    """Canonical product names mentioned in `text`, in order, without repeats."""
    return list(dict.fromkeys(name for _, name in find(text, aliases)))


def legend(text: str) -> dict[str, str]:
    """Abbreviations a doc defines: "A2代表Atlas 800I A2" -> {"A2": "Atlas 800I A2"}."""
    out = {}
    for m in _LEGEND.finditer(text):
        target = products(m.group(2))
        if target:
            out[m.group(1).upper()] = target[0]
    return out


def normalize(name: str) -> str:
    """A user's hardware name in canonical form ("A2", "300I Duo", "Atlas 800I A2服务器"); others stay as given."""
    found = products(name)
    return found[0] if found else re.sub(r"\s+", " ", name).strip()


def limits_in(sentence: str, aliases: dict[str, str] | None = None) -> list[HardwareLimit]:
    """Hardware limits one prose sentence states (empty when it only mentions hardware)."""
    hits = find(sentence, aliases)
    if not hits:
        return []
    names = list(dict.fromkeys(n for _, n in hits))
    if _EXCLUDE.search(sentence):
        return [HardwareLimit("不支持", n) for n in names]
    if _ONLY.search(sentence) or _SUPPORTS.search(sentence[: hits[0][0]]):
        return [HardwareLimit("仅", n) for n in names]
    return []


def sentences(lines: list[str]) -> list[str]:
    """Prose lines split into sentences (Chinese and Western full stops)."""
    out = []
    for line in lines:
        out += [s for s in re.split(r"(?<=[。；;!?！？])|(?<=\.)\s", line) if s.strip()]
    return out


def allows(limits: list[HardwareLimit] | tuple[HardwareLimit, ...], hardware: str) -> bool:
    """Whether a feature with `limits` may run on `hardware` (canonical name)."""
    only = {lim.product for lim in limits if lim.kind == "仅"}
    excluded = {lim.product for lim in limits if lim.kind == "不支持"}
    if hardware in excluded:
        return False
    return not only or hardware in only
