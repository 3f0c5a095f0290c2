"""benchmarks/noise.py stays runnable: a tiny run writes the table and the JSON it documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("aa", "fast5", "fast10", "slow5", "slow10")


def test_tiny_noise_benchmark_run(tmp_path):
    out = tmp_path / "noise.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "noise.py"),
            "--aa",
            "2",
            "--sens",
            "1",
            "--slow",
            "1",
            "--repeats",
            "10",
            "--run-length",
            "3",
            "--conditions",
            "quiet",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "condition quiet" in proc.stdout and "goals:" in proc.stdout
    result = json.loads(out.read_text())
    condition = result["conditions"]["quiet"]
    assert set(condition["rules"]) == {"loop", "naive"}
    assert len(result["records"]) == 6
    # a run where every measurement errored says nothing: at least one decision must have been made
    decided = [r for r in result["records"] if "error" not in r]
    assert decided, result["records"]
    assert condition["errors"] == 6 - len(decided)
    for r in decided:
        assert r["best_us"] > 0 and r["cand_us"] > 0 and isinstance(r["better"], bool)
        assert r["measurements"] >= 1 and r["detectable"] >= 0.03  # every decision counts its cost
    for rule in condition["rules"].values():
        assert sum(rule[k]["n"] for k in KINDS) == len(decided)
        for kind in KINDS:
            r = rule[kind]
            assert r["n"] == 0 or (
                0.0 <= r["rate"] <= 1.0 and r["ci95"][0] <= r["rate"] <= r["ci95"][1] <= 1.0
            )
    assert result["environment"]["backend"] == "cpu"


def test_clopper_pearson_bounds_match_the_published_rule_of_three():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from noise import interval

    zero = interval(0, 300)
    assert (
        abs(zero["upper95"] - (1 - 0.05 ** (1 / 300))) < 1e-6
    )  # 0.99 %: why 300 decisions are needed
    assert zero["ci95"][0] == 0.0 and abs(zero["ci95"][1] - (1 - 0.025 ** (1 / 300))) < 1e-6
    three = interval(3, 200)
    assert (
        0.003 < three["ci95"][0] < 0.0032 and 0.043 < three["ci95"][1] < 0.0433
    )  # the 0.5-4.3 % rounded
