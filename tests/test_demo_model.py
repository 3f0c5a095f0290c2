"""The demo model examples/demo/dit_tiny on the CPU: every setting changes the output, one fails the
quality gate, and its benchmark / analysis / quality commands print what the model loop reads.
Latency effects are measured in benchmarks/model_demo.py, never here."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.features import analysis as analysis_mod
from bot.model import commands as cmd
from bot.model import spec as spec_mod

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples/demo/dit_tiny"


@pytest.fixture(scope="module")
def pipeline():
    spec = importlib.util.spec_from_file_location("dit_tiny_pipeline", DEMO / "pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def baseline(pipeline):
    return pipeline.Pipeline(dict(pipeline.DEFAULTS))()


def cosine(a, b) -> float:
    import torch.nn.functional as F

    return F.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


@pytest.mark.parametrize(
    "setting, low, high",
    [
        # bounds written from DESIGN.md's intent before running: exact-math rewrites stay ~1,
        # int8 and the cache lose a little, a small attention window loses most
        ({"fused": True}, 0.999999, 1.0),
        ({"cfg_batch": True}, 0.999999, 1.0),
        ({"quantize_linear": True}, 0.995, 0.99999),
        ({"step_cache": 2}, 0.995, 0.99999),
        (
            {"attention_window": 32},
            0.9,
            0.995,
        ),  # fails the demo's gate (model.yaml min_cosine 0.995)
    ],
)
def test_each_setting_changes_the_output(pipeline, baseline, setting, low, high):
    z0 = baseline[0]
    z = pipeline.Pipeline({**pipeline.DEFAULTS, **setting})()[0]
    assert (z - z0).abs().max().item() > 0  # measurable: not bit-identical
    assert low <= cosine(z, z0) <= high


def test_the_same_settings_give_the_same_output(pipeline, baseline):
    z, _ = pipeline.Pipeline(dict(pipeline.DEFAULTS))()
    assert (z - baseline[0]).abs().max().item() == 0


def test_model_yaml_cites_rows_of_the_features_table():
    from bot.features import render

    spec = spec_mod.load(ROOT, Path("examples/demo/dit_tiny"))
    table = render.parse((ROOT / spec.features_file).read_text(encoding="utf-8"))
    spec_mod.check_rows(spec, {r.name for r in table.rows})
    settings = spec_mod.read_settings((DEMO / "settings.yaml").read_text(), "settings.yaml")
    assert {s.key for s in spec.settings} == set(settings)


def test_commands_print_what_the_loop_reads(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "TUNEBOT_OUTPUT_DIR": str(out), "TUNEBOT_REFERENCE_DIR": str(out)}

    def run(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "pipeline.py", *a],
            cwd=DEMO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    bench = run("--benchmark")
    b = cmd.parse_benchmark(
        cmd.CommandResult(["pipeline.py"], bench.returncode, bench.stdout, bench.stderr, 0)
    )
    assert len(b.samples_ms) == 9 and set(b.stages_ms) == {"text_encoder", "dit", "vae"}
    assert b.workload["steps"] == 8 and b.workload["hardware"] == "cpu"
    assert (out / "latent.pt").is_file()
    quality = run("--quality")
    assert json.loads(quality.stdout)["cosine"] == pytest.approx(1.0)
    report = analysis_mod.from_json(run("--analysis").stdout, "analysis")
    shares = [report.get("compute", k) for k in ("matmul_pct", "attention_pct", "vector_pct")]
    assert all(0 < s < 100 for s in shares) and 99 <= sum(shares) <= 101
    assert 0 <= report.get("pipeline", "step_similarity") <= 1
    assert report.get("compute", "compiled") is False


def test_tunebot_demo_model_runs_end_to_end(tmp_path):
    target = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "bot", "demo", "--model", "--dir", str(target), "--max-iters", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "iter  1  fused: false -> true [Pattern 融合]" in done.stdout
    )  # P0: the compile path is off
    assert "row: references/mindiesd-features.md#编译路径优化 row 'Pattern 融合'" in done.stdout
    assert "stop reason: 迭代上限" in done.stdout and "## Stage Result" in done.stdout
    branches = subprocess.run(
        ["git", "branch", "--list", "tunebot/dit_tiny/*"],
        cwd=target,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert branches == ["tunebot/dit_tiny/best", "tunebot/dit_tiny/v1"]
