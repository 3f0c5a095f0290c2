"""Every write a source does, gathered in one pass: names bound and containers changed.

bot/strategies/rebinding.py reads the first (a name augmented after its literal, a parameter
reassigned in a branch); bot/strategies/containers.py the second (a configuration dict or list
changed after it is written: `cfg["block_M"] = 32`, `del cfg["M"]`, `cfg.update(...)`). Nodes are
kept, not text: the lines and code are rendered only for the few a reason names. Names bound
some other way (a lambda's parameter, a comprehension, `with ... as`, an import) are kept too,
so a name no assignment binds is named for what binds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

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
# statements whose body runs on some paths only (or several times)
_BRANCHES = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.With, cst.Match)


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


class _Scan(cst.CSTVisitor):
    def __init__(self) -> None:
        self.out = Writes({0: {}})
        self.stack: list[tuple[int, int]] = [(0, 0)]  # (scope id, branch depth)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.out.bindings[id(node)] = {}
        self.stack.append((id(node), 0))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _BRANCHES):
            scope, depth = self.stack[-1]
            self.stack[-1] = (scope, depth + 1)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, _BRANCHES):
            scope, depth = self.stack[-1]
            self.stack[-1] = (scope, depth - 1)
        super().on_leave(original_node)

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

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        bound = node.asname.name if node.asname else node.name
        if isinstance(bound, cst.Name):
            self.out.other.setdefault(bound.value, node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
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
