"""Row layer norm in blocks of rows, statistics over column chunks (an op tunebot was not built with).

Rows are processed BLOCK_M at a time. Each block's mean and mean of squares are summed over
column chunks of CHUNK_N (a two-level reduction, as a kernel with a bounded buffer would do),
then the block is normalised and scaled in one pass. Small blocks and chunks pay per-call
dispatch; large blocks build fp32 temporaries bigger than the core's cache.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_M = 256  # rows per block (knob: block_size)
CHUNK_N = 128  # columns per statistics chunk (knob: block_size)

ROWS, COLS = 2048, 1024
EPS = 1e-5


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = 2.0 * torch.randn(ROWS, COLS, generator=gen) + 0.5
    w = torch.randn(COLS, generator=gen)
    b = torch.randn(COLS, generator=gen)
    return x, w, b


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (COLS,), w, b, eps=EPS)


def kernel(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i0 in range(0, x.shape[0], BLOCK_M):
        block = x[i0 : i0 + BLOCK_M]
        s = torch.zeros(block.shape[0], 1)
        sq = torch.zeros(block.shape[0], 1)
        for j0 in range(0, x.shape[1], CHUNK_N):
            chunk = block[:, j0 : j0 + CHUNK_N]
            s += chunk.sum(dim=-1, keepdim=True)
            sq += (chunk * chunk).sum(dim=-1, keepdim=True)
        mean = s / COLS
        var = sq / COLS - mean * mean
        out[i0 : i0 + BLOCK_M] = (block - mean) * torch.rsqrt(var + EPS) * w + b
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the blocked layer norm.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (layer_norm, BLOCK_M={BLOCK_M}, CHUNK_N={CHUNK_N})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
