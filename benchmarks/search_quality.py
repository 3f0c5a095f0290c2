"""Search quality: the tunebot planner vs random search vs Optuna TPE, replayed on measured sweeps.

Reads the exhaustive sweep tables of the demo ops (benchmarks/data/sweep_<project>_<op>.json,
written by benchmarks/sweep.py: the median and IQR of every knob point, measured on
this project's CPU backend) and replays each search method on them at equal budgets:

- every method starts from the op's baseline point, which counts as one evaluation;
- an evaluation returns the point's measured median times (1 + e), e ~ Normal(0, sigma):
  the noise of a *median of `repeats` samples* (what a run measures; the op's
  latency.repeats, 30 by default), sigma = 1.2533 * sd / sqrt(repeats), where the
  per-sample sd is that point's measured relative IQR / 1.349. `--noise-scale` multiplies
  sigma (e.g. --noise-scale 5.5 is roughly one raw sample per evaluation);
- each method keeps the point it *measured* best; it is scored by that point's *true*
  (tabled) median: fraction = optimum_median / found_median (1.0 = found the optimum).

tunebot runs the real Planner on the op's real source, with the loop's decision rule
(better only if the measured gain >= the 3 % noise floor). "tunebot" stops only at the
budget or when the planner is exhausted; "tunebot (patience 3)" also stops after three
evaluations in a row without gain, as a default run does (it then spends fewer than
the budget). Random search draws distinct points uniformly and keeps the one it measured
fastest; "random, same decision rule" visits points in random order but adopts one only
when the loop's decision rule says it beats the current best (the same acceptance as
tunebot, so the two columns compare search order alone). TPE is Optuna's TPESampler
(optional: skipped if optuna is missing), keeping its fastest measured point.

    python benchmarks/search_quality.py                  # all cached sweeps, budgets 10 and 20
    python benchmarks/search_quality.py --seeds 300 --tpe-seeds 40 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import Knob, OpConfig, load_repo_config, resolve_op  # noqa: E402
from bot.errors import TunebotError  # noqa: E402
from bot.strategies import knobs as knobmod  # noqa: E402
from bot.strategies.base import Attempt, PlanContext, Refusal  # noqa: E402
from bot.strategies.planner import Planner  # noqa: E402
from bot.strategies.source import source_hash  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
NOISE_FLOOR = 0.03
PATIENCE = 3
IQR_TO_SD = 1.349
MEDIAN_SE = 1.2533  # standard error of a median = 1.2533 * sd / sqrt(n) for normal samples


@dataclass
class Table:
    op: str
    names: list[str]
    space: list[tuple[int, ...]]  # every point with a median (failed points are scored as failures)
    median: dict[tuple[int, ...], float]
    sigma: dict[tuple[int, ...], float]
    start: tuple[int, ...]
    source: str
    op_config: OpConfig
    notes: list[str]

    @property
    def optimum(self) -> float:
        return min(self.median.values())

    def measure(self, point: tuple[int, ...], rng: random.Random) -> float:
        if point not in self.median:
            return float("inf")  # a failed point: never chosen as best
        return self.median[point] * (1.0 + rng.gauss(0.0, self.sigma[point]))


def load_table(path: Path, noise_scale: float = 1.0) -> Table:
    data = json.loads(path.read_text())
    names = [k["name"] for k in data["knobs"]]
    notes: list[str] = []
    # The op's real source and tune.yaml: the planner transforms the very file a run would.
    cfg = load_repo_config(ROOT)
    op = resolve_op(ROOT, cfg, data["op"])
    per_median = MEDIAN_SE / op.latency.repeats ** 0.5 * noise_scale
    median, sigma = {}, {}
    for p in data["points"]:
        key = tuple(p["knobs"][n] for n in names)
        if p["status"] == "ok" and p["median_us"]:
            median[key] = float(p["median_us"])
            sigma[key] = max(0.0, (p.get("rel_iqr") or 0.0) / IQR_TO_SD) * per_median
    space = list(itertools.product(*[k["values"] for k in data["knobs"]]))
    source = (ROOT / op.source).read_text(encoding="utf-8")
    declared = {k.name: k for k in op.knobs}
    table_knobs = tuple(Knob(k["name"], k["strategy"], tuple(k["values"]),
                             declared[k["name"]].divides if k["name"] in declared else None,
                             declared[k["name"]].multiple_of if k["name"] in declared else None)
                        for k in data["knobs"])
    if any(tuple(declared[k.name].values) != k.values for k in table_knobs if k.name in declared):
        notes.append("tune.yaml values differ from the swept values: the replay plans over the swept values")
    op = OpConfig(project=op.project, name=op.name, dir=op.dir, kernel_kind=op.kernel_kind, knobs=table_knobs)
    current = tuple(knobmod.current_value(source, n) for n in names)
    start = current if current in median else tuple(k["default"] for k in data["knobs"])
    if start != current:
        notes.append(f"the source's values {current} were not swept: the replay starts at the sweep's default {start}")
    for name, value in zip(names, start):
        if knobmod.current_value(source, name) != value:
            variant = knobmod.set_knob(source, Knob(name, "block_size", (value,)), value)
            if isinstance(variant, Refusal):
                raise SystemExit(f"{data['op']}: cannot set {name}={value}: {variant.reason}")
            source = variant.source
    return Table(data["op"], names, space, median, sigma, start, source, op, notes)


def point_of(table: Table, source: str) -> tuple[int, ...]:
    return tuple(knobmod.current_value(source, n) for n in table.names)  # type: ignore[misc]


def run_tunebot(table: Table, budget: int, rng: random.Random, patience: int | None) -> tuple[float, int]:
    """(true median of the point kept, evaluations spent)."""
    planner = Planner(table.op_config)
    best_src, best_measured = table.source, table.measure(table.start, rng)
    history: list[Attempt] = []
    evals, streak = 1, 0
    while evals < budget and (patience is None or streak < patience):
        v = planner.next(PlanContext(best_source=best_src, history=tuple(history)))
        if isinstance(v, Refusal):
            if v.attempt is not None and not v.exhausted:
                history.append(v.attempt)
                continue
            break
        point = point_of(table, v.source)
        measured = table.measure(point, rng)
        evals += 1
        if measured == float("inf"):
            gain, better = -1.0, False
        else:
            gain, better = decide(table, point_of(table, best_src), best_measured, point, measured, rng)
        history.append(Attempt(v.change, v.source_hash, source_hash(best_src),
                               "better" if better else ("not_better" if measured != float("inf") else "error"),
                               gain))
        if better:
            best_src, best_measured, streak = v.source, measured, 0
        else:
            streak += 1
    return table.median[point_of(table, best_src)], evals


def decide(table: Table, best: tuple[int, ...], best_us: float, cand: tuple[int, ...], cand_us: float,
           rng: random.Random, rounds: int = 3) -> tuple[float, bool]:
    """bot.measure.decide's rule on simulated medians: threshold = max(floor, CI noise);
    close calls are re-measured `rounds` times interleaved, and must win every round."""
    ci = 1.96 * (table.sigma[best] + table.sigma[cand])  # 95 % CI half-widths of the two medians, added
    threshold = max(NOISE_FLOOR, ci)
    gain = (best_us - cand_us) / best_us
    if gain < threshold * 0.5:
        return gain, False
    if gain >= threshold * 4.0:
        return gain, True
    pairs = [(table.measure(best, rng), table.measure(cand, rng)) for _ in range(rounds)]
    round_gains = [(b - c) / b for b, c in pairs]
    pb, pc = statistics.median(b for b, _ in pairs), statistics.median(c for _, c in pairs)
    gain2 = (pb - pc) / pb
    noise2 = max(ci / rounds ** 0.5, (max(round_gains) - min(round_gains)) / 2)
    return gain2, gain2 >= max(NOISE_FLOOR, noise2) and min(round_gains) > 0


def run_random(table: Table, budget: int, rng: random.Random) -> float:
    others = [p for p in table.space if p != table.start]
    picks = [table.start] + rng.sample(others, min(len(others), budget - 1))
    measured = [(table.measure(p, rng), p) for p in picks]
    return table.median[min(measured)[1]]


def run_random_decided(table: Table, budget: int, rng: random.Random) -> float:
    """Random order, but a point is adopted only as a tuning run would: by `decide` against the best."""
    others = [p for p in table.space if p != table.start]
    best, best_us = table.start, table.measure(table.start, rng)
    for p in rng.sample(others, min(len(others), budget - 1)):
        measured = table.measure(p, rng)
        if measured != float("inf") and decide(table, best, best_us, p, measured, rng)[1]:
            best, best_us = p, measured
    return table.median[best]


def run_tpe(table: Table, budget: int, seed: int) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(seed + 7919)
    values = {n: sorted({p[i] for p in table.space}) for i, n in enumerate(table.names)}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), direction="minimize")
    study.enqueue_trial(dict(zip(table.names, table.start)))
    seen: dict[tuple[int, ...], float] = {}

    def objective(trial: "optuna.Trial") -> float:
        point = tuple(trial.suggest_categorical(n, values[n]) for n in table.names)
        value = table.measure(point, rng)
        seen[point] = min(seen.get(point, float("inf")), value)
        return value if value != float("inf") else 1e12

    study.optimize(objective, n_trials=budget)
    best = min(seen, key=seen.get)  # type: ignore[arg-type]
    return table.median[best]


def summarize(fractions: list[float]) -> dict:
    ordered = sorted(fractions)
    return {"mean": statistics.fmean(ordered), "p05": ordered[max(0, int(0.05 * len(ordered)) - 1)] if len(
        ordered) >= 20 else ordered[0], "hit95": sum(f >= 0.95 for f in ordered) / len(ordered), "n": len(ordered)}


def evaluate(table: Table, budgets: list[int], seeds: int, tpe_seeds: int) -> dict:
    out: dict = {"op": table.op, "points": len(table.space), "measured_points": len(table.median),
                 "optimum_us": table.optimum, "start": dict(zip(table.names, table.start)),
                 "start_fraction": table.optimum / table.median[table.start], "notes": table.notes,
                 "budgets": {}}
    try:
        import optuna  # noqa: F401
        have_tpe = True
    except ImportError:
        have_tpe = False
        out["notes"].append("optuna not installed: TPE skipped")
    for budget in budgets:
        row: dict = {}
        fr, spent = [], []
        for s in range(seeds):
            found, n = run_tunebot(table, budget, random.Random(s), None)
            fr.append(table.optimum / found)
            spent.append(n)
        row["tunebot"] = {**summarize(fr), "mean_evals": statistics.fmean(spent)}
        fr, spent = [], []
        for s in range(seeds):
            found, n = run_tunebot(table, budget, random.Random(s), PATIENCE)
            fr.append(table.optimum / found)
            spent.append(n)
        row["tunebot_patience3"] = {**summarize(fr), "mean_evals": statistics.fmean(spent)}
        row["random"] = summarize([table.optimum / run_random(table, budget, random.Random(10_000 + s))
                                   for s in range(seeds)])
        row["random_decided"] = summarize([table.optimum / run_random_decided(table, budget, random.Random(20_000 + s))
                                           for s in range(seeds)])
        if have_tpe:
            row["tpe"] = summarize([table.optimum / run_tpe(table, budget, s) for s in range(tpe_seeds)])
        out["budgets"][budget] = row
    return out


def render(results: list[dict], budgets: list[int], seeds: int, tpe_seeds: int, noise_scale: float) -> str:
    lines = [f"Fraction of the exhaustive optimum reached (optimum / found; mean over seeds, p05 = 5th percentile, "
             f"hit95 = share of runs >= 95 %). {seeds} seeds (TPE: {tpe_seeds}), noise scale {noise_scale:g}.", "",
             "| op | points | baseline | budget | tunebot (evals) | tunebot, patience 3 (evals) | random | random, same decision rule | Optuna TPE |",
             "|---|---|---|---|---|---|---|---|---|"]

    def cell(r: dict | None) -> str:
        return "—" if r is None else f"{r['mean']:.1%} (p05 {r['p05']:.1%}, hit95 {r['hit95']:.0%})"

    for res in results:
        for b in budgets:
            row = res["budgets"][b]
            pat = row["tunebot_patience3"]
            tb = row["tunebot"]
            lines.append(f"| {res['op']} | {res['points']} | {res['start_fraction']:.1%} | {b} | {cell(tb)} "
                         f"({tb['mean_evals']:.1f}) "
                         f"| {cell(pat)} ({pat['mean_evals']:.1f}) | {cell(row['random'])} | {cell(row['random_decided'])} "
                         f"| {cell(row.get('tpe'))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="*", help="sweep JSON files (default: benchmarks/data/sweep_*.json)")
    parser.add_argument("--budgets", default="10,20")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--tpe-seeds", type=int, default=30)
    parser.add_argument("--noise-scale", type=float, default=1.0,
                        help="multiply the per-evaluation noise (1 = a median of the op's repeats)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    paths = [Path(p) for p in args.tables] or sorted(DATA.glob("sweep_*.json"))
    if not paths:
        print("no sweep tables: run `python benchmarks/sweep.py` first", file=sys.stderr)
        return 2
    budgets = [int(b) for b in args.budgets.split(",")]
    results = []
    started = time.perf_counter()
    for path in paths:
        try:
            table = load_table(path, args.noise_scale)
        except (TunebotError, KeyError, ValueError) as exc:
            print(f"{path.name}: skipped: {exc}", file=sys.stderr)
            continue
        results.append(evaluate(table, budgets, args.seeds, args.tpe_seeds))
        for note in table.notes:
            print(f"{table.op}: {note}", file=sys.stderr)
    print(render(results, budgets, args.seeds, args.tpe_seeds, args.noise_scale))
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    worst = [(r["op"], b, r["budgets"][b]) for r in results for b in budgets]
    for op, b, row in worst:
        for rival in ("random", "random_decided"):
            if row["tunebot"]["mean"] + 1e-9 < row[rival]["mean"]:
                print(f"note: {op} budget {b}: tunebot {row['tunebot']['mean']:.1%} < {rival} "
                      f"{row[rival]['mean']:.1%}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
