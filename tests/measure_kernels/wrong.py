"""A kernel with a wrong result: one element off by 0.5, the rest exact."""

import sys

import torch


def get_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(128, 32, generator=g),)


def reference(x):
    return x * 3.0


def kernel(x):
    out = x * 3.0
    out[7, 5] += 0.5
    return out


if __name__ == "__main__":
    if "--level" in sys.argv:
        (x,) = get_inputs()
        torch.testing.assert_close(kernel(x), reference(x), rtol=1e-4, atol=1e-4)
        print("L0 passed")
