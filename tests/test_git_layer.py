"""bot/git/ is the only caller of git, and its smaller questions answered on real repositories."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from conftest import GitRepo, make_commit

from bot.errors import GitError
from bot.git import folders, remotes, repository

BOT = Path(__file__).resolve().parents[1] / "bot"
_SPAWN = {"run", "Popen", "call", "check_call", "check_output"}
# GitPython Repo methods that run git (in a child or a persistent cat-file process).
_GITPYTHON_RUNS_GIT = {
    "commit",
    "is_ancestor",
    "iter_commits",
    "config_reader",
    "config_writer",
    "merge_base",
    "is_dirty",
}


def _git_calls(source: str) -> list[str]:
    """Places in `source` that run git without the git layer, as 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            argv = node.args[0] if node.args else None
            if name in _SPAWN and isinstance(argv, ast.List | ast.Tuple) and argv.elts:
                first = argv.elts[0]
                if (isinstance(first, ast.Constant) and str(first.value).endswith("git")) or (
                    isinstance(first, ast.Name) and first.id == "GIT"
                ):
                    found.append(f"{node.lineno}: subprocess git")
            if name == "Repo":
                found.append(f"{node.lineno}: GitPython Repo()")
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _GITPYTHON_RUNS_GIT
                and _names_a_repo(func.value)
            ):
                found.append(f"{node.lineno}: GitPython .{func.attr}()")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "git"
            and not (isinstance(node.value.value, ast.Name) and node.value.value.id == "bot")
        ):
            found.append(f"{node.lineno}: GitPython .git.{node.attr}")
    return sorted(found, key=lambda f: int(f.split(":", 1)[0]))


def _names_a_repo(node: ast.expr) -> bool:
    """`repo`, `run.repo`, `self.repo`: how the code names a GitPython repository."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name.endswith("repo")


def test_the_checker_finds_each_kind_of_git_call() -> None:
    source = """
import subprocess, git
subprocess.run(["git", "log"], cwd=".")
subprocess.Popen(("/usr/bin/git", "fetch"))
subprocess.run([GIT, "push"])
repo = git.Repo(".")
repo.git.log("-1")
repo.commit("HEAD").parents
run.repo.is_ancestor("a", "b")
subprocess.run(["ls"])
repo.working_tree_dir
repository.is_ancestor(repo, "a", "b")
self.links.commit(sha)
"""
    assert [f.split(": ", 1)[1] for f in _git_calls(source)] == [
        "subprocess git",
        "subprocess git",
        "subprocess git",
        "GitPython Repo()",
        "GitPython .git.log",
        "GitPython .commit()",
        "GitPython .is_ancestor()",
    ]


def test_only_the_git_layer_runs_git() -> None:
    outside = [p for p in sorted(BOT.rglob("*.py")) if (BOT / "git") not in p.parents]
    assert len(outside) > 50  # the scan really covers the package
    found = {
        str(p.relative_to(BOT.parent)): calls
        for p in outside
        if (calls := _git_calls(p.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_import_git_inside_the_package_is_gitpython() -> None:
    """`bot/git/` shares its name with GitPython's top-level `git`; absolute imports keep them apart."""
    import importlib
    import pkgutil

    import bot.git

    seen = 0
    for info in pkgutil.iter_modules(bot.git.__path__):
        module = importlib.import_module(f"bot.git.{info.name}")
        imported = getattr(module, "git", None)
        if imported is not None:
            seen += 1
            assert imported is not bot.git and hasattr(imported, "Repo"), info.name
            assert Path(imported.__file__).parent != BOT / "git"
    assert seen >= 5


# ---------------------------------------------------------------- repository questions


def test_history_questions(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    first = repository.resolve(repo, "HEAD")
    second = make_commit(git_repo, {"a.txt": "1\n"}, "a")
    third = make_commit(git_repo, {"b.txt": "1\n"}, "b")
    assert repository.last_commit_touching(repo, third, "a.txt") == second
    assert repository.last_commit_touching(repo, second, "b.txt") is None
    assert repository.parents(repo, third) == [second]
    assert repository.parents(repo, first) == []
    assert repository.is_ancestor(repo, first, third)
    assert not repository.is_ancestor(repo, third, first)
    assert repository.has_commit(git_repo.path, third)
    assert not repository.has_commit(git_repo.path, "f" * 40)
    assert repository.config_value(repo, "user", "name") == "Test User"
    assert repository.config_value(repo, "user", "nickname", "none") == "none"


# ---------------------------------------------------------------- remotes


def test_fetch_ref_and_ensure_commit(git_repo: GitRepo, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(git_repo.origin), str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "config", "user.name", "O"], check=True)
    subprocess.run(["git", "-C", str(other), "config", "user.email", "o@x"], check=True)
    subprocess.run(["git", "-C", str(other), "checkout", "-q", "-b", "side"], check=True)
    tip = make_commit(other, {"s.txt": "s\n"}, "side")
    subprocess.run(["git", "-C", str(other), "push", "-q", "origin", "side"], check=True)

    repo = git_repo.repo
    assert not repository.has_commit(git_repo.path, tip)
    got = remotes.fetch_ref(repo, "origin", "refs/heads/side", "refs/remotes/origin/side")
    assert got == tip
    assert remotes.fetch_ref(repo, "origin", "refs/heads/none", "refs/remotes/origin/none") is None
    assert remotes.fetch_ref(repo, "nowhere", "refs/heads/side", "refs/x/y") is None

    fresh = tmp_path / "fresh"
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--no-local",
            "--single-branch",
            "-b",
            "main",
            str(git_repo.origin),
            str(fresh),
        ],
        check=True,
    )
    assert not repository.has_commit(fresh, tip)
    remotes.ensure_commit(fresh, tip, "origin")
    assert repository.has_commit(fresh, tip)
    with pytest.raises(subprocess.CalledProcessError) as err:
        remotes.ensure_commit(fresh, "e" * 40, "origin")
    assert err.value.cmd[:4] == ["git", "-C", str(fresh), "fetch"]


def test_git_failure_carries_gits_words(git_repo: GitRepo) -> None:
    with pytest.raises(repository.UnknownRevision, match="no-such-branch"):
        repository.resolve(git_repo.repo, "no-such-branch")
    with pytest.raises(GitError, match="does not exist in commit"):
        repository.read_bytes(git_repo.repo, "HEAD", "missing.txt")


# ---------------------------------------------------------------- folders


def test_folders_inside_and_outside_git(git_repo: GitRepo, tmp_path: Path) -> None:
    docs = git_repo.path / "docs"
    sha = make_commit(git_repo, {"docs/a.md": "a\n"}, "docs")
    make_commit(git_repo, {"other.txt": "o\n"}, "other")
    assert folders.toplevel(docs) == git_repo.path
    assert folders.last_commit(docs) == sha  # the newest commit below docs/, not HEAD
    assert not folders.has_changes(docs)
    (docs / "new.md").write_text("n\n")  # untracked counts as a change
    assert folders.has_changes(docs)

    plain = tmp_path / "plain"
    plain.mkdir()
    assert folders.toplevel(plain) is None
    assert folders.last_commit(plain) is None
    assert not folders.has_changes(plain)
