"""A comment's `/tune` commands: one reply per comment, authorization asked once, one handler per command.

API calls per comment are bounded (docs/github.md, "API budget"): a comment holds at most
MAX_COMMANDS commands, is authorized once, and all its answers share one reply.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from bot.errors import TunebotError
from bot.forge.github import tune
from bot.forge.github.comments import CANCEL_MARKER, status_marker
from bot.forge.github.context import Context, Outcome
from bot.forge.github.events import Authorization, Request, authorize
from bot.forge.github.grammar import GRAMMAR, HELP, MAX_COMMANDS
from bot.forge.github.status import failure_text


class Replies:
    """Everything the bot says in answer to one comment, posted as that comment's one reply."""

    def __init__(self, ctx: Context, req: Request) -> None:
        self.ctx, self.req = ctx, req
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def post(self) -> None:
        if self.parts and self.req.pr is not None:
            text = "\n\n---\n\n".join(self.parts)
            self.ctx.forge.comments.reply(self.req.pr, self.req.comment_id, text, 0)


def handle_comment(requests: list[Request], ctx: Context) -> list[Outcome]:
    """Every command of one comment; the comment gets one reply whatever happens."""
    first = requests[0]
    replies = Replies(ctx, first)
    try:
        if first.comment_id is not None and ctx.flow.phase in ("all", "gate"):
            ctx.forge.comments.react(first.comment_id, "eyes")  # acknowledge within seconds
        outcomes = _commands(requests, ctx, replies)
    except TunebotError as exc:
        # An API failure before anything ran (reaction, permission, the PR's head): say so where
        # the user looks, if GitHub lets us, and end with a failure the workflow shows.
        what = failure_text(exc)
        replies.add(
            f"@{first.actor} tunebot could not handle this comment: {what}\n\nNothing was run; "
            "re-run the workflow or comment again."
        )
        code = getattr(exc, "exit_code", 1) or 1
        outcomes = [Outcome("failed", what, {"authorized": "false"}, exit_code=code)]
    try:
        replies.post()
    except TunebotError as exc:
        print(f"tunebot: could not post the reply: {exc}", file=sys.stderr)
    return outcomes


def _refusal(requests: list[Request]) -> tuple[str, list[Outcome]] | None:
    """Why the whole comment is answered without running anything (too many, unreadable, two tunes)."""
    actor = requests[0].actor
    if len(requests) > MAX_COMMANDS:
        text = (
            f"@{actor} one comment may hold at most {MAX_COMMANDS} `/tune` commands (this one has "
            f"{len(requests)}); nothing was run. Put them in fewer commands: `/tune op1 op2 ...` takes up to 8 ops."
        )
        return text, [Outcome("replied", text)]
    invalid = [r for r in requests if r.kind == "invalid"]
    if invalid:
        problems = "\n".join(
            f"- command {r.index + 1}: {r.reason.split(chr(10))[0]}" for r in invalid
        )
        which = "that command" if len(requests) == 1 else "every command"
        text = (
            f"@{actor} I could not read {which}; nothing was run.\n{problems}\n\n"
            f"Usage (ASCII only):\n```\n{GRAMMAR}\n```\n`/tune help` explains each option."
        )
        return text, [Outcome("replied", r.reason) for r in requests]
    if sum(r.kind == "tune" for r in requests) > 1:
        text = (
            f"@{actor} one comment may start one tuning run; nothing was run. "
            "Name all the ops in one command: `/tune op1 op2 ...` (up to 8)."
        )
        return text, [Outcome("replied", text)]
    return None


def _commands(requests: list[Request], ctx: Context, replies: Replies) -> list[Outcome]:
    refused = _refusal(requests)
    if refused is not None:
        replies.add(refused[0])
        return refused[1]
    outcomes: list[Outcome] = []
    auth: Authorization | None = None
    for req in requests:
        if req.kind in OPEN_COMMANDS:
            outcomes.append(OPEN_COMMANDS[req.kind](req, ctx, replies))
            continue
        if auth is None:  # once per comment, whatever it holds
            auth = authorize(
                req, ctx.forge, ctx.flow.repo_cfg.github, self_hosted=ctx.flow.self_hosted
            )
            if not auth.allowed:
                replies.add(f"@{req.actor} {auth.reason}")
        if not auth.allowed:
            outcomes.append(Outcome("refused", auth.reason, {"authorized": "false"}))
            continue
        outcomes.append(AUTHORIZED_COMMANDS[req.kind](req, auth, ctx, replies))
    return outcomes


def _help(req: Request, ctx: Context, replies: Replies) -> Outcome:
    replies.add(HELP)
    return Outcome("replied", "help")


def _status(req: Request, ctx: Context, replies: Replies) -> Outcome:
    assert req.pr is not None
    comments = ctx.forge.comments.status_comments(req.pr)
    if not comments:
        text = "No tunebot runs on this pull request yet. Start one with `/tune <op>`."
    else:
        lines = []
        for op, body in sorted(comments.items()):
            heading = next((ln for ln in body.splitlines()[1:] if ln.strip()), "")
            lines.append(f"- `{op}`: {heading.lstrip('# ').strip()}")
        text = "Runs on this pull request (details in each status comment):\n" + "\n".join(lines)
    replies.add(text)
    return Outcome("replied", text)


def _cancel(req: Request, auth: Authorization, ctx: Context, replies: Replies) -> Outcome:
    """Mark every run's status comment; each run's loop sees the mark before its next iteration."""
    assert req.pr is not None
    comments = ctx.forge.comments.status_comments(req.pr)
    for op, body in comments.items():
        if CANCEL_MARKER not in body:
            text = body.split("\n", 1)[1] if "\n" in body else ""
            ctx.forge.comments.upsert(
                req.pr,
                status_marker(op),
                f"{text}\n\n{CANCEL_MARKER}\n**Cancel requested** by @{req.actor}: "
                "the run stops after its current iteration.",
            )
    text = f"Cancel requested for {', '.join(f'`{op}`' for op in sorted(comments)) or 'no runs'}."
    replies.add(text)
    return Outcome("replied", text)


def _tune(req: Request, auth: Authorization, ctx: Context, replies: Replies) -> Outcome:
    return tune.handle(req, auth, ctx, replies.add)


# Commands anyone may give (they only read), and those that need the permission `authorize` checks.
OPEN_COMMANDS: dict[str, Callable[[Request, Context, Replies], Outcome]] = {
    "help": _help,
    "status": _status,
}
AUTHORIZED_COMMANDS: dict[str, Callable[[Request, Authorization, Context, Replies], Outcome]] = {
    "cancel": _cancel,
    "tune": _tune,
}
