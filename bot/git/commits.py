"""Commits with explicit parents, written without touching any index, worktree or ref."""

from __future__ import annotations

import contextlib
import os
import time

import git

from bot.git import runner, trees
from bot.git.refs import ZERO_SHA
from bot.git.repository import (
    check_path,
    identity,
    parse_author,
    remember_commit,
    resolve,
    state_dir,
)


def _blob_mode(repo: git.Repo, parent: str | None, path: str) -> str:
    """Keep an existing file's mode (e.g. executable); new files are 100644."""
    if parent is None:
        return "100644"
    try:
        obj = repo.commit(parent).tree / path
    except KeyError:
        return "100644"
    return f"{obj.mode:o}" if obj.type == "blob" else "100644"


def commit_files(
    repo: git.Repo,
    parent: str | None,
    files: dict[str, bytes | None],
    message: str,
    author: str | None = None,
) -> str:
    """A commit whose tree is `parent`'s with `files` added/replaced (None removes); returns its sha.

    Touches no index, worktree or ref. The objects are written in-process (bot/git/trees.py)
    unless the repository's configuration needs git to write them; either way the commit is
    the one `git commit-tree` would make, so same inputs and dates give the same sha.
    """
    parent_sha = resolve(repo, parent) if parent is not None else None
    for path in files:
        check_path(path)
    who_author = parse_author(author) if author else identity(repo, "AUTHOR")
    who_committer = identity(repo, "COMMITTER")
    if trees.fast_path_problem(repo, [who_author, who_committer]) is None:
        base_tree = repo.commit(parent_sha).tree.hexsha if parent_sha else None
        tree = trees.write_tree(repo, base_tree, files)
        parents = [parent_sha] if parent_sha else []
        sha = trees.write_commit(repo, tree, parents, message, who_author, who_committer)
    else:
        tree = _tree_by_git(repo, parent_sha, files)
        sha = commit_tree(repo, tree, [parent_sha] if parent_sha else [], message, author)
    remember_commit(repo, sha)  # create_branch resolves it next: one rev-parse less
    return sha


def _tree_by_git(repo: git.Repo, parent_sha: str | None, files: dict[str, bytes | None]) -> str:
    """The tree of `commit_files` written by git itself, through a temporary index in state_dir."""
    index_info = []
    for path, data in sorted(files.items()):
        if data is None:
            index_info.append(f"0 {ZERO_SHA}\t{path}")
            continue
        blob = runner.out(repo, "hash-object", "-w", "--stdin", input=data)
        index_info.append(f"{_blob_mode(repo, parent_sha, path)} {blob}\t{path}")
    index = state_dir(repo) / f"index.{os.getpid()}.{time.monotonic_ns()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        runner.run(repo, "read-tree", *([parent_sha] if parent_sha else ["--empty"]), env=env)
        if index_info:
            runner.run(
                repo,
                "update-index",
                "--index-info",
                input="\n".join(index_info).encode() + b"\n",
                env=env,
            )
        return runner.out(repo, "write-tree", env=env)
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()


def commit_tree(
    repo: git.Repo, tree: str, parents: list[str], message: str, author: str | None = None
) -> str:
    """A commit of `tree` with `parents` and `message` (kept byte for byte); returns its sha."""
    a_name, a_email = parse_author(author) if author else identity(repo, "AUTHOR")
    c_name, c_email = identity(repo, "COMMITTER")
    env = {
        "GIT_AUTHOR_NAME": a_name,
        "GIT_AUTHOR_EMAIL": a_email,
        "GIT_COMMITTER_NAME": c_name,
        "GIT_COMMITTER_EMAIL": c_email,
    }
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    # -F - keeps the message byte for byte (no -m paragraph handling).
    return runner.out(repo, *args, "-F", "-", input=message.encode(), env=env)
