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

Each name is read as the statement naming it sees it (capacity.Scoped's allocations by
function): the buffer allocated in the innermost function around the use that allocates the
name. A helper's buffer of the same name as a kernel's is another buffer with its own
lifetime, and a buffer of another kernel of the factory is never seen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies import dialect
from bot.strategies.capacity import CAPACITY, KIB, Buffer, Scoped, buffer_bytes, kernel_buffers
from bot.strategies.evaluate import Env
from bot.strategies.facts import Facts, Function

MEMORY = "UB"
Key = tuple[str, int]  # one allocation: the buffer's name and the line allocating it


def _key(b: Buffer) -> Key:
    return (b.name, b.line)


class _Uses(cst.CSTVisitor):
    """buffer -> lines of the statements that use it; line -> the buffer operands of a call."""

    def __init__(self, f: Facts, scoped: Scoped, held: set[Key]) -> None:
        self.f, self.scoped, self.held = f, scoped, held
        self.lines: dict[Key, list[int]] = {}
        self.ops: dict[int, list[Key]] = {}  # line -> buffer operands of a call there, in order
        self.line = 0
        self.defs: list[int] = [0]  # ids of the defs around the visit, innermost last

    def _buffer(self, name: str) -> Key | None:
        """The buffer `name` is here: allocated in the innermost def around that allocates it
        (None when that def allocates it twice with different shapes, dtypes or memories)."""
        for scope in reversed(self.defs):
            names = self.scoped.by_scope.get(scope, {})
            if name in names:
                b = names[name]
                key = _key(b) if b is not None else None
                return key if key in self.held else None
        return None

    def _enter(self, node: cst.CSTNode) -> None:
        self.line = self.f.line(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.defs.append(id(node))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.defs.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._enter(node)

    def visit_For(self, node: cst.For) -> None:
        self._enter(node)

    def visit_If(self, node: cst.If) -> None:
        self._enter(node)

    def visit_With(self, node: cst.With) -> None:
        self._enter(node)

    def visit_Name(self, node: cst.Name) -> None:
        b = self._buffer(node.value)
        if b is not None and self.line:
            self.lines.setdefault(b, []).append(self.line)

    def visit_Call(self, node: cst.Call) -> None:
        args = [a.value for a in node.args if a.keyword is None]
        found = (self._buffer(a.value) for a in args if isinstance(a, cst.Name))
        operands = [b for b in found if b is not None]
        if operands and self.line:
            self.ops.setdefault(self.line, operands)


@dataclass
class LivePeak:
    name: str
    # buffers, their live spans, the lines that use them, and the UB the kernel may fill
    kernels: list[tuple[list[Buffer], dict[Key, tuple[int, int]], dict[int, list[Key]], int]]

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
                f"({', '.join(_named(live))}) would take {total} bytes, more than the {limit // KIB} KiB "
                f"UB holds even when the compiler reuses the memory of buffers whose lifetimes "
                f"do not overlap"
            )
        return None


def _named(live: list[Key]) -> list[str]:
    """Each buffer's name; with its line where two live buffers share the name."""
    names = [n for n, _ in live]
    return [f"{n} (line {line})" if names.count(n) > 1 else n for n, line in live]


def _peak(
    bufs: list[Buffer],
    spans: dict[Key, tuple[int, int]],
    ops: dict[int, list[Key]],
    value: int,
    env: Callable[[tuple[Function, ...], int], Env],
) -> tuple[int, int, list[Key]] | None:
    sizes = {_key(b): buffer_bytes(b, env(b.chain, value)) for b in bufs}
    known = {n: s for n, s in sizes.items() if s is not None}
    if not known:
        return None
    best: tuple[int, int, list[Key]] | None = None
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
        for pf in factory.prim_funcs:
            # the auto-scheduled dialect has its own UB size and may lift it (as capacity.py)
            if auto and MEMORY in dialect.unlimited(pf):
                continue
            found = kernel_buffers(f, by_node[id(pf)])
            mine = [b for b in found if b.memory == MEMORY]
            if not mine:
                continue
            limit = dialect.LIMITS[MEMORY] if auto else CAPACITY[MEMORY]
            allocated = {b.line for b in mine}
            v = _Uses(f, Scoped(f, by_node[id(pf)]), {_key(b) for b in mine})
            pf.visit(v)
            spans = {
                b: (min(ls), max(ls))
                for b, lines in v.lines.items()
                if (ls := [x for x in lines if x not in allocated])
            }
            if spans:
                kernels.append((mine, spans, v.ops, limit))
    return LivePeak(name, kernels) if kernels else None
