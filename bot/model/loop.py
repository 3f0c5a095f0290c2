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

Talks to gitops, ResultsLog, decide and a Forge only; knows no GitHub.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from bot import config as cfgmod
from bot import gitops
from bot.features import render as table_render
from bot.features.analysis import Analysis
from bot.forge.base import Forge, Proposal
from bot.measure import decide as decide_mod
from bot.measure.types import LatencyResult
from bot.model import commands as cmd
from bot.model import records, stops
from bot.model import run_records as mr
from bot.model import spec as spec_mod
from bot.model import state as ms
from bot.model.rank import Candidate, Ranking, rank
from bot.model.targets import ModelTarget
from bot.run import common
from bot.run.errors import BadRequest, BaselineFailed
from bot.run.log import ResultsLog
from bot.run.machine import drive
from bot.run.records import iteration_key, parse
from bot.run.request import ProgressCallback, ProgressEvent, RunOutcome, TuneRequest, planned
from bot.run.target import Resolved, repo_config_at

UNDECLARED = "未声明"


# ---------------------------------------------------------------- preparing


@dataclass
class _Run:
    request: TuneRequest
    repo: git.Repo
    target: ModelTarget
    spec: spec_mod.ModelSpec
    repo_cfg: cfgmod.RepoConfig
    table: table_render.ParsedTable
    base_sha: str
    base_branch: str
    worktree: Path
    log: ResultsLog
    forge: Forge
    progress: ProgressCallback

    @property
    def prefix(self) -> str:
        return f"{self.repo_cfg.branch_prefix}/{self.target.name}"

    @property
    def delivery_branch(self) -> str:
        return common.delivery_branch(self.repo_cfg.branch_prefix, self.target.name)

    @property
    def state_dir(self) -> Path:
        return self.log.path.parent

    @property
    def model_dir(self) -> Path:
        return self.worktree / self.spec.dir

    def rel(self, name: str) -> str:
        return (self.spec.perf_dir / name).as_posix()


def run_model(
    request: TuneRequest, resolved: Resolved, forge: Forge, progress: ProgressCallback
) -> RunOutcome:
    """Run (or resume) one tuning run of a model target and propose the best settings
    (bot.run.machine.run_tune calls this for a name that `resolved` found to be a model)."""
    run = _prepare(request, resolved, forge, progress)
    if request.dry_run:
        return _dry_run(run)
    with common.run_lock(run.state_dir, run.target.qualified):
        return drive(ModelSteps(run))


def _prepare(
    request: TuneRequest, resolved: Resolved, forge: Forge, progress: ProgressCallback
) -> _Run:
    """Resolve and validate everything before anything is written (a bad flag loses nothing)."""
    if request.strategies:
        raise BadRequest(
            "--strategies applies to ops; a model's moves are the settings listed in its model.yaml"
        )
    repo = gitops.open_repo(request.repo)
    head = resolved.sha
    target = resolved.model
    assert target is not None
    common.refuse_name_clash(repo, target.project, target.name, forge)
    log = common.results_log(repo, target.project, target.name)
    previous = ms.replay(log.read())
    fresh = request.restart or bool(
        previous.proposal and common.proposal_closed(forge, previous.proposal.id)
    )
    if fresh:
        previous = ms.ModelState()
    if previous.start:
        base_sha, base_branch = previous.start.base_sha, previous.start.base_branch
        _refuse_changed_request(repo, request, previous.start)
    else:
        base_sha = head
        base_branch = common.base_branch(repo, request, "pass --into <branch>")
    repo_cfg = resolved.repo_cfg if base_sha == resolved.sha else repo_config_at(repo, base_sha)
    spec = _spec_at(repo, base_sha, target)
    if previous.start:
        spec = dataclasses.replace(spec, stop=spec_mod.StopSpec(**previous.start.stop))
    else:
        stop = spec.stop
        if request.max_iters is not None:
            stop = dataclasses.replace(stop, max_iters=request.max_iters)
        if request.target_us is not None:
            stop = dataclasses.replace(stop, target_ms=request.target_us / 1000.0)
        spec = dataclasses.replace(spec, stop=stop)
    table_text = gitops.read_file(repo, base_sha, spec.features_file, missing_ok=True)
    if table_text is None:
        raise cfgmod.ConfigError(
            (spec.dir / spec_mod.MODEL_FILE).as_posix(),
            "features_file",
            f"{spec.features_file} is not committed at {base_sha[:10]}",
            "commit the features table (tunebot refresh-features writes it) or point features_file at it",
        )
    table = table_render.parse(table_text)
    spec_mod.check_rows(spec, {r.name for r in table.rows})
    spec_mod.read_settings(
        gitops.read_file(repo, base_sha, spec.settings_file.as_posix(), missing_ok=True),
        spec.settings_file.as_posix(),
    )
    checkout = Path(str(repo.working_tree_dir))
    if request.dry_run:
        return _Run(
            request,
            repo,
            target,
            spec,
            repo_cfg,
            table,
            base_sha,
            base_branch,
            checkout,
            log,
            forge,
            progress,
        )
    if fresh:
        common.archive(repo, f"{repo_cfg.branch_prefix}/{target.name}", log)
    worktree = gitops.ensure_worktree(repo, f"{target.project}__{target.name}", base_sha)
    return _Run(
        request,
        repo,
        target,
        spec,
        repo_cfg,
        table,
        base_sha,
        base_branch,
        worktree,
        log,
        forge,
        progress,
    )


def _spec_at(repo, sha: str, target: ModelTarget) -> spec_mod.ModelSpec:
    with tempfile.TemporaryDirectory(prefix="tunebot-model-") as tmp:
        rel = target.dir / spec_mod.MODEL_FILE
        (Path(tmp) / rel).parent.mkdir(parents=True)
        (Path(tmp) / rel).write_text(
            gitops.read_file(repo, sha, rel.as_posix()) or "", encoding="utf-8"
        )
        return spec_mod.load(Path(tmp), target.dir)


def _refuse_changed_request(repo: Any, request: TuneRequest, start: mr.ModelStart) -> None:
    recorded = start.stop
    differs = []
    if request.max_iters is not None and request.max_iters != recorded["max_iters"]:
        differs.append(f"--max-iters {request.max_iters}")
    if request.target_us is not None and request.target_us / 1000.0 != recorded.get("target_ms"):
        differs.append(f"--target-us {request.target_us}")
    if request.base_ref and gitops.resolve(repo, request.base_ref) != start.base_sha:
        differs.append(f"--base {request.base_ref}")
    if request.base_branch and request.base_branch != start.base_branch:
        differs.append(f"--into {request.base_branch}")
    if differs:
        raise BadRequest(
            f"a run of {start.model} is recorded at {start.base_sha[:10]} with stop settings "
            f"{json.dumps(recorded, sort_keys=True)}; {', '.join(differs)} would change it. Run without "
            "those flags to resume it, or add --restart to start over"
        )


def _record(run: _Run, data: dict[str, Any]) -> None:
    """Append one record, typed and stamped with the schema version (bot/model/run_records.py)."""
    record = parse(data, kinds=mr.KINDS)
    assert record is not None, data.get("kind")
    run.log.append(record.to_json())


# ---------------------------------------------------------------- the run


class ModelSteps:
    """The steps of a model run for bot.run.machine.drive (the same sequence as an op's)."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def state(self) -> ms.ModelState:
        return ms.replay(self.run.log.read())

    def begin(self, state: ms.ModelState) -> None:
        run = self.run
        if state.start is None:
            _record(
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
        _baseline(self.run)

    def iterate(self, state: ms.ModelState) -> None:
        _iterate(self.run)

    def deliver(self, state: ms.ModelState) -> None:
        _deliver(self.run, state)

    def propose(self, state: ms.ModelState) -> Proposal | None:
        return _propose(self.run, state)

    def outcome(self, state: ms.ModelState, proposal: Proposal | None) -> RunOutcome:
        return _outcome(self.run, state, proposal)


def _env(run: _Run, out_dir: Path | None = None, ref_dir: Path | None = None) -> dict[str, str]:
    env = {
        "TUNEBOT_SETTINGS": str(run.worktree / run.spec.settings_file),
        "TUNEBOT_MODEL": run.target.qualified,
    }
    if out_dir is not None:
        env["TUNEBOT_OUTPUT_DIR"] = str(out_dir)
    if ref_dir is not None:
        env["TUNEBOT_REFERENCE_DIR"] = str(ref_dir)
    return env


def _write_settings(run: _Run, text: str | None) -> None:
    path = run.worktree / run.spec.settings_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text or "", encoding="utf-8")


def _settings_text(run: _Run, sha: str) -> str | None:
    return gitops.read_file(run.repo, sha, run.spec.settings_file.as_posix(), missing_ok=True)


def _apis(run: _Run) -> frozenset[str]:
    return cmd.api_names([r.api for r in run.table.rows])


def _version_stale(run: _Run, bench: cmd.Benchmark) -> str | None:
    table = run.table.meta.get("docs_version", UNDECLARED)
    if bench.mindiesd_version and table not in ("", UNDECLARED) and bench.mindiesd_version != table:
        return (
            f"installed MindIE-SD {bench.mindiesd_version} differs from the features table's docs version "
            f"{table}"
        )
    return None


def _analyse(run: _Run, label: str) -> dict | None:
    if run.spec.analysis is None:
        return None
    result = cmd.run(run.spec.analysis, run.model_dir, run.spec.timeout_s, _env(run))
    save_to = run.state_dir / "analysis" / f"{label}.report"
    parsed = cmd.parse_analysis(result, save_to)
    return {
        "source": save_to.relative_to(run.state_dir).as_posix(),
        "layers": parsed.layers,
        "notes": parsed.notes,
    }


def _hash_dir(path: Path) -> dict[str, str]:
    return {
        p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _baseline(run: _Run) -> None:
    """Step 1 (建立基线): benchmark at the base settings, save the reference outputs, analyse."""
    _write_settings(run, _settings_text(run, run.base_sha))
    staging = run.state_dir / "reference.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    result = cmd.run(
        run.spec.benchmark, run.model_dir, run.spec.timeout_s, _env(run, out_dir=staging)
    )
    if not result.ok:
        stale = cmd.stale_api_error(result.stderr + "\n" + result.stdout, _apis(run))
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
    analysis = _analyse(run, "baseline")
    stale_notes = [note for note in [_version_stale(run, bench)] if note]
    _record(
        run,
        {
            "key": "baseline",
            "kind": mr.BASELINE,
            "iteration": 0,
            "sha": run.base_sha,
            "settings": spec_mod.read_settings(_settings_text(run, run.base_sha), "settings"),
            "benchmark": bench.to_dict(),
            "latency": dataclasses.asdict(bench.latency()),
            "analysis": analysis,
            "reference": _hash_dir(reference),
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


def _hardware(run: _Run, state: ms.ModelState) -> str:
    return run.spec.hardware or str(state.measured_baseline.benchmark["workload"]["hardware"])


def _best_analysis(state: ms.ModelState) -> Analysis | None:
    if state.best_analysis is None:
        return None
    return Analysis(
        source=f"analysis of {'iter ' + str(state.best_iteration) if state.best_iteration else 'the baseline'}",
        layers=state.best_analysis,
    )


def ranking_for(run: _Run, state: ms.ModelState) -> Ranking:
    return rank(
        run.table,
        _best_analysis(state),
        _hardware(run, state),
        run.spec,
        state.best_settings,
        state.tried(),
    )


def _iterate(run: _Run) -> None:
    while True:
        state = ms.replay(run.log.read())
        stop = stops.before_ranking(state, run.spec.stop)
        if stop is None and common.cancel_file(run.state_dir).exists():
            stop = stops.Stop(
                stops.CANCELLED,
                f"cancel requested at {common.cancel_file(run.state_dir).read_text().strip()}",
            )
        ranking = None
        if stop is None:
            ranking = ranking_for(run, state)
            stop = stops.after_ranking(ranking, _best_analysis(state))
        if stop is not None:
            _finish(run, state, stop)
            return
        assert ranking is not None
        _run_iteration(run, state, ranking.candidates[0])


def _run_iteration(run: _Run, state: ms.ModelState, cand: Candidate) -> None:
    """Step 3-5 for one setting: apply, benchmark, workload check, quality gate, decide, analyse, record."""
    n = state.next_iteration
    parent_text = _settings_text(run, state.best_commit)
    new_text = spec_mod.write_settings(parent_text, {cand.key: cand.new})
    rec: dict = {
        "key": iteration_key(n),
        "kind": mr.ITERATION,
        "iteration": n,
        "parent": state.best_sha,
        "parent_iteration": state.best_iteration,
        "branch": f"{run.prefix}/v{n}",
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
    _write_settings(run, new_text)
    with tempfile.TemporaryDirectory(prefix="tunebot-out-") as tmp:
        out_dir = Path(tmp) / "outputs"
        out_dir.mkdir()
        result = cmd.run(
            run.spec.benchmark, run.model_dir, run.spec.timeout_s, _env(run, out_dir=out_dir)
        )
        if not result.ok:
            stale = cmd.stale_api_error(result.stderr + "\n" + result.stdout, _apis(run))
            rec["stale"] = f"{cand.row}: {stale}" if stale else None
            rec["verdict"] = "timeout" if result.timed_out else "stale_api" if stale else "error"
            last = result.tail.strip().splitlines()[-1][:300] if result.tail.strip() else ""
            rec["note"] = f"benchmark failed ({result.reason}): {last}"
        else:
            _measured(run, state, rec, cmd.parse_benchmark(result), out_dir, parent_text, new_text)
    _commit_and_record(run, state, rec, new_text)


def _measured(
    run: _Run,
    state: ms.ModelState,
    rec: dict,
    bench: cmd.Benchmark,
    out_dir: Path,
    parent_text: str | None,
    new_text: str,
) -> None:
    latency = bench.latency()
    rec["benchmark"], rec["latency"] = bench.to_dict(), dataclasses.asdict(latency)
    rec["stale"] = _version_stale(run, bench)
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
    _write_settings(run, new_text)  # the re-measure may have left the parent's settings in place
    analysis = _analyse(run, f"v{rec['iteration']}")
    if analysis is not None:
        rec["analysis"] = analysis
        rec["analysis_delta"] = records.delta(state.best_analysis, analysis["layers"])


def _quality(run: _Run, state: ms.ModelState, out_dir: Path) -> tuple[float, bool]:
    """Cosine of this run's outputs against a fresh copy of the baseline's (checked unchanged first)."""
    reference = run.state_dir / "reference"
    recorded = state.measured_baseline.reference or {}
    if not reference.is_dir() or _hash_dir(reference) != recorded:
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
            _env(run, out_dir=out_dir, ref_dir=copy),
        )
    return cmd.parse_quality(result, run.spec.min_cosine)


def _decide(
    run: _Run, state: ms.ModelState, latency: LatencyResult, parent_text: str | None, new_text: str
):
    """The operator loop's noise rule; a close call re-runs both settings interleaved."""
    with tempfile.TemporaryDirectory(prefix="tunebot-settings-") as tmp:
        best_path, cand_path = Path(tmp) / "best.yaml", Path(tmp) / "candidate.yaml"
        best_path.write_text(parent_text or "", encoding="utf-8")
        cand_path.write_text(new_text, encoding="utf-8")

        def measure(path: Path) -> LatencyResult:
            _write_settings(run, path.read_text(encoding="utf-8"))
            again = cmd.run(run.spec.benchmark, run.model_dir, run.spec.timeout_s, _env(run))
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


def _commit_and_record(run: _Run, state: ms.ModelState, rec: dict, new_text: str) -> None:
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
    sha = gitops.commit_files(
        run.repo,
        state.best_sha,
        {
            run.spec.settings_file.as_posix(): new_text.encode(),
            run.rel("opt_log.md"): opt_log.encode(),
        },
        message,
    )
    rec["sha"] = sha
    _record(run, rec)  # the commit point
    gitops.create_branch(run.repo, rec["branch"], sha)
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


def _finish(run: _Run, state: ms.ModelState, stop: stops.Stop) -> None:
    """Re-measure the baseline settings (how far the machine drifted during the run), then record the stop."""
    if state.baseline_end is None:
        _write_settings(run, _settings_text(run, run.base_sha))
        result = cmd.run(run.spec.benchmark, run.model_dir, run.spec.timeout_s, _env(run))
        latency = cmd.parse_benchmark(result).latency() if result.ok else None
        start_us = (state.baseline_ms or 0) * 1000.0
        median = latency.median_us if latency else None
        drift = (median - start_us) / start_us * 100.0 if median is not None and start_us else None
        _record(
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
    _record(
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


# ---------------------------------------------------------------- delivering


def _deliver(run: _Run, state: ms.ModelState) -> None:
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
        run.rel("baseline_settings.yaml"): (_settings_text(run, run.base_sha) or "").encode(),
        run.rel("report.md"): report.encode(),
    }
    which = f"iter {state.best_iteration}" if state.best_iteration else "(baseline kept)"
    sha = gitops.commit_files(
        run.repo,
        state.best_sha,
        files,
        f"tunebot: {run.target.name}: best settings {which}\n\n{report}",
    )
    _record(
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


def _ensure_branch(run: _Run, name: str, sha: str) -> None:
    common.ensure_branch(run.repo, name, sha, None)  # moved on by a person: left as it is


def _restore_refs(run: _Run, state: ms.ModelState) -> None:
    """Recreate iteration branches a kill left unwritten (their commits are recorded)."""
    common.restore_refs(run.repo, ((it.branch, it.sha) for it in state.iterations))


def _propose(run: _Run, state: ms.ModelState) -> Proposal | None:
    """Open (or update) the proposal, only when a setting beat the baseline (TUNING_COMPLETED)."""
    _restore_refs(run, state)
    _ensure_branch(run, run.delivery_branch, state.delivered.sha)
    if records.run_verdict(state)[1]:
        return None  # no gain, a cancel or nothing to try: branches and records stay, nothing is proposed
    if run.request.remote:
        common.push_branches(
            run.repo,
            run.request.remote,
            [it.branch for it in state.iterations],
            run.delivery_branch,
        )
    gain = records._gain(state) or 0.0
    title = f"tunebot: {run.target.qualified} {gain:+.1f}% ({state.stopped.reason})"
    body = records.proposal_body(state.delivered.report, state, run.target.name)
    proposal = run.forge.propose(
        run.delivery_branch, run.base_branch, title, body, labels=list(run.repo_cfg.github.labels)
    )
    if state.proposal is None or str(state.proposal.id) != str(proposal.id):
        _record(
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


def _outcome(run: _Run, state: ms.ModelState, proposal: Proposal | None) -> RunOutcome:
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
        iteration_prefix=f"{run.prefix}/v",
    )


def _dry_run(run: _Run) -> RunOutcome:
    """What would be tried, before any measurement (no analysis yet: priority order only)."""
    current = spec_mod.read_settings(_settings_text(run, run.base_sha), "settings")
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
