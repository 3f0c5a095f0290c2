"""A block-named knob that counts the cores a kernel launches, not the rows of a tile.

    block_size = 1
    with T.Kernel(block_size, is_npu=True) as (cid, _):
        for i in T.serial(T.ceildiv(m_num * n_num, block_size)):
            block_id = i * block_size + cid
            if block_id < m_num * n_num:
                ...

The name is the grid of the kernel (the first argument of `T.Kernel`) and the kernel reads
the core index that grid binds (`cid`): each core takes its own share of the work, so the
name is a core count. A count of 1 is one core walking every tile, not a per-row algorithm
(the reason a block of 1 is otherwise not grown): more cores split the same work. A grid
whose index the kernel never reads (`as (_, _)`, or `cid` unused) is not one: every core
would redo the whole work, and the name is left out as before.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.facts import Function, names_in
from bot.strategies.source import dotted


class _Grids(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.indices: list[tuple[str, cst.With]] = []  # (core index name, the with)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if not (isinstance(call, cst.Call) and dotted(call.func).endswith("Kernel")):
                continue
            args = [a.value for a in call.args if a.keyword is None]
            if not args or not (isinstance(args[0], cst.Name) and args[0].value == self.name):
                continue
            target: cst.BaseExpression | None = (
                item.asname.name if item.asname is not None else None
            )
            if isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[0].value
            if isinstance(target, cst.Name) and target.value != "_":
                self.indices.append((target.value, node))


def core_count(name: str, factories: list[Function]) -> str | None:
    """Where `name` is the grid of a kernel of `factories` whose core index the kernel reads
    (`T.Kernel(name) as (cid, ...)` with `cid` used), as `T.Kernel(name) as cid`; else None."""
    for factory in factories:
        for pf in factory.prim_funcs:
            v = _Grids(name)
            pf.visit(v)
            for index, with_ in v.indices:
                if index in names_in(with_.body):
                    return f"T.Kernel({name}) as {index}"
    return None
