"""The branch-ownership store: which branches are tunebot's to move, force-push or delete.

Branches tunebot creates are recorded in `<common git dir>/tunebot/branches.json` with the
sha tunebot last set; only those still pointing there are ever moved, force-pushed,
archived or deleted (a branch someone moved or re-created is theirs).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from bot import naming
from bot.errors import GitError
from bot.fs import file_lock, write_atomic
from bot.git import refs, runner
from bot.git.repository import InvalidName, resolve, state_dir
from bot.git.worktrees import checked_out_branches

_OWNERSHIP_FILE = "branches.json"

Owned = dict[str, dict[str, Any]]


def _ownership_path(repo: git.Repo) -> Path:
    return state_dir(repo) / _OWNERSHIP_FILE


def _read_owned(repo: git.Repo) -> Owned:
    path = _ownership_path(repo)
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text())["branches"])
    except (ValueError, KeyError, TypeError):
        raise GitError(
            f"{path} is corrupt. Delete it only if no tunebot branches need cleaning up."
        ) from None


def _write_owned(repo: git.Repo, owned: Owned) -> None:
    data = json.dumps({"branches": owned}, indent=1, sort_keys=True).encode() + b"\n"
    write_atomic(_ownership_path(repo), data)


@contextlib.contextmanager
def _ownership_lock(repo: git.Repo) -> Iterator[None]:
    with file_lock(state_dir(repo) / "branches.lock"):
        yield


def _owner_problem(entry: dict[str, Any] | None, current: str | None) -> str | None:
    """Why tunebot may not move or delete a branch now at `current`; None when it is tunebot's.

    A branch is tunebot's while it points at the sha tunebot last set (or the one
    it is setting) or does not exist: once someone else moves or re-creates it,
    it is theirs. Entries from before shas were recorded are trusted by name.
    """
    if entry is None:
        return "not created by tunebot"
    if current is None or "sha" not in entry or current in (entry["sha"], entry.get("pending")):
        return None
    return (
        f"moved since tunebot set it (tunebot left it at {entry['sha'][:12]}, it is now at {current[:12]}), "
        "so it is treated as yours"
    )


def is_owned(repo: git.Repo, name: str) -> bool:
    """Whether branch `name` is tunebot's to move, force-push or delete (see _owner_problem)."""
    return _owner_problem(_read_owned(repo).get(name), refs.branch_sha(repo, name)) is None


def create_branch(repo: git.Repo, name: str, sha: str) -> None:
    """Create branch `name` at `sha` and record it (and the sha) as tunebot's.

    An existing branch of ours is moved there (compare-and-swap); one that is
    not ours, or that someone moved since tunebot set it, is refused.
    """
    if not refs.is_valid_branch_name(name):
        raise InvalidName(
            f"'{name}' is not a valid branch name. Use letters, digits, '/', '-', '_' and '.'."
        )
    target = resolve(repo, sha)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        old = refs.branch_sha(repo, name)
        problem = _owner_problem(owned.get(name), old) if old is not None else None
        if problem:
            raise GitError(
                f"branch '{name}' already exists and was {problem}; tunebot will not touch it. "
                "Rename or delete it yourself, or choose another branch prefix."
            )
        if old == target:  # resume: already there; record the sha (an old entry may lack it)
            entry = {"created": owned[name].get("created", time.time()), "sha": target}
            if owned[name] != entry:
                owned[name] = entry
                _write_owned(repo, owned)
            return
        _move_owned(repo, owned, name, target, old)


def update_branch(repo: git.Repo, name: str, sha: str, expected_old: str) -> None:
    """Move our branch `name` from `expected_old` to `sha`; fails if it moved meanwhile or is not ours."""
    target = resolve(repo, sha)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        problem = _owner_problem(owned.get(name), refs.branch_sha(repo, name))
        if problem:
            raise GitError(f"branch '{name}' was {problem}; tunebot only moves its own branches.")
        _move_owned(repo, owned, name, target, expected_old)


def _move_owned(repo: git.Repo, owned: Owned, name: str, new: str, old: str | None) -> None:
    """Point our branch `name` (at `old`, None: absent) at `new`; caller holds the ownership lock.

    The entry names both shas while the ref moves, so a crash at any moment
    leaves a branch tunebot still recognises; afterwards only `new` counts.
    """
    before = owned.get(name)
    created = (before or {}).get("created", time.time())
    owned[name] = {"created": created, "sha": old or new, "pending": new}
    _write_owned(repo, owned)
    try:
        refs.move_branch(repo, name, new, old or refs.ZERO_SHA)
    except GitError:
        if before is None:
            del owned[name]
        else:
            owned[name] = before
        _write_owned(repo, owned)
        raise
    owned[name] = {"created": created, "sha": new}
    _write_owned(repo, owned)


def _natural_key(name: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _recorded_branches(repo: git.Repo, prefix: str) -> list[str]:
    """Existing branches named in branches.json that start with `prefix`, ours or since taken over."""
    names = [
        n
        for n in _read_owned(repo)
        if n.startswith(prefix) and refs.branch_sha(repo, n) is not None
    ]
    return sorted(names, key=_natural_key)


def owned_branches(repo: git.Repo, prefix: str = "") -> list[str]:
    """Existing branches that are tunebot's, named `prefix`... (v2 sorts before v10)."""
    owned = _read_owned(repo)
    return [
        n
        for n in _recorded_branches(repo, prefix)
        if _owner_problem(owned[n], refs.branch_sha(repo, n)) is None
    ]


@dataclass
class DeleteResult:
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why


def delete_branches(repo: git.Repo, names: list[str], remote: str | None = None) -> DeleteResult:
    """Delete tunebot's own branches among `names` (and on `remote` if given); skip others with the reason."""
    result = DeleteResult()
    checked_out = checked_out_branches(repo)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        try:
            for name in names:
                current = refs.branch_sha(repo, name)
                problem = _owner_problem(owned.get(name), current)
                if problem:
                    result.skipped[name] = problem
                    continue
                if name in checked_out:
                    result.skipped[name] = f"checked out in {checked_out[name]}"
                    continue
                if remote:  # remote first: a failure there leaves the local branch to retry with
                    _delete_remote_branch(repo, remote, name)
                if current is not None:
                    refs.delete_branch(repo, name, current)
                del owned[name]
                result.deleted.append(name)
        finally:  # what was deleted before an error stays forgotten
            _write_owned(repo, owned)
    return result


def _delete_remote_branch(repo: git.Repo, remote: str, name: str) -> None:
    proc = runner.run(repo, "push", "--porcelain", remote, f":refs/heads/{name}", check=False)
    text = (proc.stdout + proc.stderr).decode(errors="replace")
    if proc.returncode != 0 and "remote ref does not exist" not in text:
        raise GitError(f"could not delete '{name}' on remote '{remote}': {text.strip()}")


def archive_branches(repo: git.Repo, names: list[str], label: str) -> list[str]:
    """Move tunebot's branches among `names` to `refs/tunebot/archive/<label>/<branch>`; returns those refs.

    The archive ref is created before the branch is deleted (both compare-and-swap),
    so a crash in between loses no commit, and a re-run with the same label finishes
    the move. Branches that are not tunebot's (never created by it, or moved since),
    are checked out somewhere, or no longer exist are left as they are.
    """
    if not label or not refs.is_valid_ref(naming.archive_ref(label, "x")):
        raise InvalidName(f"bad archive label '{label}': use something like '20260101T120000'.")
    archived: list[str] = []
    checked_out = checked_out_branches(repo)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        try:
            for name in names:
                current = refs.branch_sha(repo, name)
                if (
                    current is None
                    or name in checked_out
                    or _owner_problem(owned.get(name), current)
                ):
                    continue
                ref = naming.archive_ref(label, name)
                # equal: archived by a run that crashed before the delete
                if refs.ref_sha(repo, ref) != current:
                    refs.set_ref(repo, ref, current, None)
                refs.delete_branch(repo, name, current)
                del owned[name]
                archived.append(ref)
        finally:
            _write_owned(repo, owned)
    return archived


def cleanup_iteration_branches(
    repo: git.Repo, op_name: str, prefix: str = "tunebot", remote: str | None = None
) -> DeleteResult:
    """Delete the iteration branches `<prefix>/<op>/v<N>` that are still tunebot's.

    Ones tunebot made that someone moved or re-created since are skipped, with the reason.
    """
    first = naming.iteration_prefix(naming.run_prefix(prefix, op_name))
    pattern = re.compile(rf"{re.escape(first)}\d+")
    names = [n for n in _recorded_branches(repo, first) if pattern.fullmatch(n)]
    return delete_branches(repo, names, remote=remote)
