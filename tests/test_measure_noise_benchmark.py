"""benchmarks/noise.py stays runnable: a tiny run writes the table and the JSON it documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_noise_benchmark_run(tmp_path):
    out = tmp_path / "noise.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "noise.py"), "--aa", "2", "--sens", "1",
                           "--repeats", "10", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "A/A false improvements" in proc.stdout
    result = json.loads(out.read_text())
    assert set(result["rules"]) == {"naive", "noise-aware"}
    assert len(result["records"]) == 4
    # a run where every measurement errored says nothing: at least one decision must have been made
    decided = [r for r in result["records"] if "error" not in r]
    assert decided, result["records"]
    assert result["errors"] == 4 - len(decided)
    for r in decided:
        assert r["a_us"] > 0 and r["b_us"] > 0 and isinstance(r["aware_better"], bool)
    for rule in result["rules"].values():
        assert rule["aa"]["n"] + rule["fast5"]["n"] + rule["fast10"]["n"] == len(decided)
        assert rule["aa"]["n"] + result["errors"] >= 2 and rule["fast10"]["n"] + result["errors"] >= 1
        for kind in ("aa", "fast5", "fast10"):
            assert rule[kind]["rate"] is None or 0.0 <= rule[kind]["rate"] <= 1.0
    assert result["environment"]["backend"] == "cpu"
