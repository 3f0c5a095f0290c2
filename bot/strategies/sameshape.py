"""Whole buffers an elementwise operation combines keep one shape.

An elementwise vector operation over whole on-chip buffers (`T.tile.mul(acc_o, acc_o,
buf_2d)`, `T.vadd(a, b, c)`, a whole-buffer `T.copy(work_ub, acc_s_half)`) works on
buffers of one shape: element (i, j) of each. When the buffers have the same shape with
the current value but are sized by different expressions (`acc_o` by the head dim,
`buf_2d` by `block_N`, both 128 now), a move that changes only some of them leaves the
operation combining tiles of different shapes: it reads past the smaller or leaves part
of the larger unwritten. Such a move is refused.

Only operations whose operands are all elementwise alike are read (no broadcast, reduce,
gemm or gather), only arguments that name a whole buffer (a slice or a scalar is skipped),
and only vector (UB) buffers: a copy between L1 and L0 may lay a tile out transposed.
Dimensions of 1 on either side are left alone (a row or a column the vector unit may
broadcast). A `@T.macro`'s buffers and calls count: its body runs inside the kernel that
calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, Scoped, macros, visit_kernels
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted

# the last part of the name of operations that combine their buffer operands element by
# element (TileLang-Ascend `T.tile.*`, NPUIR `T.v*` / `T.npuir_*`, and a whole-buffer copy)
_ELEMENTWISE = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "max",
        "min",
        "exp",
        "ln",
        "log",
        "abs",
        "relu",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "axpy",
        "cast",
        "copy",
    }
)
_PREFIXES = ("", "v", "npuir_")


def _op(node: cst.Call) -> str | None:
    last = dotted(node.func).rsplit(".", 1)[-1]
    for prefix in _PREFIXES:
        if last.startswith(prefix) and last[len(prefix) :] in _ELEMENTWISE:
            return last
    return None


@dataclass(frozen=True)
class Combined:
    op: str
    line: int
    buffers: tuple[Buffer, ...]


class _Ops(cst.CSTVisitor):
    def __init__(self, f: Facts, scoped: Scoped) -> None:
        self.f, self.scoped = f, scoped
        self.found: list[Combined] = []

    def visit_Call(self, node: cst.Call) -> None:
        op = _op(node)
        if op is None or any(
            a.keyword is not None and a.keyword.value == "size" for a in node.args
        ):
            return  # an explicit-size copy moves a tile of its own size (copyfit.py)
        held: list[Buffer] = []
        for a in node.args:
            if a.keyword is not None or not isinstance(a.value, cst.Name):
                continue
            b = self.scoped.get(a.value.value, node)
            if b is not None and b not in held:
                held.append(b)
        if (
            len(held) >= 2
            and all(b.memory == "UB" for b in held)  # a copy into L0 may lay the tile out anew
            and len({len(b.dims) for b in held}) == 1
        ):
            self.found.append(Combined(op, self.f.line(node), tuple(held)))


def _shape(b: Buffer, env: Env) -> tuple[int, ...] | None:
    dims = tuple(evaluate(d, env) for d in b.dims)
    if any(type(d) is not int for d in dims):
        return None
    return dims  # type: ignore[return-value]


def _apart(shapes: list[tuple[int, ...]]) -> int | None:
    """The first dimension in which two shapes differ, neither of them 1 there; else None."""
    for i in range(len(shapes[0])):
        sizes = {s[i] for s in shapes if s[i] != 1}
        if len(sizes) > 1:
            return i
    return None


@dataclass
class SameShape:
    """Refuses a value with which buffers an elementwise operation combines part shapes."""

    name: str
    ops: list[Combined]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for c in self.ops:
            now = [_shape(b, env(b.chain, current)) for b in c.buffers]
            new = [_shape(b, env(b.chain, value)) for b in c.buffers]
            if any(s is None for s in now + new) or len(set(now)) != 1:
                continue  # not readable, or the shapes already differ: not ours to judge
            dim = _apart([s for s in new if s is not None])
            if dim is None:
                continue
            shapes = ", ".join(
                f"`{b.name}` {list(s)}" for b, s in zip(c.buffers, new, strict=True) if s
            )
            return (
                f"{self.name}={value}: `{c.op}` at line {c.line} combines whole buffers element "
                f"by element, and they would no longer have one shape ({shapes}; "
                f"{list(now[0] or ())} each with the current {current})"
            )
        return None


def same_shape_check(f: Facts, name: str, factories: list[Function]) -> SameShape | None:
    """The same-shape rule of knob `name` over the elementwise operations of `factories`'
    kernels and of their `@T.macro`s."""
    ops: list[Combined] = []
    for factory in factories:
        for v in visit_kernels(f, [factory], lambda s: _Ops(f, s)):
            ops.extend(v.found)
        for m in macros(f, factory):
            v = _Ops(f, Scoped(f, m))
            m.node.visit(v)
            ops.extend(v.found)
    return SameShape(name, ops) if ops else None
