"""bot/events.py: the /tune grammar, payloads -> requests, authorization rules (pure parts)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fakegithub import spec

from bot.config.schema import GithubSettings
from bot.events import (
    CommandError,
    PullInfo,
    Request,
    TuneCommand,
    authorize,
    check_ops,
    command_lines,
    parse_command,
    requests_from_event,
    role_allows,
)

COMMENT = spec.webhook_template("issue_comment.pr.created.json")
REVIEW = spec.webhook_template("pull_request_review.approved.json")


def comment_payload(body: str, login: str = "dev", user_type: str = "User") -> dict:
    payload = copy.deepcopy(COMMENT)
    payload["comment"]["body"] = body
    payload["comment"]["user"].update(login=login, type=user_type)
    payload["sender"].update(login=login, type=user_type)
    return payload


def test_derived_webhook_payloads_match_the_spec():
    assert spec.validate(spec.webhook_schema("issue-comment-created"), COMMENT) == []
    assert spec.validate(spec.webhook_schema("pull-request-review-submitted"), REVIEW) == []
    assert COMMENT["issue"]["pull_request"]["url"].endswith(f"/pulls/{COMMENT['issue']['number']}")
    assert REVIEW["review"]["state"] == "approved"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("/tune rms_norm", TuneCommand("tune", ("rms_norm",))),
        (
            "/tune demo/rms_norm softmax --max-iters 4",
            TuneCommand("tune", ("demo/rms_norm", "softmax"), max_iters=4),
        ),
        (
            "/tune a --target-us=12.5 --strategies block_size,multi_buffer",
            TuneCommand("tune", ("a",), target_us=12.5, strategies=("block_size", "multi_buffer")),
        ),
        ("/tune a a", TuneCommand("tune", ("a",))),
        ("/tune status", TuneCommand("status")),
        ("/tune   cancel", TuneCommand("cancel")),
        ("/tune help", TuneCommand("help")),
    ],
)
def test_grammar_accepts(line, expected):
    assert parse_command(line) == expected


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("/tune", "needs an op name"),
        ("/tune --max-iters 3", "at least one op"),
        ("/tune a --max-iters", "needs a value"),
        ("/tune a --max-iters 0", "1 to 100"),
        ("/tune a --max-iters three", "1 to 100"),
        ("/tune a --target-us -1", "positive number"),
        ("/tune a --target-us 0", "positive number"),
        ("/tune a --strategies ,", "strategy names"),
        ("/tune a --strategies 'x;rm'", "strategy names"),
        ("/tune a --force", "unknown option"),
        ("/tune ../etc/passwd", "not an op name"),
        ("/tune /abs/op", "not an op name"),
        ("/tune a/b/c", "not an op name"),
        ("/tune $(reboot)", "not an op name"),
        ("/tune a;reboot", "not an op name"),
        ("/tune status now", "takes no arguments"),
        ("/tune " + " ".join(f"op{i}" for i in range(9)), "at most 8"),
    ],
)
def test_grammar_rejects_with_help(line, fragment):
    with pytest.raises(CommandError) as info:
        parse_command(line)
    message = str(info.value)
    assert fragment in message
    assert "/tune <op> [<op>...]" in message  # the grammar is always part of the reply
    assert info.value.exit_code == 2


def test_command_lines_skip_prose_and_code_blocks():
    body = "please\n/tune a\n```\n/tune b\n```\n  /tune c --max-iters 2\n/tuner x\nsee /tune d"
    assert command_lines(body) == ["/tune a", "/tune c --max-iters 2"]


def test_comment_on_pr_becomes_tune_request():
    (req,) = requests_from_event("issue_comment", comment_payload("/tune rms_norm --max-iters 3"))
    assert req.kind == "tune"
    assert req.pr == COMMENT["issue"]["number"] and req.comment_id == COMMENT["comment"]["id"]
    assert req.actor == "dev" and req.repo == COMMENT["repository"]["full_name"]
    assert req.command == TuneCommand("tune", ("rms_norm",), max_iters=3)


def test_malformed_command_becomes_invalid_with_reply_text():
    (req,) = requests_from_event(
        "issue_comment", comment_payload("/tune rms_norm --max-iters lots")
    )
    assert req.kind == "invalid"
    assert "--max-iters" in req.reason and "/tune help" in req.reason


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda p: p.update(action="edited"), "only new comments"),
        (lambda p: p["issue"].pop("pull_request"), "not a pull request"),
        (lambda p: p["comment"]["user"].update(type="Bot", login="ci[bot]"), "bot"),
        (lambda p: p["comment"].update(body="LGTM, thanks"), "no /tune"),
    ],
)
def test_comments_that_are_not_commands_are_ignored(mutate, reason):
    payload = comment_payload("/tune a")
    mutate(payload)
    (req,) = requests_from_event("issue_comment", payload)
    assert req.kind == "ignored" and reason in req.reason


def test_bot_login_without_type_is_still_a_bot():
    (req,) = requests_from_event(
        "issue_comment", comment_payload("/tune a", login="tunebot[bot]", user_type="User")
    )
    assert req.kind == "ignored"


def test_review_states_are_normalized_from_webhook_spelling():
    (req,) = requests_from_event("pull_request_review", REVIEW)
    assert req.kind == "review" and req.review_state == "APPROVED"
    assert req.review_sha == REVIEW["review"]["commit_id"]
    payload = copy.deepcopy(REVIEW)
    payload["review"]["state"] = "changes_requested"
    (req,) = requests_from_event("pull_request_review", payload)
    assert req.review_state == "CHANGES_REQUESTED"


def test_dispatch_inputs_are_validated():
    (req,) = requests_from_event(
        "workflow_dispatch", {"inputs": {"ops": "demo/a b"}, "repository": {"full_name": "o/r"}}
    )
    assert req.kind == "scheduled" and req.ops == ("demo/a", "b") and req.task == "tune"
    (bad,) = requests_from_event("workflow_dispatch", {"inputs": {"ops": "../x"}})
    assert bad.kind == "invalid" and "../x" in bad.reason
    (sched,) = requests_from_event("schedule", {"schedule": "0 3 * * *"})
    assert sched.kind == "scheduled" and sched.ops == ()
    (other,) = requests_from_event("push", {})
    assert other.kind == "ignored"


class Source:
    """A PermissionSource answering from dicts (the forge answers from the API)."""

    def __init__(self, roles: dict[str, str], pull: PullInfo) -> None:
        self.roles, self.pull, self.asked = roles, pull, []

    def permission(self, login: str) -> str:
        self.asked.append(login)
        return self.roles.get(login, "none")

    def pull_info(self, number: int) -> PullInfo:
        return self.pull


PULL = PullInfo(7, "open", "a" * 40, "feature", "o/r", "main", "o/r", "dev")


@pytest.mark.parametrize(
    "role, minimum, allowed",
    [
        ("admin", "write", True),
        ("maintain", "write", True),
        ("write", "write", True),
        ("triage", "write", False),
        ("read", "write", False),
        ("none", "write", False),
        ("write", "maintain", False),
        ("maintain", "maintain", True),
        ("admin", "admin", True),
    ],
)
def test_role_ranks(role, minimum, allowed):
    assert role_allows(role, minimum) is allowed


def test_authorize_pins_head_sha_and_refuses_low_permission():
    req = Request(
        "tune", "issue_comment", "o/r", pr=7, actor="dev", command=TuneCommand("tune", ("a",))
    )
    ok = authorize(req, Source({"dev": "write"}, PULL), GithubSettings())
    assert ok.allowed and ok.head_sha == "a" * 40
    no = authorize(req, Source({"dev": "read"}, PULL), GithubSettings())
    assert not no.allowed and "`read`" in no.reason and "github.min_permission" in no.reason
    strict = authorize(req, Source({"dev": "write"}, PULL), GithubSettings(min_permission="admin"))
    assert not strict.allowed


def test_authorize_refuses_fork_heads_on_self_hosted_runners():
    fork = PullInfo(7, "open", "b" * 40, "feature", "someone/r", "main", "o/r", "someone")
    req = Request("tune", "issue_comment", "o/r", pr=7, actor="dev")
    refused = authorize(req, Source({"dev": "admin"}, fork), GithubSettings(), self_hosted=True)
    assert not refused.allowed and "fork" in refused.reason and "git push origin" in refused.reason
    assert authorize(
        req, Source({"dev": "admin"}, fork), GithubSettings(), self_hosted=False
    ).allowed
    gone = PullInfo(7, "open", "b" * 40, "feature", None, "main", "o/r", "someone")
    assert not authorize(req, Source({"dev": "admin"}, gone), GithubSettings()).allowed


def test_authorize_refuses_closed_pull_requests():
    closed = PullInfo(7, "closed", "a" * 40, "feature", "o/r", "main", "o/r", "dev")
    req = Request("tune", "issue_comment", "o/r", pr=7, actor="dev")
    result = authorize(req, Source({"dev": "admin"}, closed), GithubSettings())
    assert not result.allowed and "closed" in result.reason


def test_check_ops_resolves_against_the_repository(tmp_path: Path):
    op_dir = tmp_path / "examples" / "demo" / "rms_norm"
    op_dir.mkdir(parents=True)
    (op_dir / "rms_norm.py").write_text("BLOCK = 4\n")
    (op_dir / "tune.yaml").write_text(json.dumps({"knobs": []}))
    checked = check_ops(tmp_path, ("rms_norm", "nope", "../x"))
    assert checked.resolved == {"rms_norm": "demo/rms_norm"}
    assert any("nope" in p and "demo/rms_norm" in p for p in checked.problems)
    assert any("../x" in p for p in checked.problems)


def test_check_ops_groups_names_of_the_same_op(tmp_path: Path):
    op_dir = tmp_path / "examples" / "demo" / "rms_norm"
    op_dir.mkdir(parents=True)
    (op_dir / "rms_norm.py").write_text("BLOCK = 4\n")
    (op_dir / "tune.yaml").write_text(json.dumps({"knobs": []}))
    checked = check_ops(tmp_path, ("rms_norm", "demo/rms_norm"))
    assert checked.by_op() == {"demo/rms_norm": ("rms_norm", "demo/rms_norm")}  # tuned once
