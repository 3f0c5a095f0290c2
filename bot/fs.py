"""Files tunebot's processes share: exclusive locks that die with their holder, atomic replacement."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from bot.errors import GitError


class LockBusy(GitError):
    """A file_lock is held by another live process."""


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float = 30.0) -> Iterator[None]:
    """Exclusive lock on `path` (an flock on a file kept in place); waits up to `timeout_s`.

    The kernel releases an flock when its holder exits, even by SIGKILL, so a
    crashed run never blocks the next one and no staleness guess is needed: a
    lock held by a live process is never broken. The file is never unlinked
    (unlinking would let a waiter lock an orphaned inode while a newcomer locks
    a fresh file). It holds the last holder's pid, for people only.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, time.monotonic() + timeout_s)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, path: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LockBusy(
                    f"{path} is held by another tunebot process (pid {_lock_holder(path)}). "
                    "Wait for it to finish; the lock is released as soon as that process exits."
                ) from None
            time.sleep(0.02)


def lock_is_held(path: Path) -> bool:
    """Whether a live process holds the file_lock on `path` right now."""
    if not path.exists():
        return False
    try:
        with file_lock(path, timeout_s=0):
            return False
    except LockBusy:
        return True


def _lock_holder(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text().strip() or "unknown"
    return "unknown"


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
