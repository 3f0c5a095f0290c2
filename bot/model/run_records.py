"""The records of a model run: typed and versioned like an op run's (bot/run/records.py, same
`Record` base, same `schema_version`), with kinds prefixed `model-` so that the two kinds'
folds, which share the runs/ folder layout, never take each other's records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bot.run.records import Record

START, BASELINE, ITERATION, BASELINE_END, STOP, DELIVERY, PROPOSAL = (
    "model-start",
    "model-baseline",
    "model-iteration",
    "model-baseline-end",
    "model-stop",
    "model-delivery",
    "model-proposal",
)


@dataclass(frozen=True, kw_only=True)
class ModelStart(Record):
    KIND: ClassVar[str] = START
    key: str = "start"
    model: str  # project/model
    base_sha: str
    base_branch: str
    stop: dict[str, Any]  # bot.model.spec.StopSpec as a dict: a resumed run keeps it
    features_file: str = ""
    table_version: str = ""
    requester: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelBaseline(Record):
    KIND: ClassVar[str] = BASELINE
    key: str = "baseline"
    iteration: int = 0
    sha: str
    settings: dict[str, Any]  # the settings file at the base
    benchmark: dict[str, Any]  # bot.model.commands.Benchmark.to_dict()
    latency: dict[str, Any]
    analysis: dict[str, Any] | None = None
    reference: dict[str, str] | None = None  # sha256 of every reference output file
    stale: list[str] | None = None


@dataclass(frozen=True, kw_only=True)
class ModelIteration(Record):
    KIND: ClassVar[str] = ITERATION
    iteration: int
    parent: str
    parent_iteration: int | None = None
    branch: str
    sha: str  # the iteration's commit: recording it is the commit point
    setting: dict[str, Any]  # bot.model.rank.Candidate.to_dict(): key, old, new, row, citation
    benchmark: dict[str, Any] | None = None
    latency: dict[str, Any] | None = None
    quality: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    analysis: dict[str, Any] | None = None
    analysis_delta: dict[str, Any] | None = None
    stale: str | None = None
    note: str = ""
    verdict: str


@dataclass(frozen=True, kw_only=True)
class ModelBaselineEnd(Record):
    KIND: ClassVar[str] = BASELINE_END
    key: str = "baseline_end"
    sha: str
    latency: dict[str, Any] | None = None
    error: str | None = None
    drift_pct: float | None = None


@dataclass(frozen=True, kw_only=True)
class ModelStop(Record):
    KIND: ClassVar[str] = STOP
    key: str = "stop"
    reason: str  # bot.model.stops
    evidence: str = ""
    iterations: int = 0
    best_iteration: int | None = None
    best_sha: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelDelivery(Record):
    KIND: ClassVar[str] = DELIVERY
    key: str = "delivery"
    branch: str
    sha: str
    report: str


@dataclass(frozen=True, kw_only=True)
class ModelProposal(Record):
    KIND: ClassVar[str] = PROPOSAL
    id: str | int
    url: str | None = None


KINDS: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (
        ModelStart,
        ModelBaseline,
        ModelIteration,
        ModelBaselineEnd,
        ModelStop,
        ModelDelivery,
        ModelProposal,
    )
}
