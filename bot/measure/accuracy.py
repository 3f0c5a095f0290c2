"""L0 accuracy gate, two modes.

command: run the op's own script, `python <variant>.py --level L0`, in the op's
directory; exit 0 is a pass (upstream's stage-3 template). A script that does
not declare a `--level` option (upstream's example files, whose `__main__`
runs their own assert_close check, often with a strict `parse_args()`) is run
as it is, with no flags it would reject; such a script that runs nothing when
executed (only imports, definitions and assignments) checks nothing and is an
"error", never a pass. A non-zero exit is
"fail" only when the output shows an accuracy mismatch (see `_shows_mismatch`),
otherwise "error" (import/compile error, out of memory, ...); a signal is
"error", a hang "timeout".

harness: a runner imports the variant, runs kernel and reference on the same
generated inputs and reports max abs / max rel error and cosine per output; the
verdict applies per-dtype rtol/atol (torch.testing.assert_close's rule) and a
minimum cosine similarity.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

from bot.config.schema import AccuracySettings
from bot.measure.backends.common import run_runner
from bot.measure.sandbox import (
    OOM_MARKERS,
    SandboxResult,
    child_env,
    python_argv,
    run_sandboxed,
    tail_of,
)
from bot.measure.types import AccuracyResult, Status

# torch.testing.assert_close's messages, and an explicit "L0 ... FAIL" line from the op's script
_MISMATCH = re.compile(
    r"Mismatched elements|Tensor-likes are not close|Scalars are not close"
    r"|^\s*L0\b.*\bFAIL",
    re.MULTILINE | re.IGNORECASE,
)
# the last line of a Python traceback: "AssertionError", "ImportError: ...", "torch.OutOfMemoryError: ..."
_EXCEPTION_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))\b(?::|$)", re.MULTILINE
)


def _shows_mismatch(output: str) -> bool:
    """Whether a failed L0 run's output tail says the result was wrong (vs. the run being broken).

    Out of memory is never a mismatch. Otherwise torch's assert_close text or an
    "L0 ... FAIL" line is, and so is a traceback whose final exception is AssertionError
    (the template's `assert`). Any other final exception (ImportError, SyntaxError, a
    compiler error) or no recognisable reason at all is not: a broken variant is an
    error, and only a result that was computed and compared can be a failure.
    """
    tail = tail_of(output)
    if OOM_MARKERS.search(tail):
        return False
    if _MISMATCH.search(tail):
        return True
    raised = _EXCEPTION_LINE.findall(tail)
    return bool(raised) and raised[-1].rsplit(".", 1)[-1] == "AssertionError"


def _status_of(run: SandboxResult) -> Status:
    if run.timed_out:
        return "timeout"
    if run.ok:
        return "pass"
    if run.signal_name or run.returncode is None:
        return "error"
    return "fail" if _shows_mismatch(run.output) else "error"


SEED_ENV = "TUNEBOT_SEED"  # command mode: the seed an op's own L0 script should pass to get_inputs
_LEVEL_OPTION = re.compile(r"""["']--level["']""")


def accepts_level(text: str) -> bool:
    """Whether a script declares a `--level` option (the stage-3 template) rather than running its own check."""
    return bool(_LEVEL_OPTION.search(text))


_RUNS_CODE = (ast.Expr, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def checks_nothing(text: str) -> bool:
    """Whether running a script with no flags executes no check at all: every top-level statement
    is an import, a definition or an assignment (a library module, not a test). A script that
    does not parse is left to fail when run."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return not any(isinstance(s, (*_RUNS_CODE, ast.Assert, ast.Match)) for s in tree.body)


def l0_command(
    source: Path,
    cwd: Path,
    level: str = "L0",
    timeout_s: float = 120.0,
    memory_limit_mb: int | None = None,
    seed: int = 0,
) -> AccuracyResult:
    """`python <source> --level <level>` in `cwd` (no flag for a script without `--level`) with
    TUNEBOT_SEED=<seed>; exit 0 = pass."""
    source = Path(source).resolve()
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    flags = ["--level", level] if text is None or accepts_level(text) else []
    argv = python_argv(str(source), *flags)
    if text is not None and not flags and checks_nothing(text):
        return AccuracyResult(
            status="error",
            mode="command",
            command=argv,
            duration_s=0.0,
            reason=(
                f"{source.name} checks nothing when run: it declares no --level option and has "
                'no `if __name__ == "__main__":` block or other top-level code, so exit 0 would '
                "prove nothing. Add a check to its __main__ (e.g. torch.testing.assert_close "
                "against a reference), or give it get_inputs/reference/kernel and set "
                "`accuracy.mode: harness` in tune.yaml"
            ),
            details={"flags": "none: the script declares no --level option"},
        )
    env = child_env([source.parent, cwd])
    env[SEED_ENV] = str(seed)
    run = run_sandboxed(argv, cwd, timeout_s, env=env, memory_limit_mb=memory_limit_mb)
    status = _status_of(run)
    details = (
        {} if flags else {"flags": "none: the script declares no --level option; its own check ran"}
    )
    return AccuracyResult(
        status=status,
        mode="command",
        command=argv,
        duration_s=round(run.duration_s, 3),
        tail=run.tail,
        reason="" if status == "pass" else run.reason,
        details={**details, **({"seed": seed} if seed else {})},
    )


def judge(outputs: list[dict], min_cosine: float) -> tuple[Status, str]:
    """Verdict from the harness runner's per-output metrics (pure)."""
    if not outputs:
        return "fail", "the kernel returned no outputs to compare"
    problems = []
    for o in outputs:
        where = f"output {o['index']} ({o['dtype']})"
        if "problem" in o:
            problems.append(f"{where}: {o['problem']}")
            continue
        if o["mismatched"]:
            problems.append(
                f"{where}: {o['mismatched']} of {o['numel']} elements beyond "
                f"rtol={o['rtol']:g} atol={o['atol']:g} (max abs err {o['max_abs_err']:.3g})"
            )
        if o["cosine"] < min_cosine:
            problems.append(f"{where}: cosine {o['cosine']:.6f} < {min_cosine}")
    return ("fail", "; ".join(problems)) if problems else ("pass", "")


def l0_harness(
    source: Path,
    cwd: Path,
    settings: AccuracySettings,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    reference: str = "reference",
    seed: int = 0,
    memory_limit_mb: int | None = None,
) -> AccuracyResult:
    """Kernel vs reference in a sandboxed runner; records max abs/rel error and cosine."""
    source = Path(source).resolve()
    args = [
        "--source",
        str(source),
        "--entry",
        entry,
        "--inputs",
        inputs,
        "--reference",
        reference,
        "--seed",
        str(seed),
        "--rtol",
        json.dumps(dict(settings.rtol)),
        "--atol",
        json.dumps(dict(settings.atol)),
    ]
    run, payload = run_runner("harness", args, cwd, settings.timeout_s, memory_limit_mb)
    base = AccuracyResult(
        status="error",
        mode="harness",
        command=run.argv,
        duration_s=round(run.duration_s, 3),
        tail=run.tail,
    )
    if not run.ok or payload is None or "outputs" not in payload:
        reason = (payload or {}).get("error") or run.reason
        if payload is None and run.returncode == 0 and not run.timed_out:
            reason = (
                "the harness runner exited 0 without reporting a result: the variant ended the "
                "process itself (e.g. os._exit() in its code)"
            )
        status: Status = "timeout" if run.timed_out else "error"
        return replace(base, status=status, reason=reason)
    outputs = payload["outputs"]
    if payload.get("problem"):
        return replace(base, status="fail", reason=payload["problem"])
    status, reason = judge(outputs, settings.min_cosine)
    measured = [o for o in outputs if "max_abs_err" in o]
    return replace(
        base,
        status=status,
        reason=reason,
        max_abs_err=max((o["max_abs_err"] for o in measured), default=None),
        max_rel_err=max((o["max_rel_err"] for o in measured), default=None),
        cosine=min((o["cosine"] for o in measured), default=None),
        details={"outputs": outputs, "min_cosine": settings.min_cosine, "seed": seed},
    )
