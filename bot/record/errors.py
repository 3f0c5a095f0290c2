"""Errors raised by the record readers and writers."""

from __future__ import annotations

from bot.errors import TunebotError


class RecordFormatError(TunebotError):
    """A record file (opt_log.md, report, results.jsonl) cannot be read back.

    Names the file, the line (1-based) when known, what is wrong and how to fix it.
    Exit code 2: a hand-edited file is user input.
    """

    exit_code = 2

    def __init__(self, source: str, line: int | None, problem: str, fix: str) -> None:
        self.source, self.line, self.problem, self.fix = source, line, problem, fix
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}. Fix: {fix}")


class DuplicateRecordError(TunebotError):
    """results.jsonl already holds a record with this key: appending it again would duplicate it."""

    def __init__(self, path: str, key: str) -> None:
        self.path, self.key = path, key
        super().__init__(
            f"{path}: a record with key '{key}' is already there; refusing to append a duplicate. "
            f"Fix: check ResultsLog.has('{key}') before measuring, or start over with --restart"
        )
