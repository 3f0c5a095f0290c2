"""Where a table came from: the docs dir inside its git repo, its last commit, the docs version."""

from __future__ import annotations

import re
from pathlib import Path

from bot.features import markdown as md
from bot.features import reader
from bot.git import folders

_VERSION = re.compile(
    r"(?:版本号?|[Vv]ersion|MindIE[ -]?SD)\s*[:：]?\s*[vV]?(\d+\.\d+(?:\.\d+)*(?:[-.]?(?:rc|RC|alpha|beta)\d*)?)"
)


def provenance(docs_dir: Path) -> tuple[str, str | None]:
    """(label, commit): the docs dir's path inside its git repo and the last commit touching it."""
    top = folders.toplevel(docs_dir)
    if not top:
        return docs_dir.resolve().name, None
    rel = docs_dir.resolve().relative_to(top.resolve()).as_posix() or "."
    commit = folders.last_commit(docs_dir)
    if commit and folders.has_changes(docs_dir):
        commit += " (+ 未提交的修改)"
    return rel, commit or None


def docs_version(docs: list[reader.Doc]) -> str | None:
    for doc in docs:
        for section in doc.root.walk():
            for line in section.prose:
                match = _VERSION.search(md.inline_text(line))
                if match:
                    return match.group(1)
    return None
