"""benchmarks/loaded_tune.py: its unseen ops are valid ops and its verdict follows the goal."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bot.config.discovery import list_ops, resolve_op
from bot.config.repo import load_repo_config

ROOT = Path(__file__).resolve().parents[1]


def _module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "tunebot_loaded_tune", ROOT / "benchmarks" / "loaded_tune.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _module()
UNSEEN = ["unseen/softmax", "unseen/conv1d", "unseen/layer_norm", "unseen/scan"]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return bench.make_template(tmp_path_factory.mktemp("t") / "repo", [*UNSEEN, "demo/rms_norm"])


def test_the_template_repository_holds_resolvable_ops_with_knobs(template):
    cfg = load_repo_config(template)
    assert set(UNSEEN) <= set(list_ops(template, cfg))
    for name in UNSEEN:
        op = resolve_op(template, cfg, name)
        assert op.latency.backend == "cpu" and len(op.knobs) >= 1
        assert op.target_us is not None


@pytest.mark.parametrize("name", UNSEEN)
def test_unseen_ops_pass_their_own_l0_and_reject_a_wrong_kernel(template, name):
    folder = template / "examples" / name
    script = folder / f"{name.split('/')[1]}.py"
    ok = subprocess.run(
        [sys.executable, script.name, "--level", "L0"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    broken = folder / "broken.py"
    broken.write_text(
        script.read_text()
        .replace("torch.exp(block - row_max)", "torch.exp(block)")
        .replace("acc += wb", "acc -= wb")
        .replace("* w + b", "* w - b")
        .replace("+ carry", "- carry")
    )
    bad = subprocess.run(
        [sys.executable, broken.name, "--level", "L0"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    broken.unlink()
    assert bad.returncode == 1 and "L0 FAIL" in bad.stderr


def run(op: str, condition: str, gain: float) -> dict:
    return {
        "op": op,
        "condition": condition,
        "reference_gain": gain,
        "claimed_gain_pct": 100 * gain,
        "detectable_pct": 3.0,
        "iterations": 5,
        "noise_warning": False,
    }


def test_the_goal_is_eighty_percent_of_the_quiet_gain_on_the_medians():
    runs = [run("a", "quiet", g) for g in (0.40, 0.50, 0.45)]
    runs += [run("a", "busy1", g) for g in (0.10, 0.37, 0.38)]  # median 0.37 / 0.45 = 0.82
    runs += [run("b", "quiet", 0.30), run("b", "busy1", 0.20)]  # 0.67
    runs += [run("c", "quiet", 0.0), run("c", "busy1", 0.06)]  # no quiet gain: not judged
    table = bench.summarize(runs, ["a", "b", "c"])
    assert table["a"]["ratio"] == pytest.approx(0.37 / 0.45) and table["a"]["goal_met"]
    assert not table["b"]["goal_met"]
    assert table["c"]["ratio"] is None and table["c"]["goal_met"] is None
    assert table["a"]["quiet"]["detectable_median_pct"] == 3.0


def test_the_alone_gain_is_summarized_beside_the_paired_one(tmp_path):
    runs = [dict(run("a", "quiet", g), alone_gain=x) for g, x in ((0.4, 0.35), (0.5, 0.2))]
    runs += [dict(run("a", "busy1", 0.3), alone_gain=None)]  # an older record without it
    table = bench.summarize(runs, ["a"])
    assert table["a"]["quiet"]["alone_gain_median"] == pytest.approx(0.275)
    assert table["a"]["busy1"]["alone_gain_median"] is None
    # a delivered variant identical to the baseline is not measured at all
    text = (bench.op_dir("unseen/softmax") / "softmax.py").read_text()
    same = bench.reference_gain("unseen/softmax", text, 3, tmp_path)
    assert same["identical"] and same["alone_gain"] == 0.0 and same["alone_rounds"] == []
