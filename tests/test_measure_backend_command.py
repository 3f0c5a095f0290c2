"""command backend: a real user benchmark command in the sandbox (real subprocesses, no mocks)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.config.discovery import load_op_config
from bot.config.schema import LatencySettings, OpConfig
from bot.errors import ConfigError
from bot.measure.backends.command import (
    MEDIAN_RUNS,
    OutputError,
    expand,
    measure_command,
    parse_output,
)
from bot.measure.evaluator import Evaluator

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "examples" / "command_harness" / "bench.py"
DEMO = ROOT / "examples" / "demo" / "rms_norm" / "rms_norm.py"


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "bench.py"
    path.write_text(body)
    return [sys.executable, str(path), "{source}"]


def test_samples_are_recorded_in_microseconds(tmp_path):
    variant = tmp_path / "op.py"
    variant.write_text("# the variant\n")
    argv = script(
        tmp_path,
        "import sys, json\nassert sys.argv[1].endswith('op.py'), sys.argv\n"
        "print('compiling...')\nprint(json.dumps({'samples': [1.0, 2.0, 3.0], 'unit': 'ms'}))\n",
    )
    r = measure_command(variant, argv, timeout_s=60, cwd=tmp_path)
    assert r.ok, r.notes
    assert (
        r.backend == "command"
        and r.samples_us == [1000.0, 2000.0, 3000.0]
        and r.median_us == 2000.0
    )
    assert r.command[-1] == str(variant.resolve())  # {source} was filled in
    assert "compiling..." in r.tail


def test_a_median_only_command_is_repeated_so_the_decision_has_a_spread(tmp_path):
    counter = tmp_path / "n"
    argv = script(
        tmp_path,
        f"import json, pathlib\np = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\np.write_text(str(n))\n"
        "print(json.dumps({'median': 100 + n, 'environment': {'device': 'Ascend910B3'}}))\n",
    )
    r = measure_command(tmp_path / "op.py", argv, timeout_s=60, cwd=tmp_path)
    assert r.ok and len(r.samples_us) == MEDIAN_RUNS
    assert r.samples_us == [101.0, 102.0, 103.0, 104.0, 105.0]
    assert r.extra["environment"] == {"device": "Ascend910B3"}


@pytest.mark.parametrize(
    "body, words",
    [
        ("print('done in 3 ms')", "no JSON object"),
        (
            "import json\nprint(json.dumps({'median': 1}))\nprint(json.dumps({'median': 2}))",
            "2 result objects",
        ),
        ("import json\nprint(json.dumps({'samples': [1, -2]}))", "not a positive finite number"),
        ("import json\nprint(json.dumps({'samples': [1], 'unit': 'furlong'}))", "unknown unit"),
    ],
)
def test_unusable_output_is_an_error_naming_the_fix(tmp_path, body, words):
    r = measure_command(
        tmp_path / "op.py", script(tmp_path, body + "\n"), timeout_s=60, cwd=tmp_path
    )
    assert r.status == "error" and not r.ok
    assert any(words in n for n in r.notes), r.notes


def test_failure_and_hang_are_results(tmp_path):
    r = measure_command(
        tmp_path / "op.py", script(tmp_path, "raise SystemExit(3)\n"), timeout_s=60, cwd=tmp_path
    )
    assert r.status == "error" and any("exit code 3" in n for n in r.notes)
    r = measure_command(
        tmp_path / "op.py",
        script(tmp_path, "import time\ntime.sleep(30)\n"),
        timeout_s=1,
        cwd=tmp_path,
    )
    assert r.status == "timeout"


def test_parse_and_expand_units():
    samples, env, median_only = parse_output(
        'x\n{"samples": [2, 4], "unit": "ns", "environment": {"a": 1}}\n'
    )
    assert samples == [0.002, 0.004] and env == {"a": 1} and not median_only
    with pytest.raises(OutputError):
        parse_output('{"median": true}')
    assert expand(
        ["run", "{source}", "--n={repeats}", "{other}"], {"source": "/x.py", "repeats": "3"}
    ) == ["run", "/x.py", "--n=3", "{other}"]


def test_the_documented_example_harness_through_the_evaluator(tmp_path):
    op_dir = tmp_path / "examples" / "demo" / "rms_norm"
    op_dir.mkdir(parents=True)
    (op_dir / "rms_norm.py").write_text(DEMO.read_text())
    lat = LatencySettings(
        backend="command",
        repeats=5,
        warmup=1,
        timeout_s=120,
        command=(
            sys.executable,
            str(HARNESS),
            "{source}",
            "--warmup",
            "{warmup}",
            "--repeats",
            "{repeats}",
        ),
    )
    op = OpConfig(project="demo", name="rms_norm", dir=Path("examples/demo/rms_norm"), latency=lat)
    ev = Evaluator(op, tmp_path)
    r = ev.latency(Path("examples/demo/rms_norm/rms_norm.py"))
    assert r.ok, (r.notes, r.tail)
    assert r.backend == "command" and len(r.samples_us) == 5 and r.median_us > 0
    env = ev.environment(Path("examples/demo/rms_norm/rms_norm.py"), "abc")
    assert env.backend == "command" and env.python_version  # reported by the harness


def test_config_requires_the_command(tmp_path):
    op_dir = tmp_path / "examples" / "p" / "op"
    op_dir.mkdir(parents=True)
    (op_dir / "tune.yaml").write_text("latency:\n  backend: command\n")
    with pytest.raises(ConfigError) as exc:
        load_op_config(tmp_path, op_dir)
    assert "latency.command" in str(exc.value) and exc.value.exit_code == 2
    (op_dir / "tune.yaml").write_text(
        'latency:\n  backend: command\n  command: python bench.py "{source}"\n'
    )
    assert load_op_config(tmp_path, op_dir).latency.command == ("python", "bench.py", "{source}")
