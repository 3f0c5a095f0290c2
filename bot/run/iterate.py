"""The measuring steps of an op run: the baseline, one iteration per planned variant, the stop.

Crash safety: every step first writes its git objects, then appends its results.jsonl record
(the commit point), then moves refs. A run killed at any moment resumes from the records:
nothing recorded is measured again, and refs are recreated from the recorded shas.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
from typing import Any

from bot import naming, source_text
from bot.git import branches, commits, repository
from bot.measure.evaluator import Evaluator
from bot.measure.types import Decision, LatencyResult
from bot.record.opt_log import LogRow, OptLog, render_opt_log
from bot.run import common, delivery, stops
from bot.run import records as rec
from bot.run import state as rs
from bot.run.errors import BaselineFailed
from bot.run.prepare import OpRun, PendingBaseline
from bot.strategies import catalog, explain
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.planner import Planner
from bot.strategies.proposer import ExternalProposer
from bot.strategies.source import source_hash


def planner(run: OpRun) -> Planner:
    return Planner(
        run.op, evidence=delivery.evidence_at(run.repo, run.base_sha), proposer=_proposer(run)
    )


def _proposer(run: OpRun) -> ExternalProposer | None:
    argv = run.op.proposer or run.repo_cfg.proposer
    if not argv:
        return None
    return ExternalProposer(
        tuple(argv), cwd=run.worktree, timeout_s=run.repo_cfg.proposer_timeout_s
    )


def phase(run: OpRun, name: str, iteration: int | None) -> None:
    """Progress between result lines (0: the baseline; None: after the loop)."""
    run.event(
        "phase", iteration=iteration, message=name, data={"max_iters": run.settings.max_iters}
    )


# ---------------------------------------------------------------- the baseline


def measure_baseline(run: OpRun, evaluator: Evaluator) -> None:
    """L0 of the start source, then its latency, recorded (the `baseline` record).

    On a backend that times pairs (cpu), the latency waits for the first comparison: every
    decision times the best side by side with the candidate, so the first pair measures
    the baseline anyway, at no extra cost; a separate measurement first would cost one
    measurement and decide nothing. It is timed alone on other backends and when no pair comes
    first (`settle_baseline`). A baseline the first pair finds at or under the target stops the
    run before anything is recorded of that candidate: the run tries nothing, as when the
    baseline was timed alone first (the cost: that candidate's L0 run).
    """
    # A merged best on the base is where this run starts: its gains are against what the base holds.
    rel, note = delivery.start_source(run.repo, run.base_sha, run.op)
    source = run.worktree / rel
    phase(run, "baseline L0", 0)
    accuracy = evaluator.accuracy(source)
    if not accuracy.passed:
        why = f": {accuracy.reason}" if accuracy.reason else ""
        raise BaselineFailed(
            f"the baseline {rel} fails L0 ({accuracy.status}{why})"
            f"{_toolchain_hint(accuracy.tail)}:\n{accuracy.tail[-1500:]}"
        )
    run.pending_baseline = PendingBaseline(rel, note, accuracy)
    if not evaluator.pairs:
        settle_baseline(run, evaluator)


def settle_baseline(
    run: OpRun, evaluator: Evaluator, paired: tuple[int, str] | None = None
) -> bool:
    """Record a pending baseline: with the best's side of the first pair `evaluator.compare`
    just timed, when `paired` (iteration, candidate source hash) is given and that side has a
    latency; else timed alone now. Nothing to do when no baseline is pending. True when the
    baseline came from that pair and already meets the target: the candidate is not recorded."""
    pending = run.pending_baseline
    if pending is None:
        return False
    source = run.worktree / pending.path
    latency = evaluator.paired_best if paired is not None else None
    paired_with: dict[str, Any] = {}
    met = False
    if latency is not None and latency.ok and paired is not None:
        paired_with = {"iteration": paired[0], "source_hash": paired[1]}
        target = run.settings.target_us
        met = target is not None and latency.median_us is not None and latency.median_us <= target
        latency = dataclasses.replace(
            latency,
            notes=[
                *latency.notes,
                f"timed side by side with iteration {paired[0]}'s candidate, in turns "
                "(the first pair of its decision), half the repeats",
                *(
                    ["that candidate is not recorded: the baseline already meets the target"]
                    if met
                    else []
                ),
            ],
        )
    else:
        phase(run, "baseline timing", 0)
        latency = evaluator.latency(source)
    if not latency.ok:
        why = f": {'; '.join(latency.notes)}" if latency.notes else ""
        if latency.command:
            why += f"; command: {shlex.join(latency.command)}"
        raise BaselineFailed(
            f"the baseline {pending.path} could not be timed ({latency.status}{why})"
            f"{_toolchain_hint(latency.tail)}:\n{latency.tail[-1500:]}"
        )
    env = evaluator.environment(source, run.base_sha)
    record = rec.Baseline(
        sha=run.base_sha,
        path=pending.path,
        accuracy=dataclasses.asdict(pending.accuracy),
        latency=dataclasses.asdict(latency),
        environment=dataclasses.asdict(env),
        paired_with=paired_with,
        time=common.now(),
    )
    run.log.append(record.to_json())
    run.pending_baseline = None
    merged = f" ({pending.note})" if pending.note else ""
    if pending.path != run.op.source.as_posix():
        recorded = delivery.merged_latency(run.repo, run.base_sha, run.op)
        merged = (
            f" (starting from the merged best {pending.path}"
            + (f", recorded at {recorded:.2f} us, re-measured now" if recorded is not None else "")
            + ")"
        )
    run.event(
        "baseline",
        iteration=0,
        latency_us=latency.median_us,
        accuracy=pending.accuracy.status,
        sha=run.base_sha,
        message=f"baseline {latency.median_us:.2f} us{merged}",
    )
    return met


def _toolchain_hint(tail: str) -> str:
    """Name a missing toolchain module instead of asking to fix the op."""
    missing = delivery.missing_module(tail)
    if missing is None:
        return "; fix it first"
    return (
        f": this machine lacks the `{missing}` module the op needs; run it where that toolchain is "
        "installed (an NPU runner for TileLang-NPUIR ops), or install it"
    )


# ---------------------------------------------------------------- iterating


def _context(run: OpRun, state: rs.RunState) -> PlanContext:
    """What the planner plans from: the best-so-far source, every attempt, the allowed strategies."""
    return PlanContext(_best_source(run, state), tuple(state.attempts), run.settings.strategies)


def _untried(plan: Planner, run: OpRun, state: rs.RunState) -> list[str]:
    """Knobs the planner could still try that this run never tried (asked by 连续无提升)."""
    return plan.untried(_context(run, state))


def iterate(run: OpRun, evaluator: Evaluator, state: rs.RunState) -> None:
    """Plan and measure one variant at a time until a stop rule fires (bot.run.stops)."""
    plan = planner(run)
    limits = stops.Limits(
        max_iters=run.settings.max_iters,
        patience=run.settings.patience,
        target_us=run.settings.target_us,
    )
    while True:
        reason = stops.first_firing(
            stops.StopContext(
                state,
                limits,
                run.cancel_file,
                run.forge.cancel_requested,
                untried=functools.partial(_untried, plan, run, state),
            )
        )
        if reason is not None:
            break
        ctx = dataclasses.replace(
            _context(run, state),
            profile_summary=_profile_summary(state),
            last_failure=state.last_failure,
        )
        best_source = ctx.best_source
        variant = plan.next(ctx)
        if isinstance(variant, Refusal) and variant.attempt is not None and not variant.exhausted:
            _record_rejection(run, state, variant)
            state = run.state()
            continue
        if not isinstance(variant, Variant):
            reason = stops.EXHAUSTED
            break
        _run_iteration(run, evaluator, state, variant, best_source)
        state = run.state()
    settle_baseline(run, evaluator)  # stopped before any comparison timed it: timed alone
    state = run.state()
    finish(run, evaluator, state, reason, explain.not_planned(plan, _context(run, state)))


def _best(run: OpRun, state: rs.RunState) -> tuple[str, str]:
    """(commit, repo-relative path) of the best-so-far: the baseline's while it is pending."""
    if state.baseline is None and run.pending_baseline is not None:
        return run.base_sha, run.pending_baseline.path
    assert state.best_sha is not None and state.best_path is not None
    return state.best_sha, state.best_path


def _best_source(run: OpRun, state: rs.RunState) -> str:
    """The best-so-far source as committed (read from git once per best, not once per iteration)."""
    key = _best(run, state)
    if key not in run.sources:
        run.sources.clear()
        run.sources[key] = _committed(run, *key)
    return run.sources[key]


def _committed(run: OpRun, sha: str, path: str) -> str:
    text = repository.read_file(run.repo, sha, path)
    assert text is not None  # read without missing_ok: a missing file raises
    return text


def _record_rejection(run: OpRun, state: rs.RunState, refusal: Refusal) -> None:
    """A proposal refused before evaluation: kept in the records, never an iteration."""
    assert refusal.attempt is not None
    record = rec.Rejected(
        key=f"{rec.REJECTED}:{state.rejections + 1}",
        attempt=rs.attempt_to_dict(refusal.attempt),
        reason=refusal.reason,
        time=common.now(),
    )
    run.log.append(record.to_json())
    run.event(
        "iteration",
        strategy=refusal.strategy,
        verdict="rejected",
        change=refusal.attempt.change.description,
        message=refusal.reason,
    )


def _profile_summary(state: rs.RunState) -> dict[str, Any]:
    best = state.best_latency
    return {
        "baseline_us": state.baseline_us,
        "best_us": state.best_us,
        "best_iteration": state.best_iteration,
        "spread": best.spread if best else None,
        "backend": best.backend if best else None,
    }


def _run_iteration(
    run: OpRun, evaluator: Evaluator, state: rs.RunState, variant: Variant, best_source: str
) -> None:
    best_sha, best_path = _best(run, state)
    n = state.next_iteration
    _materialize(run, best_path, best_source)
    rel = run.rel(f"{run.op.name}_opt_v{n}.py")
    path = run.worktree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source_text.encode(variant.source))
    phase(run, "L0", n)
    accuracy = evaluator.accuracy(path)
    latency: LatencyResult | None = None
    decision: Decision | None = None
    paired = False
    if accuracy.passed:
        # and deciding: on the cpu backend both run as pairs side by side (the first pair
        # also times a pending baseline: its phase says so)
        phase(run, "timing" if run.pending_baseline is None else "baseline timing", n)
        latency, decision = evaluator.compare(
            run.worktree / best_path, state.best_latency, path, run.settings.noise_floor
        )
        paired = True
    # recorded before the iteration that compares with it
    if settle_baseline(run, evaluator, (n, variant.source_hash) if paired else None):
        return  # the baseline already meets the target: the run tries nothing (达目标 next)
    state = run.state()
    assert state.baseline is not None
    verdict = _verdict(variant, accuracy.status, latency, decision)
    branch = naming.iteration_branch(run.prefix, n)
    median = latency.median_us if latency and latency.ok else None
    accuracy_d = dataclasses.asdict(accuracy)
    latency_d = dataclasses.asdict(latency) if latency else None
    decision_d = dataclasses.asdict(decision) if decision else None
    reason = rs.iteration_reason(verdict, decision_d, accuracy_d, latency_d)
    phase(run, "commit", n)
    rows = [
        *delivery.log_rows(state),
        LogRow(
            iter=n,
            strategy=f"{variant.change.strategy} {variant.change.description}",
            latency_us=median,
            gain_pct=rs.gain_pct(state.baseline_us, median),
            accuracy=accuracy.status,
            verdict=verdict,
            reason=reason,
        ),
    ]
    opt_log = OptLog(
        op=run.op.name,
        baseline_us=state.baseline_us,
        baseline_source=delivery.baseline_label(run.op, state.baseline.path),
        rows=rows,
        conclusion=None,
    )
    parent = f"iter {state.best_iteration}" if state.best_iteration else "baseline"
    shown = f"{median:.2f} us" if median is not None else "-"
    message = (
        f"tunebot: {run.op.name} v{n}: {variant.change.strategy}: {variant.change.description}\n\n"
        f"Parent: best-so-far {parent} ({best_sha[:12]}).\nL0: {accuracy.status}; "
        f"latency: {shown}; verdict: {verdict}."
    )
    sha = commits.commit_files(
        run.repo,
        best_sha,
        {
            rel: source_text.encode(variant.source),
            run.rel("opt_log.md"): render_opt_log(opt_log).encode(),
        },
        message,
    )
    env = evaluator.environment(path, sha)
    record = rec.Iteration(
        key=rec.iteration_key(n),
        iteration=n,
        parent=best_sha,
        parent_iteration=state.best_iteration,
        branch=branch,
        sha=sha,
        path=rel,
        change=rs.change_to_dict(variant.change),
        source_hash=variant.source_hash,
        parent_hash=source_hash(best_source),
        diff=variant.diff,
        accuracy=accuracy_d,
        latency=latency_d,
        decision=decision_d,
        verdict=verdict,
        reason=reason,
        environment=dataclasses.asdict(env),
        time=common.now(),
    )
    run.log.append(record.to_json())  # the commit point
    branches.create_branch(run.repo, branch, sha)
    run.event(
        "iteration",
        iteration=n,
        strategy=variant.change.strategy,
        change=variant.change.description,
        latency_us=median,
        accuracy=accuracy.status,
        verdict=verdict,
        gain_pct=rs.gain_pct(state.baseline_us, median),
        branch=branch,
        sha=sha,
        message=reason,
        data={
            "gain_vs_best_pct": decision.gain * 100 if decision else None,
            "max_iters": run.settings.max_iters,
            "detectable": decision.detectable if decision else None,
        },
    )


def _materialize(run: OpRun, rel: str, source: str) -> None:
    """Make sure the best-so-far source is on disk in the worktree (a resumed run may lack it)."""
    path = run.worktree / rel
    data = source_text.encode(source)
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _verdict(
    variant: Variant, accuracy: str, latency: LatencyResult | None, decision: Decision | None
) -> str:
    if accuracy == "fail":
        return "fail_l0"
    if accuracy in ("timeout", "error"):
        return accuracy
    if latency is None or not latency.ok:
        return "timeout" if latency is not None and latency.status == "timeout" else "error"
    if catalog.is_style(variant.change.strategy):
        return "style"  # e.g. v-ops are plain aliases upstream: a rename cannot be a speed-up
    return "better" if decision and decision.better else "not_better"


# ---------------------------------------------------------------- stopping


def _remeasure_baseline(
    run: OpRun, evaluator: Evaluator, state: rs.RunState
) -> tuple[LatencyResult, bool]:
    """The baseline timed again at the end, the way it was timed at the start (alone, or in one
    process beside the same candidate), and whether the two compare like with like (a drift)."""
    assert state.baseline is not None
    base = run.worktree / state.baseline.path
    paired = state.baseline.paired_with
    if not paired:
        return evaluator.latency(base), True
    partner = next(
        (
            it
            for it in state.iterations
            if it.n == paired.get("iteration") and it.source_hash == paired.get("source_hash")
        ),
        None,
    )
    # that candidate is not recorded when the baseline already met the target (or when a run
    # resumed after a kill planned another first candidate): the start has no like to compare
    if partner is None:
        latency = evaluator.latency(base)
        latency.notes.append(
            "timed alone; the start was timed beside a candidate no iteration records: no drift"
        )
        return latency, False
    _materialize(run, partner.path, _committed(run, partner.sha, partner.path))
    latency, _ = evaluator.latency_pair(base, run.worktree / partner.path)
    latency.notes.append(
        f"timed as at the start: side by side with iteration {partner.n}'s candidate"
    )
    return latency, True


def finish(
    run: OpRun,
    evaluator: Evaluator,
    state: rs.RunState,
    reason: str,
    not_planned: list[str] | None = None,
) -> None:
    """Re-measure the baseline for drift, then record the stop (with what was never planned)."""
    assert state.baseline is not None
    if state.baseline_end is None:
        phase(run, "baseline re-measure", None)
        _materialize(
            run,
            state.baseline.path,
            _committed(run, run.base_sha, state.baseline.path),
        )
        latency, like = _remeasure_baseline(run, evaluator, state)
        start = state.baseline_us
        median = latency.median_us
        drift = (
            ((median - start) / start * 100.0)
            if like and latency.ok and start and median is not None
            else None
        )
        end = rec.BaselineEnd(
            sha=run.base_sha,
            latency=dataclasses.asdict(latency),
            drift_pct=drift,
            time=common.now(),
        )
        run.log.append(end.to_json())
    stop = rec.Stop(
        reason=reason,
        iterations=len(state.iterations),
        best_iteration=state.best_iteration,
        best_sha=state.best_sha,
        not_planned=list(not_planned or []),
        time=common.now(),
    )
    run.log.append(stop.to_json())
    warning = rs.noise_warning(state, run.settings.noise_warn)
    run.event(
        "stop",
        iteration=len(state.iterations),
        message=reason + (f" · {warning}" if warning else ""),
        latency_us=state.best_us,
        data={
            **dataclasses.asdict(run.settings),
            "detectable": state.smallest_detectable,
            "noise_warning": warning,
        },
    )
