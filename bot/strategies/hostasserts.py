"""The asserts of the host wrappers a knob passes through on its way to the kernel factory.

A wrapper that takes the block as a parameter and hands it on to the factory under the same
name (`def run_decode(q, kv, block_N, block_H): assert block_N % 16 == 0 ...;
flashattn(..., block_N, block_H)`) states the kernel's contract where the factory does not:
every value it passes on must hold its asserts. Each such assert (in the body of the wrapper,
loops and branches included, or of a wrapper of it; `for size in sizes: assert size % block_K
== 0`) is an `assert` rule of the knob, checked like the factory's own: a rule
the current value already breaks, or one that depends on a size the file does not fix, asks
nothing.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.binding import Resolver
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Function, names_in
from bot.strategies.tiling import Rule


def wrapper_asserts(
    resolver: Resolver, factory: Function, aliases: frozenset[str] | set[str]
) -> list[Rule]:
    """`assert` rules of every function that passes its own parameter named like the knob on to
    `factory` (directly or through other such wrappers)."""
    f = resolver.f
    rules: list[Rule] = []
    seen: set[int] = {id(factory)}
    todo = [factory]
    while todo:
        callee = todo.pop()
        for call in f.calls:
            if not call.scope or not resolver.calls(call, callee):
                continue
            wrapper = call.scope[-1]
            if id(wrapper) in seen or wrapper.prim_funcs:
                continue
            passed = {
                name
                for name in aliases
                if name in callee.params or name in callee.defaults
                for bound in [resolver.bound_by(call, callee, name)]
                if bound is not None
                and isinstance(bound[0], cst.Name)
                and bound[0].value == name
                and (name in wrapper.params or name in wrapper.defaults)
            }
            if not passed:
                continue
            seen.add(id(wrapper))
            todo.append(wrapper)
            for a in _asserts(wrapper.node):
                if names_in(a.test) & passed:
                    line = f.line(a)
                    rules.append(Rule("assert", a.test, wrapper.chain, line, code_of(a.test)))
    return rules


def _asserts(node: cst.FunctionDef) -> list[cst.Assert]:
    """The asserts of a function's body, in its loops and branches too, not in nested defs."""
    found: list[cst.Assert] = []

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return n is node

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

        def visit_Assert(self, n: cst.Assert) -> None:
            found.append(n)

    node.visit(_V())
    return found
