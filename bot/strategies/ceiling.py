"""The largest value a caller can pass for a size it computes as `min(C, ...)`.

A caller that sizes a tile from the input (`block = min(1024, h)`, then `block -= 16` until
it divides `h`) passes no literal, but never more than C, and exactly C for every input that
C divides (`h = 4096`). A kernel whose buffers are sized by that parameter must therefore fit
with C: the op runs with it for such inputs. The bound is read only when the name is set
once to a `min(...)` with an integer literal among its arguments and is otherwise only
lowered (`-=` a positive literal, `//=`).
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.facts import Function
from bot.strategies.source import int_value, min_operands


def _min_literal(node: cst.BaseExpression) -> int | None:
    """The smallest positive literal among a `min(...)` / `T.min(...)` call's operands."""
    operands = min_operands(node)
    known = [v for v in map(int_value, operands or []) if v is not None and v > 0]
    return min(known) if known else None


def augmented_operands(fn: Function) -> set[int]:
    """ids of the right-hand sides of `fn`'s augmented assignments (`x -= 16`), which the
    facts list among a name's assignments although they are not values of the name."""
    found: set[int] = set()

    class _Aug(cst.CSTVisitor):
        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            found.add(id(n.value))

    fn.node.visit(_Aug())
    return found


def ceiling(node: cst.BaseExpression, scope: tuple[Function, ...]) -> int | None:
    """C when `node` is at most the literal C and reaches it for some inputs, else None."""
    direct = _min_literal(node)
    if direct is not None or not isinstance(node, cst.Name) or not scope:
        return direct
    fn = scope[-1]
    operands = augmented_operands(fn)
    values = [v for v in fn.assigns.get(node.value, []) if id(v) not in operands]
    if len(values) != 1:
        return None
    bound = _min_literal(values[0])
    if bound is None:
        return None
    name = node.value

    class _Lowered(cst.CSTVisitor):
        ok = True

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if isinstance(n.target, cst.Name) and n.target.value == name:
                step = int_value(n.value)
                lowers = (isinstance(n.operator, cst.SubtractAssign) and (step or 0) > 0) or (
                    isinstance(n.operator, cst.FloorDivideAssign) and (step or 0) >= 1
                )
                _Lowered.ok = _Lowered.ok and lowers

    fn.node.visit(_Lowered())
    return bound if _Lowered.ok else None
