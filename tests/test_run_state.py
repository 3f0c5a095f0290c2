"""The run state folded from results.jsonl: incrementally, equal to a full replay, restarted
when the log is replaced."""

from __future__ import annotations

import os

from bot.run import records
from bot.run import state as rs
from bot.run.log import ResultsLog


def iteration(
    n: int,
    verdict: str,
    knob: str = "BLOCK",
    old: int = 16,
    new: int = 32,
    detectable: float | None = 0.03,
    gain: float = 0.0,
) -> dict:
    return {
        "key": f"iter:{n}",
        "kind": records.ITERATION,
        "iteration": n,
        "parent": "p",
        "branch": f"b{n}",
        "sha": f"s{n}",
        "path": f"v{n}.py",
        "change": {
            "strategy": "block_size",
            "description": "d",
            "knob": knob,
            "old": old,
            "new": new,
        },
        "source_hash": f"h{n}",
        "parent_hash": "ph",
        "accuracy": {"status": "pass"},
        "latency": {"status": "ok", "backend": "cpu", "median_us": 100.0 - n},
        "decision": {"gain": gain, "detectable": detectable, "candidate_us": 99.0 - n},
        "verdict": verdict,
    }


BASELINE = {
    "key": "baseline",
    "kind": records.BASELINE,
    "sha": "base",
    "path": "op.py",
    "latency": {"status": "ok", "backend": "cpu", "median_us": 120.0},
}


def test_fold_applies_only_new_records_and_equals_a_full_replay(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    fold = rs.Fold(log)
    log.append(BASELINE)
    first = fold()
    assert first.best_sha == "base" and first.iterations == []
    log.append(iteration(1, "not_better", knob="A"))
    log.append(iteration(2, "better", knob="B", gain=0.1))
    log.append(iteration(3, "not_better", knob="C", detectable=0.2))
    state = fold()
    assert state is first  # the same live object, updated in place
    full = rs.replay(ResultsLog(log.path).read())
    assert [i.n for i in state.iterations] == [i.n for i in full.iterations] == [1, 2, 3]
    assert state.best_sha == full.best_sha == "s2" and state.best_us == full.best_us == 97.0
    assert state.no_gain_streak == full.no_gain_streak == 1
    assert (
        state.smallest_detectable == full.smallest_detectable == 0.03
    )  # median of 0.03, 0.03, 0.2


def test_fold_starts_over_when_the_log_is_replaced(tmp_path):
    path = tmp_path / "results.jsonl"
    log = ResultsLog(path)
    fold = rs.Fold(log)
    log.append(BASELINE)
    log.append(iteration(1, "better"))
    assert fold().best_sha == "s1"
    other = ResultsLog(tmp_path / "other.jsonl")
    other.append(BASELINE)
    os.replace(other.path, path)
    state = fold()
    assert state.best_sha == "base" and state.iterations == []


def test_noise_warning_only_above_the_level():
    state = rs.replay(
        [
            BASELINE,
            iteration(1, "not_better", detectable=0.22),
            iteration(2, "not_better", detectable=0.25),
        ]
    )
    assert rs.noise_warning(state, 0.10).startswith(
        "this runner is too noisy to see gains below 24 %"
    )
    assert rs.noise_warning(state, 0.30) is None
    assert rs.noise_warning(rs.replay([BASELINE]), 0.10) is None  # no decision yet: nothing to say


def test_a_win_timed_in_one_process_is_chained_onto_the_best_figure():
    win = iteration(1, "better", gain=0.2)
    win["decision"].update(
        {"best_us": 50.0, "candidate_us": 40.0, "details": {"first": {"in_one_process": True}}}
    )
    state = rs.replay([BASELINE, win])
    assert (
        state.best_us == 120.0 * 40.0 / 50.0
    )  # the baseline's 120 us, 20 % faster as measured side by side
    solo = iteration(
        1, "better", gain=0.2
    )  # a decision against the best's earlier result: its own median
    assert rs.replay([BASELINE, solo]).best_us == 98.0
