"""Embedding-bag sums in blocks of bags (an op tunebot was not built with).

A table [16384, 128] and 4096 bags of 24 row indices each: every bag's output row is the sum
of its table rows. Bags are processed BLOCK_BAGS at a time (one gather, one reduction); the
gathered rows of a block are summed in slices of SLICE_D columns. Small blocks pay per-call
dispatch; large blocks gather more rows than the core's cache holds.
"""

from __future__ import annotations

import argparse
import sys

import torch

torch.set_num_threads(1)  # one core: stable timing, no oversubscription on shared machines

BLOCK_BAGS = 16  # bags gathered per step
SLICE_D = 32  # columns summed per step

ROWS, DIM, BAGS, PER_BAG = 16384, 128, 4096, 24


def get_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(ROWS, DIM, generator=gen)
    index = torch.randint(0, ROWS, (BAGS, PER_BAG), generator=gen)
    return table, index


def reference(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.double()[index].sum(dim=1).float()


def kernel(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    out = torch.empty(index.shape[0], table.shape[1])
    for b0 in range(0, index.shape[0], BLOCK_BAGS):
        rows = index[b0 : b0 + BLOCK_BAGS].reshape(-1)
        bags = rows.numel() // PER_BAG
        for d0 in range(0, table.shape[1], SLICE_D):
            part = table[:, d0 : d0 + SLICE_D].index_select(0, rows)
            out[b0 : b0 + bags, d0 : d0 + SLICE_D] = part.view(bags, PER_BAG, -1).sum(dim=1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Accuracy check of the blocked bag sum.")
    parser.add_argument("--level", default="L0", choices=["L0"])
    parser.parse_args(argv)
    inputs = get_inputs(seed=0)
    try:
        torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    except AssertionError as exc:
        print(f"L0 FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"L0 pass (bag_sum, BLOCK_BAGS={BLOCK_BAGS}, SLICE_D={SLICE_D})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
