"""Opening a repository and reading its commits, never the user's working copy.

The user's repository is sacred: nothing here writes their index, files or refs
(`init_repo` makes a fresh scratch repository for `tunebot demo`). GitPython opens
repositories, reads config and blobs in-process; everything else runs git through `runner`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import git

from bot import source_text
from bot.errors import GitError
from bot.git import runner

DEFAULT_NAME = "tunebot"
DEFAULT_EMAIL = "tunebot@users.noreply.local"


class NotARepository(GitError):
    """The path given is not inside a usable git repository (bad input)."""

    exit_code = 2


class UnknownRevision(GitError):
    exit_code = 2


class InvalidName(GitError):
    """A branch name, file path, worktree name or author that git cannot take (bad input)."""

    exit_code = 2


def open_repo(path: Path | str) -> git.Repo:
    """Open the repository containing `path` (any worktree or subdirectory)."""
    path = Path(path)
    if not path.exists():
        raise NotARepository(f"{path}: no such directory. Pass the path of a git repository.")
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except git.InvalidGitRepositoryError:
        raise NotARepository(
            f"{path} is not inside a git repository. Run tunebot inside one, or create it with `git init`."
        ) from None
    if repo.bare:  # callers need files to read and a checkout to merge into
        raise NotARepository(
            f"{repo.git_dir} is a bare repository: tunebot needs a repository with a working tree; "
            f"clone it first (`git clone {repo.git_dir} <dir>`) and run tunebot in the clone."
        )
    if not repo.head.is_valid():
        raise NotARepository(
            f"{repo.working_tree_dir or repo.git_dir} has no commits yet. "
            "Make a first commit (e.g. `git add -A && git commit -m init`), then run tunebot again."
        )
    return repo


def state_dir(repo: git.Repo) -> Path:
    """`<common git dir>/tunebot`: tunebot's durable state, shared by all worktrees (created)."""
    path = Path(repo.common_dir).resolve() / "tunebot"
    path.mkdir(parents=True, exist_ok=True)
    return path


def init_repo(path: Path | str, message: str = "initial commit") -> git.Repo:
    """Make `path` a git repository (if it is not one) and commit everything in it.

    Used by `tunebot demo` on a fresh scratch directory. Without a configured
    identity the commit is made as tunebot. The branch is `main` unless the
    user configured init.defaultBranch.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        default = runner.out(path, "config", "--get", "init.defaultBranch", check=False)
        runner.run(path, "init", "-q", *([] if default else ["-b", "main"]))
    repo = git.Repo(path)
    runner.run(repo, "add", "-A")
    name, email = identity(repo, "AUTHOR")
    c_name, c_email = identity(repo, "COMMITTER")
    env = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": c_name,
        "GIT_COMMITTER_EMAIL": c_email,
    }
    runner.run(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=env)
    return repo


def config_value(repo: git.Repo, section: str, option: str, default: str = "") -> str:
    """A value of the repository's git config (all levels), or `default`."""
    return str(repo.config_reader().get_value(section, option, default))


def identity(repo: git.Repo, role: str) -> tuple[str, str]:
    """(name, email) for `role` AUTHOR/COMMITTER: environment, then repo config, then tunebot's."""
    reader = repo.config_reader()  # one read of the config files for both values
    name = (
        os.environ.get(f"GIT_{role}_NAME") or reader.get_value("user", "name", "") or DEFAULT_NAME
    )
    email = (
        os.environ.get(f"GIT_{role}_EMAIL")
        or reader.get_value("user", "email", "")
        or DEFAULT_EMAIL
    )
    return str(name), str(email)


def parse_author(author: str) -> tuple[str, str]:
    """(name, email) of 'Name <email>'; InvalidName otherwise."""
    match = re.fullmatch(r"\s*([^<>]+?)\s*<([^<>\s]+)>\s*", author)
    if not match:
        raise InvalidName(f"bad author '{author}': write it as 'Name <email>'.")
    return match.group(1), match.group(2)


def current_branch(repo: git.Repo) -> str | None:
    """The branch checked out in this worktree, or None when HEAD is detached."""
    ref = runner.run(repo, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    if ref.returncode != 0:
        return None
    return ref.stdout.decode().strip() or None


_KNOWN_COMMITS: set[tuple[str, str]] = set()


def resolve(repo: git.Repo, rev: str) -> str:
    """Full sha of the commit `rev` names (branch, tag, sha, HEAD~1, ...)."""
    if not rev or rev.startswith("-"):
        raise UnknownRevision(f"'{rev}' is not a revision. Pass a branch, tag or commit sha.")
    key = (str(repo.git_dir), rev)
    if key in _KNOWN_COMMITS:  # a full sha once verified as a commit names that commit for good
        return rev
    proc = runner.run(repo, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False)
    if proc.returncode != 0:
        raise UnknownRevision(
            f"unknown revision '{rev}': no branch, tag or commit of that name in "
            f"{runner.workdir(repo)}. Check `git branch -a` or `git log`."
        )
    sha = proc.stdout.decode().strip()
    if rev == sha:
        _KNOWN_COMMITS.add(key)
    return sha


def has_commit(where: runner.Where, sha: str) -> bool:
    """Whether the repository at `where` holds commit `sha` (no error when it does not)."""
    return runner.succeeds(where, "cat-file", "-e", f"{sha}^{{commit}}")


def is_ancestor(repo: git.Repo, ancestor: str, descendant: str) -> bool:
    """Whether commit `ancestor` is `descendant` or one of its ancestors."""
    return runner.succeeds(repo, "merge-base", "--is-ancestor", ancestor, descendant)


def parents(repo: git.Repo, sha: str) -> list[str]:
    """The shas of commit `sha`'s parents, in order."""
    return [p.hexsha for p in repo.commit(sha).parents]


def last_commit_touching(repo: git.Repo, rev: str, path: str) -> str | None:
    """The newest commit reachable from `rev` that changed `path`, or None if none did."""
    return runner.out(repo, "log", "-1", "--format=%H", rev, "--", path) or None


def check_path(path: str) -> None:
    """Refuse a file path git cannot take in a commit (absolute, '..', '.git', backslashes)."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(p in ("", ".", "..", ".git") for p in parts)
    ):
        raise InvalidName(
            f"bad file path '{path}' for a commit: use a relative path like 'dir/file.py'."
        )


def read_file(repo: git.Repo, rev: str, path: str, missing_ok: bool = False) -> str | None:
    """Text of `path` in commit `rev` (not the user's working copy); None if absent and `missing_ok`.

    Python files are decoded as Python reads them (a PEP 263 coding line); other files as UTF-8.
    """
    data = read_bytes(repo, rev, path, missing_ok)
    if data is None:
        return None
    return source_text.decode(data, f"{path} in commit {rev[:10]}", python=path.endswith(".py"))


def read_bytes(repo: git.Repo, rev: str, path: str, missing_ok: bool = False) -> bytes | None:
    """Bytes of `path` in commit `rev`; None if absent and `missing_ok`."""
    check_path(path)
    try:
        obj = repo.commit(resolve(repo, rev)).tree / path
    except KeyError:
        if missing_ok:
            return None
        raise GitError(
            f"'{path}' does not exist in commit {rev}. Commit the file first, then run tunebot again."
        ) from None
    if obj.type != "blob":
        raise GitError(f"'{path}' in commit {rev} is a directory, not a file.")
    return obj.data_stream.read()


def list_files(repo: git.Repo, rev: str, under: str = "") -> list[str]:
    """Paths (from the repository root, '/'-separated) of the files in commit `rev` below folder `under`.

    Read from the commit, not the checkout; an absent folder gives []. Submodules are not files.
    """
    under = under.strip("/")
    if under in ("", "."):
        paths: tuple[str, ...] = ()
    else:
        check_path(under)
        paths = ("--", under)
    listing = runner.run(
        repo, "ls-tree", "-r", "-z", "--full-tree", resolve(repo, rev), *paths
    ).stdout.decode()
    found = []
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        if path and meta.split(" ")[1:2] == ["blob"]:
            found.append(path)
    return found
