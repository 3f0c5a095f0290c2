"""The tuning state machine: baseline, iterate, decide, stop, deliver, resume.

CONTRACT for callers (cli, github handler). Knows no GitHub and no git
internals: it talks to gitops functions, a Forge, an Evaluator and a Planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from bot.forge.base import Forge, Proposal

StopReason = Literal["达目标", "迭代上限", "连续无提升", "策略耗尽", "已取消"]


@dataclass(frozen=True)
class TuneRequest:
    repo: Path  # the user's repository (any worktree of it)
    op: str  # "<op>" or "<project>/<op>"
    base_ref: str | None = None  # sha or branch to tune at; None: HEAD
    base_branch: str | None = None  # branch the proposal merges into; None: config or current branch
    max_iters: int | None = None  # command-line overrides of the config
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None
    restart: bool = False
    dry_run: bool = False
    remote: str | None = None  # push branches to this remote (GitHub flow); None: local only
    requester: str | None = None


@dataclass
class ProgressEvent:
    """Emitted at every step; the CLI prints it, the GitHub handler edits the status comment."""

    kind: Literal["start", "baseline", "iteration", "resumed", "stop", "delivered", "plan"]
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


ProgressCallback = Callable[[ProgressEvent], None]


def run_tune(request: TuneRequest, forge: Forge, progress: ProgressCallback | None = None) -> RunOutcome:
    """Run (or resume) one tuning run. Implemented in this module by the core work package."""
    raise NotImplementedError
