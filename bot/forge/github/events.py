"""GitHub event payloads -> Requests: what each event asks, who may ask it, which ops it names.

`requests_from_event` is pure: no network (the command grammar is in `grammar`).
`authorize` asks the forge (the collaborator-permission API, never `author_association`)
and pins the pull request's head SHA at that moment: the tune works on exactly that SHA.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

from bot.config.schema import GithubSettings
from bot.errors import OpNotFound
from bot.forge.github.grammar import (
    OP_NAME,
    CommandError,
    TuneCommand,
    command_lines,
    parse_command,
)
from bot.forge.github.types import PullInfo, role_allows

Kind = Literal["tune", "status", "cancel", "help", "invalid", "review", "scheduled", "ignored"]


@dataclass(frozen=True)
class Request:
    """One thing an event asks the bot to do (or why it does nothing)."""

    kind: Kind
    event: str
    repo: str = ""  # owner/name
    pr: int | None = None
    comment_id: int | None = None
    actor: str | None = None
    command: TuneCommand | None = None
    reason: str = ""  # ignored: why; invalid: the reply
    review_state: str | None = None  # upper-case REST spelling (APPROVED, CHANGES_REQUESTED, ...)
    review_sha: str | None = None
    head_ref: str | None = None  # review events: the PR's head branch
    ops: tuple[str, ...] = ()  # scheduled / dispatch: ops asked for in the inputs
    task: str = "tune"  # scheduled / dispatch: tune | refresh-features
    index: int = 0  # which command of the comment (one comment may hold several /tune lines)


@dataclass(frozen=True)
class Authorization:
    allowed: bool
    reason: str
    actor: str
    role: str = "none"
    pull: PullInfo | None = None

    @property
    def head_sha(self) -> str | None:
        return self.pull.head_sha if self.pull else None


class PermissionSource(Protocol):
    def permission(self, login: str) -> str: ...

    def pull_info(self, number: int) -> PullInfo: ...


# ---------------------------------------------------------------- payloads -> requests


def is_bot(user: dict | None) -> bool:
    user = user or {}
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


def requests_from_event(event_name: str, payload: dict) -> list[Request]:
    """What an event asks for. Pure: no network. Unknown events give one `ignored` request."""
    repo = (payload.get("repository") or {}).get("full_name", "")
    if event_name == "issue_comment":
        return _from_comment(payload, repo)
    if event_name == "pull_request_review":
        return [_from_review(payload, repo)]
    if event_name in ("schedule", "workflow_dispatch"):
        inputs = payload.get("inputs") or {}
        ops = tuple(str(inputs.get("ops") or "").split())
        bad = [op for op in ops if not OP_NAME.match(op)]
        task = str(inputs.get("task") or "tune")
        if bad or task not in ("tune", "refresh-features"):
            problem = (
                f"`{bad[0][:60]}` is not an op name"
                if bad
                else f"unknown task `{task[:40]}` (tune | refresh-features)"
            )
            return [Request("invalid", event_name, repo, reason=problem)]
        return [
            Request(
                "scheduled",
                event_name,
                repo,
                ops=ops,
                task=task,
                actor=(payload.get("sender") or {}).get("login"),
            )
        ]
    return [Request("ignored", event_name, repo, reason=f"event `{event_name}` is not handled")]


def _from_comment(payload: dict, repo: str) -> list[Request]:
    event = "issue_comment"
    action = payload.get("action")
    if action != "created":
        return [
            Request(
                "ignored", event, repo, reason=f"comment {action}: only new comments are commands"
            )
        ]
    issue = payload.get("issue") or {}
    comment = payload.get("comment") or {}
    user = comment.get("user") or {}
    base = Request(
        "ignored",
        event,
        repo,
        pr=issue.get("number"),
        comment_id=comment.get("id"),
        actor=user.get("login"),
    )
    if not issue.get("pull_request"):
        return [replace(base, reason="comment on an issue, not a pull request")]
    if is_bot(user) or is_bot(payload.get("sender")):
        return [replace(base, reason=f"comment by a bot ({user.get('login')})")]
    lines = command_lines(str(comment.get("body") or ""))
    if not lines:
        return [replace(base, reason="no /tune command in the comment")]
    out = []
    for index, line in enumerate(lines):
        try:
            cmd = parse_command(line)
        except CommandError as exc:
            out.append(replace(base, kind="invalid", reason=str(exc), index=index))
            continue
        out.append(replace(base, kind=cmd.action, command=cmd, index=index))
    return out


def _from_review(payload: dict, repo: str) -> Request:
    event = "pull_request_review"
    review = payload.get("review") or {}
    pr = payload.get("pull_request") or {}
    base = Request(
        "ignored", event, repo, pr=pr.get("number"), actor=(review.get("user") or {}).get("login")
    )
    if payload.get("action") != "submitted":
        return replace(base, reason=f"review {payload.get('action')}: only submitted reviews")
    # Webhooks spell states in lower case (`approved`), REST in upper case (`APPROVED`).
    state = str(review.get("state") or "").upper()
    head_ref = (pr.get("head") or {}).get("ref")
    return replace(
        base,
        kind="review",
        review_state=state,
        review_sha=review.get("commit_id"),
        head_ref=head_ref,
    )


# ---------------------------------------------------------------- authorization


def fork_refusal(pull: PullInfo) -> str:
    head = pull.head_repo or "a deleted fork"
    return (
        f"This pull request's head is in a fork ({head}). tunebot runs the code it tunes on self-hosted "
        "accelerator runners, which must never run code from forks.\n\n"
        "What a maintainer can do: review the change, then push it to a branch of this repository "
        f"(`git fetch origin pull/{pull.number}/head:tune/pr-{pull.number} && git push origin tune/pr-{pull.number}`), "
        "open a pull request from that branch and comment `/tune <op>` there."
    )


def authorize(
    request: Request, source: PermissionSource, settings: GithubSettings, self_hosted: bool = True
) -> Authorization:
    """May `request.actor` run `/tune` on `request.pr`? Pins the PR head SHA seen now."""
    actor = request.actor or ""
    if request.pr is None:
        return Authorization(False, "no pull request in the event", actor)
    role = source.permission(actor) if actor else "none"
    if not role_allows(role, settings.min_permission):
        return Authorization(
            False,
            f"@{actor} has `{role}` access; `/tune` needs `{settings.min_permission}` or higher on this repository "
            "(setting `github.min_permission` in .tunebot.yml).",
            actor,
            role,
        )
    pull = source.pull_info(request.pr)
    if pull.state != "open" or pull.merged:
        return Authorization(
            False,
            f"pull request #{pull.number} is {'merged' if pull.merged else pull.state}; nothing to tune.",
            actor,
            role,
            pull,
        )
    if pull.from_fork and self_hosted:
        return Authorization(False, fork_refusal(pull), actor, role, pull)
    return Authorization(True, "authorized", actor, role, pull)


# ---------------------------------------------------------------- ops


@dataclass
class OpCheck:
    resolved: dict[str, str] = field(default_factory=dict)  # as typed -> project/op
    problems: list[str] = field(default_factory=list)

    def by_op(self) -> dict[str, tuple[str, ...]]:
        """project/op -> every name it was asked by (`rms_norm demo/rms_norm` is one op, tuned once)."""
        out: dict[str, tuple[str, ...]] = {}
        for typed, op in self.resolved.items():
            out[op] = (*out.get(op, ()), typed)
        return out


def check_ops(repo_root: Path, ops: tuple[str, ...]) -> OpCheck:
    """Resolve op names against the repository's ops (bot.config); unknown ones list candidates."""
    from bot.config.discovery import resolve_op
    from bot.config.repo import load_repo_config

    cfg = load_repo_config(repo_root)
    out = OpCheck()
    for name in ops:
        if not OP_NAME.match(name):
            out.problems.append(f"`{name[:60]}` is not an op name")
            continue
        try:
            out.resolved[name] = resolve_op(repo_root, cfg, name).qualified
        except OpNotFound as exc:
            from bot.model.targets import model_in_tree  # a model target (docs/model.md)

            model = model_in_tree(repo_root, cfg.ops_root, name)
            if model:
                out.resolved[name] = model
            else:
                out.problems.append(str(exc))
    return out
