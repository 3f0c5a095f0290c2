"""cuda backend: CUDA-event device time of each entry call, L2 flushed between calls."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from bot.errors import MeasureError
from bot.measure import backends as probes
from bot.measure.backends.base import DeviceKind, OneVariantPerProcess, Request
from bot.measure.backends.common import (
    from_failure,
    from_samples,
    implausible_samples,
    phase_seconds,
    run_runner,
)
from bot.measure.types import LatencyResult

NAME = "cuda"


def measure_cuda(
    source: Path,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    memory_limit_mb: int | None = None,
) -> LatencyResult:
    """Raises MeasureError when CUDA is not available; kernel failures are results."""
    source = Path(source).resolve()
    args = [
        "--source",
        str(source),
        "--entry",
        entry,
        "--inputs",
        inputs,
        "--warmup",
        str(warmup),
        "--repeats",
        str(repeats),
    ]
    run, payload = run_runner("cuda", args, cwd or source.parent, timeout_s, memory_limit_mb)
    if payload and payload.get("unavailable"):
        raise MeasureError(
            f"{payload['unavailable']}. Fix: run on a machine with an NVIDIA GPU and a "
            "CUDA build of torch, or set latency.backend to cpu"
        )
    if not run.ok or not payload or "samples_us" not in payload:
        return from_failure(NAME, run, (payload or {}).get("error"))
    forged = implausible_samples(
        payload["samples_us"], repeats, phase_seconds(run, "timing"), exact=False
    )
    if forged:
        run.reason = f"the runner's result is not credible: {forged}"
        return from_failure(NAME, run)
    return from_samples(
        NAME,
        payload["samples_us"],
        run.argv,
        tail=run.tail,
        notes=[f"CUDA events, L2 flushed; warmup={warmup} repeats={repeats}"],
        extra={"device": payload.get("device")},
    )


class CudaBackend(OneVariantPerProcess):
    """CUDA-event device time; needs an NVIDIA GPU and a CUDA build of torch."""

    name = NAME
    memory_kind: Literal["as", "data"] = "data"
    device: DeviceKind = "cuda"
    auto_rank = 20
    requires: tuple[tuple[str, str, str], ...] = ()

    def unavailable(self) -> str | None:
        if probes.cuda_available():
            return None
        return "no NVIDIA GPU with a CUDA build of torch on this machine"

    def measure(self, source: Path, request: Request) -> LatencyResult:
        return measure_cuda(
            source,
            entry=request.entry,
            inputs=request.inputs,
            warmup=request.warmup,
            repeats=request.repeats,
            timeout_s=request.timeout_s,
            cwd=request.cwd,
            memory_limit_mb=request.memory_limit_mb,
        )
