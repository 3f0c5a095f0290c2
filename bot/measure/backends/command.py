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
such object is an "error"/"timeout" result naming what was wrong. A command that
cannot work for any variant (an unknown placeholder, a program that is not there or
not executable) is a `ConfigError` naming the tune.yaml key (exit code 2).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

from bot.errors import ConfigError
from bot.measure.backends.common import from_failure, from_samples
from bot.measure.sandbox import OUTPUT_KEEP_BYTES, SandboxResult, child_env, run_sandboxed
from bot.measure.types import LatencyResult

NAME = "command"
MEDIAN_RUNS = 5
UNITS = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}
PLACEHOLDERS = ("source", "op_dir", "warmup", "repeats", "entry", "python")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
KEY = "latency.command"


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


def unknown_placeholders(argv: tuple[str, ...] | list[str]) -> list[str]:
    """`{name}` fields in `argv` that are no placeholder (a typo such as `{sourc}` would otherwise
    reach the benchmark as literal text)."""
    return [f"{{{m}}}" for arg in argv for m in _PLACEHOLDER.findall(arg) if m not in PLACEHOLDERS]


def placeholder_problem(argv: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """(problem, fix) for a command with a placeholder tunebot does not fill, else None."""
    unknown = unknown_placeholders(argv)
    if not unknown:
        return None
    return (
        f"unknown placeholder {', '.join(dict.fromkeys(unknown))}",
        "use one of " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS),
    )


def program_problem(program: str, cwd: Path, path_env: str | None) -> tuple[str, str] | None:
    """Why `program` (the command's first argument) cannot be started from `cwd`, with the fix;
    None when it can. A name with a slash is a path (relative to the op's folder), any other name
    is looked up on PATH, as the operating system does."""
    if "/" in program:
        target = (cwd / program).resolve()
        if not target.is_file():
            return (
                f"{program!r} does not exist (looked for {target})",
                "give the path relative to the op's folder, or an absolute one",
            )
        if not os.access(target, os.X_OK):
            return (
                f"{program!r} is not executable",
                f"`chmod +x {program}` (and commit it), or start it with an interpreter: "
                f'["{{python}}", {program}, ...] or [sh, {program}, ...]',
            )
        return None
    if shutil.which(program, path=path_env) is None:
        return (
            f"program {program!r} is not on PATH",
            "install it, give its full path, or use {python} for the interpreter running tunebot",
        )
    return None


def _shown(value: object) -> str:
    """A value the command printed, as JSON and short: it goes into a one-line reason."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_output(output: str, printed: int = 0) -> tuple[list[float], dict, bool]:
    """(samples in us, environment facts, median_only) from the command's output; raises
    OutputError. `printed` is how many bytes the command wrote in all (only the last
    OUTPUT_KEEP_BYTES are kept, so a result line longer than that is lost)."""
    found = []
    for line_no, printed_line in enumerate(output.splitlines(), 1):
        line = printed_line.strip()
        looks_like_result = '"samples"' in line or '"median"' in line
        if not (line.startswith("{") and (line.endswith("}") or looks_like_result)):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if looks_like_result:
                raise OutputError(
                    f"output line {line_no} looks like the result but is not valid JSON "
                    f"({exc.msg} at column {exc.colno}); print it with json.dumps"
                ) from None
            continue
        if isinstance(obj, dict) and ("samples" in obj or "median" in obj):
            found.append(obj)
    if not found:
        cut = (
            f"; it printed {printed} bytes and tunebot reads the last {OUTPUT_KEEP_BYTES // 1024}"
            " KiB, so print less (the result line last, at most a few thousand samples)"
            if printed > OUTPUT_KEEP_BYTES
            else ""
        )
        raise OutputError(
            'printed no JSON object with "samples" or "median" on a line of its own (print '
            'one, e.g. {"samples": [12.5, 12.7], "unit": "us"})' + cut
        )
    if len(found) > 1:
        raise OutputError(f"printed {len(found)} result objects; print exactly one")
    obj = found[0]
    unit = obj.get("unit", "us")
    if not isinstance(unit, str) or unit not in UNITS:
        raise OutputError(
            f'unknown unit {_shown(unit)} in "unit"; use one of {", ".join(sorted(UNITS))}'
        )
    scale = UNITS[unit]
    median_only = "samples" not in obj
    raw = [obj["median"]] if median_only else obj["samples"]
    if not isinstance(raw, list) or not raw:
        raise OutputError('"samples" must be a non-empty list of numbers')
    samples = []
    for i, value in enumerate(raw):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            where = '"median"' if median_only else f'"samples"[{i}]'
            raise OutputError(
                f"{where} is {_shown(value)}, not a positive finite number of {unit} "
                "(print a JSON number above 0, not text)"
            )
        samples.append(float(value) * scale)
    env = obj.get("environment", {})
    if not isinstance(env, dict):
        raise OutputError(
            f'"environment" is {type(env).__name__}: it must be an object of plain facts, '
            'e.g. {"device": "Ascend910B3"}'
        )
    for name, value in env.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise OutputError(
                f'"environment"[{json.dumps(name)}] is {type(value).__name__}: each fact must be '
                "a string or a number"
            )
        if isinstance(value, str) and len(value) > 1000:
            raise OutputError(
                f'"environment"[{json.dumps(name)}] is {len(value)} characters long; a fact '
                "must be at most 1000"
            )
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
    config_file: str = "tune.yaml",
    **_: object,
) -> LatencyResult:
    """Run the user's benchmark command on `source` and turn its JSON object into a LatencyResult.

    Raises ConfigError for a command that cannot work for any variant (see the module docstring)."""
    source = Path(source).resolve()
    workdir = Path(cwd or source.parent)
    problem = placeholder_problem(argv)
    if problem is not None:
        raise ConfigError(config_file, KEY, *problem)
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
    problem = program_problem(command[0], workdir, env.get("PATH"))
    if problem is not None:
        raise ConfigError(config_file, f"{KEY}[0]", *problem)
    by_hand = (
        "run it by hand in the op's folder to see why (the exact argv is the result's command)"
    )
    samples: list[float] = []
    facts: dict = {}
    tails = []
    runs = 0
    while True:
        run = run_sandboxed(command, workdir, timeout_s, env=env, memory_limit_mb=memory_limit_mb)
        runs += 1
        if run.timed_out:
            return from_failure(
                NAME, run, f"the benchmark command did not finish in latency.timeout_s; {by_hand}"
            )
        if not run.ok:
            return from_failure(NAME, run, f"the benchmark command failed; {by_hand}")
        try:
            got, env_facts, median_only = parse_output(run.output, run.output_bytes)
        except OutputError as exc:
            return _failure(run, f"the benchmark command's output: {exc}")
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
