"""The scheduled refresh proposal over GitHub: PyGithub over HTTP to the spec-checked fake, a real bare origin."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakegithub.harness import git, make_world

from bot.features.propose import BRANCH, propose_refresh
from bot.forge.github.client import GithubClient, make_client
from bot.forge.github.forge import GithubForge

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"
OUT = "references/mindiesd-features.md"


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path)
    yield w
    w.fake.stop()


def test_github_proposal_closes_on_revert_and_is_not_reopened_after_a_review_close(world, tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    repo = world.clone(tmp_path / "work")
    forge = GithubForge(
        GithubClient(
            make_client("t0ken", world.fake.base_url), world.fake.full_name, sleep=lambda s: None
        )
    )
    first = propose_refresh(repo, docs, forge, base="main", output=OUT, remote="origin", now="t1")
    assert (
        first.status == "proposed"
        and first.proposal.state == "open"
        and first.proposal.head == BRANCH
    )
    forge.close(first.proposal.id)  # a reviewer closes it
    again = propose_refresh(repo, docs, forge, base="main", output=OUT, remote="origin", now="t2")
    assert again.status == "declined" and again.proposal.id == first.proposal.id
    assert forge.find_proposal(BRANCH) is None
    # the base takes the table by hand; a docs change opens a new proposal; the revert closes it
    shutil.copy(tmp_path / "docs" / "cache.md", tmp_path / "cache.orig")
    text = git(repo, "show", f"{first.commit}:{OUT}")
    (repo / OUT).parent.mkdir(parents=True, exist_ok=True)
    (repo / OUT).write_text(text + "\n", encoding="utf-8")
    git(repo, "add", OUT)
    git(repo, "commit", "-qm", "take the table")
    git(repo, "push", "-q", "origin", "main")
    (docs / "cache.md").write_text(
        (docs / "cache.md").read_text(encoding="utf-8") + "\n## 新缓存\n\n新。\n", encoding="utf-8"
    )
    changed = propose_refresh(repo, docs, forge, base="main", output=OUT, remote="origin", now="t3")
    assert changed.status == "proposed" and changed.proposal.id != first.proposal.id
    shutil.copy(tmp_path / "cache.orig", docs / "cache.md")
    reverted = propose_refresh(
        repo, docs, forge, base="main", output=OUT, remote="origin", now="t4"
    )
    assert reverted.status == "closed" and reverted.proposal.id == changed.proposal.id
    assert forge.find_proposal(BRANCH) is None
    world.fake.assert_no_violations()
