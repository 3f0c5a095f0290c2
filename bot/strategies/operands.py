"""A matrix-multiply operand as the call passes it: a buffer, a region of one, or a macro's parameter.

The gemm rules (bot/strategies/fractal.py, bot/strategies/l0fit.py) size an operand from the
buffer it names. Kernels also pass a region of a buffer, and pass buffers into helpers:

    T.gemm(A_shared[:block_M, :block_K], B_shared[:block_K, :block_N], C[:block_M, :block_N])
    T.gemm(l1_q, l1_kv[task_id % 2, :, :], l0_c[:, :block])      # one slot of a ring
    C1P(l1_q, l1_kv, l0_c, ...)  # a @T.macro whose body makes the gemm with its parameters

A region's matrix is what the subscript leaves: an index (`task_id % 2`) drops its axis, `:`
keeps the buffer's dimension, `:e` is e long, `a:b` is b - a long; axes past the subscript keep
the buffer's. A helper the kernel calls with buffers sees them under its parameter names
(positional or keyword), so its gemms read the same buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import libcst as cst

from bot.strategies.capacity import Buffer, Scoped
from bot.strategies.facts import Facts, Function

V = TypeVar("V", bound=cst.CSTVisitor)


def operand(scoped: Scoped, arg: cst.BaseExpression, at: cst.Call) -> Buffer | None:
    """The buffer `arg` passes to the call `at`, with the dimensions of the region it takes;
    None when it names no buffer of the kernel or a region whose length cannot be written."""
    if isinstance(arg, cst.Name):
        return scoped.get(arg.value, at)
    if not (isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Name)):
        return None
    b = scoped.get(arg.value.value, at)
    if b is None:
        return None
    dims: list[cst.BaseExpression] = []
    for i, element in enumerate(arg.slice):
        s = element.slice
        if isinstance(s, cst.Index):
            continue  # one position along this axis: the axis goes
        assert isinstance(s, cst.Slice)
        if s.step is not None:
            return None
        if s.upper is None:
            if s.lower is not None or i >= len(b.dims) or len(b.dims) != len(arg.slice):
                return None
            dims.append(b.dims[i])
        elif s.lower is None:
            dims.append(s.upper)
        else:
            dims.append(cst.BinaryOperation(s.upper, cst.Subtract(), s.lower))
    if len(b.dims) > len(arg.slice):
        dims.extend(b.dims[len(arg.slice) :])
    return replace(b, dims=tuple(dims))


class _HelperCalls(cst.CSTVisitor):
    """Calls of the given helpers by name inside a prim_func."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self.calls.append(node)


def _helpers(f: Facts, factory: Function, pfs: list[cst.FunctionDef]) -> dict[str, Function]:
    """Functions nested in the factory's chain (a `@T.macro`, a plain def) other than its
    prim_funcs, by name; a name defined twice is left out."""
    found: dict[str, list[Function]] = {}
    for fn in f.functions:
        if (
            fn.parents
            and any(fn.parents[-1] is c for c in factory.chain)
            and not any(fn.node is pf for pf in pfs)
        ):
            found.setdefault(fn.name, []).append(fn)
    return {name: fns[0] for name, fns in found.items() if len(fns) == 1}


def visit_helpers(f: Facts, factories: list[Function], make: Callable[[Scoped], V]) -> list[V]:
    """One visitor per call a kernel of `factories` makes to a helper of its factory with
    buffers as arguments, run over the helper's body with those buffers under the helper's
    parameter names (as `capacity.visit_kernels` runs one over each kernel)."""
    by_node = {id(fn.node): fn for fn in f.functions}
    out: list[V] = []
    for factory in factories:
        helpers = _helpers(f, factory, factory.prim_funcs)
        if not helpers:
            continue
        for pf in factory.prim_funcs:
            scoped = Scoped(f, by_node[id(pf)])
            calls = _HelperCalls(set(helpers))
            pf.visit(calls)
            for call in calls.calls:
                assert isinstance(call.func, cst.Name)
                helper = helpers[call.func.value]
                bound: list[Buffer] = []
                for i, a in enumerate(call.args):
                    if a.star or not isinstance(a.value, cst.Name):
                        continue
                    param = a.keyword.value if a.keyword is not None else None
                    if param is None:
                        if i >= len(helper.params):
                            continue
                        param = helper.params[i]
                    b = scoped.get(a.value.value, call)
                    if b is not None:
                        bound.append(replace(b, name=param, scope=id(helper.node)))
                if not bound:
                    continue
                v = make(Scoped.bound(helper.node, bound))
                helper.node.visit(v)
                out.append(v)
    return out
