"""The records of a run: typed, versioned, one JSON object per line of results.jsonl.

Each kind is a frozen dataclass with `to_json()` / `from_json()`. Every record written carries
`schema_version` (SCHEMA_VERSION). Records written before the field existed read as version 1,
which has the same fields: they replay unchanged. Only the fields the replay needs are required;
the rest default, as the replay has always tolerated records without them. A record of a newer version than this code
knows is refused with the fix (upgrade tunebot). Fields this code does not know (written by a
newer minor change) are kept in `extra` and written back unchanged.

Measurement payloads (accuracy, latency, decision, environment) stay the plain dicts of their
`bot.measure.types` dataclasses (`dataclasses.asdict`), so docs/records.md's line schema is
the same as before; `latency_result` turns one back into a LatencyResult.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from bot.measure.types import LatencyResult
from bot.record.errors import RecordFormatError

SCHEMA_VERSION = 2
LEGACY_VERSION = 1  # records without a schema_version: written before the field existed

# Record kinds, in the order a run writes them.
START, BASELINE, ITERATION, REJECTED, BASELINE_END, STOP, DELIVERY, PROPOSAL = (
    "start",
    "baseline",
    "iteration",
    "rejected",
    "baseline_end",
    "stop",
    "delivery",
    "proposal",
)

R = TypeVar("R", bound="Record")
# Field metadata: an empty value is not written, so records that never had the field read back
# byte for byte as they were written.
OMIT_EMPTY = "omit_empty"


def iteration_key(n: int) -> str:
    return f"iter:{n}"


@dataclass(frozen=True, kw_only=True)
class Record:
    """What every record has: a unique key (no measurement is recorded twice) and a time."""

    KIND: ClassVar[str] = ""
    key: str
    time: str = ""  # UTC, ISO 8601
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and not (f.metadata.get(OMIT_EMPTY) and not value):
                data[f.name] = value
        data["kind"] = self.KIND
        data["schema_version"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_json(cls: type[R], data: dict[str, Any], where: str = "results.jsonl") -> R:
        version = data.get("schema_version", LEGACY_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RecordFormatError(
                where,
                None,
                f"record '{data.get('key')}' has schema_version {version!r}; this tunebot reads "
                f"versions up to {SCHEMA_VERSION}",
                "upgrade tunebot, or start over with --restart",
            )
        known, required = _fields(cls)
        missing = [name for name in required if name not in data]
        if missing:
            raise RecordFormatError(
                where,
                None,
                f"{cls.KIND} record '{data.get('key')}' lacks {', '.join(missing)}",
                "restore the file from the delivery branch's copy, or start over with --restart",
            )
        extra = {k: v for k, v in data.items() if k not in known and k not in _ENVELOPE}
        return cls(**{k: v for k, v in data.items() if k in known}, extra=extra)


_ENVELOPE = frozenset({"kind", "schema_version"})


_FIELDS: dict[type, tuple[frozenset[str], tuple[str, ...]]] = {}


def _fields(cls: type[Record]) -> tuple[frozenset[str], tuple[str, ...]]:
    """(every field a record of `cls` stores, those without a default), once per class."""
    if cls not in _FIELDS:
        fields = [f for f in dataclasses.fields(cls) if f.name != "extra"]
        required = tuple(
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        _FIELDS[cls] = frozenset(f.name for f in fields), required
    return _FIELDS[cls]


def latency_result(data: dict[str, Any]) -> LatencyResult:
    """A recorded latency dict as the LatencyResult it was written from (unknown keys dropped)."""
    known = set(LatencyResult.__dataclass_fields__)
    return LatencyResult(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, kw_only=True)
class Start(Record):
    KIND: ClassVar[str] = START
    key: str = START
    op: str
    base_sha: str
    base_branch: str
    settings: dict[str, Any]  # bot.config.RunSettings as a dict: a resumed run keeps them
    requester: str | None = None


@dataclass(frozen=True, kw_only=True)
class Baseline(Record):
    KIND: ClassVar[str] = BASELINE
    key: str = BASELINE
    iteration: int = 0
    sha: str
    path: str  # repo-relative path of the source measured
    accuracy: dict[str, Any] | None = None
    latency: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    # when the latency was timed side by side with the first candidate (the first pair of
    # its decision): that iteration's number and source hash; {} when timed alone
    paired_with: dict[str, Any] = field(default_factory=dict, metadata={OMIT_EMPTY: True})


@dataclass(frozen=True, kw_only=True)
class Iteration(Record):
    KIND: ClassVar[str] = ITERATION
    iteration: int
    parent: str  # the best-so-far commit the variant was built on
    parent_iteration: int | None = None
    branch: str
    sha: str  # the iteration's commit: recording it is the commit point
    path: str
    change: dict[str, Any]  # bot.strategies.base.Change as a dict
    source_hash: str
    parent_hash: str
    diff: str = ""
    accuracy: dict[str, Any] | None = None
    latency: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    verdict: str
    reason: str = ""  # one line; records written before the field get it from iteration_reason
    environment: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Rejected(Record):
    """A proposal refused before evaluation: kept in the history, never an iteration."""

    KIND: ClassVar[str] = REJECTED
    attempt: dict[str, Any]
    reason: str


@dataclass(frozen=True, kw_only=True)
class BaselineEnd(Record):
    KIND: ClassVar[str] = BASELINE_END
    key: str = BASELINE_END
    sha: str
    latency: dict[str, Any] | None = None
    drift_pct: float | None = None


@dataclass(frozen=True, kw_only=True)
class Stop(Record):
    KIND: ClassVar[str] = STOP
    key: str = STOP
    reason: str  # the name of a registered stop rule (bot.run.stops)
    iterations: int = 0
    best_iteration: int | None = None
    best_sha: str | None = None
    # What the planner never tried, each with its reason (bot.strategies.explain); [] before v2.
    not_planned: list[str] = field(default_factory=list, metadata={OMIT_EMPTY: True})


@dataclass(frozen=True, kw_only=True)
class Delivery(Record):
    KIND: ClassVar[str] = DELIVERY
    key: str = DELIVERY
    branch: str
    sha: str
    report: str


@dataclass(frozen=True, kw_only=True)
class ProposalRecord(Record):
    KIND: ClassVar[str] = PROPOSAL
    id: str | int
    url: str | None = None


KINDS: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (Start, Baseline, Iteration, Rejected, BaselineEnd, Stop, Delivery, ProposalRecord)
}


def parse(
    data: dict[str, Any], where: str = "results.jsonl", kinds: dict[str, type[Record]] = KINDS
) -> Record | None:
    """The typed record of one line; None for kinds not in `kinds` (an op run's fold skips a
    model run's records and the other way round: bot/model/run_records.py has their kinds)."""
    cls = kinds.get(str(data.get("kind")))
    return cls.from_json(data, where) if cls is not None else None
