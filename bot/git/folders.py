"""Questions about any folder that may or may not sit in a git repository (where a document
came from). They never raise: a folder outside git, or a git that fails or hangs, gives no answer."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bot.git import runner

_TIMEOUT_S = 30


def _ask(folder: Path, *args: str) -> str | None:
    try:
        proc = runner.run(folder, *args, check=False, timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.decode(errors="replace").strip() if proc.returncode == 0 else None


def toplevel(folder: Path) -> Path | None:
    """The top of the working tree holding `folder`, or None when it is not in one."""
    top = _ask(folder, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def last_commit(folder: Path) -> str | None:
    """The newest commit that changed anything below `folder`, or None."""
    return _ask(folder, "log", "-1", "--format=%H", "--", ".") or None


def has_changes(folder: Path) -> bool:
    """Whether anything below `folder` differs from its last commit (untracked files count)."""
    return bool(_ask(folder, "status", "--porcelain", "--", "."))
