"""Tiled 1-D convolution (an op tunebot was not built with).

out[co, l] = sum over ci, k of w[co, ci, k] * x[ci, l + k] ("valid" padding), computed per tile
of TILE_CO output channels x TILE_L positions, accumulating TILE_CI input channels and one tap
per matmul. Small tiles pay per-call dispatch; large ones stream operands through memory.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

TILE_L = 1024  # output positions per tile (knob: block_size)
TILE_CO = 16  # output channels per tile (knob: block_size)
TILE_CI = 8  # input channels per matmul (knob: block_size)

C_IN, C_OUT, K, LENGTH = 16, 32, 5, 8192


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(C_IN, LENGTH, generator=gen)
    w = torch.randn(C_OUT, C_IN, K, generator=gen) / (C_IN * K) ** 0.5
    return x, w


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.conv1d(x.unsqueeze(0), w).squeeze(0)


def kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    c_out, c_in, taps = w.shape
    length = x.shape[1] - taps + 1
    out = torch.empty(c_out, length)
    for co0 in range(0, c_out, TILE_CO):
        wb = w[co0 : co0 + TILE_CO]
        for l0 in range(0, length, TILE_L):
            l1 = min(l0 + TILE_L, length)
            acc = torch.zeros(wb.shape[0], l1 - l0)
            for ci0 in range(0, c_in, TILE_CI):
                for k in range(taps):
                    acc += wb[:, ci0 : ci0 + TILE_CI, k] @ x[ci0 : ci0 + TILE_CI, l0 + k : l1 + k]
            out[co0 : co0 + TILE_CO, l0:l1] = acc
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the tiled conv1d.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (conv1d, TILE_L={TILE_L}, TILE_CO={TILE_CO}, TILE_CI={TILE_CI})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
