"""bot/config/tree.py: configuration read from a commit equals configuration read from a folder,
errors included, and reading a commit writes nothing to disk.

Real git repositories in temporary folders; expected values written by hand.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from bot.config.discovery import find_op, list_ops, load_op_config, resolve_op
from bot.config.repo import load_repo_config
from bot.config.schema import RepoConfig
from bot.config.tree import CommitTree, DirTree
from bot.errors import ConfigError, OpNotFound
from bot.git import repository

OP_SOURCE = "BLOCK = 64\n\ndef kernel(x):\n    return x\n"

BASE = {
    ".tunebot.yml": "ops_root: kernels\ndefaults:\n  max_iters: 7\n",
    "kernels/proj/add/add.py": OP_SOURCE,
    "kernels/proj/add/tune.yaml": "latency:\n  repeats: 12\n",
    "kernels/proj/add/DESIGN.md": "# add\n\n## 性能目标\n\n- latency <= 40 us\n",
    "kernels/proj/mul/mul.py": OP_SOURCE,
    "kernels/other/mul/mul.py": OP_SOURCE,
    "kernels/proj/notes/README.md": "not an op: no notes.py\n",
}


def commit_all(make_commit, git_repo, files: dict[str, str | None]) -> str:
    return make_commit(git_repo, files, "config files")


def test_a_commit_reads_like_its_checkout(git_repo, make_commit):
    sha = commit_all(make_commit, git_repo, BASE)
    commit, folder = CommitTree(git_repo.repo, sha), DirTree(git_repo.path)
    for tree in (commit, folder):
        cfg = load_repo_config(tree)
        assert cfg.ops_root == "kernels" and cfg.max_iters == 7
        assert list_ops(tree, cfg) == ["other/mul", "proj/add", "proj/mul"]
        op = resolve_op(tree, cfg, "add")
        assert op.qualified == "proj/add"
        assert op.dir == Path("kernels/proj/add")
        assert op.latency.repeats == 12
        assert op.target_us == 40.0
        with pytest.raises(OpNotFound, match="ambiguous|mul"):
            find_op(tree, cfg, "mul")
        assert find_op(tree, cfg, "other/mul") == Path("kernels/other/mul")


def test_a_commit_ignores_the_dirty_checkout(git_repo, make_commit):
    sha = commit_all(make_commit, git_repo, BASE)
    (git_repo.path / ".tunebot.yml").write_text("ops_root: elsewhere\n", encoding="utf-8")
    (git_repo.path / "kernels/proj/add/tune.yaml").write_text("latency: {repeats: 3}\n")
    (git_repo.path / "kernels/proj/new").mkdir()
    (git_repo.path / "kernels/proj/new/new.py").write_text(OP_SOURCE)
    tree = CommitTree(git_repo.repo, sha)
    cfg = load_repo_config(tree)
    assert cfg.ops_root == "kernels"
    assert "proj/new" not in list_ops(tree, cfg)
    assert load_op_config(tree, Path("kernels/proj/add")).latency.repeats == 12
    assert load_repo_config(DirTree(git_repo.path)).ops_root == "elsewhere"


def test_no_config_file_at_the_commit_means_every_default(git_repo, make_commit):
    sha = make_commit(git_repo, {"README.md": "hello\n"}, "no config")
    tree = CommitTree(git_repo.repo, sha)
    assert load_repo_config(tree) == RepoConfig()
    assert list_ops(tree, RepoConfig()) == []


@pytest.mark.parametrize(
    ("files", "file", "key", "words"),
    [
        ({".tunebot.yml": "ops_rot: kernels\n"}, ".tunebot.yml", "ops_rot", "did you mean"),
        ({".tunebot.yml": "max_iters: 3\n"}, ".tunebot.yml", "max_iters", "defaults:"),
        ({".tunebot.yml": "a: 1\na: 2\n"}, ".tunebot.yml", "line 2", "duplicate key"),
        (
            {"kernels/proj/add/tune.yaml": "latency:\n  backend: cpuu\n"},
            "kernels/proj/add/tune.yaml",
            "latency.backend",
            "did you mean 'cpu'",
        ),
        (
            {"kernels/proj/add/tune.yaml": "limits: {memory_mb: 10}\n"},
            "kernels/proj/add/tune.yaml",
            "limits.memory_mb",
            "too small",
        ),
        (
            {"kernels/proj/add/DESIGN.md": "性能目标 120us".encode("gbk")},
            "kernels/proj/add/DESIGN.md",
            "(file)",
            "not UTF-8",
        ),
    ],
)
def test_errors_name_the_same_file_and_key_from_a_commit(
    git_repo, make_commit, files, file, key, words
):
    sha = commit_all(make_commit, git_repo, {**BASE, **files})
    messages = []
    for tree in (CommitTree(git_repo.repo, sha), DirTree(git_repo.path)):
        with pytest.raises(ConfigError) as caught:
            resolve_op(tree, load_repo_config(tree), "add")
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert file in messages[0] and key in messages[0] and words in messages[0]


def test_a_symlinked_op_folder_in_a_commit_is_not_an_op(git_repo, make_commit):
    files = {**BASE, "elsewhere/linked/linked.py": OP_SOURCE}
    commit_all(make_commit, git_repo, files)
    os.symlink("../../elsewhere/linked", git_repo.path / "kernels/proj/linked")
    for args in (["add", "kernels/proj/linked"], ["commit", "-q", "-m", "symlinked op folder"]):
        subprocess.run(["git", *args], cwd=git_repo.path, check=True, capture_output=True)
    tree = CommitTree(git_repo.repo, repository.resolve(git_repo.repo, "HEAD"))
    cfg = load_repo_config(tree)
    assert "proj/linked" not in list_ops(tree, cfg)  # git stores the link as a file
    with pytest.raises(OpNotFound):
        find_op(tree, cfg, "linked")
    folder = DirTree(git_repo.path)
    assert "proj/linked" in list_ops(folder, cfg)  # on disk the link is followed ...
    with pytest.raises(OpNotFound, match="points outside 'kernels'"):
        find_op(folder, cfg, "linked")  # ... and refused, because it leaves the ops root


def test_reading_a_commit_writes_no_temporary_files(git_repo, make_commit, tmp_path, monkeypatch):
    sha = commit_all(make_commit, git_repo, BASE)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))
    tree = CommitTree(git_repo.repo, sha)
    cfg = load_repo_config(tree)
    op = resolve_op(tree, cfg, "proj/add")
    assert op.target_us == 40.0
    assert list(scratch.iterdir()) == []
