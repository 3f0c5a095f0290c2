"""The smallest detectable gain on GitHub: the status comment warns when the run was too noisy."""

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


def world_with(tmp_path: Path, noise_warn: float):
    files = {
        f"examples/{OP}/{name}": (OPS / name).read_text()
        for name in ("sleepy.py", "tune.yaml", "DESIGN.md")
    }
    files[".tunebot.yml"] = f"defaults:\n  noise_warn: {noise_warn}\n"
    world = make_world(tmp_path, files)
    world.fake.set_permission("dev", "write")
    return world


@pytest.mark.parametrize(("level", "warned"), [(0.02, True), (0.9, False)])
def test_status_comment_warns_only_above_the_configured_level(tmp_path, level, warned):
    world = world_with(tmp_path, level)
    try:
        world.push_branch("feature", {"notes.md": "a change\n"}, "feature work")
        number = world.fake.open_pull("feature", user="dev", title="Feature")
        cfg = FlowConfig(
            repo=world.fake.full_name,
            checkout=world.clone(tmp_path / "runner"),
            server_url=world.fake.base_url + "/html",
            sleep=lambda s: None,
        )
        gh = make_client("t0ken", world.fake.base_url)
        payload = world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev")
        (outcome,) = handle_event("issue_comment", payload, gh, cfg)
        assert outcome.action == "tuned", outcome.message
        (status,) = [
            c
            for c in world.fake.comments_on(number)
            if c.user == world.fake.token_login and c.body.startswith(status_marker(OP))
        ]
        # every decision is at least the 3 % floor, so a 2 % level always warns and 90 % never
        assert ("too noisy to see gains below" in status.body) is warned
        if warned:
            assert f"warning level {level * 100:.0f} %" in status.body
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()
