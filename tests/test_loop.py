"""The tuning loop end to end on a real local repo, real subprocesses, the local forge."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_commit, snapshot_checkout

from bot.cli import main
from bot.forge.local import LocalForge
from bot.loop import TuneRequest, run_tune
from bot.record.opt_log import parse_opt_log
from bot.record.report import parse_report

OP_FILES = Path(__file__).parent / "loop_ops"
OP_DIR = "examples/testproj/sleepy"


def add_sleepy_op(repo, tune_yaml: str | None = None, **knob_overrides: int) -> str:
    """Commit the sleepy test op into `repo`; knob overrides change the module constants."""
    source = (OP_FILES / "sleepy.py").read_text()
    for name, value in knob_overrides.items():
        source = source.replace(f"\n{name} = ", f"\n{name} = {value}  # was ", 1)
    files = {
        f"{OP_DIR}/sleepy.py": source,
        f"{OP_DIR}/tune.yaml": tune_yaml or (OP_FILES / "tune.yaml").read_text(),
        f"{OP_DIR}/DESIGN.md": (OP_FILES / "DESIGN.md").read_text(),
    }
    return make_commit(repo, files, "add sleepy op")


def git(repo_path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo_path, check=True, capture_output=True, text=True
    ).stdout.strip()


def records(repo_path: Path) -> list[dict]:
    path = repo_path / ".git/tunebot/runs/testproj/sleepy/results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def tune(repo_path: Path, **kwargs):
    return run_tune(TuneRequest(repo=repo_path, op="sleepy", **kwargs), LocalForge(repo_path))


def test_tune_records_one_commit_per_iteration_on_best_so_far(git_repo):
    base = add_sleepy_op(git_repo)
    before = snapshot_checkout(git_repo)

    outcome = tune(git_repo.path, max_iters=6)

    assert snapshot_checkout(git_repo) == before
    recs = records(git_repo.path)
    keys = [r["key"] for r in recs]
    assert len(keys) == len(set(keys))
    iterations = [r for r in recs if r["kind"] == "iteration"]
    assert 1 <= len(iterations) == outcome.iterations <= 6
    best_sha = base
    for rec in iterations:
        n = rec["iteration"]
        branch_sha = git(git_repo.path, "rev-parse", f"refs/heads/tunebot/sleepy/v{n}")
        assert branch_sha == rec["sha"]
        parents = git(git_repo.path, "rev-list", "--parents", "-n1", rec["sha"]).split()[1:]
        assert parents == [best_sha], f"v{n} must have exactly one parent, the best-so-far"
        changed = git(
            git_repo.path, "diff-tree", "--no-commit-id", "--name-status", "-r", rec["sha"]
        ).splitlines()
        assert sorted(changed) == sorted(
            [
                f"A\t{OP_DIR}/perf_opt/sleepy_opt_v{n}.py",
                f"{'A' if n == 1 else 'M'}\t{OP_DIR}/perf_opt/opt_log.md",
            ]
        )
        assert rec["change"]["strategy"] in git(
            git_repo.path, "log", "-1", "--format=%s", rec["sha"]
        )
        assert rec["environment"]["backend"] == "cpu"
        assert rec["latency"] is None or rec["latency"]["q1_us"] is not None
        if rec["verdict"] == "better":
            best_sha = rec["sha"]
    assert outcome.best_us < outcome.baseline_us
    assert outcome.improvement_pct > 0

    delivery = "tunebot/sleepy/best"
    log = parse_opt_log(git(git_repo.path, "show", f"{delivery}:{OP_DIR}/perf_opt/opt_log.md"))
    assert [row.iter for row in log.rows] == [r["iteration"] for r in iterations]
    assert log.conclusion.stop_reason == outcome.stop_reason
    report = parse_report(outcome.report)
    assert report.iterations == outcome.iterations and report.operator == "sleepy"
    assert report.stop_reason == outcome.stop_reason
    assert outcome.drift_pct is not None and "drifted" in report.summary, (
        "the end-of-run re-measure is reported"
    )
    tree = git(git_repo.path, "ls-tree", "-r", "--name-only", delivery).splitlines()
    for name in ["sleepy.py", "baseline.py", "opt_log.md", "results.jsonl"]:
        assert f"{OP_DIR}/perf_opt/{name}" in tree
    for rec in iterations:
        assert rec["path"] in tree
    best_file = git(git_repo.path, "show", f"{delivery}:{OP_DIR}/perf_opt/sleepy.py")
    best_rec = [r for r in iterations if r["verdict"] == "better"][-1]
    assert best_file == git(git_repo.path, "show", f"{best_rec['sha']}:{best_rec['path']}")
    proposals = LocalForge(git_repo.path).list_proposals("open")
    assert [p.head for p in proposals] == [delivery]
    assert "## Stage Result" in proposals[0].body and "xychart-beta" in proposals[0].body


def test_variant_failing_l0_is_recorded_and_never_a_parent(git_repo):
    add_sleepy_op(git_repo, WRONG_AT=32)
    tune(git_repo.path, max_iters=4, strategies=("block_size",))
    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    failed = [r for r in iterations if r["verdict"] == "fail_l0"]
    assert failed, "BLOCK=32 returns a wrong result and must fail L0"
    assert all(r["latency"] is None for r in failed), "latency is only measured after L0 passed"
    failed_shas = {r["sha"] for r in failed}
    assert not any(r["parent"] in failed_shas for r in iterations)


def test_hanging_and_crashing_variants_are_results_and_the_run_goes_on(git_repo):
    tune_yaml = (OP_FILES / "tune.yaml").read_text().replace("timeout_s: 60", "timeout_s: 4")
    add_sleepy_op(git_repo, tune_yaml=tune_yaml, HANG_AT=32, CRASH_AT=128)
    outcome = tune(git_repo.path, max_iters=5, strategies=("block_size",))
    by_block = {r["change"]["new"]: r for r in records(git_repo.path) if r["kind"] == "iteration"}
    assert by_block[32]["verdict"] == "timeout" and by_block[32]["accuracy"]["status"] == "timeout"
    assert by_block[128]["verdict"] == "error" and "SIGSEGV" in by_block[128]["accuracy"][
        "tail"
    ] + by_block[128]["accuracy"].get("reason", "")
    assert any(r["verdict"] == "better" for r in by_block.values()), (
        "the run carried on and found a gain"
    )
    assert outcome.best_us < outcome.baseline_us
    report = parse_report(outcome.report)
    assert "timeout" in report.issues and "error" in report.issues


def test_rerun_after_completion_duplicates_nothing(git_repo):
    add_sleepy_op(git_repo)
    first = tune(git_repo.path, max_iters=3)
    lines = records(git_repo.path)
    branches = git(git_repo.path, "branch", "--list", "tunebot/*")
    second = tune(git_repo.path, max_iters=3)
    assert records(git_repo.path) == lines
    assert git(git_repo.path, "branch", "--list", "tunebot/*") == branches
    assert second.proposal.id == first.proposal.id
    assert len(LocalForge(git_repo.path).list_proposals(None)) == 1


def test_dry_run_writes_nothing(git_repo):
    add_sleepy_op(git_repo)
    result = CliRunner().invoke(main, ["tune", "sleepy", "--repo", str(git_repo.path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "block_size" in result.output or "BLOCK" in result.output
    assert git(git_repo.path, "branch", "--list", "tunebot/*") == ""
    assert not (git_repo.path / ".git/tunebot/runs/testproj/sleepy/results.jsonl").exists()
    assert not (git_repo.path / ".git/tunebot/worktrees").exists()
    assert git(git_repo.path, "worktree", "list").count("\n") == 0, "no worktree was added"


def test_unknown_op_and_malformed_config_exit_2(git_repo):
    add_sleepy_op(git_repo)
    runner = CliRunner()
    result = runner.invoke(main, ["tune", "sleepie", "--repo", str(git_repo.path)])
    assert result.exit_code == 2
    assert "testproj/sleepy" in result.output
    make_commit(
        git_repo,
        {
            f"{OP_DIR}/tune.yaml": "knobs:\n  - name: BLOCK\n    strategy: block_size\n    values: []\n"
        },
        "break tune.yaml",
    )
    result = runner.invoke(main, ["tune", "sleepy", "--repo", str(git_repo.path)])
    assert result.exit_code == 2
    assert "tune.yaml" in result.output and "values" in result.output


def test_merge_needs_approval_then_merges_and_cleans_up(git_repo):
    add_sleepy_op(git_repo)
    tune(git_repo.path, max_iters=2)
    runner = CliRunner()
    repo_arg = ["--repo", str(git_repo.path)]
    listing = runner.invoke(main, ["proposals", *repo_arg])
    assert "tunebot/sleepy/best -> main" in listing.output
    refused = runner.invoke(main, ["merge", "1", *repo_arg])
    assert refused.exit_code == 3, refused.output
    assert runner.invoke(main, ["approve", "1", *repo_arg]).exit_code == 0
    merged = runner.invoke(main, ["merge", "1", *repo_arg])
    assert merged.exit_code == 0, merged.output
    assert (git_repo.path / OP_DIR / "perf_opt/sleepy.py").exists(), (
        "the clean checkout follows the merge"
    )
    assert git(git_repo.path, "branch", "--list", "tunebot/sleepy/v*") == ""


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(git_repo, tmp_path):
    add_sleepy_op(git_repo)
    results = git_repo.path / ".git/tunebot/runs/testproj/sleepy/results.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "bot.cli",
        "tune",
        "sleepy",
        "--max-iters",
        "5",
        "--repo",
        str(git_repo.path),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    deadline = time.monotonic() + 120
    # Kill while iteration 3 is being measured: iter:2 is recorded and v3's file exists.
    while time.monotonic() < deadline:
        text = results.read_text() if results.exists() else ""
        if (
            '"iter:2"' in text
            and (
                git_repo.path
                / ".git/tunebot/worktrees/testproj__sleepy"
                / OP_DIR
                / "perf_opt/sleepy_opt_v3.py"
            ).exists()
        ):
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = records(git_repo.path)
    recorded = {r["key"]: r for r in before}
    assert "iter:2" in recorded and "stop" not in recorded

    outcome = tune(git_repo.path, max_iters=5)

    after = records(git_repo.path)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)), "no duplicated record"
    assert after[: len(before)] == before, "recorded measurements are kept, not re-measured"
    iterations = [r for r in after if r["kind"] == "iteration"]
    assert [r["iteration"] for r in iterations] == list(range(1, outcome.iterations + 1))
    branches = git(
        git_repo.path, "branch", "--list", "tunebot/sleepy/v*", "--format=%(refname:short)"
    ).split()
    assert sorted(branches) == sorted(f"tunebot/sleepy/v{r['iteration']}" for r in iterations)
    for line in results.read_text().splitlines():
        json.loads(line)  # no torn line


def test_repeated_sigkill_at_random_moments_never_loses_or_duplicates(git_repo):
    """Kill the CLI again and again at arbitrary moments; every recorded line survives, once."""
    import random

    add_sleepy_op(git_repo)
    results = git_repo.path / ".git/tunebot/runs/testproj/sleepy/results.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "bot",
        "tune",
        "sleepy",
        "--max-iters",
        "4",
        "--repo",
        str(git_repo.path),
    ]
    rng = random.Random(7)
    seen: list[dict] = []
    kills = 0
    for _ in range(6):
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            proc.wait(timeout=rng.uniform(0.2, 1.0))  # decisions in one process made runs short
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
        now = records(git_repo.path) if results.exists() else []
        assert now[: len(seen)] == seen, "a recorded line changed or vanished after a kill"
        seen = now
    assert kills >= 3, "the test must really interrupt runs"
    outcome = tune(git_repo.path, max_iters=4)
    final = records(git_repo.path)
    assert final[: len(seen)] == seen
    keys = [r["key"] for r in final]
    assert len(keys) == len(set(keys))
    iterations = [r for r in final if r["kind"] == "iteration"]
    assert [r["iteration"] for r in iterations] == list(range(1, outcome.iterations + 1))
    for rec in iterations:
        assert git(git_repo.path, "rev-parse", rec["branch"]) == rec["sha"]
    assert len(LocalForge(git_repo.path).list_proposals(None)) == 1


def test_restart_with_a_bad_flag_changes_nothing_then_restart_archives_instead_of_deleting(
    git_repo,
):
    add_sleepy_op(git_repo)
    tune(git_repo.path, max_iters=2)
    before = git(git_repo.path, "for-each-ref", "refs/heads/tunebot/")
    lines = records(git_repo.path)
    result = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--restart", "--strategies", "bogus"]
    )
    assert result.exit_code == 2, result.output
    assert git(git_repo.path, "for-each-ref", "refs/heads/tunebot/") == before
    assert records(git_repo.path) == lines

    outcome = tune(git_repo.path, max_iters=1, restart=True)
    assert outcome.iterations == 1
    archived = git(
        git_repo.path, "for-each-ref", "--format=%(refname)", "refs/tunebot/archive/"
    ).split()
    assert any(ref.endswith("/tunebot/sleepy/v2") for ref in archived), (
        "old branches are kept aside"
    )
    old_logs = list((git_repo.path / ".git/tunebot/runs/testproj/sleepy").glob("results.*.jsonl"))
    assert (
        len(old_logs) == 1
        and [json.loads(x) for x in old_logs[0].read_text().splitlines()] == lines
    )


def test_flags_that_contradict_the_recorded_run_are_refused(git_repo):
    add_sleepy_op(git_repo)
    tune(git_repo.path, max_iters=2)
    result = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "4"]
    )
    assert result.exit_code == 2
    assert "--restart" in result.output and "--max-iters 4" in result.output


def test_op_name_shared_by_two_projects_cannot_overwrite_the_other_run(git_repo):
    add_sleepy_op(git_repo)
    other = {
        f"examples/otherproj/sleepy/{name}": (OP_FILES / name).read_text()
        for name in ("sleepy.py", "tune.yaml", "DESIGN.md")
    }
    make_commit(git_repo, other, "a second project with an op of the same name")
    run_tune(
        TuneRequest(repo=git_repo.path, op="testproj/sleepy", max_iters=1),
        LocalForge(git_repo.path),
    )
    branches = git(git_repo.path, "for-each-ref", "refs/heads/tunebot/")
    result = CliRunner().invoke(main, ["tune", "otherproj/sleepy", "--repo", str(git_repo.path)])
    assert result.exit_code == 2 and "testproj/sleepy already has a tunebot run" in result.output
    assert git(git_repo.path, "for-each-ref", "refs/heads/tunebot/") == branches


def test_uncommitted_op_is_a_clear_error(git_repo):
    op = git_repo.path / "examples/testproj/sleepy"
    op.mkdir(parents=True)
    for name in ("sleepy.py", "tune.yaml"):
        shutil.copy2(OP_FILES / name, op / name)
    result = CliRunner().invoke(main, ["tune", "sleepy", "--repo", str(git_repo.path)])
    assert result.exit_code == 2
    assert "not committed" in result.output


def test_tuning_another_branch_proposes_into_that_branch(git_repo):
    git(git_repo.path, "checkout", "-q", "-b", "feature")
    add_sleepy_op(git_repo)
    git(git_repo.path, "checkout", "-q", "main")
    outcome = tune(git_repo.path, max_iters=1, base_ref="feature")
    assert outcome.proposal.base == "feature"
    assert git(git_repo.path, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_crash_between_record_and_ref_is_repaired_on_resume(git_repo, monkeypatch):
    """Deterministic fault injection in the two gaps a SIGKILL only hits by chance."""
    from bot import loop

    add_sleepy_op(git_repo)
    real_create, real_propose = loop.branches.create_branch, LocalForge.propose

    def create_then_die(repo, name, sha):
        if name.endswith("/v2"):
            raise SystemExit("killed after the iter:2 record, before its branch")
        return real_create(repo, name, sha)

    monkeypatch.setattr(loop.branches, "create_branch", create_then_die)
    with pytest.raises(SystemExit):
        tune(git_repo.path, max_iters=3)
    assert "iter:2" in {r["key"] for r in records(git_repo.path)}
    assert git(git_repo.path, "branch", "--list", "tunebot/sleepy/v2") == ""
    monkeypatch.setattr(loop.branches, "create_branch", real_create)

    def propose_then_die(self, *args, **kwargs):
        raise SystemExit("killed after delivery, before the proposal")

    monkeypatch.setattr(LocalForge, "propose", propose_then_die)
    with pytest.raises(SystemExit):
        tune(git_repo.path, max_iters=3)
    assert "delivery" in {r["key"] for r in records(git_repo.path)}
    monkeypatch.setattr(LocalForge, "propose", real_propose)

    outcome = tune(git_repo.path, max_iters=3)
    recs = records(git_repo.path)
    for rec in (r for r in recs if r["kind"] == "iteration"):
        assert git(git_repo.path, "rev-parse", rec["branch"]) == rec["sha"]
    assert len(LocalForge(git_repo.path).list_proposals(None)) == 1 and outcome.proposal.id == "1"


def test_report_and_stop_event_state_the_smallest_detectable_gain_and_warn_above_the_level(
    git_repo,
):
    add_sleepy_op(git_repo)
    make_commit(
        git_repo,
        {".tunebot.yml": "defaults:\n  noise_warn: 0.02\n"},
        "a strict noise warning level",
    )
    events = []
    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="sleepy", max_iters=2),
        LocalForge(git_repo.path),
        events.append,
    )
    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    decided = [r["decision"]["detectable"] for r in iterations if r["decision"]]
    assert decided and all(d >= 0.03 for d in decided)  # never below the 3 % floor
    report = parse_report(outcome.report)
    assert "smallest detectable gain" in report.summary
    assert "too noisy to see gains below" in report.issues and "warning level 2 %" in report.issues
    stop = [e for e in events if e.kind == "stop"][0]
    assert "too noisy" in stop.message and stop.data["detectable"] >= 0.03
