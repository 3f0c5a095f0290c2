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

Talks to the git layer (bot.git), ResultsLog, decide and a Forge only; knows no GitHub.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import git

from bot import fs, naming
from bot.config.names import NAME_PART
from bot.config.repo import load_repo_config
from bot.config.schema import RepoConfig
from bot.config.tree import CommitTree
from bot.errors import ConfigError, TunebotError
from bot.features import render as table_render
from bot.features.analysis import Analysis
from bot.forge.base import Forge, Proposal, ProposalNotFound
from bot.git import branches, commits, refs, remotes, repository, worktrees
from bot.loop import (
    BadRequest,
    BaselineFailed,
    NothingToCancel,
    ProgressCallback,
    ProgressEvent,
    RunBusy,
    RunOutcome,
    TuneRequest,
)
from bot.measure import decide as decide_mod
from bot.measure.types import LatencyResult
from bot.model import commands as cmd
from bot.model import records, stops
from bot.model import spec as spec_mod
from bot.model import state as ms
from bot.model.rank import Candidate, Ranking, rank
from bot.record.results import ResultsLog

UNDECLARED = "未声明"


@dataclass(frozen=True)
class ModelTarget:
    project: str
    name: str
    dir: Path  # relative to the repository root

    @property
    def qualified(self) -> str:
        return f"{self.project}/{self.name}"


# ---------------------------------------------------------------- finding targets


def list_models(repo, sha: str, ops_root: str) -> list[ModelTarget]:
    """Every `<ops_root>/<project>/<model>/model.yaml` committed at `sha`."""
    out = []
    root_parts = Path(ops_root).parts
    for rel in repository.list_files(repo, sha, ops_root):
        parts = Path(rel).parts[len(root_parts) :]
        if (
            len(parts) == 3
            and parts[2] == spec_mod.MODEL_FILE
            and NAME_PART.match(parts[0])
            and NAME_PART.match(parts[1])
        ):
            out.append(ModelTarget(parts[0], parts[1], Path(ops_root) / parts[0] / parts[1]))
    return sorted(out, key=lambda t: t.qualified)


def _repo_config_at(repo, sha: str) -> RepoConfig:
    return load_repo_config(CommitTree(repo, sha))


def find_model(repo_path: Path, name: str, base_ref: str | None = None) -> ModelTarget | None:
    """The model target `name` ("model" or "project/model") at `base_ref` (default HEAD), or None.

    None means "not a model": the caller treats the name as an op. Two projects with a model of
    that name are an error (say which one)."""
    repo = repository.open_repo(repo_path)
    try:
        sha = repository.resolve(repo, base_ref or "HEAD")
    except TunebotError:
        return None
    models = list_models(repo, sha, _repo_config_at(repo, sha).ops_root)
    matches = [m for m in models if m.qualified == name or ("/" not in name and m.name == name)]
    if len(matches) > 1:
        raise BadRequest(
            f"model '{name}' is ambiguous; say which one as <project>/<model>: "
            f"{', '.join(m.qualified for m in matches)}"
        )
    return matches[0] if matches else None


def model_in_tree(root: Path, ops_root: str, name: str) -> str | None:
    """`project/model` when the checkout at `root` has `<ops_root>/<project>/<model>/model.yaml` for
    `name` (one match only), else None. For checks made on a working tree (the /tune gate)."""
    base = Path(root) / ops_root
    parts = name.split("/")
    if len(parts) > 2 or not all(NAME_PART.match(p) for p in parts):
        return None
    pattern = (
        f"{parts[0]}/{parts[1]}/{spec_mod.MODEL_FILE}"
        if len(parts) == 2
        else f"*/{parts[0]}/{spec_mod.MODEL_FILE}"
    )
    found = sorted(p for p in base.glob(pattern) if p.is_file()) if base.is_dir() else []
    return f"{found[0].parent.parent.name}/{found[0].parent.name}" if len(found) == 1 else None


def is_model(repo_path: Path, name: str, base_ref: str | None = None) -> bool:
    return find_model(repo_path, name, base_ref) is not None


# ---------------------------------------------------------------- preparing


@dataclass
class _Run:
    request: TuneRequest
    repo: git.Repo
    target: ModelTarget
    spec: spec_mod.ModelSpec
    repo_cfg: RepoConfig
    table: table_render.ParsedTable
    base_sha: str
    base_branch: str
    worktree: Path
    log: ResultsLog
    forge: Forge
    progress: ProgressCallback

    @property
    def prefix(self) -> str:
        return naming.run_prefix(self.repo_cfg.branch_prefix, self.target.name)

    @property
    def delivery_branch(self) -> str:
        return naming.delivery_branch(self.repo_cfg.branch_prefix, self.target.name)

    @property
    def state_dir(self) -> Path:
        return self.log.path.parent

    @property
    def model_dir(self) -> Path:
        return self.worktree / self.spec.dir

    def rel(self, name: str) -> str:
        return (self.spec.perf_dir / name).as_posix()


def run_model(
    request: TuneRequest, forge: Forge, progress: ProgressCallback | None = None
) -> RunOutcome:
    """Run (or resume) one tuning run of a model target and propose the best settings."""
    run = _prepare(request, forge, progress or (lambda event: None))
    if request.dry_run:
        return _dry_run(run)
    with _run_lock(run.state_dir, run.target.qualified):
        return _run_locked(run)


@contextmanager
def _run_lock(state_dir: Path, name: str):
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        with fs.file_lock(state_dir / "run.lock", timeout_s=0):
            yield
    except fs.LockBusy:
        raise RunBusy(
            f"another tunebot process is tuning {name} right now; wait for it to finish"
        ) from None


def _prepare(request: TuneRequest, forge: Forge, progress: ProgressCallback) -> _Run:
    """Resolve and validate everything before anything is written (a bad flag loses nothing)."""
    if request.strategies:
        raise BadRequest(
            "--strategies applies to ops; a model's moves are the settings listed in its model.yaml"
        )
    repo = repository.open_repo(request.repo)
    head = repository.resolve(repo, request.base_ref or "HEAD")
    target = find_model(request.repo, request.op, request.base_ref)
    if target is None:
        raise BadRequest(
            f"no model '{request.op}' (a folder <project>/<model>/ with {spec_mod.MODEL_FILE}) at {head[:10]}"
        )
    runs = repository.state_dir(repo) / "runs"
    _refuse_name_clash(runs, target, forge)
    log = ResultsLog(runs / target.project / target.name / "results.jsonl")
    previous = ms.replay(log.read())
    fresh = request.restart or bool(previous.proposal and _closed(forge, previous.proposal))
    if fresh:
        previous = ms.ModelState()
    if previous.start:
        base_sha, base_branch = previous.start["base_sha"], previous.start["base_branch"]
        _refuse_changed_request(repo, request, previous.start)
    else:
        base_sha, base_branch = head, _base_branch(repo, request)
    repo_cfg = _repo_config_at(repo, base_sha)
    spec = _spec_at(repo, base_sha, target)
    if previous.start:
        spec = dataclasses.replace(spec, stop=spec_mod.StopSpec(**previous.start["stop"]))
    else:
        stop = spec.stop
        if request.max_iters is not None:
            stop = dataclasses.replace(stop, max_iters=request.max_iters)
        if request.target_us is not None:
            stop = dataclasses.replace(stop, target_ms=request.target_us / 1000.0)
        spec = dataclasses.replace(spec, stop=stop)
    table_text = repository.read_file(repo, base_sha, spec.features_file, missing_ok=True)
    if table_text is None:
        raise ConfigError(
            (spec.dir / spec_mod.MODEL_FILE).as_posix(),
            "features_file",
            f"{spec.features_file} is not committed at {base_sha[:10]}",
            "commit the features table (tunebot refresh-features writes it) or point features_file at it",
        )
    table = table_render.parse(table_text)
    spec_mod.check_rows(spec, {r.name for r in table.rows})
    spec_mod.read_settings(
        repository.read_file(repo, base_sha, spec.settings_file.as_posix(), missing_ok=True),
        spec.settings_file.as_posix(),
    )
    checkout = Path(repo.working_tree_dir)
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
        _archive(repo, repo_cfg, target, log)
    worktree = worktrees.ensure_worktree(repo, f"{target.project}__{target.name}", base_sha)
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
            repository.read_file(repo, sha, rel.as_posix()), encoding="utf-8"
        )
        return spec_mod.load(Path(tmp), target.dir)


def _refuse_name_clash(runs: Path, target: ModelTarget, forge: Forge) -> None:
    """Branches are tunebot/<name>/...: another project's live run of that name would share them."""
    for other in sorted(runs.glob(f"*/{target.name}/results.jsonl")):
        if other.parent.parent.name == target.project:
            continue
        recs = ResultsLog(other).read()
        started = any(r.get("kind") in ("start", ms.START) for r in recs)
        prop = next((r for r in reversed(recs) if r.get("kind") in ("proposal", ms.PROPOSAL)), None)
        if started and not (prop and _closed(forge, prop)):
            raise BadRequest(
                f"{other.parent.parent.name}/{target.name} already has a tunebot run, and branches are "
                f"named tunebot/{target.name}/v<N> for both; merge or close its proposal first"
            )


def _refuse_changed_request(repo, request: TuneRequest, start: dict) -> None:
    recorded = start["stop"]
    differs = []
    if request.max_iters is not None and request.max_iters != recorded["max_iters"]:
        differs.append(f"--max-iters {request.max_iters}")
    if request.target_us is not None and request.target_us / 1000.0 != recorded.get("target_ms"):
        differs.append(f"--target-us {request.target_us}")
    if request.base_ref and repository.resolve(repo, request.base_ref) != start["base_sha"]:
        differs.append(f"--base {request.base_ref}")
    if request.base_branch and request.base_branch != start["base_branch"]:
        differs.append(f"--into {request.base_branch}")
    if differs:
        raise BadRequest(
            f"a run of {start['model']} is recorded at {start['base_sha'][:10]} with stop settings "
            f"{json.dumps(recorded, sort_keys=True)}; {', '.join(differs)} would change it. Run without "
            "those flags to resume it, or add --restart to start over"
        )


def _base_branch(repo, request: TuneRequest) -> str:
    if request.base_branch:
        return request.base_branch
    if request.base_ref and refs.branch_sha(repo, request.base_ref) is not None:
        return request.base_ref
    configured = load_repo_config(Path(repo.working_tree_dir)).base_branch
    branch = configured or repository.current_branch(repo)
    if not branch:
        raise BadRequest("HEAD is detached and no base branch is configured; pass --into <branch>")
    return branch


def _closed(forge: Forge, record: dict) -> bool:
    try:
        return forge.get(str(record["id"])).state != "open"
    except ProposalNotFound:
        return True


def _archive(repo, repo_cfg: RepoConfig, target: ModelTarget, log: ResultsLog) -> None:
    """Start over: old branches to refs/tunebot/archive/, old records to results.<ts>.jsonl."""
    label = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    prefix = naming.run_prefix(repo_cfg.branch_prefix, target.name)
    branches.archive_branches(
        repo,
        branches.owned_branches(repo, prefix + "/"),
        label,
    )
    if log.path.exists():
        log.path.rename(log.path.with_name(f"results.{label}.jsonl"))


# ---------------------------------------------------------------- the run


def _run_locked(run: _Run) -> RunOutcome:
    state = ms.replay(run.log.read())
    if state.start is None:
        run.log.append(
            {
                "key": "start",
                "kind": ms.START,
                "model": run.target.qualified,
                "base_sha": run.base_sha,
                "base_branch": run.base_branch,
                "stop": dataclasses.asdict(run.spec.stop),
                "features_file": run.spec.features_file,
                "table_version": run.table.meta.get("docs_version", UNDECLARED),
                "requester": run.request.requester,
                "time": _now(),
            }
        )
        _cancel_file(run.state_dir).unlink(
            missing_ok=True
        )  # a cancel of an earlier run must not stop this one
        run.progress(
            ProgressEvent(
                "start",
                run.target.qualified,
                sha=run.base_sha,
                message=f"tuning model {run.target.qualified} at {run.base_sha[:10]}",
            )
        )
    else:
        _restore_refs(run, ms.replay(run.log.read()))
        run.progress(
            ProgressEvent(
                "resumed",
                run.target.qualified,
                iteration=len(state.iterations),
                message=f"resuming after {len(state.iterations)} recorded iterations",
            )
        )
    state = ms.replay(run.log.read())
    if state.baseline is None:
        _baseline(run)
    state = ms.replay(run.log.read())
    if state.stop is None:
        _iterate(run)
    state = ms.replay(run.log.read())
    if state.delivery is None:
        _deliver(run, state)
    proposal = _propose(run, ms.replay(run.log.read()))
    return _outcome(run, ms.replay(run.log.read()), proposal)


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
    return repository.read_file(run.repo, sha, run.spec.settings_file.as_posix(), missing_ok=True)


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
    stale = [s for s in [_version_stale(run, bench)] if s]
    run.log.append(
        {
            "key": "baseline",
            "kind": ms.BASELINE,
            "iteration": 0,
            "sha": run.base_sha,
            "settings": spec_mod.read_settings(_settings_text(run, run.base_sha), "settings"),
            "benchmark": bench.to_dict(),
            "latency": dataclasses.asdict(bench.latency()),
            "analysis": analysis,
            "reference": _hash_dir(reference),
            "stale": stale,
            "time": _now(),
        }
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
            + (f"; features table may be stale: {stale[0]}" if stale else ""),
        )
    )


def _hardware(run: _Run, state: ms.ModelState) -> str:
    return run.spec.hardware or str(state.baseline["benchmark"]["workload"]["hardware"])


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
        if stop is None and _cancel_file(run.state_dir).exists():
            stop = stops.Stop(
                stops.CANCELLED,
                f"cancel requested at {_cancel_file(run.state_dir).read_text().strip()}",
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
    parent_text = _settings_text(run, state.best_sha)
    new_text = spec_mod.write_settings(parent_text, {cand.key: cand.new})
    rec: dict = {
        "key": ms.iteration_key(n),
        "kind": ms.ITERATION,
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
            rec["note"] = (
                f"benchmark failed ({result.reason}): {result.tail.strip().splitlines()[-1][:300] if result.tail.strip() else ''}"
            )
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
    diff = cmd.workload_diff(state.baseline["benchmark"]["workload"], bench.workload)
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
    recorded = state.baseline.get("reference") or {}
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
        return decide_mod.decide(best_path, state.best_latency, cand_path, latency, measure, rule)


def _commit_and_record(run: _Run, state: ms.ModelState, rec: dict, new_text: str) -> None:
    n = rec["iteration"]
    rec["time"] = _now()
    rec["sha"] = ""
    preview = ms.replay(run.log.read() + [rec])
    opt_log = records.render_opt_log(run.target.name, preview, run.spec.features_file)
    it = preview.iterations[-1]
    message = (
        f"tunebot: {run.target.name} v{n}: {it.change}\n\nRow: {it.citation}.\n"
        f"Parent: best-so-far {'iter ' + str(state.best_iteration) if state.best_iteration else 'baseline'} "
        f"({state.best_sha[:12]}).\nlatency: {records.fmt_ms(it.latency_ms)} ms; cosine: "
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
    run.log.append(rec)  # the commit point
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


def _finish(run: _Run, state: ms.ModelState, stop: stops.Stop) -> None:
    """Re-measure the baseline settings (how far the machine drifted during the run), then record the stop."""
    if state.baseline_end is None:
        _write_settings(run, _settings_text(run, run.base_sha))
        result = cmd.run(run.spec.benchmark, run.model_dir, run.spec.timeout_s, _env(run))
        latency = cmd.parse_benchmark(result).latency() if result.ok else None
        start_us = (state.baseline_ms or 0) * 1000.0
        drift = (latency.median_us - start_us) / start_us * 100.0 if latency and start_us else None
        run.log.append(
            {
                "key": "baseline_end",
                "kind": ms.BASELINE_END,
                "sha": run.base_sha,
                "latency": dataclasses.asdict(latency) if latency else None,
                "error": None if result.ok else result.reason,
                "drift_pct": drift,
                "time": _now(),
            }
        )
    run.log.append(
        {
            "key": "stop",
            "kind": ms.STOP,
            "reason": stop.reason,
            "evidence": stop.evidence,
            "iterations": len(state.iterations),
            "best_iteration": state.best_iteration,
            "best_sha": state.best_sha,
            "time": _now(),
        }
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
    sha = commits.commit_files(
        run.repo,
        state.best_sha,
        files,
        f"tunebot: {run.target.name}: best settings {which}\n\n{report}",
    )
    run.log.append(
        {
            "key": "delivery",
            "kind": ms.DELIVERY,
            "branch": run.delivery_branch,
            "sha": sha,
            "report": report,
            "time": _now(),
        }
    )
    _ensure_branch(run, run.delivery_branch, sha)
    run.progress(
        ProgressEvent(
            "delivered", run.target.qualified, branch=run.delivery_branch, sha=sha, message=report
        )
    )


def _ensure_branch(run: _Run, name: str, sha: str) -> None:
    current = refs.branch_sha(run.repo, name)
    if current is None:
        branches.create_branch(run.repo, name, sha)


def _restore_refs(run: _Run, state: ms.ModelState) -> None:
    """Recreate iteration branches a kill left unwritten (their commits are recorded)."""
    for it in state.iterations:
        if refs.branch_sha(run.repo, it.branch) is None:
            branches.create_branch(run.repo, it.branch, it.sha)


def _propose(run: _Run, state: ms.ModelState) -> Proposal | None:
    """Open (or update) the proposal, only when a setting beat the baseline (TUNING_COMPLETED)."""
    _restore_refs(run, state)
    _ensure_branch(run, run.delivery_branch, state.delivery["sha"])
    if records.run_verdict(state)[1]:
        return None  # no gain, a cancel or nothing to try: branches and records stay, nothing is proposed
    if run.request.remote:
        refspecs = [f"+refs/heads/{it.branch}:refs/heads/{it.branch}" for it in state.iterations]
        refspecs.append(f"refs/heads/{run.delivery_branch}:refs/heads/{run.delivery_branch}")
        remotes.push(run.repo, run.request.remote, refspecs)
    gain = records._gain(state) or 0.0
    title = f"tunebot: {run.target.qualified} {gain:+.1f}% ({state.stop['reason']})"
    body = records.proposal_body(state.delivery["report"], state, run.target.name)
    proposal = run.forge.propose(
        run.delivery_branch, run.base_branch, title, body, labels=list(run.repo_cfg.github.labels)
    )
    if state.proposal is None or str(state.proposal.get("id")) != str(proposal.id):
        run.log.append(
            {
                "key": f"proposal:{proposal.id}",
                "kind": ms.PROPOSAL,
                "id": proposal.id,
                "url": proposal.url,
                "time": _now(),
            }
        )
    return proposal


def _outcome(run: _Run, state: ms.ModelState, proposal: Proposal | None) -> RunOutcome:
    us = lambda v: v * 1000.0 if v is not None else None
    # The stale flag rides on the stop reason: every front end (terminal, status comment) shows it.
    stale = f" (features table may be stale: {'; '.join(state.stale)})" if state.stale else ""
    return RunOutcome(
        op=run.target.qualified,
        stop_reason=state.stop["reason"] + stale,
        iterations=len(state.iterations),
        drift_pct=state.drift_pct,
        verdict=records.run_verdict(state)[0],
        no_proposal_reason=records.run_verdict(state)[1],
        stop_text=state.stop["reason"] + stale,
        baseline_us=us(state.baseline_ms),
        best_us=us(state.best_ms),
        best_iteration=state.best_iteration,
        improvement_pct=records._gain(state) or 0.0,
        delivery_branch=run.delivery_branch,
        proposal=proposal,
        report=state.delivery["report"],
        results_path=run.log.path,
        perf_dir=run.spec.perf_dir.as_posix(),
        iteration_prefix=naming.iteration_prefix(run.prefix),
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
    return RunOutcome(
        op=run.target.qualified,
        stop_reason="",
        iterations=0,
        baseline_us=None,
        best_us=None,
        best_iteration=None,
        improvement_pct=0.0,
        delivery_branch=None,
        proposal=None,
        report="",
        results_path=run.log.path,
        plan=lines,
    )


def _cancel_file(state_dir: Path) -> Path:
    return state_dir / "cancel"


def cancel_model(repo_path: Path, name: str) -> Path:
    """Ask a running tune of model `name` to stop before its next iteration (stop reason 已取消)."""
    repo = repository.open_repo(repo_path)
    target = find_model(repo_path, name)
    if target is None:
        raise BadRequest(f"no model '{name}'")
    state_dir = repository.state_dir(repo) / "runs" / target.project / target.name
    if not fs.lock_is_held(state_dir / "run.lock"):
        raise NothingToCancel(
            f"no tunebot run of {target.qualified} is in progress; nothing to cancel"
        )
    _cancel_file(state_dir).write_text(_now())
    return _cancel_file(state_dir)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
