"""A failed or erroring move is never planned again, from any parent: a full loop through the real
CLI (`python -m bot tune` in a subprocess) on a real git repository.

The stand-in op has two knobs: BLOCK_A = 64 computes a wrong result (L0 fails), BLOCK_B 16 is the
fastest. Expected, written before running: the planner's first move (BLOCK_A 32 -> 64) fails L0;
BLOCK_B then improves twice, so the best moves to new parents; BLOCK_A = 64 is never planned
again from them (nor in a dry run after the run), and the report names the failed iteration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import make_commit

ROOT = Path(__file__).resolve().parent.parent
OP = "examples/proj/twoknob"

KERNEL = '''"""Stand-in op: two block knobs; one value of BLOCK_A gives a wrong result."""
import argparse

BLOCK_A = 32
BLOCK_B = 8


def get_inputs(seed=0):
    return (list(range(256)),)


def reference(x):
    return [v * 2 for v in x]


def kernel(x):
    out = []
    for i in range(0, len(x), BLOCK_A):
        out.extend(v * 2 for v in x[i : i + BLOCK_A])
    if BLOCK_A == 64:
        out[0] += 1  # the bug this block size exposes
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--level", default="L0")
    p.parse_args()
    (x,) = get_inputs()
    assert kernel(x) == reference(x), "L0 FAIL: kernel differs from reference"
'''

# latency known from the knobs: BLOCK_A 64 would be fastest (but is wrong), BLOCK_B 16 is best
BENCH = """import json, re, sys
src = open(sys.argv[1]).read()
a = int(re.search(r"^BLOCK_A = (\\d+)", src, re.M).group(1))
b = int(re.search(r"^BLOCK_B = (\\d+)", src, re.M).group(1))
us = 100.0 * {32: 1.0, 64: 0.7}[a] * {8: 1.0, 16: 0.8, 32: 0.85}[b]
print(json.dumps({"samples": [us * (1 + 0.001 * (i % 3)) for i in range(9)]}))
"""

TUNE = """kernel_kind: vector
accuracy: {mode: command, timeout_s: 60, repeats: 0}
latency:
  backend: command
  command: ["{python}", bench.py, "{source}"]
  timeout_s: 60
knobs:
  - {name: BLOCK_A, strategy: block_size, values: [32, 64]}
  - {name: BLOCK_B, strategy: block_size, values: [8, 16, 32]}
"""


def tune(repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", "tune", "twoknob", "--repo", str(repo.path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ),
    )


def test_a_move_that_failed_l0_is_never_planned_again_after_the_best_moves(git_repo):
    make_commit(
        git_repo,
        {
            f"{OP}/twoknob.py": KERNEL,
            f"{OP}/bench.py": BENCH,
            f"{OP}/tune.yaml": TUNE,
            f"{OP}/DESIGN.md": "# twoknob\n",
        },
        "add twoknob",
    )
    plan = tune(git_repo, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "1. block_size: BLOCK_A: 32 -> 64" in plan.stdout  # the first move is the bad one
    assert "  -   - " not in plan.stdout  # plan lines are not bulleted twice

    done = tune(git_repo, "--max-iters", "10", "--patience", "10")
    assert done.returncode == 0, done.stderr
    path = git_repo.path / ".git/tunebot/runs/proj/twoknob/results.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    its = [r for r in recs if r["kind"] == "iteration"]
    moves = [(r["change"]["knob"], r["change"]["new"], r["verdict"]) for r in its]
    assert moves[0] == ("BLOCK_A", 64, "fail_l0"), moves
    assert [m for m in moves if m[:2] == ("BLOCK_A", 64)] == [moves[0]], moves
    kept = [m for m in moves if m[2] == "better"]
    assert len(kept) >= 2, moves  # the best moved on twice after the failure
    assert {r["parent_iteration"] for r in its[1:]} - {0}, moves  # planned from new parents
    assert next(r for r in recs if r["kind"] == "stop")["reason"] == "策略耗尽", moves
    assert "iter 1 (block_size): fail_l0" in done.stdout
    # why it was not tried again: in the stop record, opt_log.md and the report
    why = "block_size: BLOCK_A=64 not tried again: its variant ended in fail_l0"
    stop = next(r for r in recs if r["kind"] == "stop")
    assert any(line.startswith(why) for line in stop["not_planned"]), stop
    log = subprocess.run(
        ["git", "show", f"tunebot/twoknob/best:{OP}/perf_opt/opt_log.md"],
        cwd=git_repo.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"## 未计划\n- {why}" in log, log
    assert why in done.stdout

    after = tune(git_repo, "--dry-run")  # the plan from the final best does not offer it either
    assert after.returncode == 0, after.stderr
    assert "0 attempts so far" not in after.stdout  # planned from the recorded best
    assert "BLOCK_A: 32 -> 64  (tier" not in after.stdout, after.stdout
    assert f"- not planned: {why}" in after.stdout
    assert "the recorded run has stopped" in after.stdout
