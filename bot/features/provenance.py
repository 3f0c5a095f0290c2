"""Where a table came from: the docs dir inside its git repo, its last commit, the docs version."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bot.features import markdown as md
from bot.features import reader

_VERSION = re.compile(
    r"(?:版本号?|[Vv]ersion|MindIE[ -]?SD)\s*[:：]?\s*[vV]?(\d+\.\d+(?:\.\d+)*(?:[-.]?(?:rc|RC|alpha|beta)\d*)?)"
)


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def provenance(docs_dir: Path) -> tuple[str, str | None]:
    """(label, commit): the docs dir's path inside its git repo and the last commit touching it."""
    top = _git(docs_dir, "rev-parse", "--show-toplevel")
    if not top:
        return docs_dir.resolve().name, None
    rel = docs_dir.resolve().relative_to(Path(top).resolve()).as_posix() or "."
    commit = _git(docs_dir, "log", "-1", "--format=%H", "--", ".")
    if commit and _git(docs_dir, "status", "--porcelain", "--", "."):
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
