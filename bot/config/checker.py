"""Typed reads of one configuration file's values; every failure names the file, the key,
the problem and a fix (a ConfigError), never a traceback.
"""

from __future__ import annotations

import difflib
import keyword
import math
import re
import shlex
from dataclasses import dataclass
from typing import NoReturn

from bot.errors import ConfigError

_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def kind(value: object) -> str:
    """How a YAML value reads to a person, for 'expected X, got Y' messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


@dataclass(frozen=True)
class Checker:
    """Typed reads of one file's values; every failure names the file, the key and a fix."""

    file: str

    def fail(self, key: str, problem: str, fix: str) -> NoReturn:
        raise ConfigError(self.file, key, problem, fix)

    def known_keys(
        self,
        data: dict,
        allowed: tuple[str, ...],
        prefix: str = "",
        hints: dict[str, str] | None = None,
    ) -> None:
        for key in data:
            if not isinstance(key, str):
                self.fail(
                    f"{prefix}{key}",
                    f"keys must be text, got {kind(key)}",
                    "quote the key or rename it",
                )
            if key in allowed:
                continue
            if hints and key in hints:
                self.fail(f"{prefix}{key}", "not allowed here", hints[key])
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            if close:
                fix = f"did you mean '{prefix}{close[0]}'?"
            else:
                fix = f"remove it; known keys here: {', '.join(allowed)}"
            self.fail(f"{prefix}{key}", "unknown key", fix)

    def mapping(self, value: object, key: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(
                key,
                f"expected a mapping of keys to values, got {kind(value)}",
                f"write `{key.rsplit('.', 1)[-1]}:` followed by indented `key: value` lines",
            )
        return value

    def integer(
        self,
        value: object,
        key: str,
        minimum: int | None = None,
        example: int = 1,
        maximum: int | None = None,
    ) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(
                key,
                f"expected a whole number, got {kind(value)}",
                f"write e.g. `{leaf(key)}: {example}`",
            )
        if minimum is not None and value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}", f"use a value >= {minimum}")
        if maximum is not None and value > maximum:
            self.fail(key, f"must be at most {maximum}, got {value}", f"use a value <= {maximum}")
        return value

    def number(
        self,
        value: object,
        key: str,
        minimum: float | None = None,
        above: float | None = None,
        below: float | None = None,
        at_most: float | None = None,
        example: str = "1.0",
        fix: str | None = None,
    ) -> float:
        # PyYAML reads `1e-4` (no dot) as text; accept plain numeric text so users are not punished for it.
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            self.fail(
                key,
                f"expected a number, got {kind(value)}",
                fix or f"write e.g. `{leaf(key)}: {example}`",
            )
        number = float(value)
        if not math.isfinite(number):  # .inf would reach results.jsonl, which is strict JSON
            self.fail(
                key,
                f"must be a finite number, got {number:g}",
                fix or f"write e.g. `{leaf(key)}: {example}`",
            )
        if minimum is not None and number < minimum:
            self.fail(
                key, f"must be >= {minimum:g}, got {number:g}", fix or f"use a value >= {minimum:g}"
            )
        if above is not None and number <= above:
            self.fail(
                key, f"must be > {above:g}, got {number:g}", fix or f"use a value > {above:g}"
            )
        if below is not None and number >= below:
            self.fail(
                key, f"must be < {below:g}, got {number:g}", fix or f"use a value < {below:g}"
            )
        if at_most is not None and number > at_most:
            self.fail(
                key, f"must be <= {at_most:g}, got {number:g}", fix or f"use a value <= {at_most:g}"
            )
        return number

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(
                key,
                f"expected true or false, got {kind(value)}",
                f"write `{leaf(key)}: true` or `false`",
            )
        return value

    def text(
        self,
        value: object,
        key: str,
        choices: tuple[str, ...] | None = None,
        identifier: bool = False,
    ) -> str:
        if not isinstance(value, str) or not value.strip():
            what = f"one of {', '.join(choices)}" if choices else "non-empty text"
            self.fail(
                key,
                f"expected {what}, got {kind(value)}",
                f"write e.g. `{leaf(key)}: {(choices or ('...',))[0]}`",
            )
        if choices and value not in choices:
            close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            self.fail(key, f"unknown value {value!r}", f"{hint}use one of: {', '.join(choices)}")
        if identifier and (not value.isidentifier() or keyword.iskeyword(value)):
            self.fail(
                key,
                f"{value!r} is not a Python name",
                "use the name of a function or constant in the op module",
            )
        return value

    def texts(self, value: object, key: str) -> tuple[str, ...]:
        """A list of non-empty texts; a single text counts as a list of one."""
        if isinstance(value, str):
            value = [value]
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(
                key,
                f"expected a list of texts, got {kind(value)}",
                f"write `{leaf(key)}: [a, b]`",
            )
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.fail(
                    f"{key}[{i}]",
                    f"expected non-empty text, got {kind(item)}",
                    "quote the item or remove it",
                )
        return tuple(value)

    def argv(self, value: object, key: str) -> tuple[str, ...] | None:
        """A command: a list of arguments, or one text split like a shell would."""
        if value is None:
            return None
        if isinstance(value, str):
            try:
                parts = shlex.split(value)
            except ValueError as exc:
                self.fail(
                    key,
                    f"cannot split the command: {exc}",
                    "balance the quotes, or write it as a list of arguments",
                )
            value = parts
        argv = self.texts(value, key)
        if not argv:
            self.fail(
                key,
                "the command is empty",
                f"name a program, e.g. `{leaf(key)}: [python, propose.py]`, or remove the key",
            )
        return argv


def leaf(key: str) -> str:
    return re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])
