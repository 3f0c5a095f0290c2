"""A buffer a copy fills from a slice of fixed extent must have that extent.

`T.copy(KEY[b, n * BLOCK_N : (n + 1) * BLOCK_N, h, 0:D], k_l1)` with
`k_l1 = T.alloc_L1((BLOCK_N, BLOCK_K), ...)` moves D elements along the buffer's second
dimension. A BLOCK_K below D cannot hold them; a BLOCK_K above D leaves the buffer's last
columns unwritten, and a matrix multiply that reads the whole buffer (`T.gemm_v0(q_l1,
k_l1, c)`) then sums whatever they hold into its result. So while the current value equals
the slice's extent, a value that differs is refused. A buffer the kernel also clears or fills
(`T.clear(k_l1)`: zero columns add nothing to a product) is only held to the lower side.

The slice's extent is read where it is written plainly: `0:D` (D), `a : a + E` (E) and
`i * E : (i + 1) * E` (E); a source whose slices do not line up one to one with the
buffer's dimensions is not judged.

Each name is read as the statement naming it sees it (capacity.Scoped): the buffer allocated
in the innermost function around it. A buffer of the same name in another kernel of the
factory, or in a helper, is another buffer: its copies, clears and matrix multiplies say
nothing of this one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, Scoped, visit_kernels
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.placement import GEMMS
from bot.strategies.source import dotted

FILLS = frozenset({"clear", "fill"})


def _extent(s: cst.Slice) -> cst.BaseExpression | None:
    lo, hi = s.lower, s.upper
    if hi is None or s.step is not None:
        return None
    if lo is None or (isinstance(lo, cst.Integer) and lo.value == "0"):
        return hi
    if (
        isinstance(hi, cst.BinaryOperation)
        and isinstance(hi.operator, cst.Add)
        and code_of(hi.left) == code_of(lo)
    ):
        return hi.right  # `a : a + E`
    if (
        isinstance(lo, cst.BinaryOperation)
        and isinstance(lo.operator, cst.Multiply)
        and isinstance(hi, cst.BinaryOperation)
        and isinstance(hi.operator, cst.Multiply)
        and code_of(lo.right) == code_of(hi.right)
        and code_of(hi.left).strip("()").replace(" ", "") == f"{code_of(lo.left)}+1"
    ):
        return lo.right  # `i * E : (i + 1) * E`
    return None


@dataclass(frozen=True)
class Fill:
    buffer: Buffer
    extents: tuple[cst.BaseExpression | None, ...]  # per buffer dimension
    line: int
    whole: bool  # read whole by a matrix multiply, never cleared or filled


class _Scan(cst.CSTVisitor):
    def __init__(self, f: Facts, scoped: Scoped) -> None:
        self.f, self.scoped = f, scoped
        self.copies: list[tuple[Buffer, tuple[cst.BaseExpression | None, ...], int]] = []
        self.gemm_read: set[tuple[str, int]] = set()  # (name, line) of each allocation
        self.filled: set[tuple[str, int]] = set()

    def _seen(self, args: list[cst.BaseExpression], node: cst.Call) -> set[tuple[str, int]]:
        """The allocations these arguments name, as the call sees them."""
        found = (self.scoped.get(a.value, node) for a in args if isinstance(a, cst.Name))
        return {(b.name, b.line) for b in found if b is not None}

    def visit_Call(self, node: cst.Call) -> None:
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short in GEMMS:
            self.gemm_read |= self._seen(args[:2], node)
        if short in FILLS:
            self.filled |= self._seen(args, node)
        if short != "copy" or len(args) < 2 or not isinstance(args[1], cst.Name):
            return
        src, dst = args[0], self.scoped.get(args[1].value, node)
        if dst is None or not isinstance(src, cst.Subscript):
            return
        slices = [e.slice for e in src.slice if isinstance(e.slice, cst.Slice)]
        if len(slices) != len(dst.dims):
            return
        self.copies.append((dst, tuple(_extent(s) for s in slices), self.f.line(node)))


@dataclass
class SliceFill:
    name: str
    fills: list[tuple[Fill, tuple[Function, ...]]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for fill, chain in self.fills:
            for dim, extent in zip(fill.buffer.dims, fill.extents, strict=True):
                if extent is None:
                    continue
                e_now, e_new = (
                    evaluate(extent, env(chain, current)),
                    evaluate(extent, env(chain, value)),
                )
                d_now, d_new = evaluate(dim, env(chain, current)), evaluate(dim, env(chain, value))
                if not all(type(x) is int for x in (e_now, e_new, d_now, d_new)):
                    continue
                if e_now != e_new or d_now != e_now or d_new == e_new:
                    continue  # the slice moves with the knob, or the buffer already differs
                if d_new < e_new:  # type: ignore[operator]
                    return (
                        f"{self.name}={value}: the copy at line {fill.line} moves {e_new} elements "
                        f"(`{code_of(extent)}`) into `{fill.buffer.name}` (line "
                        f"{fill.buffer.line}), which would hold {d_new} there"
                    )
                if fill.whole:
                    return (
                        f"{self.name}={value}: the copy at line {fill.line} fills {e_new} of the "
                        f"{d_new} elements of `{fill.buffer.name}` (line {fill.buffer.line}) along "
                        f"that dimension, and a matrix multiply reads the whole buffer: the rest "
                        f"would enter the product unwritten"
                    )
        return None


def slice_fill(f: Facts, name: str, factories: list[Function]) -> SliceFill | None:
    found: list[tuple[Fill, tuple[Function, ...]]] = []
    for v in visit_kernels(f, factories, lambda s: _Scan(f, s)):
        whole = v.gemm_read - v.filled
        for dst, extents, line in v.copies:
            found.append((Fill(dst, extents, line, (dst.name, dst.line) in whole), dst.chain))
    return SliceFill(name, found) if found else None
