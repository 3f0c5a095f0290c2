"""The slices of a `T.gemm_v0` operand that pass through L0A and L0B.

TileLang-Ascend's `gemm_v0` (both its AscendC and its PTO templates) walks the
reduction axis of its L1 operands in slices of 128 and copies each slice into
L0A (A: M x 128) and L0B (B: 128 x N) before the matrix multiply. A knob that
sizes M or N of an operand must keep that slice within the 64 KiB of L0A/L0B:
the smallest footprint of either template (the AscendC one double-buffers the
slices, which only needs more). A reduction axis shorter than 128 is one slice
of its own length, so a knob that sizes only the reduction axis lengthens the
slice while the axis stays at or below 128 (`[BI, 512]` bf16 as B, K = BI: 64 KiB
at 64, 128 KiB at 128) and past that only changes the number of slices, which
this rule never refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import CAPACITY, KIB, Buffer, Scoped, visit_kernels
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.fractal import transposes
from bot.strategies.operands import operand, visit_helpers
from bot.strategies.source import dotted

SLICE = 128  # reduction elements per L0 slice in gemm_v0


@dataclass(frozen=True)
class _Operand:
    buffer: Buffer
    memory: str  # L0A or L0B
    free: int  # index of the M (A) or N (B) dimension
    reduced: int  # index of the K dimension


class _Gemms(cst.CSTVisitor):
    def __init__(self, scoped: Scoped) -> None:
        self.scoped = scoped
        self.operands: list[_Operand] = []

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func).rsplit(".", 1)[-1] != "gemm_v0":
            return
        args = [a.value for a in node.args if a.keyword is None]
        flags = transposes(node)  # by keyword or by gemm_v0's positions
        for i, (memory, plain) in enumerate((("L0A", (0, 1)), ("L0B", (1, 0)))):
            arg = args[i] if i < len(args) else None
            if arg is None:
                continue
            b = operand(self.scoped, arg, node)  # a buffer, or the region of one passed
            swapped = flags[i]
            if b is None or len(b.dims) != 2 or swapped is None:
                continue
            free, reduced = plain[::-1] if swapped else plain
            self.operands.append(_Operand(b, memory, free, reduced))


@dataclass
class L0Check:
    """Refuses a knob value whose gemm_v0 operand slice overflows L0A or L0B."""

    name: str
    operands: list[_Operand]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for op in self.operands:
            b = op.buffer
            new, now = _bytes(op, value, env), _bytes(op, current, env)
            limit = CAPACITY[op.memory]
            if new is None or now is None or new <= limit or now > limit:
                continue
            return (
                f"{self.name}={value}: gemm_v0 copies its operand {b.name} (line {b.line}) "
                f"into {op.memory} in slices of {SLICE} along the reduction axis (a shorter "
                f"axis is one slice of its own length), and one slice would take {new} bytes, "
                f"more than the {limit // KIB} KiB of {op.memory} on Ascend A2/A3"
            )
        return None


def _bytes(op: _Operand, value: int, env: Callable[[tuple[Function, ...], int], Env]) -> int | None:
    b = op.buffer
    free = evaluate(b.dims[op.free], env(b.chain, value))
    reduced = evaluate(b.dims[op.reduced], env(b.chain, value))
    if type(free) is not int or type(reduced) is not int or free <= 0 or reduced <= 0:
        return None
    return free * min(reduced, SLICE) * b.fit_bytes


def l0_check(f: Facts, name: str, factories: list[Function]) -> L0Check | None:
    """The L0 rule of knob `name` over the gemm_v0 calls of the kernels of `factories`."""
    visits = [*visit_kernels(f, factories, _Gemms), *visit_helpers(f, factories, _Gemms)]
    operands = [op for v in visits for op in v.operands]
    return L0Check(name, operands) if operands else None
