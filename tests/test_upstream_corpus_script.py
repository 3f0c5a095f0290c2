"""scripts/upstream_corpus.py materialises manifest kernels from real local clones.

Each test builds a real git repository in a temp dir (a branch commit and a commit reachable
only from a pull-request-style ref, as some heldout_h kernels are), writes a small manifest
beside it and runs the script as a subprocess. No corpus kernel and no strategy is involved.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "upstream_corpus.py"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV, check=True
    )
    return run.stdout.strip()


def make_upstream(tmp: Path) -> tuple[Path, str, str]:
    """A repository with kernel a.py on main and kernel b.py only on refs/pull/7/head."""
    repo = tmp / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("block_M = 64\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "a")
    main_commit = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "pr")
    (repo / "b.py").write_text("BLOCK_N = 32\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-q", "-m", "b")
    pr_commit = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", "refs/pull/7/head", pr_commit)
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "pr")
    return repo, main_commit, pr_commit


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_manifest(corpus: Path, kernels: list[dict]) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    manifest = {
        "source": {"repo": "base/repo", "commit": "0" * 40, "licence": "MIT"},
        "kernels": kernels,
    }
    (corpus / "MANIFEST.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def run_script(corpus: Path, *git_dirs: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(SCRIPT), "--corpus", str(corpus)]
    for d in git_dirs:
        args += ["--git-dir", d]
    return subprocess.run(args, capture_output=True, text=True, env=ENV, check=False)


def kernels(main_commit: str, pr_commit: str) -> list[dict]:
    return [
        {
            "id": "k_a",
            "repo": "owner/up",
            "path": "a.py",
            "commit": main_commit,
            "ref": "refs/heads/main",
            "sha256": sha("block_M = 64\n"),
        },
        {
            "id": "k_b",
            "repo": "owner/up",
            "path": "b.py",
            "commit": pr_commit,
            "ref": "refs/pull/7/head",
            "sha256": sha("BLOCK_N = 32\n"),
        },
    ]


def test_kernels_from_a_branch_and_a_pull_request_head_are_written(tmp_path):
    repo, main_commit, pr_commit = make_upstream(tmp_path)
    corpus = tmp_path / "corpus"
    write_manifest(corpus, kernels(main_commit, pr_commit))
    run = run_script(corpus, f"owner/up={repo / '.git'}")
    assert run.returncode == 0, run.stderr
    assert (corpus / "src" / "k_a.py").read_text() == "block_M = 64\n"
    assert (corpus / "src" / "k_b.py").read_text() == "BLOCK_N = 32\n"
    assert "2 kernels in" in run.stdout


def test_a_clone_without_the_pull_request_head_names_the_ref_to_fetch(tmp_path):
    repo, main_commit, pr_commit = make_upstream(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-local", str(repo), str(clone)], env=ENV, check=True
    )  # a plain clone (objects copied, not linked) fetches branches, not refs/pull/*
    corpus = tmp_path / "corpus"
    write_manifest(corpus, kernels(main_commit, pr_commit))
    run = run_script(corpus, f"owner/up={clone}")
    assert run.returncode == 2
    assert (corpus / "src" / "k_a.py").is_file()
    assert not (corpus / "src" / "k_b.py").exists()
    assert "k_b: git show failed" in run.stderr
    assert "git fetch origin '+refs/pull/7/head:refs/pull/7/head'" in run.stderr
    assert "k_a" not in run.stderr  # a branch commit needs no hint


def test_a_changed_file_is_refused_by_its_sha256(tmp_path):
    repo, main_commit, pr_commit = make_upstream(tmp_path)
    corpus = tmp_path / "corpus"
    entries = kernels(main_commit, pr_commit)
    entries[0]["sha256"] = sha("something else\n")
    write_manifest(corpus, entries)
    run = run_script(corpus, f"owner/up={repo / '.git'}")
    assert run.returncode == 2
    assert "k_a: sha256" in run.stderr and "differs from the manifest" in run.stderr
    assert not (corpus / "src" / "k_a.py").exists()


def test_kernels_of_a_repository_without_a_clone_are_listed_as_left_out(tmp_path):
    repo, main_commit, pr_commit = make_upstream(tmp_path)
    corpus = tmp_path / "corpus"
    entries = kernels(main_commit, pr_commit)
    entries[1]["repo"] = "other/repo"
    write_manifest(corpus, entries)
    run = run_script(corpus, f"owner/up={repo / '.git'}")
    assert run.returncode == 0, run.stderr
    assert "1 kernels left out: no clone of other/repo given" in run.stdout
    assert "1 kernels in" in run.stdout


def test_index_copies_are_written_only_when_their_sha256_matches(tmp_path):
    corpus = tmp_path / "corpus"
    good, bad = "block_M = 128\n", "block_M = 256\n"
    write_manifest(
        corpus,
        [
            {"id": "c_good", "repo": "owner/idx", "path": "g.py", "sha256": sha(good)},
            {"id": "c_bad", "repo": "owner/idx", "path": "b.py", "sha256": sha(good)},
            {"id": "c_none", "repo": "owner/idx", "path": "n.py", "sha256": sha(good)},
        ],
    )
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / "c_good.py").write_text(good)
    (copies / "c_bad.py").write_text(bad)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--corpus", str(corpus), "--copies", str(copies)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    assert run.returncode == 2  # the altered copy is an error, never written
    assert (corpus / "src" / "c_good.py").read_text() == good
    assert not (corpus / "src" / "c_bad.py").exists()
    assert "c_bad" in run.stderr and "sha256" in run.stderr
    assert "1 kernels left out: no clone of owner/idx" in run.stdout


def test_neither_a_clone_nor_copies_is_a_usage_error(tmp_path):
    corpus = tmp_path / "corpus"
    write_manifest(corpus, [])
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--corpus", str(corpus)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    assert run.returncode == 2
    assert "--git-dir" in run.stderr and "--copies" in run.stderr


def test_a_copy_stands_in_when_the_clone_lacks_the_commit(tmp_path):
    # A mirror snapshot older than the kernel: git show fails, the verified copy is used;
    # a copy whose sha256 is wrong is still refused.
    repo, main_commit, pr_commit = make_upstream(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-local", str(repo), str(clone)], env=ENV, check=True
    )  # holds main, not the pull-request head
    corpus = tmp_path / "corpus"
    write_manifest(corpus, kernels(main_commit, pr_commit))
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / "k_b.py").write_text("BLOCK_N = 32\n")
    args = [sys.executable, str(SCRIPT), "--corpus", str(corpus), "--copies", str(copies)]
    run = subprocess.run(
        [*args, "--git-dir", f"owner/up={clone}"], capture_output=True, text=True, env=ENV
    )
    assert run.returncode == 0, run.stderr
    assert (corpus / "src" / "k_b.py").read_text() == "BLOCK_N = 32\n"
    assert "2 kernels in" in run.stdout
    (copies / "k_b.py").write_text("BLOCK_N = 64\n")
    (corpus / "src" / "k_b.py").unlink()
    run = subprocess.run(
        [*args, "--git-dir", f"owner/up={clone}"], capture_output=True, text=True, env=ENV
    )
    assert run.returncode == 2
    assert "k_b" in run.stderr and "sha256" in run.stderr
    assert not (corpus / "src" / "k_b.py").exists()
