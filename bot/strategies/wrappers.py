"""Calls that reach a kernel factory through another callable: a partial, an alias, a method.

`k = partial(rows, block_M=64)` binds `block_M` where the partial is made; `k(1024)` then
binds the rest, after the partial's own positional arguments; `k = rows` makes `k(1024, 64)` a
call of `rows`; `self.rows(...)` / `Helper.rows(...)` call a factory written as a method (a
`@staticmethod`, or with `self`/`cls` bound first). `arguments` gives the arguments a call
passes to a factory, in the order Python binds them (positional first, then keywords, the
call's own keywords before the partial's so they win; `k = jit(...)(rows)`, a decorator
applied by hand, makes `k` an alias), or None when the call does not reach
that factory this way."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from bot.strategies.containers import Spelled, element
from bot.strategies.facts import Call, Facts, Function
from bot.strategies.signature import takes
from bot.strategies.source import dotted
from bot.strategies.writes import writes

PARTIAL = frozenset({"partial", "functools.partial"})


def wrapped(node: cst.Call) -> str | None:
    """The function name `partial(rows, ...)` wraps, or None for any other call."""
    if dotted(node.func) not in PARTIAL or not node.args:
        return None
    first = node.args[0]
    if first.keyword is not None or first.star or not isinstance(first.value, cst.Name):
        return None
    return first.value.value


def applied(node: cst.BaseExpression | None) -> str | None:
    """The function name a decorator applied by hand wraps (`tilelang.jit(out_idx=[-1])(gemm)`:
    a call whose callee is itself a call, with the function as its one argument), or None."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Call):
        return None
    if len(node.args) != 1:
        return None
    only = node.args[0]
    if only.keyword is not None or only.star or not isinstance(only.value, cst.Name):
        return None
    return only.value.value


class Wrappers:
    """The partials and aliases of one source's facts, found once."""

    def __init__(self, f: Facts, spelled: Spelled) -> None:
        self.f, self.spelled = f, spelled
        self.made = {id(c.node) for c in f.calls if wrapped(c.node) is not None}
        classes = {s.name.value for s in f.wrapper.module.body if isinstance(s, cst.ClassDef)}
        # `self.f(...)`, `cls.f(...)`, `Helper.f(...)`: calls that may reach a method
        self.methods = {
            id(c.node)
            for c in f.calls
            if isinstance(c.node.func, cst.Attribute)
            and isinstance(c.node.func.value, cst.Name)
            and (c.node.func.value.value in ("self", "cls") or c.node.func.value.value in classes)
        }
        self._tables: dict[tuple[str, int], set[str]] = {}  # _table_functions, kept
        # names some assignment binds to a partial or to another name (`k = rows`)
        self.holders = {
            name
            for assigns in (f.module_assigns, *(fn.assigns for fn in f.functions))
            for name, values in assigns.items()
            if any(
                isinstance(v, cst.Name)
                or (isinstance(v, cst.Call) and id(v) in self.made)
                or applied(v) is not None
                for v in values
            )
        }

    def hidden(self, fn: Function, name: str) -> str | None:
        """Why `fn`'s default for `name` may not be the value it runs with: `fn` is also used as
        a value (`KERNELS = {"gemm": make_gemm}`, `run(make_gemm)`) and a call through that
        value may pass `name`. A dispatch table whose calls pass nothing (`KERNELS[k]()`) keeps
        the default. None when nothing hides a call."""
        if fn.parents:  # an inner factory is reached through its outer one
            return None
        w = writes(self.f.wrapper)
        for table, names in w.tables.items():
            if fn.name in names:
                for call in self.f.calls:
                    func = call.node.func
                    if (
                        isinstance(func, cst.Subscript)
                        and isinstance(func.value, cst.Name)
                        and func.value.value == table
                        and call.node.args
                    ):
                        return (
                            f"'{name}' of {fn.name}() would take its default, but {fn.name} is "
                            f"called through `{table}` at line {self.f.line(call.node)} with "
                            f"arguments tunebot cannot match to its parameters"
                        )
        for scope, reads in w.reads.items():
            read = reads.get(fn.name)
            if read is not None and not self._shadowed(scope, fn.name):
                return (
                    f"'{name}' of {fn.name}() would take its default, but {fn.name} is also "
                    f"passed as a value at line {self.f.line(read)}, and a call through it may "
                    f"pass its own"
                )
        return None

    def _shadowed(self, scope: int, name: str) -> bool:
        """True when the function `scope` (0: the module) or one around it binds `name` itself
        (a nested def, a parameter, an assignment), so a read there is not the module's."""
        fn = next((g for g in self.f.functions if id(g.node) == scope), None)
        for g in fn.chain if fn else ():
            nested = any(
                h.parents and h.parents[-1] is g and h.name == name for h in self.f.functions
            )
            if nested or name in g.assigns or takes(g, name):
                return True
        return False

    def arguments(self, call: Call, fn: Function) -> list[cst.Arg] | None:
        """What `call` passes to `fn` when it goes through a partial or an alias of `fn`."""
        node = call.node
        if id(node) in self.made:
            if wrapped(node) != fn.name:
                return None
            # a partial that is called by name binds through those calls (their keywords
            # win); one never called by name binds its own arguments where it is made
            return None if _called(self.f, node) else list(node.args[1:])
        func = node.func
        if isinstance(func, cst.Attribute):
            return self._method(func, node, fn) if id(node) in self.methods else None
        if (  # `builder(tgt)(CPG, BS)` in a runner some call passes the outer factory
            isinstance(func, cst.Call)
            and isinstance(func.func, cst.Name)
            and fn.parents
            and fn.name in fn.parents[-1].returns
        ):
            passed = self._passed_in(Call(func, call.scope), fn.parents[-1])
            return list(node.args) if passed else None
        if isinstance(func, cst.Name) and fn.name in self._table_functions(func.value, call.scope):
            return list(node.args)  # `_, build = BUILDERS[key]; build(M)`: each build it holds
        if isinstance(func, cst.Name) and func.value not in self.holders:
            return list(node.args) if self._passed_in(call, fn) else None
        if not isinstance(func, cst.Name):
            return None
        made = self.spelled.assigned(func.value, call.scope)
        if isinstance(made, cst.Name) and made.value == fn.name:  # `k = rows`
            return list(node.args)
        if applied(made) == fn.name:  # `k = tilelang.jit(...)(rows)`: a call of rows
            return list(node.args)
        if isinstance(made, cst.Call) and wrapped(made) == fn.name:
            return _merged(list(made.args[1:]), list(node.args))
        return None

    def _table_functions(self, var: str, scope: tuple[Function, ...]) -> set[str]:
        """The functions a name taken from a table of them may hold: `build = BUILDERS[key]` or
        `label, build = VARIANTS[key]` with the table a dict or list the file spells out whose
        entries name functions there (`{"ub": ("UB", rms_fwd), "gm": ("GM", rms_gm_fwd)}`).
        Every factory asks it of every call: kept per name and scope."""
        key = (var, id(scope[-1].node) if scope else 0)
        if key not in self._tables:
            self._tables[key] = self._find_table_functions(var, scope)
        return self._tables[key]

    def _find_table_functions(self, var: str, scope: tuple[Function, ...]) -> set[str]:
        bound: tuple[cst.BaseExpression, cst.BaseExpression] | None = None
        for fn in reversed(scope):
            if var in fn.unpacked:
                bound = fn.unpacked[var]
            elif var in fn.assigns and len(fn.assigns[var]) == 1:
                bound = (cst.Name(var), fn.assigns[var][0])
            if bound is not None or var in fn.assigns or takes(fn, var):
                break
        else:
            if var in self.f.module_unpacked:
                bound = self.f.module_unpacked[var]
            elif len(self.f.module_assigns.get(var, [])) == 1:
                bound = (cst.Name(var), self.f.module_assigns[var][0])
        if bound is None or not isinstance(bound[1], cst.Subscript):
            return set()
        table = self.spelled.node(bound[1].value, scope)
        if isinstance(table, cst.Dict):
            entries = [e.value for e in table.elements if isinstance(e, cst.DictElement)]
        elif isinstance(table, (cst.List, cst.Tuple)):
            entries = [e.value for e in table.elements if isinstance(e, cst.Element)]
        else:
            return set()
        parts = (element(bound[0], e, var) for e in entries)
        return {p.value for p in parts if isinstance(p, cst.Name)}

    def _passed_in(self, call: Call, fn: Function) -> bool:
        """True when `call` calls a parameter of the function around it (`def run(k, M):
        k(M)`) and some call of that function passes `fn` itself for it (`run(gemm, 256)`)."""
        func = call.node.func
        if fn.parents or not call.scope or not isinstance(func, cst.Name):
            return False
        runner, name = call.scope[-1], func.value
        if name not in runner.params or name in runner.assigns:
            return False
        position = runner.params.index(name)
        for other in self.f.calls:
            f = other.node.func
            if not isinstance(f, cst.Name) or f.value != runner.name:
                continue
            if any(f.value in g.assigns or takes(g, f.value) for g in other.scope):
                continue  # a local of the same name, not the runner
            passed = argument(other.node.args, position, name)
            if isinstance(passed, cst.Name) and passed.value == fn.name:
                return True
        return False

    def _method(self, func: cst.Attribute, node: cst.Call, fn: Function) -> list[cst.Arg] | None:
        """`self.f(...)`, `cls.f(...)`, `Helper.f(...)` of a method `f` (a class's functions are
        named like module functions in the facts): the arguments, with the instance or class
        bound to the first parameter where Python binds it."""
        owner = func.value
        if func.attr.value != fn.name or not isinstance(owner, cst.Name):
            return None
        decorators = {dotted(d.decorator) for d in fn.node.decorators}
        if "staticmethod" in decorators:
            return list(node.args)
        implicit = "classmethod" in decorators or owner.value in ("self", "cls")
        if implicit and fn.params and fn.params[0] in ("self", "cls"):
            return [cst.Arg(cst.Name(fn.params[0])), *node.args]
        return list(node.args) if not implicit else None


def argument(args: Sequence[cst.Arg], position: int, name: str) -> cst.BaseExpression | None:
    """What plain arguments `args` pass for the parameter `name` at `position`, or None."""
    plain = 0
    for a in args:
        if a.star:
            return None  # the positions after a `*x` are not known
        if a.keyword is not None:
            if a.keyword.value == name:
                return a.value
        elif plain == position:
            return a.value
        else:
            plain += 1
    return None


def _called(f: Facts, made: cst.Call) -> bool:
    """True when the partial `made` is assigned to a name the file calls."""
    holders = {
        name
        for assigns in (f.module_assigns, *(fn.assigns for fn in f.functions))
        for name, values in assigns.items()
        if any(v is made for v in values)
    }
    return any(isinstance(c.node.func, cst.Name) and c.node.func.value in holders for c in f.calls)


def _merged(first: list[cst.Arg], then: list[cst.Arg]) -> list[cst.Arg]:
    def positional(a: cst.Arg) -> bool:
        return a.keyword is None and a.star != "**"

    return [
        *(a for a in first if positional(a)),
        *(a for a in then if positional(a)),
        *(a for a in then if not positional(a)),
        *(a for a in first if not positional(a)),
    ]
