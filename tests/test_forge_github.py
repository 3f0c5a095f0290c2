"""bot/forge/github.py against the spec-checked fake GitHub (real HTTP, real bare repo)."""

from __future__ import annotations

import time

import pytest
from fakegithub.harness import World, make_world

from bot.config.schema import GithubSettings
from bot.forge.github import (
    STALE_LABEL,
    GateRefused,
    GithubError,
    GithubForge,
    RetryPolicy,
    client_from_env,
    codeowners_for,
    make_client,
    status_marker,
)


@pytest.fixture
def world(tmp_path):
    w = make_world(
        tmp_path, {".github/CODEOWNERS": "* @lead\nexamples/demo/ @kernel-owner @org/team\n"}
    )
    yield w
    w.fake.stop()


def forge_for(world: World, **kwargs) -> GithubForge:
    sleeps: list[float] = []
    kwargs.setdefault("sleep", sleeps.append)
    return GithubForge(make_client("t0ken", world.fake.base_url), world.fake.full_name, **kwargs)


def test_client_from_env_uses_actions_variables(world):
    gh, repo = client_from_env(
        {
            "GITHUB_TOKEN": "x",
            "GITHUB_REPOSITORY": world.fake.full_name,
            "GITHUB_API_URL": world.fake.base_url,
        }
    )
    assert repo == world.fake.full_name
    assert gh.get_repo(repo).url == world.fake.repo_api
    with pytest.raises(GithubError, match="GITHUB_TOKEN"):
        client_from_env({"GITHUB_REPOSITORY": "o/r"})
    with pytest.raises(GithubError, match="GITHUB_REPOSITORY"):
        client_from_env({"GITHUB_TOKEN": "x"})
    world.fake.assert_no_violations()


def test_sticky_status_comment_is_edited_in_place(world):
    world.push_branch("feature", {"a.txt": "1"}, "feature")
    number = world.fake.open_pull("feature")
    user_copy = world.fake.add_comment(number, f"quoting {status_marker('demo/a')}", "dev")
    forge = forge_for(world, op="demo/a", pr_number=number)
    forge.post_status("queued")
    forge.post_status("iteration 1")
    forge.post_status("iteration 1")  # unchanged text: no edit call
    mine = [c for c in world.fake.comments_on(number) if c.user == world.fake.token_login]
    assert len(mine) == 1 and mine[0].body == f"{status_marker('demo/a')}\niteration 1"
    assert world.fake.comments[user_copy.id].body.startswith(
        "quoting"
    )  # a user's comment is never edited
    assert len(world.fake.calls_to("issues/update-comment")) == 1
    forge_b = forge_for(world, op="demo/b", pr_number=number)
    forge_b.post_status("queued")
    assert set(forge.status_comments(number)) == {"demo/a", "demo/b"}
    world.fake.assert_no_violations()


def test_propose_is_idempotent_with_labels_and_codeowners_reviewers(world, tmp_path):
    world.push_branch(
        "tunebot/rms_norm", {"examples/demo/rms_norm/perf_opt/rms_norm.py": "x = 1\n"}, "best"
    )
    checkout = world.clone(tmp_path / "co")
    (checkout / "examples/demo/rms_norm").mkdir(parents=True, exist_ok=True)
    forge = forge_for(world, op="demo/rms_norm", checkout=checkout)
    first = forge.propose("tunebot/rms_norm", "main", "tunebot: rms_norm -12%", "report v1")
    second = forge.propose("tunebot/rms_norm", "main", "tunebot: rms_norm -15%", "report v2")
    assert first.id == second.id and len(world.fake.pulls) == 1
    pr = world.fake.pulls[int(first.id)]
    assert (
        pr.title == "tunebot: rms_norm -15%"
        and pr.body.startswith("report v2")
        and "/tune help" in pr.body
    )
    assert pr.labels == ["tunebot"]
    assert pr.requested_reviewers == [
        "kernel-owner"
    ]  # the last matching CODEOWNERS rule; teams skipped
    assert len(world.fake.calls_to("pulls/request-reviewers")) == 1
    assert forge.find_proposal("tunebot/rms_norm").id == first.id
    assert forge.find_proposal("tunebot/other") is None
    world.fake.assert_no_violations()


def test_reviewers_from_config_win_over_codeowners(world, tmp_path):
    world.push_branch("tunebot/a", {"f": "1"}, "best")
    forge = forge_for(
        world,
        settings=GithubSettings(reviewers=("alice", "bob"), labels=("perf", "tunebot")),
        checkout=tmp_path,
    )
    proposal = forge.propose("tunebot/a", "main", "t", "b", labels=["extra"])
    pr = world.fake.pulls[int(proposal.id)]
    assert pr.requested_reviewers == ["alice", "bob"]
    assert pr.labels == ["perf", "tunebot", "extra"]
    world.fake.assert_no_violations()


def test_codeowners_rules():
    text = (
        "# comment\n*.py @py\n/examples/ @ex\nexamples/demo/rms_norm/ @rms @org/team\ndocs/ @docs\n"
    )
    assert codeowners_for(text, ["examples/demo/rms_norm/"]) == ["rms"]
    assert codeowners_for(text, ["examples/other/"]) == ["ex"]
    assert codeowners_for(text, ["src/"]) == []


def test_permission_uses_role_name(world):
    for login, role in {
        "adm": "admin",
        "mnt": "maintain",
        "wr": "write",
        "tri": "triage",
        "rd": "read",
    }.items():
        world.fake.set_permission(login, role)
    forge = forge_for(world)
    assert [forge.permission(u) for u in ("adm", "mnt", "wr", "tri", "rd", "stranger")] == [
        "admin",
        "maintain",
        "write",
        "triage",
        "read",
        "none",
    ]
    world.fake.assert_no_violations()


def test_5xx_is_retried_with_backoff(world):
    world.push_branch("feature", {"a": "1"}, "f")
    number = world.fake.open_pull("feature")
    forge = forge_for(world, op="demo/a", pr_number=number)
    forge.repo  # noqa: B018 - load before injecting
    world.fake.inject(502, r"^GET .*/issues/\d+/comments", times=2)
    forge.post_status("queued")
    assert forge.waits == [1.0, 2.0]
    assert len(world.fake.comments_on(number)) == 1
    world.fake.assert_no_violations()


def test_rate_limits_honour_retry_after_and_reset_capped(world):
    world.push_branch("feature", {"a": "1"}, "f")
    number = world.fake.open_pull("feature")
    forge = forge_for(world, pr_number=number, retry=RetryPolicy(attempts=4, max_wait_s=30))
    forge.repo  # noqa: B018
    world.fake.inject(429, "collaborators", headers={"Retry-After": "7"})
    world.fake.inject(
        403,
        "collaborators",
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)},
    )
    world.fake.set_permission("dev", "write")
    assert forge.permission("dev") == "write"
    assert forge.waits == [7.0, 30.0]  # Retry-After as given; the reset an hour away is capped
    world.fake.assert_no_violations()


def test_persistent_failure_gives_clear_error_and_403_is_not_retried(world):
    forge = forge_for(world, retry=RetryPolicy(attempts=3))
    world.fake.inject(503, "GET /repos", times=3)
    with pytest.raises(GithubError, match="503"):
        forge.repo  # noqa: B018
    assert len(forge.waits) == 2
    other = forge_for(world)
    world.fake.inject(403, "GET /repos", message="Resource not accessible by integration")
    with pytest.raises(GithubError, match="lacks a permission"):
        other.repo  # noqa: B018
    assert other.waits == []
    world.fake.assert_no_violations()


def _proposal_with_iterations(world: World) -> tuple[int, str]:
    world.push_branch("tunebot/rms_norm/v1", {"v": "1"}, "v1")
    world.push_branch("tunebot/rms_norm/v2", {"v": "2"}, "v2", start="tunebot/rms_norm/v1")
    world.push_branch("tunebot/rms_norm/vx", {"v": "x"}, "not an iteration")
    world.push_branch("tunebot/rms_norm_other/v1", {"o": "1"}, "other op")
    sha = world.push_branch(
        "tunebot/rms_norm/best", {"best": "2"}, "deliver", start="tunebot/rms_norm/v2"
    )
    world.fake.set_permission("lead", "maintain")
    world.fake.set_permission("reader", "read")
    return world.fake.open_pull(
        "tunebot/rms_norm/best", user=world.fake.token_login, title="tunebot: rms_norm"
    ), sha


def test_gate_refuses_approval_on_an_old_sha_then_merges_on_current(world):
    number, old = _proposal_with_iterations(world)
    world.fake.add_review(number, "lead", "APPROVED", commit_id=old)
    new = world.push_branch("tunebot/rms_norm/best", {"best": "3"}, "amended")
    forge = forge_for(world)
    with pytest.raises(GateRefused) as info:
        forge.merge(str(number))
    assert info.value.exit_code == 3
    assert any(old[:10] in m and "re-approve" in m for m in info.value.missing)
    assert not world.fake.calls_to("pulls/merge")
    world.fake.add_review(number, "lead", "APPROVED", commit_id=new)
    world.fake.add_check_run(new, "ci", "success")
    merged = forge.merge(str(number))
    assert merged.state == "merged"
    (call,) = world.fake.calls_to("pulls/merge")
    assert call.body["sha"] == new
    branches = world.fake.branches()
    assert "tunebot/rms_norm/v1" not in branches and "tunebot/rms_norm/v2" not in branches
    assert {"tunebot/rms_norm/vx", "tunebot/rms_norm_other/v1", "tunebot/rms_norm/best"} <= set(
        branches
    )
    assert world.fake.git("merge-base", "--is-ancestor", new, "refs/heads/main", check=False) == ""
    assert world.fake.git("rev-parse", "main") == world.fake.pulls[number].merge_commit_sha
    world.fake.assert_no_violations()


@pytest.mark.parametrize(
    "setup, fragment",
    [
        (
            lambda f, n, sha: f.add_review(n, "reader", "APPROVED", sha),
            "no approval on the current head",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                f.add_review(n, "dev2", "CHANGES_REQUESTED", sha),
            ),
            "changes requested by @dev2",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                f.add_check_run(sha, "ci", "failure"),
            ),
            "check `ci` concluded failure",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                f.add_check_run(sha, "ci", None, "in_progress"),
            ),
            "check `ci` is in_progress",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                setattr(f.pulls[n], "mergeable", False),
            ),
            "not mergeable",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                f.pulls[n].labels.append(STALE_LABEL),
            ),
            "stale",
        ),
        (
            lambda f, n, sha: (
                f.add_review(n, "lead", "APPROVED", sha),
                f.add_review(n, "lead", "DISMISSED", sha),
            ),
            "no approval",
        ),
    ],
)
def test_gate_names_the_missing_gate_and_never_merges(world, setup, fragment):
    number, sha = _proposal_with_iterations(world)
    world.fake.set_permission("dev2", "write")
    setup(world.fake, number, sha)
    with pytest.raises(GateRefused) as info:
        forge_for(world).merge(str(number))
    assert any(fragment in m for m in info.value.missing), info.value.missing
    assert not world.fake.calls_to("pulls/merge")
    assert "tunebot/rms_norm/v1" in world.fake.branches()
    world.fake.assert_no_violations()


def test_head_moving_between_gate_and_merge_is_refused_by_sha(world):
    number, sha = _proposal_with_iterations(world)
    world.fake.add_review(number, "lead", "APPROVED", sha)
    world.fake.add_check_run(sha, "ci", "success")
    forge = forge_for(world)
    # The head moves after the gate read it and before the merge call arrives: `sha=` catches it.
    world.fake.before["pulls/merge"] = lambda: world.push_branch(
        "tunebot/rms_norm/best", {"best": "late"}, "late push"
    )
    with pytest.raises(GateRefused, match="modified"):
        forge.merge(str(number))
    assert world.fake.pulls[number].merged is False
    world.fake.assert_no_violations()


def test_the_fake_reports_requests_and_answers_that_break_the_spec(world):
    """The checker itself can fail: bad path, query and body are all caught."""
    import json
    import urllib.error
    import urllib.request

    def send(method: str, path: str, body: object = None) -> int:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(world.fake.base_url + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    repo = f"/repos/{world.fake.full_name}"
    send("GET", f"{repo}/pulls?colour=blue")
    send("GET", f"{repo}/pulls?per_page=lots")
    send("POST", f"{repo}/issues/comments/1/reactions", {"content": "party"})
    send("GET", f"{repo}/pulls/abc")
    send("GET", f"{repo}/no/such/thing")
    text = "\n".join(world.fake.violations)
    assert "undeclared query parameter 'colour'" in text
    assert "query per_page" in text
    assert "'party' is not one of" in text
    assert "path pull_number" in text
    assert "no such operation" in text
    with pytest.raises(AssertionError, match="spec violations"):
        world.fake.assert_no_violations()


def test_regenerate_cut_keeps_every_reference_it_needs():
    import importlib.util
    import json
    from pathlib import Path

    here = Path(__file__).parent / "fakegithub"
    spec_obj = importlib.util.spec_from_file_location(
        "regenerate_spec", here / "regenerate_spec.py"
    )
    regen = importlib.util.module_from_spec(spec_obj)
    spec_obj.loader.exec_module(regen)
    committed = json.loads((here / "openapi.json").read_text())
    again = regen.cut(committed, regen.OPERATIONS, list(regen.WEBHOOKS))
    assert again["paths"] == committed["paths"] and again["components"] == committed["components"]
    assert committed["info"]["version"] in (here / "SOURCE.md").read_text()
    assert "MIT" in (here / "SOURCE.md").read_text()
    ops = {(m, p) for p, item in committed["paths"].items() for m in item if m != "parameters"}
    assert ops == set(regen.OPERATIONS)
    assert (here / "openapi.json").stat().st_size < 2_000_000


def test_unreachable_api_is_retried_then_explained(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    forge = GithubForge(
        make_client("t", f"http://127.0.0.1:{port}"),
        "o/r",
        retry=RetryPolicy(attempts=3),
        sleep=sleeps.append,
    )
    with pytest.raises(GithubError, match="cannot reach"):
        forge.repo  # noqa: B018
    assert sleeps == [1.0, 2.0]


def test_gate_skips_its_own_in_progress_check_run_and_reads_every_page(world):
    number, sha = _proposal_with_iterations(world)
    world.fake.add_review(number, "lead", "APPROVED", sha)
    for i in range(120):  # more than one page of 100
        world.fake.add_check_run(sha, f"matrix-{i}", "success")
    world.fake.add_check_run(
        sha, "merge gate", None, "in_progress", run_id=555
    )  # the job running this gate
    world.fake.add_check_run(sha, "other workflow", None, "in_progress", run_id=777)
    forge = forge_for(
        world, run_url=f"{world.fake.base_url}/html/{world.fake.full_name}/actions/runs/555"
    )
    with pytest.raises(GateRefused) as info:
        forge.merge(str(number))
    assert info.value.missing == [
        "check `other workflow` is in_progress"
    ]  # found on page 2; ours skipped
    assert [c.query.get("page") for c in world.fake.calls_to("checks/list-for-ref")] == [
        ["1"],
        ["2"],
    ]
    world.fake.check_runs[sha] = [r for r in world.fake.check_runs[sha] if r["run_id"] != 777]
    world.fake.check_runs[sha][-5]["conclusion"] = "failure"
    with pytest.raises(GateRefused, match="matrix-116` concluded failure"):
        forge.merge(str(number))
    world.fake.check_runs[sha][-5]["conclusion"] = "success"
    assert forge.merge(str(number)).state == "merged"
    world.fake.assert_no_violations()


def test_gate_skips_its_own_job_by_name_without_a_run_url(world):
    number, sha = _proposal_with_iterations(world)
    world.fake.add_review(number, "lead", "APPROVED", sha)
    world.fake.add_check_run(sha, "ci", "success")
    world.fake.add_check_run(sha, "merge gate", None, "in_progress")
    assert forge_for(world).checks(sha) == ["check `merge gate` is in_progress"]
    assert forge_for(world, own_checks=("merge gate",)).merge(str(number)).state == "merged"
    world.fake.assert_no_violations()


def test_no_ci_at_all_is_refused_unless_opted_in_and_required_checks_must_run(world):
    number, sha = _proposal_with_iterations(world)
    world.fake.add_review(number, "lead", "APPROVED", sha)
    world.fake.set_permission("lead", "maintain")
    world.fake.statuses[sha] = [
        {"state": "success", "context": "tunebot", "description": "", "target_url": None}
    ]
    with pytest.raises(GateRefused, match="no CI ran on the proposal head") as info:
        forge_for(world).merge(str(number))
    assert "github.required_checks" in str(info.value)
    required = forge_for(world, settings=GithubSettings(required_checks=("ci", "lint")))
    world.fake.add_check_run(sha, "ci", "success")
    assert required.checks(sha) == [f"required check `lint` did not run on `{sha[:10]}`"]
    world.fake.statuses[sha].append(
        {"state": "failure", "context": "lint", "description": "", "target_url": None}
    )
    assert required.checks(sha) == ["status `lint` is failure"]
    world.fake.check_runs.clear()
    world.fake.statuses[sha] = []
    assert (
        forge_for(world, settings=GithubSettings(allow_no_checks=True)).merge(str(number)).state
        == "merged"
    )
    world.fake.assert_no_violations()
