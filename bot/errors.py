"""User-facing errors. Each one says what was wrong and how to fix it.

Every error a user can see derives from `TunebotError` and names its exit code with one of the
constants below; the CLI handler (`bot.cli.common.handle_errors`) is the one place that turns an
error into a line on stderr and that exit code. docs/cli.md lists the codes.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # the run or command failed (a baseline that fails L0, a full disk, a git error)
EXIT_BAD_INPUT = 2  # bad input: unknown op, malformed config, bad flag, a record edited by hand
EXIT_REFUSED = 3  # refused by a gate or a live run: merge without approval, a second run of an op
EXIT_INTERRUPTED = 130  # Ctrl-C; run the same command again to resume


class TunebotError(Exception):
    """Base class for errors shown to users (never a traceback)."""

    exit_code = EXIT_FAILED


class ConfigError(TunebotError):
    """A config file is malformed: names the file, the key and the fix."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, file: str, key: str, problem: str, fix: str) -> None:
        self.file, self.key, self.problem, self.fix = file, key, problem, fix
        super().__init__(f"{file}: key '{key}': {problem}. Fix: {fix}")


class OpNotFound(TunebotError):
    """An op name that matches no op, or more than one: lists candidates."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, name: str, candidates: list[str], ambiguous: bool = False) -> None:
        self.name, self.candidates, self.ambiguous = name, candidates, ambiguous
        listing = ", ".join(candidates) if candidates else "(none found)"
        if ambiguous:
            msg = f"op '{name}' is ambiguous; say which one as <project>/<op>: {listing}"
        else:
            msg = f"unknown op '{name}'; known ops: {listing}"
        super().__init__(msg)


class MeasureError(TunebotError):
    """A measurement tool is missing or produced nothing usable."""


class GitError(TunebotError):
    """A git operation that would endanger the user's repository was refused."""
