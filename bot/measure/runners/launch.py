"""Launch runner for profilers (msprof op): call the entry `calls` times, then synchronize.

The profiler around this process does the timing; this runner only makes sure
the kernel is launched often enough and that device work has finished.
"""

from __future__ import annotations

import sys

from bot.measure.runners.common import base_parser, load_entry, parse_args, write_result


def synchronize() -> str:
    """Wait for queued device work; returns the device synchronized ("none" on a CPU)."""
    torch = sys.modules.get("torch")  # only if the op imported it; never pay for the import
    if torch is None:
        return "none"
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        npu.synchronize()
        return "npu"
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        return "cuda"
    return "none"


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--calls", type=int, default=1)
    args = parse_args(p)
    fn, inputs = load_entry(args, "the launched entry")
    for _ in range(args.calls):
        fn(*inputs)
    device = synchronize()
    write_result(args.result, {"calls": args.calls, "device": device})


if __name__ == "__main__":
    main()
