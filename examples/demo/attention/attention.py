"""Causal attention in blocks with an online softmax (CPU demo op, flash-attention style).

out = softmax(q k^T / sqrt(d) + causal mask) v for 4 heads, 512 positions, head dim 64.
q, k, v and out are fp16; scores and accumulators are fp32.

Queries are processed BLOCK_M rows at a time; for each query block the keys up
to the diagonal are visited in whole tiles of BLOCK_N, keeping a running max and
sum per row (the online softmax), so the full score matrix never exists. Like on
an accelerator, a tile that crosses the diagonal is computed in full and then
masked. Small tiles pay Python/dispatch overhead per tile (about ten torch calls);
large tiles waste work on the masked part of diagonal tiles and build score
tiles bigger than the L2 cache.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_M = 64  # query rows per block (knob: block_size)
BLOCK_N = 32  # keys per tile (knob: block_size)

HEADS, SEQ, HEAD_DIM = 4, 512, 64


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(HEADS, SEQ, HEAD_DIM, generator=gen).to(torch.float16) for _ in range(3))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    seq = q.shape[1]
    scores = (q.float() @ k.float().transpose(1, 2)) / math.sqrt(q.shape[-1])
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return (scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v.float()).to(q.dtype)


def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    heads, seq, dim = q.shape
    qf = q.float() / math.sqrt(dim)
    kf, vf = k.float(), v.float()
    out = torch.empty_like(q)
    for i0 in range(0, seq, BLOCK_M):
        i1 = min(i0 + BLOCK_M, seq)
        qi = qf[:, i0:i1]
        row_max = torch.full((heads, i1 - i0, 1), float("-inf"))
        row_sum = torch.zeros(heads, i1 - i0, 1)
        acc = torch.zeros(heads, i1 - i0, dim)
        for j0 in range(0, i1, BLOCK_N):  # whole key tiles up to the diagonal
            j1 = min(j0 + BLOCK_N, seq)
            scores = qi @ kf[:, j0:j1].transpose(1, 2)
            if j1 > i0 + 1:  # the tile reaches past the diagonal: mask future keys
                future = torch.arange(j0, j1) > torch.arange(i0, i1).unsqueeze(1)
                scores = scores.masked_fill(future, float("-inf"))
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            probs = torch.exp(scores - new_max)
            rescale = torch.exp(row_max - new_max)
            row_sum = row_sum * rescale + probs.sum(dim=-1, keepdim=True)
            acc = acc * rescale + probs @ vf[:, j0:j1]
            row_max = new_max
        out[:, i0:i1] = (acc / row_sum).to(q.dtype)
    return out


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the attention kernel against the torch reference.")
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
    print(f"L0 pass (attention, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
