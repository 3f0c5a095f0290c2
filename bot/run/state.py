"""Rebuild a run's state from its results.jsonl records (pure functions).

results.jsonl is the single source of truth of a run: the run appends one typed
record (bot/run/records.py) per measurement and derives everything else (best-so-far, planner
history, patience counter) from the records, so a run killed at any point
resumes exactly where its last recorded line left it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from bot.measure.types import LatencyResult
from bot.record.fmt import gain_pct
from bot.run import records as rec_mod
from bot.run.records import latency_result
from bot.strategies.base import Attempt, Change, Verdict
from bot.strategies.space import FAILED_VERDICTS


@dataclass
class IterationView:
    """One recorded iteration, as the run and the renderers need it."""

    n: int
    strategy: str
    change: str
    verdict: str
    accuracy: str
    latency_us: float | None
    gain_pct: float | None  # vs the baseline, as the seed's log shows it
    sha: str
    branch: str
    parent: str
    path: str  # variant path relative to the repo root
    source_hash: str
    gain: float | None = None  # the decision's gain vs its parent (relative), for the evidence file
    detectable: float | None = None  # the smallest gain that decision could have called better
    reason: str = (
        ""  # one line: why this verdict (the decision's reason, or why it was not measured)
    )
    knob: str | None = None  # the change as data, when the strategy set one knob
    old: object = None
    new: object = None
    diff: str = ""  # unified diff of the variant against its parent
    decision: dict | None = None  # the recorded Decision (None when not measured)

    @property
    def gain_vs_best_pct(self) -> float | None:
        """Gain against the best-so-far it was compared with (the decision's), in percent."""
        return self.gain * 100.0 if self.gain is not None and self.decision else None


@dataclass
class RunState:
    start: rec_mod.Start | None = None
    baseline: rec_mod.Baseline | None = None
    iterations: list[IterationView] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    best_sha: str | None = None
    best_path: str | None = None  # repo-relative path of the best source
    best_iteration: int | None = None
    best_latency: LatencyResult | None = None
    no_gain_streak: int = 0  # honest attempts without gain since the last win (see patience_count)
    since_win: list[Attempt] = field(default_factory=list)  # iterations since the last win
    rejections: int = 0  # proposals refused before evaluation (not iterations)
    last_failure: str | None = None
    baseline_end: rec_mod.BaselineEnd | None = None
    stop: rec_mod.Stop | None = None
    delivery: rec_mod.Delivery | None = None
    proposal: rec_mod.ProposalRecord | None = None

    @property
    def baseline_us(self) -> float | None:
        return self.baseline_latency.median_us if self.baseline_latency else None

    @property
    def baseline_latency(self) -> LatencyResult | None:
        if self.baseline and self.baseline.latency:
            return latency_result(self.baseline.latency)
        return None

    @property
    def stopped(self) -> rec_mod.Stop:
        """The stop record, for steps that only run after it (delivery, report, proposal)."""
        if self.stop is None:
            raise ValueError("the run has no stop record yet")
        return self.stop

    @property
    def measured_baseline(self) -> rec_mod.Baseline:
        """The baseline record, for steps that only run after it."""
        if self.baseline is None:
            raise ValueError("the run has no baseline record yet")
        return self.baseline

    @property
    def best(self) -> tuple[str, str]:
        """(commit, path) of the best-so-far source; there is one once the baseline is recorded."""
        if self.best_sha is None or self.best_path is None:
            raise ValueError("the run has no baseline record yet")
        return self.best_sha, self.best_path

    @property
    def drift_pct(self) -> float | None:
        """The baseline re-measured at the end against the start, in percent."""
        return self.baseline_end.drift_pct if self.baseline_end else None

    @property
    def best_us(self) -> float | None:
        return self.best_latency.median_us if self.best_latency else None

    @property
    def next_iteration(self) -> int:
        return len(self.iterations) + 1

    @property
    def smallest_detectable(self) -> float | None:
        """The smallest gain this run could detect: the median over its decisions (relative)."""
        values = sorted(it.detectable for it in self.iterations if it.detectable is not None)
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def noise_warning(state: RunState, level: float) -> str | None:
    """The report's and status comment's warning when the run could not see gains below `level`."""
    detectable = state.smallest_detectable
    if detectable is None or detectable <= level:
        return None
    return (
        f"this runner is too noisy to see gains below {detectable * 100:.0f} % "
        f"(warning level {level * 100:.0f} %, `defaults.noise_warn`); quieten it or tune elsewhere"
    )


def _thing(attempt: Attempt) -> str:
    """What an attempt tried: the knob, or the strategy for changes that are not knob moves."""
    return attempt.change.knob or attempt.change.strategy


def patience_count(since_win: list[Attempt]) -> int:
    """How many honest attempts at different things found no gain since the last win.

    Attempts at the same knob (either direction, any distance) are one thing: following
    one knob along a plateau or across a valley does not use up the patience meant for
    trying other things.
    A backstop counts every two repeats of a thing as one more, so a run with a single
    knob still stops.
    A move that failed L0, timed out or errored is no attempt (the planner's rule): it
    measured nothing, so it says nothing about speed. A second backstop counts every three
    attempts of any kind as one more thing, so a runner on which every variant fails (a
    broken toolchain, a timeout too short) stops after nine failures, not at max_iters.
    """
    honest = [a for a in since_win if a.verdict not in FAILED_VERDICTS]
    things = {_thing(a) for a in honest}
    return max(len(things), len(honest) // 2, len(since_win) // 3)


def _jsonable(value: object) -> object:
    return (
        value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    )


def change_to_dict(change: Change) -> dict:
    return {
        "strategy": change.strategy,
        "description": change.description,
        "knob": change.knob,
        "old": _jsonable(change.old),
        "new": _jsonable(change.new),
    }


def attempt_to_dict(attempt: Attempt) -> dict:
    return {
        "change": change_to_dict(attempt.change),
        "source_hash": attempt.source_hash,
        "parent_hash": attempt.parent_hash,
        "verdict": attempt.verdict,
        "gain": attempt.gain,
    }


def attempt_from_dict(data: dict) -> Attempt:
    return Attempt(
        change=Change(**data["change"]),
        source_hash=data["source_hash"],
        parent_hash=data["parent_hash"],
        verdict=data["verdict"],
        gain=data.get("gain"),
    )


def iteration_reason(
    verdict: str,
    decision: dict[str, Any] | None,
    accuracy: dict[str, Any] | None,
    latency: dict[str, Any] | None,
) -> str:
    """One line saying why an iteration got its verdict (also for records written before `reason`)."""
    decision, accuracy, latency = decision or {}, accuracy or {}, latency or {}
    if verdict == "style":
        return "a rename with no effect on speed (the ops are aliases); never adopted"
    if decision.get("reason"):
        return str(decision["reason"])
    if verdict in ("fail_l0", "timeout", "error") and accuracy.get("status") != "pass":
        why = accuracy.get("reason") or accuracy.get("status") or verdict
        return f"L0 {accuracy.get('status', verdict)}: {why}"
    if latency and latency.get("status") != "ok":
        notes = "; ".join(latency.get("notes") or [])
        return f"latency {latency.get('status')}" + (f": {notes}" if notes else "")
    return verdict


def replay(records: list[dict[str, Any]]) -> RunState:
    """Fold the records of one run (as read from results.jsonl) into its current state."""
    state = RunState()
    for data in records:
        apply_json(state, data)
    return state


class RecordSource(Protocol):
    """Where a Fold reads records from (a bot.run.log.ResultsLog)."""

    def read(self) -> list[dict[str, Any]]: ...


class Fold:
    """The run's state kept up to date from a ResultsLog by applying only the records appended
    since the last call (the log itself parses only new bytes). The state returned is live:
    the next call updates it in place. Records that no longer extend what was folded (the log
    was replaced or cut back) start the fold over."""

    def __init__(self, log: RecordSource) -> None:
        self.log = log
        self.state = RunState()
        self._keys: list[str] = []

    def __call__(self) -> RunState:
        records = self.log.read()
        n = len(self._keys)
        if len(records) < n or (n and records[n - 1].get("key") != self._keys[-1]):
            self.state, self._keys, n = RunState(), [], 0
        for data in records[n:]:
            apply_json(self.state, data)
            self._keys.append(str(data.get("key")))
        return self.state


def apply_json(state: RunState, data: dict[str, Any]) -> None:
    """Fold one line of results.jsonl into `state` (kinds of other targets are skipped)."""
    record = rec_mod.parse(data)
    if record is not None:
        apply_record(state, record)


def apply_record(state: RunState, rec: rec_mod.Record) -> None:
    """Fold one typed record into `state`."""
    if isinstance(rec, rec_mod.Start):
        state.start = rec
    elif isinstance(rec, rec_mod.Baseline):
        state.baseline = rec
        state.best_sha = rec.sha
        state.best_path = rec.path
        state.best_latency = state.baseline_latency
    elif isinstance(rec, rec_mod.Iteration):
        _apply_iteration(state, rec)
    elif isinstance(rec, rec_mod.Rejected):
        state.rejections += 1
        state.attempts.append(attempt_from_dict(rec.attempt))
    elif isinstance(rec, rec_mod.BaselineEnd):
        state.baseline_end = rec
    elif isinstance(rec, rec_mod.Stop):
        state.stop = rec
    elif isinstance(rec, rec_mod.Delivery):
        state.delivery = rec
    elif isinstance(rec, rec_mod.ProposalRecord):
        state.proposal = rec


def _apply_iteration(state: RunState, rec: rec_mod.Iteration) -> None:
    change = rec.change
    latency = rec.latency or {}
    verdict = rec.verdict
    median = latency.get("median_us") if latency.get("status") == "ok" else None
    decision = rec.decision or {}
    state.iterations.append(
        IterationView(
            n=rec.iteration,
            strategy=change["strategy"],
            change=change["description"],
            verdict=verdict,
            accuracy=(rec.accuracy or {}).get("status", "error"),
            latency_us=median,
            gain_pct=gain_pct(state.baseline_us, median),
            sha=rec.sha,
            branch=rec.branch,
            parent=rec.parent,
            path=rec.path,
            source_hash=rec.source_hash,
            gain=decision.get("gain"),
            detectable=decision.get("detectable"),
            reason=rec.reason or iteration_reason(verdict, rec.decision, rec.accuracy, rec.latency),
            knob=change.get("knob"),
            old=change.get("old"),
            new=change.get("new"),
            diff=rec.diff or "",
            decision=rec.decision,
        )
    )
    attempt = Attempt(
        change=Change(
            strategy=change["strategy"],
            description=change["description"],
            knob=change.get("knob"),
            old=change.get("old"),
            new=change.get("new"),
        ),
        source_hash=rec.source_hash,
        parent_hash=rec.parent_hash,
        verdict=cast(Verdict, verdict),
        gain=decision.get("gain"),
    )
    state.attempts.append(attempt)
    if verdict == "better":
        state.best_sha, state.best_path = rec.sha, rec.path
        state.best_iteration = rec.iteration
        # The decision may have re-measured both sides; its candidate median is the fairer one.
        best = latency_result(latency)
        previous = state.best_us
        in_one_process = ((decision.get("details") or {}).get("first") or {}).get("in_one_process")
        if in_one_process and previous and decision.get("best_us") and decision.get("candidate_us"):
            # timed side by side with the best: the ratio is what was measured; chaining it onto the
            # best's figure keeps the run's figures on one scale (two processes differ by 5-10 %)
            best.median_us = previous * decision["candidate_us"] / decision["best_us"]
        elif decision.get("candidate_us"):
            best.median_us = decision["candidate_us"]
        state.best_latency = best
        state.no_gain_streak = 0
        state.since_win = []
        state.last_failure = None
    else:
        state.since_win.append(attempt)
        state.no_gain_streak = patience_count(state.since_win)
        if verdict in ("fail_l0", "timeout", "error"):
            tail = (rec.accuracy or {}).get("tail") or latency.get("tail") or ""
            state.last_failure = f"iter {rec.iteration} {verdict}: {tail[-500:]}"
