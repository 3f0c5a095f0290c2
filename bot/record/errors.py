"""Errors raised by the record readers."""

from __future__ import annotations

from bot.errors import EXIT_BAD_INPUT, TunebotError


class RecordFormatError(TunebotError):
    """A record file (opt_log.md, report, results.jsonl) cannot be read back.

    Names the file, the line (1-based) when known, what is wrong and how to fix it.
    A hand-edited file is user input: bad input.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, line: int | None, problem: str, fix: str) -> None:
        self.source, self.line, self.problem, self.fix = source, line, problem, fix
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}. Fix: {fix}")
