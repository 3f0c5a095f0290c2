"""command backend: the team's own benchmark harness (or a model-level benchmark) measures.

`latency.command` in tune.yaml is run in the sandbox, in the op's directory,
with the same timeout as every backend. Placeholders in its arguments:
`{source}` (absolute path of the variant file to measure), `{op_dir}`,
`{warmup}`, `{repeats}`, `{entry}`, `{python}` (the interpreter running tunebot).

The command prints ONE JSON object on a line of its own (other output is
allowed around it and kept in the tail):

    {"samples": [101.2, 99.8, ...], "unit": "us", "environment": {"device": "Ascend910B3"}}
    {"median": 1234.5, "unit": "ms"}

- `samples` (list of positive numbers) or `median` (one positive number);
- `unit`: us (default), ns, ms or s; everything is recorded in microseconds;
- `environment`: optional facts (strings or numbers) kept with the result.

A command that reports only a median gives no spread, so it is run
`MEDIAN_RUNS` times and each median is one sample: the decision rule (noise
floor, confidence interval, interleaved re-measure) then works exactly as for
the other backends. A non-zero exit, a timeout, or output without exactly one
such object is an "error"/"timeout" result naming what was wrong.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from bot.measure.backends.common import from_failure, from_samples
from bot.measure.sandbox import SandboxResult, child_env, run_sandboxed
from bot.measure.types import LatencyResult

NAME = "command"
MEDIAN_RUNS = 5
UNITS = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}


class OutputError(ValueError):
    """The command's output does not hold one valid result object."""


def expand(argv: tuple[str, ...] | list[str], values: dict[str, str]) -> list[str]:
    """`argv` with each `{name}` placeholder replaced (unknown braces are left as they are)."""
    out = []
    for template in argv:
        arg = template
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


def parse_output(output: str) -> tuple[list[float], dict, bool]:
    """(samples in us, environment facts, median_only) from the command's output; raises OutputError."""
    found = []
    for printed in output.splitlines():
        line = printed.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and ("samples" in obj or "median" in obj):
            found.append(obj)
    if not found:
        raise OutputError(
            'printed no JSON object with "samples" or "median" (print one on a line of its own, '
            'e.g. {"samples": [12.5, 12.7], "unit": "us"})'
        )
    if len(found) > 1:
        raise OutputError(f"printed {len(found)} result objects; print exactly one")
    obj = found[0]
    unit = obj.get("unit", "us")
    if unit not in UNITS:
        raise OutputError(f"unknown unit {unit!r}; use one of {', '.join(sorted(UNITS))}")
    scale = UNITS[unit]
    median_only = "samples" not in obj
    raw = [obj["median"]] if median_only else obj["samples"]
    if not isinstance(raw, list) or not raw:
        raise OutputError('"samples" must be a non-empty list of numbers')
    samples = []
    for value in raw:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise OutputError(f"latency {value!r} is not a positive finite number")
        samples.append(float(value) * scale)
    env = obj.get("environment", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in env.items()
    ):
        raise OutputError('"environment" must be an object of plain facts (strings or numbers)')
    return samples, dict(env), median_only


def _failure(run: SandboxResult, message: str) -> LatencyResult:
    result = from_failure(NAME, run, message)
    if run.ok:  # exit 0 but unusable output: an error, with the reason first
        result.status = "error"
        result.notes = [message]
    return result


def measure_command(
    source: Path,
    argv: tuple[str, ...] | list[str],
    entry: str = "kernel",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    memory_limit_mb: int | None = None,
    **_: object,
) -> LatencyResult:
    """Run the user's benchmark command on `source` and turn its JSON object into a LatencyResult."""
    source = Path(source).resolve()
    workdir = Path(cwd or source.parent)
    command = expand(
        argv,
        {
            "source": str(source),
            "op_dir": str(workdir),
            "warmup": str(warmup),
            "repeats": str(repeats),
            "entry": entry,
            "python": sys.executable,
        },
    )
    env = child_env([source.parent, workdir])
    samples: list[float] = []
    facts: dict = {}
    tails = []
    runs = 0
    while True:
        run = run_sandboxed(command, workdir, timeout_s, env=env, memory_limit_mb=memory_limit_mb)
        runs += 1
        if not run.ok:
            return from_failure(NAME, run, f"the benchmark command failed: {run.reason}")
        try:
            got, env_facts, median_only = parse_output(run.output)
        except OutputError as exc:
            return _failure(run, f"the benchmark command {exc}")
        samples += got
        facts.update(env_facts)
        tails.append(run.tail)
        if not median_only or runs >= MEDIAN_RUNS:
            break
    notes = [
        f"command run {runs}x" + (f", one median per run ({MEDIAN_RUNS} runs)" if runs > 1 else "")
    ]
    extra = {"environment": facts} if facts else {}
    return from_samples(NAME, samples, command, tail=tails[-1], notes=notes, extra=extra)
