"""One job per op across a pool of runners: wall time and API calls, simulated locally.

Three pull requests each get `/tune` with 8 ops (24 ops). The real GitHub flow runs as the
workflow runs it (gate -> one tune job per op -> report) against the fake GitHub (HTTP,
checked against the OpenAPI spec, git over smart HTTP from a real bare repository). A pool
of N workers plays N self-hosted runners: each takes one job at a time, clones a fresh
checkout (an ephemeral runner), and runs `handle_event(phase="tune", only_op=op)`.

The kernels are stand-ins of known cost: each op makes ITERATIONS iterations, each one a
subprocess that sleeps KERNEL_S (so a job costs ITERATIONS * KERNEL_S seconds of "kernel"),
and then delivers through the real path (status comment edits, push from the private git
dir, proposal). Everything but the kernel is tunebot's real code.

    python benchmarks/runner_pool.py [--workers 1 4 8] [--reps 3] [--kernel-s 0.25]

Prints a table and writes benchmarks/results/runner_pool.json. Goal: speed-up >= 0.8 N.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fakegithub.harness import make_world  # noqa: E402

from bot.config.repo import load_repo_config  # noqa: E402
from bot.forge.github import make_client  # noqa: E402
from bot.github_flow import FlowConfig, handle_event  # noqa: E402
from bot.loop import ProgressEvent, RunOutcome  # noqa: E402

OPS = 24
PER_COMMAND = 8
ITERATIONS = 4
SRC = ROOT / "tests" / "loop_ops"


def op_files() -> dict[str, str]:
    files = {".tunebot.yml": "github:\n  max_parallel: 8\n"}
    for i in range(OPS):
        name = f"op{i:02d}"
        files[f"examples/bench/{name}/{name}.py"] = (SRC / "sleepy.py").read_text()
        files[f"examples/bench/{name}/tune.yaml"] = (SRC / "tune.yaml").read_text()
        files[f"examples/bench/{name}/DESIGN.md"] = (SRC / "DESIGN.md").read_text()
    return files


def stand_in_tune(kernel_s: float):
    """A tune of known cost that delivers through the real forge (status, push, proposal)."""

    def tune(request, forge, progress):
        op, name = request.op, request.op.rsplit("/", 1)[-1]
        progress(ProgressEvent("start", op, sha=request.base_ref))
        progress(ProgressEvent("baseline", op, latency_us=100.0, accuracy="pass"))
        latency = 100.0
        for i in range(1, ITERATIONS + 1):
            subprocess.run(
                [sys.executable, "-c", f"import time; time.sleep({kernel_s})"], check=True
            )
            latency *= 0.95
            progress(
                ProgressEvent(
                    "iteration",
                    op,
                    iteration=i,
                    strategy="block_size",
                    change="BLOCK",
                    accuracy="pass",
                    latency_us=latency,
                    verdict="better",
                    gain_pct=(100 - latency),
                )
            )
        progress(ProgressEvent("stop", op, verdict="迭代上限"))
        git = [
            "git",
            "-C",
            str(request.repo),
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ]
        sha = subprocess.run(
            [
                *git,
                "commit-tree",
                f"{request.base_ref}^{{tree}}",
                "-p",
                request.base_ref,
                "-m",
                "stand-in",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        subprocess.run([*git, "update-ref", f"refs/heads/tunebot/{name}/best", sha], check=True)
        progress(ProgressEvent("delivered", op, branch=f"tunebot/{name}/best", sha=sha))
        proposal = forge.propose(
            f"tunebot/{name}/best", request.base_branch, f"tunebot: {op}", "stand-in report"
        )
        return RunOutcome(
            op=op,
            stop_reason="迭代上限",
            iterations=ITERATIONS,
            baseline_us=100.0,
            best_us=latency,
            best_iteration=ITERATIONS,
            improvement_pct=(latency / 100 - 1) * 100,
            delivery_branch=f"tunebot/{name}/best",
            proposal=proposal,
            report="",
            results_path=Path("."),
        )

    return tune


def one_run(workers: int, kernel_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="tunebot-pool-") as tmp:
        tmp_path = Path(tmp)
        world = make_world(tmp_path, op_files())
        try:
            world.fake.set_permission("dev", "write")
            gh = make_client("t0ken", world.fake.base_url)
            default = world.clone(tmp_path / "default")
            repo_cfg = load_repo_config(default)

            def cfg(**kw) -> FlowConfig:
                return FlowConfig(
                    repo=world.fake.full_name,
                    repo_cfg=repo_cfg,
                    server_url=world.fake.base_url + "/html",
                    sleep=lambda s: None,
                    **kw,
                )

            commands, jobs = [], queue.Queue()
            for c in range(OPS // PER_COMMAND):
                head = world.push_branch(f"feature-{c}", {f"notes{c}.md": "x\n"}, f"feature {c}")
                number = world.fake.open_pull(f"feature-{c}", user="dev")
                ops = [f"op{c * PER_COMMAND + k:02d}" for k in range(PER_COMMAND)]
                payload = world.fake.comment_event(number, "/tune " + " ".join(ops), "dev")
                commands.append((payload, head))
            calls0 = len(world.fake.calls)
            t0 = time.perf_counter()
            for payload, head in commands:
                (gate,) = handle_event("issue_comment", payload, gh, cfg(phase="gate"))
                for job in json.loads(gate.outputs["matrix"])["include"]:
                    jobs.put((payload, head, job["op"]))
            calls_gate = len(world.fake.calls) - calls0
            t1 = time.perf_counter()
            failures: list[str] = []
            counter = iter(range(10**6))
            lock = threading.Lock()

            def runner() -> None:
                while True:
                    try:
                        payload, head, op = jobs.get_nowait()
                    except queue.Empty:
                        return
                    with lock:
                        n = next(counter)
                    checkout = world.clone(
                        tmp_path / f"job{n}"
                    )  # an ephemeral runner: a fresh checkout
                    (out,) = handle_event(
                        "issue_comment",
                        payload,
                        gh,
                        cfg(phase="tune", checkout=checkout, authorized_sha=head, only_op=op),
                        tune=stand_in_tune(kernel_s),
                    )
                    if out.exit_code or out.action != "tuned":
                        failures.append(f"{op}: {out.action} {out.message}")

            threads = [threading.Thread(target=runner) for _ in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            t2 = time.perf_counter()
            calls_tune = len(world.fake.calls) - calls0 - calls_gate
            for payload, head in commands:
                handle_event("issue_comment", payload, gh, cfg(phase="report", authorized_sha=head))
            t3 = time.perf_counter()
            calls_report = len(world.fake.calls) - calls0 - calls_gate - calls_tune
            prs = [p for p in world.fake.pulls.values() if p.head_ref.startswith("tunebot/")]
            world.fake.assert_no_violations()
            return {
                "workers": workers,
                "tune_wall_s": t2 - t1,
                "total_wall_s": t3 - t0,
                "failures": failures,
                "proposals": len(prs),
                "api_calls_gate": calls_gate,
                "api_calls_tune": calls_tune,
                "api_calls_report": calls_report,
                "git_requests": len(world.fake.git_requests),
            }
        finally:
            world.fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--kernel-s", type=float, default=0.25, help="seconds one stand-in kernel iteration sleeps"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "runner_pool.json"
    )
    args = parser.parse_args()
    runs = [one_run(n, args.kernel_s) for _ in range(args.reps) for n in args.workers]
    summary = {}
    for n in args.workers:
        mine = [r for r in runs if r["workers"] == n]
        walls = [r["tune_wall_s"] for r in mine]
        summary[n] = {
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "api_calls_per_op": statistics.median(
                (r["api_calls_gate"] + r["api_calls_tune"] + r["api_calls_report"]) / OPS
                for r in mine
            ),
            "tune_calls_per_op": statistics.median(r["api_calls_tune"] / OPS for r in mine),
            "proposals": [r["proposals"] for r in mine],
            "failures": sum(len(r["failures"]) for r in mine),
        }
    base = summary[args.workers[0]]["median_s"] * args.workers[0]
    kernel_per_op = ITERATIONS * args.kernel_s
    print(
        f"24 ops, {ITERATIONS} stand-in kernels of {args.kernel_s}s per op ({kernel_per_op:.1f}s kernel per op), "
        f"{args.reps} reps; wall time of the tune jobs (gate and report excluded)"
    )
    print(
        "workers | median s | min-max s | speed-up | goal 0.8N | API calls/op (all) | tune calls/op | PRs | failures"
    )
    for n, s in summary.items():
        speedup = base / s["median_s"]
        s["speedup"] = speedup
        print(
            f"{n:7d} | {s['median_s']:8.1f} | {s['min_s']:.1f}-{s['max_s']:.1f} | {speedup:8.2f} | {0.8 * n:9.1f} | "
            f"{s['api_calls_per_op']:18.1f} | {s['tune_calls_per_op']:13.1f} | {s['proposals']} | {s['failures']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "kernel_s": args.kernel_s,
                "iterations": ITERATIONS,
                "ops": OPS,
                "runs": runs,
                "summary": {str(k): v for k, v in summary.items()},
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
