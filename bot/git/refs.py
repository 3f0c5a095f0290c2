"""Refs read and moved by compare-and-swap: branches' refs and tunebot's own `refs/tunebot/...`.

Moving a branch here knows nothing of ownership; `bot.git.branches` decides whose a branch is.
"""

from __future__ import annotations

import git

from bot.errors import GitError
from bot.git import runner
from bot.naming import TUNEBOT_REFS

ZERO_SHA = "0" * 40


_REF_FORBIDDEN = set(" ~^:?*[\\\x7f") | {chr(c) for c in range(32)}


def is_valid_ref(ref: str) -> bool:
    """Whether `ref` is a well-formed full ref name, by the rules `git check-ref-format` documents.

    Checked in-process because every iteration names a new branch; tests compare the verdicts
    with git's own on tricky names.
    """
    if "/" not in ref or ref.startswith("/") or ref.endswith(("/", ".")):
        return False
    if ".." in ref or "@{" in ref or ref == "@" or any(c in _REF_FORBIDDEN for c in ref):
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in ref.split("/")
    )


def is_valid_branch_name(name: str) -> bool:
    """Whether git takes `name` as a branch name (and it is not an option or HEAD)."""
    return not name.startswith("-") and name != "HEAD" and is_valid_ref(f"refs/heads/{name}")


def ref_sha(repo: git.Repo, ref: str) -> str | None:
    """The sha a full ref points at, or None."""
    proc = runner.run(repo, "rev-parse", "--verify", "-q", ref, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def branch_sha(repo: git.Repo, name: str) -> str | None:
    """The sha branch `name` points at, or None if it does not exist."""
    return ref_sha(repo, f"refs/heads/{name}")


def list_refs(repo: git.Repo, prefix: str) -> dict[str, str]:
    """Full ref name -> sha for every ref under `prefix` (e.g. 'refs/tunebot/proposals/')."""
    listing = runner.out(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in listing.splitlines() if line)


def _check_tunebot_ref(ref: str) -> None:
    if not ref.startswith(TUNEBOT_REFS) or not is_valid_ref(ref):
        raise GitError(f"'{ref}' is not a tunebot ref (those are valid refs under {TUNEBOT_REFS}).")


def set_ref(repo: git.Repo, ref: str, new: str, expected_old: str | None) -> None:
    """Compare-and-swap a ref under refs/tunebot/ (expected_old None: the ref must not exist yet)."""
    _check_tunebot_ref(ref)
    old = expected_old or ZERO_SHA
    proc = runner.run(repo, "update-ref", "-m", "tunebot", ref, new, old, check=False)
    if proc.returncode != 0:
        raise GitError(
            f"{ref} changed underneath tunebot (another tunebot process?). Run the command again."
        )


def move_branch(repo: git.Repo, name: str, new: str, old: str) -> None:
    """Compare-and-swap branch `name` from `old` (ZERO_SHA: must not exist) to `new`."""
    proc = runner.run(
        repo, "update-ref", "-m", "tunebot", f"refs/heads/{name}", new, old, check=False
    )
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace")
        if "exists; cannot create" in stderr:
            # refs/heads/a/b and refs/heads/a/b/c cannot coexist (a file vs a directory).
            raise GitError(
                f"cannot create branch '{name}': a branch with a clashing path exists "
                f"({stderr.strip().splitlines()[-1]}). Git cannot hold both 'x' and 'x/y'; choose another name."
            )
        now = branch_sha(repo, name)
        expected = old[:12] if old != ZERO_SHA else "no branch"
        raise GitError(
            f"branch '{name}' changed underneath tunebot (expected {expected}, "
            f"found {now[:12] if now else 'no branch'}); someone else moved it. Re-run to pick up the new state."
        )


def delete_branch(repo: git.Repo, name: str, old: str) -> None:
    """Compare-and-swap delete: refuses if the branch moved after tunebot looked at it."""
    if not runner.succeeds(repo, "update-ref", "-d", f"refs/heads/{name}", old):
        now = branch_sha(repo, name)
        raise GitError(
            f"branch '{name}' changed underneath tunebot (expected {old[:12]}, found "
            f"{now[:12] if now else 'no branch'}); it was left as it is. Re-run to pick up the new state."
        )
