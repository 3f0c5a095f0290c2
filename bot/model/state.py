"""Fold a model run's results.jsonl records into its state (pure; the records are the truth).

The records are typed in bot/model/run_records.py; their kinds carry a `model-` prefix so that
the op run's fold, which shares the runs/ folder layout, never mistakes them for its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.measure.types import LatencyResult
from bot.model import run_records as mr
from bot.record.fmt import gain_pct
from bot.run.records import latency_result, parse

MEASURED = ("better", "not_better")  # verdicts with a decision (quality passed, same workload)


@dataclass
class IterationView:
    n: int
    key: str
    old: object
    new: object
    row: str
    citation: str
    verdict: str
    latency_ms: float | None
    gain_pct: float | None  # vs the baseline
    step_gain: float | None  # the decision's relative gain vs the parent (re-measured when close)
    cosine: float | None
    sha: str
    branch: str
    parent: str
    reasons: list[str]
    stale: str | None
    analysis: dict | None
    analysis_delta: dict | None
    note: str

    @property
    def change(self) -> str:
        from bot.model.rank import _show

        return f"{self.key}: {_show(self.old)} -> {_show(self.new)}"


@dataclass
class ModelState:
    start: mr.ModelStart | None = None
    baseline: mr.ModelBaseline | None = None
    iterations: list[IterationView] = field(default_factory=list)
    # the baseline re-measured when the run stopped (drift)
    baseline_end: mr.ModelBaselineEnd | None = None
    stop: mr.ModelStop | None = None
    delivery: mr.ModelDelivery | None = None
    proposal: mr.ModelProposal | None = None
    best_sha: str | None = None
    best_iteration: int | None = None
    best_latency: LatencyResult | None = None
    best_settings: dict = field(default_factory=dict)
    best_analysis: dict | None = None  # layers of the best-so-far's analysis

    @property
    def measured_baseline(self) -> mr.ModelBaseline:
        """The baseline record, for steps that only run after it."""
        if self.baseline is None:
            raise ValueError("the model run has no baseline record yet")
        return self.baseline

    @property
    def stopped(self) -> mr.ModelStop:
        if self.stop is None:
            raise ValueError("the model run has no stop record yet")
        return self.stop

    @property
    def delivered(self) -> mr.ModelDelivery:
        if self.delivery is None:
            raise ValueError("the model run has no delivery record yet")
        return self.delivery

    @property
    def best_commit(self) -> str:
        if self.best_sha is None:
            raise ValueError("the model run has no baseline record yet")
        return self.best_sha

    @property
    def baseline_ms(self) -> float | None:
        return _ms(self.baseline.latency) if self.baseline else None

    @property
    def best_ms(self) -> float | None:
        return (
            self.best_latency.median_us / 1000.0
            if self.best_latency and self.best_latency.median_us
            else None
        )

    @property
    def drift_pct(self) -> float | None:
        return self.baseline_end.drift_pct if self.baseline_end else None

    @property
    def next_iteration(self) -> int:
        return len(self.iterations) + 1

    def tried(self) -> dict[str, list[tuple[object, str]]]:
        out: dict[str, list[tuple[object, str]]] = {}
        for it in self.iterations:
            out.setdefault(it.key, []).append((it.new, it.verdict))
        return out

    @property
    def stale(self) -> list[str]:
        notes = list(self.baseline.stale or []) if self.baseline else []
        notes += [f"iter {it.n}: {it.stale}" for it in self.iterations if it.stale]
        return notes


def _ms(latency: dict | None) -> float | None:
    if not latency or latency.get("status") != "ok" or not latency.get("median_us"):
        return None
    return latency["median_us"] / 1000.0


def replay(records: list[dict[str, Any]]) -> ModelState:
    """Fold the lines of a model run's results.jsonl (an op run's kinds are skipped)."""
    state = ModelState()
    for data in records:
        rec = parse(data, kinds=mr.KINDS)
        if isinstance(rec, mr.ModelStart):
            state.start = rec
        elif isinstance(rec, mr.ModelBaseline):
            state.baseline = rec
            state.best_sha = rec.sha
            state.best_latency = latency_result(rec.latency)
            state.best_settings = dict(rec.settings)
            state.best_analysis = (rec.analysis or {}).get("layers")
        elif isinstance(rec, mr.ModelIteration):
            _apply(state, rec)
        elif isinstance(rec, mr.ModelBaselineEnd):
            state.baseline_end = rec
        elif isinstance(rec, mr.ModelStop):
            state.stop = rec
        elif isinstance(rec, mr.ModelDelivery):
            state.delivery = rec
        elif isinstance(rec, mr.ModelProposal):
            state.proposal = rec
    return state


def _apply(state: ModelState, rec: mr.ModelIteration) -> None:
    s = rec.setting
    median = _ms(rec.latency)
    decision = rec.decision or {}
    state.iterations.append(
        IterationView(
            n=rec.iteration,
            key=s["key"],
            old=s["old"],
            new=s["new"],
            row=s["row"],
            citation=s["citation"],
            verdict=rec.verdict,
            latency_ms=median,
            gain_pct=gain_pct(state.baseline_ms, median),
            step_gain=decision.get("gain"),
            cosine=(rec.quality or {}).get("cosine"),
            sha=rec.sha,
            branch=rec.branch,
            parent=rec.parent,
            reasons=list(s.get("reasons", [])),
            stale=rec.stale,
            analysis=(rec.analysis or {}).get("layers"),
            analysis_delta=rec.analysis_delta,
            note=rec.note or "",
        )
    )
    if rec.verdict == "better":
        state.best_sha, state.best_iteration = rec.sha, rec.iteration
        best = latency_result(rec.latency or {})
        if decision.get("candidate_us"):  # re-measured interleaved: the fairer median
            best.median_us = decision["candidate_us"]
        state.best_latency = best
        state.best_settings = {**state.best_settings, s["key"]: s["new"]}
        if rec.analysis:
            state.best_analysis = rec.analysis["layers"]
