"""Before an op run writes anything: the target, config and settings at the base, the run lock,
the start-over policy and the checks of state moved by hand (bot/run_guard.py).

Everything is resolved and validated first, so a bad flag loses nothing; the run lock is taken
before the records are read for writing, so a second process for the same op is refused before
it can archive, clean or reset anything.
"""

from __future__ import annotations

import dataclasses
import json
import math
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import naming, run_guard
from bot.config.schema import OpConfig, RepoConfig, RunSettings
from bot.config.settings import effective_settings
from bot.forge.base import Forge
from bot.git import repository, worktrees
from bot.measure.types import AccuracyResult
from bot.run import common
from bot.run import state as rs
from bot.run.errors import BadRequest
from bot.run.log import ResultsLog
from bot.run.records import Start
from bot.run.request import ProgressCallback, ProgressEvent, TuneRequest
from bot.run.target import Resolved, op_config_at, repo_config_at


@dataclass
class PendingBaseline:
    """A baseline that passed L0 and waits for its latency (bot/run/iterate.py): on backends that
    time pairs, the first comparison times it side by side with the first candidate."""

    path: str  # repo-relative path of the baseline source
    note: str | None  # where the start source came from (delivery.start_source)
    accuracy: AccuracyResult


@dataclass
class OpRun:
    """What one op run works with; built once by `prepare`."""

    request: TuneRequest
    repo: Any  # git.Repo
    op: OpConfig
    settings: RunSettings
    repo_cfg: RepoConfig
    base_sha: str
    base_branch: str
    worktree: Path
    log: ResultsLog
    forge: Forge
    progress: ProgressCallback
    fold: rs.Fold | None = None  # the records folded so far (see state())
    sources: dict[tuple[str, str], str] = field(default_factory=dict)  # committed best sources
    pending_baseline: PendingBaseline | None = None  # in memory only: never recorded as such

    @property
    def prefix(self) -> str:
        return naming.run_prefix(self.repo_cfg.branch_prefix, self.op.name)

    @property
    def delivery_branch(self) -> str:
        return naming.delivery_branch(self.repo_cfg.branch_prefix, self.op.name)

    @property
    def cancel_file(self) -> Path:
        return common.cancel_file(self.log.path.parent)

    def rel(self, name: str) -> str:
        return (self.op.perf_dir / name).as_posix()

    def state(self) -> rs.RunState:
        """The run's state, folding only the records appended since the last call (live object)."""
        if self.fold is None:
            self.fold = rs.Fold(self.log)
        return self.fold()

    def event(self, kind: Any, **fields: Any) -> None:
        self.progress(ProgressEvent(kind, self.op.qualified, **fields))

    def warn(self, message: str) -> None:
        self.event("warning", message=message)


def prepare(
    request: TuneRequest,
    resolved: Resolved,
    forge: Forge,
    progress: ProgressCallback,
    held: ExitStack,
) -> OpRun:
    """Resolve and validate everything before anything is written; the run lock goes on `held`."""
    assert resolved.op is not None
    found = resolved.op
    repo = repository.open_repo(request.repo)
    checkout = Path(str(repo.working_tree_dir))
    common.refuse_name_clash(repo, found.project, found.name, forge)
    log = common.results_log(repo, found.project, found.name)
    if not request.dry_run:
        held.enter_context(common.run_lock(log.path.parent, found.qualified))
    previous = rs.replay(log.read())
    fresh = request.restart or bool(
        previous.proposal and common.proposal_closed(forge, previous.proposal.id)
    )
    superseded = (
        None
        if fresh or request.dry_run
        else run_guard.superseded_baseline(repo, previous, found, request)
    )
    if superseded:
        fresh = True
        progress(ProgressEvent("warning", found.qualified, message=superseded))
    elif not fresh and (recorded := _unmeasured_run(previous, resolved.sha, request)):
        # nothing to resume: a fix committed since (tune.yaml, a harness, a toolchain stand-in,
        # not only the op's file) is what runs
        fresh = True
        if not request.dry_run:
            progress(
                ProgressEvent(
                    "warning",
                    found.qualified,
                    message=(
                        f"the run recorded at {recorded[:10]} has no baseline (it "
                        "failed L0, could not be timed, stopped before its first comparison "
                        "timed it, or stopped on a setup error): starting "
                        f"over at {resolved.sha[:10]}"
                    ),
                )
            )
    if fresh:
        previous = rs.RunState()
    if previous.start:
        _refuse_changed_request(repo, request, previous.start)
        base_sha, base_branch = previous.start.base_sha, previous.start.base_branch
    else:
        base_sha = resolved.sha
        base_branch = common.base_branch(
            repo, request, "pass --into <branch> or set base_branch in .tunebot.yml"
        )
        if request.requester is None:
            # a forge's base lives there; it refuses a wrong one
            run_guard.check_base_branch(
                repo, base_branch, "--into" if request.base_branch else "the base branch"
            )
    repo_cfg = resolved.repo_cfg if base_sha == resolved.sha else repo_config_at(repo, base_sha)
    op = op_config_at(repo, base_sha, found)
    settings = _settings(request, repo_cfg, op, previous.start)
    if request.dry_run:  # plan only: create nothing, not even a worktree
        return OpRun(
            request,
            repo,
            op,
            settings,
            repo_cfg,
            base_sha,
            base_branch,
            checkout,
            log,
            forge,
            progress,
        )
    prefix = naming.run_prefix(repo_cfg.branch_prefix, op.name)

    def warn(message: str) -> None:
        progress(ProgressEvent("warning", op.qualified, message=message))

    orphans = (
        None
        if fresh
        else run_guard.orphan_branches(repo, log, previous, prefix, f"tunebot tune {op.qualified}")
    )
    if orphans:
        fresh = True
        warn(orphans)
    if fresh:
        common.archive(repo, prefix, log)
    name = f"{op.project}__{op.name}"
    for note in run_guard.housekeeping(
        repo, log.path.parent, prefix, repository.state_dir(repo) / "worktrees" / name
    ):
        warn(note)
    run_guard.check_branches(repo, prefix, rs.replay(log.read()))
    worktree = worktrees.ensure_worktree(repo, name, base_sha)
    log = run_guard.GuardedLog(log.path, warn)
    return OpRun(
        request, repo, op, settings, repo_cfg, base_sha, base_branch, worktree, log, forge, progress
    )


def _unmeasured_run(previous: rs.RunState, sha: str, request: TuneRequest) -> str | None:
    """The base commit of a recorded run without a baseline, when it differs from the commit
    asked for now (an explicit --base pins the commit and is left to the usual rules)."""
    start = previous.start
    if start is None or previous.baseline is not None or request.base_ref is not None:
        return None
    return start.base_sha if start.base_sha != sha else None


def _settings(
    request: TuneRequest,
    repo_cfg: RepoConfig,
    op: OpConfig,
    start: Start | None,
) -> RunSettings:
    """The flags over the config; a recorded run keeps its recorded settings."""
    if request.target_us is not None and not math.isfinite(request.target_us):
        raise BadRequest(
            f"--target-us must be a finite number of microseconds, got {request.target_us}"
        )
    settings = effective_settings(
        repo_cfg,
        op,
        max_iters=request.max_iters,
        patience=request.patience,
        target_us=request.target_us,
        strategies=request.strategies,
    )
    if request.no_target:
        settings = dataclasses.replace(settings, target_us=None)
    if start is not None:
        settings = RunSettings(**start.settings)
    return settings


def _refuse_changed_request(repo: Any, request: TuneRequest, start: Start) -> None:
    """A recorded run resumes with its recorded settings; flags that say otherwise are a mistake."""
    recorded = start.settings
    asked = {
        "max_iters": request.max_iters,
        "target_us": request.target_us,
        "patience": request.patience,
        "strategies": list(request.strategies) if request.strategies else None,
    }
    differs = [
        f"--{k.replace('_', '-')} {v}"
        for k, v in asked.items()
        if v is not None and v != recorded.get(k)
    ]
    if request.base_ref and repository.resolve(repo, request.base_ref) != start.base_sha:
        differs.append(f"--base {request.base_ref}")
    if request.base_branch and request.base_branch != start.base_branch:
        differs.append(f"--into {request.base_branch}")
    if differs:
        raise BadRequest(
            f"a run of {start.op} is recorded at {start.base_sha[:10]} with settings "
            f"{json.dumps(recorded, ensure_ascii=False, sort_keys=True)}; {', '.join(differs)} "
            "would change it. Run without those flags to resume it, or add --restart to start over"
        )
