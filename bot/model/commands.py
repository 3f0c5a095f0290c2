"""Run a model target's benchmark, analysis and quality commands, and read what they print.

Each command runs in the model folder of the run's worktree, in its own session (a timeout
kills the whole group), with the forge/CI credentials scrubbed from its environment and
stdout kept apart from stderr (stdout carries the JSON; stderr is for logs and tracebacks).

Two kinds of failure, kept apart on purpose:

- `CommandFailed`: the command exited non-zero or timed out. Under a feature setting that
  is a result of the iteration (the setting broke the pipeline); on the baseline it stops the run.
- `OutputError` (exit 2): the command exited 0 but printed something that is not the
  documented JSON, or a quality command crashed. The harness is broken, not the setting:
  the run stops with that message, records nothing for the step, and resumes once fixed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import EXIT_BAD_INPUT
from bot.features import analysis as analysis_mod
from bot.measure.sandbox import child_env, describe_exit, tail_of
from bot.measure.stats import summarize
from bot.measure.types import LatencyResult
from bot.run.errors import RunError

BENCHMARK_SCHEMA = "tunebot.benchmark/v1"
QUALITY_SCHEMA = "tunebot.quality/v1"
WORKLOAD_KEYS = ("model", "resolution", "frames", "steps", "precision", "device_count", "hardware")
KEEP_BYTES = 1024 * 1024


class OutputError(RunError):
    """A command's output cannot be read (or the quality command crashed): names the command and the fix."""

    exit_code = EXIT_BAD_INPUT


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def reason(self) -> str:
        if self.timed_out:
            return "timed out; process group killed"
        return describe_exit(self.returncode if self.returncode is not None else -9)[1]

    @property
    def tail(self) -> str:
        return tail_of((self.stderr + "\n" + self.stdout).strip())


class CommandFailed(RunError):
    def __init__(self, what: str, result: CommandResult) -> None:
        self.result = result
        super().__init__(
            f"{what} command `{' '.join(result.argv)}` failed ({result.reason}):\n{result.tail[-1500:]}"
        )


def resolve_argv(argv: tuple[str, ...]) -> list[str]:
    """A leading `python`/`python3` means the interpreter tunebot runs in (its venv has torch)."""
    out = list(argv)
    if out and out[0] in ("python", "python3"):
        out[0] = sys.executable
    return out


def run(
    argv: tuple[str, ...], cwd: Path, timeout_s: float, env_extra: dict[str, str] | None = None
) -> CommandResult:
    """Run one command; never raises for what the child does."""
    env = child_env()
    env.update(env_extra or {})
    args = resolve_argv(argv)
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                args,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(
                args, 127, "", f"could not start {args[0]}: {exc.strerror or exc}", 0.0
            )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group, grandchildren included
            proc.wait()
        return CommandResult(
            args, proc.returncode, _read(out), _read(err), time.monotonic() - start, timed_out
        )


def _read(sink) -> str:
    size = sink.seek(0, os.SEEK_END)
    sink.seek(max(0, size - KEEP_BYTES))
    return sink.read().decode("utf-8", errors="replace")


def json_object(result: CommandResult, what: str, schema: str) -> dict:
    """The JSON object the command printed: all of stdout, or its last line that is an object."""
    text = result.stdout.strip()
    candidates = [text] + [
        line.strip() for line in reversed(text.splitlines()) if line.strip().startswith("{")
    ]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            found = data.get("schema", schema)
            if found != schema:
                raise OutputError(
                    f"{what} command `{' '.join(result.argv)}` printed schema '{found}'; "
                    f"tunebot reads '{schema}' (docs/model.md)"
                )
            return data
    shown = text[:200].replace("\n", "\\n") or "(nothing)"
    raise OutputError(
        f"{what} command `{' '.join(result.argv)}` exited 0 but printed no JSON object on stdout "
        f"(got: {shown!r}). Fix: print one {schema} object as the last line of stdout; "
        "logs go to stderr (docs/model.md)"
    )


# ---------------------------------------------------------------- benchmark


@dataclass
class Benchmark:
    samples_ms: list[float]
    stages_ms: dict[str, float]
    workload: dict
    mindiesd_version: str | None
    command: list[str]
    duration_s: float
    extra: dict = field(default_factory=dict)

    def latency(self) -> LatencyResult:
        """In the measure layer's unit (us), so the decision rule is shared with the op loop."""
        us = [s * 1000.0 for s in self.samples_ms]
        s = summarize(us)
        return LatencyResult(
            status="ok",
            backend="model-benchmark",
            samples_us=us,
            median_us=s.median,
            min_us=s.min,
            q1_us=s.q1,
            q3_us=s.q3,
            ci_low_us=s.ci_low,
            ci_high_us=s.ci_high,
            command=self.command,
        )

    def to_dict(self) -> dict:
        return {
            "samples_ms": self.samples_ms,
            "stages_ms": self.stages_ms,
            "workload": self.workload,
            "mindiesd_version": self.mindiesd_version,
            "command": self.command,
            "duration_s": self.duration_s,
        }


def parse_benchmark(result: CommandResult) -> Benchmark:
    data = json_object(result, "benchmark", BENCHMARK_SCHEMA)
    where = f"benchmark command `{' '.join(result.argv)}`"
    samples = data.get("latency_ms")
    if not isinstance(samples, list) or not samples or not all(_positive(x) for x in samples):
        raise OutputError(
            f"{where}: 'latency_ms' must be a non-empty list of positive numbers (end-to-end "
            f"samples in ms), got {json.dumps(samples)[:120]}"
        )
    stages = data.get("stages_ms", {})
    if not isinstance(stages, dict) or not all(
        isinstance(k, str) and _nonneg(v) for k, v in stages.items()
    ):
        raise OutputError(
            f"{where}: 'stages_ms' must map stage names to milliseconds, got {json.dumps(stages)[:120]}"
        )
    workload = data.get("workload")
    if not isinstance(workload, dict):
        raise OutputError(
            f"{where}: 'workload' is missing; print the facts {', '.join(WORKLOAD_KEYS)}"
        )
    missing = [k for k in WORKLOAD_KEYS if k not in workload]
    if missing:
        raise OutputError(
            f"{where}: workload fact(s) {', '.join(missing)} missing; print all of "
            f"{', '.join(WORKLOAD_KEYS)} (a gain is only comparable on the same workload)"
        )
    version = data.get("mindiesd_version")
    return Benchmark(
        samples_ms=[float(x) for x in samples],
        stages_ms={k: float(v) for k, v in stages.items()},
        workload=workload,
        mindiesd_version=str(version) if version not in (None, "") else None,
        command=result.argv,
        duration_s=result.duration_s,
    )


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _nonneg(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def workload_diff(baseline: dict, now: dict) -> list[str]:
    """The workload facts that differ (a gain on another workload is no gain)."""
    return [
        f"{k}: {baseline.get(k)!r} -> {now.get(k)!r}"
        for k in WORKLOAD_KEYS
        if baseline.get(k) != now.get(k)
    ]


# An ImportError/TypeError whose message or traceback names the MindIE-SD package, or a TypeError
# on a call of an API the features table lists: the API is missing or has another signature at
# run time. (A TypeError raised at the call site has no mindiesd frame: `from mindiesd import
# attention_forward` then `attention_forward(..., fused=True)` names only the function.)
_EXC_LINE = re.compile(r"^(ImportError|ModuleNotFoundError|TypeError)\b[^\n]*$", re.MULTILINE)
_CALLED = re.compile(r"^TypeError: (?:[\w.]+\.)?(\w+)\(\)")
_API_IMPORT = re.compile(r"from\s+mindiesd[\w.]*\s+import\s+([\w\s,]+)")
_API_CALL = re.compile(r"^(\w+)\(")


def api_names(api_cells: list[tuple[str, ...]]) -> frozenset[str]:
    """Names of the MindIE-SD APIs in the features table's API cells (imports and signatures)."""
    out: set[str] = set()
    for cell in api_cells:
        for text in cell:
            for match in _API_IMPORT.finditer(text):
                out |= {n.strip() for n in match.group(1).split(",") if n.strip()}
            call = _API_CALL.match(text.strip())
            if call:
                out.add(call.group(1))
    return frozenset(out)


def stale_api_error(output: str, apis: frozenset[str] = frozenset()) -> str | None:
    """The exception line when a run failed on a MindIE-SD API (the table is stale), else None."""
    lines = [m.group(0) for m in _EXC_LINE.finditer(output)]
    if not lines:
        return None
    last = lines[-1].strip()
    trace = output[max(0, output.rfind("Traceback")) :]
    if "mindiesd" in last.lower() or "mindiesd" in trace.lower():
        return last
    called = _CALLED.match(last)
    return last if called and called.group(1) in apis else None


# ---------------------------------------------------------------- quality


def parse_quality(result: CommandResult, min_cosine: float) -> tuple[float, bool]:
    """(cosine, passed). A crashing quality command is an OutputError: the gate cannot be judged."""
    if not result.ok:
        raise OutputError(
            f"quality command `{' '.join(result.argv)}` failed ({result.reason}); the quality gate "
            f"cannot be judged, nothing was recorded for this step. Fix the command and run again "
            f"to resume:\n{result.tail[-1200:]}"
        )
    data = json_object(result, "quality", QUALITY_SCHEMA)
    cosine = data.get("cosine")
    if (
        not isinstance(cosine, (int, float))
        or isinstance(cosine, bool)
        or not math.isfinite(cosine)
        or not -1.0 - 1e-9 <= cosine <= 1.0 + 1e-9
    ):
        raise OutputError(
            f"quality command `{' '.join(result.argv)}`: 'cosine' must be a number in [-1, 1], "
            f"got {json.dumps(cosine)}"
        )
    return float(cosine), cosine >= min_cosine


# ---------------------------------------------------------------- analysis


def parse_analysis(result: CommandResult, save_to: Path) -> analysis_mod.Analysis:
    """Save what the analysis command printed (JSON or kernel_details.csv) and read it like `advise` does."""
    if not result.ok:
        raise OutputError(
            f"analysis command `{' '.join(result.argv)}` failed ({result.reason}); nothing was "
            f"recorded for this step. Fix it and run again to resume:\n{result.tail[-1200:]}"
        )
    save_to.parent.mkdir(parents=True, exist_ok=True)
    save_to.write_text(result.stdout, encoding="utf-8")
    try:
        return analysis_mod.load(save_to)
    except analysis_mod.AnalysisError as exc:
        raise OutputError(
            f"analysis command `{' '.join(result.argv)}` printed a report that does not parse: {exc}"
        ) from None
