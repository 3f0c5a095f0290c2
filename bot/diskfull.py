"""A full disk is not a bug: say so, say that nothing recorded was lost, and how to go on.

Every record is appended with one write and fsync'd (bot/run/log.py) and every git
object is written before the record that names it, so a write that fails for lack of space
leaves at most a torn last line, which the next run cuts off and redoes.
"""

from __future__ import annotations

import errno

NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_TEXTS = (
    "No space left on device",
    "Disk quota exceeded",
    "Out of diskspace",
)  # the last: git's own words
ADVICE = (
    "the disk is full{where}. Nothing recorded was lost: every finished iteration is kept. "
    "Free some space, then run the same command again to resume where it stopped"
)


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (an OSError, or a git error quoting git's message) is a full disk or quota."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE:
        return True
    text = str(exc)
    return any(t in text for t in _TEXTS)


def message(exc: BaseException) -> str:
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    return ADVICE.format(where=where)
