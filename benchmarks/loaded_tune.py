"""Real `tunebot tune` runs, quiet and with one core kept busy: how much of the gain survives load.

Issue 11's check: on the demo ops and on ops this project was not built with
(benchmarks/loaded_ops: a blocked softmax, a tiled conv1d, a blocked layer norm, a blocked
scan), a real tuning run on a machine with one core kept busy (a busy loop pinned to CPU 0)
finds at least 80 % of the gain a quiet machine finds, and its report states the smallest
detectable gain.

Each run is `python -m bot tune <op> --json` (the CLI, real subprocesses, the cpu backend) in a
fresh copy of a temporary git repository holding the ops. Conditions alternate run by run so
that other work on the host hits both alike. A run's "gain found" is judged on the variant it
delivered, not on its own claim: after all runs, with no busy loop, every delivered variant is
timed against the baseline side by side per round (`measure_cpu_pair`: a process per side,
`--reference-rounds` rounds, the order alternating), and its gain is the median over rounds.
Beside it, the "alone" gain times each file by itself in a fresh process per round
(`measure_cpu`, the order alternating), as a user who runs the kernel sees it; the two should
agree (docs/measurement.md, *Pairs, side by side*). The runs' own claims, stop reasons and the
smallest detectable gain their reports state are kept beside them.

    python benchmarks/loaded_tune.py                               # every op, 3 runs per condition
    python benchmarks/loaded_tune.py --ops unseen/softmax,demo/attention --runs 1 --max-iters 6

Prints a table and writes benchmarks/results/loaded_tune.json. "quiet" means whatever else the
host runs: the load average before and after each run is recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.measure.backends.cpu import measure_cpu, measure_cpu_pair  # noqa: E402
from bot.measure.types import LatencyResult  # noqa: E402

UNSEEN = ROOT / "benchmarks" / "loaded_ops"
DEFAULT_OPS = (
    "demo/rms_norm,demo/matmul,demo/attention,"
    "unseen/softmax,unseen/conv1d,unseen/layer_norm,unseen/scan"
)
DETECTABLE = re.compile(r"smallest detectable gain (\d+(?:\.\d+)?)%")
GOAL = 0.80  # busy gain / quiet gain


def _busy() -> None:
    """Keep CPU 0 busy until terminated."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    while True:
        pass


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def op_dir(qualified: str) -> Path:
    project, name = qualified.split("/")
    return (UNSEEN / project / name) if project == "unseen" else ROOT / "examples" / project / name


def make_template(path: Path, ops: list[str]) -> Path:
    """A git repository with the ops under examples/<project>/<op> and the project's .tunebot.yml."""
    path.mkdir(parents=True)
    for qualified in ops:
        shutil.copytree(op_dir(qualified), path / "examples" / qualified)
        _without_target(path / "examples" / qualified / "tune.yaml")
    shutil.copy2(ROOT / ".tunebot.yml", path / ".tunebot.yml")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.name", "bench")
    _git(path, "config", "user.email", "bench@example.com")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "ops under test")
    return path


def _without_target(tune_yaml: Path) -> None:
    """Measure the search, not the target: a DESIGN.md target the baseline already meets (demo
    matmul's 4.1 ms on a fast CPU) would stop the run before its first iteration. A target of
    1e-6 us overrides DESIGN.md's and is never met; `tunebot demo` ignores targets the same way."""
    config = yaml.safe_load(tune_yaml.read_text()) if tune_yaml.exists() else {}
    config["target_us"] = 1e-6
    tune_yaml.write_text(yaml.safe_dump(config, sort_keys=False))


def tune(template: Path, work: Path, op: str, max_iters: int, busy: bool) -> dict:
    """One real `tunebot tune` run in a fresh copy of the template; its outcome and the delivered source."""
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(template, repo, symlinks=True)
    spinner = None
    if busy:
        spinner = multiprocessing.Process(target=_busy, daemon=True)
        spinner.start()
    load_before = os.getloadavg()
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "tune", op, "--repo", str(repo), "--json"]
            + ["--max-iters", str(max_iters)],
            cwd=repo,
            # the checkout under test, installed or not
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            },
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.join()
    seconds = time.perf_counter() - start
    outcome = None
    for line in done.stdout.splitlines():
        if line.startswith('{"outcome"'):
            outcome = json.loads(line)["outcome"]
    if outcome is None:
        raise SystemExit(
            f"{op}: tunebot tune gave no outcome (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    name = op.split("/")[1]
    delivered = _git(repo, "show", f"{outcome['delivery_branch']}:{outcome['perf_dir']}/{name}.py")
    found = DETECTABLE.search(outcome["report"])
    return {
        "op": op,
        "condition": "busy1" if busy else "quiet",
        "seconds": round(seconds, 1),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "iterations": outcome["iterations"],
        "stop_reason": outcome["stop_reason"],
        "claimed_gain_pct": outcome["improvement_pct"],
        "baseline_us": outcome["baseline_us"],
        "best_us": outcome["best_us"],
        "detectable_pct": float(found.group(1)) if found else None,
        "noise_warning": "too noisy to see gains below" in outcome["report"],
        "delivered_sha256": hashlib.sha256(delivered.encode()).hexdigest(),
        "delivered": delivered,
    }


def _median(result: LatencyResult) -> float:
    if result.median_us is None:
        raise SystemExit(f"a reference measurement has no median: {result.notes}")
    return result.median_us


def reference_gain(op: str, delivered: str, rounds: int, work: Path) -> dict:
    """The delivered variant against the baseline: side by side per round, and each alone."""
    name = op.split("/")[1]
    folder = work / "reference"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    baseline = folder / f"{name}.py"
    shutil.copy2(op_dir(op) / f"{name}.py", baseline)
    best = folder / f"{name}_delivered.py"
    best.write_text(delivered, encoding="utf-8")
    if best.read_bytes() == baseline.read_bytes():
        return {"gain": 0.0, "rounds": [], "alone_gain": 0.0, "alone_rounds": [], "identical": True}
    ratios, alone = [], []
    for r in range(rounds):
        first, second = (baseline, best) if r % 2 == 0 else (best, baseline)
        ra, rb = measure_cpu_pair(first, second, warmup=5, repeats=20, timeout_s=600)
        if not (ra.ok and rb.ok):
            raise SystemExit(f"{op}: reference measurement failed: {ra.notes} {ra.tail[-500:]}")
        base_r, best_r = (ra, rb) if first == baseline else (rb, ra)
        ratios.append(_median(best_r) / _median(base_r))
        solo = {
            path: measure_cpu(path, warmup=5, repeats=20, timeout_s=600) for path in (first, second)
        }
        if not all(r.ok for r in solo.values()):
            raise SystemExit(f"{op}: reference measurement alone failed")
        alone.append(_median(solo[best]) / _median(solo[baseline]))
    return {
        "gain": 1 - statistics.median(ratios),
        "rounds": ratios,
        "alone_gain": 1 - statistics.median(alone),
        "alone_rounds": alone,
        "identical": False,
    }


def summarize(runs: list[dict], ops: list[str]) -> dict:
    table = {}
    for op in ops:
        row: dict = {}
        for condition in ("quiet", "busy1"):
            mine = [r for r in runs if r["op"] == op and r["condition"] == condition]
            gains = [r["reference_gain"] for r in mine]
            alone = [r["alone_gain"] for r in mine if r.get("alone_gain") is not None]
            row[condition] = {
                "alone_gain_median": statistics.median(alone) if alone else None,
                "runs": len(mine),
                "gain_median": statistics.median(gains) if gains else None,
                "gain_min": min(gains) if gains else None,
                "gain_max": max(gains) if gains else None,
                "claimed_median_pct": statistics.median(r["claimed_gain_pct"] for r in mine)
                if mine
                else None,
                "detectable_median_pct": statistics.median(
                    r["detectable_pct"] for r in mine if r["detectable_pct"] is not None
                )
                if any(r["detectable_pct"] is not None for r in mine)
                else None,
                "iterations_median": statistics.median(r["iterations"] for r in mine)
                if mine
                else None,
                "noise_warnings": sum(r["noise_warning"] for r in mine),
            }
        quiet, busy = row["quiet"]["gain_median"], row["busy1"]["gain_median"]
        row["ratio"] = busy / quiet if quiet and quiet > 0 and busy is not None else None
        # with no quiet gain there is nothing to keep 80 % of: the op cannot judge the goal
        # (the quiet runs found nothing, whether or not a gain existed)
        row["goal_met"] = row["ratio"] >= GOAL if row["ratio"] is not None else None
        table[op] = row
    return table


def _checkpoint(out: Path, runs: list[dict]) -> None:
    """Write the runs so far beside the result file: an interrupted run (hours on a loaded
    host) keeps what it measured. The delivered sources stay out; the final file replaces it."""
    partial = out.with_name(out.stem + ".partial.json")
    partial.parent.mkdir(parents=True, exist_ok=True)
    kept = [{k: v for k, v in run.items() if k != "delivered"} for run in runs]
    tmp = partial.with_name(partial.name + ".tmp")
    tmp.write_text(json.dumps({"partial": True, "runs": kept}, indent=1) + "\n")
    os.replace(tmp, partial)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=DEFAULT_OPS, help="comma-separated <project>/<op>")
    parser.add_argument("--runs", type=int, default=3, help="runs per op and condition")
    parser.add_argument("--max-iters", type=int, default=10, help="each run's iteration budget")
    parser.add_argument("--reference-rounds", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "loaded_tune.json"
    )
    args = parser.parse_args()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    for op in ops:
        if "/" not in op or not op_dir(op).is_dir():
            parser.error(f"unknown op {op!r}: use demo/<op> or unseen/<op> ({DEFAULT_OPS})")
    if (os.cpu_count() or 1) < 2:
        print("warning: one CPU: the busy loop takes the only core", file=sys.stderr)
    runs: list[dict] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tunebot-loaded-") as tmp:
        work = Path(tmp)
        template = make_template(work / "template", ops)
        for n in range(args.runs):
            for i, op in enumerate(ops):
                order = (False, True) if (n + i) % 2 == 0 else (True, False)
                for busy in order:
                    run = tune(template, work, op, args.max_iters, busy)
                    print(
                        f"{op:<18}{run['condition']:<7} claimed {run['claimed_gain_pct']:+6.1f}% "
                        f"in {run['iterations']} iterations ({run['stop_reason']}), "
                        f"detectable {run['detectable_pct']}%, {run['seconds']:.0f} s, "
                        f"load {run['load_before'][0]:.1f}",
                        file=sys.stderr,
                    )
                    runs.append(run)
                    _checkpoint(args.out, runs)
        cache: dict[tuple[str, str], dict] = {}
        for run in runs:
            key = (run["op"], run["delivered_sha256"])
            if key not in cache:
                cache[key] = reference_gain(
                    run["op"], run["delivered"], args.reference_rounds, work
                )
            run["reference_gain"] = cache[key]["gain"]
            run["reference_rounds"] = cache[key]["rounds"]
            run["alone_gain"] = cache[key]["alone_gain"]
            run["alone_rounds"] = cache[key]["alone_rounds"]
    for run in runs:
        del run["delivered"]
    table = summarize(runs, ops)
    result = {
        "command": " ".join(["python", "benchmarks/loaded_tune.py", *sys.argv[1:]]),
        "cpu_count": os.cpu_count(),
        "minutes": round((time.time() - started) / 60, 1),
        "goal": f"busy1 gain >= {GOAL:.0%} of the quiet gain (median over runs, re-measured)",
        "ops": table,
        "runs": runs,
    }
    header = (
        f"{'op':<18}{'quiet gain':>11}{'busy gain':>11}{'ratio':>7}{'goal':>6}"
        f"{'alone q/b %':>14}{'claimed q/b %':>16}{'detectable q/b %':>19}{'iters q/b':>11}"
    )
    print(header)
    for op, row in table.items():
        q, b = row["quiet"], row["busy1"]

        def pct(x: float | None) -> str:
            return "—" if x is None else f"{100 * x:.1f}%"

        def num(x: float | None) -> str:
            return "—" if x is None else f"{x:.1f}"

        def alone_pct(side: dict) -> str:
            x = side["alone_gain_median"]
            return "—" if x is None else f"{100 * x:.1f}"

        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(
            f"{op:<18}{pct(q['gain_median']):>11}{pct(b['gain_median']):>11}{ratio:>7}"
            f"{'n/a' if row['goal_met'] is None else 'yes' if row['goal_met'] else 'NO':>6}"
            f"{alone_pct(q) + ' / ' + alone_pct(b):>14}"
            f"{num(q['claimed_median_pct']) + ' / ' + num(b['claimed_median_pct']):>16}"
            f"{num(q['detectable_median_pct']) + ' / ' + num(b['detectable_median_pct']):>19}"
            f"{num(q['iterations_median']) + ' / ' + num(b['iterations_median']):>11}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_name(args.out.stem + ".partial.json").unlink(missing_ok=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
