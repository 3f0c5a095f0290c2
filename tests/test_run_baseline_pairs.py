"""On a backend that times pairs (cpu), the baseline's latency is the first comparison's: the
first pair times the baseline side by side with the first candidate, so no separate
measurement comes first. Real repos, real subprocesses, the real Evaluator (counted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_loop import OP_DIR, OP_FILES, add_sleepy_op, git, records

from bot.forge.local import LocalForge
from bot.measure.evaluator import Evaluator
from bot.record.opt_log import parse_opt_log
from bot.run.machine import run_tune
from bot.run.request import TuneRequest


class CountingEvaluator(Evaluator):
    """The real Evaluator, noting every latency measurement it makes, in order."""

    calls: list[str] = []

    def latency(self, source):
        CountingEvaluator.calls.append(f"alone {Path(source).name}")
        return super().latency(source)

    def latency_pair(self, a, b):
        CountingEvaluator.calls.append(f"pair {Path(a).name} {Path(b).name}")
        return super().latency_pair(a, b)


def tune(repo_path: Path, factory=Evaluator, **kwargs):
    return run_tune(
        TuneRequest(repo=repo_path, op="sleepy", **kwargs),
        LocalForge(repo_path),
        evaluator_factory=factory,
    )


def test_the_first_pair_times_the_baseline_and_nothing_is_measured_before_it(git_repo):
    add_sleepy_op(git_repo)
    CountingEvaluator.calls = []
    outcome = tune(git_repo.path, CountingEvaluator, max_iters=2, strategies=("block_size",))
    recs = records(git_repo.path)
    kinds = [r["kind"] for r in recs]
    assert kinds[:3] == ["start", "baseline", "iteration"]
    base, first = recs[1], recs[2]
    assert CountingEvaluator.calls[0] == "pair sleepy.py sleepy_opt_v1.py", (
        "the first latency measurement of the run is the first candidate's pair"
    )
    assert not any(c.startswith("alone") for c in CountingEvaluator.calls[:-1]), (
        "nothing is timed alone before the end-of-run re-measure"
    )
    assert base["paired_with"] == {"iteration": 1, "source_hash": first["source_hash"]}
    assert any("side by side with iteration 1's candidate" in n for n in base["latency"]["notes"])
    assert base["latency"]["median_us"] == first["decision"]["details"]["first"]["best_us"]
    assert len(base["latency"]["samples_us"]) == 10  # half of tune.yaml's 21 repeats
    assert outcome.baseline_us == base["latency"]["median_us"]
    # opt_log's baseline is the recorded one: the first pair's best side
    log = parse_opt_log(
        git(git_repo.path, "show", f"tunebot/sleepy/best:{OP_DIR}/perf_opt/opt_log.md")
    )
    assert log.baseline_us == pytest.approx(base["latency"]["median_us"], rel=1e-3)
    end = next(r for r in recs if r["kind"] == "baseline_end")
    assert CountingEvaluator.calls[-1] == "pair sleepy.py sleepy_opt_v1.py", (
        "re-measured at the end as at the start: beside the same candidate"
    )
    assert any("as at the start" in n for n in end["latency"]["notes"])
    assert end["drift_pct"] is not None and outcome.drift_pct == end["drift_pct"]


def test_a_baseline_the_first_pair_finds_under_the_target_records_no_iteration(git_repo):
    add_sleepy_op(git_repo)
    CountingEvaluator.calls = []
    outcome = tune(git_repo.path, CountingEvaluator, max_iters=3, target_us=1e9)
    recs = records(git_repo.path)
    base = next(r for r in recs if r["kind"] == "baseline")
    assert CountingEvaluator.calls[0] == "pair sleepy.py sleepy_opt_v1.py"
    assert base["paired_with"]["iteration"] == 1
    assert any("not recorded: the baseline already meets" in n for n in base["latency"]["notes"])
    assert outcome.iterations == 0 and "iteration" not in [r["kind"] for r in recs]
    assert outcome.stop_reason == "达目标"
    end = next(r for r in recs if r["kind"] == "baseline_end")
    assert end["drift_pct"] is None, "timed alone at the end: not like the start, no drift"


def test_a_target_the_baseline_misses_changes_nothing_of_the_run(git_repo):
    add_sleepy_op(git_repo)
    outcome = tune(git_repo.path, max_iters=2, target_us=1e-3)
    recs = records(git_repo.path)
    assert [r["kind"] for r in recs][:3] == ["start", "baseline", "iteration"]
    assert recs[1]["paired_with"]["iteration"] == 1 and outcome.iterations == 2


def test_a_first_candidate_failing_l0_gets_a_baseline_timed_alone_recorded_before_it(git_repo):
    # the planner's first block_size probe from BLOCK=16 is the far end, 256
    add_sleepy_op(git_repo, WRONG_AT=256)
    CountingEvaluator.calls = []
    tune(git_repo.path, CountingEvaluator, max_iters=2, strategies=("block_size",))
    recs = records(git_repo.path)
    assert [r["kind"] for r in recs][:3] == ["start", "baseline", "iteration"]
    assert recs[2]["verdict"] == "fail_l0" and recs[2]["change"]["new"] == 256
    assert "paired_with" not in recs[1]
    assert CountingEvaluator.calls[0] == "alone sleepy.py"
    end = next(r for r in recs if r["kind"] == "baseline_end")
    assert CountingEvaluator.calls[-1] == "alone sleepy.py" and end["drift_pct"] is not None


class DiesInFirstCompare(Evaluator):
    died = False

    def compare(self, *args):
        if not DiesInFirstCompare.died:
            DiesInFirstCompare.died = True
            raise SystemExit("killed while timing the first pair")
        return super().compare(*args)


def test_killed_before_the_baseline_is_recorded_resumes_and_records_it_once(git_repo):
    add_sleepy_op(git_repo)
    with pytest.raises(SystemExit):
        tune(git_repo.path, DiesInFirstCompare, max_iters=2, strategies=("block_size",))
    assert [r["kind"] for r in records(git_repo.path)] == ["start"]
    tune(git_repo.path, max_iters=2, strategies=("block_size",))
    recs = records(git_repo.path)
    assert [r["kind"] for r in recs].count("baseline") == 1
    keys = [r["key"] for r in recs]
    assert len(keys) == len(set(keys)) and keys[:3] == ["start", "baseline", "iter:1"]
    assert recs[1]["paired_with"]["iteration"] == 1


def test_killed_between_the_baseline_and_its_iteration_resumes_without_a_second_baseline(
    git_repo, monkeypatch
):
    from bot.run import iterate as loop

    add_sleepy_op(git_repo)
    real = loop.commits.commit_files

    def die(*args, **kwargs):
        raise SystemExit("killed after the baseline record, before iteration 1's")

    monkeypatch.setattr(loop.commits, "commit_files", die)
    with pytest.raises(SystemExit):
        tune(git_repo.path, max_iters=2, strategies=("block_size",))
    recs = records(git_repo.path)
    assert [r["kind"] for r in recs] == ["start", "baseline"]
    paired = recs[1]["paired_with"]
    monkeypatch.setattr(loop.commits, "commit_files", real)
    outcome = tune(git_repo.path, max_iters=2, strategies=("block_size",))
    recs = records(git_repo.path)
    assert [r["kind"] for r in recs].count("baseline") == 1
    first = next(r for r in recs if r["kind"] == "iteration")
    assert first["iteration"] == 1 and first["source_hash"] == paired["source_hash"], (
        "the resumed run plans the same first candidate the baseline was timed beside"
    )
    assert outcome.drift_pct is not None


def test_a_backend_without_pairs_still_times_the_baseline_alone_first(git_repo, tmp_path):
    # a `command` benchmark times one variant per process: its first look needs the baseline
    harness = tmp_path / "bench.py"
    harness.write_text(
        "import json\nprint(json.dumps({'samples': [100.0, 101.0, 99.0], 'unit': 'us'}))\n"
    )
    tune_yaml = (
        (OP_FILES / "tune.yaml")
        .read_text()
        .replace(
            "  backend: cpu\n",
            f"  backend: command\n  command: ['{{python}}', {json.dumps(str(harness))}, '{{source}}']\n",
        )
    )
    add_sleepy_op(git_repo, tune_yaml=tune_yaml)
    CountingEvaluator.calls = []
    tune(git_repo.path, CountingEvaluator, max_iters=1, strategies=("block_size",))
    base = next(r for r in records(git_repo.path) if r["kind"] == "baseline")
    assert CountingEvaluator.calls[:2] == ["alone sleepy.py", "alone sleepy_opt_v1.py"]
    assert "paired_with" not in base
