"""Every write a source does, gathered in one pass: names bound and containers changed.

bot/strategies/rebinding.py reads the first (a name augmented after its literal, a parameter
reassigned in a branch); bot/strategies/containers.py the second (a configuration dict or list
changed after it is written: `cfg["block_M"] = 32`, `del cfg["M"]`, `cfg.update(...)`). Nodes are
kept, not text: the lines and code are rendered only for the few a reason names. Names bound
some other way (a lambda's parameter, a comprehension, `with ... as`, an import) are kept too,
so a name no assignment binds is named for what binds it; and where a name is read as a value
(not called, defined, aliased or made a partial) or held in a dispatch table, so
bot/strategies/wrappers.py knows a factory that calls it cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies.source import dotted

# methods that change a list or dict after it is written
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "sort",
        "reverse",
        "update",
        "setdefault",
        "popitem",
    }
)


@dataclass(frozen=True)
class Binding:
    """One assignment to a name."""

    node: cst.CSTNode  # the statement
    augmented: bool  # `x *= 2`: changes the value it had
    conditional: bool  # inside an if/for/while/try/with/match of its scope


@dataclass
class Writes:
    # id of the FunctionDef (0: the module) -> name -> its assignments in source order
    bindings: dict[int, dict[str, list[Binding]]] = field(default_factory=dict)
    # id of the FunctionDef (0: the module) -> container name -> the first statement (or call)
    # there that changes it
    changed: dict[int, dict[str, cst.CSTNode]] = field(default_factory=dict)
    # name -> the first node that binds it some other way (a lambda's or comprehension's
    # variable, `with ... as`, `except ... as`, an import, `:=`), anywhere in the file
    other: dict[str, cst.CSTNode] = field(default_factory=dict)
    # id of the FunctionDef (0: the module) -> name -> its first read there that is not a call
    # of it, a definition, an attribute, a keyword, an alias or a partial (a value passed on)
    reads: dict[int, dict[str, cst.Name]] = field(default_factory=dict)
    # a name assigned a dict/list/tuple/set literal -> the names it holds (a dispatch table)
    tables: dict[str, set[str]] = field(default_factory=dict)


class _Scan(cst.CSTVisitor):
    def __init__(self) -> None:
        self.out = Writes({0: {}})
        self.stack: list[tuple[int, int]] = [(0, 0)]  # (scope id, branch depth)
        self.skip: set[int] = set()  # Name nodes that are not reads of a value

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.skip.add(id(node.name))
        self.out.bindings[id(node)] = {}
        self.stack.append((id(node), 0))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def _enter(self, node: cst.CSTNode) -> None:
        scope, depth = self.stack[-1]
        self.stack[-1] = (scope, depth + 1)

    def _leave(self, original_node: cst.CSTNode) -> None:
        scope, depth = self.stack[-1]
        self.stack[-1] = (scope, depth - 1)

    # statements whose body runs on some paths only (or several times)
    visit_If = visit_For = visit_While = visit_Try = visit_TryStar = _enter
    visit_With = visit_Match = _enter
    leave_If = leave_For = leave_While = leave_Try = leave_TryStar = _leave
    leave_With = leave_Match = _leave

    def _bind(self, name: str, stmt: cst.CSTNode, augmented: bool) -> None:
        scope, depth = self.stack[-1]
        b = Binding(stmt, augmented, depth > 0)
        self.out.bindings[scope].setdefault(name, []).append(b)

    def _changed(self, name: str, node: cst.CSTNode) -> None:
        self.out.changed.setdefault(self.stack[-1][0], {}).setdefault(name, node)

    def _change(self, target: cst.BaseExpression, stmt: cst.CSTNode) -> None:
        while isinstance(target, cst.Subscript):
            target = target.value
            if isinstance(target, cst.Name):
                self._changed(target.value, stmt)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            for name in _target_names(t.target):
                self._bind(name, node, False)
            self._change(t.target, node)
        value = node.value
        if isinstance(value, cst.Name):  # `k = rows`: an alias (bot/strategies/wrappers.py)
            self.skip.add(id(value))
        elif isinstance(value, (cst.Dict, cst.List, cst.Tuple, cst.Set)):
            parts = (
                [e.value for e in value.elements if isinstance(e, cst.DictElement)]
                if isinstance(value, cst.Dict)
                else [e.value for e in value.elements]
            )
            held = {p.value for p in parts if isinstance(p, cst.Name)}
            for p in parts:
                if isinstance(p, cst.Name):
                    self.skip.add(id(p))
            for t in node.targets:
                if isinstance(t.target, cst.Name) and held:
                    self.out.tables.setdefault(t.target.value, set()).update(held)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self._bind(node.target.value, node, False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, node, True)
        self._change(node.target, node)

    def visit_Del(self, node: cst.Del) -> None:
        self._change(node.target, node)

    def _bound_other(self, target: cst.BaseExpression | None, node: cst.CSTNode) -> None:
        for name in _target_names(target) if target is not None else []:
            self.out.other.setdefault(name, node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        p = node.params
        for x in (*p.posonly_params, *p.params, *p.kwonly_params):
            self.out.other.setdefault(x.name.value, node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bound_other(node.target, node)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        self._bound_other(node.asname.name if node.asname else None, node)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._bound_other(node.name.name if node.name else None, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bound_other(node.target, node)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        bound = node.asname.name if node.asname else node.name
        if isinstance(bound, cst.Name):
            self.out.other.setdefault(bound.value, node)
        return False

    # names that are not reads of a variable: `x.rows`, `f(rows=1)`, `def f(rows)`
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.skip:
            self.out.reads.setdefault(self.stack[-1][0], {}).setdefault(node.value, node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        self.skip.add(id(func))
        if dotted(func) in ("partial", "functools.partial") and node.args:
            self.skip.add(id(node.args[0].value))  # made a partial (bot/strategies/wrappers.py)
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.attr.value in MUTATORS
        ):
            self._changed(func.value.value, node)


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


@lru_cache(maxsize=256)
def writes(wrapper: MetadataWrapper) -> Writes:
    """The writes of the module a wrapper holds (cached; callers must not mutate)."""
    scan = _Scan()
    wrapper.module.visit(scan)
    return scan.out
