"""On GitHub too: a run without a gain opens no pull request, and the status comment says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakegithub.harness import make_world

from bot.forge.github.client import make_client
from bot.forge.github.comments import status_marker
from bot.forge.github.context import FlowConfig
from bot.forge.github.flow import handle_event

OPS = Path(__file__).parent / "loop_ops"
OP = "testproj/sleepy"


@pytest.fixture
def world(tmp_path):
    # the op starts at its optimum (BLOCK 64, NUM_STAGES 2): every move is 2x slower
    source = (OPS / "sleepy.py").read_text().replace("\nBLOCK = 16", "\nBLOCK = 64", 1)
    source = source.replace("\nNUM_STAGES = 1", "\nNUM_STAGES = 2", 1)
    files = {
        f"examples/{OP}/sleepy.py": source,
        f"examples/{OP}/tune.yaml": (OPS / "tune.yaml").read_text(),
        f"examples/{OP}/DESIGN.md": (OPS / "DESIGN.md").read_text(),
    }
    w = make_world(tmp_path, files)
    w.fake.set_permission("dev", "write")
    yield w
    w.fake.stop()


def test_no_gain_opens_no_pull_request_and_the_status_comment_says_why(world, tmp_path):
    world.push_branch("feature", {"notes.md": "a change to tune on\n"}, "feature work")
    number = world.fake.open_pull("feature", user="dev", title="Feature")
    cfg = FlowConfig(
        repo=world.fake.full_name,
        checkout=world.clone(tmp_path / "runner"),
        server_url=world.fake.base_url + "/html",
        sleep=lambda s: None,
    )
    gh = make_client("t0ken", world.fake.base_url)

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev"),
        gh,
        cfg,
    )

    assert outcome.action == "tuned", outcome.message
    assert [p for p in world.fake.pulls.values() if p.head_ref.startswith("tunebot/")] == []
    assert world.fake.calls_to("pulls/create") == []
    (status,) = [c for c in world.fake.comments_on(number) if c.user == world.fake.token_login]
    assert status.body.startswith(status_marker(OP))
    assert "Proposal: none (TUNING_NO_GAIN: none of the 2 variants beat the baseline" in status.body
    world.fake.assert_no_violations()
