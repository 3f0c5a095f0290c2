"""The value the padded elements of a clipped tile hold, through the ops a kernel applies.

Pad values are numbers written as text ("0", "1", "-1", "-inf", "+inf"), UNKNOWN (stale or
computed data) or, for an operand without padding, FINITE (some finite number). An
element-wise op maps its operands' pad values to its result's (`exp(-inf) = 0`,
`0 * x = 0`, `relu(1 - 1) = 0`, `x - (-inf) = +inf`); whatever cannot be known is UNKNOWN.
A reduction is unharmed by a pad value that is NEUTRAL for it (bot/strategies/padflow.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import libcst as cst

from bot.strategies.source import dotted

UNKNOWN, FINITE = "unknown data", "x"  # pad values are numbers as text ("0", "-inf", "-1")
NEUTRAL = {"max": "-inf", "min": "+inf", "sum": "0", "abssum": "0", "absmax": "0"}
WHAT = {"max": "the max", "min": "the min", "sum": "the sum", "abssum": "the sum"}
_BIG = 2.0**29  # a literal at least this large stands in for infinity (`-2**30`)


def _number(node: cst.BaseExpression | None) -> float | None:
    """The value of a constant expression: a number, `-T.infinity(dtype)`, `T.float32(0)`."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        v = _number(node.expression)
        return None if v is None else -v
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        a, b = _number(node.left), _number(node.right)
        return a**b if a is not None and b is not None and 0 <= b <= 64 else None
    if isinstance(node, cst.Call):
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short == "infinity":
            return math.inf
        if short.startswith(("float", "int")) and len(args) == 1:
            if isinstance(args[0], cst.SimpleString):
                text = str(args[0].evaluated_value)
                return float(text) if text in ("inf", "-inf", "nan") else None
            return _number(args[0])
    return None


def _text(value: float | None) -> str:
    if value is None or math.isnan(value):
        return UNKNOWN
    if math.isinf(value) or abs(value) >= _BIG:
        return "-inf" if value < 0 else "+inf"
    return str(int(value)) if value == int(value) else repr(value)


def _value(text: str) -> float | None:
    if text in (UNKNOWN, FINITE):
        return None
    return {"-inf": -math.inf, "+inf": math.inf}.get(text) if "inf" in text else float(text)


def pad_of(node: cst.BaseExpression | None) -> str:
    """The pad value a constant expression stands for."""
    return _text(_number(node))


_UNARY: dict[str, Callable[[float], float]] = {
    "exp": math.exp,
    "exp2": lambda a: 2.0**a,
    "ln": math.log,
    "log": math.log,
    "abs": abs,
    "relu": lambda a: max(a, 0.0),
    "sqrt": math.sqrt,
    "rsqrt": lambda a: math.inf if a == 0 else 1 / math.sqrt(a),
    "neg": lambda a: -a,
    "copy": lambda a: a,
    "cast": lambda a: a,
    "broadcast": lambda a: a,
    "brc": lambda a: a,
}


def combine(op: str, pads: list[str]) -> str:
    """The pad value of an element-wise op's result from its operands' (FINITE: an operand
    without padding, whose value is some finite number)."""
    try:
        value = _apply(op, pads)
    except (ValueError, OverflowError, ZeroDivisionError):
        return UNKNOWN
    if value is None and op in _FINITE_OPS and FINITE in pads and all(_finite(p) for p in pads):
        return FINITE  # finite operands, one of them not known: some finite number
    return _text(value)


_FINITE_OPS = frozenset({"add", "sub", "mul", "max", "min", "neg", "abs", "copy", "cast"})


def _finite(pad: str) -> bool:
    if pad == FINITE:
        return True
    value = _value(pad)
    return value is not None and math.isfinite(value)


def _apply(op: str, pads: list[str]) -> float | None:
    if not pads or UNKNOWN in pads:
        return None
    values = [_value(p) for p in pads]
    known = [v for v in values if v is not None]
    some = FINITE in pads  # an operand whose value is finite but not known
    if op in _UNARY:
        return None if values[0] is None else _UNARY[op](values[0])
    if op == "clamp" and len(values) >= 3 and None not in values[:3]:
        return min(max(values[0], values[1]), values[2])  # type: ignore[type-var]
    infs = {v for v in known if math.isinf(v)}
    if op == "add":
        if not some:
            return sum(known)
        return infs.pop() if len(infs) == 1 else None
    if op == "sub" and len(values) == 2:
        a, b = values
        if a is not None and b is not None:
            return a - b
        if a is not None and math.isinf(a):
            return a
        return -b if b is not None and math.isinf(b) else None
    if op == "mul":
        if not some:
            return math.prod(known)
        return 0.0 if 0.0 in known and not infs else None
    if op == "div" and len(values) == 2:
        a, b = values
        if a is not None and b is not None:
            return a / b
        return 0.0 if a == 0.0 else None
    if op in ("max", "min") and not some:
        return (max if op == "max" else min)(known)
    return None
