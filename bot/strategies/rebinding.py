"""Names whose value changes after a literal sets it, so the literal is not what the kernel reads.

`block_M = 64` followed by `block_M *= 2` (or `+=`, `//=`, ...) leaves 128 in `block_M`; a
factory parameter reassigned under a condition (`if block_M > M: block_M = M`,
`if block_M is None: block_M = 64`) reads the call's value on one path and the literal on the
other. Editing either literal as if it were the knob's value would measure something other
than what the change says. `rebound` names the statement that makes the binding unsure, so
bot/strategies/binding.py leaves the name out with that reason; bot/strategies/evaluate.py
treats such a name's value as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies.facts import Facts, Function
from bot.strategies.signature import takes
from bot.strategies.source import line_of

# statements whose body runs on some paths only (or several times)
_BRANCHES = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.With, cst.Match)


@dataclass(frozen=True)
class Binding:
    line: int
    code: str  # the statement, on one line
    augmented: bool  # `x *= 2`: changes the value it had
    conditional: bool  # inside an if/for/while/try/with/match of its scope
    node: cst.CSTNode = field(compare=False)


@dataclass
class _Scope:
    bindings: dict[str, list[Binding]] = field(default_factory=dict)


class _Scan(cst.CSTVisitor):
    """Every plain or augmented assignment to a name, per function (0: the module)."""

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.scopes: dict[int, _Scope] = {0: _Scope()}
        self.stack: list[tuple[int, int]] = [(0, 0)]  # (scope id, branch depth)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes[id(node)] = _Scope()
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

    def _add(self, name: str, stmt: cst.CSTNode, augmented: bool) -> None:
        scope, depth = self.stack[-1]
        b = Binding(line_of(self.wrapper, stmt), code_of(stmt), augmented, depth > 0, stmt)
        self.scopes[scope].bindings.setdefault(name, []).append(b)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            for name in _target_names(t.target):
                self._add(name, node, False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self._add(node.target.value, node, False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._add(node.target.value, node, True)


def code_of(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


@lru_cache(maxsize=256)
def _scan(wrapper: MetadataWrapper) -> dict[int, _Scope]:
    v = _Scan(wrapper)
    wrapper.module.visit(v)
    return v.scopes


def rebound(f: Facts, fn: Function | None, name: str) -> str | None:
    """Why the literal assigned to `name` in `fn` (None: at module level) is not the value the
    code after it reads, or None when nothing rebinds it."""
    scope = _scan(f.wrapper).get(id(fn.node) if fn else 0)
    bindings = scope.bindings.get(name, []) if scope else []
    where = f" in {fn.name}()" if fn else ""
    aug = next((b for b in bindings if b.augmented), None)
    if aug is not None:
        return (
            f"'{name}' is rebound at line {aug.line} by `{aug.code}`{where}: the value the "
            f"kernel reads is not the one a literal sets, so changing that literal would not "
            f"set it to the value tried"
        )
    if fn is not None and takes(fn, name):
        branch = next((b for b in bindings if b.conditional), None)
        if branch is not None:
            return (
                f"parameter '{name}' of {fn.name}() is reassigned at line {branch.line} "
                f"(`{branch.code}`) inside a branch or loop: whether the kernel reads that "
                f"literal or the value passed in depends on the path taken"
            )
    return None


def unsure(f: Facts, fn: Function | None, name: str) -> bool:
    """True when `name`'s value in `fn` is not simply its one assignment (see `rebound`)."""
    return rebound(f, fn, name) is not None


def augments(f: Facts, fn: Function | None, name: str) -> list[cst.AugAssign] | None:
    """The augmented assignments that make `name`'s value in `fn` (None: the module), in order,
    when that value is plain to compute: at most one plain assignment (or, in a function, the
    parameter) first, then only augmented ones, none inside a branch or loop (`M = 96;
    M *= 2`, or parameter `M` then `M *= 2`). None when nothing augments it or the order or a
    branch makes the value depend on the path."""
    scope = _scan(f.wrapper).get(id(fn.node) if fn else 0)
    bindings = scope.bindings.get(name, []) if scope else []
    if not any(b.augmented for b in bindings) or any(b.conditional for b in bindings):
        return None
    plain = [i for i, b in enumerate(bindings) if not b.augmented]
    if plain != ([0] if plain else []):
        return None
    out = [b.node for b in bindings if isinstance(b.node, cst.AugAssign)]
    return out if len(out) == len(bindings) - len(plain) else None
