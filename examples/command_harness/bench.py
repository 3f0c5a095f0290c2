"""Example benchmark harness for tunebot's `command` latency backend (docs/measurement.md).

    python bench.py <variant.py> [--warmup 5] [--repeats 30]

Imports the variant file by path, calls its `get_inputs()` once, then times
`kernel(*inputs)` and prints ONE JSON object on the last line:

    {"samples": [...], "unit": "us", "environment": {"harness": "bench.py", ...}}

A team's real harness would time its own way (a device event, a model-level
step, a profiler); only the printed object is tunebot's contract.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time


def load(path: str):
    spec = importlib.util.spec_from_file_location("variant_under_test", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the variant file tunebot passes as {source}")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--entry", default="kernel")
    args = parser.parse_args(argv)
    module = load(args.source)
    entry = getattr(module, args.entry)
    inputs = module.get_inputs()
    for _ in range(args.warmup):
        entry(*inputs)
    samples = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        entry(*inputs)
        samples.append((time.perf_counter() - start) * 1e6)
    print(json.dumps({"samples": samples, "unit": "us",
                      "environment": {"harness": "examples/command_harness/bench.py",
                                      "python_version": platform.python_version()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
