"""An allocating torch kernel whose cost is set by the knob REPS (benchmarks/pair_rule.py).

Every step multiplies a 1 MB tensor into a fresh buffer (above glibc's first mmap threshold,
so the allocator is in the timed loop), then reduces a strided slice of it. The steps are
identical, so the time is close to proportional to REPS: REPS 38 does 5 % less work than 40.
"""

import sys

import torch

torch.set_num_threads(1)

REPS = 40
N = 1 << 18  # fp32 elements: 1 MB


def get_inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(N, generator=gen),)


def reference(x):
    return (x * 1.0001)[::4096].sum() * REPS


def kernel(x):
    acc = torch.zeros(())
    for _ in range(REPS):
        y = x * 1.0001
        acc += y[::4096].sum()
    return acc


if __name__ == "__main__":
    if "--level" in sys.argv:
        inputs = get_inputs()
        assert torch.allclose(kernel(*inputs), reference(*inputs), rtol=1e-4)
        print("L0 passed")
