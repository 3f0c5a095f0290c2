"""The GitHub flow: one event in, the bot's answer out. A router: one handler per request kind.

Phases match the workflow's jobs: `gate` runs on a hosted runner with only the default
branch's code: it reacts, authorizes, pins the head SHA, posts "queued" and plans the matrix
(one job per op); `tune` runs on a self-hosted runner with the PR checked out at exactly that
SHA (`only_op`: the matrix job's op); `report` runs after all tune jobs and aggregates them;
`all` does gate and tune in one process (tests, single-machine installs).

A comment gets at most one reply (`commands`); a run's records and branches live on the remote
(bot.remote_runs), so a re-run on another runner resumes or recognises a delivered run; every
push goes through bot.git.isolated (explicit URL, private git dir), never the PR checkout's git.
The forge is built once per event, from the FlowConfig (`context`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from github import Github

from bot.forge.github import review, scheduled
from bot.forge.github.commands import handle_comment
from bot.forge.github.context import Context, FlowConfig, Outcome, TuneFn
from bot.forge.github.events import Request, requests_from_event
from bot.run.request import RunOutcome


def _default_tune(*args: Any, **kwargs: Any) -> RunOutcome:
    """The state machine of an op or a model target (docs/model.md)."""
    from bot.run.machine import run_tune

    return run_tune(*args, **kwargs)


def handle_event(
    event_name: str,
    payload: dict[str, Any],
    gh: Github,
    flow: FlowConfig,
    tune: TuneFn = _default_tune,
) -> list[Outcome]:
    """Handle one event; every request gets an Outcome, and a comment gets at most one reply.

    API calls per event are bounded (docs/github.md, "API budget").
    """
    requests = requests_from_event(event_name, payload)
    ctx = Context.build(gh, flow, tune)
    if requests and requests[0].event == "issue_comment" and requests[0].kind != "ignored":
        return handle_comment(requests, ctx)
    return [_route(req, ctx) for req in requests]


def _ignored(req: Request, ctx: Context) -> Outcome:
    return Outcome("ignored", req.reason)


def _invalid(req: Request, ctx: Context) -> Outcome:
    """An unreadable schedule or dispatch input (invalid comments are answered in `commands`)."""
    if req.pr is None:
        return scheduled.handle(req, ctx)
    return Outcome("ignored", f"{req.kind} outside a comment")


# Request kinds outside a comment -> handler. A new event kind: one module, one line here.
HANDLERS: dict[str, Callable[[Request, Context], Outcome]] = {
    "ignored": _ignored,
    "review": review.handle,
    "scheduled": scheduled.handle,
    "invalid": _invalid,
}


def _route(req: Request, ctx: Context) -> Outcome:
    handler = HANDLERS.get(req.kind)
    if handler is None:
        return Outcome("ignored", f"{req.kind} outside a comment")
    return handler(req, ctx)
