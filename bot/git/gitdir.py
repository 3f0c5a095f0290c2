"""A checkout's git dir read as plain files: no git process runs in a repository whose config
the code being tuned may have rewritten."""

from __future__ import annotations

import re
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{40}$")


def common_git_dir(checkout: Path) -> Path:
    """The checkout's common git dir (`.git`, or the target of a `gitdir:` file, then its `commondir`)."""
    dot = checkout / ".git"
    if dot.is_file():
        target = dot.read_text(encoding="utf-8").strip().removeprefix("gitdir:").strip()
        dot = (checkout / target).resolve()
    common = dot / "commondir"
    if common.is_file():
        dot = (dot / common.read_text(encoding="utf-8").strip()).resolve()
    return dot


def read_refs(git_dir: Path, prefix: str) -> dict[str, str]:
    """Refs under `prefix` (e.g. `refs/heads/tunebot/x/`) read as files: loose refs win over packed-refs.

    No git process runs in the checkout's repository: its config may be hostile.
    """
    found: dict[str, str] = {}
    packed = git_dir / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8", errors="replace").splitlines():
            sha, _, name = line.partition(" ")
            if name.startswith(prefix) and SHA.match(sha):
                found[name] = sha
    root = git_dir / prefix.rstrip("/")
    base = root if root.is_dir() else root.parent
    if base.is_dir():
        for path in base.rglob("*"):
            name = path.relative_to(git_dir).as_posix()
            if path.is_file() and not path.is_symlink() and name.startswith(prefix):
                sha = path.read_text(encoding="utf-8", errors="replace").strip()
                if SHA.match(sha):
                    found[name] = sha
    return found
