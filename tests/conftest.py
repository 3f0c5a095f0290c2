"""Shared pytest fixtures: real git repositories in temp dirs (no mocks).

Fixtures
--------
git_repo        -> GitRepo: a fresh repo with one commit on `main` (README.md), user
                   identity set, and a bare repo wired as remote `origin` (main pushed,
                   upstream set). Fields: path, origin, repo (git.Repo).
make_commit     -> the `make_commit` function below (also importable: `from conftest import ...`).
snapshot_checkout -> the `snapshot_checkout` function below.

Helpers
-------
make_commit(repo, files, message) -> sha
    Writes `files` ({relative path: str | bytes | None}; None deletes) into the
    checkout, stages exactly them and commits on the current branch.
snapshot_checkout(repo) -> CheckoutSnapshot
    HEAD (symbolic ref + sha), the index (entries and raw bytes) and every working
    file's bytes. `assert snapshot_checkout(r) == before` proves an operation left
    the user's checkout untouched. It reads without taking git's optional locks,
    so taking a snapshot never rewrites the index itself.

`repo` arguments accept a GitRepo, a git.Repo or a path.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

IDENTITY = {"user.name": "Test User", "user.email": "test@example.com"}


@dataclass(frozen=True)
class GitRepo:
    path: Path  # working tree of the user's checkout
    origin: Path  # bare repository registered as remote "origin"
    repo: git.Repo


@dataclass(frozen=True)
class CheckoutSnapshot:
    head_ref: str | None  # "refs/heads/main", or None when detached
    head_sha: str
    index_entries: str  # `git ls-files --stage` output
    index_digest: str  # sha256 of .git/index bytes (catches any rewrite)
    files: dict[str, str]  # relative path -> sha256 of content, .git excluded


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def _workdir(repo: GitRepo | git.Repo | Path | str) -> Path:
    if isinstance(repo, GitRepo):
        return repo.path
    if isinstance(repo, git.Repo):
        return Path(repo.working_tree_dir)
    return Path(repo)


def make_commit(
    repo: GitRepo | git.Repo | Path | str, files: dict[str, str | bytes | None], message: str
) -> str:
    """Write `files` into the checkout, stage them and commit on the current branch; return the sha."""
    root = _workdir(repo)
    for rel, content in files.items():
        target = root / rel
        if content is None:
            _git(root, "rm", "-q", "--", rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        _git(root, "add", "--", rel)
    _git(root, "commit", "-q", "--allow-empty", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()


def snapshot_checkout(repo: GitRepo | git.Repo | Path | str) -> CheckoutSnapshot:
    """Everything of the user's checkout that tunebot must never change."""
    root = _workdir(repo)
    git_dir = Path(_git(root, "rev-parse", "--absolute-git-dir").strip())
    head_ref = (
        subprocess.run(
            ["git", "symbolic-ref", "-q", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        or None
    )
    index = git_dir / "index"
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".git" or not path.is_file():
            continue
        files[rel.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return CheckoutSnapshot(
        head_ref=head_ref,
        head_sha=_git(root, "rev-parse", "HEAD").strip(),
        index_entries=_git(root, "ls-files", "--stage"),
        index_digest=hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else "",
        files=files,
    )


def init_repo(root: Path) -> GitRepo:
    """Create the repo layout `git_repo` yields, under `root` (usable outside fixtures too)."""
    work, origin = root / "work", root / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for key, value in IDENTITY.items():
        _git(work, "config", key, value)
    _git(work, "config", "commit.gpgsign", "false")
    make_commit(work, {"README.md": "# demo\n"}, "initial commit")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "-u", "origin", "main")
    return GitRepo(path=work, origin=origin, repo=git.Repo(work))


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    return init_repo(tmp_path)


@pytest.fixture(name="make_commit")
def make_commit_fixture():
    return make_commit


@pytest.fixture(name="snapshot_checkout")
def snapshot_checkout_fixture():
    return snapshot_checkout


def third_party_corpus(name: str, probe: str) -> Path | None:
    """Where a third-party test corpus (kept out of git) was materialised, or None.

    Looked for in tests/data/<name> (filled by the scripts/ that materialise it) and then in the
    steering repository's shared/fixtures/<name>; `probe` is a path inside it that must exist.
    """
    here = Path(__file__).resolve().parent
    for root in (here / "data" / name, here.parent.parent / "shared" / "fixtures" / name):
        if (root / probe).exists():
            return root
    return None


def install_tilelang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> Path:
    """A TileLang package on sys.path holding `files` (path inside the package -> text); its
    top-level `__init__` raises: tunebot reads these files as text and must never import them."""
    pkg = tmp_path / "tilelang"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    for relative, text in files.items():
        (pkg / relative).parent.mkdir(parents=True, exist_ok=True)
        (pkg / relative).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def install_tilelang_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    """A TileLang package on sys.path whose `tilelang/language/__init__.py` is `text`."""
    return install_tilelang(tmp_path, monkeypatch, {"language/__init__.py": text})


@pytest.fixture
def upstream_tilelang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed NPUIR TileLang with every v-alias of upstream's npuir branch, spelled as
    upstream spells them (`npuir_add as vadd,` in an import from .customize_npuir)."""
    from bot.strategies.vprefix import ALIASES

    lines = "".join(f"    {k},\n    {k} as {v},\n" for k, v in sorted(ALIASES.items()))
    return install_tilelang_language(
        tmp_path / "site", monkeypatch, f"from .customize_npuir import (\n{lines})\n"
    )


def upstream_kernel(filename: str) -> str:
    """A kernel of the upstream corpus (tests/data/upstream_kernels); skips when not materialised (CI)."""
    root = third_party_corpus("upstream_kernels", f"src/{filename}")
    if root is None:
        pytest.skip(
            f"upstream kernel {filename} is not materialised: run "
            "`python scripts/upstream_corpus.py --git-dir <clone>`"
        )
    return (root / "src" / filename).read_text()


# Modules that run whole tuning runs, CLI processes or the GitHub flow end to end: about 90 % of
# the suite's time (measured with --durations=0). `pytest -m "not slow"` is the quick edit loop;
# the README's test command runs everything.
SLOW_MODULES = frozenset(
    {
        "test_cli_command_backend",
        "test_cli_delivery",
        "test_cli_tune",
        "test_cli_upstream_l0",
        "test_delivery",
        "test_demo_model",
        "test_demo_ops",
        "test_fault_injection",
        "test_fault_kernels",
        "test_features_cli",
        "test_features_propose",
        "test_forge_cancel",
        "test_forge_contract",
        "test_forge_github",
        "test_github_flow",
        "test_github_security",
        "test_loop",
        "test_loop_declared_shapes",
        "test_loop_failed_move",
        "test_loop_upstream_real",
        "test_loaded_tune_benchmark",
        "test_loop_upstream_style",
        "test_measure_accuracy",
        "test_measure_backend_contract",
        "test_measure_backend_msprof",
        "test_measure_backends",
        "test_model_github",
        "test_model_loop",
        "test_proposal_body",
        "test_run_resume_old",
        "test_seed_structure",
        "test_strategies_upstream_corpus",
    }
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
