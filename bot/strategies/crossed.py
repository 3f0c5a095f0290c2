"""Tiles placed by one block and sized by another.

A copy between a tensor and an on-chip tile places the tile at an offset along each axis and
moves a given extent there (`size=[...]`, else the tile buffer's own dimensions). When the
offset along an axis steps by one block (`by = (cid // n) * block_N`) while the extent along
that axis is another block (`T.copy(A[by, k * block_K], A_shared, size=[block_M, block_K])`),
the tiles cover the axis exactly only while the two blocks are equal: the file then works
because both have the same value, as when a kernel swaps its row and column offsets. A move
that makes them differ leaves gaps or overlaps (rows never computed, or written twice), so it
is refused, with the copy and the two names. A value that keeps them equal is left alone.

The offset's block is read through the kernel's local assignments; an offset that reaches
several block names, or none, says nothing.

A core index split by one axis's tile count places the other axis when the kernel swaps them:
`blockx = cid % T.ceildiv(N, block_N)` runs over N's tiles, so `bx = blockx * block_M` as a
row offset covers the rows only while ceildiv(N, block_N) * block_M == M, and `by = (cid //
T.ceildiv(N, block_N)) * block_N` as a column offset only while M's tile count times block_N
== N. (The usual layout scales a remainder by the count's own block and a quotient by the
other axis's block.) The file holds both at its own values; a move of either block alone breaks
one of them, so every move of both is refused, with the copy and the index.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Scoped
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, names_in
from bot.strategies.source import dotted

_BLOCK = re.compile(r"^(block|BLOCK)_?[A-Za-z0-9_]*$")


@dataclass(frozen=True)
class _Crossing:
    step: str  # the block the offset steps by (counted: the block whose tile count splits it)
    extent: str  # the block the copy moves along that axis
    tensor: str
    axis: int
    line: int
    chain: tuple[Function, ...]
    counted: str = ""  # the swapped index (`cid % T.ceildiv(N, block_N)`): every move breaks it


def _resolved(node: cst.BaseExpression, fn: Function, depth: int = 0) -> cst.BaseExpression:
    """`node` with the kernel's single-assignment locals put in place (up to four levels)."""

    class Put(cst.CSTTransformer):
        def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
            values = fn.assigns.get(updated_node.value)
            if depth < 4 and values is not None and len(values) == 1:
                return cst.parse_expression(f"({code_of(_resolved(values[0], fn, depth + 1))})")
            return updated_node

    out = node.visit(Put())
    return out if isinstance(out, cst.BaseExpression) else node


def _count_block(node: cst.BaseExpression) -> str | None:
    """The block whose tile count `node` is (`T.ceildiv(N, block_N)`, `N // block_N`,
    `(N + block_N - 1) // block_N`), else None."""
    if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] == "ceildiv":
        if len(node.args) == 2 and isinstance(node.args[1].value, cst.Name):
            name = node.args[1].value.value
            return name if _BLOCK.match(name) else None
        return None
    if (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.FloorDivide)
        and isinstance(node.right, cst.Name)
        and _BLOCK.match(node.right.value)
    ):
        return node.right.value
    return None


def _swapped(offset: cst.BaseExpression, extent: str, fn: Function) -> tuple[str, str] | None:
    """(the count's block, the index as written) when `offset` scales a split of the core
    index the wrong way for an axis of `extent`: a remainder by another block's tile count
    scaled by `extent`, or a quotient by `extent`'s own tile count scaled by `extent`."""
    full = _resolved(offset, fn)
    found: list[tuple[str, str]] = []

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if not isinstance(node.operator, cst.Multiply):
                return
            for split, scale in ((node.left, node.right), (node.right, node.left)):
                if not (isinstance(scale, cst.Name) and scale.value == extent):
                    continue
                if not isinstance(split, cst.BinaryOperation):
                    continue
                by = _count_block(split.right)
                remainder = isinstance(split.operator, cst.Modulo) and by != extent
                quotient = isinstance(split.operator, cst.FloorDivide) and by == extent
                if by is not None and (remainder or quotient):
                    found.append((by, code_of(split.with_changes(lpar=[], rpar=[]))))

    full.visit(V())
    return found[0] if len(found) == 1 else None


def _blocks(node: cst.BaseExpression, fn: Function, depth: int = 0) -> set[str]:
    """Block names an index expression reaches through the kernel's local assignments."""
    out: set[str] = set()
    for name in names_in(node):
        if name in fn.assigns:  # a kernel local (`blockx = cid % n`), however it is named
            if depth < 4 and len(fn.assigns[name]) == 1:
                out |= _blocks(fn.assigns[name][0], fn, depth + 1)
        elif _BLOCK.match(name):
            out.add(name)
    return out


class _Copies(cst.CSTVisitor):
    def __init__(self, f: Facts, fn: Function, scoped: Scoped):
        self.f, self.fn, self.scoped = f, fn, scoped
        self.found: list[_Crossing] = []

    def _ranges(self, placed: cst.Subscript, node: cst.Call) -> None:
        """Swapped splits of the core index in `A[bx : bx + block_M, ...]` ranges."""
        for axis, element in enumerate(placed.slice):
            part = element.slice
            if not isinstance(part, cst.Slice) or part.lower is None or part.upper is None:
                continue
            upper = part.upper
            if not (
                isinstance(upper, cst.BinaryOperation)
                and isinstance(upper.operator, cst.Add)
                and isinstance(upper.right, cst.Name)
                and _BLOCK.match(upper.right.value)
                and code_of(upper.left) == code_of(part.lower)
            ):
                continue
            extent = upper.right.value
            swapped = _swapped(part.lower, extent, self.fn)
            if swapped is not None and isinstance(placed.value, cst.Name):
                by, written = swapped
                self.found.append(
                    _Crossing(
                        by,
                        extent,
                        placed.value.value,
                        axis,
                        self.f.line(node),
                        self.fn.chain,
                        counted=written,
                    )
                )

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func) != "T.copy":
            return
        args = [a.value for a in node.args if a.keyword is None][:2]
        size = next((a.value for a in node.args if a.keyword and a.keyword.value == "size"), None)
        placed = [a for a in args if isinstance(a, cst.Subscript)]
        held = [self.scoped.get(a.value, node) for a in args if isinstance(a, cst.Name)]
        tiles = [b for b in held if b is not None]  # the tile buffers this kernel allocates
        if len(placed) != 1 or not isinstance(placed[0].value, cst.Name):
            return
        self._ranges(placed[0], node)
        index = [s.slice.value for s in placed[0].slice if isinstance(s.slice, cst.Index)]
        if len(index) != len(placed[0].slice):
            return  # a range (`A[a:b, ...]`) sizes itself
        if isinstance(size, (cst.List, cst.Tuple)):
            extents = [e.value for e in size.elements]
        elif size is None and len(tiles) == 1:
            extents = list(tiles[0].dims)
        else:
            return
        extents = extents[-len(index) :] if len(extents) >= len(index) else extents
        offset = len(index) - len(extents)
        for i, extent in enumerate(extents):
            if not isinstance(extent, cst.Name) or not _BLOCK.match(extent.value):
                continue
            steps = _blocks(index[offset + i], self.fn)
            if len(steps) == 1 and extent.value not in steps:
                self.found.append(
                    _Crossing(
                        steps.pop(),
                        extent.value,
                        placed[0].value.value,
                        offset + i,
                        self.f.line(node),
                        self.fn.chain,
                    )
                )


@dataclass
class CrossedCheck:
    """Refuses a value that makes a copy's offset block and extent block differ."""

    name: str
    aliases: frozenset[str]
    crossings: list[_Crossing]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for c in self.crossings:
            if c.counted and value != current and {c.step, c.extent} & self.aliases:
                return (
                    f"{self.name}={value}: the copy at line {c.line} places its {c.extent}-wide "
                    f"tiles along axis {c.axis} of `{c.tensor}` by `{c.counted}`, a split of the "
                    f"core index by {c.step}'s tile count: the axes are swapped, and the tiles "
                    f"cover the tensor only at the values the file runs ({self.name}={current})"
                )
            if c.counted:
                continue
            if c.step in self.aliases:
                other = c.extent
            elif c.extent in self.aliases:
                other = c.step
            else:
                continue
            if other in self.aliases:
                continue
            now = evaluate(cst.Name(other), env(c.chain, current))
            if type(now) is not int or now != current or value == now:
                continue  # unequal already (some other scheme), or kept equal
            return (
                f"{self.name}={value}: the copy at line {c.line} places its tile along axis "
                f"{c.axis} of `{c.tensor}` at multiples of {c.step} but moves {c.extent} "
                f"elements there; the tiles cover that axis only while {c.step} == "
                f"{c.extent} (both {now} now), so {value} would leave gaps or overlaps"
            )
        return None


def crossed_check(
    f: Facts, name: str, aliases: set[str], factories: list[Function]
) -> CrossedCheck | None:
    """The crossed-block rule of knob `name` over the copies of `factories`' kernels."""
    by_node = {id(fn.node): fn for fn in f.functions}
    found: list[_Crossing] = []
    for factory in factories:
        for pf in factory.prim_funcs:
            fn = by_node.get(id(pf))
            if fn is None:
                continue
            v = _Copies(f, fn, Scoped(f, fn))
            pf.visit(v)
            found.extend(v.found)
    wanted = aliases | {name}
    found = [c for c in found if c.step in wanted or c.extent in wanted]
    return CrossedCheck(name, frozenset(wanted), found) if found else None
