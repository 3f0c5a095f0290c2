"""Run one evaluation step in a child process that cannot take the bot down.

Every kernel run (accuracy, latency, profiler) goes through `run_sandboxed`:
its own session (so a timeout kills the whole process group, grandchildren
included), stdout and stderr merged into one captured stream (so the tail reads
in the order things happened), an optional address-space limit, and a verdict
that names what went wrong: "timeout", a signal, or an exit code.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SandboxStatus = Literal["ok", "timeout", "error"]

TAIL_LINES = 40
TAIL_CHARS = 4000
OUTPUT_KEEP_BYTES = 256 * 1024  # of a child's output; the record keeps only the tail anyway
# what a process that ran out of memory under RLIMIT_AS prints before exiting
OOM_MARKERS = re.compile(r"\bMemoryError\b|std::bad_alloc|out of memory|Cannot allocate memory")

_SIGNAL_HINTS = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error",
    signal.SIGABRT: "aborted",
    signal.SIGFPE: "floating point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGKILL: "often the out-of-memory killer",
    signal.SIGTERM: "terminated",
}


@dataclass
class SandboxResult:
    argv: list[str]
    cwd: str
    status: SandboxStatus
    returncode: int | None
    output: str  # stdout and stderr, merged (the last OUTPUT_KEEP_BYTES of it)
    duration_s: float
    timed_out: bool = False
    signal_name: str | None = None
    reason: str = ""  # one line a user can read: "killed by SIGSEGV (segmentation fault)"
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tail(self) -> str:
        return tail_of(self.output)


def tail_of(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` lines of `text`, capped at `chars` characters."""
    kept = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return kept[-chars:]


def describe_exit(returncode: int) -> tuple[str | None, str]:
    """(signal name or None, readable reason) for a process exit code."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"signal {-returncode}", f"killed by signal {-returncode}"
        hint = _SIGNAL_HINTS.get(sig)
        return sig.name, f"killed by {sig.name}" + (f" ({hint})" if hint else "")
    return None, f"exit code {returncode}"


def _limit_memory(limit_bytes: int | None):
    def apply() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return apply


def _read_tail(sink) -> str:
    size = sink.seek(0, os.SEEK_END)
    sink.seek(max(0, size - OUTPUT_KEEP_BYTES))
    data = sink.read()
    if size > OUTPUT_KEEP_BYTES:
        data = data.split(b"\n", 1)[-1]  # drop the partial first line
    return data.decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Credentials a kernel or a proposer never needs: the bot's forge token and the CI
# runner's tokens. A variant is untrusted code; it must not be able to push or call the API.
SECRET_NAMES = frozenset({"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"})
SECRET_PREFIXES = ("GITHUB_APP_", "ACTIONS_")


def is_secret(name: str) -> bool:
    """Whether `name` is a forge/CI credential stripped from every child's environment."""
    upper = name.upper()
    return upper in SECRET_NAMES or upper.startswith(SECRET_PREFIXES)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` without the credentials named by `is_secret`."""
    return {k: v for k, v in env.items() if not is_secret(k)}


def child_env(extra_paths: list[Path] | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ours minus credentials, the bot importable, unbuffered output,
    `extra_paths` first."""
    base = scrub_env(os.environ if env is None else env)
    bot_root = str(Path(__file__).resolve().parents[2])
    parts = [str(p) for p in (extra_paths or [])] + [bot_root]
    if base.get("PYTHONPATH"):
        parts.append(base["PYTHONPATH"])
    base["PYTHONPATH"] = os.pathsep.join(parts)
    base["PYTHONUNBUFFERED"] = "1"
    return base


def run_sandboxed(
    argv: list[str],
    cwd: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    memory_limit_mb: int | None = None,
) -> SandboxResult:
    """Run `argv` in its own process group; never raises for what the child does.

    A child still running after `timeout_s` is killed with its whole group and
    reported as "timeout". A signal or a non-zero exit is "error". A program
    that cannot be started at all (missing executable) is "error" too.
    """
    limit = memory_limit_mb * 1024 * 1024 if memory_limit_mb else None
    start = time.monotonic()
    # output goes to a file, not a pipe: a background grandchild holding the pipe open
    # cannot make us wait, and a chatty kernel cannot fill our memory
    with tempfile.TemporaryFile() as sink:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_limit_memory(limit) if limit else None,
            )
        except OSError as exc:
            return SandboxResult(list(argv), str(cwd), "error", None, str(exc), 0.0,
                                 reason=f"could not start {argv[0]}: {exc.strerror or exc}",
                                 extra={"errno": exc.errno})
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        finally:
            # stray children of a finished kernel must not outlive the evaluation
            _kill_group(proc.pid)
        text = _read_tail(sink)
    duration = time.monotonic() - start
    rc = proc.returncode
    if timed_out:
        return SandboxResult(list(argv), str(cwd), "timeout", rc, text, duration, timed_out=True,
                             signal_name="SIGKILL",
                             reason=f"timed out after {timeout_s:g} s; process group killed")
    if rc == 0:
        return SandboxResult(list(argv), str(cwd), "ok", rc, text, duration, reason="exit code 0")
    sig_name, reason = describe_exit(rc)
    if sig_name is None and OOM_MARKERS.search(tail_of(text)):
        reason += " (out of memory)"
    return SandboxResult(list(argv), str(cwd), "error", rc, text, duration, signal_name=sig_name, reason=reason)


def python_argv(*args: str) -> list[str]:
    """argv running this interpreter (the one the bot runs in)."""
    return [sys.executable, *args]
