"""The pieces every runner shares: loading the entry and moving inputs to a device."""

from __future__ import annotations

import argparse
import json

import pytest

from bot.measure.runners.common import EXIT_BAD_OP, load_entry, to_device


def _args(tmp_path, source_text: str, entry: str = "kernel") -> argparse.Namespace:
    source = tmp_path / "op.py"
    source.write_text(source_text)
    return argparse.Namespace(
        source=source, entry=entry, inputs="get_inputs", seed=3, result=tmp_path / "result.json"
    )


def test_load_entry_returns_the_entry_and_seeded_inputs(tmp_path):
    args = _args(
        tmp_path,
        "def get_inputs(seed=0):\n    return [seed, seed + 1]\n\n"
        "def kernel(a, b):\n    return a + b\n",
    )
    fn, inputs = load_entry(args, "the timed entry")
    assert inputs == (3, 4) and fn(*inputs) == 7


def test_load_entry_reports_a_broken_contract_and_exits(tmp_path):
    args = _args(tmp_path, "def get_inputs(seed=0):\n    return (1,)\n", entry="missing")
    with pytest.raises(SystemExit) as stop:
        load_entry(args, "the timed entry")
    assert stop.value.code == EXIT_BAD_OP
    assert "missing" in json.loads(args.result.read_text())["error"]


def test_to_device_moves_nested_tensors_and_keeps_other_values():
    torch = pytest.importorskip("torch")
    value = (torch.ones(2), [torch.zeros(1), 5], "x")
    moved = to_device(value, torch, "cpu")
    assert isinstance(moved, tuple) and isinstance(moved[1], list)
    assert moved[1][1] == 5 and moved[2] == "x"
    assert moved[0].device.type == "cpu" and torch.equal(moved[0], value[0])
