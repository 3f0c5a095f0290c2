"""The paired decision rule on real pairs: record blocks of side-by-side pairs, replay rules on them.

    # record: 12 blocks of 6 pairs per case, cases shuffled, the real cpu backend
    python benchmarks/pair_rule.py record --out benchmarks/results/pair_blocks.jsonl \\
        aa_ch_base=chan_hist..chan_hist real_ch=chan_hist..chan_hist@BLOCK_C=32
    # replay every rule on recorded blocks
    python benchmarks/pair_rule.py replay benchmarks/results/pair_blocks_s30.jsonl

A case is NAME=BEST..CANDIDATE; each side is a loaded_ops/unseen op or a repo-relative .py
file, optionally with knob values (`chan_hist@BLOCK_C=32,BLOCK_N=8192`,
`tests/measure_kernels/torch_work.py@REPS=38`). A case whose name starts with `aa_` times a
copy of the same file against itself: any "better" is false. Every block is one trial:
`--pairs` pairs timed through `Evaluator.latency_pair` (the loop's own call, each side in
its own process), the order swapped each pair as `decide_in_pairs` swaps it.

Replay applies, to the same recorded pairs, block by block in the order taken:
- `previous`: the rule before the pair spread was learned (first pair under 1.5 %: not
  better; 2 pairs, 3 when their median is under 6 % unless both are beyond 3 % within 0.75
  points of each other; better only if every pair is beyond 3 % and the median beyond twice
  its standard error);
- `prior`: `decide_in_pairs` as at the start of a run (the prior pair spread);
- `learned`: `decide_in_pairs` with the spread learned from the other blocks of the same
  op (their first 3 pairs each, as earlier decisions of a run would add), this block left out.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config.schema import LatencySettings, OpConfig  # noqa: E402
from bot.measure.decide import Rule  # noqa: E402
from bot.measure.evaluator import Evaluator  # noqa: E402
from bot.measure.pairs import PairSpread, decide_in_pairs  # noqa: E402
from bot.measure.types import LatencyResult  # noqa: E402

OPS = ROOT / "benchmarks" / "loaded_ops" / "unseen"
FLOOR = 0.03


def variant(spec: str, directory: Path, name: str) -> Path:
    """Write the op file of `spec` (op[@KNOB=V,...]) with those knob values to directory/name.py."""
    op, _, edits = spec.partition("@")
    # a repo-relative .py path, or the name of a loaded_ops/unseen op
    path = ROOT / op if op.endswith(".py") else OPS / op / f"{op}.py"
    source = path.read_text(encoding="utf-8")
    for edit in filter(None, edits.split(",")):
        knob, _, value = edit.partition("=")
        source, n = re.subn(rf"(?m)^{knob} = [^#\n]+", f"{knob} = {value} ", source)
        if n != 1:
            raise SystemExit(f"{spec}: no single line '{knob} = ...' in {op}.py")
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return path


def record(args: argparse.Namespace) -> None:
    cases = dict(c.split("=", 1) for c in args.cases)
    op = OpConfig(
        project="bench",
        name="pair_rule",
        dir=Path("."),
        latency=LatencySettings(backend="cpu", warmup=5, repeats=30, timeout_s=120.0),
    )
    trials = [c for c in cases for _ in range(args.blocks)]
    random.Random(args.seed).shuffle(trials)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pair-rule-") as tmp:
        d = Path(tmp)
        files = {}
        for name, spec in cases.items():
            best, cand = spec.split("..")
            files[name] = (variant(best, d, f"{name}_a"), variant(cand, d, f"{name}_b"))
        with args.out.open("a", encoding="utf-8") as f:
            for i, name in enumerate(trials):
                a, b = files[name]
                ev = Evaluator(op, d)
                pairs = []
                for j in range(args.pairs):
                    x, y = ev.latency_pair(a, b) if j % 2 == 0 else ev.latency_pair(b, a)[::-1]
                    pairs.append(
                        [
                            x.median_us if x.ok else None,
                            y.median_us if y.ok else None,
                            x.suspect or y.suspect,
                        ]
                    )
                f.write(json.dumps({"case": name, "spec": cases[name], "pairs": pairs}) + "\n")
                f.flush()
                gains = [round(1 - q[1] / q[0], 3) for q in pairs if q[0] and q[1]]
                print(
                    f"{i + 1}/{len(trials)} {name} {time.monotonic() - started:.0f} s {gains}",
                    flush=True,
                )


def previous_rule(gains: list[float]) -> tuple[bool, int]:
    """The paired rule as it was before the learned pair spread (module doc)."""
    if gains[0] < 0.5 * FLOOR:
        return False, 1
    n = 1
    while True:
        if gains[n - 1] < FLOOR:
            return False, n
        agree = n == 2 and min(gains[:2]) >= FLOOR and abs(gains[0] - gains[1]) <= 0.0075
        close = statistics.median(gains[:n]) < 2 * FLOOR and not agree
        if n >= 2 and (n >= 3 or not close):
            break
        n += 1
    taken = gains[:n]
    m = statistics.median(taken)
    se = 1.2533 * 1.4826 * statistics.median(abs(x - m) for x in taken) / math.sqrt(n)
    return all(x >= FLOOR for x in taken) and m >= max(FLOOR, 2 * se), n


def current_rule(pairs: list[list], spread: PairSpread | None) -> tuple[bool, int]:
    a_path, b_path = Path("a.py"), Path("b.py")
    feed = iter(pairs)
    used = 0

    def result(us: float, suspect: bool) -> LatencyResult:
        return LatencyResult(
            status="ok", backend="cpu", samples_us=[us] * 5, median_us=us, suspect=suspect
        )

    def pair(x: Path, y: Path) -> tuple[LatencyResult, LatencyResult]:
        nonlocal used
        a_us, b_us, suspect = next(feed)
        used += 1
        ra, rb = result(a_us, suspect), result(b_us, suspect)
        return (ra, rb) if x == a_path else (rb, ra)

    _, d = decide_in_pairs(a_path, b_path, pair, Rule(), spread)
    return d.better, used


def replay(args: argparse.Namespace) -> None:
    blocks = [
        json.loads(line)
        for path in args.files
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    failed = [b for b in blocks if not all(p[0] and p[1] for p in b["pairs"])]
    blocks = [b for b in blocks if b not in failed]
    if failed:
        cases = sorted({b["case"] for b in failed})
        print(f"skipped {len(failed)} blocks with a failed pair ({', '.join(cases)})")

    def op_of(b: dict) -> str:
        return b["spec"].split("@")[0].split("..")[0]

    def gains(b: dict) -> list[float]:
        return [1 - y / x for x, y, _ in b["pairs"]]

    table: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for i, b in enumerate(blocks):
        learned = PairSpread()
        for j, other in enumerate(blocks):
            if j != i and op_of(other) == op_of(b):
                learned.add(gains(other)[:3])
        for rule, (better, used) in (
            ("previous", previous_rule(gains(b))),
            ("prior", current_rule(b["pairs"], None)),
            ("learned", current_rule(b["pairs"], learned)),
        ):
            cell = table[b["case"]][rule]
            cell[0] += better
            cell[1] += 1
            cell[2] += used
    print("case (spec): better / blocks (mean pairs) per rule; aa_ cases: every better is false")
    for case, rules in sorted(table.items()):
        spec = next(b["spec"] for b in blocks if b["case"] == case)
        row = "  ".join(f"{r}: {c[0]}/{c[1]} ({c[2] / c[1]:.1f} p)" for r, c in rules.items())
        print(f"  {case} ({spec}): {row}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="time blocks of pairs with the real cpu backend")
    r.add_argument("cases", nargs="+", help="NAME=BEST..CANDIDATE, each op[@KNOB=V,...]")
    r.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    r.add_argument("--blocks", type=int, default=12, help="blocks per case")
    r.add_argument("--pairs", type=int, default=6, help="pairs per block (the rule's maximum)")
    r.add_argument("--seed", type=int, default=0, help="shuffles the order of blocks")
    q = sub.add_parser("replay", help="apply each rule to recorded blocks")
    q.add_argument("files", nargs="+", type=Path)
    args = p.parse_args()
    record(args) if args.command == "record" else replay(args)


if __name__ == "__main__":
    main()
