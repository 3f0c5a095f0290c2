"""Full loops on REAL upstream kernels (tile-ai/tilelang-ascend, npuir, files of the corpus in
tests/data/upstream_kernels) with a stand-in toolchain and a stand-in latency of known optimum.

The kernel file is the upstream file byte for byte (sha256 checked against the manifest); only
the toolchain around it is a stand-in (tests/loop_ops/upstream_real/tilelang: a CPU `compile`
that computes what the prim_func computes, and `.npu()` that stays on the CPU), and the latency
comes from bench.py through the `command` backend.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import make_commit, third_party_corpus

from bot.forge.local import LocalForge
from bot.run.machine import run_tune
from bot.run.request import TuneRequest
from bot.strategies import knobs, multibuffer

HERE = Path(__file__).parent
STAND_IN = HERE / "loop_ops" / "upstream_real"
CORPUS = HERE / "data" / "upstream_kernels"
MANIFEST = {k["id"]: k for k in yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text())["kernels"]}


def upstream(kid: str) -> str:
    shared = third_party_corpus("upstream_kernels", f"{kid}.py")
    path = (shared or CORPUS / "src") / f"{kid}.py"
    if not path.is_file():
        pytest.skip(
            f"{path} is not materialised: run `python scripts/upstream_corpus.py --git-dir "
            f"<clone of tile-ai/tilelang-ascend>`"
        )
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == MANIFEST[kid]["sha256"]
    return data.decode("utf-8")


def add_op(repo, kid: str, name: str, extra: str = "") -> str:
    files = {
        f"examples/upstream/{name}/{p.relative_to(STAND_IN).as_posix()}": p.read_text()
        for p in STAND_IN.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    files[f"examples/upstream/{name}/tune.yaml"] += extra
    files[f"examples/upstream/{name}/{name}.py"] = upstream(kid)
    return make_commit(repo, files, f"add upstream {kid}")


def records(repo, name: str) -> list[dict]:
    path = repo.path / f".git/tunebot/runs/upstream/{name}/results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def show(repo, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{ref}:{path}"], cwd=repo.path, check=True, capture_output=True, text=True
    ).stdout


def test_loop_on_a_real_upstream_kernel_reaches_the_known_optimum_within_10_iterations(git_repo):
    add_op(git_repo, "log2", "log2")
    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="log2", max_iters=10, no_target=True),
        LocalForge(git_repo.path),
    )
    recs = records(git_repo, "log2")
    baseline = next(r for r in recs if r["kind"] == "baseline")
    assert baseline["accuracy"]["status"] == "pass", baseline["accuracy"]
    iterations = [r for r in recs if r["kind"] == "iteration"]
    assert 0 < len(iterations) <= 10
    for r in iterations:  # M = N = 16: a block past 16 is refused before measurement
        change = r["change"]
        if change["knob"] in ("BLOCK_M", "BLOCK_N"):
            assert change["new"] in (8, 16), change
        assert r["accuracy"] is None or r["accuracy"]["status"] == "pass", change
    path = [(r["change"]["description"], r["latency"]["median_us"]) for r in iterations]
    print("\n".join(f"{d}: {us:.1f} us" for d, us in path))
    best = next(r for r in iterations if r["iteration"] == outcome.best_iteration)
    text = show(
        git_repo, best["sha"], f"examples/upstream/log2/perf_opt/log2_opt_v{best['iteration']}.py"
    )
    assert [knobs.current_value(text, k) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_SIZE")] == [
        16,
        16,
        32,
    ], path
    assert multibuffer.current(text) is True
    assert outcome.best_us is not None and abs(outcome.best_us - 100.0) < 1.0
    print(f"\nreal-kernel loop: optimum 100 us reached at iteration {outcome.best_iteration}")
    # what was not planned is in the stop record, opt_log.md and the report
    stop = next(r for r in recs if r["kind"] == "stop")
    assert any("BLOCK_M=32 refused" in s and "does not divide 16" in s for s in stop["not_planned"])
    log = show(git_repo, "tunebot/log2/best", "examples/upstream/log2/perf_opt/opt_log.md")
    assert "## 未计划" in log and "BLOCK_M=32 refused" in log
    assert "not planned (" in outcome.report


def test_an_op_with_no_plannable_move_opens_no_proposal_and_says_why(git_repo):
    # vec_add(seq_len, seq_len): the only block's literal is the shape's own, so with block_size
    # as the only strategy there is nothing to try
    add_op(git_repo, "npuir_vec_add_1d", "vadd", extra="strategies: [block_size]\n")
    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="vadd", max_iters=5, no_target=True),
        LocalForge(git_repo.path),
    )
    assert outcome.iterations == 0 and outcome.proposal is None
    assert "issues: none" not in outcome.report
    assert "not planned (1)" in outcome.report and "change the problem" in outcome.report
    log = show(git_repo, "tunebot/vadd/best", "examples/upstream/vadd/perf_opt/opt_log.md")
    assert "## 未计划\n- block_size: block_N: its value comes from 'seq_len'" in log
