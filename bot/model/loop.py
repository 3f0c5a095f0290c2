"""The model-level loop: baseline -> analysis -> one feature setting per iteration -> re-verify.

建立基线 -> 瓶颈分析 -> 根因定位 -> 保守修补 -> 复验, with the operator loop's guarantees
(docs/model.md):

- one change per iteration: one key of the settings file set to one value, committed on
  `tunebot/<model>/v<N>` whose parent is the best-so-far commit;
- results.jsonl is the truth and append-only. Per iteration: measure -> write the commit
  object -> append the record (the commit point) -> create the branch. A kill before the
  append redoes the iteration; after it, resume recreates a missing branch. Nothing is
  measured twice once recorded, and nothing is recorded twice (unique keys);
- an iteration whose workload facts differ from the baseline's is refused (recorded, never
  built upon); one whose outputs fall under the cosine threshold is rejected by the gate;
- the noise rule is the operator loop's (bot.measure.decide), with a 3 % floor by default.

The second kind of target of bot/run: `ModelSteps` for bot.run.machine.drive, with the
shared run machinery (bot/run/common.py). Preparing: bot/model/prepare.py; measuring:
bot/model/iterate.py. Knows no GitHub.
"""

from __future__ import annotations

import dataclasses

from bot import naming
from bot.forge.base import Forge, Proposal
from bot.git import commits
from bot.model import records
from bot.model import run_records as mr
from bot.model import spec as spec_mod
from bot.model import state as ms
from bot.model.iterate import baseline, iterate
from bot.model.prepare import UNDECLARED, ModelRun, prepare, record, settings_text
from bot.model.rank import rank
from bot.run import common
from bot.run.machine import drive
from bot.run.request import ProgressCallback, ProgressEvent, RunOutcome, TuneRequest, planned
from bot.run.target import Resolved


def run_model(
    request: TuneRequest, resolved: Resolved, forge: Forge, progress: ProgressCallback
) -> RunOutcome:
    """Run (or resume) one tuning run of a model target and propose the best settings
    (bot.run.machine.run_tune calls this for a name that `resolved` found to be a model)."""
    run = prepare(request, resolved, forge, progress)
    if request.dry_run:
        return _dry_run(run)
    with common.run_lock(run.state_dir, run.target.qualified):
        return drive(ModelSteps(run))


# ---------------------------------------------------------------- the run


class ModelSteps:
    """The steps of a model run for bot.run.machine.drive (the same sequence as an op's)."""

    def __init__(self, run: ModelRun) -> None:
        self.run = run

    def state(self) -> ms.ModelState:
        return ms.replay(self.run.log.read())

    def begin(self, state: ms.ModelState) -> None:
        run = self.run
        if state.start is None:
            record(
                run,
                {
                    "key": "start",
                    "kind": mr.START,
                    "model": run.target.qualified,
                    "base_sha": run.base_sha,
                    "base_branch": run.base_branch,
                    "stop": dataclasses.asdict(run.spec.stop),
                    "features_file": run.spec.features_file,
                    "table_version": run.table.meta.get("docs_version", UNDECLARED),
                    "requester": run.request.requester,
                    "time": common.now(),
                },
            )
            # a cancel of an earlier run must not stop this one
            common.cancel_file(run.state_dir).unlink(missing_ok=True)
            run.progress(
                ProgressEvent(
                    "start",
                    run.target.qualified,
                    sha=run.base_sha,
                    message=f"tuning model {run.target.qualified} at {run.base_sha[:10]}",
                )
            )
        else:
            _restore_refs(run, state)
            run.progress(
                ProgressEvent(
                    "resumed",
                    run.target.qualified,
                    iteration=len(state.iterations),
                    message=f"resuming after {len(state.iterations)} recorded iterations",
                )
            )

    def baseline(self) -> None:
        baseline(self.run)

    def iterate(self, state: ms.ModelState) -> None:
        iterate(self.run)

    def deliver(self, state: ms.ModelState) -> None:
        _deliver(self.run, state)

    def propose(self, state: ms.ModelState) -> Proposal | None:
        return _propose(self.run, state)

    def outcome(self, state: ms.ModelState, proposal: Proposal | None) -> RunOutcome:
        return _outcome(self.run, state, proposal)


# ---------------------------------------------------------------- delivering


def _deliver(run: ModelRun, state: ms.ModelState) -> None:
    report = records.render_report(
        run.target.project,
        run.target.name,
        run.spec.settings_file.as_posix(),
        state,
        run.spec.features_file,
        run.spec.stop.noise_floor,
    )
    files: dict[str, bytes | None] = {
        run.rel("opt_log.md"): records.render_opt_log(
            run.target.name, state, run.spec.features_file
        ).encode(),
        run.rel("results.jsonl"): run.log.path.read_bytes(),
        run.rel("baseline_settings.yaml"): (settings_text(run, run.base_sha) or "").encode(),
        run.rel("report.md"): report.encode(),
    }
    which = f"iter {state.best_iteration}" if state.best_iteration else "(baseline kept)"
    sha = commits.commit_files(
        run.repo,
        state.best_sha,
        files,
        f"tunebot: {run.target.name}: best settings {which}\n\n{report}",
    )
    record(
        run,
        {
            "key": "delivery",
            "kind": mr.DELIVERY,
            "branch": run.delivery_branch,
            "sha": sha,
            "report": report,
            "time": common.now(),
        },
    )
    _ensure_branch(run, run.delivery_branch, sha)
    run.progress(
        ProgressEvent(
            "delivered", run.target.qualified, branch=run.delivery_branch, sha=sha, message=report
        )
    )


def _ensure_branch(run: ModelRun, name: str, sha: str) -> None:
    common.ensure_branch(run.repo, name, sha, None)  # moved on by a person: left as it is


def _restore_refs(run: ModelRun, state: ms.ModelState) -> None:
    """Recreate iteration branches a kill left unwritten (their commits are recorded)."""
    common.restore_refs(run.repo, ((it.branch, it.sha) for it in state.iterations))


def _propose(run: ModelRun, state: ms.ModelState) -> Proposal | None:
    """Open (or update) the proposal, only when a setting beat the baseline (TUNING_COMPLETED)."""
    _restore_refs(run, state)
    _ensure_branch(run, run.delivery_branch, state.delivered.sha)
    if records.run_verdict(state)[1]:
        return None  # no gain, a cancel or nothing to try: branches and records stay, nothing is proposed
    gain = records._gain(state) or 0.0
    title = f"tunebot: {run.target.qualified} {gain:+.1f}% ({state.stopped.reason})"
    body = records.proposal_body(state.delivered.report, state, run.target.name)
    proposal = run.forge.propose(
        run.delivery_branch, run.base_branch, title, body, labels=list(run.repo_cfg.github.labels)
    )
    if state.proposal is None or str(state.proposal.id) != str(proposal.id):
        record(
            run,
            {
                "key": f"proposal:{proposal.id}",
                "kind": mr.PROPOSAL,
                "id": proposal.id,
                "url": proposal.url,
                "time": common.now(),
            },
        )
    return proposal


def _outcome(run: ModelRun, state: ms.ModelState, proposal: Proposal | None) -> RunOutcome:
    def us(ms_value: float | None) -> float | None:
        return ms_value * 1000.0 if ms_value is not None else None

    # The stale flag rides on the stop reason: every front end (terminal, status comment) shows it.
    stale = f" (features table may be stale: {'; '.join(state.stale)})" if state.stale else ""
    return RunOutcome(
        op=run.target.qualified,
        stop_reason=state.stopped.reason + stale,
        iterations=len(state.iterations),
        drift_pct=state.drift_pct,
        verdict=records.run_verdict(state)[0],
        no_proposal_reason=records.run_verdict(state)[1],
        stop_text=state.stopped.reason + stale,
        baseline_us=us(state.baseline_ms),
        best_us=us(state.best_ms),
        best_iteration=state.best_iteration,
        improvement_pct=records._gain(state) or 0.0,
        delivery_branch=run.delivery_branch,
        proposal=proposal,
        report=state.delivered.report,
        results_path=run.log.path,
        perf_dir=run.spec.perf_dir.as_posix(),
        iteration_prefix=naming.iteration_prefix(run.prefix),
    )


def _dry_run(run: ModelRun) -> RunOutcome:
    """What would be tried, before any measurement (no analysis yet: priority order only)."""
    current = spec_mod.read_settings(settings_text(run, run.base_sha), "settings")
    ranking = rank(run.table, None, run.spec.hardware or "cpu", run.spec, current, {})
    lines = [f"tier {c.tier} {c.description} -> {c.citation}" for c in ranking.candidates]
    lines += [f"excluded {e}" for e in ranking.excluded]
    run.progress(
        ProgressEvent(
            "plan",
            run.target.qualified,
            message="\n".join(lines),
            data={
                "settings": {
                    "stop": dataclasses.asdict(run.spec.stop),
                    "min_cosine": run.spec.min_cosine,
                }
            },
        )
    )
    return planned(run.target.qualified, run.log.path, lines)
