"""Time to build the features table from docs of growing size (is parsing linear?).

Each size is a docs dir made of a real feature doc (tests/data/mindiesd-docs/core_layers.md)
repeated under fresh headings up to the target size, plus the real support matrix. CPU time of
build_table is measured `--runs` times per size; the median and min..max are printed.

    python benchmarks/features_parse.py [--runs 5] [--sizes 0.25,0.5,1,2,4]

Prints a table and writes benchmarks/results/features_parse.json. Sizes above the per-file
limit (bot.features.markdown.MAX_DOC_BYTES) are expected to fail fast with DocsError.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.features.extract import build_table  # noqa: E402
from bot.features.model import DocsError  # noqa: E402

DOCS = ROOT / "tests" / "data" / "mindiesd-docs"


def make_docs(folder: Path, megabytes: float) -> int:
    chunk = (DOCS / "core_layers.md").read_text(encoding="utf-8")
    target = int(megabytes * 1024 * 1024)
    parts, size, i = ["# 大文档\n\n"], 0, 0
    while size < target:
        body = chunk.replace("# 核心加速API", f"## 副本 {i}")
        parts.append(body)
        size += len(body.encode("utf-8"))
        i += 1
    (folder / "big.md").write_text("".join(parts), encoding="utf-8")
    (folder / "supported_matrix.md").write_text(
        (DOCS / "supported_matrix.md").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return (folder / "big.md").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="0.25,0.5,1,2,4,50")
    args = parser.parse_args()
    results = []
    for mb in (float(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            size = make_docs(Path(tmp), mb)
            times, outcome = [], "ok"
            for _ in range(args.runs):
                start = time.process_time()
                try:
                    rows = len(build_table(Path(tmp)).rows)
                    outcome = f"{rows} rows"
                except DocsError as exc:
                    outcome = f"refused: {str(exc)[:60]}"
                times.append(time.process_time() - start)
            med = statistics.median(times)
            results.append(
                {
                    "bytes": size,
                    "runs": args.runs,
                    "median_s": med,
                    "min_s": min(times),
                    "max_s": max(times),
                    "outcome": outcome,
                }
            )
            print(
                f"{size / 1048576:6.2f} MB  median {med:7.3f} s CPU  (min {min(times):.3f}, max {max(times):.3f})  "
                f"{med / (size / 1048576):6.3f} s/MB  {outcome}"
            )
    out = ROOT / "benchmarks" / "results" / "features_parse.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
