"""RMSNorm over the last dimension, processed in blocks of rows (CPU demo op).

y = x / sqrt(mean(x^2) + eps) * weight, with fp16 input/output and fp32 math.

The kernel walks the rows BLOCK_ROWS at a time, like one tile per core on an
accelerator. Small blocks pay Python/dispatch overhead per block (about six
torch calls each); large blocks make every fp32 temporary bigger than the
core's L2 cache, so each of those calls streams through memory.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_ROWS = 4  # rows per block (knob: block_size)

ROWS, HIDDEN = 1024, 4096
EPS = 1e-6
DTYPE = torch.float16


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(ROWS, HIDDEN, generator=gen).to(DTYPE)
    weight = (1.0 + 0.1 * torch.randn(HIDDEN, generator=gen)).to(DTYPE)
    return x, weight


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf * rms * weight.float()).to(x.dtype)


def kernel(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    w = weight.float()
    for start in range(0, x.shape[0], BLOCK_ROWS):
        block = x[start:start + BLOCK_ROWS].float()
        rms = torch.rsqrt(block.pow(2).mean(dim=-1, keepdim=True) + EPS)
        out[start:start + BLOCK_ROWS] = (block * rms * w).to(x.dtype)
    return out


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the rms_norm kernel against the torch reference.")
    parser.add_argument("--level", default="L0", choices=["L0"], help="accuracy level (L0: one seeded input)")
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    actual, expected = kernel(*inputs), reference(*inputs)
    tol = _tolerance(expected.dtype)
    try:
        torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (rms_norm, BLOCK_ROWS={BLOCK_ROWS})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
