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
`blockx = cid % T.ceildiv(N, block_N)` runs over N's tiles, so `bx = blockx * block_M` as the
offset along a tensor axis declared M covers it only while ceildiv(N, block_N) * block_M == M,
and `by = (cid // T.ceildiv(N, block_N)) * block_N` along the axis declared N only while M's
tile count times block_N == N. (The usual layouts place a remainder along the axis whose tiles
it counts and a quotient along the other; an axis sized from the counted extent, `D + 1`, is
that extent's own.) The file holds both at its own values; a move of either block alone breaks
one of them, so it is refused, with the copy and the split. Moves of a knob that is both blocks
are left alone. A block index of a launch with two or more grid extents runs over the tiles its
extent counts (`T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by)`: bx over
N's), and is read like a remainder split.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Scoped
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, follow_assigned, kernel_functions, names_in
from bot.strategies.source import dotted
from bot.strategies.tiling import ceildiv_args

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


def _count(node: cst.BaseExpression) -> tuple[str, str] | None:
    """(extent, block) when `node` counts an extent's tiles: `T.ceildiv(N, block_N)`, `N //
    block_N`, `(N + block_N - 1) // block_N`; else None."""
    pair = ceildiv_args(node)
    if pair is not None:
        extent, block = pair
        if isinstance(block, cst.Name) and _BLOCK.match(block.value):
            return code_of(extent), block.value
        return None
    if (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.FloorDivide)
        and isinstance(node.right, cst.Name)
        and _BLOCK.match(node.right.value)
    ):
        left = node.left
        if (
            isinstance(left, cst.BinaryOperation)
            and isinstance(left.operator, cst.Subtract)
            and isinstance(left.left, cst.BinaryOperation)
            and isinstance(left.left.operator, cst.Add)
            and code_of(left.left.right) == node.right.value
        ):
            left = left.left.left  # `(N + block_N - 1) // block_N`
        return code_of(left), node.right.value
    return None


def _launch_axes(kernel: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """name -> grid extent of each block index a launch of two or more grid extents binds
    (`with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by)`: bx runs over
    N's tiles). A one-extent launch's second name is the vector core, not a grid axis."""
    axes: dict[str, cst.BaseExpression] = {}

    class V(cst.CSTVisitor):
        def visit_WithItem(self, node: cst.WithItem) -> None:
            call = node.item
            if not (isinstance(call, cst.Call) and dotted(call.func).endswith("Kernel")):
                return
            grid = [a.value for a in call.args if a.keyword is None and not a.star]
            names = node.asname.name if node.asname is not None else None
            if len(grid) < 2 or not isinstance(names, cst.Tuple):
                return
            for extent, target in zip(grid, names.elements, strict=False):
                if isinstance(target.value, cst.Name):
                    axes[target.value.value] = extent

    kernel.visit(V())
    return axes


@dataclass(frozen=True)
class _Split:
    split: str  # `cid % T.ceildiv(N, block_N)`, as written
    remainder: bool  # `%` (else `//`)
    extent: str  # the extent whose tiles the split counts (`N`)
    block: str  # the block of that count (`block_N`)
    scale: str  # the block the split is multiplied by (`block_M`)


def _splits(
    offset: cst.BaseExpression,
    chain: tuple[Function, ...],
    axes: dict[str, cst.BaseExpression],
    depth: int = 0,
) -> list[_Split]:
    """Splits of a core index by a tile count, scaled by a block, that `offset` reaches through
    the kernel's and its factory's single assignments; `axes`: the kernel's 2-D launch axes
    (`_launch_axes`)."""
    found: list[_Split] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `T.ceildiv`: the attribute's own name is no local
            return False

        def visit_Name(self, node: cst.Name) -> None:
            target = follow_assigned(node, chain)
            if target is not node and depth < 4:
                found.extend(_splits(target, chain, axes, depth + 1))

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if not isinstance(node.operator, cst.Multiply):
                return
            for side, scale in ((node.left, node.right), (node.right, node.left)):
                if not (isinstance(scale, cst.Name) and _BLOCK.match(scale.value)):
                    continue
                split = follow_assigned(side, chain)
                if isinstance(split, cst.Name) and split.value in axes:
                    # a grid axis of a 2-D launch: it runs over the tiles its extent counts
                    counted = _count(follow_assigned(axes[split.value], chain))
                    if counted is not None:
                        found.append(_Split(split.value, True, counted[0], counted[1], scale.value))
                    continue
                if not isinstance(split, cst.BinaryOperation) or not isinstance(
                    split.operator, (cst.Modulo, cst.FloorDivide)
                ):
                    continue
                counted = _count(follow_assigned(split.right, chain))
                if counted is not None:
                    found.append(
                        _Split(
                            code_of(split.with_changes(lpar=[], rpar=[])),
                            isinstance(split.operator, cst.Modulo),
                            counted[0],
                            counted[1],
                            scale.value,
                        )
                    )

    offset.visit(V())
    return found


def _dims(fn: Function, tensor: str) -> list[str] | None:
    """The declared shape of prim_func parameter `tensor` (`B: T.Tensor((M, N), dtype)`), as
    written, or None."""
    for param in fn.node.params.params:
        if param.name.value != tensor or param.annotation is None:
            continue
        ann = param.annotation.annotation
        if isinstance(ann, cst.Call) and ann.args:
            shape = ann.args[0].value
            if isinstance(shape, (cst.Tuple, cst.List)):
                return [code_of(e.value) for e in shape.elements]
    return None


def _swapped(split: _Split, dims: list[str], axis: int) -> bool:
    """A split that places another axis than the one it counts: a remainder of the tiles of
    another dimension of the tensor (rows placed by the column count), or a quotient of this
    axis's own tile count (columns placed by the column count's quotient)."""
    here = dims[axis]
    others = [d for i, d in enumerate(dims) if i != axis]
    if split.remainder:  # `D + 1` rows placed by D's tiles are D's axis, not another
        return split.extent not in re.findall(r"[A-Za-z_]\w*", here) and split.extent in others
    return split.extent == here and len(dims) == 2


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
        self.axes = _launch_axes(fn.node)

    def _swaps(self, placed: cst.Subscript, node: cst.Call) -> None:
        """Swapped splits of the core index placing `A[bx, by]` or `A[bx : bx + block_M, ...]`."""
        if not isinstance(placed.value, cst.Name):
            return
        dims = _dims(self.fn, placed.value.value)
        if dims is None or len(dims) != len(placed.slice):
            return
        for axis, element in enumerate(placed.slice):
            part = element.slice
            offset = part.value if isinstance(part, cst.Index) else getattr(part, "lower", None)
            if offset is None:
                continue
            for split in _splits(offset, self.fn.chain, self.axes):
                if _swapped(split, dims, axis):
                    self.found.append(
                        _Crossing(
                            split.block,
                            split.scale,
                            placed.value.value,
                            axis,
                            self.f.line(node),
                            self.fn.chain,
                            counted=split.split,
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
        self._swaps(placed[0], node)
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
            moved = {c.step, c.extent} & self.aliases
            # one knob that is both blocks (or one name for both) moves them together
            if c.counted and value != current and c.step != c.extent and len(moved) == 1:
                return (
                    f"{self.name}={value}: the copy at line {c.line} places axis {c.axis} of "
                    f"`{c.tensor}` at `{c.counted}` times {c.extent}, an index that runs over the "
                    f"tile count of another axis: the kernel swaps its axes, which covers "
                    f"the tensor only while {c.step} and {c.extent} keep the file's ratio, so a "
                    f"move of one of them alone leaves tiles unwritten or written twice"
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
    found: list[_Crossing] = []
    for fn in kernel_functions(f, factories):
        v = _Copies(f, fn, Scoped(f, fn))
        fn.node.visit(v)
        found.extend(v.found)
    wanted = aliases | {name}
    found = [c for c in found if c.step in wanted or c.extent in wanted]
    return CrossedCheck(name, frozenset(wanted), found) if found else None
