"""Declarative field specs: a section of a configuration file is a tuple of `Field`s.

A `Field` names a key and the `Spec` that checks its value. `Section.read` refuses unknown
keys (with did-you-mean), then reads the fields in order, so the first error a user sees
is the same on every run. A new key is one `Field` line; a new kind of value is one class
with a `read(check, value, key)` method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.config.checker import Checker


class Spec(Protocol):
    def read(self, check: Checker, value: object, key: str) -> object: ...


@dataclass(frozen=True)
class Integer:
    minimum: int | None = None
    example: int = 1
    maximum: int | None = None

    def read(self, check: Checker, value: object, key: str) -> int:
        return check.integer(value, key, self.minimum, self.example, self.maximum)


@dataclass(frozen=True)
class Number:
    minimum: float | None = None
    above: float | None = None
    below: float | None = None
    at_most: float | None = None
    example: str = "1.0"
    fix: str | None = None

    def read(self, check: Checker, value: object, key: str) -> float:
        return check.number(
            value,
            key,
            minimum=self.minimum,
            above=self.above,
            below=self.below,
            at_most=self.at_most,
            example=self.example,
            fix=self.fix,
        )


@dataclass(frozen=True)
class Boolean:
    def read(self, check: Checker, value: object, key: str) -> bool:
        return check.boolean(value, key)


@dataclass(frozen=True)
class Text:
    choices: tuple[str, ...] | None = None
    identifier: bool = False

    def read(self, check: Checker, value: object, key: str) -> str:
        return check.text(value, key, self.choices, self.identifier)


@dataclass(frozen=True)
class Texts:
    def read(self, check: Checker, value: object, key: str) -> tuple[str, ...]:
        return check.texts(value, key)


@dataclass(frozen=True)
class Argv:
    def read(self, check: Checker, value: object, key: str) -> tuple[str, ...] | None:
        return check.argv(value, key)


@dataclass(frozen=True)
class Field:
    """One key of a section. `null_is_absent`: `key: null` (or a bare `key:`) means the default."""

    key: str
    spec: Spec
    null_is_absent: bool = True
    flatten: bool = False  # the spec returns a dict whose items join the section's values


@dataclass(frozen=True)
class Section:
    """A mapping of known keys. `keys` orders the 'known keys here' hint (default: field order)."""

    fields: tuple[Field, ...]
    keys: tuple[str, ...] | None = None
    hints: tuple[tuple[str, str], ...] = ()  # known misplacements: key -> fix

    @property
    def allowed(self) -> tuple[str, ...]:
        return self.keys or tuple(f.key for f in self.fields)

    def read(self, check: Checker, data: dict, prefix: str = "") -> dict:
        check.known_keys(data, self.allowed, prefix=prefix, hints=dict(self.hints) or None)
        values: dict = {}
        for f in self.fields:
            if f.key not in data or (f.null_is_absent and data[f.key] is None):
                continue
            value = f.spec.read(check, data[f.key], f"{prefix}{f.key}")
            if f.flatten:
                values.update(value)  # type: ignore[call-overload]
            else:
                values[f.key] = value
        return values


@dataclass(frozen=True)
class Nested:
    """A key whose value is itself a section (`accuracy:`, `github:`, ...)."""

    section: Section
    build: Callable[[Checker, dict], object] | None = None  # values -> the settings object

    def read(self, check: Checker, value: object, key: str) -> object:
        values = self.section.read(check, check.mapping(value, key), prefix=f"{key}.")
        return self.build(check, values) if self.build else values
