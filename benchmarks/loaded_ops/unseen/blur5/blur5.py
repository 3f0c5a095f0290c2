"""Tiled 5-point blur of a large fp32 image (an op tunebot was not built with).

An image [2048, 2048] is zero-padded by one pixel; every output pixel is the mean of itself
and its four neighbours. The output is filled tile by tile, BLOCK_H rows by BLOCK_W columns,
each tile as five shifted views of the padded image summed in place. Small tiles pay per-call
dispatch; wide tiles stream rows larger than the core's cache.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_H = 256  # image rows per tile (knob: block_size)
BLOCK_W = 128  # image columns per tile (knob: block_size)

H, W = 2048, 2048


def get_inputs(seed: int = 0) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(H, W, generator=gen),)


def reference(img: torch.Tensor) -> torch.Tensor:
    weight = (
        torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64).view(
            1, 1, 3, 3
        )
        / 5.0
    )
    out = torch.nn.functional.conv2d(img.double()[None, None], weight, padding=1)
    return out[0, 0].float()


def kernel(img: torch.Tensor) -> torch.Tensor:
    h, w = img.shape
    pad = torch.zeros(h + 2, w + 2)
    pad[1:-1, 1:-1] = img
    out = torch.empty(h, w)
    for i0 in range(0, h, BLOCK_H):
        i1 = min(i0 + BLOCK_H, h)
        for j0 in range(0, w, BLOCK_W):
            j1 = min(j0 + BLOCK_W, w)
            tile = out[i0:i1, j0:j1]
            torch.add(pad[i0 + 1 : i1 + 1, j0 + 1 : j1 + 1], pad[i0:i1, j0 + 1 : j1 + 1], out=tile)
            tile.add_(pad[i0 + 2 : i1 + 2, j0 + 1 : j1 + 1])
            tile.add_(pad[i0 + 1 : i1 + 1, j0:j1])
            tile.add_(pad[i0 + 1 : i1 + 1, j0 + 2 : j1 + 2])
            tile.mul_(0.2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the tiled 5-point blur.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-5)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (blur5, BLOCK_H={BLOCK_H}, BLOCK_W={BLOCK_W})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
