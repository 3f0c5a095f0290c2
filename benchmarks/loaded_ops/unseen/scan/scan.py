"""Inclusive prefix sum along rows in column blocks with a carried total (an op tunebot was not built with).

Each row of `[64, 65536]` fp32 is scanned BLOCK_N columns at a time: a local cumulative sum
of the block plus the running total of the blocks before it. Small blocks pay per-call
dispatch and a carry add per block; very large blocks stream temporaries through memory
twice.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_N = 512  # columns per block (knob: block_size)

ROWS, COLS = 64, 65536


def get_inputs(seed: int = 0) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(ROWS, COLS, generator=gen, dtype=torch.float64),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=-1)


def kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    carry = torch.zeros(x.shape[0], 1, dtype=x.dtype)
    for j0 in range(0, x.shape[1], BLOCK_N):
        local = torch.cumsum(x[:, j0 : j0 + BLOCK_N], dim=-1) + carry
        out[:, j0 : j0 + BLOCK_N] = local
        carry = local[:, -1:]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the blocked scan.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-9, atol=1e-7)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (scan, BLOCK_N={BLOCK_N})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
