"""Weight-only int8 matmul with per-group scales, tiled (CPU demo op).

out[M, N] = x[M, K] @ (w_q[K, N] * scale[K // GROUP, N]), x fp16, w_q int8, out fp16.
The shape is a decode step: 16 tokens through a 1024 -> 4096 projection.

Tiling: the output columns are cut into tiles of BLOCK_N. For each tile the
K dimension is walked PIPELINE_DEPTH quantization groups (GROUP rows each) at
a time: those rows are staged (int8 -> fp32, times their scales) into one
buffer and multiplied in one call. On an NPU, the depth would be the number of
K-tiles in flight (num_stages). On a CPU nothing overlaps: the depth only sets
how many groups each staging call handles, trading call overhead (small
depth) against a staging buffer that outgrows the L2 cache (large depth).
BLOCK_N trades the same way along N.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_N = 2048  # output columns per tile (knob: block_size)
PIPELINE_DEPTH = 8  # quantization groups staged per call (knob: pipeline_depth)

M, K, N = 16, 1024, 4096
GROUP = 32  # rows of K sharing one scale per column


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=gen).to(torch.float16)
    w_q = torch.randint(-127, 128, (K, N), generator=gen, dtype=torch.int8)
    # Scales chosen so outputs are O(1): fp16 rounding then stays well inside the tolerance.
    scale = ((0.5 + torch.rand(K // GROUP, N, generator=gen)) / (127 * K ** 0.5)).to(torch.float16)
    return x, w_q, scale


def _dequantize(w_q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, cols = w_q.shape
    grouped = w_q.float().view(rows // GROUP, GROUP, cols) * scale.float().unsqueeze(1)
    return grouped.view(rows, cols)


def reference(x: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (x.float() @ _dequantize(w_q, scale)).to(torch.float16)


def kernel(x: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], w_q.shape[1], dtype=torch.float16)
    xf = x.float()
    step = GROUP * PIPELINE_DEPTH
    for n0 in range(0, w_q.shape[1], BLOCK_N):
        n1 = min(n0 + BLOCK_N, w_q.shape[1])
        acc = torch.zeros(x.shape[0], n1 - n0)
        for k0 in range(0, w_q.shape[0], step):
            k1 = min(k0 + step, w_q.shape[0])
            staged = _dequantize(w_q[k0:k1, n0:n1], scale[k0 // GROUP:k1 // GROUP, n0:n1])
            acc += xf[:, k0:k1] @ staged
        out[:, n0:n1] = acc
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
    print(f"L0 pass (matmul, BLOCK_N={BLOCK_N}, PIPELINE_DEPTH={PIPELINE_DEPTH})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
