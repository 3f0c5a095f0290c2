"""results.jsonl: the append-only, crash-safe record of every measurement of a run.

One JSON object per line (sorted keys, UTF-8). Each append is one os.write of the
whole line on an O_APPEND descriptor under an exclusive flock, then fsync: lines
of concurrent writers never interleave, and a crash can at worst leave the last
line torn (no final newline). read() repairs that: it cuts the file back to the
last newline and keeps the torn bytes in '<path>.torn' for inspection. Every
record carries a unique 'key' ("baseline", "iter:3", ...) so nothing is recorded
twice. The line schema is documented in docs/records.md.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from bot.record.errors import DuplicateRecordError, RecordFormatError

def iteration_key(n: int) -> str:
    return f"iter:{n}"


class ResultsLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.torn_path = self.path.with_name(self.path.name + ".torn")

    # -- public API ---------------------------------------------------------

    def append(self, record: dict) -> None:
        """Append one record; refuses a record without a 'key' or with a key already present."""
        key = record.get("key") if isinstance(record, dict) else None
        if not isinstance(key, str) or not key:
            raise ValueError("a results record needs a non-empty string 'key' (e.g. 'iter:3')")
        try:
            line = json.dumps(record, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
        except (TypeError, ValueError) as exc:
            raise ValueError(f"record '{key}' is not plain JSON (convert dataclasses with asdict; "
                             f"no NaN/inf): {exc}") from None
        data = line.encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            records = self._load_locked()
            if any(r.get("key") == key for r in records):
                raise DuplicateRecordError(str(self.path), key)
            written = os.write(fd, data)
            while written < len(data):  # a short write is rare on files; finish it under the lock
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)  # also releases the lock
        if created:
            _fsync_dir(self.path.parent)

    def read(self) -> list[dict]:
        """All complete records in order; a torn final line is cut off (and saved to .torn)."""
        if not self.path.exists():
            return []
        try:
            fd, repair = os.open(self.path, os.O_RDWR), True
        except PermissionError:  # a read-only copy (e.g. the one in a delivery branch): read, never repair
            fd, repair = os.open(self.path, os.O_RDONLY), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if repair else fcntl.LOCK_SH)
            return self._load_locked(repair)
        finally:
            os.close(fd)

    def has(self, key: str) -> bool:
        return any(r.get("key") == key for r in self.read())

    def get(self, key: str) -> dict | None:
        return next((r for r in self.read() if r.get("key") == key), None)

    # -- internals ----------------------------------------------------------

    def _load_locked(self, repair: bool = True) -> list[dict]:
        """Parse the file (caller holds the flock), cutting off (and repairing) a torn tail first."""
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # 0 when there is no newline at all
        if end < len(data):
            if repair:
                self._repair(data, end)
            data = data[:end]
        records: list[dict] = []
        for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise RecordFormatError(str(self.path), number, f"line is not valid JSON ({exc})",
                                        "remove or fix that line, or start over with --restart") from None
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                raise RecordFormatError(str(self.path), number, "line is not a record with a string 'key'",
                                        "remove or fix that line, or start over with --restart")
            records.append(record)
        return records

    def _repair(self, data: bytes, end: int) -> None:
        # Save the torn bytes before cutting them, so a repair never loses evidence.
        with open(self.torn_path, "ab") as torn:
            torn.write(data[end:] + b"\n")
            torn.flush()
            os.fsync(torn.fileno())
        os.truncate(self.path, end)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Make a newly created file's directory entry durable too."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
