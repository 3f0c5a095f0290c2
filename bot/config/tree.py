"""Where configuration is read from: a folder on disk, or the tree of one git commit.

The loaders see only this interface, so reading `.tunebot.yml`, `tune.yaml` and DESIGN.md
as committed at a sha writes nothing to disk. Paths are '/'-separated and relative to the
repository root.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Protocol

from bot.git import repository


class Tree(Protocol):
    """Read-only view of a repository's files."""

    def exists(self, rel: str) -> bool: ...

    def is_file(self, rel: str) -> bool: ...

    def is_dir(self, rel: str) -> bool: ...

    def read_bytes(self, rel: str) -> bytes:
        """The file's bytes; OSError when it cannot be read."""
        ...

    def subdirs(self, rel: str) -> list[str]:
        """Names of the folders directly inside folder `rel` (none when it is absent)."""
        ...

    def relative(self, path: Path) -> Path:
        """`path` (absolute or relative to the root) as a path relative to the root."""
        ...

    def stays_inside(self, rel: str, base: str) -> bool:
        """Whether `rel` really lives below `base` (a symlink on disk may point elsewhere)."""
        ...


class DirTree:
    """The files of a folder on disk (the user's checkout, or any directory)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def is_file(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def is_dir(self, rel: str) -> bool:
        return (self.root / rel).is_dir()

    def read_bytes(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def subdirs(self, rel: str) -> list[str]:
        base = self.root / rel
        if not base.is_dir():
            return []
        return [entry.name for entry in base.iterdir() if entry.is_dir()]

    def relative(self, path: Path) -> Path:
        absolute = path if path.is_absolute() else self.root / path
        try:
            return absolute.resolve().relative_to(self.root.resolve())
        except ValueError:
            return path

    def stays_inside(self, rel: str, base: str) -> bool:
        try:
            (self.root / rel).resolve().relative_to((self.root / base).resolve())
        except ValueError:
            return False
        return True


class CommitTree:
    """The files of one commit, read through the git layer; nothing is written to disk.

    A symlink in the commit is a file here (git stores it as a blob), so a symlinked
    folder is never entered.
    """

    def __init__(self, repo: object, sha: str) -> None:
        self.repo = repo
        self.sha = sha
        self._listed: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def _listing(self, rel: str) -> tuple[frozenset[str], frozenset[str]]:
        """(files, folders) below `rel`, as paths from the root; one `git ls-tree` per folder."""
        rel = _clean(rel)
        if rel not in self._listed:
            files = self._from_cache(rel)
            if files is None:
                files = frozenset(repository.list_files(self.repo, self.sha, rel))  # type: ignore[arg-type]
            folders = {
                str(parent)
                for path in files
                for parent in PurePosixPath(path).parents
                if str(parent) != "."
            }
            self._listed[rel] = (files, frozenset(folders))
        return self._listed[rel]

    def _from_cache(self, rel: str) -> frozenset[str] | None:
        """The files below `rel` cut from a folder already listed above it, else None."""
        for done, (files, _) in self._listed.items():
            if done in ("", rel) or rel.startswith(done + "/"):
                return frozenset(p for p in files if p == rel or p.startswith(rel + "/"))
        return None

    def exists(self, rel: str) -> bool:
        return self.is_file(rel) or self.is_dir(rel)

    def is_file(self, rel: str) -> bool:
        rel = _clean(rel)
        return rel in self._listing(rel)[0]  # `ls-tree -r -- <file>` lists just that file

    def is_dir(self, rel: str) -> bool:
        rel = _clean(rel)
        return rel == "" or rel in self._listing(rel)[1]

    def read_bytes(self, rel: str) -> bytes:
        data = repository.read_bytes(self.repo, self.sha, _clean(rel), missing_ok=True)  # type: ignore[arg-type]
        if data is None:
            raise FileNotFoundError(2, "No such file or directory", rel)
        return data

    def subdirs(self, rel: str) -> list[str]:
        rel = _clean(rel)
        depth = len(PurePosixPath(rel).parts) + 1
        return sorted(
            PurePosixPath(folder).name
            for folder in self._listing(rel)[1]
            if len(PurePosixPath(folder).parts) == depth
        )

    def relative(self, path: Path) -> Path:
        return path

    def stays_inside(self, rel: str, base: str) -> bool:
        return True  # paths come from the commit's own listing, and symlinks are never followed


def _clean(rel: str) -> str:
    text = PurePosixPath(rel).as_posix()
    return "" if text == "." else text.strip("/")


def as_tree(where: Path | str | Tree) -> Tree:
    """A Tree for `where`: a path becomes the folder at that path."""
    if isinstance(where, (str, Path)):
        return DirTree(Path(where))
    return where
