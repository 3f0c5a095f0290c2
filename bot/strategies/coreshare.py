"""Work items dealt to a fixed number of cores, one per core and pass, with no guard.

A persistent kernel launches G cores and walks its X work items in passes of G:

    with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):          # G = 8 cores
        for i in T.serial(T.ceildiv(m_num * n_num, BLOCK_SIZE)):  # X = m_num * n_num tiles
            block_id = i * BLOCK_SIZE + cid
            ...                                                   # no `if block_id < X`

Without a guard on the item, the last pass runs every core: when X is not a multiple of G the
extra cores work on items past the end (reads and writes past the tensors). So a knob that
changes X (block_M through `m_num = M // block_M`) or G must keep X a multiple of G where it is
one now. With the guard (corecount.py `guarded_share`) the extra cores only idle and nothing is
asked. Made only where X and G can be read at both values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import kernels_of
from bot.strategies.corecount import _Assigns, _derived, _spelled
from bot.strategies.evaluate import CEILDIV, Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, names_in
from bot.strategies.passmarks import COUNTED
from bot.strategies.source import dotted, launch


@dataclass(frozen=True)
class _Deal:
    loop: str  # `for i in T.serial(T.ceildiv(m_num * n_num, BLOCK_SIZE))`
    line: int
    items: cst.BaseExpression  # X
    cores: cst.BaseExpression  # G


class _Deals(cst.CSTVisitor):
    """The unguarded passes over work items dealt to the cores of one prim_func."""

    def __init__(self, f: Facts, factory: Function, locals_: dict[str, list]) -> None:
        self.f, self.factory, self.locals = f, factory, locals_
        self.grids: list[tuple[cst.BaseExpression, str]] = []  # (grid, core index) open
        self.deals: list[_Deal] = []

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            k = launch(item)
            if k is not None and k.grid and k.names and k.names[0] not in ("", "_"):
                self.grids.append((k.grid[0], k.names[0]))
                return
        self.grids.append((cst.Name("_"), ""))

    def leave_With(self, original_node: cst.With) -> None:
        self.grids.pop()

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        if not (
            isinstance(it, cst.Call)
            and dotted(it.func).rsplit(".", 1)[-1] in COUNTED
            and len(it.args) == 1
            and isinstance(it.args[0].value, cst.Call)
        ):
            return
        count = it.args[0].value
        if dotted(count.func).rsplit(".", 1)[-1] not in CEILDIV or len(count.args) != 2:
            return
        items, cores = count.args[0].value, count.args[1].value
        grid = next((g for g, index in reversed(self.grids) if index), None)
        index = next((index for _, index in reversed(self.grids) if index), "")
        if grid is None or _spelled(grid) != _spelled(cores) or index not in names_in(node.body):
            return  # not a share of the launched cores, or the core index is not read
        if _bounded(node.body, _derived(index, [self.locals])):
            return  # `if item < X`, `T.min(item, X - 1)`: the extra cores of the last pass idle
        self.deals.append(
            _Deal(f"for {code_of(node.target)} in {code_of(it)}", self.f.line(node), items, cores)
        )


def _bounded(body: cst.CSTNode, items: set[str]) -> bool:
    """Whether `body` tests or clamps anything computed from the core index (`items`): an `if`
    or `T.If` whose test reads one, or a `T.min` over one. Any such bound may keep the extra
    cores of the last pass off the end, so the deal is not judged."""
    found = False

    class V(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            nonlocal found
            found = found or bool(names_in(node.test) & items)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            short = dotted(node.func).rsplit(".", 1)[-1]
            if short in ("If", "min") and any(names_in(a.value) & items for a in node.args):
                found = True

    body.visit(V())
    return found


@dataclass
class CoreShareCheck:
    """Refuses a value that leaves the last pass of an unguarded deal with cores past the end."""

    name: str
    kernels: list[tuple[tuple[Function, ...], list[_Deal]]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for chain, deals in self.kernels:
            for d in deals:
                now = env(chain, current)
                new = env(chain, value)
                x_now, g_now = evaluate(d.items, now), evaluate(d.cores, now)
                x_new, g_new = evaluate(d.items, new), evaluate(d.cores, new)
                if not all(type(v) is int and v > 0 for v in (x_now, g_now, x_new, g_new)):
                    continue
                assert isinstance(x_now, int) and isinstance(g_now, int)
                assert isinstance(x_new, int) and isinstance(g_new, int)
                if x_now % g_now or not x_new % g_new:
                    continue
                extra = g_new - x_new % g_new
                return (
                    f"{self.name}={value}: `{d.loop}` (line {d.line}) deals "
                    f"`{code_of(d.items)}` = {x_new} work items to `{code_of(d.cores)}` = "
                    f"{g_new} cores, one per core and pass, and no `if item < "
                    f"{code_of(d.items)}` guards them: the last pass would run {extra} cores "
                    f"past the last item ({x_now} items, a multiple of {g_now}, at the current "
                    f"{self.name}={current})"
                )
        return None


def core_share_check(f: Facts, name: str, factories: list[Function]) -> CoreShareCheck | None:
    """The unguarded core-deal rule of knob `name` over `factories`' kernels."""
    kernels: list[tuple[tuple[Function, ...], list[_Deal]]] = []
    for factory, fn in kernels_of(f, factories):
        assigns = _Assigns()
        fn.node.visit(assigns)
        v = _Deals(f, factory, assigns.found)
        fn.node.visit(v)
        if v.deals:
            kernels.append((fn.chain, v.deals))
    return CoreShareCheck(name, kernels) if kernels else None
