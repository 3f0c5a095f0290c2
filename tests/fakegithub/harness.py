"""A test world: a bare repo (the git remote), a clone of it, and the fake GitHub serving it."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .server import FakeGitHub

IDENTITY = ["-c", "user.name=Test User", "-c", "user.email=test@example.com"]


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


@dataclass
class World:
    bare: Path
    dev: Path  # a developer's clone, used to push PR branches
    fake: FakeGitHub

    def push_branch(
        self, branch: str, files: dict[str, str], message: str, start: str = "main"
    ) -> str:
        """Commit `files` on `branch` (created from `start` if new) in the dev clone and push it."""
        git(self.dev, "fetch", "-q", "origin")
        existing = git(self.dev, "branch", "--list", branch)
        git(self.dev, "checkout", "-q", branch) if existing else git(
            self.dev, "checkout", "-q", "-b", branch, start
        )
        for rel, text in files.items():
            path = self.dev / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            git(self.dev, "add", "--", rel)
        git(self.dev, "commit", "-q", "-m", message)
        git(self.dev, "push", "-q", "origin", branch)
        sha = git(self.dev, "rev-parse", "HEAD")
        git(self.dev, "checkout", "-q", "main")
        return sha

    def clone(self, dest: Path) -> Path:
        git(dest.parent, "clone", "-q", str(self.bare), dest.name)
        return dest


def make_world(tmp: Path, files: dict[str, str] | None = None) -> World:
    seed = tmp / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    for rel, text in {"README.md": "# kernels\n", **(files or {})}.items():
        path = seed / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    bare = tmp / "origin.git"
    git(tmp, "clone", "-q", "--bare", str(seed), str(bare))
    dev = tmp / "dev"
    git(tmp, "clone", "-q", str(bare), "dev")
    return World(bare, dev, FakeGitHub(bare).start())
