"""The end of an op run: the delivery commit and branch, the proposal, the outcome; and the plan
of a --dry-run."""

from __future__ import annotations

import dataclasses

from bot import naming
from bot.forge.base import Proposal
from bot.git import commits, repository
from bot.run import common, delivery
from bot.run import records as rec
from bot.run import state as rs
from bot.run.iterate import phase, planner
from bot.run.prepare import OpRun
from bot.run.proposal_body import proposal_body, proposal_title
from bot.run.request import RunOutcome, planned
from bot.run.stops import stop_reason_text
from bot.strategies import explain
from bot.strategies.base import PlanContext


def deliver(run: OpRun, state: rs.RunState) -> None:
    assert state.best_sha is not None
    phase(run, "delivery commit", None)
    files = delivery.delivery_files(
        run.repo, run.base_sha, run.op, state, run.log.path.read_bytes()
    )
    report = delivery.report_text(
        run.op, state, run.settings.noise_floor, run.worktree, run.settings.noise_warn
    )
    best = f"iter {state.best_iteration}" if state.best_iteration else "(baseline kept)"
    message = f"tunebot: {run.op.name}: best variant {best}\n\n{report}"
    sha = commits.commit_files(run.repo, state.best_sha, files, message)
    record = rec.Delivery(branch=run.delivery_branch, sha=sha, report=report, time=common.now())
    run.log.append(record.to_json())
    _ensure_delivery_branch(run, sha)
    run.event("delivered", branch=run.delivery_branch, sha=sha, message=report)


def _ensure_delivery_branch(run: OpRun, sha: str) -> None:
    def moved(current: str) -> None:
        run.event(
            "delivered",
            branch=run.delivery_branch,
            sha=current,
            message=f"{run.delivery_branch} has moved on from tunebot's {sha[:10]} to "
            f"{current[:10]}; left as it is",
        )

    common.ensure_branch(run.repo, run.delivery_branch, sha, moved)


def restore_refs(run: OpRun, state: rs.RunState) -> None:
    """Recreate iteration refs a crash left unwritten (their commits are recorded)."""
    common.restore_refs(run.repo, ((it.branch, it.sha) for it in state.iterations))


def propose(run: OpRun, state: rs.RunState) -> Proposal | None:
    """Open (or update) the proposal, only when the run beat what the base holds (TUNING_COMPLETED)."""
    assert state.delivery is not None
    report = state.delivery.report
    restore_refs(run, state)
    _ensure_delivery_branch(run, state.delivery.sha)
    if delivery.run_verdict(state)[1]:
        _close_superseded(run)
        return (
            None  # no gain, a cancel or nothing to try: branches and records stay, nothing proposed
        )
    title = proposal_title(run.op.qualified, state)
    body = proposal_body(
        report,
        state,
        run.settings,
        run.op.qualified,
        run.rel(f"{run.op.name}.py"),
        branch_url=getattr(run.forge, "branch_url", None),
    )
    proposal = run.forge.propose(
        run.delivery_branch, run.base_branch, title, body, labels=list(run.repo_cfg.github.labels)
    )
    if state.proposal is None or str(state.proposal.id) != str(proposal.id):
        record = rec.ProposalRecord(
            key=f"{rec.PROPOSAL}:{proposal.id}",
            id=proposal.id,
            url=proposal.url,
            time=common.now(),
        )
        run.log.append(record.to_json())
    return proposal


def _close_superseded(run: OpRun) -> None:
    """An open proposal of an earlier (restarted) run follows the delivery branch, which now holds
    this run's delivery: its body no longer describes its head, so it is closed rather than left
    to be merged."""
    existing = run.forge.find_proposal(run.delivery_branch)
    close = getattr(run.forge, "close", None)
    if existing is None or close is None:
        return
    close(existing.id)
    run.event(
        "note",
        message=(
            f"closed proposal #{existing.id}: it came from an earlier run, and "
            f"{run.delivery_branch} now holds this run's delivery, which is not proposed"
        ),
    )


def outcome(run: OpRun, state: rs.RunState, proposal: Proposal | None) -> RunOutcome:
    assert state.stop is not None and state.delivery is not None
    verdict, why_not = delivery.run_verdict(state)
    return RunOutcome(
        op=run.op.qualified,
        stop_reason=state.stop.reason,
        iterations=len(state.iterations),
        baseline_us=state.baseline_us,
        best_us=state.best_us,
        best_iteration=state.best_iteration,
        improvement_pct=rs.gain_pct(state.baseline_us, state.best_us) or 0.0,
        delivery_branch=run.delivery_branch,
        proposal=proposal,
        report=state.delivery.report,
        results_path=run.log.path,
        drift_pct=state.drift_pct,
        perf_dir=run.op.perf_dir.as_posix(),
        iteration_prefix=naming.iteration_prefix(run.prefix),
        verdict=verdict,
        no_proposal_reason=why_not,
        stop_text=stop_reason_text(
            state.stop.reason,
            max_iters=run.settings.max_iters,
            patience=run.settings.patience,
            target_us=run.settings.target_us,
        ),
    )


def dry_run(run: OpRun) -> RunOutcome:
    """The plan the run would follow now: from the recorded best with the recorded attempts when a
    run of this op is recorded (what a resume does), else from the base."""
    state = rs.RunState() if run.request.restart else run.state()
    sha, path = run.base_sha, run.op.source.as_posix()
    if state.best_sha is not None and state.best_path is not None:
        sha, path = state.best_sha, state.best_path
    source = repository.read_file(run.repo, sha, path)
    assert source is not None  # read without missing_ok: a missing file raises
    ctx = PlanContext(
        best_source=source, history=tuple(state.attempts), allowed=run.settings.strategies
    )
    plan = planner(run).plan(ctx)
    failed = [f"  - not planned: {line}" for line in explain.failed_moves(ctx.history)]
    at = next((i for i, line in enumerate(plan) if line.startswith("nothing left")), len(plan))
    plan[at:at] = failed
    if state.stop is not None:
        plan.append(
            f"the recorded run has stopped ({state.stop.reason}); `tunebot tune --restart` "
            "starts over from the base"
        )
    run.event(
        "plan",
        message="\n".join(plan),
        data={"settings": dataclasses.asdict(run.settings)},
    )
    return planned(run.op.qualified, run.log.path, plan)
