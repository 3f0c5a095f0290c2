"""Deliveries a reviewer can trust (issue 10), on real repos with the local forge.

Each test reproduces one seen problem first: a second run re-finding the merged change
from the untouched op file, proposals for different ops conflicting on a shared file,
proposals opened with no gain or after a cancel.

The sleepy op's latency is 1 ms at BLOCK=64 NUM_STAGES=2, doubled per step away in either
knob, so from the optimum every move is 2x slower and towards it every move is a 50 % gain.
"""

from __future__ import annotations

import itertools
import json
import subprocess

from click.testing import CliRunner
from conftest import make_commit
from test_loop import OP_DIR, OP_FILES, add_sleepy_op, git, records, tune

from bot.cli import main
from bot.forge.local import LocalForge
from bot.record import verdicts
from bot.record.report import parse_report
from bot.run.cancel import cancel
from bot.run.machine import run_tune
from bot.run.request import TuneRequest


def add_named_op(repo, name: str, **knobs: int) -> None:
    """A copy of the sleepy op under another name (examples/testproj/<name>/<name>.py)."""
    source = (OP_FILES / "sleepy.py").read_text()
    for knob, value in knobs.items():
        source = source.replace(f"\n{knob} = ", f"\n{knob} = {value}  # was ", 1)
    folder = f"examples/testproj/{name}"
    make_commit(
        repo,
        {
            f"{folder}/{name}.py": source,
            f"{folder}/tune.yaml": (OP_FILES / "tune.yaml").read_text(),
            f"{folder}/DESIGN.md": (OP_FILES / "DESIGN.md").read_text(),
        },
        f"add {name}",
    )


def approve_and_merge(repo_path, proposal_id: str) -> None:
    forge = LocalForge(repo_path)
    forge.approve(proposal_id, "reviewer")
    forge.merge(proposal_id)


def test_a_second_run_starts_from_the_merged_best_and_proposes_nothing_without_a_gain(git_repo):
    # Seen: after merging the first proposal, a second run re-ran the first change from the
    # untouched op file and proposed it again. Here only NUM_STAGES 1 -> 2 is a gain.
    add_sleepy_op(git_repo, BLOCK=64)
    first = tune(git_repo.path, max_iters=7)  # far ends first: NUM_STAGES 1 -> 4 -> 3 -> 2
    assert first.proposal is not None and first.verdict == verdicts.COMPLETED
    assert first.iterations >= 2
    approve_and_merge(git_repo.path, first.proposal.id)
    merged = (git_repo.path / OP_DIR / "perf_opt/sleepy.py").read_text()
    assert "\nNUM_STAGES = 2" in merged

    result = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "1"]
    )
    assert result.exit_code == 0, result.output
    recs = records(git_repo.path)
    baseline = next(r for r in recs if r["kind"] == "baseline")
    assert baseline["path"] == f"{OP_DIR}/perf_opt/sleepy.py", "the run starts from the merged best"
    assert "starting from the merged best" in result.stdout
    iterations = [r for r in recs if r["kind"] == "iteration"]
    assert iterations, "the second run still tries moves around the merged best"
    assert not any(
        r["change"]["knob"] == "NUM_STAGES" and r["change"]["new"] == 2 for r in iterations
    ), "the merged change is not found again"
    assert all(r["verdict"] != "better" for r in iterations)
    # nothing proposed, and the terminal says why; records and branches stay
    assert len(LocalForge(git_repo.path).list_proposals("open")) == 0
    assert "no proposal: none of the" in result.stdout and "TUNING_NO_GAIN" in result.stdout
    assert git(git_repo.path, "rev-parse", "--verify", "-q", "refs/heads/tunebot/sleepy/best")
    assert (git_repo.path / OP_DIR / "perf_opt/sleepy.py").read_text() == merged, (
        "the base is untouched"
    )
    # the delivery holds this run's iteration files only (the first run's extra ones are gone with its log rows)
    tree = git(git_repo.path, "ls-tree", "-r", "--name-only", "tunebot/sleepy/best").splitlines()
    assert sorted(p for p in tree if "_opt_v" in p) == [f"{OP_DIR}/perf_opt/sleepy_opt_v1.py"]
    base_file = git(git_repo.path, "show", f"tunebot/sleepy/best:{OP_DIR}/perf_opt/baseline.py")
    assert base_file + "\n" == merged, (
        "baseline.py is the source this run's baseline was measured on"
    )


def test_three_ops_tuned_from_one_base_merge_in_every_order(git_repo):
    # Seen: every delivery committed the shared .tunebot/evidence.json, so the second merge conflicted.
    names = ["opa", "opb", "opc"]
    for name in names:
        add_named_op(git_repo, name, BLOCK=64)
    base = git(git_repo.path, "rev-parse", "HEAD")
    for name in names:  # each delivery branch exists whether or not the noise let its gain through
        run_tune(
            TuneRequest(repo=git_repo.path, op=name, max_iters=2, strategies=("pipeline_depth",)),
            LocalForge(git_repo.path),
        )
    deliveries = [f"tunebot/{name}/best" for name in names]
    for order in itertools.permutations(deliveries):
        branch = "try-" + "-".join(d.split("/")[1] for d in order)
        git(git_repo.path, "branch", branch, base)
        clone = git_repo.path.parent / branch
        git(git_repo.path, "worktree", "add", "-q", str(clone), branch)
        for head in order:
            proc = subprocess.run(
                ["git", "merge", "--no-edit", "-q", head],
                check=False,
                cwd=clone,
                capture_output=True,
                text=True,
            )
            assert proc.returncode == 0, (
                f"{order}: merging {head} failed: {proc.stdout}{proc.stderr}"
            )
        tree = git(clone, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
        for name in names:
            assert f"examples/testproj/{name}/perf_opt/{name}.py" in tree
            assert f".tunebot/evidence/testproj/{name}.json" in tree
        assert ".tunebot/evidence.json" not in tree
    # and through the forge itself (the proposals that were opened), in the reverse order of opening
    opened = sorted(LocalForge(git_repo.path).list_proposals("open"), key=lambda p: -int(p.id))
    for proposal in opened:
        approve_and_merge(git_repo.path, proposal.id)
    for proposal in opened:
        name = proposal.head.split("/")[1]
        assert (git_repo.path / f"examples/testproj/{name}/perf_opt/{name}.py").exists()


def test_a_run_with_no_gain_opens_nothing_and_says_why(git_repo):
    # Seen: "+0.0 %" proposals. The op starts at its optimum: every move is slower.
    add_sleepy_op(git_repo, BLOCK=64, NUM_STAGES=2)
    result = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "3"]
    )
    assert result.exit_code == 0, result.output
    assert LocalForge(git_repo.path).list_proposals(None) == []
    assert "no proposal: none of the 3 variants beat the baseline" in result.stdout
    report = parse_report(result.stdout[result.stdout.index("## Stage Result") :])
    assert report.verdict == verdicts.NO_GAIN and report.issues.startswith("no proposal: ")
    assert report.improvement == 0.0
    branches = git(
        git_repo.path, "branch", "--list", "tunebot/*", "--format=%(refname:short)"
    ).split()
    assert branches == [
        "tunebot/sleepy/best",
        "tunebot/sleepy/v1",
        "tunebot/sleepy/v2",
        "tunebot/sleepy/v3",
    ]
    assert [r["kind"] for r in records(git_repo.path)].count("iteration") == 3


def test_a_cancelled_run_proposes_nothing_even_with_a_gain(git_repo):
    # Seen: a cancelled 0-iteration run proposed with verdict TUNING_COMPLETED and issues none.
    add_sleepy_op(git_repo, BLOCK=64)

    def on_event(event):
        if event.kind == "iteration" and event.iteration == 1:
            cancel(git_repo.path, "sleepy")

    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="sleepy", max_iters=5),
        LocalForge(git_repo.path),
        on_event,
    )
    assert outcome.stop_reason == "已取消" and outcome.iterations == 1
    assert outcome.proposal is None and outcome.verdict == verdicts.CANCELLED
    assert "cancelled after 1 iteration" in outcome.no_proposal_reason
    report = parse_report(outcome.report)
    assert report.verdict == verdicts.CANCELLED and "no proposal" in report.issues
    assert LocalForge(git_repo.path).list_proposals(None) == []


def test_a_baseline_that_meets_the_target_tries_and_proposes_nothing(git_repo):
    add_sleepy_op(git_repo)
    outcome = tune(git_repo.path, target_us=1e7)
    assert outcome.iterations == 0 and outcome.proposal is None
    assert outcome.verdict == verdicts.TARGET_ALREADY_MET
    assert "already meets the target" in outcome.no_proposal_reason


def test_nothing_to_try_is_its_own_verdict(git_repo):
    tune_yaml = (
        (OP_FILES / "tune.yaml")
        .read_text()
        .replace("values: [16, 32, 64, 128, 256]", "values: [16]")
    )
    add_sleepy_op(git_repo, tune_yaml=tune_yaml)
    outcome = tune(git_repo.path, strategies=("block_size",))
    assert outcome.iterations == 0 and outcome.proposal is None
    assert outcome.verdict == verdicts.NOTHING_TO_TRY and outcome.stop_reason == "策略耗尽"


def test_a_resumed_finished_run_without_a_proposal_stays_without_one(git_repo):
    add_sleepy_op(git_repo, BLOCK=64, NUM_STAGES=2)
    first = tune(git_repo.path, max_iters=2)
    lines = records(git_repo.path)
    again = tune(git_repo.path, max_iters=2)
    assert first.proposal is None and again.proposal is None
    assert records(git_repo.path) == lines
    assert again.no_proposal_reason == first.no_proposal_reason


def test_iteration_records_carry_a_reason_and_the_log_shows_verdict_and_reason(git_repo):
    add_sleepy_op(git_repo, BLOCK=64, WRONG_AT=128)
    result = CliRunner().invoke(
        main,
        ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "4", "--patience", "4"],
    )
    assert result.exit_code == 0, result.output
    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    assert all(r["reason"] for r in iterations)
    lines = [line for line in result.stdout.splitlines() if line.startswith("  iter ")]
    assert len(lines) == len(iterations)
    for line, rec in zip(lines, iterations, strict=False):
        # both gains, the verdict and its reason on every line, numbers before the reason
        assert (
            "vs baseline" in line
            and "vs best" in line
            and f"{rec['verdict']}: {rec['reason']}" in line
        )
    log = git(git_repo.path, "show", f"tunebot/sleepy/best:{OP_DIR}/perf_opt/opt_log.md")
    assert "| iter | 策略 | latency(us) | 提升 | 精度 | verdict | reason |" in log
    for rec in iterations:
        assert f"| {rec['verdict']} | " in log
    start = next(r for r in records(git_repo.path) if r["kind"] == "start")
    assert start["settings"]["patience"] == 4
    refused = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--patience", "2"]
    )
    assert refused.exit_code == 2 and "--patience 2" in refused.output
    assert json.loads(json.dumps(start))  # the records stay strict JSON


def test_a_restarted_run_without_a_gain_closes_the_earlier_runs_open_proposal(git_repo):
    # The earlier proposal follows tunebot/<op>/best, which the restarted run re-creates: left open,
    # it would offer this run's (no-gain) delivery under the earlier run's body.
    add_sleepy_op(git_repo, BLOCK=64)
    first = tune(git_repo.path, max_iters=2, strategies=("pipeline_depth",))
    assert first.proposal is not None, first.no_proposal_reason
    result = CliRunner().invoke(
        main,
        ["tune", "sleepy", "--repo", str(git_repo.path), "--restart", "--target-us", "10000000"],
    )
    assert result.exit_code == 0, result.output
    assert f"note: closed proposal #{first.proposal.id}" in result.stdout
    assert LocalForge(git_repo.path).get(first.proposal.id).state == "closed"
    assert "TUNING_TARGET_ALREADY_MET" in result.stdout


def test_an_op_edited_after_its_merged_best_is_tuned_from_the_edit(git_repo):
    # The developer's newer <op>.py wins over a merged best tuned from an older version of it.
    add_sleepy_op(git_repo, BLOCK=64)
    first = tune(git_repo.path, max_iters=2, strategies=("pipeline_depth",))
    assert first.proposal is not None, first.no_proposal_reason
    approve_and_merge(git_repo.path, first.proposal.id)
    source = (git_repo.path / OP_DIR / "sleepy.py").read_text()
    make_commit(
        git_repo,
        {f"{OP_DIR}/sleepy.py": source.replace("\nWRONG_AT = -1", "\nWRONG_AT = -2", 1)},
        "rework the op",
    )
    result = CliRunner().invoke(
        main, ["tune", "sleepy", "--repo", str(git_repo.path), "--max-iters", "1"]
    )
    assert result.exit_code == 0, result.output
    baseline = next(r for r in records(git_repo.path) if r["kind"] == "baseline")
    assert baseline["path"] == f"{OP_DIR}/sleepy.py"
    assert f"{OP_DIR}/sleepy.py changed after the merged best" in result.stdout
