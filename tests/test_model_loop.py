"""The model-level loop end to end: real git repos (bare origin), real subprocesses (the fake
pipeline in tests/model_fixtures), the real features table, the local forge.

Every expected verdict below was written from behavior.json by hand before running the loop:
a factor < 0.76 is a first-look win (gain >= 8 x 3 %), a factor > 0.985 is below half the
3 % floor (no re-measure), a perturbation of 0.3 puts the cosine near 0.83 (< 0.99).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_commit, snapshot_checkout

from bot.forge.local import LocalForge
from bot.model import commands as cmd
from bot.run.machine import run_tune
from bot.run.request import TuneRequest

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "model_fixtures"
MODEL_DIR = "examples/fakeproj/fake"

MODEL_YAML = """\
features_model: Wan2.1
hardware: Atlas 800I A2
benchmark: [python, fakepipe.py, --benchmark]
analysis: [python, fakepipe.py, --analysis]
quality: {command: [python, fakepipe.py, --quality], min_cosine: 0.99}
settings_file: settings.yaml
settings:
  - {key: fused, values: [true], row: Pattern 融合}
  - {key: quant, values: [true], row: W8A8_DYNAMIC}
  - {key: window, values: [128, 64], row: sparse_attention}
  - {key: cache, values: [2, 4], row: DitCache}
  - {key: cfg, values: [true], row: CFG Parallel}
stop: {max_iters: 10, noise_floor: 0.03, patience: 2}
remeasure_rounds: 2
"""
SETTINGS = (
    "# the fake pipeline's settings\nfused: false\nquant: false\nwindow: 0\ncache: 0\ncfg: false\n"
)
# compute bound and MatMul-led (50 + 35 > 60), FA 35 > 30, compile path off, adjacent steps alike:
# advise fires pattern, quantization, sparsity (attention) and cache; CFG Parallel is tier 2.
ANALYSIS = {
    "system": {"peak_memory_gb": 10, "memory_capacity_gb": 64},
    "pipeline": {"steps": 8, "step_similarity": 0.95},
    "compute": {
        "matmul_pct": 50,
        "attention_pct": 35,
        "vector_pct": 15,
        "comm_pct": 0,
        "compiled": False,
    },
    "communication": {"comm_pct": 0},
    "operator": {"dit_matmul_pct": 50, "fa_pct": 35, "vector_pct": 15},
}
EFFECTS = {
    "fused=true": {"factor": 0.995},
    "quant=true": {
        "factor": 0.6,
        "perturb": 0.005,
        "analysis": {
            "compute": {"matmul_pct": 25, "attention_pct": 55},
            "operator": {"dit_matmul_pct": 25, "fa_pct": 55},
        },
    },
    "window=128": {"factor": 0.9, "perturb": 0.3},
    "cache=2": {"factor": 0.7, "perturb": 0.002},
    "cache=4": {"factor": 0.99, "perturb": 0.004},
    "cfg=true": {"factor": 0.5, "workload": {"steps": 4}},
}


def add_model(
    repo,
    model_yaml: str = MODEL_YAML,
    effects: dict | None = None,
    analysis: dict | None = None,
    table_version: str | None = None,
    settings: str = SETTINGS,
) -> str:
    table = (ROOT / "references/mindiesd-features.md").read_text(encoding="utf-8")
    if table_version:
        table = table.replace("- 文档版本: 未声明", f"- 文档版本: {table_version}")
    behavior = {
        "base_ms": 100.0,
        "jitter": 0.002,
        "analysis": analysis if analysis is not None else ANALYSIS,
        "effects": EFFECTS if effects is None else effects,
    }
    files = {
        "references/mindiesd-features.md": table,
        f"{MODEL_DIR}/model.yaml": model_yaml,
        f"{MODEL_DIR}/settings.yaml": settings,
        f"{MODEL_DIR}/behavior.json": json.dumps(behavior, indent=1),
        f"{MODEL_DIR}/fakepipe.py": (FIX / "fakepipe.py").read_text(),
        f"{MODEL_DIR}/mindiesd/__init__.py": (FIX / "mindiesd/__init__.py").read_text(),
    }
    return make_commit(repo, files, "add the fake model")


def git(repo_path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo_path, check=True, capture_output=True, text=True
    ).stdout.strip()


def records(repo_path: Path) -> list[dict]:
    path = repo_path / ".git/tunebot/runs/fakeproj/fake/results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def iterations(repo_path: Path) -> list[dict]:
    return [r for r in records(repo_path) if r["kind"] == "model-iteration"]


@pytest.fixture()
def control(tmp_path, monkeypatch):
    path = tmp_path / "control.json"
    path.write_text("{}")
    monkeypatch.setenv("FAKEPIPE_CONTROL", str(path))
    return path


def tune(repo_path: Path, events: list | None = None, **kwargs):
    sink = events.append if events is not None else None
    return run_tune(
        TuneRequest(repo=repo_path, op="fakeproj/fake", **kwargs), LocalForge(repo_path), sink
    )


def test_model_run_one_setting_per_iteration_with_citations_gate_and_refusal(git_repo, control):
    base = add_model(git_repo)
    before = snapshot_checkout(git_repo)
    events: list = []

    outcome = tune(git_repo.path, events)

    assert snapshot_checkout(git_repo) == before  # the user's checkout is never touched
    its = iterations(git_repo.path)
    assert [(r["setting"]["key"], r["setting"]["new"], r["verdict"]) for r in its] == [
        ("fused", True, "not_better"),  # P0 pattern first; 0.5 % is noise
        ("quant", True, "better"),  # quantization next; 40 % faster
        ("window", 128, "quality_fail"),  # sparsity; cosine ~0.83 < 0.99
        ("cache", 2, "better"),  # generic (cache); window=64 is skipped: beyond a failed value
        ("cache", 4, "not_better"),
        (
            "cfg",
            True,
            "workload_changed",
        ),  # tier 2: no finding points to CFG Parallel; steps 8 -> 4 refused
    ]
    assert [r["setting"]["tier"] for r in its] == [1, 1, 1, 1, 1, 2]
    assert its[0]["setting"]["citation"].startswith(
        "references/mindiesd-features.md#编译路径优化 row 'Pattern 融合'"
    )
    assert "compile path not used" in its[0]["setting"]["reasons"][0]
    assert "MatMul-led" in its[1]["setting"]["reasons"][0]
    assert its[2]["quality"]["cosine"] < 0.99 and its[2]["quality"]["passed"] is False
    assert (
        "steps: 8 -> 4" in its[5]["note"]
        and its[5]["quality"] is None
        and its[5]["decision"] is None
    )
    # each iteration: its own branch, parent = best so far, exactly one settings key changed
    best = base
    for r in its:
        n = r["iteration"]
        sha = git(git_repo.path, "rev-parse", f"tunebot/fake/v{n}")
        assert sha == r["sha"] and git(git_repo.path, "rev-parse", f"{sha}^") == best == r["parent"]
        diff = git(git_repo.path, "diff", "-U0", best, sha, "--", f"{MODEL_DIR}/settings.yaml")
        changed = [
            line
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        assert changed == [
            f"-{r['setting']['key']}: {_yaml(r['setting']['old'])}",
            f"+{r['setting']['key']}: {_yaml(r['setting']['new'])}",
        ]
        if r["verdict"] == "better":
            best = sha
    # the analysis was re-run after the quantization and the figures' move recorded
    assert its[1]["analysis_delta"]["compute.matmul_pct"] == [50, 25]
    # stop with evidence, delivery, proposal with the report
    stop = next(r for r in records(git_repo.path) if r["kind"] == "model-stop")
    assert stop["reason"] == "特性耗尽" and "no untried setting" in stop["evidence"]
    assert outcome.stop_reason == "特性耗尽" and outcome.best_iteration == 4
    assert abs(outcome.improvement_pct - 58.0) < 1.0  # 100 ms * 0.6 * 0.7 = 42 ms
    delivered = git(git_repo.path, "show", f"tunebot/fake/best:{MODEL_DIR}/settings.yaml")
    assert "quant: true" in delivered and "cache: 2" in delivered and "window: 0" in delivered
    log = git(git_repo.path, "show", f"tunebot/fake/best:{MODEL_DIR}/perf_opt/opt_log.md")
    assert (
        "工作负载: device_count=1" in log and "| 3 | window: 0 -> 128 | sparse_attention |" in log
    )
    assert "中止原因: 特性耗尽" in log
    proposal = LocalForge(git_repo.path).list_proposals()[0]
    assert proposal.body.startswith("### Enabled, and why")
    assert (
        "**quant: false -> true** — references/mindiesd-features.md#matmul-量化 row 'W8A8_DYNAMIC'"
        in proposal.body
    )
    assert "## Stage Result" in proposal.body and "- stop_reason: 特性耗尽" in proposal.body
    assert "- issues: iter 3 (window=128): quality_fail" in proposal.body
    # the baseline settings re-measured at the end: the fake pipeline's machine does not drift
    end = next(r for r in records(git_repo.path) if r["kind"] == "model-baseline-end")
    assert end["drift_pct"] == 0.0 and outcome.drift_pct == 0.0
    assert "baseline re-measured at the end drifted +0.0%" in proposal.body
    # append-only: unique keys, every later read starts with every earlier line
    keys = [r["key"] for r in records(git_repo.path)]
    assert len(keys) == len(set(keys))
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["start", "baseline"] and kinds.count("iteration") == 6 and "stop" in kinds


def _yaml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_rerun_after_finish_is_a_no_op_and_records_grow_only(git_repo, control):
    add_model(git_repo, effects={"fused=true": {"factor": 0.5}})
    tune(git_repo.path)
    first = (git_repo.path / ".git/tunebot/runs/fakeproj/fake/results.jsonl").read_bytes()
    calls = Path(str(control) + ".calls").read_text().count("\n")
    outcome = tune(git_repo.path)
    again = (git_repo.path / ".git/tunebot/runs/fakeproj/fake/results.jsonl").read_bytes()
    assert again == first  # nothing measured or recorded twice
    assert Path(str(control) + ".calls").read_text().count("\n") == calls
    assert outcome.stop_reason


@pytest.mark.parametrize("case", ["target", "gap", "noise", "external", "hardware", "limit"])
def test_stop_reasons_are_recorded_with_evidence(git_repo, control, case):
    yaml_text, analysis, kwargs = MODEL_YAML, None, {}
    if case == "target":
        yaml_text = MODEL_YAML.replace("max_iters: 10,", "max_iters: 10, target_ms: 70,")
        expected, evidence = "达目标", "best 60.00 ms <= target 70.00 ms"
    elif case == "gap":
        yaml_text = MODEL_YAML.replace("max_iters: 10,", "max_iters: 10, target_ms: 59,")
        expected, evidence = "差距在噪声内", "1.7% above the target 59.00 ms"
    elif case == "noise":
        effects = {"fused=true": {"factor": 0.995}, "quant=true": {"factor": 0.99}}
        add_model(git_repo, effects=effects)
        expected, evidence = (
            "差距在噪声内",
            "the last 2 measured iterations moved latency by less than",
        )
    elif case == "external":
        analysis = {
            "compute": {"matmul_pct": 20, "attention_pct": 10, "compiled": True},
            "communication": {"comm_pct": 40, "exposed_comm_pct": 45},
            "pipeline": {"redundant_steps": False},
            "system": {"peak_memory_gb": 8, "memory_capacity_gb": 64},
        }
        yaml_text = (
            MODEL_YAML.split("settings:\n", maxsplit=1)[0]
            + "settings:\n  - {key: fused, values: [true], row: Pattern 融合}\n"
        )
        expected = "外部根因"
        evidence = (
            "HCCL (communication not hidden by compute); analysis of the baseline: "
            "exposed communication 45% of communication time > 30%"
        )
    elif case == "hardware":
        analysis = {
            "compute": {"matmul_pct": 20, "attention_pct": 10, "compiled": True},
            "system": {"peak_memory_gb": 62, "memory_capacity_gb": 64},
        }
        yaml_text = (
            MODEL_YAML.split("settings:\n", maxsplit=1)[0]
            + "settings:\n  - {key: fused, values: [true], row: Pattern 融合}\n"
        )
        expected, evidence = "硬件上限", "peak memory 62 GB of 64 GB = 97% >= 90% of capacity"
    else:
        kwargs = {"max_iters": 1}
        expected, evidence = "迭代上限", "1 iterations recorded"
    if case != "noise":
        add_model(git_repo, model_yaml=yaml_text, analysis=analysis)
    events: list = []
    outcome = tune(git_repo.path, events, **kwargs)
    stop = next(r for r in records(git_repo.path) if r["kind"] == "model-stop")
    assert stop["reason"] == expected == outcome.stop_reason
    assert evidence in stop["evidence"]
    assert evidence in next(e.message for e in events if e.kind == "stop")
    if case in ("external", "hardware"):
        assert iterations(git_repo.path) == []  # named from the figures before any tier-2 guess
    assert f"- stop_reason: {expected}" in outcome.report and evidence in outcome.report
    kept = any(r["verdict"] == "better" for r in iterations(git_repo.path))
    # only a run that kept a setting proposes it (as for ops); the others say why not
    assert bool(LocalForge(git_repo.path).list_proposals()) == kept
    assert (outcome.verdict == "TUNING_COMPLETED") == kept
    if not kept:
        assert outcome.no_proposal_reason and "- issues: no proposal: " in outcome.report


@pytest.mark.parametrize("crash", ["import", "type"])
def test_mindiesd_api_failure_flags_the_table_stale(git_repo, control, crash):
    effects = {**EFFECTS, "window=128": {"crash": crash}}
    add_model(git_repo, effects=effects)
    events: list = []
    tune(git_repo.path, events)
    it = next(r for r in iterations(git_repo.path) if r["setting"]["key"] == "window")
    assert it["verdict"] == "stale_api"
    expected = (
        "ImportError: cannot import name 'sparse_attention' from 'mindiesd'"
        if crash == "import"
        else "TypeError: attention_forward() got an unexpected keyword argument 'fused'"
    )
    assert expected in it["stale"]
    # the run went on (window=64 is a different value: tried next) and the report flags the table
    body = LocalForge(git_repo.path).list_proposals()[0].body
    assert "- features_table: STALE (iter" in body and expected in body
    assert "Features table may be stale" in body
    stop_event = next(e for e in events if e.kind == "stop")
    assert "features table may be stale" in stop_event.message


def test_version_mismatch_flags_the_table_stale(git_repo, control):
    add_model(git_repo, effects={"fused=true": {"factor": 0.5}}, table_version="2.1.0")
    control.write_text(json.dumps({"mindiesd_version": "2.2.0"}))
    tune(git_repo.path)
    body = LocalForge(git_repo.path).list_proposals()[0].body
    assert "installed MindIE-SD 2.2.0 differs from the features table's docs version 2.1.0" in body
    assert "- features_table: STALE" in body


def test_same_version_is_not_stale(git_repo, control):
    add_model(git_repo, effects={"fused=true": {"factor": 0.5}}, table_version="2.2.0")
    control.write_text(json.dumps({"mindiesd_version": "2.2.0"}))
    tune(git_repo.path)
    assert "no sign of staleness" in LocalForge(git_repo.path).list_proposals()[0].body


def _cli(
    repo_path: Path, control: Path, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {**os.environ, "FAKEPIPE_CONTROL": str(control)}
    return subprocess.run(
        [sys.executable, "-m", "bot", "tune", "fakeproj/fake", "--repo", str(repo_path), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_garbage_benchmark_at_baseline_is_a_clear_error_and_loses_nothing(git_repo, control):
    add_model(git_repo)
    control.write_text(json.dumps({"benchmark_garbage": True}))
    done = _cli(git_repo.path, control)
    assert done.returncode == 2
    assert "benchmark command" in done.stderr and "printed no JSON object on stdout" in done.stderr
    assert "WARNING: latency not available" in done.stderr  # shows what it got
    assert [r["kind"] for r in records(git_repo.path)] == ["model-start"]
    control.write_text("{}")
    assert _cli(git_repo.path, control).returncode == 0
    assert len(iterations(git_repo.path)) == 6


@pytest.mark.parametrize("fault", ["benchmark_garbage", "analysis_garbage", "quality_crash"])
def test_harness_fault_mid_run_is_a_clear_error_then_resume_loses_and_duplicates_nothing(
    git_repo, control, fault
):
    add_model(git_repo)
    seen: list = []

    def progress(event):
        seen.append(event)
        if event.kind == "iteration" and event.iteration == 1:  # break the harness for iteration 2
            control.write_text(json.dumps({fault: True}))

    with pytest.raises(cmd.OutputError) as err:
        run_tune(
            TuneRequest(repo=git_repo.path, op="fakeproj/fake"), LocalForge(git_repo.path), progress
        )
    message = str(err.value)
    expected = {
        "benchmark_garbage": "printed no JSON object",
        "analysis_garbage": "does not parse",
        "quality_crash": "quality command",
    }[fault]
    assert expected in message and err.value.exit_code == 2
    kept = iterations(git_repo.path)
    assert [r["iteration"] for r in kept] == [1]
    control.write_text("{}")
    tune(git_repo.path)
    final = iterations(git_repo.path)
    assert final[0] == kept[0]  # the recorded iteration is kept as it was
    assert [r["iteration"] for r in final] == [1, 2, 3, 4, 5, 6]
    assert [r["verdict"] for r in final][1] == "better"
    keys = [r["key"] for r in records(git_repo.path)]
    assert len(keys) == len(set(keys))


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(git_repo, tmp_path):
    add_model(git_repo)
    control = tmp_path / "control.json"
    control.write_text(json.dumps({"sleep_s": 0.4}))
    env = {**os.environ, "FAKEPIPE_CONTROL": str(control)}
    log = git_repo.path / ".git/tunebot/runs/fakeproj/fake/results.jsonl"
    kills = 0
    for wait_for in ("iter:1", "iter:3"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "tune", "fakeproj/fake", "--repo", str(git_repo.path)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and f'"key": "{wait_for}"' in log.read_text():
                time.sleep(0.5)  # into the next iteration's benchmark
                proc.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.05)
        proc.wait()
    assert kills == 2
    midway = iterations(git_repo.path)
    assert 2 <= len(midway) < 6
    done = _cli(git_repo.path, control)
    assert done.returncode == 0, done.stderr
    final = iterations(git_repo.path)
    assert final[: len(midway)] == midway
    assert [r["iteration"] for r in final] == [1, 2, 3, 4, 5, 6]
    assert [r["verdict"] for r in final] == [
        "not_better",
        "better",
        "quality_fail",
        "better",
        "not_better",
        "workload_changed",
    ]
    keys = [r["key"] for r in records(git_repo.path)]
    assert len(keys) == len(set(keys))
    for r in final:
        assert git(git_repo.path, "rev-parse", r["branch"]) == r["sha"]
    branches = git(git_repo.path, "branch", "--list", "tunebot/fake/v*").split()
    assert sorted(branches) == sorted(r["branch"] for r in final)


def test_bad_model_yaml_is_refused_before_anything_is_written(git_repo, control):
    add_model(git_repo, model_yaml=MODEL_YAML.replace("row: DitCache", "row: DitCachee"))
    done = _cli(git_repo.path, control)
    assert done.returncode == 2
    assert "settings[3].row" in done.stderr and "'DitCachee' is not a row" in done.stderr
    assert records(git_repo.path) == []


def test_workload_facts_missing_is_a_clear_error(git_repo, control, tmp_path):
    result = cmd.CommandResult(
        ["python", "bench.py"],
        0,
        json.dumps({"latency_ms": [1.0], "workload": {"model": "m", "resolution": "1x1"}}),
        "",
        0.1,
    )
    with pytest.raises(
        cmd.OutputError,
        match="workload fact\\(s\\) frames, steps, precision, device_count, hardware missing",
    ):
        cmd.parse_benchmark(result)


def test_cli_dispatches_a_model_name_and_keeps_ops_working(git_repo, control):
    add_model(git_repo, effects={"fused=true": {"factor": 0.5}})
    done = _cli(git_repo.path, control, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (
        "tier 2 fused: false -> true -> references/mindiesd-features.md#编译路径优化 row 'Pattern 融合'"
        in done.stdout
    )
    assert records(git_repo.path) == []  # a dry run writes nothing
    refused = _cli(git_repo.path, control, "--strategies", "block_size")
    assert refused.returncode == 2 and "settings listed in its model.yaml" in refused.stderr


def test_cancel_stops_a_model_run_before_its_next_iteration(git_repo, tmp_path):
    add_model(git_repo)
    control = tmp_path / "control.json"
    control.write_text(json.dumps({"sleep_s": 0.3}))
    env = {**os.environ, "FAKEPIPE_CONTROL": str(control)}
    nothing = subprocess.run(
        [sys.executable, "-m", "bot", "cancel", "fakeproj/fake", "--repo", str(git_repo.path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert nothing.returncode == 3 and "nothing to cancel" in nothing.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "tune", "fakeproj/fake", "--repo", str(git_repo.path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = git_repo.path / ".git/tunebot/runs/fakeproj/fake/results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        log.exists() and '"key": "iter:1"' in log.read_text()
    ):
        time.sleep(0.05)
    asked = subprocess.run(
        [sys.executable, "-m", "bot", "cancel", "fakeproj/fake", "--repo", str(git_repo.path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert asked.returncode == 0, asked.stderr
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    stop = next(r for r in records(git_repo.path) if r["kind"] == "model-stop")
    assert stop["reason"] == "已取消" and "cancel requested at" in stop["evidence"]
    assert 1 <= len(iterations(git_repo.path)) < 6
    assert LocalForge(git_repo.path).list_proposals() == []  # a cancelled run proposes nothing
    delivered = git(git_repo.path, "show", f"tunebot/fake/best:{MODEL_DIR}/perf_opt/report.md")
    assert (
        "- verdict: TUNING_CANCELLED" in delivered
        and "no proposal: the run was cancelled" in delivered
    )
