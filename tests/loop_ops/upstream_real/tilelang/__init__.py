"""Stand-in for the tilelang package so a real upstream NPU example runs on a CPU.

`compile(...)` returns a kernel that computes what the upstream example's prim_func
computes: examples/log2.py's `main(A, B)` (B = log2(A)) or
examples/elementwise/vec_add_1d.py's `main(A, B, C, shape)` (C = A + B); torch gets a
`.npu()` that stays on the CPU and a `torch.npu` with the two calls the examples make. Nothing here judges speed:
bench.py is the stand-in latency.
"""

import types

import torch

torch.Tensor.npu = lambda self, *args, **kwargs: self  # type: ignore[attr-defined]
torch.npu = types.SimpleNamespace(set_device=lambda *a: None, synchronize=lambda: None)  # type: ignore[attr-defined]

cache = types.SimpleNamespace(clear_cache=lambda: None)


def compile(func, *args, **kwargs):  # noqa: A001 - the name tilelang uses
    def kernel(*args):
        if len(args) == 2:  # log2.py
            args[1].copy_(torch.log2(args[0]))
        else:  # vec_add_1d.py
            args[2].copy_(args[0] + args[1])

    return kernel


def jit(*args, **kwargs):
    return lambda fn: fn
