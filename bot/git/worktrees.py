"""tunebot's own worktrees under `<common git dir>/tunebot/worktrees/`, detached, never the user's."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from bot.errors import GitError
from bot.git import runner
from bot.git.repository import InvalidName, open_repo, resolve, state_dir


def _worktree_root(repo: git.Repo) -> Path:
    return state_dir(repo) / "worktrees"


def registered_worktrees(repo: git.Repo) -> list[dict[str, str]]:
    """`git worktree list --porcelain` as dicts (keys: worktree, HEAD, branch, detached, bare, prunable)."""
    entries: list[dict[str, str]] = []
    for block in runner.out(repo, "worktree", "list", "--porcelain").split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        if entry:
            entries.append(entry)
    return entries


def checked_out_branches(repo: git.Repo) -> dict[str, str]:
    """branch name -> path of the worktree that has it checked out."""
    found = {}
    for entry in registered_worktrees(repo):
        ref = entry.get("branch", "")
        if ref.startswith("refs/heads/"):
            found[ref[len("refs/heads/") :]] = entry["worktree"]
    return found


def _is_registered(repo: git.Repo, path: Path) -> bool:
    return any(
        Path(e["worktree"]).resolve() == path.resolve()
        for e in registered_worktrees(repo)
        if "worktree" in e
    )


def ensure_worktree(repo: git.Repo, name: str, sha: str) -> Path:
    """A detached worktree at `state_dir/worktrees/<name>` checked out (clean) at `sha`."""
    _check_worktree_name(name)
    path = _worktree_root(repo) / name
    commit = resolve(repo, sha)
    if path.exists() and (path / ".git").is_file() and _is_registered(repo, path):
        checkout_worktree(path, commit)
        runner.run(path, "clean", "-ffdqx")
        return path
    _forget_vanished_worktrees(repo)
    if path.exists():  # a directory of ours git no longer knows: leftover of a crash
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    runner.run(repo, "worktree", "add", "--detach", "-f", str(path), commit)
    return path


def remove_worktree(repo: git.Repo, name: str) -> None:
    """Remove tunebot's worktree `name` (files and registration); no-op if absent."""
    _check_worktree_name(name)
    path = _worktree_root(repo) / name
    if path.exists() and (path / ".git").is_file() and _is_registered(repo, path):
        runner.run(repo, "worktree", "remove", "--force", "--force", str(path))
    elif path.exists():
        shutil.rmtree(path)
    _forget_vanished_worktrees(repo)


def _forget_vanished_worktrees(repo: git.Repo) -> None:
    """Drop registrations of *our* worktrees whose directory is gone.

    Not `git worktree prune`: that would also forget the user's worktrees that
    are merely unmounted right now.
    """
    root = _worktree_root(repo).resolve()
    admin = Path(repo.common_dir).resolve() / "worktrees"
    for entry in admin.glob("*/gitdir") if admin.is_dir() else ():
        target = Path(entry.read_text().strip()).parent
        if root in target.parents and not target.exists():
            shutil.rmtree(entry.parent)


def checkout_worktree(path: Path | str, sha: str) -> None:
    """Detached, forced checkout of `sha` in one of tunebot's own worktrees (refuses any other)."""
    path = Path(path).resolve()
    repo = open_repo(path)
    root = _worktree_root(repo).resolve()
    top = Path(repo.working_tree_dir or "").resolve()
    if top != path or root not in path.parents:
        raise GitError(
            f"{path} is not a tunebot worktree (those live under {root}); "
            "tunebot never checks out anything in your own checkout."
        )
    runner.run(path, "checkout", "-q", "--detach", "--force", resolve(repo, sha))


def _check_worktree_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise InvalidName(
            f"bad worktree name '{name}': use one path component such as 'project__op'."
        )


def is_dirty(worktree: str | Path) -> bool:
    """Whether a checkout has uncommitted changes to tracked files (takes no optional locks)."""
    proc = runner.run(
        worktree, "status", "--porcelain", "--untracked-files=no", env={"GIT_OPTIONAL_LOCKS": "0"}
    )
    return bool(proc.stdout.strip())
