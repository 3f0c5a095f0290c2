"""CPU latency runner: import the variant, build inputs once, warm up, time the entry only.

Each timed call is measured twice: wall time (`perf_counter_ns`) and the process's CPU time
(`process_time_ns`, every thread counted). On a loaded host wall time grows with the time
other tenants hold the core; CPU time counts only the time the kernel ran, so the decision
rule uses it (docs/measurement.md). The kernel's math libraries are pinned to
`--threads` threads (1 by default) before the variant is imported: then CPU time is the
kernel's work on one core rather than a sum over helper threads that spin while they
wait for a descheduled peer. The OS threads the process had while timing are counted and
reported, so a kernel that starts its own threads is visible in the record.

Prints nothing of its own on stdout (the kernel may); the samples go to --result as JSON.
"""

from __future__ import annotations

import gc
import os
import threading
import time

from bot.measure.runners.common import base_parser, load_entry, write_result

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pin_threads(threads: int) -> None:
    """Must run before the variant (and so torch / numpy) is imported: the libraries read these once."""
    if threads <= 0:
        return  # 0: leave the libraries' defaults
    for name in THREAD_VARS:
        os.environ[name] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle workers sleep instead of spinning


def os_threads() -> int:
    """Threads of this process right now (Linux /proc; Python's own count elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return threading.active_count()


def time_calls(fn, inputs: tuple, warmup: int, repeats: int) -> tuple[list[float], list[float], int]:
    """Per-call (wall, cpu) time in microseconds and the most OS threads seen; gc is off while timing."""
    for _ in range(warmup):
        fn(*inputs)
    wall: list[float] = []
    cpu: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            fn(*inputs)
            t1 = time.perf_counter_ns()
            c1 = time.process_time_ns()
            wall.append((t1 - t0) / 1000.0)
            cpu.append((c1 - c0) / 1000.0)
    finally:
        gc.enable()
    return wall, cpu, os_threads()


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--threads", type=int, default=1, help="math-library threads (0: library default)")
    args = p.parse_args()
    pin_threads(args.threads)
    fn, inputs = load_entry(args, "the timed entry")
    try:  # torch may have read the variables before us in an odd setup; tell it too
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and args.threads > 0:
            torch.set_num_threads(args.threads)
    except Exception:  # noqa: BLE001 - a torch without threading controls keeps its default
        pass
    wall, cpu, threads = time_calls(fn, inputs, args.warmup, args.repeats)
    write_result(args.result, {"samples_us": wall, "cpu_samples_us": cpu, "threads": threads,
                               "pinned_threads": args.threads})


if __name__ == "__main__":
    main()
