"""results.jsonl: the append-only, crash-safe record of every measurement of a run.

One JSON object per line (sorted keys, UTF-8). Each append is one os.write of the
whole line on an O_APPEND descriptor under an exclusive flock, then fsync: lines
of concurrent writers never interleave, and a crash can at worst leave the last
line torn (no final newline). read() repairs that: it cuts the file back to the
last newline and keeps the torn bytes in '<path>.torn' for inspection. Every
record carries a unique 'key' ("baseline", "iter:3", ...) so nothing is recorded
twice. The line schema is documented in docs/records.md.

A ResultsLog object remembers what it has parsed (records, keys, byte offset) and, on
the next read or append, parses only the bytes appended since: a step of a long run
costs the same as a step of a short one. The file is parsed again from the start when
it is a different file (inode), shorter than what was parsed, or changed in place.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from bot.record.errors import RecordFormatError
from bot.run.errors import DuplicateRecordError


def iteration_key(n: int) -> str:
    return f"iter:{n}"


class ResultsLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.torn_path = self.path.with_name(self.path.name + ".torn")
        self._forget()

    def _forget(self) -> None:
        self._records: list[dict] = []
        self._keys: set[str] = set()
        self._offset = 0  # bytes parsed (always just after a newline)
        self._lines = 0  # lines parsed, for error messages
        self._ident: tuple[int, int, int] | None = None  # (dev, inode, mtime_ns) when parsed

    # -- public API ---------------------------------------------------------

    def append(self, record: dict) -> None:
        """Append one record; refuses a record without a 'key' or with a key already present."""
        key = record.get("key") if isinstance(record, dict) else None
        if not isinstance(key, str) or not key:
            raise ValueError("a results record needs a non-empty string 'key' (e.g. 'iter:3')")
        try:
            line = json.dumps(record, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"record '{key}' is not plain JSON (convert dataclasses with asdict; "
                f"no NaN/inf): {exc}"
            ) from None
        data = line.encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._load_locked()
            if key in self._keys:
                raise DuplicateRecordError(str(self.path), key)
            written = os.write(fd, data)
            while written < len(data):  # a short write is rare on files; finish it under the lock
                written += os.write(fd, data[written:])
            os.fsync(fd)
            # what we just wrote is parsed already: the next read starts after it
            st = os.fstat(fd)
            if st.st_size == self._offset + len(data):
                self._records.append(json.loads(line))
                self._keys.add(key)
                self._offset += len(data)
                self._lines += 1
                self._ident = (st.st_dev, st.st_ino, st.st_mtime_ns)
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
        except (
            PermissionError
        ):  # a read-only copy (e.g. the one in a delivery branch): read, never repair
            fd, repair = os.open(self.path, os.O_RDONLY), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if repair else fcntl.LOCK_SH)
            return self._load_locked(repair)
        finally:
            os.close(fd)

    def has(self, key: str) -> bool:
        self.read()
        return key in self._keys

    def get(self, key: str) -> dict | None:
        return next((r for r in self.read() if r.get("key") == key), None)

    # -- internals ----------------------------------------------------------

    def _load_locked(self, repair: bool = True) -> list[dict]:
        """Parse what was appended since the last call (caller holds the flock), cutting off (and
        repairing) a torn tail first; everything again if the file was replaced or rewritten."""
        st = os.stat(self.path)
        ident = self._ident
        if (
            ident is None
            or ident[:2] != (st.st_dev, st.st_ino)
            or st.st_size < self._offset
            or (st.st_size == self._offset and st.st_mtime_ns != ident[2])
        ):
            self._forget()
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # 0 when there is no newline at all
        if end < len(data):
            if repair:
                self._repair(data, end, self._offset)
            data = data[:end]
        records: list[dict] = []
        keys: list[str] = []
        for number, raw in enumerate(data.split(b"\n")[:-1], start=self._lines + 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                self._forget()
                raise RecordFormatError(
                    str(self.path),
                    number,
                    f"line is not valid JSON ({exc})",
                    "remove or fix that line, or start over with --restart",
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                self._forget()
                raise RecordFormatError(
                    str(self.path),
                    number,
                    "line is not a record with a string 'key'",
                    "remove or fix that line, or start over with --restart",
                )
            records.append(record)
            keys.append(record["key"])
        self._records.extend(records)
        self._keys.update(keys)
        self._offset += end
        self._lines += data.count(b"\n")
        st = os.stat(self.path)
        self._ident = (st.st_dev, st.st_ino, st.st_mtime_ns)
        return list(self._records)

    def _repair(self, data: bytes, end: int, base: int = 0) -> None:
        # Save the torn bytes before cutting them, so a repair never loses evidence.
        with open(self.torn_path, "ab") as torn:
            torn.write(data[end:] + b"\n")
            torn.flush()
            os.fsync(torn.fileno())
        os.truncate(self.path, base + end)
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
