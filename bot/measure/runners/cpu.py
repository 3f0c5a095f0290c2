"""CPU latency runner: import the variant, build inputs once, warm up, time the entry only.

Prints nothing of its own on stdout (the kernel may); the samples go to --result as JSON.
"""

from __future__ import annotations

import gc
import time

from bot.measure.runners.common import base_parser, load_entry, write_result


def time_calls(fn, inputs: tuple, warmup: int, repeats: int) -> list[float]:
    """Per-call wall time in microseconds; gc is off while timing, as timeit does."""
    for _ in range(warmup):
        fn(*inputs)
    samples: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            fn(*inputs)
            samples.append((time.perf_counter_ns() - t0) / 1000.0)
    finally:
        gc.enable()
    return samples


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    fn, inputs = load_entry(args, "the timed entry")
    samples = time_calls(fn, inputs, args.warmup, args.repeats)
    write_result(args.result, {"samples_us": samples})


if __name__ == "__main__":
    main()
