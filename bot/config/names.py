"""Op names, folder names and branch names: what is allowed, and the error when it is not.

A name part is deliberately narrow (no separators, no shell or glob characters), so an op
name can never leave the ops root.
"""

from __future__ import annotations

import difflib
import re
from pathlib import PurePosixPath

from bot.config.checker import Checker
from bot.errors import OpNotFound

NAME_PART = re.compile(r"^[A-Za-z0-9_.-]+$")
RUNNER_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class OpNameError(OpNotFound):
    """OpNotFound with a sharper message: a refused name, or close-match suggestions.

    Subclasses OpNotFound so callers (exit code 2) need not know it exists.
    """

    def __init__(
        self,
        name: str,
        candidates: list[str],
        ambiguous: bool = False,
        suggestions: list[str] | None = None,
        problem: str | None = None,
    ) -> None:
        super().__init__(name, candidates, ambiguous)
        self.suggestions = list(suggestions or [])
        self.problem = problem
        if problem:
            message = (
                f"invalid op name {name!r}: {problem}. Fix: name an op as <op> or <project>/<op>, "
                "each part made of letters, digits, '_', '.' and '-'"
            )
        else:
            message = str(self)
            if self.suggestions:
                message += f". Did you mean: {', '.join(self.suggestions)}?"
        self.args = (message,)


def name_problem(part: str) -> str | None:
    """Why `part` cannot be one component of an op name or path, or None if it can."""
    if part == "":
        return "it has an empty part (a leading, trailing or doubled '/')"
    if part in (".", ".."):
        return f"'{part}' would leave the ops folder (path traversal is not allowed)"
    if not NAME_PART.match(part):
        bad = sorted({c for c in part if not re.match(r"[A-Za-z0-9_.-]", c)})
        return f"it contains {', '.join(repr(c) for c in bad)}"
    return None


def check_relative_path(check: Checker, value: str, key: str) -> str:
    if "\\" in value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        check.fail(
            key,
            f"{value!r} must be a relative path inside the repository, with '/' separators",
            "write it relative to the repository root, e.g. `examples`",
        )
    for part in PurePosixPath(value).parts:
        problem = name_problem(part)
        if problem:
            check.fail(
                key,
                f"{value!r} is not allowed: {problem}",
                "use a folder inside the repository, e.g. `examples`",
            )
    return value


def check_ref_name(check: Checker, value: object, key: str) -> str:
    """A branch name (or prefix) git accepts and that tunebot can safely build on."""
    text = check.text(value, key)
    problem = None
    if text.startswith("/") or text.endswith("/") or "//" in text:
        problem = "it starts or ends with '/' or has an empty part"
    elif ".." in text or "@{" in text:
        problem = "git refuses '..' and '@{' in branch names"
    else:
        for part in text.split("/"):
            if not NAME_PART.match(part) or part.startswith((".", "-")) or part.endswith(".lock"):
                problem = f"the part {part!r} is not a valid branch name component"
                break
    if problem:
        check.fail(
            key,
            f"{text!r} is not a usable branch name: {problem}",
            "use letters, digits, '_', '.', '-' and '/' between parts, e.g. `tunebot`",
        )
    return text


def op_name_problem(name: str) -> str | None:
    """Why `name` cannot be an op name (<op> or <project>/<op>), or None if it can."""
    if not name:
        return "it is empty"
    if "\\" in name:
        return "it contains a backslash"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "it is an absolute path"
    parts = name.split("/")
    if len(parts) > 2:
        return "it has more than two parts"
    for part in parts:
        problem = name_problem(part)
        if problem:
            return problem
    return None


def suggest(name: str, ops: list[str]) -> list[str]:
    """Close matches for a mistyped op name, compared case-insensitively by short and full name."""
    by_key: dict[str, list[str]] = {}
    for q in ops:
        for key in (q.lower(), q.split("/", 1)[1].lower()):
            by_key.setdefault(key, []).append(q)
    out: list[str] = []
    for key in difflib.get_close_matches(name.lower(), list(by_key), n=5, cutoff=0.6):
        for q in by_key[key]:
            if q not in out:
                out.append(q)
    return out[:3]
