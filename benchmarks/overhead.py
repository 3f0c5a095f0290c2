"""The bot's own per-iteration overhead: planning, git, records (kernel time excluded).

Runs real tuning runs of a small test op on real repositories side by side, one with
a single commit of history and ones with 1,000 and 20,000 commits, and subtracts the
time spent inside the Evaluator's kernel-running calls (accuracy, latency, latency
pairs, decide, compare) from the wall time of each iteration. Beside it, the floor: a
plain `git add` + `git commit` of the same two files (the variant and opt_log.md) in
the same repository. Then the record keeping alone (append one iteration record, fold
the state) with 10 and with 10,000 records already in results.jsonl.

    python benchmarks/overhead.py                          # 1,000 and 20,000 commits, 5 runs each
    python benchmarks/overhead.py --commits 1000 --runs 1  # a quick look

Each run gives, per repository, the median bot time per iteration and the median floor; their
quotient is that run's ratio. The goal (median bot time <= 3x the floor, flat over history and
record counts) is judged on the median over runs of those ratios, with the spread over runs
beside it, so one lucky or unlucky run decides nothing. Prints a table and writes
benchmarks/results/overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.forge.local import LocalForge  # noqa: E402
from bot.measure.evaluator import Evaluator  # noqa: E402
from bot.run.machine import run_tune  # noqa: E402
from bot.run.request import ProgressEvent, TuneRequest  # noqa: E402

OP_FILES = ROOT / "tests" / "loop_ops"
OP_DIR = "examples/bench/sleepy"


class TimedEvaluator(Evaluator):
    """The real Evaluator, also counting the seconds spent running kernels."""

    kernel_s = 0.0
    depth = 0  # compare() calls latency_pair(): only the outermost call is counted

    def _timed(self, method, *args):
        start = time.perf_counter()
        TimedEvaluator.depth += 1
        try:
            return method(*args)
        finally:
            TimedEvaluator.depth -= 1
            if TimedEvaluator.depth == 0:
                TimedEvaluator.kernel_s += time.perf_counter() - start

    def accuracy(self, source):
        return self._timed(super().accuracy, source)

    def latency(self, source):
        return self._timed(super().latency, source)

    def decide(self, *args):
        return self._timed(super().decide, *args)

    def latency_pair(self, a, b):
        return self._timed(super().latency_pair, a, b)

    def compare(self, *args):
        return self._timed(super().compare, *args)


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True
    ).stdout.decode()


def make_repo(path: Path, commits: int) -> Path:
    """A repo with `commits` commits of history (via fast-import), then the test op."""
    _git(path.parent, "init", "-q", "-b", "main", str(path))
    _git(path, "config", "user.name", "bench")
    _git(path, "config", "user.email", "bench@example.com")
    stream = []
    for i in range(commits):
        content = f"line {i}\n".encode()
        stream.append(b"commit refs/heads/main\n")
        stream.append(f"committer bench <bench@example.com> {1700000000 + i} +0000\n".encode())
        msg = f"history commit {i}\n".encode()
        stream.append(b"data %d\n%s" % (len(msg), msg))
        stream.append(f"M 100644 inline history/file_{i % 50}.txt\n".encode())
        stream.append(b"data %d\n%s\n" % (len(content), content))
    _git(path, "fast-import", "--quiet", stdin=b"".join(stream))
    _git(path, "checkout", "-q", "-f", "main")
    op = path / OP_DIR
    op.mkdir(parents=True)
    for name in ("sleepy.py", "tune.yaml", "DESIGN.md"):
        shutil.copy2(OP_FILES / name, op / name)
    # A long patience so every run spends its whole iteration budget.
    (path / ".tunebot.yml").write_text("defaults:\n  patience: 10\n  max_iters: 8\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "add the benchmark op")
    return path


def overheads(repo: Path) -> list[float]:
    """Per-iteration bot overhead in ms for one complete run."""
    marks: list[tuple[float, float]] = []  # (wall time, kernel seconds so far) at each event

    def progress(event: ProgressEvent) -> None:
        if event.kind in ("baseline", "iteration"):
            marks.append((time.perf_counter(), TimedEvaluator.kernel_s))

    run_tune(
        TuneRequest(repo=repo, op="sleepy", restart=True),
        LocalForge(repo),
        progress,
        evaluator_factory=TimedEvaluator,
    )
    return [
        ((t1 - t0) - (k1 - k0)) * 1000 for (t0, k0), (t1, k1) in zip(marks, marks[1:], strict=False)
    ]


def git_commit_floor(repo: Path, samples: int) -> list[float]:
    """ms of `git add` + `git commit` of a variant and opt_log.md, as a person would commit them."""
    work = repo / OP_DIR / "perf_opt_floor"
    work.mkdir(parents=True, exist_ok=True)
    source = (OP_FILES / "sleepy.py").read_text()
    times = []
    for i in range(samples):
        start = time.perf_counter()
        (work / f"sleepy_opt_v{i}.py").write_text(source.replace("BLOCK = 16", f"BLOCK = {i}"))
        (work / "opt_log.md").write_text(f"| {i} | block_size | {i} us |\n" * (i + 1))
        _git(repo, "add", str(work))
        _git(repo, "commit", "-q", "-m", f"floor {i}")
        times.append((time.perf_counter() - start) * 1000)
    _git(repo, "reset", "-q", "--hard", f"HEAD~{samples}")
    return times


def record_step(existing: int, steps: int = 20) -> list[float]:
    """ms to append one iteration-sized record and fold the state, with `existing` records before it."""
    from bot.run import records
    from bot.run import state as rs
    from bot.run.log import ResultsLog

    with tempfile.TemporaryDirectory(prefix="tunebot-records-") as tmp:
        path = Path(tmp) / "results.jsonl"
        filler = {
            "kind": records.REJECTED,
            "attempt": {
                "change": {
                    "strategy": "block_size",
                    "description": "x" * 200,
                    "knob": "BLOCK",
                    "old": 16,
                    "new": 32,
                },
                "source_hash": "0" * 64,
                "parent_hash": "1" * 64,
                "verdict": "rejected",
                "gain": None,
            },
            "reason": "y" * 300,
        }
        with open(path, "w", encoding="utf-8") as f:
            for i in range(existing):
                f.write(json.dumps({**filler, "key": f"filler:{i}"}, sort_keys=True) + "\n")
        log = ResultsLog(path)
        fold = rs.Fold(log)
        fold()  # the run's first read parses everything once
        times = []
        for i in range(steps):
            start = time.perf_counter()
            log.append({**filler, "key": f"step:{i}"})
            fold()
            times.append((time.perf_counter() - start) * 1000)
        return times


def summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "median_ms": statistics.median(values),
        "p90_ms": sorted(values)[int(0.9 * (len(values) - 1))],
        "max_ms": max(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--commits", default="1000,20000", help="history sizes besides a 1-commit repo"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "overhead.json"
    )
    args = parser.parse_args()
    sizes = [1] + [int(c) for c in args.commits.split(",")]
    result: dict = {
        "command": " ".join(["python", "benchmarks/overhead.py", *sys.argv[1:]]),
        "load_average_start": os.getloadavg(),
        "goal": "median over runs of (median bot ms / median git-commit ms) <= 3 at every size",
        "repos": {},
        "records": {},
    }
    with tempfile.TemporaryDirectory(prefix="tunebot-overhead-") as tmp:
        repos = {n: make_repo(Path(tmp) / f"h{n}", n) for n in sizes}
        bot: dict[int, list[list[float]]] = {n: [] for n in sizes}
        floor: dict[int, list[list[float]]] = {n: [] for n in sizes}
        for _ in range(args.runs):  # interleaved, so machine noise hits every size alike
            for n, repo in repos.items():
                bot[n].append(overheads(repo))
                floor[n].append(git_commit_floor(repo, 8))
        for n, repo in repos.items():
            commits = int(_git(repo, "rev-list", "--count", "HEAD").strip())
            ratios = [
                statistics.median(b) / statistics.median(f)
                for b, f in zip(bot[n], floor[n], strict=True)
            ]
            result["repos"][str(n)] = {
                "commits": commits,
                "bot": summary([x for run in bot[n] for x in run]),
                "git_commit_floor": summary([x for run in floor[n] for x in run]),
                "bot_run_medians_ms": [statistics.median(b) for b in bot[n]],
                "floor_run_medians_ms": [statistics.median(f) for f in floor[n]],
                "run_ratios": ratios,
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
    for existing in (10, 10_000):
        result["records"][str(existing)] = summary(record_step(existing))
    result["load_average_end"] = os.getloadavg()
    print(
        f"{'repo':<8}{'commits':>8}{'iters':>7}{'bot ms':>8}{'p90':>7}{'commit ms':>11}"
        f"{'ratio (median of runs)':>24}{'runs <= 3x':>12}"
    )
    for n, r in result["repos"].items():
        within = f"{sum(x <= 3 for x in r['run_ratios'])}/{len(r['run_ratios'])}"
        spread = f"{r['ratio']:.2f} [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]"
        print(
            f"{'h' + n:<8}{r['commits']:>8}{r['bot']['n']:>7}{r['bot']['median_ms']:>8.1f}"
            f"{r['bot']['p90_ms']:>7.1f}{r['git_commit_floor']['median_ms']:>11.1f}"
            f"{spread:>24}{within:>12}"
        )
    for existing, r in result["records"].items():
        print(
            f"record keeping (append + fold) with {existing:>6} records: median {r['median_ms']:.2f} ms, "
            f"p90 {r['p90_ms']:.2f} ms"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
