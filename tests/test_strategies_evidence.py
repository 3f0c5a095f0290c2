"""Evidence: per-repository tallies that reorder the planner, stored deterministically."""

import json

import pytest

from bot.errors import ConfigError
from bot.strategies.evidence import EVIDENCE_PATH, Evidence, Tally


def test_no_evidence_means_weight_one():
    for text in (None, "", "  \n"):
        assert Evidence.load(text).weight("block_size", "vector") == 1.0


def test_wins_raise_and_losses_lower_the_weight():
    e = Evidence()
    for _ in range(4):
        e.record("block_size", "vector", 0.2, True)
        e.record("multi_buffer", "vector", -0.01, False)
    assert e.weight("block_size", "vector") > 1.0 > e.weight("multi_buffer", "vector")
    assert e.weight("block_size", "cube") == 1.0  # per kernel kind
    assert e.weight("multi_buffer", "vector") >= 0.25 and e.weight("block_size", "vector") <= 2.0


def test_bigger_gains_weigh_more_at_equal_win_rate():
    small, big = Evidence(), Evidence()
    for _ in range(3):
        small.record("s", "vector", 0.04, True)
        big.record("s", "vector", 0.30, True)
    assert big.weight("s", "vector") > small.weight("s", "vector")


def test_round_trip_is_deterministic_and_order_independent():
    a, b = Evidence(), Evidence()
    a.record("pipeline_depth", "cube", 0.1, True)
    a.record("block_size", "vector", 0.123456789, True)
    b.record("block_size", "vector", 0.123456789, True)
    b.record("pipeline_depth", "cube", 0.1, True)
    assert a.dumps() == b.dumps() and a.dumps().endswith("\n")
    again = Evidence.load(a.dumps())
    assert again.dumps() == a.dumps()
    assert again.weight("block_size", "vector") == a.weight("block_size", "vector")
    data = json.loads(a.dumps())
    assert data["strategies"]["block_size"]["vector"] == {
        "tries": 1,
        "wins": 1,
        "gain_sum": 0.123457,
    }


def test_losses_do_not_add_gain():
    e = Evidence()
    e.record("block_size", "mix", 0.5, False)
    assert e.tally("block_size", "mix").gain_sum == 0.0 and e.tally("block_size", "mix").tries == 1


@pytest.mark.parametrize(
    "text, key",
    [
        ("{not json", "(file)"),
        ('{"strategies": []}', "strategies"),
        (
            '{"strategies": {"block_size": {"vector": {"tries": "x"}}}}',
            "strategies.block_size.vector",
        ),
        (
            '{"strategies": {"block_size": {"vector": {"tries": 1, "wins": 3}}}}',
            "strategies.block_size.vector",
        ),
    ],
)
def test_malformed_file_is_a_clear_config_error(text, key):
    with pytest.raises(ConfigError) as err:
        Evidence.load(text)
    assert err.value.file == EVIDENCE_PATH and err.value.key == key and err.value.exit_code == 2
    assert "Fix:" in str(err.value)


def test_per_op_files_sum_for_planning_and_each_op_writes_only_its_own():
    from bot.strategies.evidence import op_evidence_path

    a, b = Evidence(), Evidence()
    a.record("block_size", "vector", 0.2, True)
    b.record("block_size", "vector", 0.0, False)
    b.record("pipeline_depth", "cube", 0.1, True)
    paths = [op_evidence_path("demo", "rms_norm"), op_evidence_path("demo", "matmul")]
    assert paths == [".tunebot/evidence/demo/rms_norm.json", ".tunebot/evidence/demo/matmul.json"]
    total = Evidence.combined({paths[0]: a.dumps(), paths[1]: b.dumps(), EVIDENCE_PATH: None})
    assert total.tally("block_size", "vector") == Tally(2, 1, 0.2)
    assert total.tally("pipeline_depth", "cube") == Tally(1, 1, 0.1)
    with pytest.raises(ConfigError) as err:
        Evidence.combined({paths[1]: "{not json"})
    assert err.value.file == paths[1], "a broken file is named"
