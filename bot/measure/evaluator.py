"""The single facade the loop uses to measure a variant. CONTRACT.

Implementation owner: the measurement work package. Every call runs the kernel
in a sandboxed subprocess with a timeout; misbehaviour comes back as a result
(status timeout/error/fail), never as an exception, except for MeasureError
when the tool itself is missing (e.g. no msprof on PATH).
"""

from __future__ import annotations

from pathlib import Path

from bot.config import OpConfig
from bot.measure.types import AccuracyResult, Decision, Environment, LatencyResult


class Evaluator:
    def __init__(self, op: OpConfig, workdir: Path) -> None:
        """`workdir` is the worktree root; variant paths are given relative to it or absolute."""
        self.op = op
        self.workdir = workdir

    def accuracy(self, source: Path) -> AccuracyResult:
        """L0 gate of the kernel in `source` (command or harness mode per op.accuracy)."""
        raise NotImplementedError

    def latency(self, source: Path) -> LatencyResult:
        """Kernel-only latency of `source` with the op's backend (auto-detected if 'auto')."""
        raise NotImplementedError

    def decide(self, best_source: Path, best: LatencyResult, candidate_source: Path,
               candidate: LatencyResult, noise_floor: float) -> Decision:
        """Better only if gain >= max(noise_floor, measured noise); re-measures A/B/A/B when close."""
        raise NotImplementedError

    def environment(self, source: Path, git_sha: str | None) -> Environment:
        """Backend, device, CANN/torch/torch_npu/driver versions, CPU model, sha, command line."""
        raise NotImplementedError
