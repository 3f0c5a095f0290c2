"""Helpers every latency backend uses to turn a sandboxed run into a LatencyResult."""

from __future__ import annotations

import math
from pathlib import Path

from bot.measure.sandbox import SandboxResult, run_sandboxed, runner_argv, runner_env
from bot.measure.stats import summarize
from bot.measure.types import LatencyResult, LatencyStatus


def from_samples(
    backend: str,
    samples_us: list[float],
    command: list[str],
    tail: str = "",
    notes: list[str] | None = None,
    extra: dict | None = None,
    suspect: bool = False,
) -> LatencyResult:
    s = summarize(samples_us)
    return LatencyResult(
        status="ok",
        backend=backend,
        samples_us=list(samples_us),
        median_us=s.median,
        min_us=s.min,
        q1_us=s.q1,
        q3_us=s.q3,
        ci_low_us=s.ci_low,
        ci_high_us=s.ci_high,
        command=list(command),
        tail=tail,
        suspect=suspect,
        notes=list(notes or []),
        extra=dict(extra or {}),
    )


def from_failure(backend: str, run: SandboxResult, message: str | None = None) -> LatencyResult:
    """A kernel that hung or crashed is a result, not an exception."""
    status: LatencyStatus = "timeout" if run.timed_out else "error"
    notes = [run.reason] + ([message] if message else [])
    return LatencyResult(
        status=status, backend=backend, command=list(run.argv), tail=run.tail, notes=notes
    )


def run_runner(
    runner: str,
    args: list[str],
    cwd: Path,
    timeout_s: float,
    memory_limit_mb: int | None = None,
    extra_writable: tuple[Path, ...] = (),
) -> tuple[SandboxResult, dict | None]:
    """Run the runner `bot.measure.runners.<runner>` with a result channel; return the run and
    the runner's result. A result that did not arrive exactly once, or a channel that carried
    anything else, gives no payload and turns the run into an error (the kernel meddled).

    No folder a variant lives in is on the runner's path until the runner imports the variant
    (sandbox.runner_argv)."""
    argv = runner_argv(f"bot.measure.runners.{runner}", *args)
    env = runner_env()
    run = run_sandboxed(
        argv,
        cwd,
        timeout_s,
        env=env,
        memory_limit_mb=memory_limit_mb,
        channel=True,
        extra_writable=extra_writable,
    )
    results = [data for _, kind, data in run.messages if kind == "result"]
    problems = list(run.channel_problems)
    if len(results) > 1:
        problems.append(f"{len(results)} results on the channel, expected one")
    if problems:
        run.status, run.reason = (
            "error",
            "result channel tampered with: " + "; ".join(problems)[:500],
        )
        return run, None
    payload = results[0] if results and isinstance(results[0], dict) else None
    return run, payload


def phase_seconds(run: SandboxResult, start: str, end: str = "result") -> float | None:
    """Seconds between two channel messages, by the parent's clock (None if either is missing)."""
    times = {kind: at for at, kind, _ in run.messages}
    if start in times and end in times:
        return times[end] - times[start]
    return None


def implausible_samples(
    samples: object, repeats: int, wall_s: float | None, exact: bool
) -> str | None:
    """Why `samples` cannot be what the runner measured, or None.

    The count must be `repeats` and every sample a positive finite number. `wall_s` is
    how long the timed loop took by the parent's clock: the samples cannot add up to more
    than that; with `exact` (wall-time backends) they must also account for most of it, or
    the kernel reported times it did not take (e.g. a patched clock).
    """
    if not isinstance(samples, list) or len(samples) != repeats:
        got = len(samples) if isinstance(samples, list) else type(samples).__name__
        return f"expected {repeats} samples, got {got}"
    if not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
        for x in samples
    ):
        return "a sample is not a positive finite number"
    if wall_s is None:
        return None
    total_s = sum(samples) / 1e6
    slack_s = 0.02 + 0.05 * wall_s
    if total_s > wall_s + slack_s:
        return f"the samples add up to {total_s:.3f} s but the timed loop took {wall_s:.3f} s"
    if exact and wall_s - total_s > max(slack_s, 0.5 * wall_s):
        return (
            f"the timed loop took {wall_s:.3f} s by tunebot's clock but the samples add up to only "
            f"{total_s:.3f} s"
        )
    return None
