"""Tree and commit objects written in-process: a commit of a few changed files costs no git child.

An iteration commits two files (the variant and opt_log.md) on top of the best-so-far.
Through git that is read-tree, update-index, write-tree and commit-tree: four processes,
most of the bot's own cost per iteration. Here the parent's trees along each changed path
are read through GitPython's object database (one long-lived `git cat-file --batch`), the
new trees and the commit are serialised as git does and stored as loose objects, exactly
like the blobs. The objects are byte for byte those git writes (tests compare shas), so a
commit made here and one made by `git commit-tree` from the same inputs are the same commit.

`fast_path_problem` says when git itself must write the commit instead: a SHA-256 object
format, signing or a non-UTF-8 commit encoding configured, dates fixed through the
environment, or a name git would clean up.
"""

from __future__ import annotations

import os
import time
from io import BytesIO

import git
from gitdb.base import IStream
from gitdb.db import LooseObjectDB

TREE_MODE = b"40000"
FILE_MODE = b"100644"
# Characters git strips from either end of a name or email ("crud"), and ones it refuses inside.
_CRUD = "".join(chr(c) for c in range(33)) + ".,:;<>\"\\'"
_FORBIDDEN = "<>\n"
_DATE_ENV = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")

Entry = tuple[bytes, bytes, bytes]  # (mode, name, binary sha)


def loose_objects(repo: git.Repo) -> LooseObjectDB:
    return LooseObjectDB(os.path.join(repo.common_dir, "objects"))


def store(repo: git.Repo, kind: str, data: bytes) -> str:
    """Write one object as a loose object; returns its hex sha."""
    return loose_objects(repo).store(IStream(kind, len(data), BytesIO(data))).hexsha.decode()


def fast_path_problem(repo: git.Repo, identities: list[tuple[str, str]]) -> str | None:
    """Why this commit must be written by git itself, or None when it can be written here."""
    for var in _DATE_ENV:
        if os.environ.get(var):
            return f"{var} is set"
    reader = repo.config_reader()
    if str(reader.get_value("extensions", "objectformat", "sha1")).lower() != "sha1":
        return "the repository does not use SHA-1 objects"
    if str(reader.get_value("commit", "gpgsign", "false")).lower() in ("true", "yes", "on", "1"):
        return "commit.gpgSign is set"
    encoding = str(reader.get_value("i18n", "commitencoding", "utf-8")).lower()
    if encoding not in ("utf-8", "utf8"):
        return "i18n.commitEncoding is not UTF-8"
    for name, email in identities:
        for value in (name, email):
            if not value or value != value.strip(_CRUD) or any(c in value for c in _FORBIDDEN):
                return f"identity '{value}' needs git's clean-up"
    return None


def _entries(repo: git.Repo, tree_hex: str | None) -> list[Entry]:
    if tree_hex is None:
        return []
    data = repo.odb.stream(bytes.fromhex(tree_hex)).read()
    entries: list[Entry] = []
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries.append((data[pos:space], data[space + 1 : nul], data[nul + 1 : nul + 21]))
        pos = nul + 21
    return entries


def _sort_key(entry: Entry) -> bytes:
    mode, name, _ = entry
    return name + b"/" if mode == TREE_MODE else name  # git orders a directory as "name/"


def _serialise(entries: list[Entry]) -> bytes:
    return b"".join(
        mode + b" " + name + b"\0" + sha for mode, name, sha in sorted(entries, key=_sort_key)
    )


def write_tree(repo: git.Repo, base_tree: str | None, files: dict[str, bytes | None]) -> str:
    """The tree `base_tree` with `files` (path -> content, None removes) applied; its hex sha.

    New files get mode 100644; a replaced file keeps its mode (e.g. executable). A directory
    left empty by removals disappears, as in git.
    """
    split = {tuple(p.encode().split(b"/")): data for p, data in files.items()}
    return _write(repo, base_tree, split) or store(repo, "tree", b"")


def _write(
    repo: git.Repo, tree_hex: str | None, changes: dict[tuple[bytes, ...], bytes | None]
) -> str | None:
    """Write the changed tree; None when it ends up empty."""
    entries = {name: (mode, sha) for mode, name, sha in _entries(repo, tree_hex)}
    here = {parts[0]: data for parts, data in changes.items() if len(parts) == 1}
    below: dict[bytes, dict[tuple[bytes, ...], bytes | None]] = {}
    for parts, data in changes.items():
        if len(parts) > 1:
            below.setdefault(parts[0], {})[parts[1:]] = data
    for name, data in here.items():
        if data is None:
            entries.pop(name, None)
            continue
        old = entries.get(name)
        mode = old[0] if old is not None and old[0] != TREE_MODE else FILE_MODE
        entries[name] = (mode, bytes.fromhex(store(repo, "blob", data)))
    for name, sub in below.items():
        old = entries.get(name)
        is_tree = old is not None and old[0] == TREE_MODE
        if not is_tree and all(data is None for data in sub.values()):
            continue  # removing paths below a file or below nothing removes nothing
        sub_hex = old[1].hex() if old is not None and is_tree else None
        new = _write(repo, sub_hex, sub)
        if new is None:
            entries.pop(name, None)
        else:
            entries[name] = (TREE_MODE, bytes.fromhex(new))
    if not entries:
        return None
    return store(repo, "tree", _serialise([(m, n, s) for n, (m, s) in entries.items()]))


def _signature(name: str, email: str, when: int, offset: int) -> bytes:
    sign = "+" if offset >= 0 else "-"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return f"{name} <{email}> {when} {sign}{hours:02d}{minutes:02d}".encode()


def write_commit(
    repo: git.Repo,
    tree: str,
    parents: list[str],
    message: str,
    author: tuple[str, str],
    committer: tuple[str, str],
    when: tuple[int, int] | None = None,
) -> str:
    """A commit object as `git commit-tree -F -` writes it; `when` is (unix time, UTC offset s)."""
    if when is None:
        now = time.time()
        when = (int(now), time.localtime(now).tm_gmtoff)
    lines = [f"tree {tree}".encode()]
    lines += [f"parent {p}".encode() for p in parents]
    lines.append(b"author " + _signature(*author, *when))
    lines.append(b"committer " + _signature(*committer, *when))
    return store(repo, "commit", b"\n".join(lines) + b"\n\n" + message.encode())
