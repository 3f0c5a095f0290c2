"""bot.fs: file locks between real processes (live, killed, concurrent)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot import fs
from bot.errors import GitError

_HOLD_LOCK = """
import sys, time
from pathlib import Path
from bot import fs
with fs.file_lock(Path(sys.argv[1]), timeout_s=5):
    print("locked", flush=True)
    sys.stdin.read()  # hold until the test closes stdin (or kills us)
"""


def _lock_holder(lock: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_file_lock_held_by_live_process_is_never_broken(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    holder = _lock_holder(lock)
    # an hour old and holding garbage: a staleness guess would break it; a held lock must not be
    lock.write_text("garbage")
    os.utime(lock, (1, 1))
    with (
        pytest.raises(GitError, match="held by another tunebot process"),
        fs.file_lock(lock, timeout_s=0.3),
    ):
        pass
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0
    with fs.file_lock(lock, timeout_s=1):
        assert lock.read_text() == str(os.getpid())


def test_file_lock_left_by_dead_process_is_taken(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    holder = _lock_holder(lock)
    holder.kill()  # SIGKILL: no cleanup code runs, the file stays
    holder.wait(timeout=30)
    assert lock.exists()
    with fs.file_lock(lock, timeout_s=1):
        assert lock.read_text() == str(os.getpid())
    holder.stdin.close()
    holder.stdout.close()


_COUNT_UNDER_LOCK = """
import sys
from pathlib import Path
from bot import fs
lock, counter, inside = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
for _ in range(20):
    with fs.file_lock(lock, timeout_s=60):
        inside.mkdir()  # fails if another process is inside too
        counter.write_text(str(int(counter.read_text()) + 1))
        inside.rmdir()
"""


def test_file_lock_excludes_concurrent_processes(tmp_path: Path) -> None:
    lock, counter, inside = tmp_path / "x.lock", tmp_path / "n", tmp_path / "inside"
    counter.write_text("0")
    lock.write_text("999999999")  # left behind by a process long gone
    args = [str(lock), str(counter), str(inside)]
    procs = [subprocess.Popen([sys.executable, "-c", _COUNT_UNDER_LOCK, *args]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert counter.read_text() == "80"


def test_write_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "branches.json"
    target.write_bytes(b"old contents that are longer than the new ones\n")
    fs.write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["branches.json"]


def test_lock_is_held_tells_live_holder_from_none(tmp_path: Path) -> None:
    lock = tmp_path / "run.lock"
    assert not fs.lock_is_held(lock)  # no file yet
    holder = _lock_holder(lock)
    assert fs.lock_is_held(lock)
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0
    assert not fs.lock_is_held(lock)
