"""Pairwise squared Euclidean distances in tiles (an op tunebot was not built with).

`x` [1024, 64] against `y` [2048, 64]: the output [1024, 2048] is filled tile by tile,
BLOCK_M rows of x against BLOCK_N rows of y, each tile as |a|^2 + |b|^2 - 2 a.b. Small
tiles pay per-call dispatch; large ones build temporaries larger than the core's cache.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_M = 32  # rows of x per tile (knob: block_size)
BLOCK_N = 128  # rows of y per tile (knob: block_size)

M, N, D = 1024, 2048, 64


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(M, D, generator=gen), torch.randn(N, D, generator=gen)


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.cdist(x.double(), y.double()).pow(2).float()


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], y.shape[0])
    xx = (x * x).sum(dim=1, keepdim=True)
    yy = (y * y).sum(dim=1)
    for i0 in range(0, x.shape[0], BLOCK_M):
        a = x[i0 : i0 + BLOCK_M]
        for j0 in range(0, y.shape[0], BLOCK_N):
            b = y[j0 : j0 + BLOCK_N]
            tile = xx[i0 : i0 + BLOCK_M] + yy[j0 : j0 + BLOCK_N]
            tile.addmm_(a, b.t(), alpha=-2.0)
            out[i0 : i0 + BLOCK_M, j0 : j0 + BLOCK_N] = tile
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the tiled cdist.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-3, atol=1e-3)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (cdist, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
