"""A causal band walked in one block's tiles, counted in another's.

A causal kernel walks, for its row tile `lt` (tiles of `bl`), the column tiles up to the
diagonal: `for s_blk in T.serial(lt + 1): s0 = s_blk * bs`. That covers the columns
`0 .. (lt + 1) * bs`, which is the causal range `0 .. (lt + 1) * bl` only while `bs == bl`
(the general form counts `T.ceildiv((lt + 1) * bl, bs)` tiles). A file that runs with the two
blocks equal is right; a move of either alone skips columns below the diagonal or reads past
it, and the diagonal tile's mask (local row minus local column) assumes both start together.
Such a move is refused with the loop and the two names. A knob that is both blocks moves them
together and is left alone.

The inner loop's count is the outer loop's index (or a launch's core index, `with
T.Kernel(L_tiles) as (lt, _)`), plus a literal or not (`lt + 1`, `lt`); the outer loop runs
over a tile count of one name (`T.ceildiv(Q, bl)`, `(Q + bl - 1) // bl`,
`Q // bl`, through the factory's single assignments); the inner body steps by the product of
its index and another block (`s_blk * bs`; a block name or a local copying one: `c * D` with D
a problem size is a prefix over chunks, not a tile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.callsites import BLOCK_WORD
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, follow_assigned, kernel_functions
from bot.strategies.source import dotted, int_value
from bot.strategies.tiling import ceildiv_args

_LOOPS = ("serial", "range", "Pipelined", "Parallel", "unroll")


@dataclass(frozen=True)
class _Band:
    outer: str  # the block whose tiles the outer loop counts (`bl`)
    inner: str  # the block the band loop steps by (`bs`)
    count: str  # the band loop's count, as written (`lt + 1`)
    line: int
    chain: tuple[Function, ...]


def _block_like(name: str, chain: tuple[Function, ...]) -> bool:
    """A block name, or a local copying one (`bs` of `bl, bs = block_l, block_s`)."""
    if BLOCK_WORD.search(name):
        return True
    held = follow_assigned(cst.Name(name), chain)
    return isinstance(held, cst.Name) and bool(BLOCK_WORD.search(held.value))


def _tile_block(node: cst.BaseExpression) -> str | None:
    """The block name whose tiles `node` counts: `T.ceildiv(Q, bl)`, `Q // bl`,
    `(Q + bl - 1) // bl`; else None."""
    pair = ceildiv_args(node)
    if pair is not None:
        return pair[1].value if isinstance(pair[1], cst.Name) else None
    if (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.FloorDivide)
        and isinstance(node.right, cst.Name)
    ):
        return node.right.value
    return None


def _extent(loop: cst.For) -> cst.BaseExpression | None:
    """The trip count of `for x in T.serial(n)` / `range(n)` / `T.Pipelined(n, ...)`."""
    it = loop.iter
    if not isinstance(it, cst.Call) or dotted(it.func).rsplit(".", 1)[-1] not in _LOOPS:
        return None
    args = [a.value for a in it.args if a.keyword is None and not a.star]
    return args[0] if len(args) == 1 or dotted(it.func).endswith("Pipelined") else None


def _counted_by(count: cst.BaseExpression, index: str) -> bool:
    """`lt + 1`, `1 + lt` or `lt` itself: a count the outer loop's index sets."""
    if isinstance(count, cst.Name):
        return count.value == index
    if isinstance(count, cst.BinaryOperation) and isinstance(count.operator, cst.Add):
        sides = (count.left, count.right)
        return any(isinstance(s, cst.Name) and s.value == index for s in sides) and any(
            int_value(s) is not None for s in sides
        )
    return False


def _steps(body: cst.CSTNode, index: str) -> set[str]:
    """Names the band loop's index is multiplied by in its body (`s_blk * bs`)."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if not isinstance(node.operator, cst.Multiply):
                return
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if isinstance(a, cst.Name) and a.value == index and isinstance(b, cst.Name):
                    found.add(b.value)

    body.visit(V())
    return found


def _bands(f: Facts, fn: Function) -> list[_Band]:
    found: list[_Band] = []
    outers: list[tuple[str, str]] = []  # (index, block) of the enclosing tile loops
    kernels: list[tuple[cst.With, int]] = []  # enclosing launches, and the outers each opened

    class V(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            count = _extent(node)
            index = node.target.value if isinstance(node.target, cst.Name) else None
            block = _tile_block(follow_assigned(count, fn.chain)) if count is not None else None
            if count is not None and index is not None:
                for outer_index, outer_block in outers:
                    if not _counted_by(count, outer_index):
                        continue
                    for step in _steps(node.body, index):
                        if step != outer_block:
                            found.append(
                                _Band(outer_block, step, code_of(count), f.line(node), fn.chain)
                            )
            outers.append((index or "", block or ""))

        def leave_For(self, original_node: cst.For) -> None:
            outers.pop()

        def visit_With(self, node: cst.With) -> None:
            # `with T.Kernel(L_tiles, ...) as (lt, _)`: the core index runs over L_tiles; with
            # two or more grid extents each name runs over its own (`as (bx, lt)`); a
            # one-extent launch's second name is the vector core
            for item in node.items:
                call = item.item
                if not (isinstance(call, cst.Call) and dotted(call.func).endswith("Kernel")):
                    continue
                grid = [a.value for a in call.args if a.keyword is None and not a.star]
                names = item.asname.name if item.asname is not None else None
                targets = (
                    [e.value for e in names.elements] if isinstance(names, cst.Tuple) else [names]
                )
                pairs = list(zip(grid, targets, strict=False))[: 1 if len(grid) == 1 else None]
                opened = 0
                for extent, target in pairs:
                    if isinstance(target, cst.Name):
                        block = _tile_block(follow_assigned(extent, fn.chain))
                        outers.append((target.value, block or ""))
                        opened += 1
                if opened:
                    kernels.append((node, opened))
                    return

        def leave_With(self, original_node: cst.With) -> None:
            if kernels and kernels[-1][0] is original_node:
                _, opened = kernels.pop()
                del outers[-opened:]

    fn.node.visit(V())
    return [b for b in found if b.outer]


@dataclass
class BandCheck:
    name: str
    aliases: frozenset[str]
    bands: list[_Band]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for b in self.bands:
            if (b.outer in self.aliases) == (b.inner in self.aliases):
                continue  # neither block, or a knob that is both: they move together
            other = b.inner if b.outer in self.aliases else b.outer
            if not _block_like(other, b.chain):
                continue  # `c * D` with D a problem size: a prefix over chunks, no tile
            now = evaluate(cst.Name(other), env(b.chain, current))
            if type(now) is not int or now != current:
                continue  # unequal already: the file does not rely on the tie
            return (
                f"{self.name}={value}: the band loop at line {b.line} walks `{b.count}` tiles "
                f"of {b.inner} for each tile of {b.outer}, which covers the causal range only "
                f"while {b.inner} == {b.outer} (both {now} now): a move of one alone skips or "
                f"overruns the columns up to the diagonal"
            )
        return None


def band_check(
    f: Facts, name: str, aliases: set[str], factories: list[Function]
) -> BandCheck | None:
    """The band-tie rule of knob `name` over the loops of `factories`' kernels."""
    found = [b for fn in kernel_functions(f, factories) for b in _bands(f, fn)]
    wanted = aliases | {name}
    found = [b for b in found if b.outer in wanted or b.inner in wanted]
    return BandCheck(name, frozenset(wanted), found) if found else None
