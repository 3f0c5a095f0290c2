"""Statements of preference in a doc ("**Ulysses（USP）**：…推荐优先使用") and which row they are about."""

from __future__ import annotations

import re

from bot.features import classify as cls
from bot.features import markdown as md
from bot.features import reader

_BOLD_SUBJECT = re.compile(r"^\s*\*\*(.+?)\*\*")


def preferences(doc: reader.Doc) -> list[tuple[str, int, str]]:
    """(subject, score, words) of each statement of preference in the doc ("**Ulysses（USP）**：…推荐优先使用")."""
    out = []
    for section in doc.root.walk():
        for line in section.prose:
            m = _BOLD_SUBJECT.match(line)
            subject = md.inline_text(m.group(1)) if m else ""
            if not subject:
                continue
            score, words = cls.preference(md.inline_text(line))
            if score:
                out.append((subject, score, words))
    return out


_NAME_STOP = {
    "parallel",
    "parallelism",
    "sequence",
    "并行",
    "序列并行",
    "模式",
    "mode",
    "优先",
    "优先使用",
    "备选",
}


def _initials(name: str) -> str:
    return "".join(w[0] for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", name)).upper()


def about(subject: str, name: str) -> bool:
    """Whether a preference statement's subject names this row (shared word or its abbreviation)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.]*", subject)} - _NAME_STOP
    mine = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.]*", name)} - _NAME_STOP
    abbrevs = {a.upper() for a in re.findall(r"[（(]([A-Za-z]{2,6})[）)]", subject)}
    return (
        bool(words & mine)
        or (len(_initials(name)) >= 2 and _initials(name) in abbrevs)
        or (len(name) >= 2 and name in subject)
    )


def is_guide(doc: reader.Doc) -> bool:
    """A tuning guide or index page (调优指南.md, README): it points at features, it documents none."""
    return any(cls.has_word(t, w) for t in (doc.stem, doc.root.title) for w in cls.GUIDE_WORDS)
