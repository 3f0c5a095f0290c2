"""Factory parameters the file passes a block size under the caller's name.

A kernel factory may call its tile by what it is (`def matmul(block_M, block_N, K_L1)`: the
K tile held in L1) while its caller writes the value as a block size:

    block_K = 32
    kernel = matmul(block_M, block_N, block_K, dtype)

`K_L1` is not a block-like name, so discovery by name (inventory.py) never looks at it, yet
the literal `block_K = 32` sets the tile the kernel runs with. `block_named` lists such
parameters: a parameter of a factory chain that a call of that function passes a Name whose
own name is block-like (positionally or by keyword). The knob is then bound like any other
parameter (through the call site to the caller's literal), checked with the rules the kernel
reads under the parameter's name, and listed under the name the literal is written as.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted
from bot.strategies.wrappers import argument


def block_named(f: Facts, owner: Function, wanted: Callable[[str], object]) -> set[str]:
    """Parameters of `owner` (not block-like themselves) some call of it passes a block-like
    name."""
    out: set[str] = set()
    for call in f.calls:
        if dotted(call.node.func) != owner.name:
            continue
        if any(a.star for a in call.node.args if a.keyword is None):
            continue  # `f(*cfg)`, `f(**cfg)`: positions unknown
        for i, param in enumerate(owner.params):
            passed = argument(call.node.args, i, param)  # by position or by keyword
            if not wanted(param) and isinstance(passed, cst.Name) and wanted(passed.value):
                out.add(param)
    return out
