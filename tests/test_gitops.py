"""The git layer (bot/git/) against real repositories (bare origin, linked worktrees, real pushes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from conftest import GitRepo, make_commit, snapshot_checkout

from bot import fs
from bot.errors import GitError
from bot.git import branches, commits, merge, refs, remotes, repository, worktrees


def _refs(repo: git.Repo) -> str:
    return repo.git.for_each_ref("--format=%(refname) %(objectname)")


def _tree(repo: git.Repo, sha: str) -> dict[str, bytes]:
    commit = repo.commit(sha)
    return {b.path: b.data_stream.read() for b in commit.tree.traverse() if b.type == "blob"}


# ---------------------------------------------------------------- open / resolve


def test_open_repo_from_subdir_and_linked_worktree(git_repo: GitRepo, tmp_path: Path) -> None:
    sub = git_repo.path / "a" / "b"
    sub.mkdir(parents=True)
    assert Path(repository.open_repo(sub).working_tree_dir) == git_repo.path
    linked = tmp_path / "linked"
    git_repo.repo.git.worktree("add", "-q", "--detach", str(linked), "HEAD")
    opened = repository.open_repo(linked)
    assert Path(opened.working_tree_dir) == linked
    # one state dir shared by every worktree of the repository
    assert (
        repository.state_dir(opened)
        == repository.state_dir(git_repo.repo)
        == (git_repo.path / ".git" / "tunebot").resolve()
    )


def test_open_repo_errors_are_bad_input(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(repository.NotARepository, match="not inside a git repository") as err:
        repository.open_repo(plain)
    assert err.value.exit_code == 2
    with pytest.raises(repository.NotARepository, match="no such directory"):
        repository.open_repo(tmp_path / "missing")
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    with pytest.raises(repository.NotARepository, match="no commits yet"):
        repository.open_repo(empty)


def test_open_repo_refuses_bare_repository(git_repo: GitRepo) -> None:
    # the fixture's origin is bare: no working tree for tunebot to read or merge into
    for where in (git_repo.origin, git_repo.origin / "refs"):
        with pytest.raises(
            repository.NotARepository, match="bare repository.*working tree.*clone it first"
        ) as err:
            repository.open_repo(where)
        assert err.value.exit_code == 2


def test_current_branch_and_resolve(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    first = repo.head.commit.hexsha
    second = make_commit(git_repo, {"b.txt": "b"}, "second")
    assert repository.current_branch(repo) == "main"
    assert repository.resolve(repo, "main") == second
    assert repository.resolve(repo, "HEAD~1") == first
    assert repository.resolve(repo, first[:8]) == first
    with pytest.raises(repository.UnknownRevision, match="'nope'") as err:
        repository.resolve(repo, "nope")
    assert err.value.exit_code == 2
    with pytest.raises(repository.UnknownRevision):
        repository.resolve(repo, "--all")
    repo.git.checkout("-q", "--detach", first)
    assert repository.current_branch(repo) is None


def test_read_file_reads_commits_not_the_checkout(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    sha = make_commit(git_repo, {"op/k.py": "v1\n"}, "k")
    (git_repo.path / "op" / "k.py").write_text("dirty\n")
    assert repository.read_file(repo, sha, "op/k.py") == "v1\n"
    assert repository.read_file(repo, sha, "op/none.py", missing_ok=True) is None
    with pytest.raises(GitError, match="'op/none.py' does not exist"):
        repository.read_file(repo, sha, "op/none.py")
    with pytest.raises(GitError, match="is a directory"):
        repository.read_file(repo, sha, "op")


def test_list_files_reads_the_commit_below_a_folder(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    sha = make_commit(
        git_repo, {"ops/p/o/o.py": "k\n", "ops/p/o/tune.yaml": "t\n", "ops2/x.py": "x\n"}, "ops"
    )
    (git_repo.path / "ops" / "p" / "o" / "uncommitted.py").write_text("u\n")
    assert repository.list_files(repo, sha, "ops") == ["ops/p/o/o.py", "ops/p/o/tune.yaml"]
    assert repository.list_files(repo, sha, "ops/") == repository.list_files(
        repository.open_repo(git_repo.path / "ops"), sha, "ops"
    )
    assert (
        repository.list_files(repo, sha, "missing") == []
        and repository.list_files(repo, sha, "op") == []
    )
    assert {"ops2/x.py", "ops/p/o/o.py"} <= set(repository.list_files(repo, sha))
    with pytest.raises(repository.InvalidName):
        repository.list_files(repo, sha, "../elsewhere")


def test_init_repo_commits_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no global identity, no init.defaultBranch
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    target = tmp_path / "demo"
    (target / "examples").mkdir(parents=True)
    (target / "examples" / "a.py").write_text("a\n")
    repo = repository.init_repo(target, message="demo: ops")
    assert repository.current_branch(repo) == "main"
    assert repo.head.commit.message.strip() == "demo: ops"
    assert repo.head.commit.author.email == repository.DEFAULT_EMAIL
    assert repository.read_file(repo, "HEAD", "examples/a.py") == "a\n"
    assert repo.git.status("--porcelain") == ""


# ---------------------------------------------------------------- commit_files


def test_commit_files_builds_tree_without_touching_checkout(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    make_commit(git_repo, {"keep.txt": "keep", "gone.txt": "bye"}, "files")
    # a dirty user checkout: staged and unstaged changes that must survive untouched
    (git_repo.path / "keep.txt").write_text("user edit")
    (git_repo.path / "staged.txt").write_text("staged")
    repo.git.add("staged.txt")
    before, refs_before = snapshot_checkout(git_repo), _refs(repo)

    sha = commits.commit_files(
        repo,
        "HEAD",
        {"new/v1.py": b"x = 1\n", "README.md": b"changed\n", "gone.txt": None},
        "iter 1\n\ndetail",
    )

    assert snapshot_checkout(git_repo) == before
    assert _refs(repo) == refs_before  # no ref moved
    commit = repo.commit(sha)
    assert [p.hexsha for p in commit.parents] == [repo.head.commit.hexsha]
    assert commit.message == "iter 1\n\ndetail"
    assert _tree(repo, sha) == {
        "new/v1.py": b"x = 1\n",
        "README.md": b"changed\n",
        "keep.txt": b"keep",
    }
    assert not list(repository.state_dir(repo).glob("index.*"))  # temporary index cleaned up


def test_commit_files_root_commit_and_mode_preserved(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    root = commits.commit_files(repo, None, {"only.txt": b"1"}, "root")
    assert repo.commit(root).parents == ()
    assert _tree(repo, root) == {"only.txt": b"1"}
    script = git_repo.path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    repo.git.add("run.sh")
    repo.git.commit("-q", "-m", "exe")
    sha = commits.commit_files(repo, "HEAD", {"run.sh": b"#!/bin/sh\necho hi\n"}, "edit")
    assert (repo.commit(sha).tree / "run.sh").mode == 0o100755


def test_commit_files_is_deterministic_for_fixed_dates(
    git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2025-01-01T00:00:00+0000")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2025-01-01T00:00:00+0000")
    args = (git_repo.repo, "HEAD", {"a.py": b"a", "b.py": b"b"}, "same")
    first = commits.commit_files(*args)
    assert commits.commit_files(*args) == first
    assert (
        commits.commit_files(git_repo.repo, "HEAD", {"a.py": b"A", "b.py": b"b"}, "same") != first
    )


def test_commit_files_identity(
    git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_repo.repo
    sha = commits.commit_files(
        repo, "HEAD", {"a": b"a"}, "m", author="Ada Lovelace <ada@example.com>"
    )
    commit = repo.commit(sha)
    assert (commit.author.name, commit.author.email) == ("Ada Lovelace", "ada@example.com")
    assert commit.committer.email == "test@example.com"  # the repo's configured identity
    # a repo with no identity anywhere gets tunebot's default
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo.git.config("--unset", "user.name")
    repo.git.config("--unset", "user.email")
    commit = repository.open_repo(git_repo.path).commit(
        commits.commit_files(repository.open_repo(git_repo.path), "HEAD", {"b": b"b"}, "m")
    )
    assert (commit.author.name, commit.author.email) == (
        repository.DEFAULT_NAME,
        repository.DEFAULT_EMAIL,
    )
    with pytest.raises(GitError, match="Name <email>"):
        commits.commit_files(repo, "HEAD", {"c": b"c"}, "m", author="nobody")


@pytest.mark.parametrize("bad", ["/abs", "../up", "a/../b", ".git/config", "a//b", ""])
def test_commit_files_rejects_bad_paths(git_repo: GitRepo, bad: str) -> None:
    with pytest.raises(repository.InvalidName, match="bad file path") as err:
        commits.commit_files(git_repo.repo, "HEAD", {bad: b"x"}, "m")
    assert err.value.exit_code == 2


# ---------------------------------------------------------------- worktrees


def test_ensure_worktree_detached_reused_and_reset(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    first = repo.head.commit.hexsha
    second = make_commit(git_repo, {"v.txt": "2"}, "second")
    before = snapshot_checkout(git_repo)

    path = worktrees.ensure_worktree(repo, "demo__op", first)
    assert path == repository.state_dir(repo) / "worktrees" / "demo__op"
    wt = git.Repo(path)
    assert wt.head.is_detached and wt.head.commit.hexsha == first
    (path / "README.md").write_text("scribble")
    (path / "junk.txt").write_text("junk")

    assert worktrees.ensure_worktree(repo, "demo__op", second) == path
    assert wt.head.commit.hexsha == second
    assert (path / "README.md").read_text() == "# demo\n"
    assert not (path / "junk.txt").exists()
    assert (path / "v.txt").read_text() == "2"
    assert snapshot_checkout(git_repo) == before


def test_ensure_worktree_recovers_from_vanished_dir_and_remove(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    import shutil

    repo = git_repo.repo
    users = tmp_path / "usb-stick" / "wt"  # the user's worktree, unmounted right now
    repo.git.worktree("add", "-q", "--detach", str(users), "HEAD")
    shutil.rmtree(users.parent)
    path = worktrees.ensure_worktree(repo, "w", "HEAD")
    shutil.rmtree(path)  # e.g. the user cleaned up by hand
    assert worktrees.ensure_worktree(repo, "w", "HEAD") == path
    assert (path / "README.md").exists()
    worktrees.remove_worktree(repo, "w")
    assert not path.exists()
    assert str(path) not in repo.git.worktree("list")
    worktrees.remove_worktree(repo, "w")  # absent: no-op
    assert str(users) in repo.git.worktree("list")  # never prune the user's registrations


def test_checkout_worktree_refuses_users_checkout(git_repo: GitRepo) -> None:
    before = snapshot_checkout(git_repo)
    with pytest.raises(GitError, match="not a tunebot worktree"):
        worktrees.checkout_worktree(git_repo.path, "HEAD")
    with pytest.raises(GitError, match="bad worktree name"):
        worktrees.ensure_worktree(git_repo.repo, "../escape", "HEAD")
    assert snapshot_checkout(git_repo) == before


# ---------------------------------------------------------------- owned branches


def test_create_branch_records_ownership_and_refuses_foreign(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    before = snapshot_checkout(git_repo)
    sha = commits.commit_files(repo, "HEAD", {"a": b"a"}, "a")
    branches.create_branch(repo, "tunebot/op/v1", sha)
    assert refs.branch_sha(repo, "tunebot/op/v1") == sha
    owned = json.loads((repository.state_dir(repo) / "branches.json").read_text())["branches"]
    assert list(owned) == ["tunebot/op/v1"]
    branches.create_branch(repo, "tunebot/op/v1", sha)  # idempotent (resume)
    other = commits.commit_files(repo, "HEAD", {"b": b"b"}, "b")
    branches.create_branch(repo, "tunebot/op/v1", other)  # ours: moved (restart)
    assert refs.branch_sha(repo, "tunebot/op/v1") == other

    repo.git.branch("users-branch")
    with pytest.raises(GitError, match="not created by tunebot"):
        branches.create_branch(repo, "users-branch", sha)
    assert refs.branch_sha(repo, "users-branch") == before.head_sha
    with pytest.raises(GitError, match="not a valid branch name"):
        branches.create_branch(repo, "bad..name", sha)
    assert refs.branch_sha(repo, "missing") is None
    # git cannot hold refs/heads/a/b next to refs/heads/a/b/c: say so plainly
    with pytest.raises(GitError, match="clashing path"):
        branches.create_branch(repo, "tunebot/op", sha)
    assert snapshot_checkout(git_repo) == before


def test_update_branch_compare_and_swap(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    a = commits.commit_files(repo, base, {"a": b"a"}, "a")
    b = commits.commit_files(repo, base, {"b": b"b"}, "b")
    branches.create_branch(repo, "tunebot/x", a)
    branches.update_branch(repo, "tunebot/x", b, expected_old=a)
    assert refs.branch_sha(repo, "tunebot/x") == b
    with pytest.raises(GitError, match="changed underneath"):
        branches.update_branch(repo, "tunebot/x", a, expected_old=a)  # stale expectation
    assert refs.branch_sha(repo, "tunebot/x") == b
    with pytest.raises(GitError, match="not created by tunebot"):
        branches.update_branch(repo, "main", a, expected_old=base)
    assert refs.branch_sha(repo, "main") == base


def test_owned_branches_delete_and_cleanup(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    sha = repo.head.commit.hexsha
    names = [
        "tunebot/op/v10",
        "tunebot/op/v2",
        "tunebot/op/v1",
        "tunebot/op/best",
        "tunebot/other/v1",
    ]
    for name in names:
        branches.create_branch(repo, name, sha)
    repo.git.branch("tunebot/op/v3")  # made by the user: never ours
    assert branches.owned_branches(repo, "tunebot/op/v") == [
        "tunebot/op/v1",
        "tunebot/op/v2",
        "tunebot/op/v10",
    ]
    repo.git.push("-q", "origin", "tunebot/op/v1", "tunebot/op/v2")

    result = branches.cleanup_iteration_branches(repo, "op", remote="origin")
    assert sorted(result.deleted) == ["tunebot/op/v1", "tunebot/op/v10", "tunebot/op/v2"]
    assert branches.owned_branches(repo, "tunebot/") == ["tunebot/op/best", "tunebot/other/v1"]
    assert refs.branch_sha(repo, "tunebot/op/v3") == sha  # the user's branch survives
    remote_heads = git.Repo(git_repo.origin).git.for_each_ref("--format=%(refname)", "refs/heads")
    assert "tunebot/op/v1" not in remote_heads and "tunebot/op/v2" not in remote_heads

    result = branches.delete_branches(repo, ["main", "tunebot/op/v3"])
    assert result.deleted == [] and set(result.skipped) == {"main", "tunebot/op/v3"}
    assert refs.branch_sha(repo, "main") == sha


def test_delete_branches_skips_checked_out_branch(git_repo: GitRepo, tmp_path: Path) -> None:
    repo = git_repo.repo
    branches.create_branch(repo, "tunebot/op", repo.head.commit.hexsha)
    repo.git.worktree("add", "-q", str(tmp_path / "wt"), "tunebot/op")
    result = branches.delete_branches(repo, ["tunebot/op"])
    assert result.deleted == [] and "checked out" in result.skipped["tunebot/op"]
    assert refs.branch_sha(repo, "tunebot/op") is not None


def _owned_json(repo: git.Repo) -> dict[str, dict]:
    return json.loads((repository.state_dir(repo) / "branches.json").read_text())["branches"]


def test_ownership_records_the_sha_tunebot_set(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    a = commits.commit_files(repo, base, {"a": b"a"}, "a")
    b = commits.commit_files(repo, base, {"b": b"b"}, "b")
    branches.create_branch(repo, "tunebot/op/v1", a)
    assert _owned_json(repo)["tunebot/op/v1"]["sha"] == a
    branches.update_branch(repo, "tunebot/op/v1", b, expected_old=a)
    entry = _owned_json(repo)["tunebot/op/v1"]
    assert entry["sha"] == b and "pending" not in entry
    with pytest.raises(GitError, match="changed underneath"):
        branches.update_branch(repo, "tunebot/op/v1", a, expected_old=a)
    assert _owned_json(repo)["tunebot/op/v1"] == entry  # a failed move records nothing


def test_branch_moved_or_recreated_by_user_is_theirs(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    a = commits.commit_files(repo, base, {"a": b"a"}, "a")
    users = make_commit(git_repo, {"mine.txt": "mine"}, "my work")
    for name in ("tunebot/op/v1", "tunebot/op/v2"):
        branches.create_branch(repo, name, a)
    repo.git.branch("-f", "tunebot/op/v1", users)  # moved by the user
    repo.git.branch("-D", "tunebot/op/v2")  # deleted, then re-created by the user
    repo.git.branch("tunebot/op/v2", users)

    for name in ("tunebot/op/v1", "tunebot/op/v2"):
        assert not branches.is_owned(repo, name)
        with pytest.raises(GitError, match="moved since tunebot set it"):
            branches.create_branch(repo, name, a)
        with pytest.raises(GitError, match="moved since tunebot set it"):
            branches.update_branch(repo, name, a, expected_old=users)
        with pytest.raises(GitError, match="refusing to force-push"):
            remotes.push(repo, "origin", [f"+refs/heads/{name}:refs/heads/{name}"])
    assert branches.owned_branches(repo, "tunebot/") == []
    result = branches.delete_branches(repo, ["tunebot/op/v1", "tunebot/op/v2"])
    assert result.deleted == [] and all(
        "moved since tunebot set it" in why for why in result.skipped.values()
    )
    result = branches.cleanup_iteration_branches(repo, "op")
    assert result.deleted == [] and set(result.skipped) == {"tunebot/op/v1", "tunebot/op/v2"}
    assert branches.archive_branches(repo, ["tunebot/op/v1", "tunebot/op/v2"], "r1") == []
    assert refs.branch_sha(repo, "tunebot/op/v1") == refs.branch_sha(repo, "tunebot/op/v2") == users


def test_branch_recorded_before_a_crash_then_made_by_user_is_theirs(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    a = commits.commit_files(repo, "HEAD", {"a": b"a"}, "a")
    # tunebot recorded the name and sha, then died before writing the ref
    fs.write_atomic(
        repository.state_dir(repo) / "branches.json",
        json.dumps(
            {"branches": {"tunebot/op/v1": {"created": 1.0, "sha": a, "pending": a}}}
        ).encode(),
    )
    repo.git.branch("tunebot/op/v1")  # the user's own branch at HEAD
    assert not branches.is_owned(repo, "tunebot/op/v1")
    assert (
        "moved since" in branches.delete_branches(repo, ["tunebot/op/v1"]).skipped["tunebot/op/v1"]
    )
    assert refs.branch_sha(repo, "tunebot/op/v1") == repo.head.commit.hexsha


def test_crash_mid_move_leaves_branch_ours(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    a = commits.commit_files(repo, base, {"a": b"a"}, "a")
    b = commits.commit_files(repo, base, {"b": b"b"}, "b")
    branches.create_branch(repo, "tunebot/x", a)
    owned = _owned_json(repo)
    owned["tunebot/x"]["pending"] = b  # recorded the move to b, then died: ref still at a ...
    fs.write_atomic(
        repository.state_dir(repo) / "branches.json", json.dumps({"branches": owned}).encode()
    )
    assert branches.is_owned(repo, "tunebot/x")
    repo.git.update_ref("refs/heads/tunebot/x", b, a)  # ... or died just after moving it
    assert branches.is_owned(repo, "tunebot/x")
    branches.create_branch(repo, "tunebot/x", b)  # the resume settles the record
    assert _owned_json(repo)["tunebot/x"] == {"created": owned["tunebot/x"]["created"], "sha": b}


def test_old_ownership_file_without_shas_still_works(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    head = repo.head.commit.hexsha
    a = commits.commit_files(repo, head, {"a": b"a"}, "a")
    repo.git.branch("tunebot/x", head)
    fs.write_atomic(
        repository.state_dir(repo) / "branches.json",
        json.dumps({"branches": {"tunebot/x": {"created": 1.0}}}).encode(),
    )
    assert branches.is_owned(repo, "tunebot/x")  # trusted by name, as it was
    branches.create_branch(repo, "tunebot/x", a)
    assert _owned_json(repo)["tunebot/x"] == {"created": 1.0, "sha": a}
    repo.git.branch("-f", "tunebot/x", head)
    assert not branches.is_owned(repo, "tunebot/x")


def test_archive_branches_keeps_commits_under_refs_tunebot(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    shas = {}
    for name in (
        "tunebot/op/v1",
        "tunebot/op/v2",
        "tunebot/op/best",
        "tunebot/op/v3",
        "tunebot/op/v4",
    ):
        shas[name] = commits.commit_files(repo, base, {"f": name.encode()}, name)
        branches.create_branch(repo, name, shas[name])
    repo.git.branch("-f", "tunebot/op/v3", base)  # moved by the user: theirs
    repo.git.worktree("add", "-q", str(tmp_path / "wt"), "tunebot/op/v4")  # checked out: left alone
    repo.git.branch("tunebot/op/v5")  # never tunebot's
    # a run that crashed after writing an archive ref but before deleting the branch
    repo.git.update_ref("refs/tunebot/archive/r1/tunebot/op/v2", shas["tunebot/op/v2"])

    names = [
        "tunebot/op/v1",
        "tunebot/op/v2",
        "tunebot/op/best",
        "tunebot/op/v3",
        "tunebot/op/v4",
        "tunebot/op/v5",
    ]
    archived = branches.archive_branches(repo, names, "r1")
    assert archived == [
        f"refs/tunebot/archive/r1/{n}"
        for n in ("tunebot/op/v1", "tunebot/op/v2", "tunebot/op/best")
    ]
    for name in ("tunebot/op/v1", "tunebot/op/v2", "tunebot/op/best"):
        assert refs.branch_sha(repo, name) is None
        assert refs.ref_sha(repo, f"refs/tunebot/archive/r1/{name}") == shas[name]
        assert name not in _owned_json(repo)
    assert refs.branch_sha(repo, "tunebot/op/v3") == refs.branch_sha(repo, "tunebot/op/v5") == base
    assert refs.branch_sha(repo, "tunebot/op/v4") == shas["tunebot/op/v4"]
    branches.create_branch(repo, "tunebot/op/v1", base)  # a new run starts the names afresh
    assert branches.is_owned(repo, "tunebot/op/v1")
    # an archive ref that exists with another commit is never overwritten
    with pytest.raises(GitError, match="changed underneath"):
        branches.archive_branches(repo, ["tunebot/op/v1"], "r1")
    assert refs.branch_sha(repo, "tunebot/op/v1") == base
    assert refs.ref_sha(repo, "refs/tunebot/archive/r1/tunebot/op/v1") == shas["tunebot/op/v1"]
    with pytest.raises(repository.InvalidName, match="archive label"):
        branches.archive_branches(repo, ["tunebot/op/v1"], "bad..label")


_CREATE_MANY = """
import sys
from bot.git import branches, repository
repo = repository.open_repo(sys.argv[1])
sha = repo.head.commit.hexsha
for i in range(8):
    branches.create_branch(repo, f"tunebot/{sys.argv[2]}/v{i}", sha)
"""


def test_concurrent_processes_keep_every_ownership_record(git_repo: GitRepo) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _CREATE_MANY, str(git_repo.path), tag])
        for tag in ("p", "q", "r")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    owned = branches.owned_branches(git_repo.repo, "tunebot/")
    assert len(owned) == 24


# ---------------------------------------------------------------- push


def _flaky_receive_pack(git_repo: GitRepo, tmp_path: Path, fails: int) -> Path:
    """Make `origin` drop the first `fails` connections, like a flaky network."""
    counter = tmp_path / "attempts"
    script = tmp_path / "flaky-receive-pack"
    script.write_text(
        "#!/bin/sh\n"
        f'n=$(cat "{counter}" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "{counter}"\n'
        f'if [ "$n" -le {fails} ]; then echo "connection reset by peer" >&2; exit 128; fi\n'
        'exec git receive-pack "$@"\n'
    )
    script.chmod(0o755)
    git_repo.repo.git.config("remote.origin.receivepack", str(script))
    return counter


def test_push_to_bare_origin_and_retry_transient(git_repo: GitRepo, tmp_path: Path) -> None:
    repo = git_repo.repo
    sha = commits.commit_files(repo, "HEAD", {"a": b"a"}, "a")
    branches.create_branch(repo, "tunebot/op/v1", sha)
    counter = _flaky_receive_pack(git_repo, tmp_path, fails=2)
    remotes.push(
        repo,
        "origin",
        ["refs/heads/tunebot/op/v1:refs/heads/tunebot/op/v1"],
        retries=3,
        backoff_s=0.01,
    )
    assert counter.read_text().strip() == "3"
    assert git.Repo(git_repo.origin).commit("tunebot/op/v1").hexsha == sha


def test_push_gives_up_after_retries(git_repo: GitRepo, tmp_path: Path) -> None:
    counter = _flaky_receive_pack(git_repo, tmp_path, fails=99)
    with pytest.raises(GitError, match="failed after 3 attempts"):
        remotes.push(git_repo.repo, "origin", ["main"], retries=2, backoff_s=0.01)
    assert counter.read_text().strip() == "3"


def test_push_non_fast_forward_is_not_retried(git_repo: GitRepo, tmp_path: Path) -> None:
    repo = git_repo.repo
    other = tmp_path / "other"
    git.Repo.clone_from(git_repo.origin, other)
    make_commit(other, {"theirs.txt": "t"}, "theirs")
    git.Repo(other).git.push("-q", "origin", "main")
    make_commit(git_repo, {"ours.txt": "o"}, "ours")
    counter = _flaky_receive_pack(git_repo, tmp_path, fails=0)
    with pytest.raises(GitError, match="non-fast-forward"):
        remotes.push(repo, "origin", ["main"], retries=3, backoff_s=0.01)
    assert counter.read_text().strip() == "1"


def test_force_push_only_for_owned_branches(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    base = repo.head.commit.hexsha
    with pytest.raises(GitError, match="refusing to force-push"):
        remotes.push(repo, "origin", ["+main:main"])
    with pytest.raises(GitError, match="refusing to force-push"):
        remotes.push(repo, "origin", [":main"])
    a = commits.commit_files(repo, base, {"a": b"a"}, "a")
    b = commits.commit_files(repo, base, {"b": b"b"}, "b")
    branches.create_branch(repo, "tunebot/op", a)
    remotes.push(repo, "origin", ["tunebot/op"])
    branches.update_branch(repo, "tunebot/op", b, expected_old=a)  # rewritten history on our branch
    remotes.push(repo, "origin", ["+refs/heads/tunebot/op:refs/heads/tunebot/op"])
    assert git.Repo(git_repo.origin).commit("tunebot/op").hexsha == b
    assert git.Repo(git_repo.origin).commit("main").hexsha == base


# ---------------------------------------------------------------- merge


def test_merge_fast_forwards_clean_user_checkout(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    head = commits.commit_files(repo, "main", {"perf_opt/op.py": b"best\n"}, "deliver")
    branches.create_branch(repo, "tunebot/op", head)
    new = merge.merge_into(repo, "main", "tunebot/op", "Merge tunebot/op")
    assert new == head  # fast-forward
    assert repository.current_branch(repo) == "main"
    assert repo.head.commit.hexsha == head
    assert (git_repo.path / "perf_opt" / "op.py").read_text() == "best\n"  # files followed
    assert repo.git.status("--porcelain") == ""
    assert merge.merge_into(repo, "main", "tunebot/op", "again") == head  # already merged: no-op


def test_merge_creates_merge_commit_when_diverged(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    fork = repo.head.commit.hexsha
    head = commits.commit_files(repo, fork, {"perf_opt/op.py": b"best\n"}, "deliver")
    user = make_commit(git_repo, {"user.txt": "u"}, "user work")
    (git_repo.path / "notes.txt").write_text("untracked, never touched\n")
    new = merge.merge_into(repo, "main", head, "Merge proposal #1")
    commit = repo.commit(new)
    assert [p.hexsha for p in commit.parents] == [user, head]
    assert commit.message.strip() == "Merge proposal #1"
    assert set(_tree(repo, new)) == {"README.md", "user.txt", "perf_opt/op.py"}
    assert repo.head.commit.hexsha == new and repository.current_branch(repo) == "main"
    assert (git_repo.path / "perf_opt" / "op.py").exists()
    assert (git_repo.path / "notes.txt").read_text() == "untracked, never touched\n"


def test_merge_into_branch_not_checked_out(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    fork = repo.head.commit.hexsha
    repo.git.branch("release")
    make_commit(git_repo, {"main-only.txt": "m"}, "on main")
    before = snapshot_checkout(git_repo)
    rel = commits.commit_files(repo, fork, {"rel.txt": b"r"}, "release work")
    repo.git.update_ref("refs/heads/release", rel)
    head = commits.commit_files(repo, fork, {"op.py": b"x"}, "deliver")
    new = merge.merge_into(repo, "release", head, "merge")
    assert refs.branch_sha(repo, "release") == new
    assert [p.hexsha for p in repo.commit(new).parents] == [rel, head]
    assert snapshot_checkout(git_repo) == before


def test_merge_conflict_lists_files_and_moves_nothing(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    fork = repo.head.commit.hexsha
    head = commits.commit_files(repo, fork, {"README.md": b"theirs\n", "ok.txt": b"fine"}, "theirs")
    make_commit(git_repo, {"README.md": "ours\n"}, "ours")
    before = snapshot_checkout(git_repo)
    with pytest.raises(GitError, match=r"merge conflict in: README\.md\.") as err:
        merge.merge_into(repo, "main", head, "merge")
    assert "ok.txt" not in str(err.value)
    assert snapshot_checkout(git_repo) == before


def test_merge_refuses_dirty_checkout_of_base(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    head = commits.commit_files(repo, "main", {"op.py": b"x"}, "deliver")
    (git_repo.path / "README.md").write_text("work in progress\n")
    before = snapshot_checkout(git_repo)
    with pytest.raises(
        GitError, match="(?i)commit or stash your changes, then run tunebot merge again"
    ):
        merge.merge_into(repo, "main", head, "merge")
    assert snapshot_checkout(git_repo) == before
    with pytest.raises(GitError, match="base branch 'nope' does not exist"):
        merge.merge_into(repo, "nope", head, "merge")
