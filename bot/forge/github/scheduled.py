"""The weekly schedule and manual dispatch: tune `github.ops` on the default branch's head."""

from __future__ import annotations

from bot import naming
from bot.errors import TunebotError
from bot.forge.github.context import Context, Outcome
from bot.forge.github.events import Request, check_ops
from bot.forge.github.job_guard import scrub
from bot.forge.github.runs import OpRun
from bot.forge.github.tune import job_ops, matrix_outputs


def handle(req: Request, ctx: Context) -> Outcome:
    flow = ctx.flow
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
    if flow.phase == "report":  # no pull request to comment on: the log lists each open proposal
        return _report(ctx, ops)
    ops = job_ops(ops, flow)
    checked = check_ops(flow.checkout, ops)
    if checked.problems:
        return Outcome("refused", "\n".join(checked.problems), exit_code=2)
    base = ctx.forge.repo.default_branch
    from bot.git import repository

    base_sha = repository.resolve(repository.open_repo(flow.checkout), f"{flow.remote}/{base}")
    remote = ctx.remote_runs()
    remote.restore(list(checked.by_op()))  # before any PR code runs
    scrub()
    results, failed = [], False
    for op in checked.by_op():
        op_forge = ctx.forge.for_run(op, base_sha=base_sha, remote_runs=remote)
        trigger = f"run:{flow.run_url or req.event}"
        run = OpRun(ctx, op, base_sha, base, trigger, remote, op_forge)
        noop = run.already_finished()
        if noop:
            results.append(f"{op}: {noop}")
            continue
        try:
            outcome = run.tune(req.actor)
        except TunebotError as exc:
            failed = True
            results.append(f"{op}: failed: {exc}")
            continue
        results.append(
            f"{op}: {outcome.improvement_pct:+.1f}%"
            + (f" -> #{outcome.proposal.id}" if outcome.proposal else "")
        )
    return Outcome(
        "failed" if failed else "tuned", "\n".join(results), exit_code=1 if failed else 0
    )


def _report(ctx: Context, ops: tuple[str, ...]) -> Outcome:
    prefix = ctx.flow.repo_cfg.branch_prefix
    lines = []
    for op in ops:
        found = ctx.forge.find_proposal(naming.op_delivery_branch(prefix, op))
        lines.append(
            f"{op}: " + (f"proposal #{found.id} {found.url}" if found else "no open proposal")
        )
    return Outcome("reported", "\n".join(lines))
