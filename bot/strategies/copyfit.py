"""A tile copied into or out of an on-chip buffer must fit the buffer.

An explicit-size copy (`T.load_nd2nz(K[...], l1_b, [tail_n, tail_k])`,
`T.copy(src, dst, size=[...])`) moves a tile whose extent along each dimension is
at most its size; `tail_n = T.min(block_n, seq_len - i * block_n)` is at most
`block_n`. When the destination buffer is sized by another knob
(`l1_b = T.alloc_L1([block_m, block_k], ...)`), the two knobs are tied: a move
that makes a tile larger than its buffer writes past it. The same holds for a copy out of
an on-chip buffer named whole as its source (`T.copy(acc_o, Out[...], size=[block_m,
block_n])` with `acc_o` of [block_m, 16]): a tile wider than the buffer reads past it. A move
is refused when some copy fits with the current value and not with the new one.

A copy whose size is a run-time size the host pads to a multiple of the knob
(bot/strategies/paddedtensors.py: `size=[block_heads, top_k_reserved]` with the host's
`next_divisible_number(top_k, block_cube)` there) moves at least the knob's value along it.

A buffer is the one the copy sees (capacity.Scoped): allocated in the innermost function
around the copy, never a buffer of the same name in another kernel of the factory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, Scoped, visit_kernels
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, reaching
from bot.strategies.source import dotted

COPIES = frozenset({"load_nd2nz", "copy", "store_fixpipe"})
NPUIR = "npuir_"  # `T.npuir_load_nd2nz`: the same copy under the NPUIR dialect's prefix


@dataclass(frozen=True)
class Copy:
    buffer: Buffer
    sizes: tuple[cst.BaseExpression, ...]
    line: int
    direction: str = "into"  # "into" the destination buffer, "out of" the source buffer


def _is_min(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and dotted(node.func) in ("T.min", "min")


def _bound(node: cst.BaseExpression, chain: tuple[Function, ...]) -> list[cst.BaseExpression]:
    """Expressions whose smallest value bounds `node`: the arguments of a `T.min` (also through
    a local set to one, the same way each time it is set, or the one the straight-line code
    before `node` sets: facts.reaching); otherwise the node itself."""
    if isinstance(node, cst.Name):
        for fn in reversed(chain):
            values = fn.assigns.get(node.value)
            if values:
                if len({code_of(v) for v in values}) == 1:
                    value: cst.BaseExpression | None = values[0]
                else:
                    value = reaching(node.value, node, fn.node)
                return _bound(value, fn.chain) if value is not None and _is_min(value) else [node]
    if _is_min(node):
        out: list[cst.BaseExpression] = []
        for a in node.args:  # type: ignore[attr-defined]
            out.extend(_bound(a.value, chain))
        return out
    return [node]


class _Copies(cst.CSTVisitor):
    def __init__(self, f: Facts, scoped: Scoped) -> None:
        self.f, self.scoped = f, scoped
        self.found: list[tuple[Copy, tuple[Function, ...]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        op = dotted(node.func).rsplit(".", 1)[-1]
        if op.removeprefix(NPUIR) not in COPIES:
            return
        args = [a.value for a in node.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        size = kw.get("size", args[2] if len(args) > 2 else None)
        if not isinstance(size, cst.List):
            return
        sizes = tuple(e.value for e in size.elements)
        for direction, end in zip(("out of", "into"), args[:2], strict=False):
            if not isinstance(end, cst.Name):
                continue
            buffer = self.scoped.get(end.value, node)
            if buffer is None or len(buffer.dims) != len(sizes):
                continue
            copy = Copy(buffer, sizes, self.f.line(node), direction)
            self.found.append((copy, buffer.chain))  # the prim_func's chain


def _copies(f: Facts, factory: Function) -> list[tuple[Copy, tuple[Function, ...]]]:
    """Every explicit-size copy into or out of a buffer the prim_funcs of `factory` allocate."""
    return [c for v in visit_kernels(f, [factory], lambda s: _Copies(f, s)) for c in v.found]


def _fits(
    copy: Copy,
    chain: tuple[Function, ...],
    env: Env,
    value: int,
    padded: frozenset[str] = frozenset(),
) -> tuple[int, int, int] | None:
    """(dimension, tile extent, buffer extent) of the first dimension that overflows, or None.
    `padded`: run-time sizes that are a multiple of the knob (`value`), so at least `value`."""
    for i, (size, dim) in enumerate(zip(copy.sizes, copy.buffer.dims, strict=True)):
        terms = _bound(size, chain)
        bounds = [evaluate(b, env) for b in terms]
        if len(terms) == 1 and bounds[0] is None and code_of(terms[0]) in padded:
            bounds = [value]
        known = [b for b in bounds if isinstance(b, int) and not isinstance(b, bool)]
        room = evaluate(dim, env)
        if known and isinstance(room, int) and not isinstance(room, bool) and min(known) > room:
            return i, min(known), room
    return None


@dataclass
class CopyFit:
    """Refuses a value with which an explicit-size copy overflows its destination buffer."""

    name: str
    copies: list[tuple[Copy, tuple[Function, ...]]]
    padded: frozenset[str] = frozenset()  # run-time sizes the host pads to a multiple of it

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for copy, chain in self.copies:
            if _fits(copy, chain, env(chain, current), current, self.padded) is not None:
                continue  # the current value overflows too: not ours to judge
            over = _fits(copy, chain, env(chain, value), value, self.padded)
            if over is not None:
                dim, tile, room = over
                least = "at least " if code_of(copy.sizes[dim]) in self.padded else ""
                return (
                    f"{self.name}={value}: the copy at line {copy.line} moves a tile of {least}{tile} "
                    f"along dimension {dim} {copy.direction} `{copy.buffer.name}` (line "
                    f"{copy.buffer.line}), which holds {room} there"
                )
        return None


def copy_fit(
    f: Facts, name: str, factories: list[Function], padded: frozenset[str] = frozenset()
) -> CopyFit | None:
    """`padded`: run-time sizes the host pads to a multiple of the knob."""
    copies = [c for factory in factories for c in _copies(f, factory)]
    return CopyFit(name, copies, padded) if copies else None
