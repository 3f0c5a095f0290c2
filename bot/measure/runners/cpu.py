"""CPU latency runner: import the variant, build inputs once, warm up, time the entry only.

Prints nothing of its own on stdout (the kernel may); the samples go to --result as JSON.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

from bot.measure.runners.common import base_parser, load_entry, mark, parse_args, write_result

_clock = time.perf_counter_ns  # bound before the variant is imported: patching time.* does not reach it


def time_calls(fn, inputs: tuple, warmup: int, repeats: int,
               started: Callable[[], None] = lambda: None) -> list[float]:
    """Per-call wall time in microseconds; gc is off while timing, as timeit does.
    `started` is called right before the timed loop (the parent stamps it)."""
    for _ in range(warmup):
        fn(*inputs)
    samples: list[float] = []
    gc.collect()
    gc.disable()
    try:
        started()
        for _ in range(repeats):
            t0 = _clock()
            fn(*inputs)
            samples.append((_clock() - t0) / 1000.0)
    finally:
        gc.enable()
    return samples


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    args = parse_args(p)
    fn, inputs = load_entry(args, "the timed entry")
    samples = time_calls(fn, inputs, args.warmup, args.repeats, lambda: mark(args.result, "timing"))
    write_result(args.result, {"samples_us": samples})


if __name__ == "__main__":
    main()
