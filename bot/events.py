"""GitHub event payloads -> Requests: the `/tune` grammar, authorization, fork and SHA rules.

Parsing (`parse_command`, `requests_from_event`) is pure: no network, no shell. Untrusted
text from comments is only ever split on whitespace and matched against strict patterns;
it never reaches a shell or a path outside the repository's ops.

`authorize` asks the forge (the collaborator-permission API, never `author_association`)
and pins the pull request's head SHA at that moment: the tune works on exactly that SHA.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from bot.config.schema import GithubSettings
from bot.errors import OpNotFound, TunebotError

GRAMMAR = """\
/tune <op> [<op>...] [--max-iters N] [--target-us X] [--strategies a,b]
/tune status
/tune cancel
/tune help
(ASCII only: plain spaces, digits 0-9; at most 3 commands per comment)"""

HELP = f"""\
**tunebot commands** (comment on a pull request; needs write permission or higher):

```
{GRAMMAR}
```

- `<op>`: an op of this repository, `<op>` or `<project>/<op>` (e.g. `rms_norm`).
- `--max-iters N`: stop after N iterations (1-100). `--target-us X`: stop once latency <= X us.
- `--strategies a,b`: only try these strategies (catalog names).
- `status`: where the runs of this pull request are. `cancel`: stop them after the current iteration.
- Commands are read as ASCII: separate words with plain spaces, write numbers with the digits 0-9.
  At most 3 commands per comment; the bot answers each comment once.
"""

# Op names: `op` or `project/op`; each part starts with a letter, digit or underscore, so
# `.`/`..` segments, absolute paths and shell metacharacters can never pass.
OP_NAME = re.compile(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$", re.ASCII
)
STRATEGY_NAME = re.compile(r"^[a-z0-9_][a-z0-9_-]{0,63}$", re.ASCII)
MAX_OPS = 8
MAX_COMMANDS = 3  # per comment: bounds the API calls one comment can cause
ASCII_BLANK = re.compile(r"[ \t]+")
ROLE_RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}

Action = Literal["tune", "status", "cancel", "help"]
Kind = Literal["tune", "status", "cancel", "help", "invalid", "review", "scheduled", "ignored"]


class CommandError(TunebotError):
    """A `/tune` line that does not follow the grammar; the message is the reply."""

    exit_code = 2

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"{problem}\n\nUsage:\n{GRAMMAR}")


@dataclass(frozen=True)
class TuneCommand:
    action: Action
    ops: tuple[str, ...] = ()
    max_iters: int | None = None
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None


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
class PullInfo:
    number: int
    state: str
    head_sha: str
    head_ref: str
    head_repo: str | None  # None: the fork was deleted
    base_ref: str
    base_repo: str
    author: str
    merged: bool = False

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.base_repo


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


# ---------------------------------------------------------------- the grammar


def _option_value(name: str, tokens: list[str], i: int) -> tuple[str, int]:
    token = tokens[i]
    if "=" in token:
        return token.split("=", 1)[1], i + 1
    if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
        raise CommandError(f"`{name}` needs a value")
    return tokens[i + 1], i + 2


def parse_command(line: str) -> TuneCommand:
    """Parse one `/tune ...` line (ASCII only); raises CommandError with a helpful message."""
    for column, char in enumerate(line, 1):
        if not (char.isascii() and (char.isprintable() or char == "\t")):
            name = unicodedata.name(char, "a control character")
            raise CommandError(
                f"only ASCII is read: column {column} holds U+{ord(char):04X} ({name}); "
                "type plain spaces and the digits 0-9"
            )
    tokens = [t for t in ASCII_BLANK.split(line.strip(" \t")) if t]
    if not tokens or tokens[0] != "/tune":
        raise CommandError("a command starts with `/tune`")
    args = tokens[1:]
    if not args:
        raise CommandError("`/tune` needs an op name or one of status, cancel, help")
    if args[0] in ("status", "cancel", "help"):
        if len(args) > 1:
            raise CommandError(
                f"`/tune {args[0]}` takes no arguments (got `{' '.join(args[1:])[:60]}`)"
            )
        return TuneCommand(args[0])  # type: ignore[arg-type]
    ops: list[str] = []
    max_iters: int | None = None
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None
    i = 0
    while i < len(args):
        token = args[i]
        name = token.split("=", 1)[0]
        if name == "--max-iters":
            value, i = _option_value(name, args, i)
            if not re.fullmatch(r"[0-9]{1,3}", value) or not 1 <= int(value) <= 100:
                raise CommandError(
                    f"`--max-iters` must be a whole number from 1 to 100 (got `{value[:20]}`)"
                )
            max_iters = int(value)
        elif name == "--target-us":
            value, i = _option_value(name, args, i)
            if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,6})?", value) or float(value) <= 0:
                raise CommandError(
                    f"`--target-us` must be a positive number of microseconds (got `{value[:20]}`)"
                )
            target_us = float(value)
        elif name == "--strategies":
            value, i = _option_value(name, args, i)
            names = tuple(s for s in value.split(",") if s)
            bad = [s for s in names if not STRATEGY_NAME.match(s)]
            if not names or bad:
                raise CommandError(
                    f"`--strategies` takes comma-separated strategy names (bad: `{(bad or [value])[0][:40]}`)"
                )
            strategies = names
        elif token.startswith("-"):
            raise CommandError(f"unknown option `{token[:40]}`")
        else:
            if not OP_NAME.match(token):
                raise CommandError(
                    f"`{token[:60]}` is not an op name (use `<op>` or `<project>/<op>`)"
                )
            if token not in ops:
                ops.append(token)
            i += 1
    if not ops:
        raise CommandError("name at least one op to tune, e.g. `/tune rms_norm`")
    if len(ops) > MAX_OPS:
        raise CommandError(f"at most {MAX_OPS} ops per command (got {len(ops)})")
    return TuneCommand("tune", tuple(ops), max_iters, target_us, strategies)


def command_lines(body: str) -> list[str]:
    """The lines of a comment that are commands (start with `/tune`, outside code blocks).

    `/tune` followed by anything but a letter, digit, `_` or `-` starts a command, so `/tune`
    followed by a no-break space is a command (answered: ASCII only), never silently skipped.
    """
    lines, fenced = [], False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.startswith("/tune") and not re.match(r"[A-Za-z0-9_-]", line[5:6]):
            lines.append(line)
    return lines


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
    base = dict(
        event=event,
        repo=repo,
        pr=issue.get("number"),
        comment_id=comment.get("id"),
        actor=user.get("login"),
    )
    if not issue.get("pull_request"):
        return [Request("ignored", reason="comment on an issue, not a pull request", **base)]
    if is_bot(user) or is_bot(payload.get("sender")):
        return [Request("ignored", reason=f"comment by a bot ({user.get('login')})", **base)]
    lines = command_lines(str(comment.get("body") or ""))
    if not lines:
        return [Request("ignored", reason="no /tune command in the comment", **base)]
    out = []
    for index, line in enumerate(lines):
        try:
            cmd = parse_command(line)
        except CommandError as exc:
            out.append(Request("invalid", reason=str(exc), index=index, **base))
            continue
        out.append(Request(cmd.action, command=cmd, index=index, **base))
    return out


def _from_review(payload: dict, repo: str) -> Request:
    event = "pull_request_review"
    review = payload.get("review") or {}
    pr = payload.get("pull_request") or {}
    base = dict(
        event=event, repo=repo, pr=pr.get("number"), actor=(review.get("user") or {}).get("login")
    )
    if payload.get("action") != "submitted":
        return Request(
            "ignored", reason=f"review {payload.get('action')}: only submitted reviews", **base
        )
    # Webhooks spell states in lower case (`approved`), REST in upper case (`APPROVED`).
    state = str(review.get("state") or "").upper()
    head_ref = (pr.get("head") or {}).get("ref")
    return Request(
        "review", review_state=state, review_sha=review.get("commit_id"), head_ref=head_ref, **base
    )


# ---------------------------------------------------------------- authorization


def role_allows(role: str, minimum: str) -> bool:
    return ROLE_RANK.get(role, 0) >= ROLE_RANK.get(minimum, ROLE_RANK["write"])


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
            from bot.model.loop import model_in_tree  # a model target (docs/model.md)

            model = model_in_tree(repo_root, cfg.ops_root, name)
            if model:
                out.resolved[name] = model
            else:
                out.problems.append(str(exc))
    return out
