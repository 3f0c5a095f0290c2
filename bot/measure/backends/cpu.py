"""cpu backend: CPU time (and wall time) of the entry call in a fresh interpreter.

Process start, imports and input generation happen before the clock starts;
only `entry(*inputs)` is timed, `repeats` times after `warmup` calls. The result's
samples are the per-call CPU time of the process (clock "cpu", what the decision rule
uses: load does not inflate it); the wall-time samples and their summary are kept in
`extra["wall"]`. `clock="wall"` makes wall time the primary figure instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from bot.measure.backends.base import DeviceKind, Request
from bot.measure.backends.common import (
    from_failure,
    from_samples,
    implausible_samples,
    phase_seconds,
    run_runner,
)
from bot.measure.sandbox import SandboxResult
from bot.measure.stats import summarize
from bot.measure.types import LatencyResult

NAME = "cpu"
CLOCKS = ("cpu", "wall")


def measure_cpu(
    source: Path,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    memory_limit_mb: int | None = None,
    seed: int = 0,
    clock: str = "cpu",
    threads: int = 1,
) -> LatencyResult:
    """Time `entry(*inputs(seed))` from `source` in a sandboxed subprocess.

    Returns status "ok" with samples and their summary, or "timeout"/"error"
    with the output tail and the reason (signal, exit code). `threads` pins the
    math libraries' thread count in the child (0 leaves their default).
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    source = Path(source).resolve()
    args = [
        "--source",
        str(source),
        "--entry",
        entry,
        "--inputs",
        inputs,
        "--seed",
        str(seed),
        "--warmup",
        str(warmup),
        "--repeats",
        str(repeats),
        "--threads",
        str(threads),
    ]
    run, payload = run_runner("cpu", args, cwd or source.parent, timeout_s, memory_limit_mb)
    if not run.ok or not payload or "samples_us" not in payload:
        message = (payload or {}).get("error")
        if run.ok and not message:
            message = "the cpu runner wrote no samples"
        return from_failure(NAME, run, message)
    forged = implausible_samples(
        payload["samples_us"], repeats, phase_seconds(run, "timing"), exact=True
    )
    if forged:
        run.reason = f"the runner's result is not credible: {forged}"
        return from_failure(NAME, run)
    return _result(payload, "", clock, run, warmup, repeats)


def measure_cpu_pair(
    a: Path,
    b: Path,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    memory_limit_mb: int | None = None,
    seed: int = 0,
    clock: str = "cpu",
    threads: int = 1,
    isolate: bool = True,
) -> tuple[LatencyResult, LatencyResult]:
    """Time a and b call by call alternately in one fresh run; one result per side.

    With `isolate` (the default) each side runs in its own child process, the two pinned to
    one core (runners/forked.py); without it both share one process, where a kernel can change
    the other's speed (benchmarks/pair_interference.py compares the two). A failed run gives
    the same failure for both sides.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    a, b = Path(a).resolve(), Path(b).resolve()
    args = [
        "--source",
        str(a),
        "--source-b",
        str(b),
        "--entry",
        entry,
        "--inputs",
        inputs,
        "--seed",
        str(seed),
        "--warmup",
        str(warmup),
        "--repeats",
        str(repeats),
        "--threads",
        str(threads),
    ]
    if not isolate:
        args.append("--one-process")
    run, payload = run_runner("cpu", args, cwd or a.parent, timeout_s, memory_limit_mb)
    if not run.ok or not payload or "b_samples_us" not in payload:
        message = (payload or {}).get("error")
        if run.ok and not message:
            message = "the cpu runner wrote no samples"
        failure = from_failure(NAME, run, message)
        return failure, failure
    forged = _implausible_pair(payload, repeats, phase_seconds(run, "timing"))
    if forged:
        run.reason = f"the runner's result is not credible: {forged}"
        failure = from_failure(NAME, run)
        return failure, failure
    side_b = dict(
        payload, samples_us=payload["b_samples_us"], cpu_samples_us=payload.get("b_cpu_samples_us")
    )
    note = (
        "timed alternately with {}, each in its own process on one core"
        if payload.get("isolated")
        else "timed in one process alternately with {}"
    )
    return (
        _result(payload, note.format(b.name), clock, run, warmup, repeats),
        _result(side_b, note.format(a.name), clock, run, warmup, repeats),
    )


def _implausible_pair(payload: dict, repeats: int, phase_s: float | None) -> str | None:
    """Why a pair's samples cannot be what was measured, or None.

    Both sides together must fit the timed phase. A forked pair (runners/forked.py) also
    carries the parent's own clock of every call's round trip and of an empty round trip
    (`ping_us`): each side's samples must fit its round trips, and account for most of them
    once the messaging is taken off, so a child cannot report times its calls did not take.
    """
    both = list(payload.get("samples_us") or []) + list(payload.get("b_samples_us") or [])
    if not payload.get("isolated"):
        return implausible_samples(both, 2 * repeats, phase_s, exact=True)
    forged = implausible_samples(both, 2 * repeats, phase_s, exact=False)
    if forged:
        return forged
    pings = payload.get("ping_us")
    if not (isinstance(pings, list) and len(pings) == 2):
        return "the pair's round-trip figures are missing"
    for side, (key, trips_key) in enumerate(
        (("samples_us", "roundtrip_us"), ("b_samples_us", "b_roundtrip_us"))
    ):
        trips = payload.get(trips_key)
        if (
            not isinstance(trips, list)
            or implausible_samples(trips, repeats, None, exact=False)
            or not isinstance(pings[side], (int, float))
        ):
            return "the pair's round-trip figures are missing"
        loop_s = max(0.0, sum(trips) - repeats * max(0.0, float(pings[side]))) / 1e6
        forged = implausible_samples(payload[key], repeats, loop_s, exact=True)
        if forged:
            return f"side {'ab'[side]}: {forged}"
    return None


def _result(
    payload: dict, note: str, clock: str, run: SandboxResult, warmup: int, repeats: int
) -> LatencyResult:
    wall = [float(x) for x in payload["samples_us"]]
    cpu = [float(x) for x in payload.get("cpu_samples_us") or []]
    if clock == "cpu" and (len(cpu) != len(wall) or not any(cpu)):
        clock, cpu = (
            "wall",
            [],
        )  # a platform without a process CPU clock: say so, decide on wall time
    primary = cpu if clock == "cpu" else wall
    w = summarize(wall)
    wall_summary: dict = {
        "median_us": w.median,
        "min_us": w.min,
        "q1_us": w.q1,
        "q3_us": w.q3,
        "ci_low_us": w.ci_low,
        "ci_high_us": w.ci_high,
    }
    if clock == "cpu":
        wall_summary["samples_us"] = wall
    extra = {
        "clock": clock,
        "threads": payload.get("threads"),
        "pinned_threads": payload.get("pinned_threads"),
        "wall": wall_summary,
    }
    if "isolated" in payload:  # a pair: each side in its own process, or both in one
        extra["isolated"] = bool(payload["isolated"])
    notes = [f"warmup={warmup} repeats={repeats} clock={clock} threads={payload.get('threads')}"]
    if note:
        notes.append(note)
    return from_samples(NAME, primary, run.argv, tail=run.tail, notes=notes, extra=extra)


class CpuBackend:
    """Process CPU time per entry call in a fresh interpreter; pairs side by side, a process each."""

    name = NAME
    memory_kind: Literal["as", "data"] = "as"
    device: DeviceKind = "cpu"
    auto_rank = 10
    pairs = True
    requires: tuple[tuple[str, str, str], ...] = ()

    def unavailable(self) -> str | None:
        return None

    def measure(self, source: Path, request: Request) -> LatencyResult:
        return measure_cpu(source, **_settings(request))

    def measure_pair(
        self, a: Path, b: Path, request: Request
    ) -> tuple[LatencyResult, LatencyResult]:
        return measure_cpu_pair(a, b, **_settings(request))


def _settings(request: Request) -> dict[str, Any]:
    return {
        "entry": request.entry,
        "inputs": request.inputs,
        "warmup": request.warmup,
        "repeats": request.repeats,
        "timeout_s": request.timeout_s,
        "cwd": request.cwd,
        "memory_limit_mb": request.memory_limit_mb,
    }
