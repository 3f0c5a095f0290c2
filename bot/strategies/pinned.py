"""A tile whose length is the knob but whose offset steps by a literal equal to the knob's value.

    block_M = 64
    H0 = g_i * g + (bx % g_block_num) * 64      # the step written out, not `* block_M`
    H1 = H0 + block_M
    T.copy(Q[b_i, s_i, H0:H1, :dim], q_l1)

The slice takes block_M elements at multiples of 64: the tiles cover the axis only while
block_M is 64, the value the author wrote out. Any other value leaves gaps (32: 32-element
tiles at offsets 0, 64, ...) or overlaps the tiles (reading past the tensor at the last). So a
move off that value is refused, naming the slice and the literal. A slice `lo:hi` counts when
hi is `lo + knob` (directly or through the kernel's locals) and lo, read through the kernel's
locals, multiplies something that is not a literal by an integer literal equal to the knob's
current value, and does not read the knob itself, in any term of its sum as the kernel's
locals spell it (`lo = b * 64 + h0` with `h0 = (cid % h_blocks) * block_M`: the tiles step by
the knob, and 64 is another axis's stride that equals the knob's value by coincidence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.evaluate import Env, code_of
from bot.strategies.facts import Facts, Function, names_in

MAX_DEPTH = 4  # local assignments followed


@dataclass(frozen=True)
class _Pinned:
    knob: str  # the alias the slice's length reads
    literal: int
    slice: str
    line: int


def _local(node: cst.BaseExpression, fn: Function, depth: int = 0) -> cst.BaseExpression:
    """A name the kernel assigns once, replaced by its value (up to MAX_DEPTH times)."""
    while (
        isinstance(node, cst.Name)
        and depth < MAX_DEPTH
        and len(fn.assigns.get(node.value, [])) == 1
    ):
        node = fn.assigns[node.value][0]
        depth += 1
    return node


def _terms(node: cst.BaseExpression, fn: Function, depth: int = 0) -> list[cst.BaseExpression]:
    """`node` as a sum of terms, a term that is a local the kernel assigns once replaced by the
    terms of its value (up to MAX_DEPTH locals deep)."""
    if depth < MAX_DEPTH and isinstance(node, cst.Name):
        value = _local(node, fn, MAX_DEPTH - 1)
        if value is not node:
            return _terms(value, fn, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        return _terms(node.left, fn, depth) + _terms(node.right, fn, depth)
    return [node]


def _steps(node: cst.BaseExpression) -> list[int]:
    """Integer literals that multiply a non-literal anywhere in `node`."""
    out: list[int] = []

    class _V(cst.CSTVisitor):
        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> None:
            if not isinstance(n.operator, cst.Multiply):
                return
            for lit, other in ((n.left, n.right), (n.right, n.left)):
                if isinstance(lit, cst.Integer) and not isinstance(other, cst.Integer):
                    out.append(int(lit.evaluated_value))

    node.visit(_V())
    return out


class _Slices(cst.CSTVisitor):
    def __init__(self, f: Facts, fn: Function, aliases: set[str]) -> None:
        self.f, self.fn, self.aliases = f, fn, aliases
        self.found: list[_Pinned] = []

    def visit_Slice(self, node: cst.Slice) -> None:
        if node.lower is None or node.upper is None or node.step is not None:
            return
        hi = _local(node.upper, self.fn)
        if not (isinstance(hi, cst.BinaryOperation) and isinstance(hi.operator, cst.Add)):
            return
        lo_code = code_of(node.lower)
        for base, length in ((hi.left, hi.right), (hi.right, hi.left)):
            if not (isinstance(length, cst.Name) and length.value in self.aliases):
                continue
            if code_of(base) != lo_code and code_of(_local(base, self.fn)) != code_of(
                _local(node.lower, self.fn)
            ):
                continue
            lo = _local(node.lower, self.fn)
            if any(names_in(t) & self.aliases for t in _terms(node.lower, self.fn)):
                continue  # a term steps by the knob itself
            text = f"{code_of(node.lower)}:{code_of(node.upper)}"
            for literal in _steps(lo):
                self.found.append(_Pinned(length.value, literal, text, self.f.line(node)))


@dataclass
class PinnedCheck:
    """Refuses moving a knob off the literal a tile offset steps by in its place."""

    name: str
    found: list[_Pinned]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for p in self.found:
            if p.literal != current or value == current:
                continue
            return (
                f"{self.name}={value}: the slice `{p.slice}` (line {p.line}) takes {p.knob} "
                f"elements at an offset that steps by the literal {p.literal}, the current "
                f"{p.knob}, written out rather than as {p.knob}: the tiles cover the axis only "
                f"while {p.knob} is {p.literal}; {value} would leave gaps between the tiles or "
                f"make them overlap"
            )
        return None


def pinned_check(
    f: Facts, name: str, aliases: set[str], factories: list[Function]
) -> PinnedCheck | None:
    """The pinned-step rule of knob `name` over the slices of `factories`' kernels."""
    by_node = {id(fn.node): fn for fn in f.functions}
    wanted = aliases | {name}
    found: list[_Pinned] = []
    for factory in factories:
        for pf in factory.prim_funcs:
            fn = by_node.get(id(pf))
            if fn is None:
                continue
            v = _Slices(f, fn, wanted)
            pf.visit(v)
            found.extend(v.found)
    return PinnedCheck(name, found) if found else None
