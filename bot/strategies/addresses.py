"""Buffers placed at hand-written addresses must not grow into the next one.

A kernel that lays out its on-chip memory by hand names each buffer's byte offset:

    T.annotate_address({
        acc_s_ub: 17664,   # 32 x 64 fp32 = 8192 bytes at block_I = 64
        m_i_prev: 25856,
    })

The offsets are written for the sizes the current value gives. A value that makes a buffer
larger than the gap to the next buffer of the same memory (the next higher offset) makes the
two overlap: writes to one corrupt the other. A move is refused when every buffer of a memory
fits its gap now and one does not at the new value. Buffers placed at the same offset share
memory on purpose (an accumulator reused) and are not compared with each other; a buffer whose
size cannot be read leaves its memory unjudged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, kernel_buffers
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, int_value


@dataclass(frozen=True)
class _Placed:
    buffer: Buffer
    offset: int


def _annotated(pf: cst.FunctionDef) -> dict[str, int]:
    """name -> offset of every `T.annotate_address({name: offset, ...})` entry in `pf`."""
    out: dict[str, int] = {}

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).rsplit(".", 1)[-1] != "annotate_address" or not node.args:
                return
            table = node.args[0].value
            if not isinstance(table, cst.Dict):
                return
            for e in table.elements:
                if not isinstance(e, cst.DictElement) or not isinstance(e.key, cst.Name):
                    continue
                offset = int_value(e.value)
                if offset is not None:
                    out[e.key.value] = offset

    pf.visit(V())
    return out


def _bytes(b: Buffer, env: Env) -> int | None:
    size = b.fit_bytes
    for d in b.dims:
        extent = evaluate(d, env)
        if type(extent) is not int or extent <= 0:
            return None
        size *= extent
    return size


def _overlap(group: list[_Placed], env: Env) -> tuple[_Placed, int, _Placed] | None:
    """(buffer, its bytes, the buffer it runs into) of the first overlap in one memory's
    buffers, or None; None too when a size cannot be read."""
    sizes = {id(p): _bytes(p.buffer, env) for p in group}
    if any(s is None for s in sizes.values()):
        return None
    for p in sorted(group, key=lambda p: p.offset):
        after = [q for q in group if q.offset > p.offset]
        if not after:
            continue
        nxt = min(after, key=lambda q: q.offset)
        size = sizes[id(p)]
        if size is not None and p.offset + size > nxt.offset:
            return p, size, nxt
    return None


@dataclass
class AddressCheck:
    """Refuses a value that makes a buffer at a hand-written address overlap the next one."""

    name: str
    kernels: list[tuple[tuple[Function, ...], list[list[_Placed]]]]  # per memory

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for chain, groups in self.kernels:
            hit = next(
                (
                    found
                    for group in groups
                    # a memory laid out with an overlap already is not ours to judge
                    if _overlap(group, env(chain, current)) is None
                    and (found := _overlap(group, env(chain, value))) is not None
                ),
                None,
            )
            if hit is None:
                continue
            p, size, nxt = hit
            return (
                f"{self.name}={value}: `{p.buffer.name}` (line {p.buffer.line}) sits at the "
                f"hand-written {p.buffer.memory} address {p.offset} and would take {size} bytes, "
                f"past the address {nxt.offset} of `{nxt.buffer.name}`: the two would overlap "
                f"(the layout in T.annotate_address is written for the current "
                f"{self.name}={current})"
            )
        return None


def address_check(f: Facts, name: str, factories: list[Function]) -> AddressCheck | None:
    """The hand-written address rule of knob `name` over `factories`' kernels."""
    by_node = {id(fn.node): fn for fn in f.functions}
    kernels: list[tuple[tuple[Function, ...], list[list[_Placed]]]] = []
    for factory in factories:
        for pf in factory.prim_funcs:
            fn = by_node.get(id(pf))
            offsets = _annotated(pf) if fn is not None else {}
            if fn is None or not offsets:
                continue
            placed = [
                _Placed(b, offsets[b.name]) for b in kernel_buffers(f, fn) if b.name in offsets
            ]
            by_memory: dict[str, list[_Placed]] = {}
            for p in placed:
                by_memory.setdefault(p.buffer.memory, []).append(p)
            if by_memory:
                kernels.append((fn.chain, list(by_memory.values())))
    return AddressCheck(name, kernels) if kernels else None
