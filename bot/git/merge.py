"""Merging a head into a base branch: a fast-forward when possible, else a merge commit made
with `git merge-tree` (no index, no checkout). A clean checkout of the base follows the merge."""

from __future__ import annotations

import git

from bot.errors import GitError
from bot.git import refs, runner
from bot.git.commits import commit_tree
from bot.git.repository import is_ancestor, resolve
from bot.git.worktrees import checked_out_branches, is_dirty


def _merge_commit(repo: git.Repo, base_sha: str, head_sha: str, message: str) -> str:
    """The commit that merges head into base: a fast-forward when possible, else a real merge."""
    if is_ancestor(repo, base_sha, head_sha):
        return head_sha
    proc = runner.run(
        repo,
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        base_sha,
        head_sha,
        check=False,
    )
    lines = proc.stdout.decode(errors="replace").splitlines()
    if proc.returncode == 1:
        conflicted = sorted({line for line in lines[1:] if line})
        raise GitError(
            "merge conflict in: " + ", ".join(conflicted) + ". Resolve it on the head branch "
            "(merge the base branch into it and commit), then approve and merge again."
        )
    if proc.returncode != 0 or not lines:
        raise GitError(f"git merge-tree failed: {proc.stderr.decode(errors='replace').strip()}")
    return commit_tree(repo, lines[0], [base_sha, head_sha], message)


def merge_into(repo: git.Repo, base_branch: str, head: str, message: str) -> str:
    """Merge `head` into `base_branch`; returns the new base sha (unchanged if already merged).

    If the base branch is checked out somewhere (the user's checkout included),
    that worktree must be clean and is fast-forwarded so its files follow;
    a dirty one is refused before anything moves.
    """
    base_sha = refs.branch_sha(repo, base_branch)
    if base_sha is None:
        raise GitError(
            f"base branch '{base_branch}' does not exist. Create it or pick another base."
        )
    head_sha = resolve(repo, head)
    if is_ancestor(repo, head_sha, base_sha):
        return base_sha
    worktree = checked_out_branches(repo).get(base_branch)
    if worktree and is_dirty(worktree):
        raise GitError(
            f"'{base_branch}' is checked out in {worktree} with uncommitted changes; tunebot will not touch them. "
            "Commit or stash your changes, then run tunebot merge again."
        )
    new_sha = _merge_commit(repo, base_sha, head_sha, message)
    if worktree:
        # merge --ff-only moves the branch and the files together, and itself
        # refuses if the branch moved past base_sha meanwhile.
        proc = runner.run(worktree, "merge", "-q", "--ff-only", new_sha, check=False)
        if proc.returncode != 0:
            raise GitError(
                f"could not fast-forward '{base_branch}' in {worktree}: "
                f"{proc.stderr.decode(errors='replace').strip()}. Nothing was changed; run tunebot merge again."
            )
    else:
        refs.move_branch(repo, base_branch, new_sha, base_sha)
    return new_sha
