"""Noise benchmark in the loop's real situation: a best measured earlier vs a fresh candidate.

    python benchmarks/noise.py                                  # quiet and one-core-busy, full size
    python benchmarks/noise.py --aa 300 --sens 100 --slow 50 --conditions quiet,busy1
    python benchmarks/noise.py --aa 10 --sens 4 --slow 2 --out /tmp/noise.json   # a quick look

Kernel: tests/measure_kernels/work.py, a pure-Python loop whose time is close to
proportional to its knob WORK. Kinds: A/A (an identical copy), 5 % and 10 % less work
(true speed-ups) and 5 % and 10 % more work (slow-downs).

The trials are grouped into simulated runs of `--run-length` decisions. As in
bot/loop.py, a run measures its best once (the baseline) and keeps that result; every
decision calls `Evaluator.compare(best_source, best_earlier, candidate, floor)`, the
loop's own call. On the cpu backend that times best and candidate in one fresh process
(`decide.decide_in_pairs`); the "naive" column compares the candidate's figure with the
best's earlier one at 3 %, which is what a rule without pairs would see. Every
measurement is the real cpu backend in a fresh process; a pair run counts as one
measurement (half the repeats per side). Kinds are shuffled so every kind sees the same load.

Conditions: `quiet` (whatever else the host runs), `busy1` (one core kept 100 % busy by a
busy loop pinned to CPU 0 for the whole condition: a fresh child lands on the busy or the
free core). Rates come with one-sided 95 % Clopper-Pearson upper bounds (300 decisions
without a false "better" bound the rate at 0.99 %) and two-sided 95 % intervals.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config.schema import LatencySettings, OpConfig  # noqa: E402
from bot.measure.evaluator import Evaluator  # noqa: E402

KERNEL = ROOT / "tests" / "measure_kernels" / "work.py"
NAIVE_THRESHOLD = 0.03
KINDS = {"aa": 1.0, "fast5": 0.95, "fast10": 0.90, "slow5": 1.05, "slow10": 1.10}


def write_variant(directory: Path, name: str, work: int) -> Path:
    src = KERNEL.read_text(encoding="utf-8")
    marker = "WORK = 4000"
    assert marker in src, "tests/measure_kernels/work.py changed its knob line"
    path = directory / f"{name}.py"
    path.write_text(src.replace(marker, f"WORK = {work}"), encoding="utf-8")
    return path


def _busy() -> None:
    try:
        os.sched_setaffinity(0, {0})
    except (AttributeError, OSError):
        pass
    while True:
        pass


class CountingEvaluator(Evaluator):
    """The real Evaluator, counting latency measurements (re-measures included).

    A pair run (both variants in one process, half the repeats each) counts as one."""

    measurements = 0

    def latency(self, source):
        CountingEvaluator.measurements += 1
        return super().latency(source)

    def latency_pair(self, a, b):
        CountingEvaluator.measurements += 1
        return super().latency_pair(a, b)


def beta_quantile(q: float, a: float, b: float) -> float:
    """Quantile of Beta(a, b) by bisection on the regularized incomplete beta (continued fraction)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    # Lentz's continued fraction
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    f = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + numerator / c
            c = c if abs(c) > 1e-300 else 1e-300
            f *= c * d
    return math.exp(lbeta) * f / a


def interval(k: int, n: int) -> dict:
    """Clopper-Pearson: two-sided 95 % interval and the one-sided 95 % upper bound."""
    if n == 0:
        return {"n": 0, "positives": 0, "rate": None}
    lo = 0.0 if k == 0 else beta_quantile(0.025, k, n - k + 1)
    hi = 1.0 if k == n else beta_quantile(0.975, k + 1, n - k)
    up = 1.0 if k == n else beta_quantile(0.95, k + 1, n - k)
    return {"n": n, "positives": k, "rate": k / n, "ci95": [lo, hi], "upper95": up}


def run_condition(
    condition: str, args: argparse.Namespace, directory: Path, rng: random.Random
) -> list[dict]:
    op = OpConfig(
        project="bench",
        name="work",
        dir=Path("."),
        latency=LatencySettings(
            backend="cpu", warmup=args.warmup, repeats=args.repeats, timeout_s=60.0
        ),
    )
    base = write_variant(directory, "base", args.work)
    variants = {
        kind: write_variant(directory, f"v_{kind}", round(args.work * f))
        for kind, f in KINDS.items()
    }
    trials = (
        ["aa"] * args.aa
        + ["fast5"] * args.sens
        + ["fast10"] * args.sens
        + ["slow5"] * args.slow
        + ["slow10"] * args.slow
    )
    rng.shuffle(trials)
    busy = None
    if condition == "busy1":
        busy = multiprocessing.Process(target=_busy, daemon=True)
        busy.start()
    records: list[dict] = []
    started = time.monotonic()
    try:
        ev, best = None, None
        for i, kind in enumerate(trials):
            if i % args.run_length == 0:  # a new simulated run: fresh Evaluator, best measured now
                ev = CountingEvaluator(op, directory, rounds=args.rounds)
                best = ev.latency(base)
            assert ev is not None and best is not None
            before = CountingEvaluator.measurements
            cand, d = ev.compare(base, best, variants[kind], noise_floor=NAIVE_THRESHOLD)
            if not (best.ok and cand.ok) or d is None:
                records.append(
                    {"condition": condition, "kind": kind, "error": best.notes + cand.notes}
                )
                continue
            naive_gain = (best.median_us - cand.median_us) / best.median_us
            records.append(
                {
                    "condition": condition,
                    "kind": kind,
                    "best_us": best.median_us,
                    "cand_us": cand.median_us,
                    "naive_gain": naive_gain,
                    "naive_better": naive_gain >= NAIVE_THRESHOLD,
                    "better": d.better,
                    "gain": d.gain,
                    "remeasured": d.remeasured,
                    "detectable": d.detectable,
                    "first_gain": d.details.get("first", {}).get("gain"),
                    "measurements": CountingEvaluator.measurements - before,
                    "round_gains": d.details.get("round_gains"),
                }
            )
            if args.progress and (i + 1) % 25 == 0:
                print(
                    f"  {condition}: {i + 1}/{len(trials)} decisions, {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                )
    finally:
        if busy is not None:
            busy.terminate()
            busy.join()
    return records


def summarize(records: list[dict], args: argparse.Namespace, wall: float, env: dict) -> dict:
    out: dict = {
        "command": " ".join(["python", "benchmarks/noise.py", *sys.argv[1:]]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "wall_s": round(wall, 1),
        "environment": env,
        "conditions": {},
    }
    for condition in args.conditions.split(","):
        rs = [r for r in records if r["condition"] == condition]
        ok = [r for r in rs if "error" not in r]
        c: dict = {
            "errors": len(rs) - len(ok),
            "rules": {"loop": {}, "naive": {}},
            "median_first_gain": {},
        }
        for kind in KINDS:
            mine = [r for r in ok if r["kind"] == kind]
            c["rules"]["loop"][kind] = interval(sum(r["better"] for r in mine), len(mine))
            c["rules"]["naive"][kind] = interval(sum(r["naive_better"] for r in mine), len(mine))
            if mine:
                c["median_first_gain"][kind] = statistics.median(r["naive_gain"] for r in mine)
        if ok:
            c["remeasure_rate"] = sum(r["remeasured"] for r in ok) / len(ok)
            c["measurements_per_decision"] = statistics.fmean(r["measurements"] for r in ok)
            c["median_detectable"] = statistics.median(r["detectable"] for r in ok)
        aa, f10 = c["rules"]["loop"]["aa"], c["rules"]["loop"]["fast10"]
        slow = sum(c["rules"]["loop"][k]["positives"] for k in ("slow5", "slow10"))
        c["goals"] = {
            "aa_upper95_le_1pct": bool(aa["n"] and aa["upper95"] <= 0.01),
            "detect10_ge_90pct": bool(f10["n"] and f10["rate"] >= 0.90),
            "no_slowdown_accepted": slow == 0,
        }
        out["conditions"][condition] = c
    out["records"] = records
    return out


def _rounded(value):
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def dump(result: dict) -> str:
    """Indented JSON with one line per decision record (reviewable diffs, small file)."""
    head = json.dumps({k: v for k, v in result.items() if k != "records"}, indent=1)
    records = ",\n".join(
        "  " + json.dumps(_rounded(r), separators=(",", ":")) for r in result["records"]
    )
    return f'{head[:-2]},\n "records": [\n{records}\n ]\n}}\n'


def table(result: dict) -> str:
    def cell(x: dict) -> str:
        if not x["n"]:
            return "-"
        return (
            f"{x['positives']}/{x['n']} = {x['rate'] * 100:.1f} % (up95 {x['upper95'] * 100:.2f} %)"
        )

    lines = []
    for condition, c in result["conditions"].items():
        lines.append(
            f"condition {condition}: {c['errors']} errors, re-measured {c.get('remeasure_rate', 0) * 100:.0f} %, "
            f"{c.get('measurements_per_decision', 0):.1f} measurements per decision, "
            f"median detectable {c.get('median_detectable', 0) * 100:.1f} %"
        )
        for rule in ("loop", "naive"):
            r = c["rules"][rule]
            lines.append(f"  {rule:<6} " + "  ".join(f"{k}: {cell(r[k])}" for k in KINDS))
        g = c["median_first_gain"]
        lines.append(
            "  median first-look gain: " + ", ".join(f"{k} {v * 100:+.1f} %" for k, v in g.items())
        )
        lines.append(f"  goals: {c['goals']}")
    lines.append(f"{result['wall_s']:.0f} s")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--aa", type=int, default=300, help="A/A decisions per condition")
    p.add_argument(
        "--sens",
        type=int,
        default=100,
        help="decisions per condition for each of 5 %% and 10 %% faster",
    )
    p.add_argument(
        "--slow",
        type=int,
        default=50,
        help="decisions per condition for each of 5 %% and 10 %% slower",
    )
    p.add_argument("--conditions", default="quiet,busy1")
    p.add_argument(
        "--run-length",
        type=int,
        default=10,
        help="decisions per simulated run (best measured once)",
    )
    p.add_argument("--work", type=int, default=4000, help="WORK of the baseline kernel (~90 us)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5, help="A/B pairs when re-measuring")
    p.add_argument("--seed", type=int, default=0, help="shuffles the order of trials")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "noise.json")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args()
    rng = random.Random(args.seed)
    records: list[dict] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tunebot-noise-") as tmp:
        for condition in args.conditions.split(","):
            if condition not in ("quiet", "busy1"):
                p.error(f"unknown condition {condition!r}: use quiet, busy1")
            records += run_condition(condition, args, Path(tmp), rng)
        op = OpConfig(
            project="bench", name="work", dir=Path("."), latency=LatencySettings(backend="cpu")
        )
        env = asdict(Evaluator(op, Path(tmp)).environment(Path(tmp) / "base.py", None))
    result = summarize(records, args, time.monotonic() - started, env)
    result["environment"]["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(result), encoding="utf-8")
    print(table(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
