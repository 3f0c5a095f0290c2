"""User-facing errors. Each one says what was wrong and how to fix it.

The CLI maps them to exit codes (see docs/cli.md): UsageError-like problems
(bad op name, malformed config, missing docs dir) exit 2.
"""

from __future__ import annotations


class TunebotError(Exception):
    """Base class for errors shown to users (never a traceback)."""

    exit_code = 1


class ConfigError(TunebotError):
    """A config file is malformed: names the file, the key and the fix."""

    exit_code = 2

    def __init__(self, file: str, key: str, problem: str, fix: str) -> None:
        self.file, self.key, self.problem, self.fix = file, key, problem, fix
        super().__init__(f"{file}: key '{key}': {problem}. Fix: {fix}")


class OpNotFound(TunebotError):
    """An op name that matches no op, or more than one: lists candidates."""

    exit_code = 2

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
