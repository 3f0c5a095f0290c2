"""Kernel processes never outlive the run that started them.

Three mechanisms, each for a way a kernel's processes could survive:

- `become_subreaper()`: tunebot is the Linux child subreaper of everything it starts, so a
  kernel's child that calls `setsid` (leaving the process group the sandbox kills) and is
  orphaned is re-parented to tunebot, not to init, and `sweep_new_children` finds and kills it.
- `die_with_parent()`: run in the child before exec; PR_SET_PDEATHSIG sends SIGKILL to the
  kernel's main process when tunebot dies (a SIGKILLed tunebot cannot run its timeout).
- `KERNEL_TAG_ENV`: every kernel process carries the tag of the run that started it in its
  environment; `sweep_tagged` kills processes with a given tag that a killed run left behind
  (their parent died, so only the tag still says whose they are). Called on the next run.
- `guard_tag`: a watchdog process (its own session, so a signal to tunebot's process group does
  not reach it) holds a pipe from tunebot; when tunebot ends in any way, even SIGKILL, the pipe
  closes and the watchdog kills every process carrying a tag it was given: the kernel's own
  children and those that called `setsid` die with the run, not only its main process.

Linux only (prctl, /proc); elsewhere every function is a no-op that says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL_TAG_ENV = "TUNEBOT_KERNEL_TAG"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_TEMP_NAME = re.compile(r"^tunebot-(\d+)-")


@functools.cache
def _prctl():
    """libc's prctl, typed (loaded once); None where unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
    except (OSError, AttributeError):
        return None
    return libc.prctl


@functools.cache
def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (once); False where unsupported."""
    prctl = _prctl()
    return bool(prctl) and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def prepare_child_hook():
    """A function for Popen's preexec_fn: SIGKILL this child when its parent dies.

    Resolved in the parent, so the forked child only makes one libc call.
    """
    prctl = _prctl()
    parent = os.getpid()

    def die_with_parent() -> None:
        if prctl:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died between fork and prctl
                os._exit(137)

    return die_with_parent


# ---------------------------------------------------------------- the watchdog

_WATCHDOG = r"""
import os, signal, sys, time
tags = set()
for line in sys.stdin:  # ends at EOF: tunebot, the only writer, is gone
    tags.add(line.strip())
wanted = {("TUNEBOT_KERNEL_TAG=" + t).encode() for t in tags if t}
me = os.getpid()
for _ in range(5):
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/" + name + "/environ", "rb") as fh:
                env = set(fh.read().split(b"\0"))
        except OSError:
            continue
        if wanted & env:
            found += 1
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    if not found:
        break
    time.sleep(0.05)
"""

_watchdog: list[subprocess.Popen] = []  # the running watchdog, if one was started
_guarded: set[str] = set()


def guard_tag(tag: str) -> None:
    """Make sure the watchdog kills processes tagged `tag` once this process ends."""
    if tag in _guarded or not _PROC.is_dir():
        return
    if not _watchdog or _watchdog[0].poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != KERNEL_TAG_ENV}
        try:
            started = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError:
            return
        _watchdog[:] = [started]
        _guarded.clear()
    pipe = _watchdog[0].stdin
    if pipe is None:
        return
    try:
        pipe.write(tag.encode() + b"\n")
        pipe.flush()
    except (OSError, ValueError):
        return
    _guarded.add(tag)


# ---------------------------------------------------------------- process table


def _stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of `pid`, or None when it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), fields[0]


def _pids() -> list[int]:
    try:
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


@functools.cache
def _children_files() -> bool:
    """Whether this kernel lists each task's children in /proc/<pid>/task/<tid>/children."""
    return (_PROC / "self" / "task" / str(os.getpid()) / "children").exists()


def _listed_children(pid: int) -> set[int]:
    """Direct children of `pid` from its tasks' children files: a few reads, not the whole table."""
    found: set[int] = set()
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return found  # gone
    for task in tasks:
        try:
            found.update(int(x) for x in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return found


def children(pid: int | None = None) -> set[int]:
    """Live direct children of `pid` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    if _children_files():
        return _listed_children(pid)
    found = set()
    for p in _pids():
        st = _stat(p)
        if st and st[0] == pid:
            found.add(p)
    return found


def _descendants(roots: set[int]) -> set[int]:
    if _children_files():
        found, frontier = set(roots), set(roots)
        while frontier:
            frontier = {c for p in frontier for c in _listed_children(p)} - found
            found |= frontier
        return found
    parent_of = {}
    for p in _pids():
        st = _stat(p)
        if st:
            parent_of[p] = st[0]
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {p for p, pp in parent_of.items() if pp in frontier and p not in found}
        found |= frontier
    return found


def _kill(pids: set[int]) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or not ours
            os.kill(p, signal.SIGKILL)


def _reap(pids: set[int]) -> None:
    for p in pids:
        with contextlib.suppress(ChildProcessError):  # not our child: its parent reaps it
            os.waitpid(p, os.WNOHANG)


def sweep_new_children(before: set[int], rounds: int = 50) -> int:
    """Kill every child of ours not in `before` (kernel processes re-parented to us), with all
    their descendants, and reap them. Returns how many processes were killed."""
    killed: set[int] = set()
    for _ in range(rounds):
        new = children() - before
        if not new:
            break
        tree = _descendants(new)
        _kill(tree)
        killed |= tree
        time.sleep(0.01)
        _reap(new)
    return len(killed)


def _environ_starts(pid: int, prefix: bytes) -> bool:
    try:
        return any(
            e.startswith(prefix) for e in (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
        )
    except OSError:
        return False


def sweep_tagged(prefix: str) -> int:
    """Kill the processes (of this user) whose kernel tag starts with `prefix`: left by a run that
    was killed (tags are `<op tag>.<pid of the tunebot process>`)."""
    entry = f"{KERNEL_TAG_ENV}={prefix}".encode()
    me = os.getpid()
    found = {p for p in _pids() if p != me and _environ_starts(p, entry)}
    if found:
        _kill(_descendants(found))
    return len(found)


# ---------------------------------------------------------------- temporary folders


def temp_prefix(kind: str) -> str:
    """Prefix of a temporary folder this process owns; `sweep_temp` removes it once we are dead."""
    return f"tunebot-{os.getpid()}-{kind}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    st = _stat(pid)
    return st is not None and st[1] != "Z"


def sweep_temp(root: Path | None = None) -> list[str]:
    """Remove temporary folders and files of tunebot processes that no longer exist."""
    root = Path(root or tempfile.gettempdir())
    removed: list[str] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if not m or _alive(int(m.group(1))):
            continue
        try:
            if entry.lstat().st_uid != uid:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
        except OSError:
            continue
        removed.append(entry.name)
    return removed
