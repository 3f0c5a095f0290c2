"""What every latency backend is: the `Backend` protocol and the `Request` it measures.

A backend times the kernel of one variant file in a sandboxed child and returns a
`LatencyResult`: a kernel that hangs or crashes is a result (status timeout/error), and
only a missing tool (no msprof, no CUDA) raises `MeasureError`. The registry
(`bot/measure/backends/registry.py`) maps each `latency.backend` name to one instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from bot.errors import MeasureError
from bot.measure.types import LatencyResult

DeviceKind = Literal["cpu", "cuda", "npu"]


@dataclass(frozen=True)
class Request:
    """How to measure, from the op's config: the same for every backend.

    `kernel_name` (msprof/npu-torch: which launches count) and `command` (the command
    backend's benchmark argv) are read only by the backends that need them.
    """

    entry: str = "kernel"
    inputs: str = "get_inputs"
    warmup: int = 5
    repeats: int = 30
    timeout_s: float = 300.0
    cwd: Path | None = None
    memory_limit_mb: int | None = None
    kernel_name: str | None = None
    command: tuple[str, ...] | None = None
    op_name: str = ""
    config_file: str = "tune.yaml"  # the op's tune.yaml (repo-relative), for setup errors


class Backend(Protocol):
    """One latency backend. Attributes are read by the evaluator and `registry.detect()`."""

    name: str  # the `latency.backend` value, also LatencyResult.backend
    memory_kind: Literal["as", "data"]  # RLIMIT_AS, or the data segment (GPU drivers map much)
    device: DeviceKind  # what the environment record probes for the device name
    auto_rank: int  # `latency.backend: auto` picks the available one ranked highest; 0: never
    pairs: bool  # can time two variants side by side in one run (`measure_pair`)
    # latency keys it cannot run without: (key, problem, fix) for config validation's message
    requires: tuple[tuple[str, str, str], ...]

    def unavailable(self) -> str | None:
        """Why this backend cannot run on this machine, or None when it can (cheap, cached)."""
        ...

    def measure(self, source: Path, request: Request) -> LatencyResult:
        """Kernel latency of the variant in `source` (absolute path)."""
        ...

    def measure_pair(
        self, a: Path, b: Path, request: Request
    ) -> tuple[LatencyResult, LatencyResult]:
        """`a` and `b` timed side by side in one run, in alternating turns (only when `pairs`)."""
        ...


class OneVariantPerProcess:
    """Mixin of backends that time one variant per process: no pairs, `measure_pair` refuses."""

    name: str
    pairs = False

    def measure_pair(
        self, a: Path, b: Path, request: Request
    ) -> tuple[LatencyResult, LatencyResult]:
        raise MeasureError(f"the {self.name} backend cannot time two variants side by side")
