"""A size a factory sets in each arm of an `if`: the value of the arm the run takes.

Kernels derive a size with a plain Python branch on values the factory knows:

    if head_kv > block_H:
        REPLICATE_H = head_kv // block_H
    else:
        REPLICATE_H = 1

The name has two assignments, so it is not "one assignment" and bot/strategies/evaluate.py
would leave it unknown, and every size computed from it (`H_per_block = ... if REPLICATE_H
== 1 else block_H`, the rows of a gemm operand) with it. When every arm of one `if` / `elif`
/ `else` chain written directly in the function's body assigns the name once, at the arm's
own level, and nothing else in the function assigns it, the value is the one the arm whose
test holds assigns: the tests are evaluated in order with the same pinned knob values. A
test that cannot be evaluated, a chain without `else` (the name could keep no value), or an
assignment elsewhere leaves the value unknown, as before.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.facts import Facts, Function
from bot.strategies.source import one_assignment

# (test or None for the `else` arm, the expression the arm assigns)
Arms = list[tuple[cst.BaseExpression | None, cst.BaseExpression]]


def _assigned(block: cst.BaseSuite, name: str) -> list[cst.BaseExpression]:
    """The values `name = value` statements at the top level of `block` assign."""
    out: list[cst.BaseExpression] = []
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            pair = one_assignment(small)
            if pair is not None and isinstance(pair[0], cst.Name) and pair[0].value == name:
                out.append(pair[1])
    return out


def _chain(node: cst.If, name: str) -> Arms | None:
    arms: Arms = []
    current: cst.If | None = node
    while current is not None:
        values = _assigned(current.body, name)
        if len(values) != 1:
            return None
        arms.append((current.test, values[0]))
        orelse = current.orelse
        if isinstance(orelse, cst.If):
            current = orelse
            continue
        if not isinstance(orelse, cst.Else):
            return None  # no `else`: on some path the name is not assigned here
        last = _assigned(orelse.body, name)
        if len(last) != 1:
            return None
        arms.append((None, last[0]))
        current = None
    return arms


def arms(f: Facts, fn: Function, name: str) -> Arms | None:
    """The arms of the one `if` chain in `fn`'s body that assigns `name` in every arm, when
    those are all of `fn`'s assignments of `name`; else None. Kept on the parse `f` (every
    evaluation of a size that reads `name` asks): callers must not mutate it."""
    return f.kept(("armvalue.arms", id(fn.node), name), lambda: _arms(fn, name))


def _arms(fn: Function, name: str) -> Arms | None:
    values = fn.assigns.get(name, [])
    if len(values) < 2:
        return None
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.If):
            continue
        found = _chain(stmt, name)
        if found is not None and {id(v) for _, v in found} == {id(v) for v in values}:
            return found if len(found) == len(values) else None
    return None
