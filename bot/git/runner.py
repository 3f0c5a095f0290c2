"""Running one git command on a repository: a subprocess with stdin, a scrubbed environment
and exit-code control, which GitPython's `repo.git.<cmd>` does not give cleanly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import git

from bot.errors import GitError

# Variables that would redirect git away from the repo we were given.
_SCRUBBED_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")

Where = git.Repo | Path | str


def workdir(repo: git.Repo) -> str:
    """The repository's working tree (its git dir when bare)."""
    return str(repo.working_tree_dir or repo.git_dir)


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"  # a push must fail, never hang on a password prompt
    env.update(extra or {})
    return env


def run(
    where: Where,
    *args: str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command; on failure (when `check`) raise GitError with git's own words.

    With `timeout`, a git that runs longer is killed and TimeoutExpired raised.
    """
    cwd = workdir(where) if isinstance(where, git.Repo) else str(where)
    proc = subprocess.run(
        ["git", *args],
        check=False,
        cwd=cwd,
        input=input,
        env=_env(env),
        capture_output=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        detail = (
            proc.stderr.decode(errors="replace").strip()
            or proc.stdout.decode(errors="replace").strip()
        )
        raise GitError(f"git {args[0]} failed: {detail}")
    return proc


def out(
    where: Where,
    *args: str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> str:
    """Stripped stdout of one git command (see `run`)."""
    return run(where, *args, input=input, env=env, check=check).stdout.decode().strip()


def succeeds(where: Where, *args: str) -> bool:
    """Whether one git command exits 0 (a question asked by exit code)."""
    return run(where, *args, check=False).returncode == 0
