"""Matrix-multiply operands in whole cube fractals.

The Ascend cube unit multiplies matrices stored as fractals: blocks of 16 rows
of 32 bytes (16 x 16 for fp16/bf16, 16 x 32 for int8, 16 x 8 for fp32). An
operand of `T.gemm`/`T.gemm_v0`/`T.mma` (A, B and the accumulator C) is laid
out in L1 and L0 as whole fractals: TileLang-Ascend's L1 layout (zN) fixes 16
rows per fractal and its UB-to-L1 copy asserts that the rows are a multiple of
16. A knob that makes a dimension of such an operand a part of a fractal (8
rows of a gemm tile) makes the layout address rows the buffer does not hold.
None of the 101 gemm kernels gathered upstream uses a gemm tile dimension that
is not a whole fractal.

So a move is refused when it changes a dimension of a matrix-multiply operand
from a multiple of the fractal's granule to a value that is not one: 16
elements for every dimension, and 32 bytes' worth of elements (32 for a 1-byte
type) on the reduction axis when the call's transposes say which axis that
is. A kernel whose operand already has a partial-fractal dimension with the
current value is left alone there: it shows that its toolchain pads that
operand itself.

A dimension that multiplies the knob by a size the file does not fix (`block_Q *
heads`, heads read from a tensor the file never builds) is whole for every value of
that size when the known factors are a multiple of the granule (16 x heads), and only
for some values otherwise (8 x heads: odd heads cut a fractal): a move from the first
to the second is refused the same way, naming the size that would have to be even.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import Buffer, Scoped, visit_kernels
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.operands import operand, visit_helpers
from bot.strategies.placement import GEMMS
from bot.strategies.source import bool_value, dotted

ROWS = 16  # rows of one fractal
C0_BYTES = 32  # bytes of one fractal row
# keywords that swap the two dimensions of operand A / B
_A_FLAGS = ("transpose_A", "a_transpose", "trans_A", "transA")
_B_FLAGS = ("transpose_B", "b_transpose", "trans_B", "transB")
# positions of the A / B transpose flags in TileLang's signatures, read from the upstream
# sources: tile-ai/tilelang-ascend tilelang/language/gemm.py `gemm(A, B, C, transpose_A=False,
# transpose_B=False, policy, ...)` and ascend.py / pto.py `gemm_v0(A, B, C, transpose_A=False,
# transpose_B=False, init=False)`; TileLang-NPUIR (tilelang-mlir-ascend) exports `npuir_dot as
# gemm` (tilelang/language/__init__.py), `npuir_dot(A, B, C, size=None, initC=False,
# a_transpose=False, b_transpose=False)` (customize_npuir.py)
_ASCEND = (3, 4)
_NPUIR = (5, 6)


def _positions(kind: str, args: list[cst.BaseExpression]) -> tuple[int, int] | None:
    """Where this call's transpose flags sit, or None when its spelling does not tell."""
    if kind == "npuir_dot":
        return _NPUIR
    if kind == "gemm_v0":
        return _ASCEND
    if kind != "gemm" or len(args) <= 3:
        return None
    fourth = args[3]
    if isinstance(fourth, (cst.List, cst.Tuple)) or (
        isinstance(fourth, cst.Name) and fourth.value == "None"
    ):
        return _NPUIR  # npuir_dot's `size` ([m, k, n])
    if isinstance(fourth, cst.Name) and fourth.value in ("True", "False"):
        return _ASCEND  # a flag where tilelang-ascend's gemm takes transpose_A
    return None


@dataclass(frozen=True)
class _Operand:
    buffer: Buffer
    role: str  # A, B or C
    reduced: int | None  # index of the reduction dimension (A, B), None when unknown or C


def transposes(call: cst.Call) -> tuple[bool | None, bool | None]:
    """Whether a matrix multiply call transposes A and B: a flag passed by keyword, or by
    position where TileLang's signature puts it (`_positions`); False when absent, None when
    it is not a literal or sits at a position whose meaning is not known."""
    kind = dotted(call.func).rsplit(".", 1)[-1]
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    starred = any(a.star for a in call.args)
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    at = _positions(kind, args)
    out: list[bool | None] = []
    for side, names in enumerate((_A_FLAGS, _B_FLAGS)):
        given = next((kw[n] for n in names if n in kw), None)
        if given is not None:
            out.append(bool_value(given))
        elif starred:
            out.append(None)  # `*args` may hold it
        elif len(args) <= 3:
            out.append(False)  # A, B, C only: the default
        elif at is None:
            out.append(None)  # a position this spelling's signature does not tell
        else:
            out.append(bool_value(args[at[side]]) if at[side] < len(args) else False)
    return out[0], out[1]


class _Gemms(cst.CSTVisitor):
    def __init__(self, scoped: Scoped) -> None:
        self.scoped = scoped
        self.operands: list[_Operand] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if not name.startswith("T.") or name.rsplit(".", 1)[-1] not in GEMMS:
            return
        args = [a.value for a in node.args if a.keyword is None]
        t_a, t_b = transposes(node)
        flags = {"A": t_a, "B": t_b, "C": None}
        for role, arg in zip(("A", "B", "C"), args[:3], strict=False):
            b = operand(self.scoped, arg, node)  # a buffer, or the region of one passed
            if b is None or len(b.dims) < 2:
                continue
            t = flags[role]
            reduced: int | None = None
            if role == "A" and t is not None:
                reduced = len(b.dims) - (2 if t else 1)  # A is M x K, or K x M transposed
            elif role == "B" and t is not None:
                reduced = len(b.dims) - (1 if t else 2)  # B is K x N, or N x K transposed
            self.operands.append(_Operand(b, role, reduced))


def _granule(op: _Operand, dim: int) -> int:
    """Elements of one whole fractal along `dim`: 16 rows, or one 32-byte row on the
    reduction axis (16 fp16, 32 int8, 8 fp32); the smaller of the two where A's or B's
    reduction axis is unknown (a non-literal transpose flag), so no whole fractal is refused."""
    row = max(1, C0_BYTES // op.buffer.dtype_bytes)
    if op.role == "C":
        return ROWS  # the accumulator: M x N, both in rows of fractals
    if op.reduced is None:
        return min(ROWS, row)
    return row if dim == op.reduced else ROWS


@dataclass
class FractalCheck:
    """Refuses a knob value that cuts a matrix-multiply operand dimension into a part fractal."""

    name: str
    operands: list[_Operand]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for op in self.operands:
            b = op.buffer
            for i in range(len(b.dims) - 2, len(b.dims)):  # the matrix: the last two dims
                now = evaluate(b.dims[i], env(b.chain, current))
                new = evaluate(b.dims[i], env(b.chain, value))
                if type(now) is not int or type(new) is not int:
                    partial = self._unknown_factor(op, i, value, current, env)
                    if partial:
                        return partial
                    continue
                if now == new:
                    continue
                g = _cut(op, i, now, new)
                if g is None:
                    continue  # already a part fractal (the toolchain pads it), or still whole
                return (
                    f"{self.name}={value}: the gemm operand {op.role} `{b.name}` (line {b.line}) "
                    f"would have {new} along its {_axis(op, i)}, not a multiple of {g}, so part "
                    f"of a fractal: the cube unit and TileLang-Ascend's L1/L0 layouts work in "
                    f"whole fractals ({ROWS} rows of {C0_BYTES} bytes) and would address elements "
                    f"the buffer does not hold; the current {current} gives {now}, whole fractals"
                )
        return None

    def _unknown_factor(
        self,
        op: _Operand,
        i: int,
        value: int,
        current: int,
        env: Callable[[tuple[Function, ...], int], Env],
    ) -> str | None:
        """The reason when dimension `i` is a product with factors the file does not fix,
        whole fractals for every value of them at `current` and not at `value`."""
        b = op.buffer
        factors = _factors(b.dims[i])
        if len(factors) < 2:
            return None
        now_env, new_env = env(b.chain, current), env(b.chain, value)
        known_now = known_new = 1
        unknown: list[str] = []
        for factor in factors:
            a, c = evaluate(factor, now_env), evaluate(factor, new_env)
            if type(a) is int and type(c) is int and a > 0 and c > 0:
                known_now, known_new = known_now * a, known_new * c
            elif a is None and c is None and isinstance(factor, cst.Name):
                unknown.append(factor.value)
            else:
                return None
        if not unknown or known_now == known_new:
            return None
        g = _cut(op, i, known_now, known_new)
        if g is None:
            return None
        sizes = " x ".join(unknown)
        return (
            f"{self.name}={value}: the gemm operand {op.role} `{b.name}` (line {b.line}) would "
            f"have {known_new} x {sizes} along its {_axis(op, i)}, a multiple of {g} only when "
            f"{sizes} is a multiple of {g // math.gcd(known_new, g)}, and the file does not fix "
            f"{sizes}: otherwise part of a fractal, which the cube unit and TileLang-Ascend's "
            f"L1/L0 layouts do not hold; the current {current} gives {known_now} x {sizes}, "
            f"whole fractals for every {sizes}"
        )


def _cut(op: _Operand, i: int, now: int, new: int) -> int | None:
    """The granule of dimension `i` when `now` fills whole fractals along it and `new` does not;
    None otherwise (still whole, or a part fractal already: the toolchain pads it)."""
    g = _granule(op, i)
    return g if now % g == 0 and new % g != 0 else None


def _axis(op: _Operand, i: int) -> str:
    return "reduction axis" if i == op.reduced else f"dimension {i}"


def _factors(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a * b * c` -> [a, b, c]; anything else -> [node]."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return [*_factors(node.left), *_factors(node.right)]
    return [node]


def fractal_check(f: Facts, name: str, factories: list[Function]) -> FractalCheck | None:
    """The fractal rule of knob `name` over the matrix multiplies of `factories`' kernels."""
    visits = [*visit_kernels(f, factories, _Gemms), *visit_helpers(f, factories, _Gemms)]
    operands = [op for v in visits for op in v.operands]
    return FractalCheck(name, operands) if operands else None
