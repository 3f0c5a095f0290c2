"""The bot's own per-iteration overhead: planning, git, records (kernel time excluded).

Runs real tuning runs of a small test op on two real repositories side by side,
one with a single commit of history and one with >= 1000 commits, and subtracts
the time spent inside the Evaluator's kernel-running calls (accuracy, latency,
decide) from the wall time of each iteration.

    python benchmarks/overhead.py [--commits 1000] [--runs 3]

Prints a table and writes benchmarks/results/overhead.json.
"""

from __future__ import annotations

import argparse
import json
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
from bot.loop import ProgressEvent, TuneRequest, run_tune  # noqa: E402
from bot.measure.evaluator import Evaluator  # noqa: E402

OP_FILES = ROOT / "tests" / "loop_ops"
OP_DIR = "examples/bench/sleepy"


class TimedEvaluator(Evaluator):
    """The real Evaluator, also counting the seconds spent running kernels."""

    kernel_s = 0.0

    def _timed(self, method, *args):
        start = time.perf_counter()
        try:
            return method(*args)
        finally:
            TimedEvaluator.kernel_s += time.perf_counter() - start

    def accuracy(self, source):
        return self._timed(super().accuracy, source)

    def latency(self, source):
        return self._timed(super().latency, source)

    def decide(self, *args):
        return self._timed(super().decide, *args)


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True).stdout.decode()


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

    run_tune(TuneRequest(repo=repo, op="sleepy", restart=True), LocalForge(repo), progress,
             evaluator_factory=TimedEvaluator)
    return [((t1 - t0) - (k1 - k0)) * 1000 for (t0, k0), (t1, k1) in zip(marks, marks[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tunebot-overhead-") as tmp:
        small = make_repo(Path(tmp) / "small", 1)
        large = make_repo(Path(tmp) / "large", args.commits)
        samples: dict[str, list[float]] = {"small": [], "large": []}
        for _ in range(args.runs):  # interleaved, so machine noise hits both alike
            samples["small"] += overheads(small)
            samples["large"] += overheads(large)
        history = int(_git(large, "rev-list", "--count", "HEAD").strip())
    result = {name: {"iterations": len(values), "median_ms": statistics.median(values),
                     "p90_ms": sorted(values)[int(0.9 * (len(values) - 1))], "max_ms": max(values)}
              for name, values in samples.items()}
    result["large"]["commits"] = history
    result["ratio_large_vs_small"] = result["large"]["median_ms"] / result["small"]["median_ms"]
    print(f"{'repo':<8}{'commits':>9}{'iters':>7}{'median ms':>11}{'p90 ms':>9}{'max ms':>9}")
    for name, commits in (("small", 2), ("large", history)):
        r = result[name]
        print(f"{name:<8}{commits:>9}{r['iterations']:>7}{r['median_ms']:>11.1f}{r['p90_ms']:>9.1f}{r['max_ms']:>9.1f}")
    print(f"median ratio large/small: {result['ratio_large_vs_small']:.2f}")
    out = ROOT / "benchmarks" / "results" / "overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
