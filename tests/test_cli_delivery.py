"""The terminal side of a delivery: progress on stderr, `show`, and the small fixes of issue 10."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_commit
from test_loop import add_sleepy_op

from bot.cli import main
from bot.cli.progress import Progress
from bot.run.request import ProgressEvent

ROOT = Path(__file__).resolve().parents[1]


def test_progress_goes_to_stderr_with_phase_iteration_elapsed_and_estimate(git_repo):
    add_sleepy_op(git_repo, BLOCK=64)
    result = CliRunner().invoke(
        main,
        ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "3", "--patience", "3"],
    )
    assert result.exit_code == 0, result.output
    err = result.stderr.splitlines()
    for phase in (
        "baseline L0",
        "baseline timing",
        "L0",
        "timing",
        "commit",
        "baseline re-measure",
        "delivery commit",
    ):
        assert any(line.endswith(f": {phase}") or f": {phase};" in line for line in err), phase
    assert any("iter 3 of 3: L0" in line for line in err)
    assert any(
        re.match(
            r"\[\d+:\d\d\] testproj/sleepy iter [23] of 3: \w.*; about \d+:\d\d left at most", line
        )
        for line in err
    ), "an estimate once an iteration has finished"
    assert not any("iter " in line and " of 3" in line for line in result.stdout.splitlines()), (
        "stdout keeps result lines only"
    )
    assert "\x1b[" not in result.stderr, "no control sequences when stderr is not a terminal"


def test_live_progress_rewrites_one_line_and_estimates_from_finished_iterations():
    stream = io.StringIO()
    now = [0.0]
    progress = Progress(stream=stream, live=True, clock=lambda: now[0])

    def event(n: int, phase: str) -> ProgressEvent:
        return ProgressEvent("phase", "p/op", iteration=n, message=phase, data={"max_iters": 4})

    progress.phase(event(1, "L0"))
    now[0] = 10.0
    progress.finished_iteration()
    progress.phase(event(2, "L0"))
    now[0] = 12.0
    progress.phase(event(2, "timing"))
    text = stream.getvalue()
    assert text.count("\r\x1b[2K") == 3 and "\n" not in text
    assert text.endswith(
        "[0:12] p/op iter 2 of 4: timing; about 0:28 left at most"
    )  # 3 x 10 s - 2 s spent
    progress.clear()
    assert stream.getvalue().endswith("\r\x1b[2K")


def test_no_color_turns_the_verdict_colour_off(git_repo, monkeypatch):
    add_sleepy_op(git_repo, BLOCK=64)
    env = {**os.environ, "NO_COLOR": "1"}
    coloured = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "1"], color=True
    )
    assert "\x1b[3" in coloured.stdout, "a verdict is coloured on a colour terminal"
    plain = CliRunner(env=env).invoke(
        main,
        ["tune", "sleepy", "--repo", str(git_repo.path), "--restart", "--max-iters", "1"],
        color=True,
    )
    assert plain.exit_code == 0, plain.output
    assert "\x1b[" not in plain.stdout


def test_show_prints_the_proposal_as_a_person_reads_it_and_as_json(git_repo):
    add_sleepy_op(git_repo, BLOCK=64)
    tuned = CliRunner().invoke(
        main,
        [
            "tune",
            "sleepy",
            "--repo",
            str(git_repo.path),
            "--max-iters",
            "3",
            "--strategies",
            "pipeline_depth",
        ],
    )
    assert tuned.exit_code == 0 and "tunebot show 1" in tuned.stdout, tuned.output
    shown = CliRunner().invoke(main, ["show", "1", "--repo", str(git_repo.path)])
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert text.startswith("#1 open  tunebot/sleepy/best -> main  needs approval")
    assert "What changed" in text and "NUM_STAGES 1 -> 4 (line " in text  # far end first
    assert "```" not in text and "<details>" not in text and "**" not in text
    assert "latency per version (us)" in text and "#" * 10 in text  # the chart as text bars
    header = next(line for line in text.splitlines() if line.startswith("iter "))
    assert header.split() == [
        "iter",
        "change",
        "latency",
        "(us)",
        "vs",
        "baseline",
        "vs",
        "best",
        "verdict",
        "reason",
        "branch",
    ]
    as_json = json.loads(
        CliRunner().invoke(main, ["show", "1", "--repo", str(git_repo.path), "--json"]).stdout
    )
    assert as_json["id"] == "1" and as_json["body"].startswith("**What changed**")
    missing = CliRunner().invoke(main, ["show", "7", "--repo", str(git_repo.path)])
    assert missing.exit_code == 2 and "no proposal #7" in missing.output


def test_ops_says_when_there_are_none(git_repo):
    result = CliRunner().invoke(main, ["ops", "--repo", str(git_repo.path)])
    assert result.exit_code == 0
    assert (
        "no ops found under examples/" in result.output
        and "<project>/<op>/<op>.py" in result.output
    )


def test_demo_with_an_unknown_op_exits_2_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "demo", "--op", "nosuch", "--dir", str(target)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nosuch" in proc.stderr
    assert not target.exists()
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("tunebot-demo-*"))
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "demo", "--op", "nosuch"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("tunebot-demo-*")) == before, (
        "no scratch dir left"
    )


def test_demo_into_a_non_empty_dir_is_bad_input(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "demo", "--dir", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.skipif(
    importlib.util.find_spec("tilelang") is not None, reason="this machine has tilelang"
)
def test_an_op_needing_a_missing_toolchain_names_it(git_repo):
    folder = "examples/tilelang/vec_add"
    files = {
        f"{folder}/{name}": (ROOT / folder / name).read_text()
        for name in ("vec_add.py", "tune.yaml", "DESIGN.md")
    }
    make_commit(git_repo, files, "a TileLang op")
    result = CliRunner().invoke(main, ["tune", "tilelang/vec_add", "--repo", str(git_repo.path)])
    assert result.exit_code != 0
    assert "lacks the `tilelang` module" in result.output and "fix it first" not in result.output


def test_cancel_help_no_longer_promises_a_delivery():
    text = CliRunner().invoke(main, ["cancel", "--help"]).output
    assert "proposes nothing" in text


def test_an_iteration_line_keeps_its_numbers_within_80_columns(monkeypatch):
    from bot.cli.progress import Printer

    monkeypatch.setenv("NO_COLOR", "1")
    event = ProgressEvent(
        "iteration",
        "demo/rms_norm",
        iteration=10,
        strategy="block_size",
        change="BLOCK_ROWS: 256 -> 512 (constant at line 20)",
        latency_us=123456.78,
        accuracy="pass",
        verdict="not_better",
        gain_pct=-12.3,
        branch="tunebot/rms_norm/v10",
        message="interleaved re-measure: gain +1.2% < threshold 3.0% (faster in 3 of 5 pairs)",
        data={"gain_vs_best_pct": 1.2, "max_iters": 10},
    )
    line = Printer(progress=Progress(stream=io.StringIO(), live=False)).line(event)
    head = line[:80]
    for number in ("10/10", "123456.78 us", "-12.3% vs baseline", "+1.2% vs best"):
        assert number in head, (number, head)
    assert line.index("not_better: interleaved") < line.index("block_size: BLOCK_ROWS")


def test_the_missing_module_is_the_one_that_ended_the_process_not_a_warning():
    # Seen on a fresh venv: torch warns "Failed to initialize NumPy: No module named 'numpy'" before
    # the op's own ImportError, and the hint named numpy instead of tilelang.
    from bot.run.delivery import missing_module

    tail = (
        "functional_tensor.py:368: UserWarning: Failed to initialize NumPy: No module named 'numpy'\n"
        'Traceback (most recent call last):\n  File "vec_add.py", line 8, in <module>\n    import tilelang\n'
        "ModuleNotFoundError: No module named 'tilelang.language'\n"
    )
    assert missing_module(tail) == "tilelang"
    assert (
        missing_module("UserWarning: No module named 'numpy'\nValueError: shapes differ\n") is None
    )
