"""npu-torch backend: torch_npu profiler, kernel_details.csv Duration(us).

The same source of truth TileLang's autotuner uses on Ascend. One profiler
step per entry call; a call that launches several kernels counts the sum of
its matching kernels' durations.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.errors import MeasureError
from bot.measure import backends as probes
from bot.measure import reaper
from bot.measure.backends.base import DeviceKind, OneVariantPerProcess, Request
from bot.measure.backends.common import from_failure, from_samples, run_runner
from bot.measure.types import LatencyResult

NAME = "npu-torch"


@dataclass(frozen=True)
class KernelRow:
    step: str | None
    name: str
    type: str | None
    duration_us: float
    block_dim: str | None = None


def parse_kernel_details(text: str, name_prefix: str | None = None) -> list[KernelRow]:
    """Rows of kernel_details.csv (optionally only names starting with `name_prefix`)."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    fields = [f.strip() for f in (reader.fieldnames or [])]
    if "Name" not in fields or "Duration(us)" not in fields:
        raise MeasureError(f"not a torch_npu kernel_details.csv (columns: {', '.join(fields)})")
    rows = []
    for raw in reader:
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
        try:
            duration = float(row["Duration(us)"])
        except ValueError:
            continue  # "N/A" rows carry no time
        if name_prefix and not row["Name"].startswith(name_prefix):
            continue
        rows.append(
            KernelRow(
                step=row.get("Step Id") or None,
                name=row["Name"],
                type=row.get("Type") or None,
                duration_us=duration,
                block_dim=row.get("Block Dim") or None,
            )
        )
    return rows


def per_step_us(rows: list[KernelRow]) -> list[float]:
    """One sample per profiler step (sum of its kernels); rows without a step count alone."""
    steps: dict[str, float] = {}
    loose: list[float] = []
    for r in rows:
        if r.step is None:
            loose.append(r.duration_us)
        else:
            steps[r.step] = steps.get(r.step, 0.0) + r.duration_us
    return [steps[k] for k in sorted(steps, key=lambda s: (len(s), s))] + loose


def measure_npu_torch(
    source: Path,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    kernel_name: str | None = None,
    memory_limit_mb: int | None = None,
) -> LatencyResult:
    if importlib.util.find_spec("torch_npu") is None:
        raise MeasureError(
            "torch_npu cannot be imported (not installed in this Python). Fix: install "
            "torch_npu matching your CANN and torch, or set latency.backend to cpu"
        )
    source = Path(source).resolve()
    trace = Path(tempfile.mkdtemp(prefix=reaper.temp_prefix("npuprof")))
    try:
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
            "--trace-dir",
            str(trace),
        ]
        run, payload = run_runner(
            "npu_torch",
            args,
            cwd or source.parent,
            timeout_s,
            memory_limit_mb,
            extra_writable=(trace,),
        )
        if payload and payload.get("unavailable"):
            raise MeasureError(
                f"{payload['unavailable']}. Fix: source CANN's set_env.sh and install a "
                "torch_npu matching it, or set latency.backend to cpu"
            )
        if not run.ok:
            return from_failure(NAME, run, (payload or {}).get("error"))
        files = sorted(trace.rglob("kernel_details.csv"))
        if not files:
            raise MeasureError(f"the torch_npu profiler wrote no kernel_details.csv under {trace}")
        rows = [
            r
            for f in files
            for r in parse_kernel_details(
                f.read_text(encoding="utf-8", errors="replace"), kernel_name
            )
        ]
        if not rows:
            raise MeasureError(f"no kernel in kernel_details.csv matched '{kernel_name}'")
        samples = per_step_us(rows)
        extra = {
            "kernels": sorted({r.name for r in rows}),
            "block_dim": sorted({r.block_dim for r in rows if r.block_dim}),
        }
        return from_samples(
            NAME,
            samples,
            run.argv,
            tail=run.tail,
            extra=extra,
            notes=[f"torch_npu profiler: warmup={warmup} active={repeats}"],
        )
    finally:
        shutil.rmtree(trace, ignore_errors=True)


class NpuTorchBackend(OneVariantPerProcess):
    """torch_npu profiler kernel durations on Ascend; needs torch_npu."""

    name = NAME
    memory_kind: Literal["as", "data"] = "data"
    device: DeviceKind = "npu"
    auto_rank = 30
    requires: tuple[tuple[str, str, str], ...] = ()

    def unavailable(self) -> str | None:
        if probes.torch_npu_imports():
            return None
        return "torch_npu does not import here (no Ascend stack)"

    def measure(self, source: Path, request: Request) -> LatencyResult:
        return measure_npu_torch(
            source,
            entry=request.entry,
            inputs=request.inputs,
            warmup=request.warmup,
            repeats=request.repeats,
            timeout_s=request.timeout_s,
            cwd=request.cwd,
            kernel_name=request.kernel_name,
            memory_limit_mb=request.memory_limit_mb,
        )
