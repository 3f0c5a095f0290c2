"""Keep the job's credentials and the runner's step channels away from PR code.

On a self-hosted runner the tuned code (kernels, proposers) runs as the runner's user.
What it could otherwise reach, and what this module does about it:

- Secrets in the environment (`GITHUB_TOKEN`, `GH_TOKEN`, `ACTIONS_*` runtime tokens, `INPUT_*`
  action inputs) and the runner's file commands (`GITHUB_ENV`, `GITHUB_PATH`, `GITHUB_OUTPUT`,
  `GITHUB_STEP_SUMMARY`, `GITHUB_STATE`): `seal()` moves them out of the environment. Deleting
  a variable leaves the copy Linux keeps as the process's initial environment
  (`/proc/<pid>/environ`, readable by the same user), so the CLI re-executes itself with a
  clean environment and hands the values over through a pipe that is read and closed at once.
- The file-command files themselves (their paths are guessable): `FileCommands` snapshots them
  before any PR code runs and puts the snapshot back at the end, after every process PR code
  left behind is dead, so nothing PR code appended feeds a later step or a post step.
- tunebot's own memory (the API client holds the token): the process makes itself non-dumpable,
  so a same-user process can neither ptrace it nor read /proc/<pid>/mem or environ.
- Processes PR code leaves behind (double-forked daemons waiting for a push): tunebot becomes a
  child subreaper (orphans re-parent to it) and `kill_descendants()` ends every one of them
  before a credential is handed to git and before the step ends.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SECRET_NAMES = frozenset(
    {"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"}
)
SECRET_PREFIXES = ("ACTIONS_", "INPUT_", "GITHUB_APP_")
FILE_COMMANDS = (
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "GITHUB_STATE",
)
SEALED_FD = "TUNEBOT_SEALED_FD"
PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def withheld(name: str) -> bool:
    """Whether PR code must never see variable `name`."""
    upper = name.upper()
    return upper in SECRET_NAMES or upper in FILE_COMMANDS or upper.startswith(SECRET_PREFIXES)


def scrub() -> list[str]:
    """Remove whatever PR code must never see from this process's environment; returns the names.

    Kernels and proposers are PR code and inherit the environment; the API client already holds
    its token. Nothing is restored afterwards: the process only handles this event, and any
    later op in it runs PR code too.
    """
    gone = [name for name in os.environ if withheld(name)]
    for name in gone:
        del os.environ[name]
    return gone


@dataclass
class Sealed:
    """The values taken out of the environment (only tunebot's own code reads them)."""

    values: dict[str, str] = field(default_factory=dict)
    reexecuted: bool = False

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def file_commands(self) -> dict[str, str]:
        return {k: v for k, v in self.values.items() if k in FILE_COMMANDS and v}


def is_real_cli() -> bool:
    """True for the `tunebot` executable or `python -m bot`, never for an in-process test runner."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return argv0.name == "tunebot" or argv0.as_posix().endswith("bot/__main__.py")


def seal(reexec: bool | None = None) -> Sealed:
    """Take secrets and file-command paths out of the environment (re-executing to clear the initial copy)."""
    fd = os.environ.pop(SEALED_FD, None)
    if fd is not None:
        with os.fdopen(int(fd), "r", encoding="utf-8") as pipe:
            values = json.loads(pipe.read() or "{}")
        for name in [k for k in os.environ if withheld(k)]:
            values.setdefault(name, os.environ.pop(name))
        return Sealed(values, reexecuted=True)
    values = {k: os.environ[k] for k in os.environ if withheld(k)}
    if values and (is_real_cli() if reexec is None else reexec):
        read_end, write_end = os.pipe()
        payload = json.dumps(values).encode()
        os.write(write_end, payload)  # far below a pipe's capacity: never blocks
        os.close(write_end)
        os.set_inheritable(read_end, True)
        env = {k: v for k, v in os.environ.items() if not withheld(k)}
        env[SEALED_FD] = str(read_end)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "bot", *sys.argv[1:]], env)
    for name in values:
        del os.environ[name]
    return Sealed(values)


class FileCommands:
    """Snapshot of the runner's file-command files; `restore()` undoes whatever PR code wrote."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.saved: dict[str, tuple[Path, bytes | None]] = {}
        for name, path in paths.items():
            p = Path(path)
            self.saved[name] = (p, p.read_bytes() if p.is_file() else None)

    def restore(self) -> list[str]:
        """Put every file back as it was; returns the names PR code had changed."""
        changed = []
        for name, (path, data) in self.saved.items():
            now = path.read_bytes() if path.is_file() else None
            if now == data:
                continue
            changed.append(name)
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        return changed


def become_subreaper() -> bool:
    """Orphaned descendants re-parent to this process (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def make_undumpable() -> bool:
    """Other processes of the same user can no longer read this one's memory or environ (Linux).

    A non-dumpable process's /proc entries belong to root and ptrace needs CAP_SYS_PTRACE, so a
    kernel running as the runner user cannot read the token from tunebot's memory, with or
    without Yama. (Root can; run runners as an unprivileged user.) Children are unaffected.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return (
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
            and libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
        )
    except (OSError, AttributeError):
        return False


def descendants(root: int | None = None) -> list[int]:
    """Pids of every live descendant of `root` (default: this process), from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            out.append(pid)
            todo.append(pid)
    return out


def kill_descendants(timeout_s: float = 5.0) -> int:
    """SIGKILL every descendant (what PR code left running) and reap them; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = descendants()
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.02)
    _reap()
    return len(killed)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@dataclass
class JobGuard:
    """What the CLI sets up for a job that runs PR code; the flow calls `before_credential()`."""

    sealed: Sealed
    reap: bool = True
    files: FileCommands | None = None
    tampered: list[str] = field(default_factory=list)
    killed: int = 0

    def start(self) -> JobGuard:
        if self.reap:
            become_subreaper()
            make_undumpable()
        self.files = FileCommands(self.sealed.file_commands())
        return self

    def before_credential(self) -> None:
        """No process started by PR code may live while git holds the token."""
        if self.reap:
            self.killed += kill_descendants()

    def finish(self) -> list[str]:
        """End PR code's leftovers, then undo its writes to the step's file commands."""
        self.before_credential()
        if self.files is not None:
            self.tampered += self.files.restore()
        return self.tampered
