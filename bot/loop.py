"""The tuning state machine: baseline, iterate, decide, stop, deliver, resume.

CONTRACT for callers (cli, github handler). Knows no GitHub and no git
internals: it talks to the git layer (bot.git), a Forge, an Evaluator and a Planner.

Crash safety: every step first writes its git objects, then appends its
results.jsonl record (the commit point), then moves refs. A run killed at any
moment resumes from the records: nothing recorded is measured again, and refs
are recreated from the recorded shas.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot import delivery, fs, naming, run_guard, source_text
from bot import run_state as rs
from bot.config.discovery import find_op, load_op_config, resolve_op
from bot.config.repo import load_repo_config
from bot.config.schema import OpConfig, RepoConfig, RunSettings
from bot.config.settings import effective_settings
from bot.config.tree import CommitTree
from bot.errors import TunebotError
from bot.forge.base import Forge, Proposal, ProposalNotFound
from bot.git import branches, commits, refs, remotes, repository, worktrees
from bot.measure.evaluator import Evaluator
from bot.measure.types import Decision, LatencyResult
from bot.proposal_body import proposal_body, proposal_title
from bot.record.opt_log import LogRow, OptLog, render_opt_log
from bot.record.results import ResultsLog, iteration_key
from bot.record.verdicts import stop_reason_text
from bot.strategies import catalog
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.planner import Planner
from bot.strategies.source import source_hash

StopReason = Literal["达目标", "迭代上限", "连续无提升", "策略耗尽", "已取消"]
TARGET_REACHED, MAX_ITERS, NO_GAIN, EXHAUSTED, CANCELLED = (
    "达目标",
    "迭代上限",
    "连续无提升",
    "策略耗尽",
    "已取消",
)
MAX_REJECTIONS = 20  # refused proposals per run before the planner counts as exhausted


@dataclass(frozen=True)
class TuneRequest:
    repo: Path  # the user's repository (any worktree of it)
    op: str  # "<op>" or "<project>/<op>"
    base_ref: str | None = None  # sha or branch to tune at; None: HEAD
    base_branch: str | None = (
        None  # branch the proposal merges into; None: config or current branch
    )
    max_iters: int | None = None  # command-line overrides of the config
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None
    restart: bool = False
    dry_run: bool = False
    remote: str | None = None  # push branches to this remote (GitHub flow); None: local only
    requester: str | None = None
    patience: int | None = (
        None  # different things tried without a gain before stopping (run_state.patience_count)
    )
    no_target: bool = False  # ignore any configured target (the demo, to show the loop)


@dataclass
class ProgressEvent:
    """Emitted at every step; the CLI prints it, the GitHub handler edits the status comment."""

    kind: Literal[
        "start",
        "baseline",
        "iteration",
        "resumed",
        "stop",
        "delivered",
        "plan",
        "phase",
        "note",
        "warning",
    ]
    op: str
    iteration: int | None = None
    strategy: str | None = None
    change: str | None = None
    latency_us: float | None = None
    accuracy: str | None = None
    verdict: str | None = None
    gain_pct: float | None = None
    branch: str | None = None
    sha: str | None = None
    message: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class RunOutcome:
    op: str  # project/op
    stop_reason: str
    iterations: int
    baseline_us: float | None
    best_us: float | None
    best_iteration: int | None  # None: the baseline stayed best
    improvement_pct: float
    delivery_branch: str | None
    proposal: Proposal | None
    report: str  # the completion report (markdown)
    results_path: Path
    drift_pct: float | None = None  # end-of-run baseline re-measure vs start
    plan: list[str] = field(default_factory=list)  # --dry-run only
    perf_dir: str = ""  # examples/<project>/<op>/perf_opt, where the delivery keeps its files
    iteration_prefix: str = ""  # tunebot/<op>/v
    verdict: str = ""  # the Stage Result verdict (bot/record/verdicts.py)
    no_proposal_reason: str = ""  # why nothing was proposed ("" when a proposal was opened)
    stop_text: str = ""  # the stop reason with its English meaning, e.g. "连续无提升 (no gain from 3 different things tried, patience 3)"


ProgressCallback = Callable[[ProgressEvent], None]


class BaselineFailed(TunebotError):
    """The unmodified op fails L0 or cannot be timed: nothing can be tuned."""


@dataclass
class _Run:
    """What one run works with; built once by `_prepare`."""

    request: TuneRequest
    repo: object  # git.Repo
    op: OpConfig
    settings: RunSettings
    repo_cfg: RepoConfig
    base_sha: str
    base_branch: str
    worktree: Path
    log: ResultsLog
    forge: Forge
    progress: ProgressCallback
    fold: rs.Fold | None = None  # the records folded so far (see _state)
    sources: dict = field(default_factory=dict)  # (sha, path) -> text of committed best sources

    @property
    def prefix(self) -> str:
        return naming.run_prefix(self.repo_cfg.branch_prefix, self.op.name)

    @property
    def delivery_branch(self) -> str:
        return naming.delivery_branch(self.repo_cfg.branch_prefix, self.op.name)

    def rel(self, name: str) -> str:
        return (self.op.perf_dir / name).as_posix()


EvaluatorFactory = Callable[[OpConfig, Path], Evaluator]


def run_tune(
    request: TuneRequest,
    forge: Forge,
    progress: ProgressCallback | None = None,
    evaluator_factory: EvaluatorFactory = Evaluator,
) -> RunOutcome:
    """Run (or resume) one tuning run of `request.op` and propose the best variant.

    `evaluator_factory` exists for the overhead benchmark, which wraps the real
    Evaluator to subtract kernel time from the bot's own time.
    """
    with (
        ExitStack() as held
    ):  # the run lock is taken inside _prepare, before anything is moved or written
        run = _prepare(request, forge, progress or (lambda event: None), held)
        if request.dry_run:
            return _dry_run(run)
        return _run_locked(run, evaluator_factory)


@contextmanager
def _run_lock(state_dir: Path, op: str):
    """One live run per op (an flock: a killed run never leaves it stale)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        try:
            held.enter_context(fs.file_lock(state_dir / "run.lock", timeout_s=0))
        except fs.LockBusy:
            raise RunBusy(
                f"another tunebot process is tuning {op} right now; wait for it to finish, "
                f"or stop it with `tunebot cancel {op}`"
            ) from None
        yield


def _state(run: _Run) -> rs.RunState:
    """The run's state, folding only the records appended since the last call (live object)."""
    if run.fold is None:
        run.fold = rs.Fold(run.log)
    return run.fold()


def _best_source(run: _Run, state: rs.RunState) -> str:
    """The best-so-far source as committed (read from git once per best, not once per iteration)."""
    key = (state.best_sha, state.best_path)
    if key not in run.sources:
        run.sources.clear()
        run.sources[key] = repository.read_file(run.repo, state.best_sha, state.best_path)
    return run.sources[key]


def _run_locked(run: _Run, evaluator_factory: EvaluatorFactory) -> RunOutcome:
    request = run.request
    state = _state(run)
    if state.start is None:
        run.log.append(
            {
                "key": rs.START,
                "kind": rs.START,
                "op": run.op.qualified,
                "base_sha": run.base_sha,
                "base_branch": run.base_branch,
                "settings": dataclasses.asdict(run.settings),
                "requester": request.requester,
                "time": _now(),
            }
        )
        state = _state(run)
        _cancel_file(run).unlink(
            missing_ok=True
        )  # a cancel of an earlier run must not stop this one
        run.progress(
            ProgressEvent(
                "start",
                run.op.qualified,
                sha=run.base_sha,
                message=f"tuning {run.op.qualified} at {run.base_sha[:10]}",
            )
        )
    else:
        _restore_refs(run, state)
        note = ""
        if request.base_ref is None and repository.resolve(run.repo, "HEAD") != run.base_sha:
            note = (
                f" (recorded at {run.base_sha[:10]}; HEAD has moved since: "
                "add --restart to tune the new HEAD instead)"
            )
        run.progress(
            ProgressEvent(
                "resumed",
                run.op.qualified,
                iteration=len(state.iterations),
                message=f"resuming after {len(state.iterations)} recorded iterations{note}",
            )
        )
    evaluator = run_guard.GuardedEvaluator(
        evaluator_factory(run.op, run.worktree),
        run,
        lambda message: run.progress(ProgressEvent("warning", run.op.qualified, message=message)),
    )
    if state.baseline is None:
        _measure_baseline(run, evaluator)
        state = _state(run)
    if state.stop is None:
        _iterate(run, evaluator, state)
        state = _state(run)
    if state.delivery is None:
        _deliver(run, state)
        state = _state(run)
    proposal = _propose(run, state)
    return _outcome(run, _state(run), proposal)


# ---------------------------------------------------------------- preparing


def _prepare(
    request: TuneRequest, forge: Forge, progress: ProgressCallback, held: ExitStack
) -> _Run:
    """Resolve and validate everything before anything is written (so a bad flag loses nothing).

    The run lock is entered on `held` before the records are read for writing: a second
    process for the same op is refused before it can archive, clean or reset anything."""
    repo = repository.open_repo(request.repo)
    checkout = Path(repo.working_tree_dir)
    found = _resolve_op_at(repo, repository.resolve(repo, request.base_ref or "HEAD"), request.op)
    runs_dir = repository.state_dir(repo) / "runs"
    _refuse_name_clash(runs_dir, found, forge)
    log = ResultsLog(runs_dir / found.project / found.name / "results.jsonl")
    if not request.dry_run:
        held.enter_context(_run_lock(log.path.parent, found.qualified))
    previous = rs.replay(log.read())
    fresh = request.restart or bool(
        previous.proposal and _proposal_closed(forge, previous.proposal)
    )
    superseded = (
        None
        if fresh or request.dry_run
        else run_guard.superseded_baseline(repo, previous, found, request)
    )
    if superseded:
        fresh = True
        progress(ProgressEvent("warning", found.qualified, message=superseded))
    if fresh:
        previous = rs.RunState()
    if previous.start:
        _refuse_changed_request(repo, request, previous.start)
        base_sha, base_branch = previous.start["base_sha"], previous.start["base_branch"]
    else:
        base_sha = repository.resolve(repo, request.base_ref or "HEAD")
        base_branch = _base_branch(repo, request, found)
        if (
            not request.remote and request.requester is None
        ):  # a forge's base lives there; it refuses a wrong one
            run_guard.check_base_branch(
                repo, base_branch, "--into" if request.base_branch else "the base branch"
            )
    repo_cfg, op = _config_at(repo, base_sha, found)
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
    if previous.start:
        settings = RunSettings(**previous.start["settings"])
    if request.dry_run:  # plan only: create nothing, not even a worktree
        return _Run(
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
    warn = lambda message: progress(ProgressEvent("warning", op.qualified, message=message))
    orphans = (
        None
        if fresh
        else run_guard.orphan_branches(repo, log, previous, prefix, f"tunebot tune {op.qualified}")
    )
    if orphans:
        fresh = True
        warn(orphans)
    if fresh:
        _archive_run(repo, repo_cfg, op, log)
    name = f"{op.project}__{op.name}"
    for note in run_guard.housekeeping(
        repo, log.path.parent, prefix, repository.state_dir(repo) / "worktrees" / name
    ):
        warn(note)
    run_guard.check_branches(repo, prefix, rs.replay(log.read()))
    worktree = worktrees.ensure_worktree(repo, name, base_sha)
    log = run_guard.GuardedLog(log.path, warn)
    return _Run(
        request, repo, op, settings, repo_cfg, base_sha, base_branch, worktree, log, forge, progress
    )


class BadRequest(TunebotError):
    """A tune request that contradicts the recorded run or makes no sense: exit 2, nothing written."""

    exit_code = 2


class RunBusy(TunebotError):
    """Another tunebot process is running the same op."""

    exit_code = 3


def _refuse_name_clash(runs_dir: Path, op: OpConfig, forge: Forge) -> None:
    """Branches are named tunebot/<op>/..., without the project: two projects' ops of the same
    name would overwrite each other's branches and proposal, so only one may have a live run."""
    for other in sorted(runs_dir.glob(f"*/{op.name}/results.jsonl")):
        project = other.parent.parent.name
        if project == op.project:
            continue
        state = rs.replay(ResultsLog(other).read())
        if state.start and not (state.proposal and _proposal_closed(forge, state.proposal)):
            raise BadRequest(
                f"{project}/{op.name} already has a tunebot run, and iteration branches are named "
                f"tunebot/{op.name}/v<N> for both; merge or close its proposal first, or rename one op"
            )


def _refuse_changed_request(repo, request: TuneRequest, start: dict) -> None:
    """A recorded run resumes with its recorded settings; flags that say otherwise are a mistake."""
    recorded = start["settings"]
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
    if request.base_ref and repository.resolve(repo, request.base_ref) != start["base_sha"]:
        differs.append(f"--base {request.base_ref}")
    if request.base_branch and request.base_branch != start["base_branch"]:
        differs.append(f"--into {request.base_branch}")
    if differs:
        raise BadRequest(
            f"a run of {start['op']} is recorded at {start['base_sha'][:10]} with settings "
            f"{json.dumps(recorded, ensure_ascii=False, sort_keys=True)}; {', '.join(differs)} "
            "would change it. Run without those flags to resume it, or add --restart to start over"
        )


def _base_branch(repo, request: TuneRequest, op: OpConfig) -> str:
    if request.base_branch:
        return request.base_branch
    if request.base_ref and refs.branch_sha(repo, request.base_ref) is not None:
        return request.base_ref  # tuning a branch proposes into that branch, not the current one
    configured = load_repo_config(Path(repo.working_tree_dir)).base_branch
    branch = configured or repository.current_branch(repo)
    if not branch:
        raise BadRequest(
            "HEAD is detached and no base branch is configured; "
            "pass --into <branch> or set base_branch in .tunebot.yml"
        )
    return branch


def _resolve_op_at(repo, sha: str, name: str) -> OpConfig:
    """Resolve an op name against the tree of `sha` (the code that will be tuned), not the checkout.

    Only the name is resolved here; _config_at reads the op's tune.yaml and DESIGN.md."""
    tree = CommitTree(repo, sha)
    repo_cfg = load_repo_config(tree)
    try:
        op_dir = find_op(tree, repo_cfg, name)
    except TunebotError:
        _refuse_uncommitted(repo, sha, name)
        raise
    return OpConfig(project=op_dir.parent.name, name=op_dir.name, dir=op_dir)


def _refuse_uncommitted(repo, sha: str, name: str) -> None:
    """If the op exists in the checkout only, say that it needs committing."""
    checkout = Path(repo.working_tree_dir)
    try:
        op = resolve_op(checkout, load_repo_config(checkout), name)
    except TunebotError:
        return
    raise BadRequest(
        f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
        "only: commit the op (or pass --base with a commit that has it)"
    )


def _config_at(repo, sha: str, op: OpConfig) -> tuple[RepoConfig, OpConfig]:
    """.tunebot.yml and the op's config as committed at `sha`, not as the (maybe dirty) checkout has them."""
    source = repository.read_file(repo, sha, op.source.as_posix(), missing_ok=True)
    if source is None:
        raise BadRequest(
            f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
            "only: commit the op (or pass --base with a commit that has it)"
        )
    tree = CommitTree(repo, sha)
    return load_repo_config(tree), load_op_config(tree, op.dir)


def _proposal_closed(forge: Forge, record: dict) -> bool:
    try:
        return forge.get(str(record["id"])).state != "open"
    except ProposalNotFound:  # deleted; any other error (e.g. an API outage) must not wipe the run
        return True


def _archive_run(repo, repo_cfg: RepoConfig, op: OpConfig, log: ResultsLog) -> None:
    """Start over: keep the old records and branches aside (refs/tunebot/archive/), never delete them."""
    label = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    prefix = naming.run_prefix(repo_cfg.branch_prefix, op.name)
    names = branches.owned_branches(repo, prefix + "/")
    branches.archive_branches(repo, names, label)
    if log.path.exists():
        log.path.rename(log.path.with_name(f"results.{label}.jsonl"))


def _restore_refs(run: _Run, state: rs.RunState) -> None:
    """Recreate iteration refs a crash left unwritten (their commits are recorded)."""
    for it in state.iterations:
        if refs.branch_sha(run.repo, it.branch) is None:
            branches.create_branch(run.repo, it.branch, it.sha)


def _dry_run(run: _Run) -> RunOutcome:
    source = repository.read_file(run.repo, run.base_sha, run.op.source.as_posix())
    planner = _planner(run)
    plan = planner.plan(PlanContext(best_source=source, allowed=run.settings.strategies))
    run.progress(
        ProgressEvent(
            "plan",
            run.op.qualified,
            message="\n".join(plan),
            data={"settings": dataclasses.asdict(run.settings)},
        )
    )
    return RunOutcome(
        op=run.op.qualified,
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
        plan=plan,
    )


def _planner(run: _Run) -> Planner:
    return Planner(
        run.op, evidence=delivery.evidence_at(run.repo, run.base_sha), proposer=_proposer(run)
    )


def _proposer(run: _Run):
    argv = run.op.proposer or run.repo_cfg.proposer
    if not argv:
        return None
    from bot.strategies.proposer import ExternalProposer

    return ExternalProposer(
        tuple(argv), cwd=run.worktree, timeout_s=run.repo_cfg.proposer_timeout_s
    )


# ---------------------------------------------------------------- measuring


def _measure_baseline(run: _Run, evaluator: Evaluator) -> None:
    # A merged best on the base is where this run starts: its gains are against what the base holds.
    rel, note = delivery.start_source(run.repo, run.base_sha, run.op)
    source = run.worktree / rel
    _phase(run, "baseline L0", 0)
    accuracy = evaluator.accuracy(source)
    if not accuracy.passed:
        raise BaselineFailed(
            f"the baseline {rel} fails L0 ({accuracy.status}){_toolchain_hint(accuracy.tail)}:\n"
            f"{accuracy.tail[-1500:]}"
        )
    _phase(run, "baseline timing", 0)
    latency = evaluator.latency(source)
    if not latency.ok:
        raise BaselineFailed(
            f"the baseline {rel} could not be timed ({latency.status})"
            f"{_toolchain_hint(latency.tail)}:\n{latency.tail[-1500:]}"
        )
    env = evaluator.environment(source, run.base_sha)
    run.log.append(
        {
            "key": rs.BASELINE,
            "kind": rs.BASELINE,
            "iteration": 0,
            "sha": run.base_sha,
            "path": rel,
            "accuracy": dataclasses.asdict(accuracy),
            "latency": dataclasses.asdict(latency),
            "environment": dataclasses.asdict(env),
            "time": _now(),
        }
    )
    merged = f" ({note})" if note else ""
    if rel != run.op.source.as_posix():
        recorded = delivery.merged_latency(run.repo, run.base_sha, run.op)
        merged = (
            f" (starting from the merged best {rel}"
            + (f", recorded at {recorded:.2f} us, re-measured now" if recorded is not None else "")
            + ")"
        )
    run.progress(
        ProgressEvent(
            "baseline",
            run.op.qualified,
            iteration=0,
            latency_us=latency.median_us,
            accuracy=accuracy.status,
            sha=run.base_sha,
            message=f"baseline {latency.median_us:.2f} us{merged}",
        )
    )


def _toolchain_hint(tail: str) -> str:
    """Name a missing toolchain module instead of asking to fix the op."""
    missing = delivery.missing_module(tail)
    if missing is None:
        return "; fix it first"
    return (
        f": this machine lacks the `{missing}` module the op needs; run it where that toolchain is "
        "installed (an NPU runner for TileLang-NPUIR ops), or install it"
    )


def _phase(run: _Run, phase: str, iteration: int | None) -> None:
    """Progress between result lines (0: the baseline; None: after the loop)."""
    run.progress(
        ProgressEvent(
            "phase",
            run.op.qualified,
            iteration=iteration,
            message=phase,
            data={"max_iters": run.settings.max_iters},
        )
    )


def _stop_reason(run: _Run, state: rs.RunState) -> str | None:
    target = run.settings.target_us
    if target is not None and state.best_us is not None and state.best_us <= target:
        return TARGET_REACHED
    if len(state.iterations) >= run.settings.max_iters:
        return MAX_ITERS
    if state.no_gain_streak >= run.settings.patience:
        return NO_GAIN
    if _cancel_file(run).exists():
        return CANCELLED
    return None


def _cancel_file(run: _Run) -> Path:
    return run.log.path.with_name("cancel")


def _iterate(run: _Run, evaluator: Evaluator, state: rs.RunState) -> None:
    planner = _planner(run)
    while True:
        reason = _stop_reason(run, state)
        if reason is None and state.rejections >= MAX_REJECTIONS:
            reason = EXHAUSTED
        if reason is None:
            best_source = _best_source(run, state)
            ctx = PlanContext(
                best_source=best_source,
                history=tuple(state.attempts),
                allowed=run.settings.strategies,
                profile_summary=_profile_summary(state),
                last_failure=state.last_failure,
            )
            variant = planner.next(ctx)
            if (
                isinstance(variant, Refusal)
                and variant.attempt is not None
                and not variant.exhausted
            ):
                _record_rejection(run, state, variant)
                state = _state(run)
                continue
            if not isinstance(variant, Variant):
                reason = EXHAUSTED
        if reason is not None:
            break
        _run_iteration(run, evaluator, state, variant, best_source)
        state = _state(run)
    _finish(run, evaluator, state, reason)


def _record_rejection(run: _Run, state: rs.RunState, refusal: Refusal) -> None:
    """A proposal refused before evaluation: kept in the records, never an iteration."""
    run.log.append(
        {
            "key": f"{rs.REJECTED}:{state.rejections + 1}",
            "kind": rs.REJECTED,
            "attempt": rs.attempt_to_dict(refusal.attempt),
            "reason": refusal.reason,
            "time": _now(),
        }
    )
    run.progress(
        ProgressEvent(
            "iteration",
            run.op.qualified,
            strategy=refusal.strategy,
            verdict="rejected",
            change=refusal.attempt.change.description,
            message=refusal.reason,
        )
    )


def _profile_summary(state: rs.RunState) -> dict:
    best = state.best_latency
    return {
        "baseline_us": state.baseline_us,
        "best_us": state.best_us,
        "best_iteration": state.best_iteration,
        "spread": best.spread if best else None,
        "backend": best.backend if best else None,
    }


def _run_iteration(
    run: _Run, evaluator: Evaluator, state: rs.RunState, variant: Variant, best_source: str
) -> None:
    n = state.next_iteration
    _materialize(run, state.best_path, best_source)
    rel = run.rel(f"{run.op.name}_opt_v{n}.py")
    path = run.worktree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source_text.encode(variant.source))
    _phase(run, "L0", n)
    accuracy = evaluator.accuracy(path)
    latency: LatencyResult | None = None
    decision: Decision | None = None
    if accuracy.passed:
        _phase(
            run, "timing", n
        )  # and deciding: on the cpu backend both run as pairs in one process
        latency, decision = evaluator.compare(
            run.worktree / state.best_path, state.best_latency, path, run.settings.noise_floor
        )
    verdict = _verdict(variant, accuracy.status, latency, decision)
    branch = naming.iteration_branch(run.prefix, n)
    median = latency.median_us if latency and latency.ok else None
    reason = rs.iteration_reason(
        verdict,
        {
            "decision": dataclasses.asdict(decision) if decision else None,
            "accuracy": dataclasses.asdict(accuracy),
            "latency": dataclasses.asdict(latency) if latency else None,
        },
    )
    _phase(run, "commit", n)
    rows = delivery.log_rows(state) + [
        LogRow(
            iter=n,
            strategy=_strategy_cell(variant.change.strategy, variant.change.description),
            latency_us=median,
            gain_pct=rs.gain_pct(state.baseline_us, median),
            accuracy=accuracy.status,
            verdict=verdict,
            reason=reason,
        )
    ]
    opt_log = OptLog(
        op=run.op.name,
        baseline_us=state.baseline_us,
        baseline_source=delivery.baseline_label(run.op, state.baseline["path"]),
        rows=rows,
        conclusion=None,
    )
    message = (
        f"tunebot: {run.op.name} v{n}: {variant.change.strategy}: {variant.change.description}\n\n"
        f"Parent: best-so-far {'iter ' + str(state.best_iteration) if state.best_iteration else 'baseline'}"
        f" ({state.best_sha[:12]}).\nL0: {accuracy.status}; latency: "
        f"{f'{median:.2f} us' if median is not None else '-'}; verdict: {verdict}."
    )
    sha = commits.commit_files(
        run.repo,
        state.best_sha,
        {
            rel: source_text.encode(variant.source),
            run.rel("opt_log.md"): render_opt_log(opt_log).encode(),
        },
        message,
    )
    env = evaluator.environment(path, sha)
    run.log.append(
        {
            "key": iteration_key(n),
            "kind": rs.ITERATION,
            "iteration": n,
            "parent": state.best_sha,
            "parent_iteration": state.best_iteration,
            "branch": branch,
            "sha": sha,
            "path": rel,
            "change": rs.change_to_dict(variant.change),
            "source_hash": variant.source_hash,
            "parent_hash": source_hash(best_source),
            "diff": variant.diff,
            "accuracy": dataclasses.asdict(accuracy),
            "latency": dataclasses.asdict(latency) if latency else None,
            "decision": dataclasses.asdict(decision) if decision else None,
            "verdict": verdict,
            "reason": reason,
            "environment": dataclasses.asdict(env),
            "time": _now(),
        }
    )
    branches.create_branch(run.repo, branch, sha)
    run.progress(
        ProgressEvent(
            "iteration",
            run.op.qualified,
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
    )


def _materialize(run: _Run, rel: str, source: str) -> None:
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


def _strategy_cell(strategy: str, description: str) -> str:
    return f"{strategy} {description}"


def _finish(run: _Run, evaluator: Evaluator, state: rs.RunState, reason: str) -> None:
    """Re-measure the baseline for drift, then record the stop."""
    if state.baseline_end is None:
        _phase(run, "baseline re-measure", None)
        _materialize(
            run,
            state.baseline["path"],
            repository.read_file(run.repo, run.base_sha, state.baseline["path"]),
        )
        latency = evaluator.latency(run.worktree / state.baseline["path"])
        start = state.baseline_us
        drift = ((latency.median_us - start) / start * 100.0) if latency.ok and start else None
        run.log.append(
            {
                "key": rs.BASELINE_END,
                "kind": rs.BASELINE_END,
                "sha": run.base_sha,
                "latency": dataclasses.asdict(latency),
                "drift_pct": drift,
                "time": _now(),
            }
        )
    run.log.append(
        {
            "key": rs.STOP,
            "kind": rs.STOP,
            "reason": reason,
            "iterations": len(state.iterations),
            "best_iteration": state.best_iteration,
            "best_sha": state.best_sha,
            "time": _now(),
        }
    )
    warning = rs.noise_warning(state, run.settings.noise_warn)
    run.progress(
        ProgressEvent(
            "stop",
            run.op.qualified,
            iteration=len(state.iterations),
            message=reason + (f" · {warning}" if warning else ""),
            latency_us=state.best_us,
            data={
                **dataclasses.asdict(run.settings),
                "detectable": state.smallest_detectable,
                "noise_warning": warning,
            },
        )
    )


# ---------------------------------------------------------------- delivering


def _deliver(run: _Run, state: rs.RunState) -> None:
    _phase(run, "delivery commit", None)
    files = delivery.delivery_files(
        run.repo, run.base_sha, run.op, state, run.log.path.read_bytes()
    )
    report = delivery.report_text(
        run.op, state, run.settings.noise_floor, run.worktree, run.settings.noise_warn
    )
    message = (
        f"tunebot: {run.op.name}: best variant "
        f"{'iter ' + str(state.best_iteration) if state.best_iteration else '(baseline kept)'}\n\n{report}"
    )
    sha = commits.commit_files(run.repo, state.best_sha, files, message)
    run.log.append(
        {
            "key": rs.DELIVERY,
            "kind": rs.DELIVERY,
            "branch": run.delivery_branch,
            "sha": sha,
            "report": report,
            "time": _now(),
        }
    )
    _ensure_branch(run, run.delivery_branch, sha)
    run.progress(
        ProgressEvent(
            "delivered", run.op.qualified, branch=run.delivery_branch, sha=sha, message=report
        )
    )


def _ensure_branch(run: _Run, name: str, sha: str) -> None:
    """Create the delivery branch if it is missing; if someone moved it on, keep their commits."""
    current = refs.branch_sha(run.repo, name)
    if current is None:
        branches.create_branch(run.repo, name, sha)
    elif current != sha:
        run.progress(
            ProgressEvent(
                "delivered",
                run.op.qualified,
                branch=name,
                sha=current,
                message=f"{name} has moved on from tunebot's {sha[:10]} to {current[:10]}; "
                "left as it is",
            )
        )


def _propose(run: _Run, state: rs.RunState) -> Proposal | None:
    """Open (or update) the proposal, only when the run beat what the base holds (TUNING_COMPLETED)."""
    report = state.delivery["report"]
    _restore_refs(run, state)
    _ensure_branch(run, run.delivery_branch, state.delivery["sha"])
    if delivery.run_verdict(state)[1]:
        _close_superseded(run)
        return None  # no gain, a cancel or nothing to try: branches and records stay, nothing is proposed
    if run.request.remote:
        # Iteration branches are tunebot's own and immutable: force them, so a restarted run can
        # replace its old remote copies. The delivery branch is never forced (people may push to it).
        refspecs = [f"+refs/heads/{it.branch}:refs/heads/{it.branch}" for it in state.iterations]
        refspecs.append(f"refs/heads/{run.delivery_branch}:refs/heads/{run.delivery_branch}")
        remotes.push(run.repo, run.request.remote, refspecs)
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
    if state.proposal is None or str(state.proposal.get("id")) != str(proposal.id):
        run.log.append(
            {
                "key": f"{rs.PROPOSAL}:{proposal.id}",
                "kind": rs.PROPOSAL,
                "id": proposal.id,
                "url": proposal.url,
                "time": _now(),
            }
        )
    return proposal


def _close_superseded(run: _Run) -> None:
    """An open proposal of an earlier (restarted) run follows the delivery branch, which now holds this
    run's delivery: its body no longer describes its head, so it is closed rather than left to be merged."""
    existing = run.forge.find_proposal(run.delivery_branch)
    close = getattr(run.forge, "close", None)
    if existing is None or close is None:
        return
    close(existing.id)
    run.progress(
        ProgressEvent(
            "note",
            run.op.qualified,
            message=(
                f"closed proposal #{existing.id}: it came from an earlier run, and {run.delivery_branch} now holds "
                "this run's delivery, which is not proposed"
            ),
        )
    )


def _outcome(run: _Run, state: rs.RunState, proposal: Proposal | None) -> RunOutcome:
    return RunOutcome(
        op=run.op.qualified,
        stop_reason=state.stop["reason"],
        iterations=len(state.iterations),
        baseline_us=state.baseline_us,
        best_us=state.best_us,
        best_iteration=state.best_iteration,
        improvement_pct=rs.gain_pct(state.baseline_us, state.best_us) or 0.0,
        delivery_branch=run.delivery_branch,
        proposal=proposal,
        report=state.delivery["report"],
        results_path=run.log.path,
        drift_pct=(state.baseline_end or {}).get("drift_pct"),
        perf_dir=run.op.perf_dir.as_posix(),
        iteration_prefix=naming.iteration_prefix(run.prefix),
        verdict=delivery.run_verdict(state)[0],
        no_proposal_reason=delivery.run_verdict(state)[1],
        stop_text=stop_reason_text(
            state.stop["reason"],
            max_iters=run.settings.max_iters,
            patience=run.settings.patience,
            target_us=run.settings.target_us,
        ),
    )


def cancel(repo_path: Path, op: str) -> Path:
    """Ask a running tune of `op` to stop after its current iteration (stop reason 已取消)."""
    repo = repository.open_repo(repo_path)
    checkout = Path(repo.working_tree_dir)
    resolved = resolve_op(checkout, load_repo_config(checkout), op)
    state_dir = repository.state_dir(repo) / "runs" / resolved.project / resolved.name
    if not fs.lock_is_held(state_dir / "run.lock"):
        raise NothingToCancel(
            f"no tunebot run of {resolved.qualified} is in progress; nothing to cancel"
        )
    flag = state_dir / "cancel"
    flag.write_text(_now())
    return flag


class NothingToCancel(TunebotError):
    exit_code = 3


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
