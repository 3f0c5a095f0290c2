"""Does timing two kernels in one process (the cpu backend's pairs) agree with timing each alone?

    python benchmarks/pair_interference.py BASE.py CANDIDATE.py [--processes 10]

The cpu backend decides "better" on pairs: best and candidate timed call by call alternately in
one fresh process (bot/measure/pairs.py), so load and core hit both alike. That assumes the two
kernels do not change each other's speed inside the process. A kernel that allocates large
buffers every call (the allocator's thresholds, page faults, transparent huge pages) or whose
speed depends on where its memory lands can break that assumption: each can run at a speed it
never has alone.

This script times three ways with the backend's own functions, `--processes` fresh runs each:
every file alone (`measure_cpu`, the order alternating); the pair as the backend times it now
(`measure_cpu_pair`: each side in its own child process, the two on one core, the order
alternating), and the pair with both sides in one process (`isolate=False`, the backend's
earlier way). It prints every run's median, the median over runs and the gain each way. A gain
whose sign differs from the "alone" one is a kernel the pair misjudges for a user who runs it
alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.measure.backends.cpu import measure_cpu, measure_cpu_pair  # noqa: E402


def _ms(us: float | None) -> float:
    if us is None:
        raise SystemExit("a measurement failed: run the file's kernel by hand to see why")
    return us / 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    for path in (args.base, args.candidate):
        if not path.is_file():
            print(f"error: {path} is not a file", file=sys.stderr)
            return 2
    cwd = args.base.resolve().parent
    alone: dict[str, list[float]] = {"base": [], "candidate": []}
    paired: dict[str, list[float]] = {"base": [], "candidate": []}
    shared: dict[str, list[float]] = {"base": [], "candidate": []}
    for i in range(args.processes):
        order = ("base", "candidate") if i % 2 == 0 else ("candidate", "base")
        for name in order:
            path = args.base if name == "base" else args.candidate
            alone[name].append(_ms(measure_cpu(path, repeats=args.repeats, cwd=cwd).median_us))
        first, second = (args.base, args.candidate) if i % 2 == 0 else (args.candidate, args.base)
        for isolate, runs in ((True, paired), (False, shared)):
            ra, rb = measure_cpu_pair(first, second, repeats=args.repeats, cwd=cwd, isolate=isolate)
            base, cand = (ra, rb) if i % 2 == 0 else (rb, ra)
            runs["base"].append(_ms(base.median_us))
            runs["candidate"].append(_ms(cand.median_us))
    for label, runs in (("alone", alone), ("paired", paired), ("shared", shared)):
        b, c = statistics.median(runs["base"]), statistics.median(runs["candidate"])
        print(f"{label:7s} base ms      {' '.join(f'{x:.2f}' for x in runs['base'])}")
        print(f"{label:7s} candidate ms {' '.join(f'{x:.2f}' for x in runs['candidate'])}")
        print(f"{label:7s} medians {b:.2f} / {c:.2f} ms: gain {(b - c) / b:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
