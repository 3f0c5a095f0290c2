"""Text of committed files, decoded the way their consumer reads them.

A Python file may declare its encoding in a PEP 263 coding line (`# -*- coding: gbk -*-`):
Python runs it fine, so tunebot reads it the same way (tokenize.detect_encoding) and writes
variants back in the declared encoding, so the file on disk still matches its coding line.
Every other text file is UTF-8. A file that cannot be decoded is a clear error (exit 2).
"""

from __future__ import annotations

import io
import re
import tokenize

from bot.errors import TunebotError

# PEP 263: a comment on line 1 or 2 matching this regular expression
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


class UndecodableFile(TunebotError):
    """A committed file that is not text in the encoding it must have."""

    exit_code = 2


def decode(data: bytes, shown: str, python: bool = False) -> str:
    """`data` as text: UTF-8, or for Python files the encoding their coding line declares."""
    encoding = "utf-8"
    if python:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except (
            SyntaxError
        ) as exc:  # not UTF-8 without a coding line, an unknown name, a BOM contradicting it
            if "missing encoding declaration" in str(exc):
                raise UndecodableFile(
                    f"{shown} is not valid UTF-8 text and has no coding line. Fix: save it as UTF-8, or declare "
                    "its encoding in a coding line (PEP 263), e.g. `# -*- coding: gbk -*-`"
                ) from None
            raise UndecodableFile(
                f"{shown}: {exc}. Fix: correct its coding line (PEP 263) or save it as UTF-8"
            ) from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        declared = "UTF-8" if encoding == "utf-8" else f"{encoding} (its coding line)"
        raise UndecodableFile(
            f"{shown} is not valid {declared} text ({exc.reason} at byte {exc.start}). Fix: save it as UTF-8"
            + (", or declare its encoding in a coding line (PEP 263)" if python else "")
        ) from None
    return text.removeprefix("\ufeff") if encoding == "utf-8-sig" else text


def declared_encoding(text: str) -> str:
    """The encoding a Python source's coding line declares (utf-8 when none)."""
    for line in text.splitlines()[:2]:
        m = _COOKIE.match(line)
        if m:
            return m.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            break
    return "utf-8"


def encode(text: str) -> bytes:
    """Bytes of a Python source in the encoding its coding line declares (UTF-8 without one)."""
    encoding = declared_encoding(text)
    try:
        return text.encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return text.encode("utf-8")
