"""cpu backend: wall time of the entry call in a fresh interpreter.

Process start, imports and input generation happen before the clock starts;
only `entry(*inputs)` is timed, `repeats` times after `warmup` calls.
"""

from __future__ import annotations

from pathlib import Path

from bot.measure.backends.common import from_failure, from_samples, implausible_samples, phase_seconds, run_runner
from bot.measure.types import LatencyResult

NAME = "cpu"


def measure_cpu(source: Path, entry: str = "kernel", inputs: str = "get_inputs", warmup: int = 5,
                repeats: int = 30, timeout_s: float = 300.0, cwd: Path | None = None,
                memory_limit_mb: int | None = None, seed: int = 0) -> LatencyResult:
    """Time `entry(*inputs(seed))` from `source` in a sandboxed subprocess.

    Returns status "ok" with samples and their summary, or "timeout"/"error"
    with the output tail and the reason (signal, exit code).
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    source = Path(source).resolve()
    args = ["--source", str(source), "--entry", entry, "--inputs", inputs, "--seed", str(seed),
            "--warmup", str(warmup), "--repeats", str(repeats)]
    run, payload = run_runner("cpu", args, cwd or source.parent, timeout_s, source, memory_limit_mb)
    if not run.ok or not payload or "samples_us" not in payload:
        message = (payload or {}).get("error")
        if run.ok and not message:
            message = "the cpu runner wrote no samples"
        return from_failure(NAME, run, message)
    forged = implausible_samples(payload["samples_us"], repeats, phase_seconds(run, "timing"), exact=True)
    if forged:
        run.reason = f"the runner's result is not credible: {forged}"
        return from_failure(NAME, run)
    notes = [f"warmup={warmup} repeats={repeats}"]
    return from_samples(NAME, payload["samples_us"], run.argv, tail=run.tail, notes=notes)
