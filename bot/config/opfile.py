"""Per-op `tune.yaml`: the op's knobs, strategies, accuracy, latency and limits, declared
as field specs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from pathlib import Path

from bot.config.checker import Checker, kind, leaf
from bot.config.fields import Argv, Field, Integer, Nested, Number, Section, Text
from bot.config.repo import RUN_LIMIT_FIELDS
from bot.config.schema import (
    ACCURACY_MODES,
    DTYPES,
    FILESYSTEM_MODES,
    KERNEL_KINDS,
    LEVELS,
    MAX_REPEATS,
    AccuracySettings,
    KernelLimits,
    Knob,
    LatencySettings,
    OpConfig,
)
from bot.config.shapes import Shapes

KNOB_KEYS = ("name", "strategy", "values", "divides", "multiple_of")


def strategy_ids(
    check: Checker, ids: tuple[str, ...], key: str, indexed: bool = True
) -> tuple[str, ...]:
    from bot.strategies import catalog  # imported late: strategies import this module

    for i, sid in enumerate(ids):
        if sid not in catalog.IDS:
            close = difflib.get_close_matches(sid, catalog.IDS, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            check.fail(
                f"{key}[{i}]" if indexed else key,
                f"unknown strategy {sid!r}",
                f"{hint}known strategies: {', '.join(catalog.IDS)}",
            )
    return ids


@dataclass(frozen=True)
class LatencyBackend:
    """`auto` (one is picked at run time) or a name in the latency backend registry."""

    def read(self, check: Checker, value: object, key: str) -> str:
        # Read when a file is checked, not at import: backend modules may import the config schema.
        from bot.measure.backends.registry import REGISTRY

        return check.text(value, key, ("auto", *REGISTRY))


@dataclass(frozen=True)
class Strategies:
    """Catalog ids; an empty list would leave nothing to try."""

    def read(self, check: Checker, value: object, key: str) -> tuple[str, ...]:
        ids = strategy_ids(check, check.texts(value, key), key)
        if not ids:
            check.fail(
                key,
                "the list is empty, so nothing could be tried",
                "remove the key to allow every applicable strategy, or list some",
            )
        return ids


@dataclass(frozen=True)
class Knobs:
    def read(self, check: Checker, value: object, key: str) -> tuple[Knob, ...]:
        return _knobs(check, value)


def _knobs(check: Checker, value: object) -> tuple[Knob, ...]:
    if not isinstance(value, list):
        check.fail(
            "knobs",
            f"expected a list of knobs, got {kind(value)}",
            "write `knobs:` followed by `- name: BLOCK_M` items with strategy and values",
        )
    knobs: list[Knob] = []
    for i, item in enumerate(value):
        key = f"knobs[{i}]"
        if not isinstance(item, dict):
            check.fail(
                key,
                f"expected a mapping, got {kind(item)}",
                "write `- name: ..., strategy: ..., values: [...]`",
            )
        check.known_keys(item, KNOB_KEYS, prefix=f"{key}.")
        for required in ("name", "strategy", "values"):
            if item.get(required) is None:
                check.fail(f"{key}.{required}", "missing", f"add `{required}:` to this knob")
        knob_name = check.text(item["name"], f"{key}.name", identifier=True)
        if any(k.name == knob_name for k in knobs):
            check.fail(
                f"{key}.name",
                f"knob {knob_name!r} is declared twice",
                "keep one declaration per knob",
            )
        strategy = strategy_ids(
            check,
            (check.text(item["strategy"], f"{key}.strategy"),),
            f"{key}.strategy",
            indexed=False,
        )[0]
        values = _knob_values(check, item["values"], f"{key}.values")
        divides = multiple_of = None
        if item.get("divides") is not None:
            divides = check.integer(item["divides"], f"{key}.divides", minimum=1, example=1024)
            bad = [v for v in values if v == 0 or divides % v]
            if bad:
                check.fail(
                    f"{key}.values",
                    f"{', '.join(map(str, bad))} do(es) not divide {divides} (declared by divides)",
                    f"keep only divisors of {divides}, or correct `divides`",
                )
        if item.get("multiple_of") is not None:
            multiple_of = check.integer(
                item["multiple_of"], f"{key}.multiple_of", minimum=1, example=16
            )
            bad = [v for v in values if v % multiple_of]
            if bad:
                check.fail(
                    f"{key}.values",
                    f"{', '.join(map(str, bad))} is/are not multiples of {multiple_of} "
                    "(declared by multiple_of)",
                    f"keep only multiples of {multiple_of}, or correct `multiple_of`",
                )
        knobs.append(Knob(knob_name, strategy, values, divides, multiple_of))
    return tuple(knobs)


def _knob_values(check: Checker, value: object, key: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        check.fail(
            key,
            f"expected a list of whole numbers, got {kind(value)}",
            "write e.g. `values: [32, 64, 128]`",
        )
    if not value:
        check.fail(
            key, "the list is empty", "list at least one value, e.g. `values: [32, 64, 128]`"
        )
    if all(isinstance(v, bool) for v in value):
        if len(set(value)) != len(value):
            check.fail(key, "a value appears twice", "write `values: [false, true]`")
        return tuple(value)
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int):
            check.fail(
                f"{key}[{i}]",
                f"expected a whole number, got {kind(v)}",
                "knob values are integers (or all true/false for a switch)",
            )
        if v < 0:
            check.fail(f"{key}[{i}]", f"negative value {v}", "knob values must be >= 0")
    if list(value) != sorted(set(value)):
        # The planner steps to neighbours in this order, so it must be a sorted space.
        check.fail(
            key,
            "values must be strictly increasing (no repeats)",
            f"write `values: {sorted(set(value))}`",
        )
    return tuple(value)


@dataclass(frozen=True)
class Tolerances:
    """One tolerance for every dtype, or a mapping per dtype over `default`."""

    default: tuple[tuple[str, float], ...]

    def read(self, check: Checker, value: object, key: str) -> dict[str, float]:
        return _dtype_tolerances(check, value, key, dict(self.default))


def _dtype_tolerances(
    check: Checker, value: object, key: str, default: dict[str, float]
) -> dict[str, float]:
    if isinstance(value, dict):
        out = dict(default)
        for dtype, tol in value.items():
            if dtype not in DTYPES:
                close = difflib.get_close_matches(str(dtype), DTYPES, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'? " if close else ""
                check.fail(
                    f"{key}.{dtype}", "unknown dtype", f"{hint}use one of: {', '.join(DTYPES)}"
                )
            out[dtype] = check.number(tol, f"{key}.{dtype}", minimum=0, example="1e-2")
        return out
    # One number applies to every dtype.
    tol = check.number(
        value,
        key,
        minimum=0,
        example="1e-2",
        fix=f"write one number, or a mapping per dtype like `{leaf(key)}: {{float16: 1e-2, float32: 1e-4}}`",
    )
    return {dtype: tol for dtype in default}


@dataclass(frozen=True)
class Mebibytes:
    """A memory or file-size cap in MiB: 0 for no cap, else enough for a Python process."""

    example: int

    def read(self, check: Checker, value: object, key: str) -> int:
        size = check.integer(value, key, minimum=0, example=self.example)
        if 0 < size < 64:
            check.fail(
                key,
                f"{size} MiB is too small for a Python process",
                "use at least 64, or 0 for no cap",
            )
        return size


def _accuracy(check: Checker, values: dict) -> AccuracySettings:
    if values.get("repeats", 0) > 20:
        check.fail(
            "accuracy.repeats",
            f"at most 20 extra L0 runs, got {values['repeats']}",
            "use 0 to 20",
        )
    return replace(_BASE_ACCURACY, **values)


def _latency(check: Checker, values: dict) -> LatencySettings:
    from bot.measure.backends.registry import REGISTRY  # read at check time, as above

    backend = REGISTRY.get(values.get("backend", ""))
    for need, problem, fix in backend.requires if backend else ():
        if not values.get(need):
            check.fail(f"latency.{need}", problem, fix)
    return LatencySettings(**values)


_BASE_ACCURACY = AccuracySettings()

ACCURACY = Section(
    (
        Field("mode", Text(ACCURACY_MODES)),
        Field("level", Text(LEVELS)),
        Field("timeout_s", Number(above=0, example="120")),
        Field("rtol", Tolerances(tuple(_BASE_ACCURACY.rtol.items()))),
        Field("atol", Tolerances(tuple(_BASE_ACCURACY.atol.items()))),
        Field("min_cosine", Number(above=0, at_most=1, example="0.999")),
        Field("repeats", Integer(minimum=0, example=3)),
    )
)

LIMITS = Section(
    (
        Field("memory_mb", Mebibytes(example=16384)),
        Field("file_size_mb", Mebibytes(example=4096)),
        Field("cpu_s", Number(minimum=0, example="600")),
        Field("filesystem", Text(FILESYSTEM_MODES)),
    ),
    keys=("memory_mb", "cpu_s", "file_size_mb", "filesystem"),
)

LATENCY = Section(
    (
        Field("backend", LatencyBackend()),
        Field("warmup", Integer(minimum=0, example=5)),
        Field("repeats", Integer(minimum=1, example=30, maximum=MAX_REPEATS)),
        Field("timeout_s", Number(above=0, example="300")),
        Field("kernel_name", Text()),
        Field("command", Argv()),
    )
)

OP = Section(
    (
        Field("kernel_kind", Text(KERNEL_KINDS)),
        Field("entry", Text(identifier=True)),
        Field("inputs", Text(identifier=True)),
        Field("reference", Text(identifier=True)),
        Field("knobs", Knobs()),
        Field("shapes", Shapes()),
        Field("strategies", Strategies()),
        Field("accuracy", Nested(ACCURACY, _accuracy), null_is_absent=False),
        Field("latency", Nested(LATENCY, _latency), null_is_absent=False),
        Field(
            "limits", Nested(LIMITS, lambda _, values: KernelLimits(**values)), null_is_absent=False
        ),
        *RUN_LIMIT_FIELDS,
        Field("proposer", Argv(), null_is_absent=False),
    ),
    keys=(
        "kernel_kind",
        "entry",
        "inputs",
        "reference",
        "knobs",
        "shapes",
        "strategies",
        "accuracy",
        "latency",
        "limits",
        "target_us",
        "max_iters",
        "patience",
        "noise_floor",
        "proposer",
    ),
)


def op_from_data(check: Checker, data: dict, project: str, name: str, relative: Path) -> OpConfig:
    """The OpConfig of a parsed tune.yaml; `check` names the file in errors."""
    return OpConfig(project=project, name=name, dir=relative, **OP.read(check, data))
