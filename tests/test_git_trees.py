"""In-process trees and commits (bot/git/trees.py) are the objects git itself writes.

Every comparison here is against the real git: the same changes applied through a temporary
index (`read-tree`, `update-index`, `write-tree`) and `git commit-tree` must give the same
shas, and `git fsck --strict` must accept every object written in-process.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import GitRepo, make_commit

from bot.git import commits, refs, trees

# Names chosen for git's tree order: "a.b" < "a/" < "a0", and a file and directory sharing a prefix.
TRICKY = {
    "a.b": "dot",
    "a/x.txt": "in a",
    "a0": "zero",
    "a-b/y.txt": "dash dir",
    "top.txt": "top",
    "deep/er/still/f.py": "deep",
    "run.sh": "#!/bin/sh\n",
    "ünï/çødé.txt": "utf-8 names",
}


def _git(
    repo: Path, *args: str, env: dict[str, str] | None = None, data: bytes | None = None
) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=data,
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return proc.stdout.decode().strip()


def _tree_by_git(repo: Path, parent: str, files: dict[str, bytes | None]) -> str:
    index = repo / ".git" / "test-index"
    env = {"GIT_INDEX_FILE": str(index)}
    _git(repo, "read-tree", parent, env=env)
    lines = []
    for path, data in files.items():
        if data is None:
            lines.append(f"0 {refs.ZERO_SHA}\t{path}")
        else:
            blob = _git(repo, "hash-object", "-w", "--stdin", data=data)
            mode = "100644"
            listed = _git(repo, "ls-tree", parent, "--", path)
            if listed and listed.split()[1] == "blob":
                mode = listed.split()[0]
            lines.append(f"{mode} {blob}\t{path}")
    _git(repo, "update-index", "--index-info", env=env, data="\n".join(lines).encode() + b"\n")
    tree = _git(repo, "write-tree", env=env)
    index.unlink()
    return tree


@pytest.fixture
def tricky_repo(git_repo: GitRepo) -> GitRepo:
    make_commit(git_repo, TRICKY, "tricky names")
    script = git_repo.path / "run.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    git_repo.repo.git.add("run.sh")
    git_repo.repo.git.commit("-q", "-m", "executable")
    return git_repo


CHANGES: list[dict[str, bytes | None]] = [
    {"perf_opt/op_opt_v1.py": b"x = 1\n", "perf_opt/opt_log.md": b"| 1 |\n"},
    {"a.b": b"replaced", "a/x.txt": None, "a/new.txt": b"new in a"},
    {"a/x.txt": None},  # empties directory a: it disappears
    {"run.sh": b"#!/bin/sh\necho changed\n"},  # keeps its executable mode
    {"deep/er/still/f.py": None, "deep/er/g.py": b"g"},
    {"ünï/çødé.txt": b"changed", "a0/inner.txt": None},
    {"top.txt": None, "a-b/y.txt": None, "a0": None, "a.b": None},
]


@pytest.mark.parametrize("files", CHANGES, ids=[str(i) for i in range(len(CHANGES))])
def test_tree_equals_gits(tricky_repo: GitRepo, files: dict[str, bytes | None]) -> None:
    repo = tricky_repo.repo
    head = repo.head.commit
    ours = trees.write_tree(repo, head.tree.hexsha, files)
    assert ours == _tree_by_git(tricky_repo.path, head.hexsha, files)


@pytest.mark.parametrize(
    "message",
    ["one line", "one line\n", "title\n\nbody\nmore\n", "ünïcødé ✓\n\n\n", "trailing spaces  \n"],
)
def test_commit_equals_commit_tree(git_repo: GitRepo, message: str) -> None:
    repo = git_repo.repo
    head = repo.head.commit
    who = ("Ada Lovelace", "ada@example.com")
    for offset, date in (
        (0, "1700000000 +0000"),
        (19800, "1700000000 +0530"),
        (-25200, "1700000000 -0700"),
    ):
        ours = trees.write_commit(
            repo, head.tree.hexsha, [head.hexsha], message, who, who, when=(1700000000, offset)
        )
        env = {
            "GIT_AUTHOR_NAME": who[0],
            "GIT_AUTHOR_EMAIL": who[1],
            "GIT_COMMITTER_NAME": who[0],
            "GIT_COMMITTER_EMAIL": who[1],
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
        }
        theirs = _git(
            git_repo.path,
            "commit-tree",
            head.tree.hexsha,
            "-p",
            head.hexsha,
            "-F",
            "-",
            env=env,
            data=message.encode(),
        )
        assert ours == theirs, (message, date)


def test_commit_files_fast_path_spawns_no_object_writers(
    tricky_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The iteration commit runs no read-tree/update-index/write-tree/commit-tree/hash-object."""
    real_git = subprocess.run(
        ["which", "git"], capture_output=True, text=True, check=True
    ).stdout.strip()
    log = tmp_path / "git-calls.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "{real_git}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.delenv(var, raising=False)
    repo = tricky_repo.repo
    sha = commits.commit_files(repo, repo.head.commit.hexsha, CHANGES[0], "iteration 1")
    calls = log.read_text().split() if log.exists() else []
    assert not {"read-tree", "update-index", "write-tree", "commit-tree", "hash-object"} & set(
        calls
    )
    assert repo.commit(sha).message == "iteration 1"
    _git(tricky_repo.path, "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize(
    ("config", "env", "why"),
    [
        (None, {"GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000"}, "GIT_AUTHOR_DATE is set"),
        (("commit.gpgSign", "true"), {}, "commit.gpgSign is set"),
        (("i18n.commitEncoding", "ISO-8859-1"), {}, "i18n.commitEncoding is not UTF-8"),
        (("user.name", "Ada."), {}, "needs git's clean-up"),
    ],
)
def test_git_writes_the_commit_when_config_needs_it(
    git_repo: GitRepo,
    monkeypatch: pytest.MonkeyPatch,
    config: tuple[str, str] | None,
    env: dict[str, str],
    why: str,
) -> None:
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if config:
        git_repo.repo.git.config(*config)
    identities = [
        commits.identity(git_repo.repo, "AUTHOR"),
        commits.identity(git_repo.repo, "COMMITTER"),
    ]
    assert why in (trees.fast_path_problem(git_repo.repo, identities) or "")


def test_fast_and_git_paths_make_the_same_commit(
    git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the clock fixed through the environment git writes it; the fast path must agree."""
    repo = git_repo.repo
    head = repo.head.commit.hexsha
    files: dict[str, bytes | None] = {"perf_opt/v1.py": b"v1", "README.md": None}
    monkeypatch.setenv("GIT_AUTHOR_DATE", "1700000000 +0000")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "1700000000 +0000")
    by_git = commits.commit_files(repo, head, files, "same\n")
    who = [commits.identity(repo, "AUTHOR"), commits.identity(repo, "COMMITTER")]
    tree = trees.write_tree(repo, repo.commit(head).tree.hexsha, files)
    fast = trees.write_commit(repo, tree, [head], "same\n", who[0], who[1], when=(1700000000, 0))
    assert fast == by_git


NAMES = [
    "tunebot/rms_norm/v1",
    "tunebot/ns.op/v12",
    "perf/x",
    "a",
    "ünï/çødé",
    "-x",
    "HEAD",
    "a..b",
    "a/.hidden",
    ".a",
    "a.lock",
    "a/b.lock/c",
    "a//b",
    "/a",
    "a/",
    "a.",
    "a@{b",
    "@",
    "a b",
    "a~b",
    "a^b",
    "a:b",
    "a?b",
    "a*b",
    "a[b",
    "a\\b",
    "a\tb",
    "a\x7fb",
    "@{-1}",
    "x@y",
    "a.b/c-d_e",
]


@pytest.mark.parametrize("name", NAMES)
def test_branch_name_check_agrees_with_git(git_repo: GitRepo, name: str) -> None:
    by_git = (
        subprocess.run(
            ["git", "check-ref-format", "--branch", name], cwd=git_repo.path, capture_output=True
        ).returncode
        == 0
        and not name.startswith("-")
        and name
        not in ("HEAD", "@{-1}")  # HEAD is refused by newer git; @{-1} names another branch
    )
    assert refs.is_valid_branch_name(name) == by_git


@pytest.mark.parametrize("name", [f"refs/tunebot/{n}" for n in NAMES] + ["refs", "refs/heads/a"])
def test_ref_check_agrees_with_git(name: str, tmp_path: Path) -> None:
    by_git = (
        subprocess.run(
            ["git", "check-ref-format", name], cwd=tmp_path, capture_output=True
        ).returncode
        == 0
    )
    assert refs.is_valid_ref(name) == by_git
