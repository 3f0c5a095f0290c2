"""What a caller (the CLI, the GitHub flow) hands a run, hears while it runs and gets back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot.forge.base import Proposal


@dataclass(frozen=True)
class TuneRequest:
    repo: Path  # the user's repository (any worktree of it)
    op: str  # "<op>" or "<project>/<op>" (an op or a model target)
    base_ref: str | None = None  # sha or branch to tune at; None: HEAD
    base_branch: str | None = None  # branch the proposal merges into; None: config or current
    max_iters: int | None = None  # command-line overrides of the config
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None
    restart: bool = False
    dry_run: bool = False
    requester: str | None = None
    # different things tried without a gain before stopping (bot.run.state.patience_count)
    patience: int | None = None
    no_target: bool = False  # ignore any configured target (the demo, to show the loop)


EventKind = Literal[
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


@dataclass
class ProgressEvent:
    """Emitted at every step; the CLI prints it, the GitHub handler edits the status comment."""

    kind: EventKind
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
    # the stop reason with its English meaning, e.g. "连续无提升 (no gain from 3 different things
    # tried, patience 3)"
    stop_text: str = ""


def planned(op: str, results_path: Path, plan: list[str]) -> RunOutcome:
    """The outcome of a --dry-run: the plan, nothing measured."""
    return RunOutcome(
        op=op,
        stop_reason="",
        iterations=0,
        baseline_us=None,
        best_us=None,
        best_iteration=None,
        improvement_pct=0.0,
        delivery_branch=None,
        proposal=None,
        report="",
        results_path=results_path,
        plan=plan,
    )


ProgressCallback = Callable[[ProgressEvent], None]
