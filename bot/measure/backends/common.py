"""Helpers every latency backend uses to turn a sandboxed run into a LatencyResult."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bot.measure.sandbox import SandboxResult, child_env, python_argv, run_sandboxed
from bot.measure.stats import summarize
from bot.measure.types import LatencyResult


def from_samples(backend: str, samples_us: list[float], command: list[str], tail: str = "",
                 notes: list[str] | None = None, extra: dict | None = None,
                 suspect: bool = False) -> LatencyResult:
    s = summarize(samples_us)
    return LatencyResult(
        status="ok", backend=backend, samples_us=list(samples_us), median_us=s.median, min_us=s.min,
        q1_us=s.q1, q3_us=s.q3, ci_low_us=s.ci_low, ci_high_us=s.ci_high, command=list(command),
        tail=tail, suspect=suspect, notes=list(notes or []), extra=dict(extra or {}))


def from_failure(backend: str, run: SandboxResult, message: str | None = None) -> LatencyResult:
    """A kernel that hung or crashed is a result, not an exception."""
    status = "timeout" if run.timed_out else "error"
    notes = [run.reason] + ([message] if message else [])
    return LatencyResult(status=status, backend=backend, command=list(run.argv), tail=run.tail, notes=notes)


def run_runner(runner: str, args: list[str], cwd: Path, timeout_s: float, source: Path,
               memory_limit_mb: int | None = None,
               extra_paths: list[Path] | None = None) -> tuple[SandboxResult, dict | None]:
    """Run `python -m bot.measure.runners.<runner> ... --result <tmp>`; return the run and its JSON."""
    with tempfile.TemporaryDirectory(prefix="tunebot-") as tmp:
        result_path = Path(tmp) / "result.json"
        argv = python_argv("-m", f"bot.measure.runners.{runner}", *args, "--result", str(result_path))
        env = child_env([source.resolve().parent, *(extra_paths or [])])
        run = run_sandboxed(argv, cwd, timeout_s, env=env, memory_limit_mb=memory_limit_mb)
        payload = None
        if result_path.is_file():
            try:
                payload = json.loads(result_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                payload = None
    # the temporary path is gone: show a stable placeholder in the recorded command
    run.argv = run.argv[:-1] + ["<result.json>"]
    return run, payload
