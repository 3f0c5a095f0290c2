"""Causal (lower-triangular) matmul, tiled: out = tril(L) @ B (CPU demo op).

The product of a causal mask with values, as in linear attention or a
cumulative sum, and BLAS's TRMM: only the lower triangle of L counts (its upper
part holds unrelated data, as in a matrix stored in place). fp32, L [1024, 1024],
B [1024, 256].

Tiling: output rows are processed BLOCK_M at a time. For each row block, K is
walked up to the diagonal in chunks of PIPELINE_DEPTH hardware-sized K-tiles
(K_TILE = 64 columns each), and each chunk is one matmul call. Like on an
accelerator, the chunk that crosses the diagonal is computed in full after its
upper part is zeroed, so larger blocks and deeper chunks waste work on masked
zeros, while smaller ones pay Python/dispatch overhead for more calls.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_M = 64  # output rows per block (knob: block_size)
PIPELINE_DEPTH = 1  # K-tiles consumed per matmul call (knob: pipeline_depth)

SIZE, COLS = 1024, 256
K_TILE = 64  # columns of L per K-tile: the unit the pipeline depth counts


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lower = torch.randn(SIZE, SIZE, generator=gen) / SIZE ** 0.5  # upper triangle: data the op must ignore
    values = torch.randn(SIZE, COLS, generator=gen)
    return lower, values


def reference(lower: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return torch.tril(lower) @ values


def kernel(lower: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    rows = lower.shape[0]
    out = torch.empty(rows, values.shape[1], dtype=values.dtype)
    chunk = K_TILE * PIPELINE_DEPTH
    for i0 in range(0, rows, BLOCK_M):
        i1 = min(i0 + BLOCK_M, rows)
        acc = torch.zeros(i1 - i0, values.shape[1], dtype=values.dtype)
        for k0 in range(0, i1, chunk):  # whole chunks up to the diagonal
            k1 = min(k0 + chunk, rows)
            tile = lower[i0:i1, k0:k1]
            if k1 > i0 + 1:  # the chunk crosses the diagonal: keep column k only for rows >= k
                tile = tile.tril(i0 - k0)
            acc += tile @ values[k0:k1]
        out[i0:i1] = acc
    return out


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the matmul kernel against the torch reference.")
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
    print(f"L0 pass (matmul, BLOCK_M={BLOCK_M}, PIPELINE_DEPTH={PIPELINE_DEPTH})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
