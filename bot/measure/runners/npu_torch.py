"""torch_npu profiler runner: profile `repeats` entry calls, one profiler step each.

The trace (…/ASCEND_PROFILER_OUTPUT/kernel_details.csv) is written under
--trace-dir; the parent parses it (bot/measure/backends/npu_torch.py).
Writes {"unavailable": "..."} (exit 3) when torch_npu cannot be imported.
"""

from __future__ import annotations

import sys

from bot.measure.runners.common import (
    EXIT_BAD_OP,
    base_parser,
    load_entry,
    parse_args,
    to_device,
    write_result,
)


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--trace-dir", required=True)
    args = parse_args(p)
    try:
        import torch
        import torch_npu
    except Exception as exc:  # ImportError, or a CANN library that fails to load
        write_result(
            args.result,
            {"unavailable": f"torch_npu cannot be imported: {type(exc).__name__}: {exc}"},
            EXIT_BAD_OP,
        )
        sys.exit(EXIT_BAD_OP)
    fn, inputs = load_entry(args, "the profiled entry")
    inputs = to_device(inputs, torch, "npu")
    prof = torch_npu.profiler
    config = prof._ExperimentalConfig(
        profiler_level=prof.ProfilerLevel.Level1,
        aic_metrics=prof.AiCMetrics.PipeUtilization,
        l2_cache=False,
    )
    with prof.profile(
        activities=[prof.ProfilerActivity.NPU],
        schedule=prof.schedule(wait=0, warmup=args.warmup, active=args.repeats, repeat=1),
        on_trace_ready=prof.tensorboard_trace_handler(args.trace_dir),
        experimental_config=config,
    ) as session:
        for _ in range(args.warmup + args.repeats):
            fn(*inputs)
            torch.npu.synchronize()  # type: ignore[attr-defined]  # torch_npu adds torch.npu
            session.step()
    write_result(args.result, {"steps": args.repeats})


if __name__ == "__main__":
    main()
