"""Noise benchmark: how often does each decision rule call a non-improvement an improvement
(A/A), and how often does it detect a real one (sensitivity)?

    python benchmarks/noise.py                 # 200 A/A + 100 x 5 % + 100 x 10 % decisions
    python benchmarks/noise.py --aa 20 --sens 10 --out /tmp/noise.json   # a quick look

Kernel: tests/measure_kernels/work.py, a pure-Python loop whose time is close to
proportional to its knob WORK; the 5 % and 10 % variants do 5 % and 10 % less work.
Every decision measures the best-so-far and the candidate with the real cpu
backend (fresh subprocess each), exactly as the loop does, then applies:

  naive        one measurement each, better if gain >= 3 %
  noise-aware  Evaluator.decide: threshold max(3 %, measured noise), interleaved
               A/B re-measure when close (bot/measure/decide.py)

Both rules judge the same first measurements; trial kinds are shuffled so both
rules and all kinds see the same machine load. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import LatencySettings, OpConfig  # noqa: E402
from bot.measure.evaluator import Evaluator  # noqa: E402

KERNEL = ROOT / "tests" / "measure_kernels" / "work.py"
NAIVE_THRESHOLD = 0.03


def write_variant(directory: Path, name: str, work: int) -> Path:
    src = KERNEL.read_text(encoding="utf-8")
    marker = "WORK = 4000"
    assert marker in src, "tests/measure_kernels/work.py changed its knob line"
    path = directory / f"{name}.py"
    path.write_text(src.replace(marker, f"WORK = {work}"), encoding="utf-8")
    return path


def run(args: argparse.Namespace) -> dict:
    op = OpConfig(project="bench", name="work", dir=Path("."),
                  latency=LatencySettings(backend="cpu", warmup=args.warmup, repeats=args.repeats,
                                          timeout_s=60.0))
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="tunebot-noise-") as tmp:
        d = Path(tmp)
        ev = Evaluator(op, d, rounds=args.rounds)
        base = write_variant(d, "base", args.work)
        variants = {
            "aa": write_variant(d, "same", args.work),  # identical source, its own file, like a variant
            "fast5": write_variant(d, "fast5", round(args.work * 0.95)),
            "fast10": write_variant(d, "fast10", round(args.work * 0.90)),
        }
        trials = ["aa"] * args.aa + ["fast5"] * args.sens + ["fast10"] * args.sens
        rng.shuffle(trials)
        records = []
        started = time.monotonic()
        for i, kind in enumerate(trials):
            a = ev.latency(base)
            b = ev.latency(variants[kind])
            if not (a.ok and b.ok):
                records.append({"kind": kind, "error": (a.notes + b.notes)})
                continue
            naive_gain = (a.median_us - b.median_us) / a.median_us
            d_ = ev.decide(base, a, variants[kind], b, noise_floor=NAIVE_THRESHOLD)
            records.append({"kind": kind, "a_us": a.median_us, "b_us": b.median_us,
                            "naive_gain": naive_gain, "naive_better": naive_gain >= NAIVE_THRESHOLD,
                            "aware_better": d_.better, "aware_gain": d_.gain, "threshold": d_.threshold,
                            "remeasured": d_.remeasured, "round_gains": d_.details.get("round_gains")})
            if args.progress and (i + 1) % 25 == 0:
                print(f"  {i + 1}/{len(trials)} decisions, {time.monotonic() - started:.0f} s", file=sys.stderr)
        wall = time.monotonic() - started
        env = asdict(ev.environment(base, None))
    return summarize(records, args, wall, env)


def rate(records: list[dict], kind: str, key: str) -> dict:
    rs = [r for r in records if r["kind"] == kind and "error" not in r]
    hits = sum(1 for r in rs if r[key])
    return {"n": len(rs), "positives": hits, "rate": hits / len(rs) if rs else None}


def summarize(records: list[dict], args: argparse.Namespace, wall: float, env: dict) -> dict:
    ok = [r for r in records if "error" not in r]
    true_gain = {}
    for kind in ("aa", "fast5", "fast10"):
        rs = [r for r in ok if r["kind"] == kind]
        if rs:
            # effect actually present in this run: median over trials of the paired first-look gain
            true_gain[kind] = statistics.median(r["naive_gain"] for r in rs)
    return {
        "command": " ".join(["python", "benchmarks/noise.py", *sys.argv[1:]]),
        "settings": {"work": args.work, "warmup": args.warmup, "repeats": args.repeats, "rounds": args.rounds,
                     "aa": args.aa, "sens": args.sens, "seed": args.seed, "naive_threshold": NAIVE_THRESHOLD},
        "wall_s": round(wall, 1),
        "environment": env,
        "median_paired_gain": true_gain,
        "rules": {
            "naive": {k: rate(ok, k, "naive_better") for k in ("aa", "fast5", "fast10")},
            "noise-aware": {k: rate(ok, k, "aware_better") for k in ("aa", "fast5", "fast10")},
        },
        "remeasure_rate": (sum(r["remeasured"] for r in ok) / len(ok)) if ok else None,
        "errors": len(records) - len(ok),
        "records": records,
    }


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
    records = ",\n".join("  " + json.dumps(_rounded(r), separators=(",", ":")) for r in result["records"])
    return f'{head[:-2]},\n "records": [\n{records}\n ]\n}}\n'


def table(result: dict) -> str:
    def pct(x):
        return "-" if x is None else f"{x['rate'] * 100:5.1f} % ({x['positives']}/{x['n']})"

    lines = [f"{'rule':<12} {'A/A false improvements':>26} {'detected at 5 %':>22} {'detected at 10 %':>22}"]
    for rule, r in result["rules"].items():
        lines.append(f"{rule:<12} {pct(r['aa']):>26} {pct(r['fast5']):>22} {pct(r['fast10']):>22}")
    g = result["median_paired_gain"]
    lines.append("median first-look gain per kind: " +
                 ", ".join(f"{k} {v * 100:+.1f} %" for k, v in g.items()))
    lines.append(f"noise-aware re-measured {result['remeasure_rate'] * 100:.0f} % of decisions; "
                 f"{result['errors']} errors; {result['wall_s']:.0f} s")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aa", type=int, default=200, help="A/A decisions")
    p.add_argument("--sens", type=int, default=100, help="decisions for each of the 5 %% and 10 %% variants")
    p.add_argument("--work", type=int, default=4000, help="WORK of the baseline kernel (~90 us)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5, help="A/B pairs when re-measuring")
    p.add_argument("--seed", type=int, default=0, help="shuffles the order of trials")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "noise.json")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args()
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(result), encoding="utf-8")
    print(table(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
