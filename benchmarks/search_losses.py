"""Why tunebot loses a landscape to random search or TPE (benchmarks/search_quality.py).

    python benchmarks/search_losses.py benchmarks/results/search_quality_heldout_5000.json
    python benchmarks/search_losses.py OUT.json --budget 10 --seeds 30 --json losses.json

Reads a search_quality JSON (its random and TPE median runs per generated landscape; both are
fixed by their seeds), re-runs tunebot (patience 3, the loop's own decision) on the same
landscapes with the checkout under test, and classifies every landscape where tunebot's
median run is below random's or TPE's:

- floor: the point tunebot's median run kept is within the 3 % noise floor of the optimum
  (optimum / kept > 1 / 1.03): every better point is a gain under 3 %, which the seed's
  rule calls noise, so winning needs breaking that rule (or luck in the path taken);
- stuck: most losing runs kept a point that no single change improves by 3 % or more (a
  local optimum under the floor: winning needs two changes at once or a gain under 3 %,
  both against the seed's rules);
- budget: most losing runs stopped because the budget ran out (with one measurement
  left a run cannot confirm a win, which takes two: that counts as the budget too);
- patience: most losing runs stopped for patience with budget left;
- other: most losing runs stopped because the planner was exhausted.

Only generated landscapes are classified (the demo sweeps need their op's files).

`--why` also says, for every losing landscape, what its losing runs most often missed: the
truly best single change from the point a run kept (true medians), and why the run did not
make it (`missed`):

- floor/stuck: no single change from the kept point gains 3 % or more;
- knob never tried: the change is on a knob the run never measured (the budget ran out first);
- best value measured, lost: the run measured that value of that knob, from another best
  (the context changed since: coupled knobs) or within the noise;
- valley: a value between the kept one and the better one was measured and lost;
- inside not reached: the knob's far end beyond the better value lost (or it is the far
  end's neighbourhood) and the value inside was never measured;
- side never probed: nothing on that side of the knob was measured from any best.

`--oracle` also runs a greedy oracle on every landscape: it knows the true medians and always
tries the single change that is truly fastest from its best (one change per iteration, never
the same move twice), decided and charged exactly as tunebot's (`decide_in_pairs`; the
baseline timed in the first pair, as the loop times it). What it wins is a bound on what better choices of moves could
win under the same decision rule and measurement costs.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_quality as sq  # noqa: E402

from bot.measure.decide import Rule  # noqa: E402
from bot.measure.pairs import PairSpread, decide_in_pairs  # noqa: E402
from bot.strategies.planner import Planner  # noqa: E402

FLOOR = 0.03


def stuck(land: sq.Landscape, point: tuple[int, ...]) -> bool:
    """No single-knob change of `point` is 3 % faster or more (true medians)."""
    here = land.true[point]
    for i, values in enumerate(land.values):
        for v in values:
            other = point[:i] + (v,) + point[i + 1 :]
            if land.true[other] * (1 + FLOOR) <= here:
                return False
    return True


def run_oracle(land: sq.Landscape, budget: int, rng: random.Random) -> float:
    """True median of the point a greedy oracle keeps (see the module doc)."""
    sim = sq.Simulator(land, budget, rng)
    best, best_path = land.start, Path("p0.py")
    sim.points[best_path] = best  # the baseline: timed in the first pair, as tunebot's
    tried: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    spread = PairSpread()  # learned over the run, as tunebot's
    n = 0
    while True:
        moves = [
            (land.true[p], p)
            for i, values in enumerate(land.values)
            for v in values
            for p in [best[:i] + (v,) + best[i + 1 :]]
            if p != best and (best, p) not in tried and land.true[p] != sq.FAILED
        ]
        if not moves:
            break
        point = min(moves)[1]
        tried.add((best, point))
        n += 1
        path = Path(f"p{n}.py")
        sim.points[path] = point
        try:
            _, d = decide_in_pairs(best_path, path, sim.pair, Rule(), spread)
        except sq.Budget:
            break
        if d.better:
            best, best_path = point, path
    return land.true[best]


def missed(land: sq.Landscape, info: dict) -> str:
    """Why a run that kept `info["kept"]` missed the truly best single change (module doc)."""
    from bot.strategies.space import FAILED_VERDICTS

    kept, history = info["kept"], info["history"]
    best: tuple[float, int, int] | None = None
    for i, values in enumerate(land.values):
        for v in values:
            t = land.true[kept[:i] + (v,) + kept[i + 1 :]]
            if t != sq.FAILED and (best is None or t < best[0]):
                best = (t, i, v)
    assert best is not None  # the kept point itself passes L0
    t, i, v = best
    if t * (1 + FLOOR) > land.true[kept]:
        return "floor/stuck"
    mine = [a for a in history if a.change.knob == land.names[i]]
    if not mine:
        return "knob never tried"
    if any(a.change.new == v and a.verdict not in FAILED_VERDICTS for a in mine):
        return "best value measured, lost"
    lo, hi = sorted((kept[i], v))
    if any(lo < a.change.new < hi and a.verdict != "better" for a in mine):
        return "valley"
    up = v > kept[i]
    if any(a.verdict != "better" and (a.change.new > v if up else a.change.new < v) for a in mine):
        return "inside not reached"
    return "side never probed"


def classify(land: sq.Landscape, budget: int, seeds: int, target: float) -> tuple[str, float, dict]:
    """(class, tunebot's median fraction, details) for one landscape against `target`."""
    planner = Planner(land.op)
    runs = []
    for s in range(seeds):
        info: dict = {}
        found, used = sq.run_tunebot(
            land, budget, random.Random(s), sq.PATIENCE, planner, info=info
        )
        wins = sum(a.verdict == "better" for a in info["history"])
        runs.append(
            (
                land.optimum / found,
                info["stop"],
                used,
                wins,
                len(info["history"]),
                stuck(land, info["kept"]),
                missed(land, info),
            )
        )
    median = statistics.median(r[0] for r in runs)
    losing = [r for r in runs if r[0] + 1e-9 < target]
    # a run left with one measurement cannot confirm a win (a decision needs two): budget
    stops = collections.Counter(
        "budget" if r[1] == "patience" and r[2] >= budget - 1 else r[1] for r in losing
    )
    details = {
        "median": median,
        "target": target,
        "losing_runs": len(losing),
        "stops": dict(stops),
        "mean_wins": statistics.fmean(r[3] for r in runs),
        "mean_attempts": statistics.fmean(r[4] for r in runs),
        "missed": dict(collections.Counter(r[6] for r in losing)),
    }
    if median + 1e-9 >= target:
        return "win", median, details
    if median > 1 / (1 + FLOOR):
        return "floor", median, details
    if sum(r[5] for r in losing) * 2 > len(losing):
        return "stuck", median, details
    top = stops.most_common(1)[0][0] if stops else "exhausted"
    return {"budget": "budget", "patience": "patience"}.get(top, "other"), median, details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="a search_quality JSON (random and TPE runs)")
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write every landscape's class here")
    parser.add_argument(
        "--oracle", action="store_true", help="also count the greedy oracle's wins (module doc)"
    )
    parser.add_argument(
        "--why", action="store_true", help="also count what the losing runs missed (module doc)"
    )
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text())
    counts: collections.Counter = collections.Counter()
    why: collections.Counter = collections.Counter()
    by_knobs: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    rows = []
    oracle_wins = 0
    for res in data["landscapes"]:
        name = res["landscape"]
        if not name.startswith("generated/"):
            continue
        row = res["budgets"][str(args.budget)]
        target = max(row["random"]["median"], row.get("tpe", row["random"])["median"])
        land = sq.generate(int(name.split("/")[1]), data["spread"])
        cls, median, details = classify(land, args.budget, args.seeds, target)
        if args.oracle:
            found = [run_oracle(land, args.budget, random.Random(s)) for s in range(args.seeds)]
            details["oracle_median"] = statistics.median(land.optimum / f for f in found)
            oracle_wins += details["oracle_median"] + 1e-9 >= target
        counts[cls] += 1
        if cls != "win":
            why[collections.Counter(details["missed"]).most_common(1)[0][0]] += 1
        by_knobs[len(land.names)][cls] += 1
        rows.append({"landscape": name, "class": cls, "knobs": len(land.names), **details})
        if cls != "win":
            print(
                f"{name}: {cls}: tunebot {median:.1%} < {target:.1%} "
                f"(losing runs {details['losing_runs']}, stops {details['stops']}, "
                f"wins/run {details['mean_wins']:.1f})"
            )
    n = sum(counts.values())
    print(
        f"\n{n} landscapes, budget {args.budget}: "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common())
    )
    reachable = n - counts["floor"] - counts["stuck"]
    print(
        f"best reachable within the seed's rules (floor and stuck lost): {reachable}/{n} "
        f"({reachable / max(n, 1):.0%})"
    )
    if args.why:
        print(
            "what the losing runs missed most often: "
            + ", ".join(f"{k} {v}" for k, v in why.most_common())
        )
    if args.oracle:
        print(f"greedy oracle (true medians known, same decisions and costs): {oracle_wins}/{n}")
    for k in sorted(by_knobs):
        print(f"  {k} knobs: " + ", ".join(f"{c} {v}" for c, v in by_knobs[k].most_common()))
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "landscapes": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
