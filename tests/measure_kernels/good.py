"""A correct kernel: fused scale-add, two outputs (fp32 and fp16)."""

import sys

import torch

SCALE = 2.0


def get_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 64, generator=g)
    y = torch.randn(256, 64, generator=g)
    return x, y


def reference(x, y):
    return x * SCALE + y, (x * y).half()


def kernel(x, y):
    out = torch.empty_like(x)
    torch.add(y, x, alpha=SCALE, out=out)
    return out, torch.mul(x, y).half()


if __name__ == "__main__":
    if "--level" in sys.argv:
        inputs = get_inputs()
        for got, want in zip(kernel(*inputs), reference(*inputs), strict=False):
            tol = 1e-2 if want.dtype == torch.float16 else 1e-4
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)
        print("L0 passed")
