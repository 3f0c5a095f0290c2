"""Calls that reach a kernel factory through another callable: a partial, an alias, a method.

`k = partial(rows, block_M=64)` binds `block_M` where the partial is made; `k(1024)` then
binds the rest, after the partial's own positional arguments; `k = rows` makes `k(1024, 64)` a
call of `rows`; `self.rows(...)` / `Helper.rows(...)` call a factory written as a method (a
`@staticmethod`, or with `self`/`cls` bound first). `arguments` gives the arguments a call
passes to a factory, in the order Python binds them (positional first, then keywords, the
call's own keywords before the partial's so they win), or None when the call does not reach
that factory this way."""

from __future__ import annotations

import libcst as cst

from bot.strategies.containers import Spelled
from bot.strategies.facts import Call, Facts, Function
from bot.strategies.signature import parameter_names
from bot.strategies.source import dotted

PARTIAL = frozenset({"partial", "functools.partial"})


def wrapped(node: cst.Call) -> str | None:
    """The function name `partial(rows, ...)` wraps, or None for any other call."""
    if dotted(node.func) not in PARTIAL or not node.args:
        return None
    first = node.args[0]
    if first.keyword is not None or first.star or not isinstance(first.value, cst.Name):
        return None
    return first.value.value


class Wrappers:
    """The partials and aliases of one source's facts, found once."""

    def __init__(self, f: Facts, spelled: Spelled) -> None:
        self.f, self.spelled = f, spelled
        self.made = {id(c.node) for c in f.calls if wrapped(c.node) is not None}
        self.classes = {s.name.value for s in f.wrapper.module.body if isinstance(s, cst.ClassDef)}
        # names some assignment binds to a partial or to another name (`k = rows`)
        self.holders = {
            name
            for assigns in (f.module_assigns, *(fn.assigns for fn in f.functions))
            for name, values in assigns.items()
            if any(
                isinstance(v, cst.Name) or (isinstance(v, cst.Call) and id(v) in self.made)
                for v in values
            )
        }

        self._uses: _Uses | None = None

    def hidden(self, fn: Function, name: str) -> str | None:
        """Why `fn`'s default for `name` may not be the value it runs with: `fn` is also used as
        a value (`KERNELS = {"gemm": make_gemm}`, `run(make_gemm)`) and a call through that
        value may pass `name`. A dispatch table whose calls pass nothing (`KERNELS[k]()`) keeps
        the default. None when nothing hides a call."""
        if fn.parents:  # an inner factory is reached through its outer one
            return None
        if self._uses is None:
            self._uses = _Uses(self.f)
            self.f.wrapper.module.visit(self._uses)
        uses = self._uses
        for table, names in uses.tables.items():
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
        other = uses.values.get(fn.name)
        if other is None:
            return None
        return (
            f"'{name}' of {fn.name}() would take its default, but {fn.name} is also passed as a "
            f"value at line {self.f.line(other)}, and a call through it may pass its own"
        )

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
            return self._method(func, node, fn)
        if not isinstance(func, cst.Name) or func.value not in self.holders:
            return None
        made = self.spelled.assigned(func.value, call.scope)
        if isinstance(made, cst.Name) and made.value == fn.name:  # `k = rows`
            return list(node.args)
        if isinstance(made, cst.Call) and wrapped(made) == fn.name:
            return _merged(list(made.args[1:]), list(node.args))
        return None

    def _method(self, func: cst.Attribute, node: cst.Call, fn: Function) -> list[cst.Arg] | None:
        """`self.f(...)`, `cls.f(...)`, `Helper.f(...)` of a method `f` (a class's functions are
        named like module functions in the facts): the arguments, with the instance or class
        bound to the first parameter where Python binds it."""
        owner = func.value
        if func.attr.value != fn.name or not isinstance(owner, cst.Name):
            return None
        if owner.value not in ("self", "cls") and owner.value not in self.classes:
            return None
        decorators = {dotted(d.decorator) for d in fn.node.decorators}
        if "staticmethod" in decorators:
            return list(node.args)
        implicit = "classmethod" in decorators or owner.value in ("self", "cls")
        if implicit and fn.params and fn.params[0] in ("self", "cls"):
            return [cst.Arg(cst.Name(fn.params[0])), *node.args]
        return list(node.args) if not implicit else None


class _Uses(cst.CSTVisitor):
    """Where function names are used other than called, made a partial, aliased or defined:
    `tables` (a name assigned a dict/list/tuple literal -> the functions it holds) and
    `values` (a function name -> the first other place it is read)."""

    def __init__(self, f: Facts) -> None:
        self.functions = {g.name for g in f.functions if not g.parents}
        # names each function binds itself (a nested def, a parameter, an assignment): a read of
        # one of them inside it is not the module's function of that name
        self.local: dict[int, set[str]] = {
            id(g.node): {*g.assigns, *parameter_names(g.node)} for g in f.functions
        }
        for g in f.functions:
            if g.parents:
                self.local[id(g.parents[-1].node)].add(g.name)
        self.stack: list[set[str]] = []
        self.skip: set[int] = set()
        self.tables: dict[str, set[str]] = {}
        self.values: dict[str, cst.Name] = {}

    def visit_Call(self, node: cst.Call) -> None:
        self.skip.add(id(node.func))
        if wrapped(node) is not None:
            self.skip.add(id(node.args[0].value))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.skip.add(id(node.name))
        self.stack.append(self.local.get(id(node), set()))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    # names that are not reads of a variable: `x.rows`, `f(rows=1)`, `def f(rows)`, imports
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
        if isinstance(value, cst.Name):  # `k = rows`: an alias, followed as a call of rows
            self.skip.add(id(value))
        elif isinstance(value, (cst.Dict, cst.List, cst.Tuple, cst.Set)) and names:
            parts = (
                [e.value for e in value.elements if isinstance(e, cst.DictElement)]
                if isinstance(value, cst.Dict)
                else [e.value for e in value.elements]
            )
            for part in parts:
                if isinstance(part, cst.Name) and part.value in self.functions:
                    self.skip.add(id(part))
                    for table in names:
                        self.tables.setdefault(table, set()).add(part.value)

    def visit_Name(self, node: cst.Name) -> None:
        if (
            node.value in self.functions
            and id(node) not in self.skip
            and not any(node.value in local for local in self.stack)
        ):
            self.values.setdefault(node.value, node)


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
