"""What one change per iteration can reach on a search_quality family, whatever the order.

    python benchmarks/search_ceiling.py benchmarks/results/search_quality_heldout_8800.json

For each generated landscape of the JSON, walks its true (noise-free) values from its start
with no budget limit, taking only moves that change one knob and are faster by more than the
3 % noise floor: the best point any chain of such moves reaches, and the point steepest descent
(always the best single move) stops at. Each is then compared with the stored random and TPE
median runs as the goal compares tunebot's ("wins": at least as good as both). A landscape
neither reading wins is out of reach of the seed's rule (one change from the best so far), not
of a better move order; the rest of tunebot's losses are its order within the budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_quality as sq  # noqa: E402

FLOOR = 0.97  # a move counts as faster when it takes under 97 % of the time


def _moves(land: sq.Landscape, point: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    for i, values in enumerate(land.values):
        for v in values:
            if v != point[i]:
                moved = (*point[:i], v, *point[i + 1 :])
                if moved in land.true:
                    yield moved


def reachable_best(land: sq.Landscape) -> float:
    """The fastest point any chain of improving one-change moves reaches from the start."""
    seen, todo, best = {land.start}, [land.start], land.true[land.start]
    while todo:
        point = todo.pop()
        best = min(best, land.true[point])
        for moved in _moves(land, point):
            if moved not in seen and land.true[moved] < land.true[point] * FLOOR:
                seen.add(moved)
                todo.append(moved)
    return best


def steepest(land: sq.Landscape) -> float:
    """Where always taking the best single move stops."""
    point = land.start
    while True:
        best = min(_moves(land, point), key=lambda p: land.true[p], default=point)
        if land.true[best] >= land.true[point] * FLOOR:
            return land.true[point]
        point = best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="a search_quality JSON of generated landscapes")
    parser.add_argument("--budget", default="10")
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text())
    counts = {"reachable": 0, "steepest": 0, "tunebot": 0}
    out_of_reach = []
    rows = [r for r in data["landscapes"] if r["landscape"].startswith("generated/")]
    for row in rows:
        land = sq.generate(int(row["landscape"].split("/")[1]), data["spread"])
        stored = row["budgets"][args.budget]
        rival = max(stored["random"]["median"], stored["tpe"]["median"])
        found = {
            "reachable": land.optimum / reachable_best(land),
            "steepest": land.optimum / steepest(land),
            "tunebot": stored["tunebot"]["median"],
        }
        for key, fraction in found.items():
            counts[key] += fraction + 1e-9 >= rival
        if found["reachable"] + 1e-9 < rival:
            out_of_reach.append(row["landscape"])
    n = len(rows)
    print(
        f"wins vs both random and TPE at budget {args.budget}, of {n}: best reachable chain "
        f"{counts['reachable']}, steepest descent {counts['steepest']}, tunebot {counts['tunebot']}"
    )
    print(f"out of reach of one change per iteration: {', '.join(out_of_reach) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
