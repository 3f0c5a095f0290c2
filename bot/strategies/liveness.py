"""The UB a kernel needs at least: the buffers live at once, not all it allocates.

A compiler that plans memory by lifetime (bishengir in TileLang-NPUIR Developer mode) lets
buffers whose uses do not overlap share UB, so a kernel may allocate more than UB holds and
still run (a 64 x 256 squared-distance tile allocates 224 KiB of buffers in 192 KiB of UB).
What it cannot do is place two buffers that are live at the same statement in the same bytes.
So for a kernel whose current allocation already exceeds UB (where the plain sum of
bot/strategies/capacity.py says nothing), the bound is the largest sum over the statements of
the prim_func of the buffers live there: used at or before it and at or after it, in source
order. An operation's output may take the place of an input that dies there (`T.vsub(a, b,
d)` into `b`'s bytes when `b` is not read again and is at least as large), so such an output is
not counted. Loop-carried values make lifetimes longer than source order shows, which only
makes the bound smaller: a refusal never rests on a guess. A value whose peak exceeds UB while
the current value's does not is refused with the statement and the buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies import dialect
from bot.strategies.capacity import CAPACITY, KIB, Buffer, buffers
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function

MEMORY = "UB"


class _Uses(cst.CSTVisitor):
    """name -> lines of the statements that use it; line -> (written operand, read operands)."""

    def __init__(self, f: Facts, names: set[str]) -> None:
        self.f, self.names = f, names
        self.lines: dict[str, list[int]] = {}
        self.ops: dict[int, list[str]] = {}  # line -> buffer operands of a call there, in order
        self.line = 0

    def _enter(self, node: cst.CSTNode) -> None:
        self.line = self.f.line(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._enter(node)

    def visit_For(self, node: cst.For) -> None:
        self._enter(node)

    def visit_If(self, node: cst.If) -> None:
        self._enter(node)

    def visit_With(self, node: cst.With) -> None:
        self._enter(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and self.line:
            self.lines.setdefault(node.value, []).append(self.line)

    def visit_Call(self, node: cst.Call) -> None:
        args = [a.value for a in node.args if a.keyword is None]
        operands = [a.value for a in args if isinstance(a, cst.Name) and a.value in self.names]
        if operands and self.line:
            self.ops.setdefault(self.line, operands)


@dataclass
class LivePeak:
    name: str
    # buffers, their live spans, the lines that use them, and the UB the kernel may fill
    kernels: list[tuple[list[Buffer], dict[str, tuple[int, int]], dict[int, list[str]], int]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for bufs, spans, ops, limit in self.kernels:
            now = _peak(bufs, spans, ops, current, env)
            new = _peak(bufs, spans, ops, value, env)
            if now is None or new is None or now[0] > limit or new[0] <= limit:
                continue
            total, line, live = new
            return (
                f"{self.name}={value}: at line {line} the kernel's UB buffers live at once "
                f"({', '.join(live)}) would take {total} bytes, more than the {limit // KIB} KiB "
                f"UB holds even when the compiler reuses the memory of buffers whose lifetimes "
                f"do not overlap"
            )
        return None


def _bytes(b: Buffer, env: Env) -> int | None:
    size = b.dtype_bytes
    for d in b.dims:
        extent = evaluate(d, env)
        if type(extent) is not int or extent <= 0:
            return None
        size *= extent
    return size


def _peak(
    bufs: list[Buffer],
    spans: dict[str, tuple[int, int]],
    ops: dict[int, list[str]],
    value: int,
    env: Callable[[tuple[Function, ...], int], Env],
) -> tuple[int, int, list[str]] | None:
    sizes = {b.name: _bytes(b, env(b.chain, value)) for b in bufs}
    known = {n: s for n, s in sizes.items() if s is not None}
    if not known:
        return None
    best: tuple[int, int, list[str]] | None = None
    for line, operands in sorted(ops.items()):
        live = [n for n, (a, z) in spans.items() if n in known and a <= line <= z]
        # an output that starts here may take the bytes of an input that dies here
        starting = sorted(
            (n for n in operands if n in known and spans.get(n, (0, 0))[0] == line),
            key=lambda n: -known[n],
        )
        dying = [n for n in operands if n in known and spans.get(n, (0, 0))[1] == line]
        for out in starting:
            room = next((d for d in dying if d != out and known[d] >= known[out]), None)
            if room is not None and out in live:
                live.remove(out)
                dying.remove(room)
        total = sum(known[n] for n in live)
        if best is None or total > best[0]:
            best = (total, line, live)
    return best


def live_peak(f: Facts, name: str, factories: list[Function]) -> LivePeak | None:
    by_node = {id(fn.node): fn for fn in f.functions}
    auto = dialect.auto_scheduled(f.wrapper.module)
    kernels = []
    for factory in factories:
        ub = [b for b in buffers(f, factory) if b.memory == MEMORY]
        if not ub:
            continue
        for pf in factory.prim_funcs:
            # the auto-scheduled dialect has its own UB size and may lift it (as capacity.py)
            if auto and MEMORY in dialect.unlimited(pf):
                continue
            limit = dialect.LIMITS[MEMORY] if auto else CAPACITY[MEMORY]
            mine = [b for b in ub if b.chain == by_node[id(pf)].chain]
            allocated = {b.line for b in mine}
            v = _Uses(f, {b.name for b in mine})
            pf.visit(v)
            spans = {
                n: (min(ls), max(ls))
                for n, lines in v.lines.items()
                if (ls := [x for x in lines if x not in allocated])
            }
            if spans:
                kernels.append((mine, spans, v.ops, limit))
    return LivePeak(name, kernels) if kernels else None
