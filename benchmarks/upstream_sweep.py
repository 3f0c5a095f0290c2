"""Robustness of every strategy on every Python file of an upstream tree (no expectations).

    python benchmarks/upstream_sweep.py --git-dir <clone of tile-ai/tilelang-ascend> REF [REF ...]

For each `.py` file of each ref (read with `git show`, nothing is downloaded): the plan's
specs are built, each discovered knob is moved one legal step each way, each `T.Pipelined`
loop one stage each way, the multi-buffer flag flipped and the v-prefix rename tried. Counted:
files, variants, variants that do not parse, variants that change more than one line
(the flag edit may add a line), exceptions, and refusals or dropped names without a reason.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import traceback
from pathlib import Path

import libcst as cst

from bot.config.schema import OpConfig
from bot.strategies import knobs, multibuffer, pipeline, vprefix
from bot.strategies.base import Refusal, Variant
from bot.strategies.planner import Planner

STRATEGIES = ["block_size", "pipeline_depth", "multi_buffer", "vprefix"]


def changed(a: str, b: str) -> int:
    sm = difflib.SequenceMatcher(a=a.splitlines(), b=b.splitlines(), autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")


def sweep(src: str, tally: dict[str, int], problems: list[str], where: str) -> None:
    op = OpConfig(project="sweep", name="k", dir=Path("k"), kernel_kind="mix")
    planner = Planner(op)
    specs, skipped = planner.specs(src, STRATEGIES)
    tally["unexplained"] += sum(1 for s in skipped if not s.split(":", 2)[-1].strip())
    results: list[Variant | Refusal] = []
    for spec in specs:
        current = planner._current(spec, src)
        if spec.kind == "knob" and spec.knob is not None:
            ordered = sorted(set(spec.values))
            if current in ordered:
                i = ordered.index(current)
                for j in (i - 1, i + 1):
                    if 0 <= j < len(ordered):
                        results.append(knobs.set_knob(src, spec.knob, ordered[j], spec.strategy))
        elif spec.kind == "stages" and isinstance(current, int):
            for new in (current - 1, current + 1):
                results.append(pipeline.set_depth(src, new, spec.index))
        elif spec.kind == "flag":
            results.append(multibuffer.set_flag(src, not current))
    results.append(vprefix.rename(src))
    for r in results:
        if isinstance(r, Refusal):
            tally["refused"] += 1
            tally["unexplained"] += not r.reason.strip()
            continue
        tally["variants"] += 1
        try:
            cst.parse_module(r.source)
        except cst.ParserSyntaxError:
            tally["unparsable"] += 1
            problems.append(f"{where}: does not parse: {r.change.description}")
        n = changed(src, r.source)
        if r.change.strategy not in ("vprefix", "multi_buffer") and n != 1:
            tally["multi_line"] += 1
            problems.append(f"{where}: {n} lines: {r.change.description}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("refs", nargs="+")
    args = parser.parse_args(argv)
    tally = dict.fromkeys(
        ("files", "variants", "refused", "unparsable", "multi_line", "exceptions", "unexplained"), 0
    )
    problems: list[str] = []
    for ref in args.refs:
        names = subprocess.run(
            ["git", "--git-dir", args.git_dir, "ls-tree", "-r", "--name-only", ref],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for path in (p for p in names if p.endswith(".py")):
            blob = subprocess.run(
                ["git", "--git-dir", args.git_dir, "show", f"{ref}:{path}"],
                capture_output=True,
                check=True,
            ).stdout
            try:
                src = blob.decode("utf-8")
                cst.parse_module(src)
            except (UnicodeDecodeError, cst.ParserSyntaxError):
                continue
            tally["files"] += 1
            try:
                sweep(src, tally, problems, f"{ref}:{path}")
            except Exception:  # counted and shown: the point of the sweep
                tally["exceptions"] += 1
                problems.append(f"{ref}:{path}: {traceback.format_exc(limit=3)}")
    print(" ".join(f"{k}={v}" for k, v in tally.items()))
    for p in problems[:40]:
        print(p)
    return 1 if tally["exceptions"] or tally["unparsable"] or tally["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
