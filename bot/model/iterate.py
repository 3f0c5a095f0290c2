"""The measuring steps of a model run (docs/model.md): the baseline (建立基线), one feature
setting per iteration (瓶颈分析 -> 根因定位 -> 保守修补 -> 复验) and the stop.

Per iteration: measure -> write the commit object -> append the record (the commit point) ->
create the branch. A kill before the append redoes the iteration; after it, resume recreates a
missing branch. An iteration whose workload facts differ from the baseline's is refused
(recorded, never built upon); one whose outputs fall under the cosine threshold is rejected by
the gate; the noise rule is the op run's (bot.measure.decide), with a 3 % floor by default.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from bot import naming
from bot.features.analysis import Analysis
from bot.git import branches, commits
from bot.measure import decide as decide_mod
from bot.measure.types import LatencyResult
from bot.model import commands as cmd
from bot.model import records, stops
from bot.model import run_records as mr
from bot.model import spec as spec_mod
from bot.model import state as ms
from bot.model.prepare import (
    ModelRun,
    analyse,
    apis,
    command_env,
    hash_dir,
    record,
    settings_text,
    version_stale,
    write_settings,
)
from bot.model.rank import Candidate, Ranking, rank
from bot.run import common
from bot.run.errors import BaselineFailed
from bot.run.records import iteration_key
from bot.run.request import ProgressEvent


def baseline(run: ModelRun) -> None:
    """Step 1 (建立基线): benchmark at the base settings, save the reference outputs, analyse."""
    write_settings(run, settings_text(run, run.base_sha))
    staging = run.state_dir / "reference.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    result = cmd.run(
        run.spec.benchmark, run.model_dir, run.spec.timeout_s, command_env(run, out_dir=staging)
    )
    if not result.ok:
        stale = cmd.stale_api_error(result.stderr + "\n" + result.stdout, apis(run))
        hint = f"\nThe features table may be stale: {stale}" if stale else ""
        raise BaselineFailed(
            f"the baseline benchmark of {run.target.qualified} failed ({result.reason}); fix it "
            f"first:\n{result.tail[-1500:]}{hint}"
        )
    bench = cmd.parse_benchmark(result)
    if not any(staging.rglob("*")):
        raise BaselineFailed(
            "the baseline benchmark wrote no outputs to $TUNEBOT_OUTPUT_DIR; the quality gate "
            "compares against them (docs/model.md)"
        )
    reference = run.state_dir / "reference"
    if reference.exists():  # left by an earlier attempt that did not get recorded
        shutil.rmtree(reference)
    staging.rename(reference)
    analysis = analyse(run, "baseline")
    stale_notes = [note for note in [version_stale(run, bench)] if note]
    record(
        run,
        {
            "key": "baseline",
            "kind": mr.BASELINE,
            "iteration": 0,
            "sha": run.base_sha,
            "settings": spec_mod.read_settings(settings_text(run, run.base_sha), "settings"),
            "benchmark": bench.to_dict(),
            "latency": dataclasses.asdict(bench.latency()),
            "analysis": analysis,
            "reference": hash_dir(reference),
            "stale": stale_notes,
            "time": common.now(),
        },
    )
    state = ms.replay(run.log.read())
    run.progress(
        ProgressEvent(
            "baseline",
            run.target.qualified,
            iteration=0,
            latency_us=bench.latency().median_us,
            accuracy="reference",
            sha=run.base_sha,
            message=f"baseline {state.baseline_ms:.2f} ms; workload "
            f"{records.workload_line(bench.workload)}; analysis "
            f"{records.figures_line((analysis or {}).get('layers'))}"
            + (f"; features table may be stale: {stale_notes[0]}" if stale_notes else ""),
        )
    )


def _hardware(run: ModelRun, state: ms.ModelState) -> str:
    return run.spec.hardware or str(state.measured_baseline.benchmark["workload"]["hardware"])


def _best_analysis(state: ms.ModelState) -> Analysis | None:
    if state.best_analysis is None:
        return None
    return Analysis(
        source=f"analysis of {'iter ' + str(state.best_iteration) if state.best_iteration else 'the baseline'}",
        layers=state.best_analysis,
    )


def ranking_for(run: ModelRun, state: ms.ModelState) -> Ranking:
    return rank(
        run.table,
        _best_analysis(state),
        _hardware(run, state),
        run.spec,
        state.best_settings,
        state.tried(),
    )


def iterate(run: ModelRun) -> None:
    while True:
        state = ms.replay(run.log.read())
        stop = stops.before_ranking(state, run.spec.stop)
        if stop is None and common.cancel_file(run.state_dir).exists():
            stop = stops.Stop(
                stops.CANCELLED,
                f"cancel requested at {common.cancel_file(run.state_dir).read_text().strip()}",
            )
        if stop is None and run.forge.cancel_requested():  # `/tune cancel` on the pull request
            stop = stops.Stop(stops.CANCELLED, "cancel requested on the pull request")
        ranking = None
        if stop is None:
            ranking = ranking_for(run, state)
            stop = stops.after_ranking(ranking, _best_analysis(state))
        if stop is not None:
            _finish(run, state, stop)
            return
        assert ranking is not None
        _run_iteration(run, state, ranking.candidates[0])


def _run_iteration(run: ModelRun, state: ms.ModelState, cand: Candidate) -> None:
    """Step 3-5 for one setting: apply, benchmark, workload check, quality gate, decide, analyse, record."""
    n = state.next_iteration
    parent_text = settings_text(run, state.best_commit)
    new_text = spec_mod.write_settings(parent_text, {cand.key: cand.new})
    rec: dict = {
        "key": iteration_key(n),
        "kind": mr.ITERATION,
        "iteration": n,
        "parent": state.best_sha,
        "parent_iteration": state.best_iteration,
        "branch": naming.iteration_branch(run.prefix, n),
        "setting": cand.to_dict(),
        "benchmark": None,
        "latency": None,
        "quality": None,
        "decision": None,
        "analysis": None,
        "analysis_delta": None,
        "stale": None,
        "note": "",
    }
    write_settings(run, new_text)
    with tempfile.TemporaryDirectory(prefix="tunebot-out-") as tmp:
        out_dir = Path(tmp) / "outputs"
        out_dir.mkdir()
        result = cmd.run(
            run.spec.benchmark, run.model_dir, run.spec.timeout_s, command_env(run, out_dir=out_dir)
        )
        if not result.ok:
            stale = cmd.stale_api_error(result.stderr + "\n" + result.stdout, apis(run))
            rec["stale"] = f"{cand.row}: {stale}" if stale else None
            rec["verdict"] = "timeout" if result.timed_out else "stale_api" if stale else "error"
            last = result.tail.strip().splitlines()[-1][:300] if result.tail.strip() else ""
            rec["note"] = f"benchmark failed ({result.reason}): {last}"
        else:
            _measured(run, state, rec, cmd.parse_benchmark(result), out_dir, parent_text, new_text)
    _commit_and_record(run, state, rec, new_text)


def _measured(
    run: ModelRun,
    state: ms.ModelState,
    rec: dict,
    bench: cmd.Benchmark,
    out_dir: Path,
    parent_text: str | None,
    new_text: str,
) -> None:
    latency = bench.latency()
    rec["benchmark"], rec["latency"] = bench.to_dict(), dataclasses.asdict(latency)
    rec["stale"] = version_stale(run, bench)
    diff = cmd.workload_diff(state.measured_baseline.benchmark["workload"], bench.workload)
    if diff:
        rec["verdict"] = "workload_changed"
        rec["note"] = (
            "refused: the workload facts differ from the baseline's ("
            + "; ".join(diff)
            + "); a gain on another workload is no gain"
        )
        return
    if not any(out_dir.rglob("*")):
        rec["verdict"], rec["note"] = (
            "error",
            "the benchmark wrote no outputs to $TUNEBOT_OUTPUT_DIR",
        )
        return
    cosine, passed = _quality(run, state, out_dir)
    rec["quality"] = {"cosine": cosine, "min_cosine": run.spec.min_cosine, "passed": passed}
    if not passed:
        rec["verdict"] = "quality_fail"
        rec["note"] = (
            f"cosine {cosine:.6f} < {run.spec.min_cosine} against the baseline outputs: rejected"
        )
        return
    decision = _decide(run, state, latency, parent_text, new_text)
    rec["decision"] = dataclasses.asdict(decision)
    rec["verdict"] = "better" if decision.better else "not_better"
    rec["note"] = decision.reason
    write_settings(run, new_text)  # the re-measure may have left the parent's settings in place
    analysis = analyse(run, f"v{rec['iteration']}")
    if analysis is not None:
        rec["analysis"] = analysis
        rec["analysis_delta"] = records.delta(state.best_analysis, analysis["layers"])


def _quality(run: ModelRun, state: ms.ModelState, out_dir: Path) -> tuple[float, bool]:
    """Cosine of this run's outputs against a fresh copy of the baseline's (checked unchanged first)."""
    reference = run.state_dir / "reference"
    recorded = state.measured_baseline.reference or {}
    if not reference.is_dir() or hash_dir(reference) != recorded:
        raise cmd.OutputError(
            f"the baseline's reference outputs in {reference} are missing or changed since they "
            "were recorded; the quality gate cannot be trusted. Start over with --restart"
        )
    with tempfile.TemporaryDirectory(prefix="tunebot-ref-") as tmp:
        copy = Path(tmp) / "reference"
        shutil.copytree(reference, copy)
        result = cmd.run(
            run.spec.quality,
            run.model_dir,
            run.spec.timeout_s,
            command_env(run, out_dir=out_dir, ref_dir=copy),
        )
    return cmd.parse_quality(result, run.spec.min_cosine)


def _decide(
    run: ModelRun,
    state: ms.ModelState,
    latency: LatencyResult,
    parent_text: str | None,
    new_text: str,
):
    """The operator loop's noise rule; a close call re-runs both settings interleaved."""
    with tempfile.TemporaryDirectory(prefix="tunebot-settings-") as tmp:
        best_path, cand_path = Path(tmp) / "best.yaml", Path(tmp) / "candidate.yaml"
        best_path.write_text(parent_text or "", encoding="utf-8")
        cand_path.write_text(new_text, encoding="utf-8")

        def measure(path: Path) -> LatencyResult:
            write_settings(run, path.read_text(encoding="utf-8"))
            again = cmd.run(run.spec.benchmark, run.model_dir, run.spec.timeout_s, command_env(run))
            if not again.ok:
                return LatencyResult(
                    status="error", backend="model-benchmark", notes=[again.reason]
                )
            return cmd.parse_benchmark(again).latency()

        rule = decide_mod.Rule(
            noise_floor=run.spec.stop.noise_floor, rounds=run.spec.remeasure_rounds
        )
        assert state.best_latency is not None  # the baseline's, at least
        return decide_mod.decide(best_path, state.best_latency, cand_path, latency, measure, rule)


def _commit_and_record(run: ModelRun, state: ms.ModelState, rec: dict, new_text: str) -> None:
    n = rec["iteration"]
    rec["time"] = common.now()
    rec["sha"] = ""
    preview = ms.replay(run.log.read() + [rec])
    opt_log = records.render_opt_log(run.target.name, preview, run.spec.features_file)
    it = preview.iterations[-1]
    message = (
        f"tunebot: {run.target.name} v{n}: {it.change}\n\nRow: {it.citation}.\n"
        f"Parent: best-so-far {'iter ' + str(state.best_iteration) if state.best_iteration else 'baseline'} "
        f"({state.best_commit[:12]}).\nlatency: {records.fmt_ms(it.latency_ms)} ms; cosine: "
        f"{it.cosine if it.cosine is not None else '-'}; verdict: {it.verdict}."
    )
    sha = commits.commit_files(
        run.repo,
        state.best_sha,
        {
            run.spec.settings_file.as_posix(): new_text.encode(),
            run.rel("opt_log.md"): opt_log.encode(),
        },
        message,
    )
    rec["sha"] = sha
    record(run, rec)  # the commit point
    branches.create_branch(run.repo, rec["branch"], sha)
    done = ms.replay(run.log.read()).iterations[-1]
    stale = f"; features table may be stale: {done.stale}" if done.stale else ""
    run.progress(
        ProgressEvent(
            "iteration",
            run.target.qualified,
            iteration=n,
            strategy=done.key,
            change=f"{done.change} [{done.row}]",
            latency_us=done.latency_ms * 1000.0 if done.latency_ms is not None else None,
            accuracy=f"cos {done.cosine:.4f}" if done.cosine is not None else "-",
            verdict=done.verdict,
            gain_pct=done.gain_pct,
            branch=rec["branch"],
            sha=sha,
            message=(done.note + stale).strip("; "),
            data={
                "row": done.row,
                "citation": done.citation,
                "reasons": done.reasons,
                "stale": done.stale,
            },
        )
    )


def _finish(run: ModelRun, state: ms.ModelState, stop: stops.Stop) -> None:
    """Re-measure the baseline settings (how far the machine drifted during the run), then record the stop."""
    if state.baseline_end is None:
        write_settings(run, settings_text(run, run.base_sha))
        result = cmd.run(run.spec.benchmark, run.model_dir, run.spec.timeout_s, command_env(run))
        latency = cmd.parse_benchmark(result).latency() if result.ok else None
        start_us = (state.baseline_ms or 0) * 1000.0
        median = latency.median_us if latency else None
        drift = (median - start_us) / start_us * 100.0 if median is not None and start_us else None
        record(
            run,
            {
                "key": "baseline_end",
                "kind": mr.BASELINE_END,
                "sha": run.base_sha,
                "latency": dataclasses.asdict(latency) if latency else None,
                "error": None if result.ok else result.reason,
                "drift_pct": drift,
                "time": common.now(),
            },
        )
    record(
        run,
        {
            "key": "stop",
            "kind": mr.STOP,
            "reason": stop.reason,
            "evidence": stop.evidence,
            "iterations": len(state.iterations),
            "best_iteration": state.best_iteration,
            "best_sha": state.best_sha,
            "time": common.now(),
        },
    )
    stale = f" · features table may be stale: {'; '.join(state.stale)}" if state.stale else ""
    run.progress(
        ProgressEvent(
            "stop",
            run.target.qualified,
            iteration=len(state.iterations),
            message=f"{stop.reason}: {stop.evidence}{stale}",
            latency_us=state.best_latency.median_us if state.best_latency else None,
        )
    )
