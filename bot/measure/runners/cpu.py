"""CPU latency runner: import the variant, build inputs once, warm up, time the entry only.

Each timed call is measured twice: wall time (`perf_counter_ns`) and the process's CPU time
(`process_time_ns`, every thread counted). On a loaded host wall time grows with the time
other tenants hold the core; CPU time counts only the time the kernel ran, so the decision
rule uses it (docs/measurement.md). The kernel's math libraries are pinned to
`--threads` threads (1 by default) before the variant is imported: then CPU time is the
kernel's work on one core rather than a sum over helper threads that spin while they
wait for a descheduled peer. The OS threads the process had while timing are counted and
reported, so a kernel that starts its own threads is visible in the record.

With `--source-b`, the runner times two variants alternately, in turns of `--block` calls, so
that both see the same moments, core and load, and their ratio is far steadier than that of
two separate runs (benchmarks/noise.py). Each side runs in its own child process, forked
before any variant is imported and pinned with its sibling to one core (runners/forked.py):
the two kernels cannot change each other's speed through the interpreter, the allocator or
memory they share (a kernel that allocates large buffers each call ran at twice its own time
beside another in one process: docs/measurement.md, "pairs"). The parent never imports a
variant; it orders the calls, times each round trip with its own clock and reports. With
`--one-process`, or where `os.fork` does not exist, both variants share this process and
alternate call by call. The decision rule's re-measure uses this pair mode.

Prints nothing of its own on stdout (the kernel may); the samples go to the parent's result
channel (runners/common.py). The clocks are bound before the variant is imported, so a variant
that patches `time.*` does not reach them, and the parent stamps the start of the timed loop
("timing") with its own clock to check the samples against it.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.measure.runners.common import (
    Channel,
    OpContractError,
    attribute,
    base_parser,
    build_inputs,
    fail_contract,
    load_entry,
    load_module,
    mark,
    parse_args,
    write_result,
)
from bot.measure.runners.forked import Hooks, PairBroken, time_pair_forked

_clock = (
    time.perf_counter_ns
)  # bound before the variant is imported: patching time.* does not reach them
_cpu_clock = time.process_time_ns

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


def time_calls(
    fn, inputs: tuple, warmup: int, repeats: int, started: Callable[[], None] = lambda: None
) -> tuple[list[float], list[float], int]:
    """Per-call (wall, cpu) time in microseconds and the most OS threads seen; gc is off while timing.
    `started` is called right before the timed loop (the parent stamps it)."""
    for _ in range(warmup):
        fn(*inputs)
    wall: list[float] = []
    cpu: list[float] = []
    gc.collect()
    gc.disable()
    try:
        started()
        for _ in range(repeats):
            c0 = _cpu_clock()
            t0 = _clock()
            fn(*inputs)
            t1 = _clock()
            c1 = _cpu_clock()
            wall.append((t1 - t0) / 1000.0)
            cpu.append((c1 - c0) / 1000.0)
    finally:
        gc.enable()
    return wall, cpu, os_threads()


def time_pair(
    fa,
    ia: tuple,
    fb,
    ib: tuple,
    warmup: int,
    repeats: int,
    started: Callable[[], None] = lambda: None,
) -> dict:
    """Alternate a and b call by call, the order swapped every round (a b, b a, ...)."""
    timed = _make_timed()
    for _ in range(warmup):
        fa(*ia)
        fb(*ib)
    out: dict[str, list[float]] = {"a_wall": [], "a_cpu": [], "b_wall": [], "b_cpu": []}
    gc.collect()
    gc.disable()
    try:
        started()
        for i in range(repeats):
            for side in "ab" if i % 2 == 0 else "ba":
                wall, cpu = timed(fa, ia) if side == "a" else timed(fb, ib)
                out[f"{side}_wall"].append(wall)
                out[f"{side}_cpu"].append(cpu)
    finally:
        gc.enable()
    return out


def _make_timed(
    clock: Callable[[], int] = _clock, cpu_clock: Callable[[], int] = _cpu_clock
) -> Callable[[Callable[..., Any], tuple], tuple[float, float]]:
    """One timed call; the clocks are bound here, before any variant is imported."""

    def timed(fn: Callable[..., Any], inputs: tuple) -> tuple[float, float]:
        c0 = cpu_clock()
        t0 = clock()
        fn(*inputs)
        t1 = clock()
        c1 = cpu_clock()
        return (t1 - t0) / 1000.0, (c1 - c0) / 1000.0

    return timed


def _torch_threads(threads: int) -> None:
    """torch may have read the thread variables before us in an odd setup; tell it too."""
    try:
        torch = sys.modules.get("torch")
        if torch is not None and threads > 0:
            torch.set_num_threads(threads)
    except Exception:  # noqa: BLE001 - a torch without threading controls keeps its default
        pass


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument(
        "--threads", type=int, default=1, help="math-library threads (0: library default)"
    )
    p.add_argument(
        "--source-b", type=Path, help="a second variant, timed alternately with --source"
    )
    p.add_argument(
        "--block",
        type=int,
        default=5,
        help="timed calls per turn of a pair's side (runners/forked.py); 1 alternates every call",
    )
    p.add_argument(
        "--one-process",
        action="store_true",
        help="time both variants of a pair in this process (the default forks one child per side)",
    )
    args = parse_args(p)
    pin_threads(args.threads)
    if args.source_b is not None and hasattr(os, "fork") and not args.one_process:
        channel_fd = [args.result.fd] if isinstance(args.result, Channel) else []
        try:
            payload = time_pair_forked(
                args,
                block=args.block,
                pinned=args.threads == 1,
                hooks=Hooks(_make_timed(), lambda: _torch_threads(args.threads), os_threads),
                clock=_clock,
                started=lambda: mark(args.result, "timing"),
                keep_closed=channel_fd,
            )
        except OpContractError as exc:
            fail_contract(args.result, exc)
        except PairBroken as exc:
            write_result(args.result, {"error": str(exc)}, 1)
        write_result(args.result, dict(payload, pinned_threads=args.threads))
        return
    fn, inputs = load_entry(args, "the timed entry")
    if args.source_b is not None:
        try:
            module_b = load_module(args.source_b, name="tunebot_variant_b")
            fb, ib = (
                attribute(module_b, args.entry, "the timed entry"),
                build_inputs(module_b, args.inputs, args.seed),
            )
        except OpContractError as exc:
            fail_contract(args.result, exc)
        s = time_pair(
            fn, inputs, fb, ib, args.warmup, args.repeats, lambda: mark(args.result, "timing")
        )
        write_result(
            args.result,
            {
                "samples_us": s["a_wall"],
                "cpu_samples_us": s["a_cpu"],
                "b_samples_us": s["b_wall"],
                "b_cpu_samples_us": s["b_cpu"],
                "threads": os_threads(),
                "pinned_threads": args.threads,
                "isolated": False,
            },
        )
        return
    _torch_threads(args.threads)
    wall, cpu, threads = time_calls(
        fn, inputs, args.warmup, args.repeats, lambda: mark(args.result, "timing")
    )
    write_result(
        args.result,
        {
            "samples_us": wall,
            "cpu_samples_us": cpu,
            "threads": threads,
            "pinned_threads": args.threads,
        },
    )


if __name__ == "__main__":
    main()
