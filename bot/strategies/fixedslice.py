"""A fixed part of every knob-sized tile: a slice with literal bounds along the knob's axis.

    A_frag = T.alloc_fragment((block_L,), dtype)
    T.copy(In[bx * block_L], A_frag)
    T.npuir_add(A_frag[0:32], B_frag[0:32], B_frag[0:32])   # elements 0..31 of EVERY tile

The operation covers elements 0..31 of each tile, so which elements of the tensor it changes
depends on how many tiles there are: with block_L 64 it is the first 32 of each 64, with 32
every element. A move of the knob therefore changes what the kernel computes, not only how it
is tiled, and is refused with the slice named. Only a slice whose bounds are both integer
literals (or an omitted lower bound; a local the kernel assigns once to a literal, or to a
run-time choice between literals, `T.if_then_else(c, 32, 64)`, counts as one) on a dimension
of a buffer the prim_func allocates with a size that reads the knob counts; a slice written
with other names (`0:block_L`, `h0:h0 + 8`) is judged by the other rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import allocations
from bot.strategies.evaluate import Env, code_of
from bot.strategies.facts import Facts, Function, names_in
from bot.strategies.source import dotted, int_value


@dataclass(frozen=True)
class _Part:
    buffer: str
    slice: str  # `A_frag[0:32]`
    line: int
    alloc_line: int


def _bound(node: cst.BaseExpression | None, fn: Function, f: Facts, knob: set[str]) -> int | None:
    """An integer literal bound, read through a name assigned once (in the kernel, the
    functions around it, or at module level, innermost first); a run-time choice between
    literals (`T.if_then_else(c, 32, 64)`) is its largest. None otherwise."""
    if node is None:
        return None
    scopes = [*(g.assigns for g in reversed(fn.chain)), f.module_assigns]
    for _ in range(4):
        if not isinstance(node, cst.Name):
            break
        if node.value in knob:
            return None  # the knob itself (`0:block_N`): the whole tile, not a fixed part
        table = next((t for t in scopes if node.value in t), None)
        if table is None or len(table[node.value]) != 1:
            return None
        node = table[node.value][0]
    if (
        isinstance(node, cst.Call)
        and dotted(node.func).rsplit(".", 1)[-1] == "if_then_else"
        and len(node.args) == 3
    ):
        sides = [int_value(a.value) for a in node.args[1:]]
        if all(type(v) is int for v in sides):
            return max(v for v in sides if v is not None)
        return None
    value = int_value(node)
    return value if type(value) is int else None


class _Subscripts(cst.CSTVisitor):
    def __init__(
        self,
        f: Facts,
        fn: Function,
        sized: dict[str, tuple[tuple[int, ...], int]],
        knob: set[str],
    ) -> None:
        self.f = f
        self.fn = fn
        self.knob = knob
        self.sized = sized  # buffer -> (dims that read the knob, allocation line)
        self.found: list[_Part] = []

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not isinstance(node.value, cst.Name) or node.value.value not in self.sized:
            return
        dims, alloc_line = self.sized[node.value.value]
        for i, element in enumerate(node.slice):
            s = element.slice
            if i not in dims or not isinstance(s, cst.Slice):
                continue
            if s.step is not None and int_value(s.step) != 1:
                continue
            lower = 0 if s.lower is None else _bound(s.lower, self.fn, self.f, self.knob)
            upper = _bound(s.upper, self.fn, self.f, self.knob)
            if lower is None or upper is None:
                continue
            self.found.append(_Part(node.value.value, code_of(node), self.f.line(node), alloc_line))
            return


def _proportional(dim: cst.BaseExpression, knob: set[str]) -> bool:
    """Whether a buffer dimension is the knob's tile: the knob itself, or the knob times or
    divided by sizes that do not read it (`block_L`, `2 * block_L`, `block_M // VEC_NUM`). A
    sum (`32 + block_L`, a halo beside the tile) is not: a fixed part may be the halo."""
    if isinstance(dim, cst.Name):
        return dim.value in knob
    if isinstance(dim, cst.BinaryOperation) and isinstance(
        dim.operator, (cst.Multiply, cst.FloorDivide, cst.Divide)
    ):
        left, right = _proportional(dim.left, knob), _proportional(dim.right, knob)
        if isinstance(dim.operator, cst.Multiply):
            return (left and not names_in(dim.right) & knob) or (
                right and not names_in(dim.left) & knob
            )
        return left and not names_in(dim.right) & knob
    return False


@dataclass
class FixedSliceCheck:
    """Refuses moving a knob whose tiles an operation takes a fixed literal part of."""

    name: str
    found: list[_Part]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        p = self.found[0]
        return (
            f"{self.name}={value}: `{p.slice}` (line {p.line}) takes a fixed part of every "
            f"{self.name}-sized tile of {p.buffer} (line {p.alloc_line}): with another tile "
            f"size that part covers other elements of the tensor, so another {self.name} "
            f"changes what the kernel computes, not only its tiling"
        )


def fixed_slice_check(
    f: Facts, name: str, aliases: set[str], factories: list[Function]
) -> FixedSliceCheck | None:
    """The fixed-part rule of knob `name` over the prim_funcs of `factories`."""
    by_node = {id(fn.node): fn for fn in f.functions}
    wanted = aliases | {name}
    found: list[_Part] = []
    for factory in factories:
        for pf in factory.prim_funcs:
            fn = by_node.get(id(pf))
            if fn is None:
                continue
            sized: dict[str, tuple[tuple[int, ...], int]] = {}
            for b in allocations(f, fn):
                dims = tuple(i for i, d in enumerate(b.dims) if _proportional(d, wanted))
                if dims:
                    sized[b.name] = (dims, b.line)
            if not sized:
                continue
            v = _Subscripts(f, fn, sized, wanted)
            pf.visit(v)
            found.extend(v.found)
    return FixedSliceCheck(name, found) if found else None
