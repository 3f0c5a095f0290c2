"""Commits with explicit parents, written without touching any index, worktree or ref."""

from __future__ import annotations

import contextlib
import os
import time
from io import BytesIO

import git
from gitdb.base import IStream
from gitdb.db import LooseObjectDB

from bot.git import runner
from bot.git.refs import ZERO_SHA
from bot.git.repository import check_path, identity, parse_author, resolve, state_dir


def _blob_mode(repo: git.Repo, parent: str | None, path: str) -> str:
    """Keep an existing file's mode (e.g. executable); new files are 100644."""
    if parent is None:
        return "100644"
    try:
        obj = repo.commit(parent).tree / path
    except KeyError:
        return "100644"
    return f"{obj.mode:o}" if obj.type == "blob" else "100644"


def _loose_objects(repo: git.Repo) -> LooseObjectDB:
    return LooseObjectDB(os.path.join(repo.common_dir, "objects"))


def commit_files(
    repo: git.Repo,
    parent: str | None,
    files: dict[str, bytes | None],
    message: str,
    author: str | None = None,
) -> str:
    """A commit whose tree is `parent`'s with `files` added/replaced (None removes); returns its sha.

    Uses a temporary index in state_dir, so neither the user's index nor any
    worktree changes, and moves no ref. Same inputs and dates give the same sha.
    """
    parent_sha = resolve(repo, parent) if parent is not None else None
    index_info = []
    for path, data in sorted(files.items()):
        check_path(path)
        if data is None:
            index_info.append(f"0 {ZERO_SHA}\t{path}")
            continue
        # a loose object written in-process: no `git hash-object` child per file
        blob = _loose_objects(repo).store(IStream("blob", len(data), BytesIO(data))).hexsha.decode()
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
        tree = runner.out(repo, "write-tree", env=env)
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return commit_tree(repo, tree, [parent_sha] if parent_sha else [], message, author)


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
