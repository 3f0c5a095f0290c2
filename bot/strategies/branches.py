"""The branches of a kernel factory: both spellings of `if`, and which side the run path takes.

TileLang has two ways to branch inside a prim_func: Python's `if cond:` (unrolled when the
condition is a Python value, an `if` node of the kernel otherwise) and the statement form

    with T.If(cond):
        with T.Then():
            ...
        with T.Else():
            ...

`as_if` reads the statement form as the `if` it stands for, so every reader of `if` guards
reads both. `run_path_taken` says which side a condition takes on every way the file runs
the kernel (`if is_causal:` with `is_causal` bound to False by the only call path), so rules
read from a branch that never runs are not rules of the kernel as it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Function
from bot.strategies.source import dotted

if TYPE_CHECKING:
    from bot.strategies.binding import Resolver

Statements = Sequence[cst.BaseStatement]


@dataclass(frozen=True)
class IfForm:
    """One `if`, from either spelling: its test, the statements of each side."""

    test: cst.BaseExpression
    body: Statements
    orelse: Statements


def _with_call(node: cst.CSTNode, name: str) -> cst.Call | None:
    """The `T.<name>(...)` call of a one-item `with` statement, else None."""
    if not isinstance(node, cst.With) or len(node.items) != 1:
        return None
    call = node.items[0].item
    if isinstance(call, cst.Call) and dotted(call.func).rsplit(".", 1)[-1] == name:
        return call
    return None


def _body(node: cst.With) -> Statements:
    return node.body.body if isinstance(node.body, cst.IndentedBlock) else ()


def as_if(node: cst.CSTNode) -> IfForm | None:
    """`if test: ... else: ...` or `with T.If(test): with T.Then(): ... with T.Else(): ...`
    as one IfForm (an `elif` is an `if` in the else side); None for any other statement."""
    if isinstance(node, cst.If):
        if node.orelse is None:
            orelse: Statements = ()
        elif isinstance(node.orelse, cst.If):
            orelse = (node.orelse,)
        else:
            orelse = (
                node.orelse.body.body if isinstance(node.orelse.body, cst.IndentedBlock) else ()
            )
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        return IfForm(node.test, body, orelse)
    call = _with_call(node, "If")
    if call is None or not call.args or not isinstance(node, cst.With):
        return None
    then: list[cst.BaseStatement] = []
    other: list[cst.BaseStatement] = []
    for stmt in _body(node):
        if _with_call(stmt, "Then") is not None:
            then.extend(_body(stmt))  # type: ignore[arg-type]
        elif _with_call(stmt, "Else") is not None:
            other.extend(_body(stmt))  # type: ignore[arg-type]
        else:
            then.append(stmt)  # a statement directly under T.If runs under its condition
    return IfForm(call.args[0].value, then, other)


def run_path_taken(
    resolver: Resolver, chain: tuple[Function, ...], test: cst.BaseExpression
) -> bool | None:
    """The truth of `test` on every path the file runs the kernel by (its names resolved
    through call sites, argparse defaults and constants), or None when it is not one value
    there (a runtime value, several call paths that disagree, anything unreadable)."""
    value = _truth(evaluate(test, Env(resolver, chain, 0)))
    if value is not None or not chain:
        return value
    return _on_every_path(resolver, chain, test)


def _truth(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    return None


def _on_every_path(
    resolver: Resolver, chain: tuple[Function, ...], test: cst.BaseExpression
) -> bool | None:
    """The truth of `test` when it is one value on each call path of the function it sits in
    and the same on all of them (`num_segments == 1` in a host entry the file's tests call
    with 256, 128 and 64 segments), else None. Paths come from bot/strategies/callsizes.py,
    read only for a function with fewer than MAX_PATHS // 2 plain callers and none recursive
    (`_few_plain_callers`); a list that still reaches MAX_PATHS decides nothing. Not
    re-entered: a test read while another is being decided per path is left undecided."""
    from bot.strategies.callsizes import MAX_PATHS, param_values

    if resolver.deciding_per_path:
        return None
    fn = chain[-1]
    if not _few_plain_callers(resolver, fn, MAX_PATHS // 2):
        return None
    resolver.deciding_per_path = True
    try:
        paths = resolver.f.kept(
            ("branches.paths", id(fn.node), tuple(resolver.harness)),
            lambda: param_values(resolver.f, resolver, fn, 0),
        )
        if not paths or len(paths) >= MAX_PATHS:
            return None
        seen = {
            _truth(evaluate(test, Env(resolver, chain, 0, ints, tensors)))
            for ints, tensors in paths
        }
    finally:
        resolver.deciding_per_path = False
    return seen.pop() if len(seen) == 1 else None


def _few_plain_callers(resolver: Resolver, fn: Function, limit: int) -> bool:
    """Whether the call sites that reach `fn` by name, through every caller up the file, are
    fewer than `limit` and form no cycle: the per-path reading follows each of them, and a
    recursive or widely fanned-out host function would make its path list partial or slow."""
    f = resolver.f
    key = ("branches.few_callers", id(fn.node), limit)

    def count() -> bool:
        sites = 0
        todo, seen = [fn], {id(fn.node)}
        while todo:
            here = todo.pop()
            for call in f.calls:
                func = call.node.func
                if not (isinstance(func, cst.Name) and func.value == here.name):
                    continue
                sites += 1
                if sites >= limit:
                    return False
                for outer in call.scope[:1]:
                    if id(outer.node) == id(fn.node):
                        return False  # recursion back into the function decided
                    if id(outer.node) not in seen:
                        seen.add(id(outer.node))
                        todo.append(outer)
        return True

    return bool(f.kept(key, count))
