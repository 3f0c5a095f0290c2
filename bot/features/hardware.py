"""Ascend hardware names: one spelling per product, and limits stated in prose.

The docs write the same server as "Atlas 800I A2服务器", "Atlas 800I A2 服务器"
or "Atlas 800I A2 推理服务器"; all of them are "Atlas 800I A2" here. A limit
is recorded only when a sentence names a product *and* restricts to it
("仅 ... 支持", "only") or excludes it ("不支持"): a product merely mentioned
(e.g. its default compute power) is no limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PRODUCT = re.compile(
    r"Atlas\s*(\d{3,4}[A-Za-z]{0,2})(?:\s*(A\d|DUO|PRO|SuperPoD)(?![A-Za-z0-9]))?",
    re.I,
)
# A restriction names the product right after "仅/只" (optionally "仅支持在 ..."), or is a
# "硬件要求" line; "在 Atlas ... 上仅需设置" is no restriction.
_ONLY = re.compile(
    r"(?:仅|只|限于)\s*(?:限|在|于|支持|适用于|能在|可在|面向|可用于)?\s*(?:在|于)?\s*Atlas"
    r"|硬件要求|支持的硬件|\bonly\b[^.;]{0,30}Atlas|Atlas[^.;,，。]{0,30}\bonly\b",
    re.I,
)
_EXCLUDE = re.compile(r"不支持|暂不支持|不适用|not supported|unsupported|does not support", re.I)


@dataclass(frozen=True, order=True)
class HardwareLimit:
    kind: str  # "仅" (only these) | "不支持" (all but these)
    product: str  # canonical name, e.g. "Atlas 800I A2"

    def render(self) -> str:
        return f"{self.kind} {self.product}"


def canonical(match: re.Match) -> str:
    model = match.group(1).upper()
    variant = (match.group(2) or "").upper()
    if variant == "SUPERPOD":
        variant = "SuperPoD"
    return f"Atlas {model} {variant}".strip()


def products(text: str) -> list[str]:
    """Canonical product names mentioned in `text`, in order, without repeats."""
    out: list[str] = []
    for match in _PRODUCT.finditer(text):
        name = canonical(match)
        if name not in out:
            out.append(name)
    return out


def normalize(name: str) -> str:
    """A user's hardware name in canonical form; names that are not Atlas products stay as given."""
    found = products(name)
    return found[0] if found else re.sub(r"\s+", " ", name).strip()


def limits_in(sentence: str) -> list[HardwareLimit]:
    """Hardware limits one prose sentence states (empty when it only mentions hardware)."""
    names = products(sentence)
    if not names:
        return []
    if _EXCLUDE.search(sentence):
        return [HardwareLimit("不支持", n) for n in names]
    if _ONLY.search(sentence):
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
    only = {l.product for l in limits if l.kind == "仅"}
    excluded = {l.product for l in limits if l.kind == "不支持"}
    if hardware in excluded:
        return False
    return not only or hardware in only
