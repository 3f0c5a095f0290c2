"""bot.model.spec (model.yaml) and bot.model.commands (what the commands print): clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.features import render
from bot.model import commands as cmd
from bot.model import spec as spec_mod

FIX = Path(__file__).parent / "model_fixtures"
GOOD = """\
features_model: Wan2.1
benchmark: [python, run.py, --benchmark]
quality: {command: [python, run.py, --quality], min_cosine: 0.99}
settings_file: settings.yaml
settings:
  - {key: quant, values: [true], row: W8A8_DYNAMIC}
"""


def write(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "examples/p/m"
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.yaml").write_text(text, encoding="utf-8")
    return Path("examples/p/m")


def test_good_spec_and_defaults(tmp_path):
    s = spec_mod.load(tmp_path, write(tmp_path, GOOD))
    assert s.qualified == "p/m" and s.settings_file == Path("examples/p/m/settings.yaml")
    assert s.stop.max_iters == 10 and s.stop.noise_floor == 0.03 and s.analysis is None
    assert cmd.resolve_argv(s.benchmark)[0] == sys.executable


@pytest.mark.parametrize(
    "text, key, words",
    [
        (GOOD + "colour: red\n", "colour", "unknown key"),
        (GOOD.replace("features_model: Wan2.1\n", ""), "features_model", "missing"),
        (
            GOOD.replace("[python, run.py, --benchmark]", "python run.py"),
            "benchmark",
            "non-empty list",
        ),
        (GOOD.replace("min_cosine: 0.99", "min_cosine: 2"), "quality.min_cosine", "[-1, 1]"),
        (GOOD.replace("values: [true]", "values: []"), "settings[0].values", "non-empty list"),
        (
            GOOD + "  - {key: quant, values: [false], row: W8A8}\n",
            "settings[1].key",
            "listed twice",
        ),
        (GOOD.replace("settings.yaml", "../x.yaml"), "settings_file", "inside the model folder"),
        (GOOD + "stop: {max_iters: 0}\n", "stop.max_iters", "whole number"),
        (GOOD + "model: other\n", "model", "differs from the folder name"),
        ("a: [1\n", "-", "not valid YAML"),
    ],
)
def test_bad_spec_names_key_and_fix(tmp_path, text, key, words):
    with pytest.raises(ConfigError) as err:
        spec_mod.load(tmp_path, write(tmp_path, text))
    assert err.value.key == key and words in str(err.value) and "Fix:" in str(err.value)
    assert err.value.exit_code == 2


def test_row_must_exist_in_the_table(tmp_path):
    s = spec_mod.load(tmp_path, write(tmp_path, GOOD.replace("W8A8_DYNAMIC", "W8A8_DYNAMlC")))
    with pytest.raises(ConfigError, match="'W8A8_DYNAMlC' is not a row"):
        spec_mod.check_rows(s, {"W8A8_DYNAMIC", "DitCache"})


def test_write_settings_changes_one_line_and_keeps_comments():
    original = "# settings\nquant: false  # W8A8\nwindow: 0\n"
    assert (
        spec_mod.write_settings(original, {"quant": True})
        == "# settings\nquant: true  # W8A8\nwindow: 0\n"
    )
    assert spec_mod.write_settings(original, {"cache": 2}) == original + "cache: 2\n"
    assert spec_mod.write_settings(None, {"mode": "fast path"}) == "mode: fast path\n"


def result(stdout: str, rc: int = 0, stderr: str = "") -> cmd.CommandResult:
    return cmd.CommandResult(["python", "b.py"], rc, stdout, stderr, 0.1)


GOOD_BENCH = {
    "schema": "tunebot.benchmark/v1",
    "latency_ms": [10.0, 11.0, 9.5],
    "stages_ms": {"dit": 9.0},
    "workload": {
        "model": "m",
        "resolution": "1024x1024",
        "frames": 1,
        "steps": 20,
        "precision": "bf16",
        "device_count": 1,
        "hardware": "Atlas 800I A2",
    },
}


def test_benchmark_json_after_log_lines_is_read():
    b = cmd.parse_benchmark(result("loading...\n" + json.dumps(GOOD_BENCH) + "\n"))
    assert b.latency().median_us == 10000.0 and b.workload["steps"] == 20


@pytest.mark.parametrize(
    "stdout, words",
    [
        ("100%|####| done\n", "printed no JSON object"),
        ("", "got: '(nothing)'"),
        (json.dumps({**GOOD_BENCH, "schema": "other/v2"}), "schema 'other/v2'"),
        (json.dumps({**GOOD_BENCH, "latency_ms": [1, "x"]}), "'latency_ms' must be"),
        (
            json.dumps({**GOOD_BENCH, "latency_ms": [1, float("nan")]}).replace("NaN", "NaN"),
            "'latency_ms' must be",
        ),
        (json.dumps({**GOOD_BENCH, "stages_ms": {"dit": -1}}), "'stages_ms' must map"),
    ],
)
def test_garbage_benchmark_output_is_a_clear_error(stdout, words):
    with pytest.raises(cmd.OutputError) as err:
        cmd.parse_benchmark(result(stdout))
    assert words in str(err.value) and err.value.exit_code == 2


def test_workload_diff_names_each_fact():
    other = {**GOOD_BENCH["workload"], "steps": 10, "precision": "int8"}
    assert cmd.workload_diff(GOOD_BENCH["workload"], other) == [
        "steps: 20 -> 10",
        "precision: 'bf16' -> 'int8'",
    ]


def test_quality_output():
    assert cmd.parse_quality(result('{"cosine": 0.995}'), 0.99) == (0.995, True)
    assert cmd.parse_quality(result('{"cosine": 0.98}'), 0.99) == (0.98, False)
    with pytest.raises(cmd.OutputError, match="'cosine' must be a number"):
        cmd.parse_quality(result('{"cosine": NaN}'), 0.99)
    with pytest.raises(
        cmd.OutputError, match="quality command .* failed \\(exit code 1\\); the quality gate"
    ):
        cmd.parse_quality(result("", rc=1, stderr="Traceback...\nFileNotFoundError: out.pt"), 0.99)


def test_analysis_output_that_does_not_parse(tmp_path):
    with pytest.raises(cmd.OutputError, match="does not parse"):
        cmd.parse_analysis(result("Profiling done, see ./prof"), tmp_path / "a.report")
    with pytest.raises(cmd.OutputError, match="unknown layer"):
        cmd.parse_analysis(result('{"layers": {"gpu": {}}}'), tmp_path / "b.report")
    ok = cmd.parse_analysis(
        result('{"layers": {"compute": {"matmul_pct": 40}}}'), tmp_path / "c.report"
    )
    assert ok.get("compute", "matmul_pct") == 40.0


def _traceback(code: str) -> str:
    """A real traceback from CPython, with the fake (older-API) mindiesd on the path."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=FIX, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    return done.stderr


def test_stale_api_errors_are_recognised_from_real_tracebacks():
    table = render.parse(
        (Path(__file__).parents[1] / "references/mindiesd-features.md").read_text(encoding="utf-8")
    )
    apis = cmd.api_names([r.api for r in table.rows])
    assert {
        "attention_forward",
        "sparse_attention",
        "quantize",
        "CacheConfig",
        "enable_offload",
    } <= apis
    imp = _traceback("from mindiesd import sparse_attention")
    assert cmd.stale_api_error(imp).startswith(
        "ImportError: cannot import name 'sparse_attention' from 'mindiesd'"
    )
    # the call site raises before any mindiesd frame: only the function name links it to the table
    typ = _traceback(
        "from mindiesd import attention_forward\nattention_forward(1, 2, 3, fused=True)"
    )
    assert "mindiesd" not in typ.split("Traceback")[-1].split("line 2")[-1]
    assert cmd.stale_api_error(typ) is None  # without the table's API names: no evidence
    assert (
        cmd.stale_api_error(typ, apis)
        == "TypeError: attention_forward() got an unexpected keyword argument 'fused'"
    )
    # ImportError/TypeError that have nothing to do with MindIE-SD are no sign of a stale table
    assert cmd.stale_api_error(_traceback("from json import nothing_here"), apis) is None
    assert cmd.stale_api_error(_traceback("len(1, 2)"), apis) is None
    assert cmd.stale_api_error(_traceback("raise ValueError('mindiesd')"), apis) is None
