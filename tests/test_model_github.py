"""`/tune <project>/<model>` through the GitHub flow: webhook payload -> bot -> fake GitHub (checked
against the OpenAPI description), a bare repo as the remote, the real model loop on the fake pipeline."""

from __future__ import annotations

import json

import pytest
from fakegithub.harness import make_world
from test_model_loop import (
    ANALYSIS,
    EFFECTS,
    FIX,
    MODEL_DIR,
    MODEL_YAML,
    ROOT,
    SETTINGS,
)

from bot.forge.github.client import make_client
from bot.forge.github.comments import status_marker
from bot.forge.github.context import FlowConfig
from bot.forge.github.flow import handle_event


def files(effects: dict) -> dict[str, str]:
    behavior = {"base_ms": 100.0, "jitter": 0.002, "analysis": ANALYSIS, "effects": effects}
    return {
        "references/mindiesd-features.md": (ROOT / "references/mindiesd-features.md").read_text(
            encoding="utf-8"
        ),
        f"{MODEL_DIR}/model.yaml": MODEL_YAML,
        f"{MODEL_DIR}/settings.yaml": SETTINGS,
        f"{MODEL_DIR}/behavior.json": json.dumps(behavior),
        f"{MODEL_DIR}/fakepipe.py": (FIX / "fakepipe.py").read_text(),
        f"{MODEL_DIR}/mindiesd/__init__.py": (FIX / "mindiesd/__init__.py").read_text(),
    }


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path, files({**EFFECTS, "window=128": {"crash": "import"}}))
    w.fake.set_permission("dev", "write")
    yield w
    w.fake.stop()


def test_tune_a_model_from_a_pull_request_comment(world, tmp_path):
    head = world.push_branch("feature", {"notes.md": "x\n"}, "feature work")
    number = world.fake.open_pull("feature", user="dev", title="Feature")
    checkout = world.clone(tmp_path / "runner")
    cfg = FlowConfig(
        repo=world.fake.full_name,
        checkout=checkout,
        server_url=world.fake.base_url + "/html",
        sleep=lambda s: None,
    )
    gh = make_client("t0ken", world.fake.base_url)
    payload = world.fake.comment_event(number, "/tune fakeproj/fake", "dev")

    (outcome,) = handle_event("issue_comment", payload, gh, cfg)

    assert outcome.action == "tuned", outcome.message
    refs = world.fake.git("for-each-ref", "--format=%(refname)", "refs/heads/tunebot/").split()
    assert "refs/heads/tunebot/fake/v1" in refs and "refs/heads/tunebot/fake/best" in refs
    (proposal,) = [p for p in world.fake.pulls.values() if p.head_ref == "tunebot/fake/best"]
    assert proposal.base_ref == "feature"
    assert proposal.body.startswith("### Enabled, and why") and "W8A8_DYNAMIC" in proposal.body
    assert "- features_table: STALE" in proposal.body
    (status,) = [c for c in world.fake.comments_on(number) if c.user == world.fake.token_login]
    assert status.body.startswith(status_marker("fakeproj/fake"))
    assert "quant: false -> true [W8A8_DYNAMIC]" in status.body and "stale_api" in status.body
    assert (
        "**Verdict:** 特性耗尽 (features table may be stale: iter 3: sparse_attention: ImportError"
        in status.body
    )
    assert [s["state"] for s in world.fake.statuses[head]] == ["success"]
    world.fake.assert_no_violations()


def test_unknown_name_is_refused_and_nothing_runs(world, tmp_path):
    world.push_branch("feature", {"notes.md": "x\n"}, "feature work")
    number = world.fake.open_pull("feature", user="dev", title="Feature")
    gh = make_client("t0ken", world.fake.base_url)
    cfg = FlowConfig(
        repo=world.fake.full_name,
        checkout=world.clone(tmp_path / "runner"),
        server_url=world.fake.base_url + "/html",
        sleep=lambda s: None,
    )

    def must_not_tune(*args, **kwargs):
        raise AssertionError("nothing may run for an unknown name")

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune otherproj/fake", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert outcome.action == "refused"
    world.fake.assert_no_violations()
