"""Re-run tunebot's columns of a search_quality JSON with the checkout under test.

    python benchmarks/search_rerun.py benchmarks/results/search_quality_heldout_6000.json \
        --json OUT.json

Random search and Optuna TPE are fixed by their seeds, so their runs are copied from the
JSON; tunebot's three columns (patience 3, budget only, no pairs) are re-run on the same
generated landscapes, with the same seeds and the same code as `search_quality.evaluate`.
Use: the planner of another revision beside a fresh held-out run (run this file from that
revision's checkout, or with it first on PYTHONPATH), without paying for TPE twice. Re-run
with the revision that wrote the JSON, it reproduces the JSON's tunebot columns exactly.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_quality as sq  # noqa: E402

from bot.strategies.planner import Planner  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="a search_quality JSON")
    parser.add_argument("--json", type=Path, help="write the re-run figures here")
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args(argv)
    import bot

    print(f"planner: {Path(bot.__file__).parent}", file=sys.stderr)
    data = json.loads(args.results.read_text())
    out = []
    for res in data["landscapes"]:
        if not res["landscape"].startswith("generated/"):
            continue  # the demo sweeps need their op's files: not re-run here
        land = sq.generate(int(res["landscape"].split("/")[1]), data["spread"])
        planner = Planner(land.op)
        row = json.loads(json.dumps(res))
        for budget, cols in row["budgets"].items():
            for label, patience, pairs in (
                ("tunebot", sq.PATIENCE, True),
                ("tunebot_no_patience", None, True),
                ("tunebot_solo", sq.PATIENCE, False),
            ):
                fr, spent = [], []
                for s in range(args.seeds):
                    found, used = sq.run_tunebot(
                        land, int(budget), random.Random(s), patience, planner, pairs
                    )
                    fr.append(land.optimum / found)
                    spent.append(used)
                cols[label] = {**sq.stats(fr), "mean_measurements": statistics.fmean(spent)}
        out.append(row)
    budgets = sorted({int(b) for r in out for b in r["budgets"]})
    verdicts = [sq.verdicts(out, b, m) for b in budgets for m in ("tunebot", "tunebot_no_patience")]
    for v in verdicts:
        print(
            f"budget {v['budget']}, {v['method']}: median {v['median_of_medians']:.1%} "
            f"(p10 {v['p10_of_medians']:.1%}); >= 95 % {v['landscapes_median_ge_95pct']}; "
            f">= random {v['at_least_random']}, >= TPE {v['at_least_tpe']}, "
            f">= both {v['at_least_both']} / {v['landscapes']}"
        )
    if args.json:
        cmd = [
            "python",
            "benchmarks/search_rerun.py",
            *(argv if argv is not None else sys.argv[1:]),
        ]
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(cmd),
                    "rerun_of": data["command"],
                    "spread": data["spread"],
                    "verdicts": verdicts,
                    "landscapes": out,
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
