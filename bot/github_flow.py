"""The GitHub flow: one event in, the bot's answer out (react, reply, tune, merge gate).

Phases match the workflow's jobs: `gate` runs on a hosted runner with only the default
branch's code: it reacts, authorizes, pins the head SHA, posts "queued" and plans the matrix
(one job per op); `tune` runs on a self-hosted runner with the PR checked out at exactly that
SHA (`only_op`: the matrix job's op); `report` runs after all tune jobs and aggregates them;
`all` does gate and tune in one process (tests, single-machine installs).

A comment gets at most one reply; a run's records and branches live on the remote
(bot.remote_runs), so a re-run on another runner resumes or recognises a delivered run; every
push goes through bot.git.isolated (explicit URL, private git dir), never the PR checkout's git.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from github import Github, GithubException

from bot import naming
from bot.config.schema import GithubSettings, RepoConfig
from bot.errors import TunebotError
from bot.events import (
    GRAMMAR,
    HELP,
    MAX_COMMANDS,
    Authorization,
    Request,
    authorize,
    check_ops,
    requests_from_event,
)
from bot.forge.github import DEFAULT_BOT_LOGIN, STALE_LABEL, GateRefused, GithubForge, status_marker
from bot.git import remotes
from bot.git.isolated import repo_url
from bot.job_guard import JobGuard
from bot.loop import CANCELLED, ProgressEvent, RunOutcome, TuneRequest
from bot.remote_runs import RemoteRuns, finished, recorded_base

Phase = Literal["all", "gate", "tune", "report"]
CANCEL_MARKER = "<!-- tunebot:cancel -->"
GATE_MARKER = "<!-- tunebot:gate -->"
SHA = re.compile(r"^[0-9a-f]{40}$")
# What the PR code the tune runs (kernels, proposers) must never see; the client keeps its own copy.
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN")
SECRET_ENV_PREFIXES = ("ACTIONS_",)
TuneFn = Callable[..., RunOutcome]


@dataclass
class FlowConfig:
    repo: str  # owner/name
    repo_cfg: RepoConfig = field(default_factory=RepoConfig)
    checkout: Path | None = None  # the PR checkout on the tune runner
    self_hosted: bool = True  # refuse fork heads (always true for the NPU runners)
    phase: Phase = "all"
    server_url: str = "https://github.com"  # GITHUB_SERVER_URL, for links
    run_url: str | None = None
    remote: str = "origin"
    authorized_sha: str | None = None  # tune phase: the SHA the gate pinned
    sleep: Callable[[float], None] = time.sleep  # back-off waits of the API retries
    bot_login: str = (
        DEFAULT_BOT_LOGIN  # the login the token comments as; only its comments are trusted
    )
    own_checks: tuple[str, ...] = (
        "merge gate",
    )  # check names of our own jobs (review.yml), never waited on
    guard: JobGuard | None = None  # the CLI's: kills PR code's leftovers before git gets the token
    repo_cache: dict = field(default_factory=dict)  # the repository object, read once per event
    only_op: str | None = (
        None  # a matrix job: tune this one op of the command (as typed or resolved)
    )

    @property
    def push_url(self) -> str:
        """Where tunebot pushes: GITHUB_SERVER_URL/GITHUB_REPOSITORY.git, never a git config value."""
        return repo_url(self.server_url, self.repo)


@dataclass
class Outcome:
    action: str  # ignored | replied | refused | authorized | tuned | stale | failed | merged | gate-refused
    message: str
    outputs: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0


def _default_tune(*args: object, **kwargs: object) -> RunOutcome:
    from bot.loop import run_tune
    from bot.model.cli import is_model
    from bot.model.loop import run_model

    request = args[0] if args else kwargs.get("request")
    if isinstance(request, TuneRequest) and is_model(request):  # a model target (docs/model.md)
        return run_model(*args, **kwargs)  # type: ignore[arg-type]
    return run_tune(*args, **kwargs)  # type: ignore[arg-type]


def handle_event(
    event_name: str, payload: dict, gh: Github, flow: FlowConfig, tune: TuneFn = _default_tune
) -> list[Outcome]:
    """Handle one event; every request gets an Outcome, and a comment gets at most one reply.

    API calls per event are bounded (docs/github.md, "API budget"): a comment holds at most
    MAX_COMMANDS commands, is authorized once, and all its answers share one reply.
    """
    requests = requests_from_event(event_name, payload)
    if requests and requests[0].event == "issue_comment" and requests[0].kind != "ignored":
        return _comment(requests, gh, flow, tune)
    return [handle_request(req, gh, flow, tune) for req in requests]


def _forge(gh: Github, flow: FlowConfig, pr: int | None) -> GithubForge:
    return _shared(
        flow,
        GithubForge(
            gh,
            flow.repo,
            settings=flow.repo_cfg.github,
            pr_number=pr,
            checkout=flow.checkout,
            branch_prefix=flow.repo_cfg.branch_prefix,
            run_url=flow.run_url,
            sleep=flow.sleep,
            bot_login=flow.bot_login,
            own_checks=flow.own_checks,
        ),
    )


def _shared(flow: FlowConfig, forge: GithubForge) -> GithubForge:
    """Every forge of one event shares one read of the repository (one API call, not one per op)."""
    if "repo" not in flow.repo_cache:
        flow.repo_cache["repo"] = forge.repo
    forge._repo = flow.repo_cache["repo"]
    return forge


class Replies:
    """Everything the bot says in answer to one comment, posted as that comment's one reply."""

    def __init__(self, forge: GithubForge, req: Request) -> None:
        self.forge, self.req, self.parts = forge, req, []  # type: ignore[var-annotated]

    def add(self, text: str) -> None:
        self.parts.append(text)

    def post(self) -> None:
        if self.parts and self.req.pr is not None:
            self.forge.reply(self.req.pr, self.req.comment_id, "\n\n---\n\n".join(self.parts), 0)


def _comment(requests: list[Request], gh: Github, flow: FlowConfig, tune: TuneFn) -> list[Outcome]:
    first = requests[0]
    forge = _forge(gh, flow, first.pr)
    replies = Replies(forge, first)
    try:
        if first.comment_id is not None and flow.phase in ("all", "gate"):
            forge.react(first.comment_id, "eyes")  # acknowledge within seconds
        outcomes = _comment_commands(requests, forge, replies, gh, flow, tune)
    except TunebotError as exc:
        # An API failure before anything ran (reaction, permission, the PR's head): say so where
        # the user looks, if GitHub lets us, and end with a failure the workflow shows.
        what = _failure_text(exc)
        replies.add(
            f"@{first.actor} tunebot could not handle this comment: {what}\n\nNothing was run; "
            "re-run the workflow or comment again."
        )
        outcomes = [
            Outcome(
                "failed", what, {"authorized": "false"}, exit_code=getattr(exc, "exit_code", 1) or 1
            )
        ]
    try:
        replies.post()
    except TunebotError as exc:
        print(f"tunebot: could not post the reply: {exc}", file=sys.stderr)
    return outcomes


def _comment_commands(
    requests: list[Request],
    forge: GithubForge,
    replies: Replies,
    gh: Github,
    flow: FlowConfig,
    tune: TuneFn,
) -> list[Outcome]:
    first = requests[0]
    if len(requests) > MAX_COMMANDS:
        text = (
            f"@{first.actor} one comment may hold at most {MAX_COMMANDS} `/tune` commands (this one has "
            f"{len(requests)}); nothing was run. Put them in fewer commands: `/tune op1 op2 ...` takes up to 8 ops."
        )
        replies.add(text)
        return [Outcome("replied", text)]
    invalid = [r for r in requests if r.kind == "invalid"]
    if invalid:
        problems = "\n".join(
            f"- command {r.index + 1}: {r.reason.split(chr(10))[0]}" for r in invalid
        )
        text = (
            f"@{first.actor} I could not read {'that command' if len(requests) == 1 else 'every command'}; "
            f"nothing was run.\n{problems}\n\nUsage (ASCII only):\n```\n{GRAMMAR}\n```\n`/tune help` explains each option."
        )
        replies.add(text)
        return [Outcome("replied", r.reason) for r in requests]
    if sum(r.kind == "tune" for r in requests) > 1:
        text = (
            f"@{first.actor} one comment may start one tuning run; nothing was run. "
            "Name all the ops in one command: `/tune op1 op2 ...` (up to 8)."
        )
        replies.add(text)
        return [Outcome("replied", text)]
    outcomes: list[Outcome] = []
    auth: Authorization | None = None
    for req in requests:
        if req.kind == "help":
            replies.add(HELP)
            outcomes.append(Outcome("replied", "help"))
            continue
        if req.kind == "status":
            outcomes.append(_status(req, forge, replies))
            continue
        if auth is None:  # once per comment, whatever it holds
            auth = authorize(req, forge, flow.repo_cfg.github, self_hosted=flow.self_hosted)
            if not auth.allowed:
                replies.add(f"@{req.actor} {auth.reason}")
        if not auth.allowed:
            outcomes.append(Outcome("refused", auth.reason, {"authorized": "false"}))
            continue
        if req.kind == "cancel":
            outcomes.append(_cancel(req, forge, flow, replies))
        else:
            outcomes.append(_tune(req, auth, forge, gh, flow, tune, replies))
    return outcomes


def handle_request(
    req: Request, gh: Github, flow: FlowConfig, tune: TuneFn = _default_tune
) -> Outcome:
    """A request that is not a comment: a review, a schedule or dispatch, or something ignored."""
    if req.kind == "ignored":
        return Outcome("ignored", req.reason)
    if req.kind == "review":
        return _review(req, _forge(gh, flow, req.pr))
    if req.kind == "scheduled" or (req.kind == "invalid" and req.pr is None):
        return _scheduled(req, gh, flow, tune)
    return Outcome("ignored", f"{req.kind} outside a comment")


# ---------------------------------------------------------------- status / cancel


def _status(req: Request, forge: GithubForge, replies: Replies) -> Outcome:
    comments = forge.status_comments(req.pr)
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


def _cancel(req: Request, forge: GithubForge, flow: FlowConfig, replies: Replies) -> Outcome:
    comments = forge.status_comments(req.pr)
    for op, body in comments.items():
        if CANCEL_MARKER not in body:
            text = body.split("\n", 1)[1] if "\n" in body else ""
            forge.upsert_comment(
                req.pr,
                status_marker(op),
                f"{text}\n\n{CANCEL_MARKER}\n**Cancel requested** by @{req.actor}: the run stops after its current iteration.",
            )
    text = f"Cancel requested for {', '.join(f'`{op}`' for op in sorted(comments)) or 'no runs'}."
    replies.add(text)
    return Outcome("replied", text)


# ---------------------------------------------------------------- tuning


class StatusReporter:
    """Renders the sticky status comment from the loop's progress events."""

    def __init__(
        self,
        forge: GithubForge,
        op: str,
        head_sha: str,
        requester: str | None,
        links: Links,
        checkout: Path | None,
    ) -> None:
        self.forge, self.op, self.head_sha, self.requester, self.links, self.checkout = (
            forge,
            op,
            head_sha,
            requester,
            links,
            checkout,
        )
        self.phase = "queued"
        self.baseline: str = ""
        self.rows: list[str] = []
        self.verdict: str = ""
        self.cancelled = False
        self.publish_failures = 0

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind in ("phase", "note"):  # terminal progress only: no API call per phase
            return
        self._check_cancel()
        if event.kind in ("start", "resumed"):
            self.phase = "measuring the baseline" if event.kind == "start" else "resumed"
        elif event.kind == "baseline":
            self.phase = "iterating"
            self.baseline = f"Baseline: **{_us(event.latency_us)}**, L0 {event.accuracy or '?'}"
        elif event.kind == "iteration":
            self.rows.append(self._row(event))
        elif event.kind == "stop":
            self.phase = "delivering"
            self.verdict = f"Stopped: {event.message or event.verdict or ''}".strip()
        elif event.kind == "delivered":
            self.phase = "done"
        self.publish()

    def cancel_requested(self) -> bool:
        """A `/tune cancel` marked this op's status comment (also the one posted under the name as typed)."""
        if self.cancelled:
            return True
        if not self.forge.pr_number:
            return False
        try:
            body = self.forge.find_comment_any(
                self.forge.pr_number, (status_marker(self.op), *self.forge.status_aliases)
            )
        except TunebotError:
            return False  # cannot read it now; asked again at the next progress event
        self.cancelled = bool(body and CANCEL_MARKER in body)
        return self.cancelled

    def _check_cancel(self) -> None:
        if self.cancelled or self.checkout is None:
            return
        if self.cancel_requested():
            from bot.model.cli import cancel  # a model or an op

            cancel(self.checkout, self.op)

    def _row(self, e: ProgressEvent) -> str:
        gain = f"{e.gain_pct:+.1f}%" if e.gain_pct is not None else ""
        change = (e.change or "").replace("|", "\\|").replace("\n", " ")[:80]
        links = ""
        if e.sha:
            links = f"[`{e.sha[:7]}`]({self.links.commit(e.sha)}) · [diff]({self.links.compare(self.head_sha, e.sha)})"
        if e.branch:
            links += f" · [branch]({self.links.tree(e.branch)})"
        return f"| {e.iteration} | {e.strategy or ''} | {change} | {e.accuracy or ''} | {_us(e.latency_us)} | {gain} | {e.verdict or ''} | {links} |"

    def render(self, extra: str = "") -> str:
        head = f"### tunebot · `{self.op}` · {self.phase}"
        meta = f"PR head `{self.head_sha[:10]}`" + (
            f" · requested by @{self.requester}" if self.requester else ""
        )
        if self.forge.run_url:
            meta += f" · [workflow run]({self.forge.run_url})"
        parts = [head, meta]
        if self.baseline:
            parts.append(self.baseline)
        if self.rows:
            parts.append(
                "| # | strategy | change | L0 | latency | gain | verdict | links |\n|---|---|---|---|---|---|---|---|\n"
                + "\n".join(self.rows)
            )
        if self.verdict:
            parts.append(self.verdict)
        if extra:
            parts.append(extra)
        if self.cancelled:
            parts.append(
                f"{CANCEL_MARKER}\n**Cancel requested**: stopping after the current iteration."
            )
        return "\n\n".join(parts)

    def publish(self, extra: str = "") -> bool:
        """Edit the status comment; an API failure is logged and never stops the run (the next edit retries)."""
        try:
            self.forge.post_status(self.render(extra))
        except TunebotError as exc:
            self.publish_failures += 1
            print(
                f"tunebot: could not update the status comment of {self.op}: {exc}", file=sys.stderr
            )
            return False
        return True


@dataclass(frozen=True)
class Links:
    server_url: str
    repo: str

    def _base(self) -> str:
        return f"{self.server_url.rstrip('/')}/{self.repo}"

    def commit(self, sha: str) -> str:
        return f"{self._base()}/commit/{sha}"

    def compare(self, base: str, head: str) -> str:
        return f"{self._base()}/compare/{base}...{head}"

    def tree(self, branch: str) -> str:
        return f"{self._base()}/tree/{branch}"


def _us(value: float | None) -> str:
    return f"{value:.2f} us" if value is not None else "—"


def _tune(
    req: Request,
    auth: Authorization,
    forge: GithubForge,
    gh: Github,
    flow: FlowConfig,
    tune: TuneFn,
    replies: Replies,
) -> Outcome:
    assert req.command is not None and auth.pull is not None
    pull, cmd = auth.pull, req.command
    head_sha = auth.pull.head_sha
    outputs = {
        "authorized": "true",
        "head_sha": head_sha,
        "pr": str(pull.number),
        "ops": " ".join(cmd.ops),
    }
    links = Links(flow.server_url, flow.repo)
    if flow.phase == "gate":
        return _gate(req, forge, gh, flow, head_sha, links, outputs)
    if flow.phase == "report":
        return _report(req, forge, gh, flow, flow.authorized_sha or head_sha, links, outputs)
    # tune phase: the SHA the gate pinned is the one we work on; refuse if the PR moved since.
    pinned = flow.authorized_sha or head_sha
    if not SHA.match(pinned):
        raise TunebotError(f"--sha must be a full 40-character commit SHA (got {pinned[:50]!r})")
    ops = _job_ops(cmd.ops, flow)
    if head_sha != pinned:
        text = (
            f"The pull request moved from `{pinned[:10]}` to `{head_sha[:10]}` after `/tune` was authorized; "
            "nothing was run. Comment `/tune` again to tune the new head."
        )
        replies.add(text)
        _final_status_comments(req, gh, flow, pinned, links, ops, "stale", text)
        _set_status(forge, pinned, "error", "tunebot: stale, head moved before the run")
        return Outcome("stale", text, outputs)
    if flow.checkout is None:
        raise TunebotError(
            "the tune phase needs --checkout <dir> (the repository checked out at the PR head)"
        )
    scrub_secrets()
    try:
        return _tune_ops(req, forge, gh, flow, tune, pinned, pull.head_ref, outputs, replies, ops)
    except (TunebotError, subprocess.CalledProcessError, GithubException) as exc:
        # Whatever failed, the commit status and the status comments must not stay "pending/queued".
        what = _failure_text(exc)
        _final_status_comments(req, gh, flow, pinned, links, ops, "failed", f"**Failed:** {what}")
        _set_status(forge, pinned, "failure", f"tunebot failed: {what}")
        return Outcome("failed", what, outputs, exit_code=1)


def _report(
    req: Request,
    forge: GithubForge,
    gh: Github,
    flow: FlowConfig,
    sha: str,
    links: Links,
    outputs: dict[str, str],
) -> Outcome:
    """The matrix's final job: finish ops whose job died, one summary comment, the combined status."""
    from bot.github_report import lost_notice, report

    assert req.command is not None and req.pr is not None

    def mark_lost(op: str, phase: str) -> None:
        reporter = StatusReporter(
            _op_forge(gh, flow, req, op, sha), op, sha, req.actor, links, None
        )
        reporter.phase = "failed"
        reporter.publish(lost_notice(op, phase))

    state, states, text = report(forge, req.pr, req.comment_id, req.command.ops, sha, mark_lost)
    return Outcome("reported", text, outputs, exit_code=0 if state != "failure" else 1)


def _job_ops(ops: tuple[str, ...], flow: FlowConfig) -> tuple[str, ...]:
    """The ops this job tunes: all of the command's, or the matrix job's one."""
    if flow.only_op is None:
        return ops
    if flow.only_op not in ops and not any(
        flow.only_op.endswith("/" + op) or op.endswith("/" + flow.only_op) for op in ops
    ):
        raise TunebotError(f"--op {flow.only_op} is not one of the command's ops ({' '.join(ops)})")
    return (flow.only_op,)


def _gate(
    req: Request,
    forge: GithubForge,
    gh: Github,
    flow: FlowConfig,
    head_sha: str,
    links: Links,
    outputs: dict[str, str],
) -> Outcome:
    """Post "queued" per op and the pending status; if that fails, leave nothing saying "queued"."""
    assert req.command is not None
    try:
        finished_here = _done_at(forge, req.pr, head_sha)
        for op in req.command.ops:
            if any(name == op or name.endswith("/" + op) for name in finished_here):
                continue  # delivered at this very head: the tune job will say so; "done" stays
            op_forge = _op_forge(gh, flow, req, op, head_sha)
            op_forge.post_status(
                StatusReporter(op_forge, op, head_sha, req.actor, links, None).render(
                    "Queued: waiting for a free accelerator runner."
                )
            )
        if len(req.command.ops) > 1 and req.pr is not None:  # one place that aggregates the jobs
            from bot.github_report import post_queued_summary

            post_queued_summary(forge, req.pr, req.comment_id, req.command.ops, head_sha)
        forge.set_status(
            head_sha,
            "pending",
            f"tunebot queued: {' '.join(req.command.ops)}"[:140],
            context="tunebot",
        )
    except TunebotError as exc:
        what = _failure_text(exc)
        _final_status_comments(
            req,
            gh,
            flow,
            head_sha,
            links,
            req.command.ops,
            "failed",
            f"**Failed before it started:** {what}\n\nNothing was run; comment `/tune` again.",
        )
        _set_status(forge, head_sha, "error", f"tunebot: not started: {what}")
        return Outcome("failed", what, {**outputs, "authorized": "false"}, exit_code=1)
    outputs = {**outputs, **matrix_outputs(req.command.ops, flow)}
    return Outcome("authorized", f"authorized at {head_sha}", outputs)


def _done_at(forge: GithubForge, pr: int | None, head_sha: str) -> list[str]:
    """Ops whose status comment says "done" for exactly this head (a re-delivered or repeated /tune)."""
    if pr is None:
        return []
    out = []
    for name, body in forge.status_comments(pr).items():
        lines = body.splitlines()
        if (
            len(lines) > 2
            and lines[1].endswith(" · done")
            and f"PR head `{head_sha[:10]}`" in lines[2]
        ):
            out.append(name)
    return out


def matrix_outputs(ops: tuple[str, ...], flow: FlowConfig) -> dict[str, str]:
    """The tune job's matrix: one entry per op with its runner labels, and max-parallel (.tunebot.yml)."""
    import json

    settings = flow.repo_cfg.github
    include = [{"op": op, "runs_on": runner_labels(op, settings)} for op in ops]
    return {
        "matrix": json.dumps({"include": include}, separators=(",", ":")),
        "max_parallel": str(settings.max_parallel or len(ops) or 1),
    }


def runner_labels(op: str, settings: GithubSettings) -> list[str]:
    """Labels of the runner an op needs: `github.runners` keyed by op or project, else self-hosted + npu."""
    table = dict(settings.runners)
    project = op.split("/", 1)[0] if "/" in op else ""
    for key in (op, op.rsplit("/", 1)[-1], project):
        if key and key in table:
            return list(table[key])
    return list(table.get("default", ["self-hosted", "npu"]))


def _set_status(
    forge: GithubForge, sha: str, state: str, description: str, context: str = "tunebot"
) -> None:
    """The final commit status; if even that fails, the log says so (there is nothing else to tell)."""
    try:
        forge.set_status(sha, state, description[:140], context=context)
    except TunebotError as exc:
        print(f"tunebot: could not set the commit status to {state}: {exc}", file=sys.stderr)


def scrub_secrets() -> list[str]:
    """Remove the GitHub token, the Actions runtime variables and the step's file commands from the environment.

    Kernels and proposers are PR code and inherit our environment; the forge client already holds
    its token. Nothing is restored afterwards: the process only handles this event, and any later
    op in it runs PR code too.
    """
    from bot.job_guard import withheld

    gone = [
        k for k in os.environ if k in SECRET_ENV or k.startswith(SECRET_ENV_PREFIXES) or withheld(k)
    ]
    for key in gone:
        del os.environ[key]
    return gone


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        detail = (
            (exc.stderr or b"").decode(errors="replace").strip()
            if isinstance(exc.stderr, bytes)
            else str(exc.stderr or "").strip()
        )
        return f"`{' '.join(map(str, exc.cmd))[:80]}` failed ({exc.returncode}): {detail[:200]}"
    return str(exc).strip()[:500] or type(exc).__name__


def _final_status_comments(
    req: Request,
    gh: Github,
    flow: FlowConfig,
    pinned: str,
    links: Links,
    ops: tuple[str, ...],
    phase: str,
    text: str,
) -> None:
    """Give each op's existing status comment a final state (best effort: the API may be what failed).

    If the comments cannot be read, each op's comment is written anyway (created if need be): a
    "queued" that stays forever is worse than a second comment.
    """
    forge = _forge(gh, flow, req.pr)
    try:
        existing: dict[str, str] | None = (
            forge.status_comments(req.pr) if req.pr is not None else {}
        )
    except TunebotError:
        existing = None
    targets = []
    for typed in ops:  # the comment may carry the resolved name (`demo/rms_norm` for `rms_norm`)
        if existing is None:
            targets.append(typed)
            continue
        found = next(
            (name for name in existing if name == typed or name.endswith("/" + typed)), None
        )
        if found is not None:
            targets.append(found)
    for op in dict.fromkeys(targets):
        reporter = StatusReporter(
            _op_forge(gh, flow, req, op, pinned), op, pinned, req.actor, links, None
        )
        reporter.phase = phase
        reporter.publish(text)


def _remote_runs(gh: Github, flow: FlowConfig) -> RemoteRuns:
    assert flow.checkout is not None
    token = getattr(gh.requester.auth, "token", None)
    before = flow.guard.before_credential if flow.guard is not None else (lambda: None)
    return RemoteRuns(
        flow.push_url, token, flow.checkout, flow.repo_cfg.branch_prefix, before_credential=before
    )


def _tune_ops(
    req: Request,
    forge: GithubForge,
    gh: Github,
    flow: FlowConfig,
    tune: TuneFn,
    pinned: str,
    pull_head_ref: str,
    outputs: dict[str, str],
    replies: Replies,
    ops: tuple[str, ...],
) -> Outcome:
    assert req.command is not None and flow.checkout is not None
    cmd = req.command
    links = Links(flow.server_url, flow.repo)
    _ensure_commit(flow.checkout, pinned, flow.remote)
    checked = check_ops(flow.checkout, ops)
    if checked.problems:
        text = "\n".join(f"- {p}" for p in checked.problems)
        replies.add(f"@{req.actor} I cannot tune that:\n{text}")
        _final_status_comments(req, gh, flow, pinned, links, ops, "not run", f"Not run:\n{text}")
        _set_status(forge, pinned, "error", "tunebot: unknown op")
        return Outcome("refused", text, outputs, exit_code=0)
    remote = _remote_runs(gh, flow)
    remote.restore(
        list(checked.by_op())
    )  # before any PR code runs: records and branches of earlier runners
    results: list[str] = []
    stale = failed = cancelled = False
    for (
        op,
        typed_names,
    ) in checked.by_op().items():  # one run per op, however many ways it was named
        op_forge = _op_forge(gh, flow, req, op, pinned, remote)
        op_forge.status_aliases = tuple(
            status_marker(t) for t in typed_names if t != op
        )  # the gate's "queued" comments
        reporter = StatusReporter(op_forge, op, pinned, req.actor, links, flow.checkout)
        trigger = f"comment:{req.comment_id}"
        done = finished(flow.checkout, op, pinned)
        noop = _finished_text(op_forge, done, remote.triggers.get(op) == trigger, pinned)
        if noop:
            # A re-delivered event, a second /tune or a re-run on a fresh runner: the run is complete.
            results.append(f"{op}: {noop}")
            continue
        if reporter.cancel_requested():  # cancelled while queued: the run's start would forget it
            cancelled = True
            reporter.phase = "cancelled"
            reporter.publish("Cancelled before it started; nothing was run.")
            results.append(f"{op}: cancelled before it started")
            continue
        moved = (
            op_forge.head_moved()
        )  # checked again right before any kernel runs (and between ops)
        if moved:
            stale = True
            reporter.phase = "stale"
            reporter.publish(op_forge.stale_notice(moved) + "\n\nNothing was run.")
            results.append(f"{op}: not run (head moved to {moved[:10]})")
            continue
        reporter.phase = "starting"
        reporter.publish()
        # An older head's run, or a run cancelled by an earlier command: start over.
        restart = recorded_base(flow.checkout, op) not in (None, pinned) or bool(
            done and done.cancelled
        )
        # remote=None: the loop does not push; the forge pushes in propose() through RemoteRuns.
        request = TuneRequest(
            repo=flow.checkout,
            op=op,
            base_ref=pinned,
            base_branch=pull_head_ref,
            max_iters=cmd.max_iters,
            target_us=cmd.target_us,
            strategies=cmd.strategies,
            remote=None,
            requester=req.actor,
            restart=restart,
        )
        try:
            outcome = tune(request, forge=op_forge, progress=reporter)
        except TunebotError as exc:
            failed = True
            reporter.phase = "failed"
            reporter.publish(f"**Failed:** {exc}\n\n{_retry_hint(exc)}")
            results.append(f"{op}: failed: {exc}")
            continue
        except Exception:
            # A bug, not a user error: say so where the user looks, keep the traceback for the log.
            reporter.phase = "failed"
            reporter.publish("**Failed:** internal error; the traceback is in the workflow log.")
            _set_status(forge, pinned, "error", f"tunebot: internal error on {op}")
            raise
        finally:
            _save_records(remote, op, trigger)
        moved = op_forge.head_moved()
        if moved:
            stale = True
            reporter.phase = "stale"
            reporter.publish(op_forge.stale_notice(moved))
            if outcome.proposal is not None:
                _mark_stale(op_forge, outcome, moved)
            results.append(f"{op}: stale (head moved to {moved[:10]})")
            continue
        was_cancelled = outcome.stop_reason == CANCELLED
        cancelled = cancelled or was_cancelled
        reporter.phase = "cancelled" if was_cancelled else "done"
        link = (
            f"[#{outcome.proposal.id}]({outcome.proposal.url})"
            if outcome.proposal
            else f"none ({outcome.verdict}: {outcome.no_proposal_reason})"
        )
        reporter.verdict = (
            f"**Verdict:** {outcome.stop_reason}; best {_us(outcome.best_us)} vs baseline "
            f"{_us(outcome.baseline_us)} ({outcome.improvement_pct:+.1f}%) after {outcome.iterations} iterations. "
            f"Proposal: {link}"
        )
        notes = "\n".join(f"> [!NOTE]\n> {w}" for w in op_forge.warnings)
        reporter.publish(notes)
        results.append(
            f"{op}: {outcome.improvement_pct:+.1f}% -> {link}"
            + (" (cancelled)" if was_cancelled else "")
        )
    if stale:
        state, action = "error", "stale"
    elif failed:
        state, action = "failure", "failed"
    elif cancelled:
        state, action = "error", "cancelled"
    else:
        state, action = "success", "tuned"
    # A matrix job reports its own op; the report job sets the combined `tunebot` status.
    _set_status(
        forge,
        pinned,
        state,
        f"tunebot {action}: " + "; ".join(results)[:120],
        context="tunebot" if flow.only_op is None else f"tunebot/{ops[0]}",
    )
    return Outcome(
        "tuned" if action == "cancelled" else action,
        "\n".join(results),
        outputs,
        exit_code=1 if failed else 0,
    )


def _still_open(forge: GithubForge, proposal_id: str) -> bool:
    try:
        return forge.get(proposal_id).state == "open"
    except TunebotError:
        return False


def _finished_text(forge: GithubForge, done, same_trigger: bool, sha: str) -> str:
    """What to say when the recorded run at `sha` is complete and nothing should run ("" otherwise).

    Delivered with an open proposal: done. Nothing to propose (no gain, nothing to try): done.
    Cancelled: done for the command that was cancelled (a re-delivery); a new command starts over.
    """
    if done is None:
        return ""
    if done.proposal_id:
        if _still_open(forge, done.proposal_id):
            return f"already delivered as #{done.proposal_id} at {sha[:10]}; nothing was run"
        return ""  # closed or merged: the loop starts a fresh run
    if done.cancelled and not same_trigger:
        return ""
    return f"already finished at {sha[:10]} with nothing to propose ({done.no_proposal}); nothing was run"


def _save_records(remote: RemoteRuns, op: str, trigger: str = "") -> None:
    """Push the op's records for the next runner; a failure is logged (the branches, if pushed, remain)."""
    try:
        remote.save(op, trigger)
    except TunebotError as exc:
        print(f"tunebot: could not save the records of {op} on the remote: {exc}", file=sys.stderr)


def _retry_hint(exc: BaseException) -> str:
    return (
        "What was measured is kept on the remote (refs/tunebot/runs/); re-run the job or comment `/tune` "
        "again to resume from there."
    )


def _op_forge(
    gh: Github, flow: FlowConfig, req: Request, op: str, sha: str, remote: RemoteRuns | None = None
) -> GithubForge:
    return _shared(
        flow,
        GithubForge(
            gh,
            flow.repo,
            settings=flow.repo_cfg.github,
            op=op,
            pr_number=req.pr,
            guard_sha=sha,
            checkout=flow.checkout,
            branch_prefix=flow.repo_cfg.branch_prefix,
            run_url=flow.run_url,
            sleep=flow.sleep,
            bot_login=flow.bot_login,
            own_checks=flow.own_checks,
            remote_runs=remote,
        ),
    )


def _mark_stale(forge: GithubForge, outcome: RunOutcome, moved: str) -> None:
    """The proposal already exists: say it is stale in its body and label it, so the gate refuses it."""
    number = int(outcome.proposal.id)
    notice = forge.stale_notice(moved)

    def step() -> None:
        pr = forge.repo.get_pull(number)
        if "Stale results" not in (pr.body or ""):
            pr.edit(body=f"{notice}\n\n{pr.body or ''}")

    forge.call(f"mark #{number} stale", step)
    forge.add_labels(number, [STALE_LABEL])


def _ensure_commit(checkout: Path, sha: str, remote: str) -> None:
    """Fetch the pinned commit if the checkout lacks it (argv only: no shell, sha validated)."""
    remotes.ensure_commit(checkout, sha, remote)


# ---------------------------------------------------------------- review -> merge gate


def _review(req: Request, forge: GithubForge) -> Outcome:
    if req.review_state != "APPROVED":
        return Outcome(
            "ignored", f"review state {req.review_state}: only approvals run the merge gate"
        )
    prefix = forge.branch_prefix + "/"
    head_ref = req.head_ref or forge.pull_info(req.pr).head_ref
    if not head_ref.startswith(prefix):
        return Outcome("ignored", f"#{req.pr} is not a tunebot proposal (head {head_ref})")
    try:
        proposal = forge.merge(str(req.pr))
    except GateRefused as exc:
        text = (
            "**Not merged yet.** Missing:\n"
            + "\n".join(f"- {m}" for m in exc.missing)
            + "\n\nOnce these hold, approve again (or re-run the `tunebot review` workflow) to merge."
        )
        _gate_comment(forge, req.pr, text)
        return Outcome("gate-refused", text, exit_code=exc.exit_code)
    except TunebotError as exc:
        text = (
            f"**Not merged: the merge gate could not finish.** {_failure_text(exc)}\n\n"
            "Nothing was merged. Re-run the `tunebot review` workflow or approve again once GitHub answers."
        )
        _gate_comment(forge, req.pr, text)
        return Outcome("failed", text, exit_code=1)
    text = f"**Merged** `{proposal.head}` at `{proposal.head_sha[:10]}` after approval; iteration branches deleted."
    _gate_comment(forge, req.pr, text)
    return Outcome("merged", text)


def _gate_comment(forge: GithubForge, number: int | None, text: str) -> None:
    if number is None:
        return
    try:
        forge.upsert_comment(number, GATE_MARKER, text)
    except TunebotError as exc:
        print(
            f"tunebot: could not post the merge gate's answer on #{number}: {exc}", file=sys.stderr
        )


# ---------------------------------------------------------------- schedule / dispatch


def _scheduled(req: Request, gh: Github, flow: FlowConfig, tune: TuneFn) -> Outcome:
    if req.kind == "invalid":
        return Outcome("refused", req.reason, exit_code=2)
    if req.task != "tune":
        return Outcome(
            "ignored", f"task {req.task} runs in its own workflow (refresh-features.yml)"
        )
    if flow.checkout is None:
        raise TunebotError(
            "scheduled tuning needs --checkout <dir> (the default branch checked out)"
        )
    ops = tuple(req.ops or flow.repo_cfg.github.ops)
    if not ops:
        return Outcome(
            "ignored", "no ops to tune: set github.ops in .tunebot.yml or pass the `ops` input"
        )
    if flow.phase == "gate":  # the schedule's gate job only plans the matrix
        return Outcome(
            "authorized",
            f"scheduled: {' '.join(ops)}",
            {"authorized": "true", "ops": " ".join(ops), **matrix_outputs(ops, flow)},
        )
    if (
        flow.phase == "report"
    ):  # no pull request to comment on: the log lists each op's open proposal
        forge = _forge(gh, flow, None)
        lines = []
        for op in ops:
            found = forge.find_proposal(naming.op_delivery_branch(flow.repo_cfg.branch_prefix, op))
            lines.append(
                f"{op}: " + (f"proposal #{found.id} {found.url}" if found else "no open proposal")
            )
        return Outcome("reported", "\n".join(lines))
    ops = _job_ops(ops, flow)
    checked = check_ops(flow.checkout, ops)
    if checked.problems:
        return Outcome("refused", "\n".join(checked.problems), exit_code=2)
    forge = _forge(gh, flow, None)
    base = forge.repo.default_branch
    from bot.git import repository

    base_sha = repository.resolve(repository.open_repo(flow.checkout), f"{flow.remote}/{base}")
    remote = _remote_runs(gh, flow)
    remote.restore(list(checked.by_op()))  # before any PR code runs
    scrub_secrets()
    results, failed = [], False
    for op in checked.by_op():
        op_forge = GithubForge(
            gh,
            flow.repo,
            settings=flow.repo_cfg.github,
            op=op,
            checkout=flow.checkout,
            branch_prefix=flow.repo_cfg.branch_prefix,
            run_url=flow.run_url,
            sleep=flow.sleep,
            bot_login=flow.bot_login,
            remote_runs=remote,
            base_sha=base_sha,
        )
        trigger = f"run:{flow.run_url or req.event}"
        done = finished(flow.checkout, op, base_sha)
        noop = _finished_text(op_forge, done, remote.triggers.get(op) == trigger, base_sha)
        if noop:
            results.append(f"{op}: {noop}")
            continue
        restart = recorded_base(flow.checkout, op) not in (None, base_sha) or bool(
            done and done.cancelled
        )
        request = TuneRequest(
            repo=flow.checkout,
            op=op,
            base_ref=base_sha,
            base_branch=base,
            remote=None,
            requester=req.actor,
            restart=restart,
        )
        try:
            outcome = tune(request, forge=op_forge, progress=None)
        except TunebotError as exc:
            failed = True
            results.append(f"{op}: failed: {exc}")
            continue
        finally:
            _save_records(remote, op, trigger)
        results.append(
            f"{op}: {outcome.improvement_pct:+.1f}%"
            + (f" -> #{outcome.proposal.id}" if outcome.proposal else "")
        )
    return Outcome(
        "failed" if failed else "tuned", "\n".join(results), exit_code=1 if failed else 0
    )
