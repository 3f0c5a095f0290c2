"""The GitHub flow: one event in, the bot's answer out (react, reply, tune, merge gate).

Phases match the workflow's jobs: `gate` runs on a hosted runner with only the default
branch's code: it reacts, authorizes, pins the head SHA and posts "queued";
`tune` runs on the self-hosted runner with the PR checked out at exactly that SHA;
`all` does both in one process (tests, single-machine installs).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from github import Github, GithubException

from bot.config import RepoConfig
from bot.errors import TunebotError
from bot.events import HELP, Authorization, Request, authorize, check_ops, requests_from_event
from bot.forge.github import DEFAULT_BOT_LOGIN, STALE_LABEL, GateRefused, GithubForge, status_marker
from bot.loop import ProgressEvent, RunOutcome, TuneRequest

Phase = Literal["all", "gate", "tune"]
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
    bot_login: str = DEFAULT_BOT_LOGIN  # the login the token comments as; only its comments are trusted
    own_checks: tuple[str, ...] = ("merge gate",)  # check names of our own jobs (review.yml), never waited on


@dataclass
class Outcome:
    action: str  # ignored | replied | refused | authorized | tuned | stale | failed | merged | gate-refused
    message: str
    outputs: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0


def _default_tune(*args: object, **kwargs: object) -> RunOutcome:
    from bot.loop import run_tune

    return run_tune(*args, **kwargs)  # type: ignore[arg-type]


def handle_event(event_name: str, payload: dict, gh: Github, flow: FlowConfig, tune: TuneFn = _default_tune) -> list[Outcome]:
    """Handle one event; every request gets an Outcome (and users get an answer on GitHub)."""
    return [handle_request(req, gh, flow, tune) for req in requests_from_event(event_name, payload)]


def handle_request(req: Request, gh: Github, flow: FlowConfig, tune: TuneFn = _default_tune) -> Outcome:
    if req.kind == "ignored":
        return Outcome("ignored", req.reason)
    settings = flow.repo_cfg.github
    forge = GithubForge(gh, flow.repo, settings=settings, pr_number=req.pr, checkout=flow.checkout,
                        branch_prefix=flow.repo_cfg.branch_prefix, run_url=flow.run_url, sleep=flow.sleep,
                        bot_login=flow.bot_login, own_checks=flow.own_checks)
    if req.kind == "review":
        return _review(req, forge)
    if req.kind == "scheduled" or (req.kind == "invalid" and req.pr is None):
        return _scheduled(req, gh, flow, tune)
    if req.comment_id is not None and req.index == 0 and flow.phase in ("all", "gate"):
        forge.react(req.comment_id, "eyes")  # acknowledge within seconds
    if req.kind == "help":
        forge.reply(req.pr, req.comment_id, HELP, req.index)
        return Outcome("replied", "help")
    if req.kind == "invalid":
        forge.reply(req.pr, req.comment_id, f"@{req.actor} I could not read that command: {req.reason}\n\n`/tune help` lists the commands.", req.index)
        return Outcome("replied", req.reason)
    if req.kind == "status":
        return _status(req, forge)
    auth = authorize(req, forge, settings, self_hosted=flow.self_hosted)
    if not auth.allowed:
        forge.reply(req.pr, req.comment_id, f"@{req.actor} {auth.reason}", req.index)
        return Outcome("refused", auth.reason, {"authorized": "false"})
    if req.kind == "cancel":
        return _cancel(req, forge, flow)
    return _tune(req, auth, forge, gh, flow, tune)


# ---------------------------------------------------------------- status / cancel


def _status(req: Request, forge: GithubForge) -> Outcome:
    comments = forge.status_comments(req.pr)
    if not comments:
        text = "No tunebot runs on this pull request yet. Start one with `/tune <op>`."
    else:
        lines = []
        for op, body in sorted(comments.items()):
            heading = next((ln for ln in body.splitlines()[1:] if ln.strip()), "")
            lines.append(f"- `{op}`: {heading.lstrip('# ').strip()}")
        text = "Runs on this pull request (details in each status comment):\n" + "\n".join(lines)
    forge.reply(req.pr, req.comment_id, text, req.index)
    return Outcome("replied", text)


def _cancel(req: Request, forge: GithubForge, flow: FlowConfig) -> Outcome:
    comments = forge.status_comments(req.pr)
    for op, body in comments.items():
        if CANCEL_MARKER not in body:
            text = body.split("\n", 1)[1] if "\n" in body else ""
            forge.upsert_comment(req.pr, status_marker(op), f"{text}\n\n{CANCEL_MARKER}\n**Cancel requested** by @{req.actor}: the run stops after its current iteration.")
    text = f"Cancel requested for {', '.join(f'`{op}`' for op in sorted(comments)) or 'no runs'}."
    forge.reply(req.pr, req.comment_id, text, req.index)
    return Outcome("replied", text)


# ---------------------------------------------------------------- tuning


class StatusReporter:
    """Renders the sticky status comment from the loop's progress events."""

    def __init__(self, forge: GithubForge, op: str, head_sha: str, requester: str | None, links: "Links", checkout: Path | None) -> None:
        self.forge, self.op, self.head_sha, self.requester, self.links, self.checkout = forge, op, head_sha, requester, links, checkout
        self.phase = "queued"
        self.baseline: str = ""
        self.rows: list[str] = []
        self.verdict: str = ""
        self.cancelled = False

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
        body = self.forge.find_comment_any(self.forge.pr_number, (status_marker(self.op), *self.forge.status_aliases))
        self.cancelled = bool(body and CANCEL_MARKER in body)
        return self.cancelled

    def _check_cancel(self) -> None:
        if self.cancelled or self.checkout is None:
            return
        if self.cancel_requested():
            from bot.loop import cancel

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
        meta = f"PR head `{self.head_sha[:10]}`" + (f" · requested by @{self.requester}" if self.requester else "")
        if self.forge.run_url:
            meta += f" · [workflow run]({self.forge.run_url})"
        parts = [head, meta]
        if self.baseline:
            parts.append(self.baseline)
        if self.rows:
            parts.append("| # | strategy | change | L0 | latency | gain | verdict | links |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(self.rows))
        if self.verdict:
            parts.append(self.verdict)
        if extra:
            parts.append(extra)
        if self.cancelled:
            parts.append(f"{CANCEL_MARKER}\n**Cancel requested**: stopping after the current iteration.")
        return "\n\n".join(parts)

    def publish(self, extra: str = "") -> None:
        self.forge.post_status(self.render(extra))


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


def _tune(req: Request, auth: Authorization, forge: GithubForge, gh: Github, flow: FlowConfig, tune: TuneFn) -> Outcome:
    assert req.command is not None and auth.pull is not None
    pull, cmd = auth.pull, req.command
    head_sha = auth.pull.head_sha
    outputs = {"authorized": "true", "head_sha": head_sha, "pr": str(pull.number), "ops": " ".join(cmd.ops)}
    links = Links(flow.server_url, flow.repo)
    if flow.phase == "gate":
        for op in cmd.ops:
            op_forge = _op_forge(gh, flow, req, op, head_sha)
            StatusReporter(op_forge, op, head_sha, req.actor, links, None).publish("Queued: waiting for a free accelerator runner.")
        forge.set_status(head_sha, "pending", f"tunebot queued: {' '.join(cmd.ops)}"[:140], context="tunebot")
        return Outcome("authorized", f"authorized at {head_sha}", outputs)
    # tune phase: the SHA the gate pinned is the one we work on; refuse if the PR moved since.
    pinned = flow.authorized_sha or head_sha
    if not SHA.match(pinned):
        raise TunebotError(f"--sha must be a full 40-character commit SHA (got {pinned[:50]!r})")
    if head_sha != pinned:
        text = (f"The pull request moved from `{pinned[:10]}` to `{head_sha[:10]}` after `/tune` was authorized; "
                "nothing was run. Comment `/tune` again to tune the new head.")
        forge.reply(req.pr, req.comment_id, text, req.index)
        forge.set_status(pinned, "error", "tunebot: stale, head moved before the run", context="tunebot")
        return Outcome("stale", text, outputs)
    if flow.checkout is None:
        raise TunebotError("the tune phase needs --checkout <dir> (the repository checked out at the PR head)")
    scrub_secrets()
    try:
        return _tune_ops(req, forge, gh, flow, tune, pinned, pull.head_ref, outputs)
    except (TunebotError, subprocess.CalledProcessError, GithubException) as exc:
        # Whatever failed, the commit status and the status comments must not stay "pending/queued".
        what = _failure_text(exc)
        _report_failure(req, forge, gh, flow, pinned, links, what)
        forge.set_status(pinned, "failure", f"tunebot failed: {what}"[:140], context="tunebot")
        return Outcome("failed", what, outputs, exit_code=1)


def scrub_secrets() -> list[str]:
    """Remove the GitHub token and the Actions runtime variables from this process's environment.

    Kernels and proposers are PR code and inherit our environment; the forge client already holds
    its token. Nothing is restored afterwards: the process only handles this event, and any later
    op in it runs PR code too.
    """
    gone = [k for k in os.environ if k in SECRET_ENV or k.startswith(SECRET_ENV_PREFIXES)]
    for key in gone:
        del os.environ[key]
    return gone


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        detail = (exc.stderr or b"").decode(errors="replace").strip() if isinstance(exc.stderr, bytes) else str(exc.stderr or "").strip()
        return f"`{' '.join(map(str, exc.cmd))[:80]}` failed ({exc.returncode}): {detail[:200]}"
    return str(exc).strip()[:500] or type(exc).__name__


def _report_failure(req: Request, forge: GithubForge, gh: Github, flow: FlowConfig, pinned: str, links: "Links", what: str) -> None:
    """Say on each op's status comment what failed (best effort: the API may be what failed)."""
    assert req.command is not None
    try:
        existing = forge.status_comments(req.pr)
    except TunebotError:
        existing = {}
    targets = []
    for typed in req.command.ops:  # the comment may carry the resolved name (`demo/rms_norm` for `rms_norm`)
        targets.append(next((name for name in existing if name == typed or name.endswith("/" + typed)), typed))
    for op in dict.fromkeys(targets):
        reporter = StatusReporter(_op_forge(gh, flow, req, op, pinned), op, pinned, req.actor, links, None)
        reporter.phase = "failed"
        try:
            reporter.publish(f"**Failed:** {what}")
        except TunebotError:
            pass


def _tune_ops(req: Request, forge: GithubForge, gh: Github, flow: FlowConfig, tune: TuneFn, pinned: str,
              pull_head_ref: str, outputs: dict[str, str]) -> Outcome:
    assert req.command is not None and flow.checkout is not None
    cmd = req.command
    links = Links(flow.server_url, flow.repo)
    _ensure_commit(flow.checkout, pinned, flow.remote)
    checked = check_ops(flow.checkout, cmd.ops)
    if checked.problems:
        text = "\n".join(f"- {p}" for p in checked.problems)
        forge.reply(req.pr, req.comment_id, f"@{req.actor} I cannot tune that:\n{text}", req.index)
        forge.set_status(pinned, "error", "tunebot: unknown op", context="tunebot")
        return Outcome("refused", text, outputs, exit_code=0)
    results: list[str] = []
    stale = False
    failed = False
    for op, typed_names in checked.by_op().items():  # one run per op, however many ways it was named
        op_forge = _op_forge(gh, flow, req, op, pinned)
        op_forge.status_aliases = tuple(status_marker(t) for t in typed_names if t != op)  # the gate's "queued" comments
        reporter = StatusReporter(op_forge, op, pinned, req.actor, links, flow.checkout)
        if reporter.cancel_requested():  # cancelled while queued: the run's start would forget it
            reporter.phase = "cancelled"
            reporter.publish("Cancelled before it started; nothing was run.")
            results.append(f"{op}: cancelled before it started")
            continue
        moved = op_forge.head_moved()  # checked again right before any kernel runs (and between ops)
        if moved:
            stale = True
            reporter.phase = "stale"
            reporter.publish(op_forge.stale_notice(moved) + "\n\nNothing was run.")
            results.append(f"{op}: not run (head moved to {moved[:10]})")
            continue
        reporter.phase = "starting"
        reporter.publish()
        # remote=None: the loop does not push; the forge pushes in propose() with the token (push_remote).
        request = TuneRequest(repo=flow.checkout, op=op, base_ref=pinned, base_branch=pull_head_ref,
                              max_iters=cmd.max_iters, target_us=cmd.target_us, strategies=cmd.strategies,
                              remote=None, requester=req.actor)
        try:
            outcome = tune(request, forge=op_forge, progress=reporter)
        except TunebotError as exc:
            failed = True
            reporter.phase = "failed"
            reporter.publish(f"**Failed:** {exc}")
            results.append(f"{op}: failed: {exc}")
            continue
        except Exception:
            # A bug, not a user error: say so where the user looks, keep the traceback for the log.
            reporter.phase = "failed"
            reporter.publish("**Failed:** internal error; the traceback is in the workflow log.")
            forge.set_status(pinned, "error", f"tunebot: internal error on {op}", context="tunebot")
            raise
        moved = op_forge.head_moved()
        if moved:
            stale = True
            reporter.phase = "stale"
            reporter.publish(op_forge.stale_notice(moved))
            if outcome.proposal is not None:
                _mark_stale(op_forge, outcome, moved)
            results.append(f"{op}: stale (head moved to {moved[:10]})")
            continue
        reporter.phase = "done"
        link = (f"[#{outcome.proposal.id}]({outcome.proposal.url})" if outcome.proposal
                else f"none ({outcome.verdict}: {outcome.no_proposal_reason})")
        reporter.verdict = (f"**Verdict:** {outcome.stop_reason}; best {_us(outcome.best_us)} vs baseline "
                            f"{_us(outcome.baseline_us)} ({outcome.improvement_pct:+.1f}%) after {outcome.iterations} iterations. "
                            f"Proposal: {link}")
        reporter.publish()
        results.append(f"{op}: {outcome.improvement_pct:+.1f}% -> {link}")
    state, action = ("error", "stale") if stale else ("failure", "failed") if failed else ("success", "tuned")
    forge.set_status(pinned, state, f"tunebot {action}: " + "; ".join(results)[:120], context="tunebot")
    return Outcome(action, "\n".join(results), outputs, exit_code=1 if failed else 0)


def _op_forge(gh: Github, flow: FlowConfig, req: Request, op: str, sha: str) -> GithubForge:
    return GithubForge(gh, flow.repo, settings=flow.repo_cfg.github, op=op, pr_number=req.pr, guard_sha=sha,
                       checkout=flow.checkout, branch_prefix=flow.repo_cfg.branch_prefix, run_url=flow.run_url,
                       sleep=flow.sleep, bot_login=flow.bot_login, own_checks=flow.own_checks,
                       push_remote=flow.remote)


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
    have = subprocess.run(["git", "-C", str(checkout), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True)
    if have.returncode != 0:
        subprocess.run(["git", "-C", str(checkout), "fetch", "--quiet", remote, sha], check=True, capture_output=True)


# ---------------------------------------------------------------- review -> merge gate


def _review(req: Request, forge: GithubForge) -> Outcome:
    if req.review_state != "APPROVED":
        return Outcome("ignored", f"review state {req.review_state}: only approvals run the merge gate")
    prefix = forge.branch_prefix + "/"
    head_ref = req.head_ref or forge.pull_info(req.pr).head_ref
    if not head_ref.startswith(prefix):
        return Outcome("ignored", f"#{req.pr} is not a tunebot proposal (head {head_ref})")
    try:
        proposal = forge.merge(str(req.pr))
    except GateRefused as exc:
        text = ("**Not merged yet.** Missing:\n" + "\n".join(f"- {m}" for m in exc.missing)
                + "\n\nOnce these hold, approve again (or re-run the `tunebot review` workflow) to merge.")
        forge.upsert_comment(req.pr, GATE_MARKER, text)
        return Outcome("gate-refused", text, exit_code=exc.exit_code)
    text = f"**Merged** `{proposal.head}` at `{proposal.head_sha[:10]}` after approval; iteration branches deleted."
    forge.upsert_comment(req.pr, GATE_MARKER, text)
    return Outcome("merged", text)


# ---------------------------------------------------------------- schedule / dispatch


def _scheduled(req: Request, gh: Github, flow: FlowConfig, tune: TuneFn) -> Outcome:
    if req.kind == "invalid":
        return Outcome("refused", req.reason, exit_code=2)
    if req.task != "tune":
        return Outcome("ignored", f"task {req.task} runs in its own workflow (refresh-features.yml)")
    if flow.checkout is None:
        raise TunebotError("scheduled tuning needs --checkout <dir> (the default branch checked out)")
    ops = req.ops or flow.repo_cfg.github.ops
    if not ops:
        return Outcome("ignored", "no ops to tune: set github.ops in .tunebot.yml or pass the `ops` input")
    checked = check_ops(flow.checkout, tuple(ops))
    if checked.problems:
        return Outcome("refused", "\n".join(checked.problems), exit_code=2)
    forge = GithubForge(gh, flow.repo, settings=flow.repo_cfg.github, checkout=flow.checkout,
                        branch_prefix=flow.repo_cfg.branch_prefix, run_url=flow.run_url, sleep=flow.sleep)
    base = forge.repo.default_branch
    scrub_secrets()
    results, failed = [], False
    for op in checked.resolved.values():
        op_forge = GithubForge(gh, flow.repo, settings=flow.repo_cfg.github, op=op, checkout=flow.checkout,
                               branch_prefix=flow.repo_cfg.branch_prefix, run_url=flow.run_url, sleep=flow.sleep,
                               bot_login=flow.bot_login, push_remote=flow.remote)
        request = TuneRequest(repo=flow.checkout, op=op, base_ref=f"{flow.remote}/{base}", base_branch=base, remote=None,
                              requester=req.actor)
        try:
            outcome = tune(request, forge=op_forge, progress=None)
        except TunebotError as exc:
            failed = True
            results.append(f"{op}: failed: {exc}")
            continue
        results.append(f"{op}: {outcome.improvement_pct:+.1f}%" + (f" -> #{outcome.proposal.id}" if outcome.proposal else ""))
    return Outcome("failed" if failed else "tuned", "\n".join(results), exit_code=1 if failed else 0)
