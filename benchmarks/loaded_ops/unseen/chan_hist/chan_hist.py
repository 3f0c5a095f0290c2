"""Blocked per-channel weighted histograms (an op tunebot was not built with).

`x` [65536, 32] fp32 in [0, 1) and weights `w` of the same shape: every channel (column) gets
its own histogram of 256 equal bins, each bin the sum of the weights of its samples. Samples
are taken BLOCK_N rows by BLOCK_C channels at a time: one bin index per element, one
index_add_ into the block's channels. Small blocks pay per-call dispatch; large blocks build
index temporaries larger than the core's cache.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_N = 8192  # sample rows per block (knob: block_size)
BLOCK_C = 8  # channels per block (knob: block_size)

N, C, BINS = 65536, 32, 256


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(N, C, generator=gen), torch.randn(N, C, generator=gen)


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    bins = (x * BINS).long().clamp_(0, BINS - 1)
    flat = (bins + torch.arange(x.shape[1]) * BINS).reshape(-1)
    hist = torch.zeros(x.shape[1] * BINS, dtype=torch.float64)
    hist.index_add_(0, flat, w.double().reshape(-1))
    return hist.view(x.shape[1], BINS).float()


def kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    n, c = x.shape
    hist = torch.zeros(c * BINS)
    offsets = torch.arange(c) * BINS
    for c0 in range(0, c, BLOCK_C):
        c1 = min(c0 + BLOCK_C, c)
        off = offsets[c0:c1]
        for r0 in range(0, n, BLOCK_N):
            r1 = min(r0 + BLOCK_N, n)
            idx = x[r0:r1, c0:c1].mul(BINS).long().clamp_(0, BINS - 1).add_(off)
            hist.index_add_(0, idx.reshape(-1), w[r0:r1, c0:c1].reshape(-1))
    return hist.view(c, BINS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the blocked histograms.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (chan_hist, BLOCK_N={BLOCK_N}, BLOCK_C={BLOCK_C})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
