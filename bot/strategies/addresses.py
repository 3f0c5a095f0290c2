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
memory on purpose (an accumulator reused) and are not compared with each other. An offset or a
size that cannot be read leaves its memory unjudged, and a table naming a buffer whose
allocation is not read (its memory unknown) leaves the whole layout unjudged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, buffer_bytes, kernel_buffers, kernels_of
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted


@dataclass(frozen=True)
class _Placed:
    buffer: Buffer
    offset: cst.BaseExpression  # `17664`, `4096 * 2`, a name bound to one


def _annotated(pf: cst.FunctionDef) -> dict[str, cst.BaseExpression] | None:
    """name -> offset of every `T.annotate_address({name: offset, ...})` entry in `pf`; None
    when an entry is not a buffer name and an offset (a table built elsewhere, `**more`)."""
    out: dict[str, cst.BaseExpression] = {}
    unread = False

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).rsplit(".", 1)[-1] != "annotate_address" or not node.args:
                return
            nonlocal unread
            table = node.args[0].value
            if not isinstance(table, cst.Dict):
                unread = True
                return
            for e in table.elements:
                if not isinstance(e, cst.DictElement) or not isinstance(e.key, cst.Name):
                    unread = True
                    continue
                out[e.key.value] = e.value

    pf.visit(V())
    return None if unread else out


def _overlap(group: list[_Placed], env: Env) -> tuple[_Placed, int, int, _Placed, int] | None:
    """(buffer, its offset, its bytes, the buffer it runs into, that one's offset) of the first
    overlap in one memory's buffers, or None; None too when an offset or a size cannot be
    read."""
    placed: list[tuple[int, int, _Placed]] = []
    for p in group:
        offset, size = evaluate(p.offset, env), buffer_bytes(p.buffer, env)
        if type(offset) is not int or size is None:
            return None
        placed.append((offset, size, p))
    for offset, size, p in sorted(placed, key=lambda t: t[0]):
        after = [t for t in placed if t[0] > offset]
        if not after:
            continue
        nxt_offset, _, nxt = min(after, key=lambda t: t[0])
        if offset + size > nxt_offset:
            return p, offset, size, nxt, nxt_offset
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
            p, offset, size, nxt, nxt_offset = hit
            return (
                f"{self.name}={value}: `{p.buffer.name}` (line {p.buffer.line}) sits at the "
                f"hand-written {p.buffer.memory} address {offset} and would take {size} bytes, "
                f"past the address {nxt_offset} of `{nxt.buffer.name}`: the two would overlap "
                f"(the layout in T.annotate_address is written for the current "
                f"{self.name}={current})"
            )
        return None


def address_check(f: Facts, name: str, factories: list[Function]) -> AddressCheck | None:
    """The hand-written address rule of knob `name` over `factories`' kernels."""
    kernels: list[tuple[tuple[Function, ...], list[list[_Placed]]]] = []
    for _, fn in kernels_of(f, factories):
        offsets = _annotated(fn.node)
        if not offsets:
            continue
        buffers = {b.name: b for b in kernel_buffers(f, fn)}
        if set(offsets) - set(buffers):
            continue  # a placed buffer whose memory or size is not read: the layout is not judged
        by_memory: dict[str, list[_Placed]] = {}
        for buf, offset in offsets.items():
            by_memory.setdefault(buffers[buf].memory, []).append(_Placed(buffers[buf], offset))
        kernels.append((fn.chain, list(by_memory.values())))
    return AddressCheck(name, kernels) if kernels else None
