"""The pad value of an element expression, and the gemm and loop forms padflow reads.

bot/strategies/padflow.py follows the padded elements of a clipped tile through a kernel;
an assignment over tile elements (`s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)`) gives
its target the pad value the expression computes from its operands' (bot/strategies/padvalues.py):
`-inf * scale` stays -inf when the scale is surely positive (`sign`), `-inf - m` stays -inf
for a finite m, and `exp2(-inf)` is 0.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from bot.strategies.padvalues import FINITE, UNKNOWN, combine
from bot.strategies.source import dotted
from bot.strategies.tiling import _names


def base_name(node: cst.BaseExpression) -> str | None:
    """The buffer or variable an access names (`x` of `x[i]`), else None."""
    if isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def code_of(node: cst.CSTNode) -> str:
    """A node's source on one line, for reasons that quote it."""
    return " ".join(cst.Module([]).code_for_node(node).split())


def expression_pad(
    node: cst.BaseExpression,
    padded: set[str],
    operand: Callable[[cst.BaseExpression], str],
    scope: dict[str, list[cst.BaseExpression]],
    depth: int = 0,
) -> str:
    """The pad value of an element expression over tiles (`T.exp2(acc_s[i, j] * scale -
    m[i] * scale)`): each padded buffer read gives its pad value, anything else a finite
    value or the constant it is."""
    if depth > 20:
        return UNKNOWN
    if isinstance(node, (cst.Subscript, cst.Name)) and base_name(node) in padded:
        return operand(node)
    if isinstance(node, cst.BinaryOperation):
        op = _BINARY.get(type(node.operator))
        if op is None:
            return UNKNOWN
        a, b = (
            expression_pad(node.left, padded, operand, scope, depth + 1),
            expression_pad(node.right, padded, operand, scope, depth + 1),
        )
        if op in ("mul", "div") and "inf" in a and b == FINITE:
            positive = sign(node.right, scope)  # `x * scale` with scale > 0 keeps -inf
            if positive is not None:
                return a if positive > 0 else combine("neg", [a])
        return combine(op, [a, b])
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return combine("neg", [expression_pad(node.expression, padded, operand, scope, depth + 1)])
    if isinstance(node, cst.Call) and not _names(node) & padded:
        return operand(node)
    if isinstance(node, cst.Call):
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short in _CALLS and args:
            return combine(
                _CALLS[short], [expression_pad(a, padded, operand, scope, depth + 1) for a in args]
            )
        return UNKNOWN
    if _names(node) & padded:
        return UNKNOWN
    return operand(node)


_BINARY: dict[type, str] = {
    cst.Add: "add",
    cst.Subtract: "sub",
    cst.Multiply: "mul",
    cst.Divide: "div",
}
# element-wise calls an expression applies (`T.exp2(x)`, `T.max(a, b)`) -> padvalues' op
_CALLS = {
    "exp": "exp",
    "exp2": "exp2",
    "log": "log",
    "abs": "abs",
    "max": "max",
    "min": "min",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "cast": "cast",
}


def elementwise_loop(loop: cst.For | cst.While) -> bool:
    return (
        isinstance(loop, cst.For)
        and isinstance(loop.iter, cst.Call)
        and dotted(loop.iter.func).rsplit(".", 1)[-1] in ("Parallel", "vectorized")
    )


def accumulates(args: list[cst.BaseExpression], kw: dict) -> bool:
    """A gemm that adds into C as it finds it: no clearing argument (`clear_accum=`,
    `init=`) other than a literal False, and no positional argument past the transposes."""
    if len(args) > 5:
        return False
    return all(
        code_of(v) == "False"
        for k, v in kw.items()
        if k.lower().replace("_", "") in ("clearaccum", "init", "initc", "clear", "zeroinit")
    )


def sign(
    node: cst.BaseExpression, scope: dict[str, list[cst.BaseExpression]], depth: int = 0
) -> int | None:
    """+1 / -1 when a scalar is surely positive / negative (`(1.0 / dim) ** 0.5 * 1.44`,
    a square root times a positive constant), else None."""
    if depth > 10:
        return None
    if isinstance(node, (cst.Integer, cst.Float)):
        v = float(node.evaluated_value)
        return None if v == 0 else (1 if v > 0 else -1)
    if isinstance(node, cst.Name) and len(scope.get(node.value, [])) == 1:
        return sign(scope[node.value][0], scope, depth + 1)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        s = sign(node.expression, scope, depth + 1)
        return None if s is None else -s
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power) and isinstance(node.right, cst.Float):
            return 1  # a fractional power is real only for a positive base, and positive
        if isinstance(node.operator, (cst.Multiply, cst.Divide)):
            a, b = sign(node.left, scope, depth + 1), sign(node.right, scope, depth + 1)
            return None if a is None or b is None else a * b
    if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] in ("sqrt", "rsqrt"):
        return 1
    return None
