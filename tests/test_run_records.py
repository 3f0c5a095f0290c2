"""Typed, versioned run records: what today's code writes reads back the same, and records
written before `schema_version` existed (a sample made by the previous code) still replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.model import run_records as mr
from bot.model import state as ms
from bot.record.errors import RecordFormatError
from bot.run import records as rec
from bot.run import state as rs
from bot.run.log import ResultsLog

DATA = Path(__file__).parent / "data" / "records"


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def test_old_op_records_without_a_version_replay_to_the_run_they_describe():
    old = _lines("op_results_v1.jsonl")
    assert all("schema_version" not in r for r in old)  # really the old format
    state = rs.replay(old)
    # expected values read off the demo's terminal output when the sample was made
    assert state.start is not None and state.start.op == "demo/rms_norm"
    assert state.start.settings["max_iters"] == 3
    assert state.baseline is not None and state.baseline_us == pytest.approx(5494.346)
    assert [it.verdict for it in state.iterations] == ["better", "not_better", "not_better"]
    assert state.best_iteration == 1
    # the improvement the report printed: +48.6 % (the one-process ratio chained onto the baseline)
    assert rs.gain_pct(state.baseline_us, state.best_us) == pytest.approx(48.6, abs=0.05)
    assert state.stop is not None and state.stop.reason == "迭代上限"
    assert state.drift_pct == pytest.approx((5438.687 - 5494.346) / 5494.346 * 100, abs=1e-3)
    assert state.delivery is not None and state.delivery.branch == "tunebot/rms_norm/best"
    assert state.proposal is not None and str(state.proposal.id) == "1"
    # iters 2 and 3 both moved BLOCK_ROWS: one thing tried since the win (patience_count)
    assert state.next_iteration == 4 and state.no_gain_streak == 1


def test_old_records_read_through_the_log_and_fold_like_a_replay(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes((DATA / "op_results_v1.jsonl").read_bytes())
    fold = rs.Fold(ResultsLog(path))
    assert fold().best_iteration == rs.replay(_lines("op_results_v1.jsonl")).best_iteration == 1


def test_every_old_record_round_trips_through_its_type_with_only_the_version_added():
    for data in _lines("op_results_v1.jsonl"):
        typed = rec.parse(data)
        assert typed is not None and data["kind"] == typed.KIND
        again = typed.to_json()
        assert again.pop("schema_version") == rec.SCHEMA_VERSION
        assert again == data


def test_old_model_records_still_replay_and_an_op_replay_skips_them():
    old = _lines("model_results_v1.jsonl")
    state = ms.replay(old)
    assert [it.verdict for it in state.iterations] == ["not_better", "not_better"]
    assert state.stop is not None and state.stop.reason == "迭代上限"
    assert state.baseline_ms == pytest.approx(345.3201, abs=1e-3)
    assert rs.replay(old).start is None  # model kinds are not an op's records


def test_every_old_model_record_round_trips_through_its_type():
    for data in _lines("model_results_v1.jsonl"):
        typed = rec.parse(data, kinds=mr.KINDS)
        assert typed is not None and data["kind"] == typed.KIND
        again = typed.to_json()
        assert again.pop("schema_version") == rec.SCHEMA_VERSION
        assert again == data


def test_a_record_of_a_newer_schema_is_refused_with_the_fix():
    data = {**_lines("op_results_v1.jsonl")[0], "schema_version": rec.SCHEMA_VERSION + 1}
    with pytest.raises(RecordFormatError, match="upgrade tunebot") as err:
        rs.replay([data])
    assert err.value.exit_code == 2


def test_a_record_missing_what_replay_needs_names_the_field():
    data = {k: v for k, v in _lines("op_results_v1.jsonl")[2].items() if k != "sha"}
    with pytest.raises(RecordFormatError, match="iteration record 'iter:1' lacks sha"):
        rs.replay([data])


def test_unknown_fields_are_kept_and_written_back():
    data = {**_lines("op_results_v1.jsonl")[2], "cost_s": 1.5}
    typed = rec.parse(data)
    assert isinstance(typed, rec.Iteration) and typed.extra == {"cost_s": 1.5}
    assert typed.to_json()["cost_s"] == 1.5


def test_new_records_carry_the_version_and_read_back_equal():
    stop = rec.Stop(
        reason="连续无提升", iterations=4, best_iteration=2, best_sha="a" * 40, time="t"
    )
    data = json.loads(json.dumps(stop.to_json()))
    assert data["schema_version"] == rec.SCHEMA_VERSION and data["kind"] == "stop"
    assert rec.parse(data) == stop
