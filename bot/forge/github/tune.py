"""A `/tune <op>...` command, per phase of the workflow.

`gate` (hosted runner, default branch's code): post "queued" per op, the pending status, and
plan the matrix (one job per op). `tune` (self-hosted runner, PR checked out at the pinned SHA;
`all` does gate-less tuning in one process): run each op, guarded against a moving head.
`report` (after all tune jobs): one summary and the combined status.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from github import GithubException

from bot.config.schema import GithubSettings
from bot.errors import TunebotError
from bot.forge.github import report as aggregate
from bot.forge.github.comments import status_marker
from bot.forge.github.context import SHA, Context, FlowConfig, Outcome
from bot.forge.github.events import Authorization, Request, check_ops
from bot.forge.github.job_guard import scrub
from bot.forge.github.runs import RETRY_HINT, OpRun
from bot.forge.github.status import (
    Links,
    StatusReporter,
    end_all,
    failure_text,
    matching,
    quoted,
    set_status,
    us,
)
from bot.git import remotes
from bot.run.stops import CANCELLED

Say = Callable[[str], None]  # adds a part to the comment's one reply


def handle(req: Request, auth: Authorization, ctx: Context, say: Say) -> Outcome:
    assert req.command is not None and auth.pull is not None
    pull, cmd = auth.pull, req.command
    head_sha = pull.head_sha
    outputs = {
        "authorized": "true",
        "head_sha": head_sha,
        "pr": str(pull.number),
        "ops": " ".join(cmd.ops),
    }
    if ctx.flow.phase == "gate":
        return _gate(req, ctx, head_sha, outputs)
    if ctx.flow.phase == "report":
        return _report(req, ctx, ctx.flow.authorized_sha or head_sha, outputs)
    # tune phase: the SHA the gate pinned is the one we work on; refuse if the PR moved since.
    pinned = ctx.flow.authorized_sha or head_sha
    if not SHA.match(pinned):
        raise TunebotError(f"--sha must be a full 40-character commit SHA (got {pinned[:50]!r})")
    ops = job_ops(cmd.ops, ctx.flow)
    if head_sha != pinned:
        text = (
            f"The pull request moved from `{pinned[:10]}` to `{head_sha[:10]}` after `/tune` was authorized; "
            "nothing was run. Comment `/tune` again to tune the new head."
        )
        say(text)
        end_all(
            ctx,
            req,
            pinned,
            ops,
            ("stale", text),
            ("error", "tunebot: stale, head moved before the run"),
        )
        return Outcome("stale", text, outputs)
    if ctx.flow.checkout is None:
        raise TunebotError(
            "the tune phase needs --checkout <dir> (the repository checked out at the PR head)"
        )
    scrub()
    try:
        return _tune_ops(req, ctx, pinned, pull.head_ref, outputs, say, ops)
    except (TunebotError, subprocess.CalledProcessError, GithubException) as exc:
        # Whatever failed, the commit status and the status comments must not stay "pending/queued".
        what = failure_text(exc)
        failed = ("failed", f"**Failed:**\n\n{quoted(what)}")
        end_all(ctx, req, pinned, ops, failed, ("failure", f"tunebot failed: {what}"))
        return Outcome("failed", what, outputs, exit_code=1)


# ---------------------------------------------------------------- gate


def _gate(req: Request, ctx: Context, head_sha: str, outputs: dict[str, str]) -> Outcome:
    """Post "queued" per op and the pending status; if that fails, leave nothing saying "queued"."""
    assert req.command is not None
    ops = req.command.ops
    links = Links(ctx.flow.server_url, ctx.flow.repo)
    try:
        finished_here = _done_at(ctx, req.pr, head_sha)
        for op in ops:
            if matching(finished_here, op):
                continue  # delivered at this very head: the tune job will say so; "done" stays
            op_forge = ctx.op_forge(op, req.pr, head_sha)
            queued = StatusReporter(op_forge, op, head_sha, req.actor, links)
            op_forge.post_status(queued.render("Queued: waiting for a free accelerator runner."))
        if len(ops) > 1 and req.pr is not None:  # one place that aggregates the jobs
            aggregate.post_queued_summary(ctx.forge, req.pr, req.comment_id, ops, head_sha)
        ctx.forge.comments.set_status(
            head_sha, "pending", f"tunebot queued: {' '.join(ops)}"[:140], context="tunebot"
        )
    except TunebotError as exc:
        what = failure_text(exc)
        text = f"**Failed before it started:** {what}\n\nNothing was run; comment `/tune` again."
        end_all(
            ctx, req, head_sha, ops, ("failed", text), ("error", f"tunebot: not started: {what}")
        )
        return Outcome("failed", what, {**outputs, "authorized": "false"}, exit_code=1)
    outputs = {**outputs, **matrix_outputs(ops, ctx.flow)}
    return Outcome("authorized", f"authorized at {head_sha}", outputs)


def _done_at(ctx: Context, pr: int | None, head_sha: str) -> list[str]:
    """Ops whose status comment says "done" for exactly this head (a re-delivered or repeated /tune)."""
    if pr is None:
        return []
    out = []
    for name, body in ctx.forge.comments.status_comments(pr).items():
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


def job_ops(ops: tuple[str, ...], flow: FlowConfig) -> tuple[str, ...]:
    """The ops this job tunes: all of the command's, or the matrix job's one."""
    if flow.only_op is None:
        return ops
    if flow.only_op not in ops and not any(
        flow.only_op.endswith("/" + op) or op.endswith("/" + flow.only_op) for op in ops
    ):
        raise TunebotError(f"--op {flow.only_op} is not one of the command's ops ({' '.join(ops)})")
    return (flow.only_op,)


# ---------------------------------------------------------------- report


def _report(req: Request, ctx: Context, sha: str, outputs: dict[str, str]) -> Outcome:
    """The matrix's final job: finish ops whose job died, one summary comment, the combined status."""
    assert req.command is not None and req.pr is not None
    links = Links(ctx.flow.server_url, ctx.flow.repo)

    def mark_lost(op: str, phase: str) -> None:
        reporter = StatusReporter(ctx.op_forge(op, req.pr, sha), op, sha, req.actor, links)
        reporter.final("failed", aggregate.lost_notice(op, phase))

    state, _, text = aggregate.report(
        ctx.forge, req.pr, req.comment_id, req.command.ops, sha, mark_lost
    )
    return Outcome("reported", text, outputs, exit_code=0 if state != "failure" else 1)


# ---------------------------------------------------------------- tune


def _tune_ops(
    req: Request,
    ctx: Context,
    pinned: str,
    pull_head_ref: str,
    outputs: dict[str, str],
    say: Say,
    ops: tuple[str, ...],
) -> Outcome:
    assert req.command is not None
    links = Links(ctx.flow.server_url, ctx.flow.repo)
    remotes.ensure_commit(ctx.checkout, pinned, ctx.flow.remote)
    checked = check_ops(ctx.checkout, ops)
    if checked.problems:
        text = "\n".join(f"- {p}" for p in checked.problems)
        say(f"@{req.actor} I cannot tune that:\n{text}")
        end_all(
            ctx,
            req,
            pinned,
            ops,
            ("not run", f"Not run:\n{text}"),
            ("error", "tunebot: unknown op"),
        )
        return Outcome("refused", text, outputs, exit_code=0)
    remote = ctx.remote_runs()
    # Before any PR code runs: records and branches of earlier runners.
    remote.restore(list(checked.by_op()))
    results: list[str] = []
    ended: set[str] = set()  # stale | failed | cancelled
    # One run per op, however many ways it was named.
    for op, typed_names in checked.by_op().items():
        op_forge = ctx.op_forge(op, req.pr, pinned, remote_runs=remote)
        # The gate's "queued" comments under the name as typed.
        op_forge.status_aliases = tuple(status_marker(t) for t in typed_names if t != op)
        reporter = StatusReporter(op_forge, op, pinned, req.actor, links)
        run = OpRun(ctx, op, pinned, pull_head_ref, f"comment:{req.comment_id}", remote, op_forge)
        line, end = _tune_op(run, req, reporter)
        results.append(f"{op}: {line}")
        ended |= {end} if end else set()
    if "stale" in ended:
        state, action = "error", "stale"
    elif "failed" in ended:
        state, action = "failure", "failed"
    elif "cancelled" in ended:
        state, action = "error", "cancelled"
    else:
        state, action = "success", "tuned"
    # A matrix job reports its own op; the report job sets the combined `tunebot` status.
    set_status(
        ctx.forge,
        pinned,
        state,
        f"tunebot {action}: " + "; ".join(results)[:120],
        context="tunebot" if ctx.flow.only_op is None else f"tunebot/{ops[0]}",
    )
    return Outcome(
        "tuned" if action == "cancelled" else action,
        "\n".join(results),
        outputs,
        exit_code=1 if "failed" in ended else 0,
    )


def _tune_op(run: OpRun, req: Request, reporter: StatusReporter) -> tuple[str, str]:
    """One op of the command: (its result line, how it ended if not plainly: stale | failed | cancelled)."""
    forge = run.forge
    noop = run.already_finished()
    if noop:
        # A re-delivered event, a second /tune or a re-run on a fresh runner: the run is complete.
        return noop, ""
    if forge.cancel_requested():  # cancelled while queued: the run's start would forget it
        reporter.final("cancelled", "Cancelled before it started; nothing was run.")
        return "cancelled before it started", "cancelled"
    moved = forge.head_moved()  # checked again right before any kernel runs (and between ops)
    if moved:
        reporter.final("stale", forge.stale_notice(moved) + "\n\nNothing was run.")
        return f"not run (head moved to {moved[:10]})", "stale"
    reporter.final("starting")
    try:
        outcome = run.tune(req.actor, req.command, progress=reporter)
    except TunebotError as exc:
        reporter.final("failed", f"**Failed:**\n\n{quoted(str(exc))}\n\n{RETRY_HINT}")
        return f"failed: {exc}", "failed"
    except Exception:
        # A bug, not a user error: say so where the user looks, keep the traceback for the log.
        reporter.final(
            "failed", "**Failed:** internal error; the traceback is in the workflow log."
        )
        set_status(forge, run.sha, "error", f"tunebot: internal error on {run.op}")
        raise
    moved = forge.head_moved()
    if moved:
        reporter.final("stale", forge.stale_notice(moved))
        if outcome.proposal is not None:
            forge.mark_stale(outcome.proposal.id, moved)
        return f"stale (head moved to {moved[:10]})", "stale"
    was_cancelled = outcome.stop_reason == CANCELLED
    link = (
        f"[#{outcome.proposal.id}]({outcome.proposal.url})"
        if outcome.proposal
        else f"none ({outcome.verdict}: {outcome.no_proposal_reason})"
    )
    reporter.verdict = (
        f"**Verdict:** {outcome.stop_reason}; best {us(outcome.best_us)} vs baseline "
        f"{us(outcome.baseline_us)} ({outcome.improvement_pct:+.1f}%) after {outcome.iterations} "
        f"iterations. Proposal: {link}"
    ) + (f"\n\n> [!WARNING]\n> {reporter.noise_warning}" if reporter.noise_warning else "")
    notes = "\n".join(f"> [!NOTE]\n> {w}" for w in forge.warnings)
    reporter.final("cancelled" if was_cancelled else "done", notes)
    line = f"{outcome.improvement_pct:+.1f}% -> {link}" + (" (cancelled)" if was_cancelled else "")
    return line, "cancelled" if was_cancelled else ""
