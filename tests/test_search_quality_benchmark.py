"""benchmarks/search_quality.py: the generated family is fixed by its seed and covers the shapes it
promises; every method stays within its measurement budget; a tiny run prints its verdicts."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import search_quality as sq  # noqa: E402

from bot.strategies.planner import Planner  # noqa: E402


def test_generated_landscapes_are_fixed_by_their_seed_and_varied():
    a, b = sq.generate(3, 0.05), sq.generate(3, 0.05)
    assert a.true == b.true and a.start == b.start and a.source == b.source
    family = [sq.generate(seed, 0.05) for seed in range(40)]
    assert {len(land.names) for land in family} == {2, 3, 4}
    edge = inside = below = 0
    for land in family:
        best = min((v, p) for p, v in land.true.items())[1]
        for i, values in enumerate(land.values):
            at = values.index(best[i])
            edge += at in (0, len(values) - 1)
            inside += 0 < at < len(values) - 1
            below += best[i] < land.start[i]
        assert land.true[land.start] != sq.FAILED
    assert edge and inside and below  # optima at the edges, inside, and below the baseline value
    assert any(v == sq.FAILED for land in family for v in land.true.values())  # some points fail L0


def test_every_method_spends_at_most_its_budget_of_measurements():
    land = sq.generate(5, 0.05)
    planner = Planner(land.op)
    for budget in (3, 10):
        for seed in range(3):
            found, used = sq.run_tunebot(land, budget, random.Random(seed), None, planner)
            assert used <= budget and found in land.true.values()
            found, used = sq.run_tunebot(
                land, budget, random.Random(seed), None, planner, pairs=False
            )
            assert used <= budget
    sim = sq.Simulator(land, 2, random.Random(0))
    sim.measure_point(land.start)
    sim.measure_point(land.start)
    try:
        sim.measure_point(land.start)
    except sq.Budget:
        pass
    else:
        raise AssertionError("a third measurement on a budget of 2 must be refused")


def test_a_tiny_run_prints_the_verdicts():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "search_quality.py"),
            "--generated",
            "2",
            "--seeds",
            "2",
            "--tpe-seeds",
            "0",
            "--budgets",
            "6",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| generated/1 |" in proc.stdout and "budget 6, tunebot:" in proc.stdout
    assert "TPE not compared (--tpe-seeds 0): the goal is not judged" in proc.stdout


def test_without_optuna_the_run_stops_instead_of_counting_wins_against_tpe(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    assert sq.main(["--no-demo", "--generated", "1", "--seeds", "1", "--tpe-seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "optuna is not installed" in err and "--tpe-seeds 0" in err


def test_a_landscape_tpe_did_not_run_on_is_no_win_against_it():
    row = {"tunebot": {"median": 1.0}, "random": {"median": 0.5}}
    results = [{"budgets": {"10": dict(row)}} for _ in range(10)]
    v = sq.verdicts(results, 10)
    assert v["at_least_random"] == 10 and v["at_least_tpe"] == 0 and v["at_least_both"] == 0
    assert not v["tpe_compared"] and not v["goal_beats_both_on_90pct"]


def test_every_generated_value_is_reachable_by_the_planner_as_by_random():
    from bot.strategies import knobs

    for seed in range(40):
        land = sq.generate(seed, 0.05)
        for knob in land.op.knobs:
            refused = [v for v in knob.values if knobs.check_constraints(knob, v) is not None]
            assert not refused, (land.name, knob.name, refused)


def test_wilson_interval_brackets_the_proportion():
    low, high = sq.wilson(80, 100)
    assert 0.70 < low < 0.80 < high < 0.88
    assert sq.wilson(0, 10)[0] == 0.0 and sq.wilson(10, 10)[1] == 1.0


def test_the_greedy_oracle_pays_like_tunebot_and_walks_to_the_optimum():
    import search_losses as sl

    for seed in (0, 2, 4):
        land = sq.generate(seed, 0.05)
        start = land.true[land.start]
        assert sl.run_oracle(land, 1, random.Random(0)) == start  # the baseline only
        # the baseline and one confirmed win (two pairs): one change, not yet the optimum
        three = sl.run_oracle(land, 3, random.Random(0))
        assert land.optimum < three < start
        assert sl.run_oracle(land, 40, random.Random(0)) == land.optimum


def test_tunebot_pays_for_the_baseline_where_the_loop_times_it_alone(monkeypatch):
    """As bot/run/iterate.py: with pairs the first pair times the baseline (no measurement of
    its own); alone first without pairs, and alone when the first candidate fails L0."""
    alone: list[tuple[int, ...]] = []
    real = sq.Simulator.measure_point

    def counted(self, point):
        alone.append(point)
        return real(self, point)

    monkeypatch.setattr(sq.Simulator, "measure_point", counted)
    land = sq.generate(5, 0.05)
    planner = Planner(land.op)
    sq.run_tunebot(land, 10, random.Random(0), None, planner)
    assert alone == [], "with pairs nothing is timed alone"
    sq.run_tunebot(land, 10, random.Random(0), None, planner, pairs=False)
    assert alone[0] == land.start, "without pairs the baseline comes first, alone"
    alone.clear()
    info: dict = {}
    sq.run_tunebot(land, 10, random.Random(0), None, planner, info=info)
    first = sq.point_of(land, land.source)
    move = info["history"][0].change
    first = tuple(move.new if n == move.knob else v for n, v in zip(land.names, first, strict=True))
    land.true[first] = sq.FAILED
    sq.run_tunebot(land, 10, random.Random(0), None, planner)
    assert alone == [land.start], "a first candidate failing L0: the baseline alone, once"


def test_random_and_tpe_pay_no_measurement_for_a_point_failing_l0(monkeypatch):
    # tunebot's L0 failures cost no latency measurement; random's and TPE's must not either
    # (they were charged one until 2026-12-01's fourth session, which flattered tunebot)
    land = sq.generate(5, 0.05)
    fail = [p for p in land.space if p != land.start][::2]  # half the points fail L0
    for p in fail:
        land.true[p] = sq.FAILED
    measured: list[tuple[int, ...]] = []
    real = sq.Simulator.measure_point

    def counted(self, point):
        measured.append(point)
        return real(self, point)

    monkeypatch.setattr(sq.Simulator, "measure_point", counted)
    for seed in range(3):
        measured.clear()
        sq.run_random(land, 10, random.Random(seed))
        assert len(measured) == 10 and not set(measured) & set(fail)
    monkeypatch.setattr(sq, "L0_CHARGED", True)  # the old model, for comparisons
    measured.clear()
    sq.run_random(land, 10, random.Random(0))
    assert len(measured) < 10
    monkeypatch.setattr(sq, "L0_CHARGED", False)
    try:
        import optuna  # noqa: F401
    except ImportError:
        return
    measured.clear()
    sq.run_tpe(land, 10, 0)
    assert len(measured) == 10


def test_rerun_reproduces_the_tunebot_columns_and_copies_random_and_tpe(tmp_path):
    # search_rerun.py re-runs tunebot with the checkout under test: with the same planner it
    # must give exactly the columns search_quality wrote (a side-by-side is only fair if so)
    import json

    import search_rerun

    land = sq.generate(5, 0.05)
    res = sq.evaluate(land, [10], 3, 1, have_tpe=False)
    res["budgets"]["10"]["tpe"] = {"median": 0.5, "p10": 0.4, "mean": 0.5, "n": 1}  # copied
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"command": "x", "spread": 0.05, "landscapes": [res]}))
    out = tmp_path / "out.json"
    assert search_rerun.main([str(src), "--seeds", "3", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["landscapes"]
    assert row["budgets"] == res["budgets"]
    # a different planner shows: the columns are re-run, not copied
    res["budgets"]["10"]["tunebot"]["median"] = -1.0
    src.write_text(json.dumps({"command": "x", "spread": 0.05, "landscapes": [res]}))
    assert search_rerun.main([str(src), "--seeds", "3", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["landscapes"]
    assert row["budgets"]["10"]["tunebot"]["median"] > 0


def test_the_ceiling_of_one_change_moves_bounds_steepest_descent_and_holds_the_start():
    import search_ceiling as sc

    for seed in (8544, 8289, 5):
        land = sq.generate(seed, 0.05)
        best, stop = sc.reachable_best(land), sc.steepest(land)
        # steepest descent is one of the chains; neither is slower than the start, nor faster
        # than the optimum
        assert land.optimum <= best <= stop <= land.true[land.start]
    # seed 8544: the optimum (2, 3) is one move of each knob from the start (4, 4), and the
    # first knob's move alone is already faster: a chain of one-change moves reaches it
    land = sq.generate(8544, 0.05)
    assert sc.reachable_best(land) == land.optimum
