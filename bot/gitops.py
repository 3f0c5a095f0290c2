"""Git operations of tunebot: worktrees, commits with explicit parents, owned branches, push, merge.

The user's repository is sacred. Nothing here switches the user's checkout or
writes their index or files, except `merge_into` fast-forwarding a *clean*
checkout of the base branch (so its files follow the merge). Branches tunebot
creates are recorded in `<common git dir>/tunebot/branches.json` with the sha
tunebot last set; only those still pointing there are ever moved, force-pushed,
archived or deleted (a branch someone moved or re-created is theirs).

Plumbing goes through `_git` (a subprocess with stdin, a scrubbed environment
and exit-code control, which `repo.git.<cmd>` does not give cleanly); GitPython
opens repositories, reads config and writes blobs in-process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

import git
from gitdb.base import IStream
from gitdb.db import LooseObjectDB

from bot import source_text
from bot.errors import GitError

DEFAULT_NAME = "tunebot"
DEFAULT_EMAIL = "tunebot@users.noreply.local"
ZERO_SHA = "0" * 40
_OWNERSHIP_FILE = "branches.json"
# Variables that would redirect git away from the repo we were given.
_SCRUBBED_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


class NotARepository(GitError):
    """The path given is not inside a usable git repository (bad input)."""

    exit_code = 2


class UnknownRevision(GitError):
    exit_code = 2


class InvalidName(GitError):
    """A branch name, file path, worktree name or author that git cannot take (bad input)."""

    exit_code = 2


# ---------------------------------------------------------------- running git


def _workdir(repo: git.Repo) -> str:
    return repo.working_tree_dir or repo.git_dir


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"  # a push must fail, never hang on a password prompt
    env.update(extra or {})
    return env


def _git(
    where: git.Repo | Path | str,
    *args: str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command; on failure (when `check`) raise GitError with git's own words."""
    cwd = _workdir(where) if isinstance(where, git.Repo) else str(where)
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, env=_env(env), capture_output=True)
    if check and proc.returncode != 0:
        detail = (
            proc.stderr.decode(errors="replace").strip()
            or proc.stdout.decode(errors="replace").strip()
        )
        raise GitError(f"git {args[0]} failed: {detail}")
    return proc


def _out(where: git.Repo | Path | str, *args: str, **kw) -> str:
    return _git(where, *args, **kw).stdout.decode().strip()


# ---------------------------------------------------------------- repository


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


def current_branch(repo: git.Repo) -> str | None:
    """The branch checked out in this worktree, or None when HEAD is detached."""
    ref = _git(repo, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    if ref.returncode != 0:
        return None
    return ref.stdout.decode().strip() or None


def resolve(repo: git.Repo, rev: str) -> str:
    """Full sha of the commit `rev` names (branch, tag, sha, HEAD~1, ...)."""
    if not rev or rev.startswith("-"):
        raise UnknownRevision(f"'{rev}' is not a revision. Pass a branch, tag or commit sha.")
    key = (repo.git_dir, rev)
    if key in _KNOWN_COMMITS:  # a full sha once verified as a commit names that commit for good
        return rev
    proc = _git(repo, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False)
    if proc.returncode != 0:
        raise UnknownRevision(
            f"unknown revision '{rev}': no branch, tag or commit of that name in "
            f"{_workdir(repo)}. Check `git branch -a` or `git log`."
        )
    sha = proc.stdout.decode().strip()
    if rev == sha:
        _KNOWN_COMMITS.add(key)
    return sha


_KNOWN_COMMITS: set[tuple[str, str]] = set()


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
    _check_path(path)
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
        _check_path(under)
        paths = ("--", under)
    out = _git(
        repo, "ls-tree", "-r", "-z", "--full-tree", resolve(repo, rev), *paths
    ).stdout.decode()
    found = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path and meta.split(" ")[1:2] == ["blob"]:
            found.append(path)
    return found


def init_repo(path: Path | str, message: str = "initial commit") -> git.Repo:
    """Make `path` a git repository (if it is not one) and commit everything in it.

    Used by `tunebot demo` on a fresh scratch directory. Without a configured
    identity the commit is made as tunebot. The branch is `main` unless the
    user configured init.defaultBranch.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        default = (
            _git(path, "config", "--get", "init.defaultBranch", check=False).stdout.decode().strip()
        )
        _git(path, "init", "-q", *([] if default else ["-b", "main"]))
    repo = git.Repo(path)
    _git(repo, "add", "-A")
    name, email = _identity(repo, "AUTHOR")
    c_name, c_email = _identity(repo, "COMMITTER")
    env = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": c_name,
        "GIT_COMMITTER_EMAIL": c_email,
    }
    _git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=env)
    return repo


# ---------------------------------------------------------------- locking and atomic files


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float = 30.0) -> Iterator[None]:
    """Exclusive lock on `path` (an flock on a file kept in place); waits up to `timeout_s`.

    The kernel releases an flock when its holder exits, even by SIGKILL, so a
    crashed run never blocks the next one and no staleness guess is needed: a
    lock held by a live process is never broken. The file is never unlinked
    (unlinking would let a waiter lock an orphaned inode while a newcomer locks
    a fresh file). It holds the last holder's pid, for people only.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, time.monotonic() + timeout_s)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, path: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LockBusy(
                    f"{path} is held by another tunebot process (pid {_lock_holder(path)}). "
                    "Wait for it to finish; the lock is released as soon as that process exits."
                ) from None
            time.sleep(0.02)


class LockBusy(GitError):
    """A file_lock is held by another live process."""


def lock_is_held(path: Path) -> bool:
    """Whether a live process holds the file_lock on `path` right now."""
    if not path.exists():
        return False
    try:
        with file_lock(path, timeout_s=0):
            return False
    except LockBusy:
        return True


def _lock_holder(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text().strip() or "unknown"
    return "unknown"


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------- worktrees


def _worktree_root(repo: git.Repo) -> Path:
    return state_dir(repo) / "worktrees"


def _registered_worktrees(repo: git.Repo) -> list[dict[str, str]]:
    """`git worktree list --porcelain` as dicts (keys: worktree, HEAD, branch, detached, bare, prunable)."""
    entries: list[dict[str, str]] = []
    for block in _out(repo, "worktree", "list", "--porcelain").split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        if entry:
            entries.append(entry)
    return entries


def _is_registered(repo: git.Repo, path: Path) -> bool:
    return any(
        Path(e["worktree"]).resolve() == path.resolve()
        for e in _registered_worktrees(repo)
        if "worktree" in e
    )


def ensure_worktree(repo: git.Repo, name: str, sha: str) -> Path:
    """A detached worktree at `state_dir/worktrees/<name>` checked out (clean) at `sha`."""
    _check_worktree_name(name)
    path = _worktree_root(repo) / name
    commit = resolve(repo, sha)
    if path.exists() and (path / ".git").is_file() and _is_registered(repo, path):
        checkout_worktree(path, commit)
        _git(path, "clean", "-ffdqx")
        return path
    _forget_vanished_worktrees(repo)
    if path.exists():  # a directory of ours git no longer knows: leftover of a crash
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "add", "--detach", "-f", str(path), commit)
    return path


def remove_worktree(repo: git.Repo, name: str) -> None:
    """Remove tunebot's worktree `name` (files and registration); no-op if absent."""
    _check_worktree_name(name)
    path = _worktree_root(repo) / name
    if path.exists() and (path / ".git").is_file() and _is_registered(repo, path):
        _git(repo, "worktree", "remove", "--force", "--force", str(path))
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
    _git(path, "checkout", "-q", "--detach", "--force", resolve(repo, sha))


def _check_worktree_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise InvalidName(
            f"bad worktree name '{name}': use one path component such as 'project__op'."
        )


# ---------------------------------------------------------------- commits


def _identity(repo: git.Repo, role: str) -> tuple[str, str]:
    """(name, email) for `role` AUTHOR/COMMITTER: environment, then repo config, then tunebot's."""
    reader = repo.config_reader()
    name = (
        os.environ.get(f"GIT_{role}_NAME") or reader.get_value("user", "name", "") or DEFAULT_NAME
    )
    email = (
        os.environ.get(f"GIT_{role}_EMAIL")
        or reader.get_value("user", "email", "")
        or DEFAULT_EMAIL
    )
    return str(name), str(email)


def _parse_author(author: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([^<>]+?)\s*<([^<>\s]+)>\s*", author)
    if not match:
        raise InvalidName(f"bad author '{author}': write it as 'Name <email>'.")
    return match.group(1), match.group(2)


def _check_path(path: str) -> None:
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

    Uses a temporary index in state_dir, so neither the user's index nor any
    worktree changes, and moves no ref. Same inputs and dates give the same sha.
    """
    parent_sha = resolve(repo, parent) if parent is not None else None
    index_info = []
    for path, data in sorted(files.items()):
        _check_path(path)
        if data is None:
            index_info.append(f"0 {ZERO_SHA}\t{path}")
            continue
        # a loose object written in-process: no `git hash-object` child per file
        blob = _loose_objects(repo).store(IStream("blob", len(data), BytesIO(data))).hexsha.decode()
        index_info.append(f"{_blob_mode(repo, parent_sha, path)} {blob}\t{path}")
    index = state_dir(repo) / f"index.{os.getpid()}.{time.monotonic_ns()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        _git(repo, "read-tree", *([parent_sha] if parent_sha else ["--empty"]), env=env)
        if index_info:
            _git(
                repo,
                "update-index",
                "--index-info",
                input="\n".join(index_info).encode() + b"\n",
                env=env,
            )
        tree = _out(repo, "write-tree", env=env)
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    sha = _commit_tree(repo, tree, [parent_sha] if parent_sha else [], message, author)
    _KNOWN_COMMITS.add((str(repo.git_dir), sha))  # just made: create_branch need not ask git
    return sha


def _loose_objects(repo: git.Repo) -> LooseObjectDB:
    return LooseObjectDB(os.path.join(repo.common_dir, "objects"))


def _commit_tree(
    repo: git.Repo, tree: str, parents: list[str], message: str, author: str | None = None
) -> str:
    a_name, a_email = _parse_author(author) if author else _identity(repo, "AUTHOR")
    c_name, c_email = _identity(repo, "COMMITTER")
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
    return _out(repo, *args, "-F", "-", input=message.encode(), env=env)


# ---------------------------------------------------------------- owned branches


def _ownership_path(repo: git.Repo) -> Path:
    return state_dir(repo) / _OWNERSHIP_FILE


def _read_owned(repo: git.Repo) -> dict[str, dict]:
    path = _ownership_path(repo)
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text())["branches"])
    except (ValueError, KeyError, TypeError):
        raise GitError(
            f"{path} is corrupt. Delete it only if no tunebot branches need cleaning up."
        ) from None


def _write_owned(repo: git.Repo, owned: dict[str, dict]) -> None:
    data = json.dumps({"branches": owned}, indent=1, sort_keys=True).encode() + b"\n"
    write_atomic(_ownership_path(repo), data)


@contextlib.contextmanager
def _ownership_lock(repo: git.Repo) -> Iterator[None]:
    with file_lock(state_dir(repo) / "branches.lock"):
        yield


def _owner_problem(entry: dict | None, current: str | None) -> str | None:
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
    return _owner_problem(_read_owned(repo).get(name), branch_sha(repo, name)) is None


def _check_branch_name(repo: git.Repo, name: str) -> None:
    if _git(
        repo, "check-ref-format", "--branch", name, check=False
    ).returncode != 0 or name.startswith("-"):
        raise InvalidName(
            f"'{name}' is not a valid branch name. Use letters, digits, '/', '-', '_' and '.'."
        )


def branch_sha(repo: git.Repo, name: str) -> str | None:
    """The sha branch `name` points at, or None if it does not exist."""
    proc = _git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{name}", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def create_branch(repo: git.Repo, name: str, sha: str) -> None:
    """Create branch `name` at `sha` and record it (and the sha) as tunebot's.

    An existing branch of ours is moved there (compare-and-swap); one that is
    not ours, or that someone moved since tunebot set it, is refused.
    """
    _check_branch_name(repo, name)
    target = resolve(repo, sha)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        old = branch_sha(repo, name)
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
        problem = _owner_problem(owned.get(name), branch_sha(repo, name))
        if problem:
            raise GitError(f"branch '{name}' was {problem}; tunebot only moves its own branches.")
        _move_owned(repo, owned, name, target, expected_old)


def _move_owned(
    repo: git.Repo, owned: dict[str, dict], name: str, new: str, old: str | None
) -> None:
    """Point our branch `name` (at `old`, None: absent) at `new`; caller holds the ownership lock.

    The entry names both shas while the ref moves, so a crash at any moment
    leaves a branch tunebot still recognises; afterwards only `new` counts.
    """
    before = owned.get(name)
    created = (before or {}).get("created", time.time())
    owned[name] = {"created": created, "sha": old or new, "pending": new}
    _write_owned(repo, owned)
    try:
        _update_ref(repo, name, new, old or ZERO_SHA)
    except GitError:
        if before is None:
            del owned[name]
        else:
            owned[name] = before
        _write_owned(repo, owned)
        raise
    owned[name] = {"created": created, "sha": new}
    _write_owned(repo, owned)


def _update_ref(repo: git.Repo, name: str, new: str, old: str) -> None:
    proc = _git(repo, "update-ref", "-m", "tunebot", f"refs/heads/{name}", new, old, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace")
        if "exists; cannot create" in stderr:
            # refs/heads/a/b and refs/heads/a/b/c cannot coexist (a file vs a directory).
            raise GitError(
                f"cannot create branch '{name}': a branch with a clashing path exists "
                f"({stderr.strip().splitlines()[-1]}). Git cannot hold both 'x' and 'x/y'; choose another name."
            )
        now = branch_sha(repo, name)
        raise GitError(
            f"branch '{name}' changed underneath tunebot (expected {old[:12] if old != ZERO_SHA else 'no branch'}, "
            f"found {now[:12] if now else 'no branch'}); someone else moved it. Re-run to pick up the new state."
        )


def _natural_key(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _recorded_branches(repo: git.Repo, prefix: str) -> list[str]:
    """Existing branches named in branches.json that start with `prefix`, ours or since taken over."""
    names = [
        n for n in _read_owned(repo) if n.startswith(prefix) and branch_sha(repo, n) is not None
    ]
    return sorted(names, key=_natural_key)


def owned_branches(repo: git.Repo, prefix: str = "") -> list[str]:
    """Existing branches that are tunebot's, named `prefix`... (v2 sorts before v10)."""
    owned = _read_owned(repo)
    return [
        n
        for n in _recorded_branches(repo, prefix)
        if _owner_problem(owned[n], branch_sha(repo, n)) is None
    ]


def _checked_out_branches(repo: git.Repo) -> dict[str, str]:
    """branch name -> path of the worktree that has it checked out."""
    found = {}
    for entry in _registered_worktrees(repo):
        ref = entry.get("branch", "")
        if ref.startswith("refs/heads/"):
            found[ref[len("refs/heads/") :]] = entry["worktree"]
    return found


@dataclass
class DeleteResult:
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why


def delete_branches(repo: git.Repo, names: list[str], remote: str | None = None) -> DeleteResult:
    """Delete tunebot's own branches among `names` (and on `remote` if given); skip others with the reason."""
    result = DeleteResult()
    checked_out = _checked_out_branches(repo)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        try:
            for name in names:
                current = branch_sha(repo, name)
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
                    _delete_branch_ref(repo, name, current)
                del owned[name]
                result.deleted.append(name)
        finally:  # what was deleted before an error stays forgotten
            _write_owned(repo, owned)
    return result


def _delete_branch_ref(repo: git.Repo, name: str, old: str) -> None:
    """Compare-and-swap delete: refuses if the branch moved after tunebot looked at it."""
    if _git(repo, "update-ref", "-d", f"refs/heads/{name}", old, check=False).returncode != 0:
        now = branch_sha(repo, name)
        raise GitError(
            f"branch '{name}' changed underneath tunebot (expected {old[:12]}, found "
            f"{now[:12] if now else 'no branch'}); it was left as it is. Re-run to pick up the new state."
        )


ARCHIVE_REFS = "refs/tunebot/archive/"


def archive_branches(repo: git.Repo, names: list[str], label: str) -> list[str]:
    """Move tunebot's branches among `names` to `refs/tunebot/archive/<label>/<branch>`; returns those refs.

    The archive ref is created before the branch is deleted (both compare-and-swap),
    so a crash in between loses no commit, and a re-run with the same label finishes
    the move. Branches that are not tunebot's (never created by it, or moved since),
    are checked out somewhere, or no longer exist are left as they are.
    """
    if (
        not label
        or _git(repo, "check-ref-format", f"{ARCHIVE_REFS}{label}/x", check=False).returncode != 0
    ):
        raise InvalidName(f"bad archive label '{label}': use something like '20260101T120000'.")
    archived: list[str] = []
    checked_out = _checked_out_branches(repo)
    with _ownership_lock(repo):
        owned = _read_owned(repo)
        try:
            for name in names:
                current = branch_sha(repo, name)
                if (
                    current is None
                    or name in checked_out
                    or _owner_problem(owned.get(name), current)
                ):
                    continue
                ref = f"{ARCHIVE_REFS}{label}/{name}"
                if (
                    ref_sha(repo, ref) != current
                ):  # equal: archived by a run that crashed before the delete
                    set_ref(repo, ref, current, None)
                _delete_branch_ref(repo, name, current)
                del owned[name]
                archived.append(ref)
        finally:
            _write_owned(repo, owned)
    return archived


def _delete_remote_branch(repo: git.Repo, remote: str, name: str) -> None:
    proc = _git(repo, "push", "--porcelain", remote, f":refs/heads/{name}", check=False)
    text = (proc.stdout + proc.stderr).decode(errors="replace")
    if proc.returncode != 0 and "remote ref does not exist" not in text:
        raise GitError(f"could not delete '{name}' on remote '{remote}': {text.strip()}")


def cleanup_iteration_branches(
    repo: git.Repo, op_name: str, prefix: str = "tunebot", remote: str | None = None
) -> DeleteResult:
    """Delete the iteration branches `<prefix>/<op>/v<N>` that are still tunebot's.

    Ones tunebot made that someone moved or re-created since are skipped, with the reason.
    """
    pattern = re.compile(rf"{re.escape(prefix)}/{re.escape(op_name)}/v\d+")
    names = [n for n in _recorded_branches(repo, f"{prefix}/{op_name}/v") if pattern.fullmatch(n)]
    return delete_branches(repo, names, remote=remote)


# ---------------------------------------------------------------- tunebot's own refs (refs/tunebot/...)

TUNEBOT_REFS = "refs/tunebot/"


def _check_tunebot_ref(ref: str) -> None:
    if (
        not ref.startswith(TUNEBOT_REFS)
        or _git(".", "check-ref-format", ref, check=False).returncode != 0
    ):
        raise GitError(f"'{ref}' is not a tunebot ref (those are valid refs under {TUNEBOT_REFS}).")


def ref_sha(repo: git.Repo, ref: str) -> str | None:
    """The sha a full ref points at, or None."""
    proc = _git(repo, "rev-parse", "--verify", "-q", ref, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def list_refs(repo: git.Repo, prefix: str) -> dict[str, str]:
    """Full ref name -> sha for every ref under `prefix` (e.g. 'refs/tunebot/proposals/')."""
    out = _out(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def set_ref(repo: git.Repo, ref: str, new: str, expected_old: str | None) -> None:
    """Compare-and-swap a ref under refs/tunebot/ (expected_old None: the ref must not exist yet)."""
    _check_tunebot_ref(ref)
    old = expected_old or ZERO_SHA
    proc = _git(repo, "update-ref", "-m", "tunebot", ref, new, old, check=False)
    if proc.returncode != 0:
        raise GitError(
            f"{ref} changed underneath tunebot (another tunebot process?). Run the command again."
        )


# ---------------------------------------------------------------- push

# Rejections a retry cannot fix: the remote's state or policy, or our own input.
_PERMANENT = (
    "non-fast-forward",
    "[rejected]",
    "fetch first",
    "stale info",
    "[remote rejected]",
    "does not appear to be a git repository",
    "no such remote",
    "does not match any",
    "invalid refspec",
    "authentication failed",
    "permission denied",
    "error: 403",
)


def _refspec_branch(spec: str) -> str | None:
    dst = spec.lstrip("+").split(":")[-1]
    if dst.startswith("refs/heads/"):
        return dst[len("refs/heads/") :]
    return None if dst.startswith("refs/") else dst


def push(
    repo: git.Repo, remote: str, refspecs: list[str], retries: int = 3, backoff_s: float = 1.0
) -> None:
    """Push `refspecs`, retrying transient failures (network, remote hiccups) with backoff.

    A rejection (non-fast-forward, hook, auth) is not retried. Force (`+`) and
    deletion (`:dst`) are allowed only for branches tunebot owns.
    """
    if not refspecs:
        return
    for spec in refspecs:
        forced = spec.startswith("+") or spec.startswith(":")
        branch = _refspec_branch(spec)
        if forced and (branch is None or not is_owned(repo, branch)):
            raise GitError(
                f"refusing to force-push '{spec}': only branches tunebot created may be forced or deleted."
            )
    attempt = 0
    while True:
        proc = _git(repo, "push", "--porcelain", remote, *refspecs, check=False)
        if proc.returncode == 0:
            return
        text = (proc.stdout + proc.stderr).decode(errors="replace")
        if any(marker in text.lower() for marker in _PERMANENT) or attempt >= retries:
            raise GitError(_push_message(remote, refspecs, text, attempt))
        time.sleep(backoff_s * (2**attempt))
        attempt += 1


def _push_message(remote: str, refspecs: list[str], text: str, attempt: int) -> str:
    lowered = text.lower()
    specs = " ".join(refspecs)
    if "non-fast-forward" in lowered or "fetch first" in lowered or "[rejected]" in lowered:
        return (
            f"push of {specs} to '{remote}' was rejected as non-fast-forward: the remote branch has "
            f"commits tunebot does not have. Fetch and re-run; tunebot never force-pushes your branches.\n{text.strip()}"
        )
    tries = f" after {attempt + 1} attempts" if attempt else ""
    return f"push of {specs} to '{remote}' failed{tries}:\n{text.strip()}"


# ---------------------------------------------------------------- merge


def _is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    return _git(repo, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0


def _merge_commit(repo: git.Repo, base_sha: str, head_sha: str, message: str) -> str:
    """The commit that merges head into base: a fast-forward when possible, else a real merge."""
    if _is_ancestor(repo, base_sha, head_sha):
        return head_sha
    proc = _git(
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
    return _commit_tree(repo, lines[0], [base_sha, head_sha], message)


def _is_dirty(worktree: str) -> bool:
    proc = _git(
        worktree, "status", "--porcelain", "--untracked-files=no", env={"GIT_OPTIONAL_LOCKS": "0"}
    )
    return bool(proc.stdout.strip())


def merge_into(repo: git.Repo, base_branch: str, head: str, message: str) -> str:
    """Merge `head` into `base_branch`; returns the new base sha (unchanged if already merged).

    If the base branch is checked out somewhere (the user's checkout included),
    that worktree must be clean and is fast-forwarded so its files follow;
    a dirty one is refused before anything moves.
    """
    base_sha = branch_sha(repo, base_branch)
    if base_sha is None:
        raise GitError(
            f"base branch '{base_branch}' does not exist. Create it or pick another base."
        )
    head_sha = resolve(repo, head)
    if _is_ancestor(repo, head_sha, base_sha):
        return base_sha
    worktree = _checked_out_branches(repo).get(base_branch)
    if worktree and _is_dirty(worktree):
        raise GitError(
            f"'{base_branch}' is checked out in {worktree} with uncommitted changes; tunebot will not touch them. "
            "Commit or stash your changes, then run tunebot merge again."
        )
    new_sha = _merge_commit(repo, base_sha, head_sha, message)
    if worktree:
        # merge --ff-only moves the branch and the files together, and itself
        # refuses if the branch moved past base_sha meanwhile.
        proc = _git(worktree, "merge", "-q", "--ff-only", new_sha, check=False)
        if proc.returncode != 0:
            raise GitError(
                f"could not fast-forward '{base_branch}' in {worktree}: "
                f"{proc.stderr.decode(errors='replace').strip()}. Nothing was changed; run tunebot merge again."
            )
    else:
        _update_ref(repo, base_branch, new_sha, base_sha)
    return new_sha
