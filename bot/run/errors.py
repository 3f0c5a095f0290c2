"""The errors a run raises: one base, `RunError`, with the exit code each kind means
(bot/errors.py; the CLI handler turns them into that code, docs/cli.md)."""

from __future__ import annotations

from bot.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, TunebotError


class RunError(TunebotError):
    """Something stopped a run before or while it ran; what was recorded stays."""

    exit_code = EXIT_FAILED


class BadRequest(RunError):
    """A tune request that contradicts the recorded run or makes no sense: nothing written."""

    exit_code = EXIT_BAD_INPUT


class RunBusy(RunError):
    """Another tunebot process is running the same target."""

    exit_code = EXIT_REFUSED


class NothingToCancel(RunError):
    """`tunebot cancel` of a target that has no live run."""

    exit_code = EXIT_REFUSED


class BaselineFailed(RunError):
    """The unmodified target fails its checks or cannot be timed: nothing can be tuned."""


class DuplicateRecordError(RunError):
    """results.jsonl already holds a record with this key: appending it again would duplicate it."""

    def __init__(self, path: str, key: str) -> None:
        self.path, self.key = path, key
        super().__init__(
            f"{path}: a record with key '{key}' is already there; refusing to append a duplicate. "
            f"Fix: check ResultsLog.has('{key}') before measuring, or start over with --restart"
        )
