"""A full loop on a kernel whose extent is symbolic and declared only in tune.yaml.

`M = T.symbolic("M")`, `M // block_M` tiles, and `shapes: {M: 768}` in tune.yaml. The stand-in
latency is fastest at block_M = 512, which does not divide 768: the loop must never measure it,
must reach the best legal value (384), and must say in the stop record, opt_log.md and the report
why 512 was not tried, naming tune.yaml as where M came from. The `tilelang` package beside the
kernel is a stand-in so the file runs on a CPU.
"""

from __future__ import annotations

import json
import subprocess

from conftest import make_commit

from bot.forge.local import LocalForge
from bot.run.machine import run_tune
from bot.run.request import TuneRequest
from bot.strategies import knobs

OP_DIR = "examples/p/rows"

KERNEL = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(block_M=64):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, 128), "float16"), Y: T.Tensor((M, 128), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, 128), "float16")
            T.copy(X[cid * block_M, 0], buf)
            T.copy(buf, Y[cid * block_M, 0])

    return main


if __name__ == "__main__":
    assert rows() is not None
    print("All check passed.")
"""

TILELANG = """\
def jit(*args, **kwargs):
    def wrap(fn):
        return fn

    return wrap
"""

LANGUAGE = """\
def prim_func(fn):
    return fn


def symbolic(name):
    return name


def Tensor(*args, **kwargs):
    return None
"""

BENCH = """\
import json
import sys

from bot.strategies import knobs

BLOCK = {32: 1.6, 64: 1.3, 128: 1.15, 256: 1.05, 384: 1.0, 512: 0.8}

with open(sys.argv[1], encoding="utf-8") as fh:
    source = fh.read()
latency = 100.0 * BLOCK[knobs.current_value(source, "block_M")]
print(json.dumps({"samples": [latency * (1 + 0.001 * (i % 3)) for i in range(9)], "unit": "us"}))
"""

TUNE = """\
kernel_kind: vector
strategies: [block_size]
knobs:
  - {name: block_M, strategy: block_size, values: [32, 64, 128, 256, 384, 512]}
shapes:
  M: 768
accuracy:
  mode: command
  timeout_s: 60
  repeats: 0
latency:
  backend: command
  command: ["{python}", bench.py, "{source}"]
  timeout_s: 60
"""


def show(repo, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{ref}:{path}"], cwd=repo.path, check=True, capture_output=True, text=True
    ).stdout


def test_a_move_the_declared_shape_forbids_is_never_measured_and_is_listed(git_repo):
    make_commit(
        git_repo.path,
        {
            f"{OP_DIR}/rows.py": KERNEL,
            f"{OP_DIR}/tilelang/__init__.py": TILELANG,
            f"{OP_DIR}/tilelang/language.py": LANGUAGE,
            f"{OP_DIR}/bench.py": BENCH,
            f"{OP_DIR}/tune.yaml": TUNE,
        },
        "add rows",
    )
    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="rows", max_iters=10, no_target=True),
        LocalForge(git_repo.path),
    )
    path = git_repo.path / ".git/tunebot/runs/p/rows/results.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    iterations = [r for r in recs if r["kind"] == "iteration"]
    assert 0 < len(iterations) <= 10
    tried = [r["change"]["new"] for r in iterations]
    assert 512 not in tried, tried  # the fastest stand-in value breaks M = 768: never measured
    assert all(r["accuracy"] is None or r["accuracy"]["status"] == "pass" for r in iterations)
    best = next(r for r in iterations if r["iteration"] == outcome.best_iteration)
    text = show(git_repo, best["sha"], f"{OP_DIR}/perf_opt/rows_opt_v{best['iteration']}.py")
    assert knobs.current_value(text, "block_M") == 384
    why = (
        "block_size: block_M=512 refused: block_M=512 does not divide 768 (`M // block_M` at "
        "line 11 needs full tiles) (with M=768 from tune.yaml shapes)"
    )
    stop = next(r for r in recs if r["kind"] == "stop")
    assert why in stop["not_planned"]
    log = show(git_repo, "tunebot/rows/best", f"{OP_DIR}/perf_opt/opt_log.md")
    assert "## 未计划" in log and f"- {why}" in log
    assert "block_M=512 refused" in outcome.report
