"""CUDA latency runner: device time of each entry call from CUDA events, L2 flushed in between.

Writes {"samples_us": [...]} or {"unavailable": "..."} (exit 3) to --result.
"""

from __future__ import annotations

import sys

from bot.measure.runners.common import (
    EXIT_BAD_OP,
    base_parser,
    load_entry,
    mark,
    parse_args,
    to_device,
    write_result,
)


def time_events(
    fn, inputs: tuple, warmup: int, repeats: int, torch, started=lambda: None
) -> list[float]:
    """Per-call device time (us). Before each call a buffer twice the L2 size is
    zeroed so every repetition starts with a cold L2, as the first call in a model would."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 1024 * 1024
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn(*inputs)
    torch.cuda.synchronize()
    started()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for i in range(repeats):
        flush.zero_()
        starts[i].record()
        fn(*inputs)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends, strict=True)]


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    args = parse_args(p)
    try:
        import torch
    except ImportError as exc:
        write_result(args.result, {"unavailable": f"torch cannot be imported: {exc}"}, EXIT_BAD_OP)
        sys.exit(EXIT_BAD_OP)
    if not torch.cuda.is_available():
        why = (
            "torch was built without CUDA"
            if torch.version.cuda is None
            else "no CUDA device is visible"
        )
        write_result(
            args.result,
            {"unavailable": f"CUDA not available ({why}; torch {torch.__version__})"},
            EXIT_BAD_OP,
        )
        sys.exit(EXIT_BAD_OP)
    fn, inputs = load_entry(args, "the timed entry")
    inputs = to_device(inputs, torch, "cuda")
    samples = time_events(
        fn, inputs, args.warmup, args.repeats, torch, lambda: mark(args.result, "timing")
    )
    write_result(args.result, {"samples_us": samples, "device": torch.cuda.get_device_name(0)})


if __name__ == "__main__":
    main()
