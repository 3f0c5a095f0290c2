"""bot/forge/local.py: proposals stored as commits under refs/tunebot/proposals/<id>, on real repos."""

from __future__ import annotations

import json
import subprocess
import sys

import git
import pytest
from conftest import GitRepo, make_commit, snapshot_checkout

from bot.errors import GitError
from bot.forge.base import MergeBlocked, ProposalNotFound
from bot.forge.local import LocalForge, sanitize
from bot.git import branches, commits, refs, repository

HEAD = "tunebot/op/best"


def _tuned(git_repo: GitRepo, iterations: int = 2) -> str:
    """Iteration branches tunebot/op/v1..vN and a delivery branch, as a run leaves them."""
    repo = git_repo.repo
    parent = repo.head.commit.hexsha
    for n in range(1, iterations + 1):
        parent = commits.commit_files(
            repo, parent, {f"perf_opt/op_opt_v{n}.py": f"v{n}\n".encode()}, f"iter {n}"
        )
        branches.create_branch(repo, f"tunebot/op/v{n}", parent)
    delivery = commits.commit_files(repo, parent, {"perf_opt/op.py": b"best\n"}, "deliver")
    branches.create_branch(repo, HEAD, delivery)
    return delivery


def _forge(git_repo: GitRepo, **kw) -> LocalForge:
    return LocalForge(git_repo.path, **{"keep_branches": False, "branch_prefix": "tunebot", **kw})


def _history(git_repo: GitRepo, proposal_id: str) -> list[str]:
    return git_repo.repo.git.log(
        "--format=%s", f"refs/tunebot/proposals/{proposal_id}"
    ).splitlines()


def test_propose_is_stored_in_git_and_idempotent(git_repo: GitRepo) -> None:
    head_sha = _tuned(git_repo)
    before = snapshot_checkout(git_repo)
    branches = git_repo.repo.git.branch("--list")
    forge = _forge(git_repo)

    first = forge.propose(HEAD, "main", "tune op", "## Stage Result\n", labels=["tunebot"])
    assert (first.id, first.head_sha, first.state, first.labels) == (
        "1",
        head_sha,
        "open",
        ["tunebot"],
    )
    again = forge.propose(HEAD, "main", "tune op", "## Stage Result\n", labels=["tunebot"])
    assert again == first
    assert len(_history(git_repo, "1")) == 1  # an unchanged re-propose adds no history
    updated = forge.propose(HEAD, "main", "tune op", "new body", labels=["tunebot"])
    assert updated.id == "1" and forge.get("1").body == "new body"
    assert _history(git_repo, "1") == ["proposal #1: update", f"proposal #1: open {HEAD} -> main"]

    stored = repository.read_file(git_repo.repo, "refs/tunebot/proposals/1", "proposal.json")
    assert '"body": "new body"' in stored
    assert forge.find_proposal(HEAD) == forge.get("1")
    assert forge.find_proposal("tunebot/other") is None
    # storing proposals touches no branch, index or file of the user
    assert snapshot_checkout(git_repo) == before
    assert git_repo.repo.git.branch("--list") == branches


def test_ids_increase_and_list_filters_by_state(git_repo: GitRepo) -> None:
    _tuned(git_repo)
    branches.create_branch(git_repo.repo, "tunebot/other/best", git_repo.repo.head.commit.hexsha)
    forge = _forge(git_repo)
    assert forge.list_proposals() == []
    one = forge.propose(HEAD, "main", "a", "a")
    two = forge.propose("tunebot/other/best", "main", "b", "b")
    assert (one.id, two.id) == ("1", "2")
    forge.close("2")
    assert [p.id for p in forge.list_proposals("open")] == ["1"]
    assert [p.id for p in forge.list_proposals("closed")] == ["2"]
    assert [p.id for p in forge.list_proposals(None)] == ["1", "2"]
    # a closed proposal is not updated: proposing again opens a new one
    assert forge.propose("tunebot/other/best", "main", "b", "b").id == "3"


def test_bad_ids_and_branches_are_clear_errors(git_repo: GitRepo) -> None:
    _tuned(git_repo)
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "a", "a")
    for bad in ("9", "abc", ""):
        with pytest.raises(ProposalNotFound, match="known: #1") as err:
            forge.get(bad)
        assert err.value.exit_code == 2
    assert forge.get("#1").id == "1"
    with pytest.raises(GitError, match="no such branch"):
        forge.propose("tunebot/missing", "main", "a", "a")
    with pytest.raises(GitError, match="into 'nope'"):
        forge.propose(HEAD, "nope", "a", "a")


def test_merge_gate_requires_approval_on_current_head(git_repo: GitRepo) -> None:
    head_sha = _tuned(git_repo)
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "tune op", "body")

    with pytest.raises(MergeBlocked, match="not approved") as err:
        forge.merge("1")
    assert err.value.exit_code == 3
    approved = forge.approve("1", "alice")
    assert approved.approved_sha == head_sha

    # a new commit on the head after the approval: the approval no longer covers it
    newer = commits.commit_files(git_repo.repo, head_sha, {"perf_opt/op.py": b"better\n"}, "more")
    branches.update_branch(git_repo.repo, HEAD, newer, head_sha)
    assert forge.get("1").head_sha == newer  # an open proposal follows its branch
    with pytest.raises(MergeBlocked, match=f"approved at {head_sha[:12]}.*approve 1"):
        forge.merge("1")
    assert git_repo.repo.head.commit.hexsha != newer  # nothing merged

    forge.approve("1", "bob")
    merged = forge.merge("1")
    assert merged.state == "merged"
    history = _history(git_repo, "1")
    assert history[:2] == [
        "proposal #1: cleaned up 2 iteration branches",
        "proposal #1: merged into main at " + newer[:12],
    ]
    assert any("approved by alice" in h for h in history) and any(
        "approved by bob" in h for h in history
    )
    with pytest.raises(MergeBlocked, match="already merged"):
        forge.merge("1")
    with pytest.raises(MergeBlocked, match="only open proposals"):
        forge.approve("1", "carol")


def test_merge_updates_clean_checkout_and_cleans_iteration_branches(git_repo: GitRepo) -> None:
    head_sha = _tuned(git_repo, iterations=3)
    git_repo.repo.git.branch("tunebot/op/v9")  # the user's own branch under our prefix
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "tune op", "body")
    forge.approve("1", "alice")
    forge.merge("1")

    repo = git_repo.repo
    assert repository.current_branch(repo) == "main" and repo.head.commit.hexsha == head_sha
    assert (git_repo.path / "perf_opt" / "op.py").read_text() == "best\n"
    assert repo.git.status("--porcelain") == ""
    left = repo.git.branch("--list", "tunebot/*", "--format=%(refname:short)").split()
    assert sorted(left) == [HEAD, "tunebot/op/v9"]  # delivery and the user's branch stay


def test_merge_cleanup_keeps_iteration_branches_the_user_took_over(git_repo: GitRepo) -> None:
    _tuned(git_repo, iterations=3)
    repo = git_repo.repo
    users = repo.head.commit.hexsha
    repo.git.branch("-f", "tunebot/op/v2", users)  # moved by the user
    repo.git.branch("-D", "tunebot/op/v3")  # deleted, then re-created by the user
    repo.git.branch("tunebot/op/v3", users)
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "tune op", "body")
    forge.approve("1", "alice")
    forge.merge("1")

    assert refs.branch_sha(repo, "tunebot/op/v1") is None
    assert refs.branch_sha(repo, "tunebot/op/v2") == refs.branch_sha(repo, "tunebot/op/v3") == users
    record = json.loads(repository.read_file(repo, "refs/tunebot/proposals/1", "proposal.json"))
    assert record["deleted_branches"] == ["tunebot/op/v1"]
    assert set(record["kept_branches"]) == {"tunebot/op/v2", "tunebot/op/v3"}
    assert all("moved since tunebot set it" in why for why in record["kept_branches"].values())


def test_keep_branches_keeps_iteration_branches(git_repo: GitRepo) -> None:
    _tuned(git_repo)
    forge = _forge(git_repo, keep_branches=True)
    forge.propose(HEAD, "main", "t", "b")
    forge.approve("1", "alice")
    forge.merge("1")
    assert branches.owned_branches(git_repo.repo, "tunebot/op/v") == [
        "tunebot/op/v1",
        "tunebot/op/v2",
    ]


def test_merge_refuses_dirty_checkout_then_succeeds(git_repo: GitRepo) -> None:
    _tuned(git_repo)
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "t", "b")
    forge.approve("1", "alice")
    (git_repo.path / "README.md").write_text("unsaved work\n")
    before = snapshot_checkout(git_repo)
    with pytest.raises(GitError, match="(?i)commit or stash your changes"):
        forge.merge("1")
    assert snapshot_checkout(git_repo) == before
    assert forge.get("1").state == "open"
    git_repo.repo.git.checkout("--", "README.md")
    assert forge.merge("1").state == "merged"


def test_merge_conflict_leaves_proposal_open(git_repo: GitRepo) -> None:
    fork = git_repo.repo.head.commit.hexsha
    head = commits.commit_files(git_repo.repo, fork, {"README.md": b"tuned\n"}, "deliver")
    branches.create_branch(git_repo.repo, HEAD, head)
    make_commit(git_repo, {"README.md": "user\n"}, "user edit")
    forge = _forge(git_repo)
    forge.propose(HEAD, "main", "t", "b")
    forge.approve("1", "alice")
    with pytest.raises(GitError, match="merge conflict in: README.md"):
        forge.merge("1")
    assert forge.get("1").state == "open"


def test_post_status_writes_one_file_per_head(git_repo: GitRepo) -> None:
    forge = _forge(git_repo, status_head=HEAD)
    forge.post_status("iteration 1: 10.0 us")
    forge.post_status("iteration 2: 9.0 us")
    path = repository.state_dir(git_repo.repo) / "status" / "tunebot__op__best.md"
    assert forge.status_path() == path
    assert path.read_text() == "iteration 2: 9.0 us"
    forge.post_status("other", head="tunebot/x")
    assert (path.parent / "tunebot__x.md").read_text() == "other"
    assert sanitize("a/b c:d") == "a__b_c_d"


_PROPOSE = """
import sys
from bot.forge.local import LocalForge
LocalForge(sys.argv[1], keep_branches=False, branch_prefix="tunebot").propose(sys.argv[2], "main", "t", "b")
"""


def test_concurrent_proposals_get_distinct_ids(git_repo: GitRepo) -> None:
    heads = [f"tunebot/op{i}/best" for i in range(3)]
    for head in heads:
        branches.create_branch(git_repo.repo, head, git_repo.repo.head.commit.hexsha)
    procs = [
        subprocess.Popen([sys.executable, "-c", _PROPOSE, str(git_repo.path), h]) for h in heads
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    found = {p.head: p.id for p in _forge(git_repo).list_proposals()}
    assert sorted(found) == heads and sorted(found.values()) == ["1", "2", "3"]


def test_proposals_survive_gc_and_clone_does_not_carry_them(git_repo: GitRepo, tmp_path) -> None:
    _tuned(git_repo)
    _forge(git_repo).propose(HEAD, "main", "t", "b")
    git_repo.repo.git.gc("--prune=now", "--quiet")
    assert _forge(git_repo).get("1").title == "t"
    clone = git.Repo.clone_from(git_repo.path, tmp_path / "clone")
    assert clone.git.for_each_ref("refs/tunebot/") == ""  # local review state stays local


def test_merge_follows_tunebot_yml_prefix_and_keep_branches(git_repo: GitRepo) -> None:
    repo = git_repo.repo
    make_commit(git_repo, {".tunebot.yml": "branch_prefix: perf\nkeep_branches: false\n"}, "config")
    base = repo.head.commit.hexsha
    v1 = commits.commit_files(repo, base, {"v1.py": b"1"}, "iter 1")
    branches.create_branch(repo, "perf/op/v1", v1)
    branches.create_branch(
        repo, "perf/op/best", commits.commit_files(repo, v1, {"op.py": b"b"}, "deliver")
    )
    forge = LocalForge(git_repo.path)  # settings from .tunebot.yml
    forge.propose("perf/op/best", "main", "t", "b")
    forge.approve("1", "alice")
    assert forge.merge("1").state == "merged"
    assert refs.branch_sha(repo, "perf/op/v1") is None
    assert refs.branch_sha(repo, "perf/op/best") is not None
