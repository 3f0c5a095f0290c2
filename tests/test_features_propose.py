"""bot.features.propose: one branch, one proposal, only when the table changed (LocalForge, real repos)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import init_repo, make_commit, snapshot_checkout

from bot.errors import GitError
from bot.features.propose import BRANCH, propose_refresh
from bot.forge.local import LocalForge

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"
OUT = "references/mindiesd-features.md"


@pytest.fixture
def docs(tmp_path) -> Path:
    target = tmp_path / "docs"
    shutil.copytree(DOCS, target)
    return target


def _show(repo: Path, rev: str) -> str:
    return subprocess.run(
        ["git", "show", rev], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def test_first_run_commits_on_the_branch_and_opens_one_proposal(git_repo, docs):
    before = snapshot_checkout(git_repo)
    forge = LocalForge(git_repo.path)
    result = propose_refresh(
        git_repo.path, docs, forge, base="main", output=OUT, now="2026-01-01T00:00:00Z"
    )
    assert result.status == "proposed"
    assert snapshot_checkout(git_repo) == before  # the user's checkout is not touched
    proposal = result.proposal
    assert (
        proposal.head == BRANCH and proposal.base == "main" and proposal.head_sha == result.commit
    )
    assert f"新增 {len(result.diff.added)} 行，删除 0 行，变更 0 行。" in proposal.body
    text = _show(git_repo.path, f"{result.commit}:{OUT}")
    assert "| FP8_DYNAMIC | 算法 | FA量化 |" in text
    main_sha = git_repo.repo.head.commit.hexsha
    assert git_repo.repo.commit(result.commit).parents[0].hexsha == main_sha
    assert [p.id for p in forge.list_proposals()] == [proposal.id]


def test_second_run_is_idempotent(git_repo, docs):
    forge = LocalForge(git_repo.path)
    first = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t1")
    history = subprocess.run(
        ["git", "rev-list", "--count", f"refs/tunebot/proposals/{first.proposal.id}"],
        cwd=git_repo.path,
        capture_output=True,
        text=True,
    ).stdout
    second = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t2")
    assert second.status == "up-to-date" and second.commit == first.commit
    assert second.proposal.id == first.proposal.id and len(forge.list_proposals()) == 1
    again = subprocess.run(
        ["git", "rev-list", "--count", f"refs/tunebot/proposals/{first.proposal.id}"],
        cwd=git_repo.path,
        capture_output=True,
        text=True,
    ).stdout
    assert again == history  # no new history entry on the proposal either


def test_no_change_against_base_means_no_commit_and_no_proposal(git_repo, docs, tmp_path):
    forge = LocalForge(git_repo.path)
    first = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t1")
    content = _show(git_repo.path, f"{first.commit}:{OUT}")
    other = init_repo(tmp_path / "other").path  # a repo whose main already has this table
    make_commit(other, {OUT: content}, "table")
    result = propose_refresh(other, docs, LocalForge(other), base="main", output=OUT, now="t9")
    assert result.status == "unchanged" and result.commit is None and result.proposal is None
    assert (
        subprocess.run(
            ["git", "-C", str(other), "branch", "--list", BRANCH], capture_output=True, text=True
        ).stdout
        == ""
    )
    assert LocalForge(other).list_proposals() == []


def test_changed_docs_update_the_same_proposal(git_repo, docs):
    forge = LocalForge(git_repo.path)
    first = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t1")
    make_commit(git_repo, {OUT: _show(git_repo.path, f"{first.commit}:{OUT}")}, "merge the table")
    (docs / "share_memory.md").unlink()
    second = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t2")
    assert second.status == "proposed" and second.commit != first.commit
    assert second.proposal.id == first.proposal.id and len(forge.list_proposals()) == 1
    assert "删除 1 行" in second.proposal.body and "显存共享" in second.proposal.body
    assert "share_memory.md" in second.proposal.body  # the warning about the missing file


def test_pushes_the_branch_to_a_remote(git_repo, docs):
    result = propose_refresh(
        git_repo.path,
        docs,
        LocalForge(git_repo.path),
        base="main",
        output=OUT,
        remote="origin",
        now="t1",
    )
    remote = subprocess.run(
        ["git", "rev-parse", f"refs/heads/{BRANCH}"],
        cwd=git_repo.origin,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert remote == result.commit


def test_refuses_a_branch_of_the_same_name_it_did_not_create(git_repo, docs):
    subprocess.run(["git", "branch", BRANCH], cwd=git_repo.path, check=True)
    with pytest.raises(GitError, match="not created by tunebot"):
        propose_refresh(git_repo.path, docs, LocalForge(git_repo.path), base="main", output=OUT)


def _commit_table(git_repo, text: str) -> None:
    path = git_repo.path / OUT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "add", OUT], cwd=git_repo.path, check=True)
    subprocess.run(["git", "commit", "-qm", "table"], cwd=git_repo.path, check=True)


def test_proposal_closes_itself_when_the_docs_match_the_base_again(git_repo, docs):
    forge = LocalForge(git_repo.path)
    base_run = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t0")
    base_text = _show(git_repo.path, f"{base_run.commit}:{OUT}")
    forge.close(base_run.proposal.id)
    _commit_table(git_repo, base_text)  # the base now holds the table of these docs
    original = (docs / "cache.md").read_text(encoding="utf-8")
    (docs / "cache.md").write_text(original + "\n## 新缓存\n\n一种新缓存。\n", encoding="utf-8")
    changed = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t1")
    assert changed.status == "proposed" and changed.proposal.state == "open"
    (docs / "cache.md").write_text(original, encoding="utf-8")  # the docs revert
    reverted = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t2")
    assert reverted.status == "closed" and reverted.proposal.id == changed.proposal.id
    assert forge.get(changed.proposal.id).state == "closed" and forge.list_proposals("open") == []
    assert (
        propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t3").status
        == "unchanged"
    )


def test_a_closed_proposal_is_not_reopened_with_the_same_table_but_a_changed_one_is(git_repo, docs):
    forge = LocalForge(git_repo.path)
    first = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t1")
    forge.close(first.proposal.id)  # a reviewer declines it
    again = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t2")
    assert again.status == "declined" and again.proposal.id == first.proposal.id
    assert forge.list_proposals("open") == [] and len(forge.list_proposals(None)) == 1
    (docs / "cache.md").write_text(
        (docs / "cache.md").read_text(encoding="utf-8") + "\n## 新缓存\n\n新。\n", encoding="utf-8"
    )
    changed = propose_refresh(git_repo.path, docs, forge, base="main", output=OUT, now="t3")
    assert changed.status == "proposed" and changed.proposal.id != first.proposal.id
    assert changed.proposal.state == "open"
