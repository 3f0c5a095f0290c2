"""Run one evaluation step in a child process that cannot take the bot down.

Every kernel run (accuracy, latency, profiler) goes through `run_sandboxed`:
its own session (so a timeout kills the whole process group, grandchildren
included), stdout and stderr merged into one captured stream (so the tail reads
in the order things happened), the limits of bot.measure.confine (memory, CPU
time, file size, the folders it may write), a private temporary folder, a
parent-death signal and a sweep of the processes it left (bot.measure.reaper),
an optional result channel the kernel cannot name by path (see `channel`), and a
verdict that names what went wrong: "timeout", a signal, or an exit code.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from bot.measure import confine, reaper
from bot.measure.confine import Limits

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
    signal.SIGXCPU: "CPU-time cap reached (limits.cpu_s in tune.yaml)",
    signal.SIGXFSZ: "file-size cap reached (limits.file_size_mb in tune.yaml)",
}
RESULT_FD_ENV = "TUNEBOT_RESULT_FD"
CHANNEL_MAX_BYTES = 64 * 1024 * 1024  # more than any runner's honest result
# folders below the home directory where toolchains keep caches and logs; a confined kernel may write there
TOOL_CACHE_DIRS = (".cache", ".triton", ".nv", "ascend", ".tilelang")
# where Ascend CANN puts kernel_meta/ and other build output (set to the kernel's TMPDIR unless the
# user set them; a user-set folder is writable to the kernel)
TOOL_WORK_ENV = ("ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")

_limits: contextvars.ContextVar[Limits | None] = contextvars.ContextVar(
    "tunebot_kernel_limits", default=None
)
_tag: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tunebot_kernel_tag", default=None
)


@contextlib.contextmanager
def kernel_limits(limits: Limits | None, tag: str | None = None) -> Iterator[None]:
    """Within this block, run_sandboxed applies `limits` (unless given its own) and tags kernels `tag`."""
    token, tag_token = _limits.set(limits), _tag.set(tag if tag is not None else _tag.get())
    try:
        yield
    finally:
        _limits.reset(token)
        _tag.reset(tag_token)


def use_kernel_tag(tag: str) -> None:
    """Tag the kernel processes started from here on (this thread) with `tag`."""
    _tag.set(tag)


def kernel_tag() -> str:
    """The tag every kernel process of this run carries in its environment (reaper.KERNEL_TAG_ENV)."""
    return _tag.get() or f"pid-{os.getpid()}"


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
    messages: list[tuple[float, str, object]] = field(
        default_factory=list
    )  # channel: (seconds, kind, data)
    channel_problems: list[str] = field(
        default_factory=list
    )  # what on the channel was not the runner's
    swept: int = 0  # processes of the child still alive after it ended, killed by the sweep
    output_bytes: int = 0  # how much the child printed in all (`output` keeps the last 256 KiB)

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


def _child_setup(limits: Limits | None):
    die_with_parent = reaper.prepare_child_hook()
    confine_child = confine.child_hook(limits) if limits else None

    def setup() -> None:
        die_with_parent()
        if confine_child:
            confine_child()

    return setup


def writable_for(private_tmp: Path, extra: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """The folders a confined kernel may write: its own temporary folder, /dev (null, shm, GPU
    device files), the toolchains' cache folders in the home directory, and `extra`."""
    home = Path.home()
    return (private_tmp, Path("/dev"), *(home / d for d in TOOL_CACHE_DIRS), *extra)


class _ChannelReader:
    """Reads the result channel while the child runs: one JSON line per message,
    stamped with its arrival time (the runner's clock cannot fake it)."""

    def __init__(self, fd: int, nonce: str, start: float) -> None:
        self.fd, self.nonce, self.start = fd, nonce, start
        self.messages: list[tuple[float, str, object]] = []
        self.problems: list[str] = []
        self._buffer = b""
        self._size = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self._take(chunk, time.monotonic() - self.start)

    def _take(self, chunk: bytes, at: float) -> None:
        self._size += len(chunk)
        if self._size > CHANNEL_MAX_BYTES:
            if not any("too much" in p for p in self.problems):
                self.problems.append(f"more than {CHANNEL_MAX_BYTES} bytes on the result channel")
            return
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line, at)

    def _line(self, line: bytes, at: float) -> None:
        try:
            frame = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            frame = None
        if (
            not isinstance(frame, dict)
            or frame.get("n") != self.nonce
            or not isinstance(frame.get("k"), str)
        ):
            self.problems.append(
                f"a line on the result channel did not come from the runner: {line[:80]!r}"
            )
            return
        self.messages.append((round(at, 6), frame["k"], frame.get("d")))

    def finish(self) -> None:
        self._thread.join(timeout=1.0)
        self._stop.set()
        self._thread.join(timeout=1.0)
        if self._buffer.strip():
            self.problems.append(
                f"an unterminated line on the result channel: {self._buffer[:80]!r}"
            )
        os.close(self.fd)


def _read_tail(sink) -> str:
    size = sink.seek(0, os.SEEK_END)
    sink.seek(max(0, size - OUTPUT_KEEP_BYTES))
    data = sink.read()
    if size > OUTPUT_KEEP_BYTES:
        data = data.split(b"\n", 1)[-1]  # drop the partial first line
    return data.decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pid, signal.SIGKILL)


# Credentials a kernel or a proposer never needs: the bot's forge token and the CI
# runner's tokens. A variant is untrusted code; it must not be able to push or call the API.
SECRET_NAMES = frozenset(
    {"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"}
)
SECRET_PREFIXES = ("GITHUB_APP_", "ACTIONS_")


def is_secret(name: str) -> bool:
    """Whether `name` is a forge/CI credential stripped from every child's environment."""
    upper = name.upper()
    return upper in SECRET_NAMES or upper.startswith(SECRET_PREFIXES)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` without the credentials named by `is_secret`."""
    return {k: v for k, v in env.items() if not is_secret(k)}


def child_env(
    extra_paths: list[Path] | None = None, env: dict[str, str] | None = None
) -> dict[str, str]:
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
    limits: Limits | None = None,
    channel: bool = False,
    extra_writable: tuple[Path, ...] = (),
) -> SandboxResult:
    """Run `argv` in its own process group; never raises for what the child does.

    A child still running after `timeout_s` is killed with its whole group and
    reported as "timeout". A signal or a non-zero exit is "error". A program
    that cannot be started at all (missing executable) is "error" too.

    `limits` (default: those of the enclosing `kernel_limits` block) cap memory, CPU time,
    file size and the folders the child may write (plus `extra_writable`, e.g. a profiler's
    output folder); `memory_limit_mb` overrides the memory cap.
    With `channel`, the child gets the write end of a pipe (fd number in TUNEBOT_RESULT_FD) and
    a one-time nonce on stdin; the lines it sends come back in `messages` (see runners/common.py).
    """
    limits = limits if limits is not None else _limits.get()
    if memory_limit_mb:
        limits = replace(limits or Limits(), memory_mb=memory_limit_mb)
    reaper.become_subreaper()
    reaper.guard_tag(kernel_tag())  # before the child list below: the watchdog is not the kernel's
    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        private_tmp = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix=reaper.temp_prefix("kernel")))
        )
        child = dict(os.environ if env is None else env)
        child.update(
            {
                "TMPDIR": str(private_tmp),
                "TMP": str(private_tmp),
                "TEMP": str(private_tmp),
                reaper.KERNEL_TAG_ENV: kernel_tag(),
            }
        )
        # CANN writes kernel_meta/ and fusion_result.json into the working directory unless told
        # otherwise; a confined kernel may not write there, so point it at its own folder
        for name in TOOL_WORK_ENV:
            child.setdefault(name, str(private_tmp))
        if limits is not None and limits.writable is not None:
            extra_writable = (*extra_writable, *(Path(child[n]) for n in TOOL_WORK_ENV))
            limits = replace(
                limits, writable=writable_for(private_tmp, (*limits.writable, *extra_writable))
            )
        # output goes to a file, not a pipe: a background grandchild holding the pipe open
        # cannot make us wait, and a chatty kernel cannot fill our memory
        sink = stack.enter_context(tempfile.TemporaryFile())
        read_fd = write_fd = -1
        nonce = secrets.token_hex(16)
        if channel:
            read_fd, write_fd = os.pipe()
            child[RESULT_FD_ENV] = str(write_fd)
        before = reaper.children()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=child,
                stdin=subprocess.PIPE if channel else subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(write_fd,) if channel else (),
                # rlimits, Landlock and the parent-death signal can only be set between fork and exec
                preexec_fn=_child_setup(limits),  # noqa: PLW1509
            )
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (read_fd, write_fd):
                if fd >= 0:
                    os.close(fd)
            errno = getattr(exc, "errno", None)
            return SandboxResult(
                list(argv),
                str(cwd),
                "error",
                None,
                str(exc),
                0.0,
                reason=f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}",
                extra={"errno": errno},
            )
        reader = None
        if channel:
            os.close(write_fd)
            reader = _ChannelReader(read_fd, nonce, start)
            stdin = proc.stdin
            assert stdin is not None  # stdin=PIPE
            with contextlib.suppress(OSError):
                stdin.write(nonce.encode() + b"\n")
            with contextlib.suppress(OSError):
                stdin.close()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        finally:
            # stray children of a finished kernel must not outlive the evaluation: its group,
            # then whatever left the group (setsid) and was re-parented to us
            _kill_group(proc.pid)
            swept = reaper.sweep_new_children(before)
            if reader:
                reader.finish()
        text = _read_tail(sink)
        printed = os.fstat(sink.fileno()).st_size
    duration = time.monotonic() - start
    rc = proc.returncode
    messages = reader.messages if reader else []
    problems = reader.problems if reader else []
    if timed_out:
        return SandboxResult(
            list(argv),
            str(cwd),
            "timeout",
            rc,
            text,
            duration,
            timed_out=True,
            signal_name="SIGKILL",
            swept=swept,
            output_bytes=printed,
            messages=messages,
            channel_problems=problems,
            reason=f"timed out after {timeout_s:g} s; process group killed",
        )
    if rc == 0:
        return SandboxResult(
            list(argv),
            str(cwd),
            "ok",
            rc,
            text,
            duration,
            reason="exit code 0",
            swept=swept,
            output_bytes=printed,
            messages=messages,
            channel_problems=problems,
        )
    sig_name, reason = describe_exit(rc)
    if sig_name is None and OOM_MARKERS.search(tail_of(text)):
        reason += " (out of memory)"
    return SandboxResult(
        list(argv),
        str(cwd),
        "error",
        rc,
        text,
        duration,
        signal_name=sig_name,
        reason=reason,
        swept=swept,
        output_bytes=printed,
        messages=messages,
        channel_problems=problems,
    )


def python_argv(*args: str) -> list[str]:
    """argv running this interpreter (the one the bot runs in)."""
    return [sys.executable, *args]


# Run as `python -c _BOOTSTRAP <module> <args>`: `-m` and `-c` put the working directory first on
# sys.path, and a runner's working directory is the op's folder, which the tuned code may have
# written. A `json.py` or `struct.py` there would stand in for the module the runner imports and
# run as the runner. The bootstrap drops that entry before importing anything; `sys` is built in
# and `runpy` is found in the standard library. The runner adds the variant's folder itself when
# it imports the variant (runners/common.py, load_module).
_BOOTSTRAP = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "import runpy\n"
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)\n"
)


def runner_argv(module: str, *args: str) -> list[str]:
    """argv running one of tunebot's runners (`bot.measure.runners.<name>`) so that no file in
    its working directory can stand in for a module it imports (see _BOOTSTRAP)."""
    return [sys.executable, "-c", _BOOTSTRAP, module, *args]


def runner_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a runner: child_env without the variants' folders on PYTHONPATH, where
    they would come before the standard library and their `sitecustomize.py` would run at start."""
    return child_env(None, env)
