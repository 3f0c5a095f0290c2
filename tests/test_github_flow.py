"""The GitHub flow end to end: webhook payloads -> bot -> fake GitHub, a bare repo as the remote,
the real tuning loop on a CPU test op. Every test ends asserting the fake saw no spec violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakegithub.harness import World, git, make_world

from bot.forge.github import STALE_LABEL, make_client, reply_marker, status_marker
from bot.github_flow import FlowConfig, handle_event

OPS = Path(__file__).parent / "loop_ops"
OP = "testproj/sleepy"
OP_FILES = {
    f"examples/{OP}/sleepy.py": (OPS / "sleepy.py").read_text(),
    f"examples/{OP}/tune.yaml": (OPS / "tune.yaml").read_text(),
    f"examples/{OP}/DESIGN.md": (OPS / "DESIGN.md").read_text(),
}


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path, OP_FILES)
    w.fake.set_permission("dev", "write")
    w.fake.set_permission("lead", "maintain")
    w.fake.set_permission("visitor", "read")
    yield w
    w.fake.stop()


@pytest.fixture
def pr(world) -> tuple[int, str]:
    sha = world.push_branch("feature", {"notes.md": "a change to tune on\n"}, "feature work")
    return world.fake.open_pull("feature", user="dev", title="Feature"), sha


def flow(world: World, checkout: Path | None, **kwargs) -> tuple:
    waits: list[float] = []
    cfg = FlowConfig(
        repo=world.fake.full_name,
        checkout=checkout,
        server_url=world.fake.base_url + "/html",
        sleep=waits.append,
        **kwargs,
    )
    return make_client("t0ken", world.fake.base_url), cfg, waits


def must_not_tune(*args, **kwargs):
    raise AssertionError("the tuning loop must not run for this event")


def remote_refs(world: World) -> dict[str, str]:
    out = world.fake.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return dict(line.split(" ") for line in out.splitlines())


def bot_comments(world: World, number: int) -> list:
    return [c for c in world.fake.comments_on(number) if c.user == world.fake.token_login]


def proposals(world: World) -> list:
    return [p for p in world.fake.pulls.values() if p.head_ref.startswith("tunebot/")]


def test_authorized_tune_end_to_end_and_rerun_duplicates_nothing(world, pr, tmp_path):
    number, head = pr
    checkout = world.clone(tmp_path / "runner")
    gh, cfg, _ = flow(world, checkout)
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev")

    (outcome,) = handle_event("issue_comment", payload, gh, cfg)

    assert outcome.action == "tuned", outcome.message
    assert outcome.outputs["head_sha"] == head
    assert world.fake.reactions[payload["comment"]["id"]] == [(world.fake.token_login, "eyes")]
    refs = remote_refs(world)
    assert {
        "refs/heads/tunebot/sleepy/v1",
        "refs/heads/tunebot/sleepy/v2",
        "refs/heads/tunebot/sleepy/best",
    } <= set(refs)
    # iteration 1 is built on the PR head the bot authorized
    assert (
        git(checkout, "merge-base", "--is-ancestor", head, refs["refs/heads/tunebot/sleepy/v1"])
        == ""
    )
    (proposal,) = proposals(world)
    assert proposal.base_ref == "feature" and proposal.head_ref == "tunebot/sleepy/best"
    assert (
        "/tune help" in proposal.body
        and "Effective config" in proposal.body
        and "```mermaid" in proposal.body
    )
    # every iteration row links its branch on the repository's web pages
    assert f"](<{world.fake.repo_html}/tree/tunebot/sleepy/v1>)" in proposal.body
    assert "tunebot" in proposal.labels
    (status,) = bot_comments(world, number)
    assert status.body.startswith(status_marker(OP))
    assert "Verdict" in status.body and f"#{proposal.number}" in status.body
    assert "| 1 |" in status.body and "| 2 |" in status.body
    assert f"/commit/{refs['refs/heads/tunebot/sleepy/v1']}" in status.body
    assert [s["state"] for s in world.fake.statuses[head]] == ["success"]
    calls_before = len(world.fake.calls)

    # The same event delivered again (or the same command re-run): nothing new appears.
    (again,) = handle_event("issue_comment", payload, gh, cfg)
    assert again.action == "tuned"
    assert len(proposals(world)) == 1 and len(bot_comments(world, number)) == 1
    assert len(world.fake.pulls) == 2
    assert (
        len(world.fake.calls_to("pulls/create")) == 1
        and len(world.fake.calls_to("issues/create-comment")) == 1
    )
    assert remote_refs(world) == refs
    assert len(world.fake.calls) > calls_before
    world.fake.assert_no_violations()


def test_unauthorized_user_gets_an_answer_and_nothing_runs(world, pr, tmp_path):
    number, _ = pr
    checkout = world.clone(tmp_path / "runner")
    before = remote_refs(world)
    gh, cfg, _ = flow(world, checkout)
    payload = world.fake.comment_event(number, "/tune sleepy", "visitor")

    (outcome,) = handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)

    assert outcome.action == "refused" and outcome.outputs == {"authorized": "false"}
    (reply,) = bot_comments(world, number)
    assert reply.body.startswith(reply_marker(payload["comment"]["id"]))
    assert "@visitor" in reply.body and "`read`" in reply.body and "`write`" in reply.body
    assert remote_refs(world) == before and proposals(world) == [] and world.fake.statuses == {}
    assert not (checkout / ".git" / "tunebot").exists()
    assert not world.fake.calls_to("pulls/merge")
    world.fake.assert_no_violations()


def test_fork_pull_request_is_refused_with_what_a_maintainer_can_do(world, tmp_path):
    fork_sha = world.push_branch("scratch", {"evil.py": "import os\n"}, "from a fork")
    world.fake.git("update-ref", "-d", "refs/heads/scratch")  # the branch lives in the fork only
    number = world.fake.open_pull(
        "patch-1", user="mallory", fork_owner="mallory", head_sha=fork_sha
    )
    before = remote_refs(world)
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "lead"),
        gh,
        cfg,
        tune=must_not_tune,
    )

    assert outcome.action == "refused"
    (reply,) = bot_comments(world, number)
    assert (
        "fork" in reply.body
        and "mallory/kernels" in reply.body
        and f"pull/{number}/head" in reply.body
    )
    assert remote_refs(world) == before and proposals(world) == [] and world.fake.statuses == {}
    world.fake.assert_no_violations()


def test_comment_by_a_bot_is_ignored_without_any_api_call(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None)
    payload = world.fake.comment_event(number, "/tune sleepy", "tunebot[bot]")
    calls = len(world.fake.calls)
    (outcome,) = handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)
    assert outcome.action == "ignored" and "bot" in outcome.message
    assert len(world.fake.calls) == calls
    world.fake.assert_no_violations()


def test_malformed_command_gets_the_grammar(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None)
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters many", "dev")
    (outcome,) = handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)
    assert outcome.action == "replied"
    (reply,) = bot_comments(world, number)
    assert "--max-iters" in reply.body and "/tune <op> [<op>...]" in reply.body
    assert world.fake.reactions[payload["comment"]["id"]] == [(world.fake.token_login, "eyes")]
    # help and status are answered too, each in its own reply
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune help", "visitor"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune status", "visitor"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    bodies = [c.body for c in bot_comments(world, number)]
    assert len(bodies) == 3 and "tunebot commands" in bodies[1] and "No tunebot runs" in bodies[2]
    world.fake.assert_no_violations()


def test_unknown_op_lists_the_repository_ops(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune nosuch", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert outcome.action == "refused"
    (reply,) = bot_comments(world, number)
    assert "nosuch" in reply.body and OP in reply.body
    world.fake.assert_no_violations()


def test_gate_phase_pins_the_sha_and_tune_phase_refuses_a_moved_head(world, pr, tmp_path):
    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    (gate,) = handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    assert gate.action == "authorized" and gate.outputs == {
        "authorized": "true",
        "head_sha": head,
        "pr": str(number),
        "ops": "sleepy",
        "max_parallel": "1",
        "matrix": '{"include":[{"op":"sleepy","runs_on":["self-hosted","npu"]}]}',
    }
    (queued,) = bot_comments(world, number)
    assert "queued" in queued.body.lower()
    assert world.fake.statuses[head][0]["state"] == "pending"

    world.push_branch("feature", {"notes.md": "pushed after the gate\n"}, "late push")
    before = remote_refs(world)
    _, tune_cfg, _ = flow(
        world, world.clone(tmp_path / "runner"), phase="tune", authorized_sha=head
    )
    (tuned,) = handle_event("issue_comment", payload, gh, tune_cfg, tune=must_not_tune)
    assert tuned.action == "stale" and "moved" in tuned.message
    assert remote_refs(world) == before and proposals(world) == []
    world.fake.assert_no_violations()


def test_head_moving_mid_run_marks_results_stale_and_blocks_merge(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    # The developer pushes while the bot is tuning (at its first status edit).
    world.fake.before["issues/update-comment"] = lambda: world.push_branch(
        "feature", {"notes.md": "moved\n"}, "moved on"
    )

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )

    assert outcome.action == "stale"
    (status,) = bot_comments(world, number)
    assert "Stale results" in status.body and head[:10] in status.body
    (proposal,) = proposals(world)
    assert STALE_LABEL in proposal.labels and "Stale results" in proposal.body and proposal.draft
    assert world.fake.statuses[head][-1]["state"] == "error"
    # Even an approval on the proposal's current head does not merge stale results.
    approval = world.fake.review_event(proposal.number, "lead", "approved")
    (review,) = handle_event("pull_request_review", approval, gh, cfg)
    assert review.action == "gate-refused" and "stale" in review.message
    assert not world.fake.calls_to("pulls/merge") and proposal.merged is False
    world.fake.assert_no_violations()


def test_approval_on_old_sha_refused_then_current_sha_merges_and_cleans_up(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev"),
        gh,
        cfg,
    )
    (proposal,) = proposals(world)
    old = world.fake.head_sha(proposal.number)
    # A reviewer pushes a fix-up to the proposal after someone approved the old head.
    world.fake.add_review(proposal.number, "lead", "APPROVED", commit_id=old)
    world.push_branch(
        "tunebot/sleepy/best",
        {"NOTE.md": "reviewed\n"},
        "fix-up",
        start="origin/tunebot/sleepy/best",
    )
    stale_approval = world.fake.review_event(proposal.number, "dev", "approved", commit_id=old)

    (refused,) = handle_event("pull_request_review", stale_approval, gh, cfg)

    assert refused.action == "gate-refused" and refused.exit_code == 3
    assert old[:10] in refused.message and "re-approve" in refused.message
    assert not world.fake.calls_to("pulls/merge")
    gate_comment = [
        c
        for c in bot_comments(world, proposal.number)
        if c.body.startswith("<!-- tunebot:gate -->")
    ]
    assert len(gate_comment) == 1 and "Not merged yet" in gate_comment[0].body

    current = world.fake.head_sha(proposal.number)
    world.fake.add_check_run(current, "ci", "success")
    approval = world.fake.review_event(
        proposal.number, "lead", "approved"
    )  # webhook: approved; REST: APPROVED
    assert approval["review"]["state"] == "approved"
    assert world.fake.reviews[approval["review"]["id"]].state == "APPROVED"

    (merged,) = handle_event("pull_request_review", approval, gh, cfg)

    assert merged.action == "merged", merged.message
    (call,) = world.fake.calls_to("pulls/merge")
    assert call.body["sha"] == current
    refs = remote_refs(world)
    assert not any(r.startswith("refs/heads/tunebot/sleepy/v") for r in refs)
    assert (
        git(world.dev, "fetch", "-q", "origin") == ""
        and git(world.dev, "merge-base", "--is-ancestor", current, "origin/feature") == ""
    )
    assert (
        "Merged"
        in [
            c
            for c in bot_comments(world, proposal.number)
            if c.body.startswith("<!-- tunebot:gate -->")
        ][0].body
    )
    world.fake.assert_no_violations()


def test_review_that_is_not_an_approval_or_not_on_a_proposal_is_ignored(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None)
    (outcome,) = handle_event(
        "pull_request_review", world.fake.review_event(number, "lead", "approved"), gh, cfg
    )
    assert outcome.action == "ignored" and "not a tunebot proposal" in outcome.message
    (outcome,) = handle_event(
        "pull_request_review", world.fake.review_event(number, "lead", "commented"), gh, cfg
    )
    assert outcome.action == "ignored"
    assert not world.fake.calls_to("pulls/merge")
    world.fake.assert_no_violations()


def test_api_5xx_and_rate_limit_are_retried_without_duplicates(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, waits = flow(world, world.clone(tmp_path / "runner"))
    world.fake.inject(429, "collaborators", headers={"Retry-After": "3"})
    world.fake.inject(502, r"^POST .*/issues/\d+/comments$")  # the first status comment fails once
    world.fake.inject(503, r"^POST .*/pulls$")  # so does opening the proposal

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )

    assert outcome.action == "tuned", outcome.message
    assert 3.0 in waits and len(waits) == 3
    assert len(bot_comments(world, number)) == 1 and len(proposals(world)) == 1
    world.fake.assert_no_violations()


def test_cancel_marks_the_status_comment(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    handle_event("issue_comment", world.fake.comment_event(number, "/tune sleepy", "dev"), gh, cfg)
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune cancel", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert outcome.action == "replied" and "sleepy" in outcome.message
    status = [c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")]
    assert len(status) == 1 and "Cancel requested" in status[0].body
    (refused,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune cancel", "visitor"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert refused.action == "refused"
    world.fake.assert_no_violations()


def test_cli_handle_reads_the_actions_environment_and_writes_outputs(
    world, pr, tmp_path, monkeypatch
):
    import json

    from click.testing import CliRunner

    from bot.cli import main

    number, head = pr
    event = tmp_path / "event.json"
    event.write_text(json.dumps(world.fake.comment_event(number, "/tune sleepy", "dev")))
    outputs = tmp_path / "outputs"
    env = {
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_API_URL": world.fake.base_url,
        "GITHUB_REPOSITORY": world.fake.full_name,
        "GITHUB_TOKEN": "t0ken",
        "GITHUB_SERVER_URL": world.fake.base_url + "/html",
        "GITHUB_RUN_ID": "42",
    }
    result = CliRunner().invoke(main, ["github", "handle", "--phase", "gate"], env=env)
    assert result.exit_code == 0, result.output
    assert f"head_sha={head}" in outputs.read_text() and "authorized=true" in outputs.read_text()
    (status,) = [
        c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")
    ]
    assert "/actions/runs/42" in status.body

    event.write_text("not json")
    bad = CliRunner().invoke(main, ["github", "handle"], env=env)
    assert bad.exit_code == 2 and "cannot read the event payload" in bad.output
    event.write_text(json.dumps({"action": "created"}))
    missing = CliRunner().invoke(main, ["github", "handle"], env={**env, "GITHUB_TOKEN": ""})
    assert missing.exit_code == 2 and "GITHUB_TOKEN" in missing.output
    world.fake.assert_no_violations()


def test_cli_propose_opens_one_pull_request(world, tmp_path):
    from click.testing import CliRunner

    from bot.cli import main

    world.push_branch(
        "tunebot/features-refresh", {"references/mindiesd-features.md": "| a |\n"}, "refresh"
    )
    body = tmp_path / "body.md"
    body.write_text("Regenerated.\n")
    env = {
        "GITHUB_API_URL": world.fake.base_url,
        "GITHUB_REPOSITORY": world.fake.full_name,
        "GITHUB_TOKEN": "t0ken",
    }
    args = [
        "github",
        "propose",
        "--head",
        "tunebot/features-refresh",
        "--title",
        "refresh",
        "--body-file",
        str(body),
    ]
    first = CliRunner().invoke(main, args, env=env)
    second = CliRunner().invoke(main, args, env=env)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    (proposal,) = proposals(world)
    assert proposal.base_ref == "main" and proposal.body.startswith("Regenerated.")
    assert first.output.split()[0] == second.output.split()[0] == f"#{proposal.number}"
    world.fake.assert_no_violations()


def test_cancel_during_a_run_stops_it_after_the_current_iteration(world, pr, tmp_path):
    from bot.github_flow import CANCEL_MARKER

    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))

    def mark_cancel() -> None:  # what `/tune cancel` does to the status comment
        (status,) = [
            c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")
        ]
        status.body += f"\n{CANCEL_MARKER}"

    # Once the status comment exists, the next read of it sees the cancel.
    world.fake.before["issues/update-comment"] = lambda: world.fake.before.__setitem__(
        "issues/get-comment", mark_cancel
    )
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 6", "dev"),
        gh,
        cfg,
    )

    assert outcome.action == "tuned", outcome.message
    (status,) = [
        c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")
    ]
    assert "已取消" in status.body and "Cancel requested" in status.body
    iterations = [r for r in remote_refs(world) if r.startswith("refs/heads/tunebot/sleepy/v")]
    assert len(iterations) < 6 and "| 6 |" not in status.body
    world.fake.assert_no_violations()


def test_gate_then_tune_phases_share_one_status_comment(world, pr, tmp_path):
    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev")
    (gate,) = handle_event("issue_comment", payload, gh, gate_cfg)
    _, tune_cfg, _ = flow(
        world,
        world.clone(tmp_path / "runner"),
        phase="tune",
        authorized_sha=gate.outputs["head_sha"],
    )
    (tuned,) = handle_event("issue_comment", payload, gh, tune_cfg)
    assert tuned.action == "tuned", tuned.message
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert status.body.startswith(status_marker(OP)) and "Verdict" in status.body
    assert world.fake.reactions[payload["comment"]["id"]] == [
        (world.fake.token_login, "eyes")
    ]  # gate only
    assert [s["state"] for s in world.fake.statuses[head]] == ["pending", "success"]
    world.fake.assert_no_violations()


def test_schedule_tunes_configured_ops_into_the_default_branch(tmp_path):
    config = "defaults:\n  max_iters: 1\ngithub:\n  ops: [sleepy]\n  labels: [tunebot, scheduled]\n"
    world = make_world(tmp_path, {**OP_FILES, ".tunebot.yml": config})
    try:
        from bot.config.repo import load_repo_config

        checkout = world.clone(tmp_path / "runner")
        gh, cfg, _ = flow(world, checkout, repo_cfg=load_repo_config(checkout))
        (outcome,) = handle_event("schedule", {"schedule": "23 2 * * 6"}, gh, cfg)
        assert outcome.action == "tuned", outcome.message
        (proposal,) = proposals(world)
        assert proposal.base_ref == "main" and proposal.labels == ["tunebot", "scheduled"]
        assert world.fake.calls_to("issues/create-comment") == []  # no PR to comment on
        (bad,) = handle_event(
            "workflow_dispatch", {"inputs": {"ops": "nosuch"}}, gh, cfg, tune=must_not_tune
        )
        assert bad.action == "refused" and bad.exit_code == 2 and "nosuch" in bad.message
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()


def test_a_comment_with_several_commands_gets_one_reply(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None)
    payload = world.fake.comment_event(number, "two things:\n/tune help\n/tune status", "dev")
    outcomes = handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)
    assert [o.action for o in outcomes] == ["replied", "replied"]
    (reply,) = bot_comments(world, number)
    assert "tunebot commands" in reply.body and "No tunebot runs" in reply.body
    assert len(world.fake.calls_to("reactions/create-for-issue-comment")) == 1
    handle_event(
        "issue_comment", payload, gh, cfg, tune=must_not_tune
    )  # re-delivered: edits, no new replies
    assert len(bot_comments(world, number)) == 1
    # One bad line: nothing of the comment runs, one reply names the line.
    bad = world.fake.comment_event(number, "/tune help\n/tune sleepy --bogus", "dev")
    outcomes = handle_event("issue_comment", bad, gh, cfg, tune=must_not_tune)
    replies = [
        c for c in bot_comments(world, number) if reply_marker(bad["comment"]["id"]) in c.body
    ]
    assert len(replies) == 1 and "command 2: unknown option `--bogus`" in replies[0].body
    world.fake.assert_no_violations()


def test_features_refresh_proposes_once_through_the_github_forge(world, tmp_path):
    """The scheduled features refresh (bot.features) with this forge: one PR, re-runs add nothing."""
    from bot.features.propose import propose_refresh
    from bot.forge.github import GithubForge

    docs = Path(__file__).parent / "data" / "mindiesd-docs"  # committed by the features tests
    checkout = world.clone(tmp_path / "runner")
    forge = GithubForge(make_client("t0ken", world.fake.base_url), world.fake.full_name)
    first = propose_refresh(checkout, docs, forge, base="main", remote="origin")
    second = propose_refresh(checkout, docs, forge, base="main", remote="origin")
    (proposal,) = proposals(world)
    assert first.proposal.id == second.proposal.id == str(proposal.number)
    assert proposal.base_ref == "main" and proposal.head_ref == "tunebot/refresh-features"
    assert "refs/heads/tunebot/refresh-features" in remote_refs(world)
    world.fake.assert_no_violations()


def test_head_moving_right_after_authorization_runs_nothing(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    # The push lands between the permission check and the start of the run.
    world.fake.before["pulls/get"] = lambda: world.fake.before.__setitem__(
        "pulls/get", lambda: world.push_branch("feature", {"notes.md": "raced\n"}, "race")
    )
    before = {k: v for k, v in remote_refs(world).items() if k != "refs/heads/feature"}

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )

    assert outcome.action == "stale"
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "Nothing was run" in status.body and head[:10] in status.body
    assert {k: v for k, v in remote_refs(world).items() if k != "refs/heads/feature"} == before
    assert proposals(world) == [] and not world.fake.calls_to("pulls/merge")
    world.fake.assert_no_violations()


def test_cancel_sent_while_queued_stops_the_run_before_it_starts(world, pr, tmp_path):
    from bot.github_flow import CANCEL_MARKER

    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune cancel", "dev"),
        gh,
        gate_cfg,
        tune=must_not_tune,
    )
    _, tune_cfg, _ = flow(
        world, world.clone(tmp_path / "runner"), phase="tune", authorized_sha=head
    )

    (outcome,) = handle_event("issue_comment", payload, gh, tune_cfg, tune=must_not_tune)

    assert outcome.action == "tuned" and "cancelled before it started" in outcome.message
    (status,) = [
        c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")
    ]
    assert (
        CANCEL_MARKER in status.body and "nothing was run" in status.body
    )  # the marker survives the rewrite
    # A cancel is not a success: the commit status says it ended without a result.
    assert proposals(world) == [] and world.fake.statuses[head][-1]["state"] == "error"
    assert "cancelled" in world.fake.statuses[head][-1]["description"]
    world.fake.assert_no_violations()


def test_results_for_an_older_head_of_the_original_pr_are_not_merged(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )
    (proposal,) = proposals(world)
    assert f"<!-- tunebot:pinned:{head} -->" in proposal.body  # the full pinned SHA, hidden
    world.push_branch(
        "feature", {"notes.md": "moved after the run\n"}, "later work"
    )  # the original PR moves on
    world.fake.add_check_run(world.fake.head_sha(proposal.number), "ci", "success")

    (review,) = handle_event(
        "pull_request_review", world.fake.review_event(proposal.number, "lead", "approved"), gh, cfg
    )

    assert (
        review.action == "gate-refused"
        and "base moved" in review.message
        and head[:10] in review.message
    )
    assert not world.fake.calls_to("pulls/merge")
    world.fake.assert_no_violations()


def test_a_failure_in_the_tune_phase_ends_the_pending_status_and_says_what_failed(
    world, pr, tmp_path
):
    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    assert world.fake.statuses[head][-1]["state"] == "pending"
    checkout = world.clone(tmp_path / "runner")
    (checkout / ".tunebot.yml").write_text("max_iters: many\n")  # check_ops raises ConfigError
    _, tune_cfg, _ = flow(world, checkout, phase="tune", authorized_sha=head)

    (outcome,) = handle_event("issue_comment", payload, gh, tune_cfg, tune=must_not_tune)

    assert outcome.action == "failed" and outcome.exit_code == 1 and "max_iters" in outcome.message
    assert world.fake.statuses[head][-1]["state"] == "failure"
    (status,) = [
        c for c in bot_comments(world, number) if c.body.startswith("<!-- tunebot:status:")
    ]
    assert "failed" in status.body and "**Failed:**" in status.body and "max_iters" in status.body
    world.fake.assert_no_violations()


def test_a_marker_in_another_bots_comment_is_not_trusted(world, pr):
    from bot.github_flow import CANCEL_MARKER

    number, _ = pr
    impostor = world.fake.add_comment(
        number, f"{status_marker('sleepy')}\n### owned\n\n{CANCEL_MARKER}", "impostor[bot]"
    )
    gh, cfg, _ = flow(world, None, phase="gate")
    (status,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune status", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert "No tunebot runs" in status.message
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert (
        world.fake.comments[impostor.id].body.endswith(CANCEL_MARKER)
        and "owned" in world.fake.comments[impostor.id].body
    )
    (queued,) = [
        c for c in bot_comments(world, number) if c.body.startswith(status_marker("sleepy"))
    ]
    assert "Queued" in queued.body  # our own comment, created beside the impostor's
    world.fake.assert_no_violations()


def test_an_op_named_twice_is_tuned_once(world, pr, tmp_path):
    from bot.github_flow import _default_tune

    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    runs: list[str] = []

    def counting(request, **kwargs):
        runs.append(request.op)
        return _default_tune(request, **kwargs)

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, f"/tune sleepy {OP} --max-iters 1", "dev"),
        gh,
        cfg,
        tune=counting,
    )

    assert outcome.action == "tuned" and runs == [OP] and len(outcome.message.splitlines()) == 1
    assert len([c for c in bot_comments(world, number) if "tunebot:status:" in c.body]) == 1
    world.fake.assert_no_violations()


def test_a_fork_proposal_on_a_tunebot_branch_is_never_merged(world, pr):
    sha = world.push_branch("scratch", {"evil.py": "import os\n"}, "from a fork")
    world.fake.git("update-ref", "-d", "refs/heads/scratch")
    number = world.fake.open_pull(
        "tunebot/sleepy/best", user="mallory", fork_owner="mallory", head_sha=sha
    )
    world.fake.add_check_run(sha, "ci", "success")
    gh, cfg, _ = flow(world, None)

    (review,) = handle_event(
        "pull_request_review", world.fake.review_event(number, "lead", "approved"), gh, cfg
    )

    assert review.action == "gate-refused" and "fork (mallory/kernels)" in review.message
    assert not world.fake.calls_to("pulls/merge")
    world.fake.assert_no_violations()


def test_kernels_run_during_a_github_tune_never_see_the_token(world, tmp_path, monkeypatch):
    # the kernel prints what it sees (it may not write outside its own temporary folder); the
    # output tails are kept in the run's records
    spy = (
        "import os as _o\n"
        "print('SPY', [_o.environ.get(k) for k in ('GITHUB_TOKEN', 'GH_TOKEN', 'ACTIONS_RUNTIME_TOKEN')])\n"
    )
    source = OP_FILES[f"examples/{OP}/sleepy.py"]
    sha = world.push_branch(
        "feature", {f"examples/{OP}/sleepy.py": spy + source}, "a kernel that looks around"
    )
    number = world.fake.open_pull("feature", user="dev")
    for key in ("GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN"):
        monkeypatch.setenv(key, "s3cret")
    runner = world.clone(tmp_path / "runner")
    gh, cfg, _ = flow(world, runner)

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )

    assert outcome.action == "tuned", outcome.message
    results = Path(runner) / ".git/tunebot/runs" / OP / "results.jsonl"
    tails = [
        r[part]["tail"]
        for r in map(json.loads, results.read_text().splitlines())
        for part in ("accuracy", "latency")
        if isinstance(r.get(part), dict)
    ]
    seen = [line for tail in tails for line in tail.splitlines() if line.startswith("SPY ")]
    assert seen and all(line == "SPY [None, None, None]" for line in seen), seen
    assert len(proposals(world)) == 1 and "refs/heads/tunebot/sleepy/best" in remote_refs(
        world
    )  # the push still worked
    assert world.fake.head_sha(number) == sha
    world.fake.assert_no_violations()


def test_no_child_started_during_a_github_tune_inherits_the_token(world, pr, tmp_path, monkeypatch):
    """Not only the sandbox's children: any process the tune starts (a backend tool, a hook) sees no secret."""
    import subprocess
    import sys

    from bot.github_flow import _default_tune

    number, _ = pr
    for key in ("GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        monkeypatch.setenv(key, "s3cret")
    seen: list[str] = []

    def tune_starting_a_plain_child(request, **kwargs):
        probe = "import os; print([k for k in os.environ if k in ('GITHUB_TOKEN', 'GH_TOKEN') or k.startswith('ACTIONS_')])"
        seen.append(
            subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        return _default_tune(request, **kwargs)

    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
        tune=tune_starting_a_plain_child,
    )

    assert outcome.action == "tuned", outcome.message
    assert seen == ["[]"]
    assert len(proposals(world)) == 1  # the client kept its own token: the proposal still opened
    world.fake.assert_no_violations()


def test_a_failure_after_the_run_started_is_reported_on_the_same_status_comment(
    world, pr, tmp_path
):
    import subprocess

    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))

    def failing_git(request, **kwargs):
        raise subprocess.CalledProcessError(
            128, ["git", "fetch", "origin"], stderr=b"fatal: could not read from remote"
        )

    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "dev"),
        gh,
        cfg,
        tune=failing_git,
    )

    assert outcome.action == "failed" and "could not read from remote" in outcome.message
    assert world.fake.statuses[head][-1]["state"] == "failure"
    (status,) = [
        c for c in bot_comments(world, number) if "tunebot:status:" in c.body
    ]  # edited, not a second one
    assert (
        status.body.startswith(status_marker(OP))
        and "git fetch origin" in status.body
        and "**Failed:**" in status.body
    )
    world.fake.assert_no_violations()


# ---------------------------------------------------------------- bounded answers (API budget)

GATE_CALLS_FIXED = (
    7  # react, permission, read PR, read repo (once per client), status comments (2), commit status
)
GATE_CALLS_PER_OP = 3  # status comment: read PR, list comments (one page of 30), create or edit
REPLY_CALLS = 3  # the one reply: read PR, list comments (one page), create or edit


def test_fifty_bad_lines_from_a_read_only_user_get_one_reply_and_few_calls(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    before = len(world.fake.calls)
    body = "\n".join(f"/tune sleepy --max-iters x{i}" for i in range(50))
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, body, "visitor"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    (reply,) = bot_comments(world, number)
    assert "at most 3" in reply.body
    assert len(world.fake.calls) - before <= 1 + 1 + REPLY_CALLS  # react, repo, reply
    world.fake.assert_no_violations()


def test_fifty_valid_lines_cost_a_bounded_number_of_calls(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    before = len(world.fake.calls)
    body = "\n".join("/tune sleepy" for _ in range(50))
    outcomes = handle_event(
        "issue_comment", world.fake.comment_event(number, body, "dev"), gh, cfg, tune=must_not_tune
    )
    assert [o.action for o in outcomes] == ["replied"]
    assert len(bot_comments(world, number)) == 1 and not world.fake.statuses
    assert len(world.fake.calls) - before <= 1 + 1 + REPLY_CALLS
    world.fake.assert_no_violations()


def test_invalid_lines_mixed_with_valid_ones_from_anyone_get_one_reply(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    for login in ("visitor", "dev"):
        body = "/tune sleepy\n/tune sleepy --max-iters ３\n/tune\u00a0sleepy"
        payload = world.fake.comment_event(number, body, login)
        handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)
        (reply,) = [
            c
            for c in bot_comments(world, number)
            if reply_marker(payload["comment"]["id"]) in c.body
        ]
        assert "U+FF13" in reply.body and "U+00A0" in reply.body and "ASCII" in reply.body
    assert len(bot_comments(world, number)) == 2 and not world.fake.statuses  # nothing queued
    world.fake.assert_no_violations()


def test_two_tune_commands_in_one_comment_run_nothing_and_get_one_reply(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    (out,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy\n/tune sleepy --max-iters 2", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert out.action == "replied" and "one tuning run" in out.message and not out.outputs
    (reply,) = bot_comments(world, number)
    assert "op1 op2" in reply.body and not world.fake.statuses
    world.fake.assert_no_violations()


@pytest.mark.parametrize("ops", [["sleepy"], ["sleepy", "a", "b", "c", "d", "e", "f", "g"]])
def test_gate_calls_per_event_stay_within_the_stated_budget(world, pr, ops):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    before = len(world.fake.calls)
    (gate,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune " + " ".join(ops), "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert gate.action == "authorized"
    used = len(world.fake.calls) - before
    summary = REPLY_CALLS if len(ops) > 1 else 0  # a multi-op command also gets its summary comment
    assert used <= GATE_CALLS_FIXED + GATE_CALLS_PER_OP * len(ops) + summary, used
    world.fake.assert_no_violations()


# ---------------------------------------------------------------- fresh runners (ephemeral)


def _records(world, op: str = OP) -> list[dict]:
    import json

    text = world.fake.git("show", f"refs/tunebot/runs/{op}:results.jsonl")
    return [json.loads(line) for line in text.splitlines()]


def test_a_rerun_on_a_fresh_runner_after_delivery_is_a_no_op_that_says_so(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev")
    (first,) = handle_event("issue_comment", payload, gh, cfg)
    assert first.action == "tuned", first.message
    refs, records = remote_refs(world), _records(world)
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    done_body = status.body

    # The same event on a runner that has never seen this repository (an ephemeral runner).
    for name in ("runner2", "runner3"):
        _, fresh, _ = flow(world, world.clone(tmp_path / name))
        (again,) = handle_event("issue_comment", payload, gh, fresh, tune=must_not_tune)
        assert again.action == "tuned" and again.exit_code == 0
        assert "already delivered" in again.message and "nothing was run" in again.message
    assert remote_refs(world) == refs and _records(world) == records
    assert len(proposals(world)) == 1 and world.fake.comments[status.id].body == done_body
    assert [s["state"] for s in world.fake.statuses[head]] == ["success"] * 3
    world.fake.assert_no_violations()


def test_a_500_at_pr_creation_is_recovered_by_a_rerun_on_a_fresh_runner(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
    world.fake.inject(500, r"^POST /repos/[^/]+/[^/]+/pulls$", times=4)  # every retry fails
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev")
    (failed,) = handle_event("issue_comment", payload, gh, cfg)
    assert failed.action == "failed" and failed.exit_code == 1 and proposals(world) == []
    assert world.fake.statuses[head][-1]["state"] == "failure"
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "refs/tunebot/runs" in status.body and "re-run" in status.body  # says how to recover
    measured = [r for r in _records(world) if r["kind"] == "iteration"]

    _, fresh, _ = flow(world, world.clone(tmp_path / "runner2"))
    (again,) = handle_event("issue_comment", payload, gh, fresh, tune=_no_kernel_runs)
    assert again.action == "tuned" and again.exit_code == 0, again.message
    (proposal,) = proposals(world)
    assert [
        r for r in _records(world) if r["kind"] == "iteration"
    ] == measured  # nothing measured twice
    assert world.fake.statuses[head][-1]["state"] == "success"
    assert (
        f"#{proposal.number}" in world.fake.comments[status.id].body
        and "done" in world.fake.comments[status.id].body
    )
    world.fake.assert_no_violations()


def _no_kernel_runs(request, **kwargs):
    """The real loop, but any sandboxed kernel run fails the test (a resumed delivery measures nothing)."""
    from unittest import mock

    from bot.github_flow import _default_tune

    def refuse(*args, **kw):
        raise AssertionError("a kernel ran during a resumed delivery")

    with (
        mock.patch("bot.measure.sandbox.run_sandboxed", refuse),
        mock.patch("bot.measure.accuracy.run_sandboxed", refuse),
    ):
        return _default_tune(request, **kwargs)


def test_a_scheduled_rerun_on_a_fresh_runner_does_nothing_twice(tmp_path):
    config = "defaults:\n  max_iters: 1\ngithub:\n  ops: [sleepy]\n"
    world = make_world(tmp_path, {**OP_FILES, ".tunebot.yml": config})
    try:
        from bot.config.repo import load_repo_config

        checkout = world.clone(tmp_path / "runner1")
        gh, cfg, _ = flow(world, checkout, repo_cfg=load_repo_config(checkout))
        (first,) = handle_event("schedule", {"schedule": "23 2 * * 6"}, gh, cfg)
        assert first.action == "tuned", first.message
        refs = remote_refs(world)
        checkout2 = world.clone(tmp_path / "runner2")
        _, cfg2, _ = flow(world, checkout2, repo_cfg=load_repo_config(checkout2))
        (again,) = handle_event(
            "schedule", {"schedule": "23 2 * * 6"}, gh, cfg2, tune=must_not_tune
        )
        assert (
            again.action == "tuned"
            and again.exit_code == 0
            and "already delivered" in again.message
        )
        assert remote_refs(world) == refs and len(proposals(world)) == 1
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()


def test_a_new_head_restarts_and_replaces_the_delivery_branch_tunebot_made(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )
    old_best = remote_refs(world)["refs/heads/tunebot/sleepy/best"]
    new_head = world.push_branch("feature", {"notes.md": "second version\n"}, "more work")
    _, fresh, _ = flow(world, world.clone(tmp_path / "runner2"))
    (again,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        fresh,
    )
    assert again.action == "tuned" and again.exit_code == 0, again.message
    new_best = remote_refs(world)["refs/heads/tunebot/sleepy/best"]
    assert new_best != old_best
    world.fake.git(
        "merge-base", "--is-ancestor", new_head, new_best
    )  # raises unless built on the new head
    assert world.fake.statuses[new_head][-1]["state"] == "success"
    world.fake.assert_no_violations()


def test_a_delivery_branch_someone_else_moved_is_never_overwritten(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )
    theirs = world.push_branch(
        "tunebot/sleepy/best",
        {"notes.md": "a human fix on the proposal\n"},
        "human",
        start="origin/tunebot/sleepy/best",
    )
    world.push_branch("feature", {"notes.md": "second version\n"}, "more work")
    _, fresh, _ = flow(world, world.clone(tmp_path / "runner2"))
    (again,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        fresh,
    )
    assert again.action == "failed" and "never overwrites" in again.message
    assert remote_refs(world)["refs/heads/tunebot/sleepy/best"] == theirs
    world.fake.assert_no_violations()


# ---------------------------------------------------------------- half-applied states end truthfully


def test_a_422_on_request_reviewers_keeps_the_delivery_and_says_so(world, pr, tmp_path):
    from bot.config.schema import GithubSettings, RepoConfig

    number, head = pr
    gh, cfg, _ = flow(
        world,
        world.clone(tmp_path / "runner"),
        repo_cfg=RepoConfig(github=GithubSettings(reviewers=("alice",))),
    )
    world.fake.inject(
        422, r"requested_reviewers", message="Reviews may only be requested from collaborators."
    )
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )
    assert outcome.action == "tuned" and outcome.exit_code == 0, outcome.message
    assert len(proposals(world)) == 1 and world.fake.statuses[head][-1]["state"] == "success"
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "done" in status.body and "not requested" in status.body and "@alice" in status.body
    world.fake.assert_no_violations()


def test_a_failed_status_edit_does_not_abort_the_tune(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"))
    world.fake.inject(
        502, r"^PATCH /repos/[^/]+/[^/]+/issues/comments/", times=4
    )  # one edit fails for good
    (outcome,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev"),
        gh,
        cfg,
    )
    assert outcome.action == "tuned" and outcome.exit_code == 0, outcome.message
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "Verdict" in status.body and len(proposals(world)) == 1
    assert world.fake.statuses[head][-1]["state"] == "success"
    world.fake.assert_no_violations()


def test_a_stale_refusal_ends_the_queued_status_comment(world, pr, tmp_path):
    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    world.push_branch("feature", {"notes.md": "pushed after the gate\n"}, "late push")
    _, tune_cfg, _ = flow(
        world, world.clone(tmp_path / "runner"), phase="tune", authorized_sha=head
    )
    handle_event("issue_comment", payload, gh, tune_cfg, tune=must_not_tune)
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "queued" not in status.body.splitlines()[1] and "stale" in status.body.splitlines()[1]
    assert world.fake.statuses[head][-1]["state"] == "error"
    world.fake.assert_no_violations()


def test_a_gate_failure_leaves_no_queued_comment_behind(world, pr):
    number, head = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    world.fake.inject(500, r"^POST /repos/[^/]+/[^/]+/statuses/", times=8)
    (gate,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert gate.action == "failed" and gate.exit_code == 1 and gate.outputs["authorized"] == "false"
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "failed" in status.body.splitlines()[1] and "Nothing was run" in status.body
    world.fake.assert_no_violations()


def test_a_merge_api_failure_is_posted_on_the_proposal(world, pr, tmp_path):
    number, _ = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner"), repo_cfg=_no_checks_cfg())
    handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"),
        gh,
        cfg,
    )
    (proposal,) = proposals(world)
    world.fake.inject(502, r"^PUT /repos/[^/]+/[^/]+/pulls/\d+/merge", times=4)
    (review,) = handle_event(
        "pull_request_review", world.fake.review_event(proposal.number, "lead", "approved"), gh, cfg
    )
    assert review.action == "failed" and review.exit_code == 1
    (answer,) = [c for c in bot_comments(world, proposal.number) if "tunebot:gate" in c.body]
    assert "Not merged" in answer.body and "502" in answer.body
    assert world.fake.pulls[proposal.number].state == "open"
    world.fake.assert_no_violations()


def _no_checks_cfg():
    from bot.config.schema import GithubSettings, RepoConfig

    return RepoConfig(github=GithubSettings(allow_no_checks=True))


# ---------------------------------------------------------------- matrix: one job per op


def _three_ops() -> dict[str, str]:
    files = dict(OP_FILES)
    for name in ("nap", "doze"):
        files[f"examples/testproj/{name}/{name}.py"] = OP_FILES[f"examples/{OP}/sleepy.py"]
        files[f"examples/testproj/{name}/tune.yaml"] = OP_FILES[f"examples/{OP}/tune.yaml"]
        files[f"examples/testproj/{name}/DESIGN.md"] = OP_FILES[f"examples/{OP}/DESIGN.md"]
    return files


def test_a_matrix_run_gives_one_pr_per_op_and_one_summary(tmp_path):
    import json

    from bot.config.repo import load_repo_config

    config = "github:\n  max_parallel: 2\n  runners:\n    default: [self-hosted, npu]\n    doze: [self-hosted, 310P]\n"
    world = make_world(tmp_path, {**_three_ops(), ".tunebot.yml": config})
    try:
        world.fake.set_permission("dev", "write")
        head = world.push_branch("feature", {"notes.md": "x\n"}, "feature")
        number = world.fake.open_pull("feature", user="dev")
        payload = world.fake.comment_event(number, "/tune sleepy nap doze --max-iters 1", "dev")
        default = world.clone(tmp_path / "default")
        gh, gate_cfg, _ = flow(world, None, phase="gate", repo_cfg=load_repo_config(default))
        (gate,) = handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
        (queued,) = [c for c in bot_comments(world, number) if "tunebot:summary:" in c.body]
        assert "queued as 3 jobs" in queued.body and queued.body.count("| queued |") == 3
        matrix = json.loads(gate.outputs["matrix"])["include"]
        assert gate.outputs["max_parallel"] == "2"
        assert [(m["op"], m["runs_on"]) for m in matrix] == [
            ("sleepy", ["self-hosted", "npu"]),
            ("nap", ["self-hosted", "npu"]),
            ("doze", ["self-hosted", "310P"]),
        ]
        for i, job in enumerate(matrix):  # each job on its own fresh runner
            runner = world.clone(tmp_path / f"runner{i}")
            _, cfg, _ = flow(world, runner, phase="tune", authorized_sha=head, only_op=job["op"])
            (out,) = handle_event("issue_comment", payload, gh, cfg)
            assert out.action == "tuned" and out.exit_code == 0, out.message
        _, report_cfg, _ = flow(world, None, phase="report", authorized_sha=head)
        (rep,) = handle_event("issue_comment", payload, gh, report_cfg, tune=must_not_tune)

        assert rep.action == "reported" and rep.exit_code == 0, rep.message
        assert sorted(p.head_ref for p in proposals(world)) == [
            "tunebot/doze/best",
            "tunebot/nap/best",
            "tunebot/sleepy/best",
        ]
        (summary,) = [
            c for c in bot_comments(world, number) if "tunebot:summary:" in c.body
        ]  # the gate's, finished
        assert "all done" in summary.body and summary.body.count("| done |") == 3
        assert all(f"#{p.number}" in summary.body for p in proposals(world))
        latest = {s["context"]: s["state"] for s in world.fake.statuses[head]}
        assert latest == {
            "tunebot": "success",
            "tunebot/sleepy": "success",
            "tunebot/nap": "success",
            "tunebot/doze": "success",
        }
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()


def test_the_report_job_finishes_an_op_whose_job_died(world, pr, tmp_path):
    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    # The tune job's runner vanished: nothing ran, the comment still says queued.
    _, report_cfg, _ = flow(world, None, phase="report", authorized_sha=head)
    (rep,) = handle_event("issue_comment", payload, gh, report_cfg, tune=must_not_tune)
    assert rep.action == "reported" and rep.exit_code == 1
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "· failed" in status.body and "ended while it was `queued`" in status.body
    assert world.fake.statuses[head][-1] == {
        **world.fake.statuses[head][-1],
        "state": "failure",
        "context": "tunebot",
    }
    world.fake.assert_no_violations()


def test_the_report_trusts_the_jobs_own_status_over_a_lagging_comment(world, pr):
    from bot.forge.github import GithubForge

    number, head = pr
    gh, gate_cfg, _ = flow(world, None, phase="gate")
    payload = world.fake.comment_event(number, "/tune sleepy", "dev")
    handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    # The job finished and set its status, but its last comment edit never got through.
    GithubForge(gh, world.fake.full_name).set_status(
        head, "success", "tunebot tuned", context="tunebot/sleepy"
    )
    _, report_cfg, _ = flow(world, None, phase="report", authorized_sha=head)
    (rep,) = handle_event("issue_comment", payload, gh, report_cfg, tune=must_not_tune)
    assert rep.action == "reported" and rep.exit_code == 0
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    assert "· failed" not in status.body  # not called lost
    assert (
        world.fake.statuses[head][-1]["state"] == "success"
        and world.fake.statuses[head][-1]["context"] == "tunebot"
    )
    world.fake.assert_no_violations()


def test_an_api_failure_during_authorization_is_answered_and_fails_the_job(world, pr):
    number, _ = pr
    gh, cfg, _ = flow(world, None, phase="gate")
    world.fake.inject(502, r"/collaborators/dev/permission", times=4)
    (out,) = handle_event(
        "issue_comment",
        world.fake.comment_event(number, "/tune sleepy", "dev"),
        gh,
        cfg,
        tune=must_not_tune,
    )
    assert out.action == "failed" and out.exit_code == 1 and out.outputs == {"authorized": "false"}
    (reply,) = bot_comments(world, number)
    assert "could not handle" in reply.body and "502" in reply.body and not world.fake.statuses
    world.fake.assert_no_violations()


def test_a_persistent_runner_with_older_records_takes_the_newer_ones_from_the_remote(
    world, pr, tmp_path
):
    from bot.remote_runs import local_records

    number, head = pr
    persistent = world.clone(tmp_path / "persistent")
    gh, cfg, _ = flow(world, persistent)
    world.fake.inject(500, r"^POST /repos/[^/]+/[^/]+/pulls$", times=4)
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev")
    (failed,) = handle_event("issue_comment", payload, gh, cfg)
    assert failed.action == "failed"
    older = local_records(persistent, OP).read_text()
    _, other, _ = flow(world, world.clone(tmp_path / "other"))
    (done,) = handle_event(
        "issue_comment", payload, gh, other, tune=_no_kernel_runs
    )  # delivered elsewhere
    assert done.action == "tuned" and len(proposals(world)) == 1

    (again,) = handle_event("issue_comment", payload, gh, cfg, tune=must_not_tune)
    assert again.action == "tuned" and "already delivered" in again.message
    newer = local_records(persistent, OP).read_text()
    assert newer.startswith(older) and len(newer) > len(older) and len(proposals(world)) == 1
    world.fake.assert_no_violations()


def test_a_redelivered_comment_through_gate_and_tune_keeps_the_done_comment(world, pr, tmp_path):
    number, head = pr
    gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
    payload = world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev")
    (first,) = handle_event("issue_comment", payload, gh, cfg)
    assert first.action == "tuned"
    (status,) = [c for c in bot_comments(world, number) if "tunebot:status:" in c.body]
    done = status.body
    _, gate_cfg, _ = flow(world, None, phase="gate")
    (gate,) = handle_event("issue_comment", payload, gh, gate_cfg, tune=must_not_tune)
    assert (
        gate.action == "authorized" and world.fake.comments[status.id].body == done
    )  # not back to "queued"
    _, tune_cfg, _ = flow(
        world, world.clone(tmp_path / "runner2"), phase="tune", authorized_sha=head
    )
    (again,) = handle_event("issue_comment", payload, gh, tune_cfg, tune=must_not_tune)
    assert again.action == "tuned" and again.exit_code == 0 and "already delivered" in again.message
    assert (
        world.fake.comments[status.id].body == done
        and world.fake.statuses[head][-1]["state"] == "success"
    )
    assert len(proposals(world)) == 1
    world.fake.assert_no_violations()


def test_a_run_with_nothing_to_propose_rerun_on_a_fresh_runner_is_a_no_op(tmp_path):
    # the op starts at its optimum: every move is slower, so the run ends without a proposal
    source = (
        OP_FILES[f"examples/{OP}/sleepy.py"]
        .replace("\nBLOCK = 16", "\nBLOCK = 64", 1)
        .replace("\nNUM_STAGES = 1", "\nNUM_STAGES = 2", 1)
    )
    world = make_world(tmp_path, {**OP_FILES, f"examples/{OP}/sleepy.py": source})
    try:
        world.fake.set_permission("dev", "write")
        head = world.push_branch("feature", {"notes.md": "x\n"}, "feature")
        number = world.fake.open_pull("feature", user="dev")
        payload = world.fake.comment_event(number, "/tune sleepy --max-iters 2", "dev")
        gh, cfg, _ = flow(world, world.clone(tmp_path / "runner1"))
        (first,) = handle_event("issue_comment", payload, gh, cfg)
        assert first.action == "tuned" and proposals(world) == []
        records = _records(world)
        _, fresh, _ = flow(world, world.clone(tmp_path / "runner2"))
        (again,) = handle_event("issue_comment", payload, gh, fresh, tune=must_not_tune)
        assert again.action == "tuned" and again.exit_code == 0
        assert "nothing to propose" in again.message and "nothing was run" in again.message
        assert _records(world) == records and world.fake.statuses[head][-1]["state"] == "success"
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()
