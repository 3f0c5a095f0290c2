"""A model run before it measures: the target, model.yaml, settings and features table at the
base commit, the start-over policy; the run context and the helpers every step uses."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from bot import naming
from bot.config.schema import RepoConfig
from bot.errors import ConfigError
from bot.features import render as table_render
from bot.forge.base import Forge
from bot.git import repository, worktrees
from bot.model import commands as cmd
from bot.model import run_records as mr
from bot.model import spec as spec_mod
from bot.model import state as ms
from bot.model.targets import ModelTarget
from bot.run import common
from bot.run.errors import BadRequest
from bot.run.log import ResultsLog
from bot.run.records import parse
from bot.run.request import ProgressCallback, TuneRequest
from bot.run.target import Resolved, repo_config_at

UNDECLARED = "未声明"


# ---------------------------------------------------------------- preparing


@dataclass
class ModelRun:
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


def prepare(
    request: TuneRequest, resolved: Resolved, forge: Forge, progress: ProgressCallback
) -> ModelRun:
    """Resolve and validate everything before anything is written (a bad flag loses nothing)."""
    if request.strategies:
        raise BadRequest(
            "--strategies applies to ops; a model's moves are the settings listed in its model.yaml"
        )
    repo = repository.open_repo(request.repo)
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
    checkout = Path(str(repo.working_tree_dir))
    if request.dry_run:
        return ModelRun(
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
        common.archive(repo, naming.run_prefix(repo_cfg.branch_prefix, target.name), log)
    worktree = worktrees.ensure_worktree(repo, f"{target.project}__{target.name}", base_sha)
    return ModelRun(
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
            repository.read_file(repo, sha, rel.as_posix()) or "", encoding="utf-8"
        )
        return spec_mod.load(Path(tmp), target.dir)


def _refuse_changed_request(repo: Any, request: TuneRequest, start: mr.ModelStart) -> None:
    recorded = start.stop
    differs = []
    if request.max_iters is not None and request.max_iters != recorded["max_iters"]:
        differs.append(f"--max-iters {request.max_iters}")
    if request.target_us is not None and request.target_us / 1000.0 != recorded.get("target_ms"):
        differs.append(f"--target-us {request.target_us}")
    if request.base_ref and repository.resolve(repo, request.base_ref) != start.base_sha:
        differs.append(f"--base {request.base_ref}")
    if request.base_branch and request.base_branch != start.base_branch:
        differs.append(f"--into {request.base_branch}")
    if differs:
        raise BadRequest(
            f"a run of {start.model} is recorded at {start.base_sha[:10]} with stop settings "
            f"{json.dumps(recorded, sort_keys=True)}; {', '.join(differs)} would change it. Run without "
            "those flags to resume it, or add --restart to start over"
        )


def record(run: ModelRun, data: dict[str, Any]) -> None:
    """Append one record, typed and stamped with the schema version (bot/model/run_records.py)."""
    record = parse(data, kinds=mr.KINDS)
    assert record is not None, data.get("kind")
    run.log.append(record.to_json())


def command_env(
    run: ModelRun, out_dir: Path | None = None, ref_dir: Path | None = None
) -> dict[str, str]:
    env = {
        "TUNEBOT_SETTINGS": str(run.worktree / run.spec.settings_file),
        "TUNEBOT_MODEL": run.target.qualified,
    }
    if out_dir is not None:
        env["TUNEBOT_OUTPUT_DIR"] = str(out_dir)
    if ref_dir is not None:
        env["TUNEBOT_REFERENCE_DIR"] = str(ref_dir)
    return env


def write_settings(run: ModelRun, text: str | None) -> None:
    path = run.worktree / run.spec.settings_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text or "", encoding="utf-8")


def settings_text(run: ModelRun, sha: str) -> str | None:
    return repository.read_file(run.repo, sha, run.spec.settings_file.as_posix(), missing_ok=True)


def apis(run: ModelRun) -> frozenset[str]:
    return cmd.api_names([r.api for r in run.table.rows])


def version_stale(run: ModelRun, bench: cmd.Benchmark) -> str | None:
    table = run.table.meta.get("docs_version", UNDECLARED)
    if bench.mindiesd_version and table not in ("", UNDECLARED) and bench.mindiesd_version != table:
        return (
            f"installed MindIE-SD {bench.mindiesd_version} differs from the features table's docs version "
            f"{table}"
        )
    return None


def analyse(run: ModelRun, label: str) -> dict | None:
    if run.spec.analysis is None:
        return None
    result = cmd.run(run.spec.analysis, run.model_dir, run.spec.timeout_s, command_env(run))
    save_to = run.state_dir / "analysis" / f"{label}.report"
    parsed = cmd.parse_analysis(result, save_to)
    return {
        "source": save_to.relative_to(run.state_dir).as_posix(),
        "layers": parsed.layers,
        "notes": parsed.notes,
    }


def hash_dir(path: Path) -> dict[str, str]:
    return {
        p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }
