"""Every latency backend, by its `latency.backend` name: the one list the bot reads.

Config validation takes the allowed names from `REGISTRY`, the evaluator looks the
configured one up here, and `detect()` picks from it for `latency.backend: auto` (the
available backend with the highest `auto_rank`). A new backend is one
module with a class following `base.Backend` plus one line below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from bot.errors import MeasureError
from bot.measure.backends.base import Backend, DeviceKind, OneVariantPerProcess, Request
from bot.measure.backends.command import NAME as COMMAND
from bot.measure.backends.command import measure_command
from bot.measure.backends.cpu import CpuBackend
from bot.measure.backends.cuda import CudaBackend
from bot.measure.backends.msprof import MsprofBackend
from bot.measure.backends.npu_torch import NpuTorchBackend
from bot.measure.types import LatencyResult


class CommandBackend(OneVariantPerProcess):
    """The team's own benchmark command (`latency.command`, bot/measure/backends/command.py)."""

    name = COMMAND
    memory_kind: Literal["as", "data"] = "as"
    device: DeviceKind = "cpu"  # the command reports its own device in `environment`
    auto_rank = 0  # only when asked for: it needs `latency.command`
    requires: tuple[tuple[str, str, str], ...] = (
        (
            "command",
            "backend 'command' needs the benchmark command to run",
            'add e.g. `command: [python, bench.py, "{source}"]` under latency (docs/measurement.md)',
        ),
    )

    def unavailable(self) -> str | None:
        return None

    def measure(self, source: Path, request: Request) -> LatencyResult:
        if not request.command:
            raise MeasureError(
                "backend 'command' has no command. Fix: add "
                '`command: [python, bench.py, "{source}"]` under latency in tune.yaml'
            )
        return measure_command(
            source,
            request.command,
            entry=request.entry,
            warmup=request.warmup,
            repeats=request.repeats,
            timeout_s=request.timeout_s,
            cwd=request.cwd,
            memory_limit_mb=request.memory_limit_mb,
            config_file=request.config_file,
        )


# in the order error messages list them; `auto` tries them by `auto_rank` instead
REGISTRY: dict[str, Backend] = {
    "cpu": CpuBackend(),
    "cuda": CudaBackend(),
    "npu-msprof": MsprofBackend(),
    "npu-torch": NpuTorchBackend(),
    "command": CommandBackend(),
}


def detect() -> str:
    """The backend `latency.backend: auto` means here: npu-msprof > npu-torch > cuda > cpu.

    The available backend with the highest `auto_rank` (0: never picked automatically).
    """
    ranked = sorted(REGISTRY.values(), key=lambda b: -b.auto_rank)
    for backend in ranked:
        if backend.auto_rank > 0 and backend.unavailable() is None:
            return backend.name
    return "cpu"
