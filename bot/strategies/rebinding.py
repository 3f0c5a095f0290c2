"""Names whose value changes after a literal sets it, so the literal is not what the kernel reads.

`block_M = 64` followed by `block_M *= 2` (or `+=`, `//=`, ...) leaves 128 in `block_M`; a
factory parameter reassigned under a condition (`if block_M > M: block_M = M`) reads the call's
value on one path and the literal on the other. A None fill (`if block_M is None: block_M = ...`
written directly in the function, without elif/else) is not such a rebinding: it runs only when
None is passed, and a block knob's value is a number, so the kernel reads the value passed;
when the run itself leaves the parameter None (passes None, or omits it with a None default),
the fill runs and its literal is the knob (bot/strategies/binding.py `_filled`, `fill_values`).
Editing either literal as if it were the knob's value would measure something other
than what the change says. `rebound` names the statement that makes the binding unsure, so
bot/strategies/binding.py leaves the name out with that reason. bot/strategies/evaluate.py
folds unconditional augmented assignments into a size's value (`augments`: `M *= 2` after
`M` is passed 1024 reads 2048) and treats any other rebound name's value as unknown.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.facts import Facts, Function
from bot.strategies.signature import takes
from bot.strategies.writes import Binding, writes


def code_of(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def assignments(f: Facts, fn: Function | None, name: str) -> list[Binding]:
    """Every assignment to `name` in `fn`'s own scope (the module's for None), in order."""
    return writes(f.wrapper).bindings.get(id(fn.node) if fn else 0, {}).get(name, [])


def _culprit(f: Facts, fn: Function | None, name: str) -> Binding | None:
    """The assignment that makes `name`'s literal not its value: an augmented one, or for a
    parameter one inside a branch or loop; None when there is none."""
    bindings = assignments(f, fn, name)
    aug = next((b for b in bindings if b.augmented), None)
    if aug is not None or fn is None or not takes(fn, name):
        return aug
    guarded = _none_fills(fn, name)
    return next((b for b in bindings if b.conditional and id(b.node) not in guarded), None)


def fills_only(f: Facts, fn: Function, name: str) -> bool:
    """True when parameter `name` of `fn` is assigned only by None fills (`if name is None:
    name = ...`): its value is the one passed in, or its default, whenever that is a number."""
    bindings = assignments(f, fn, name)
    if not bindings or not takes(fn, name):
        return False
    guarded = _none_fills(fn, name)
    return all(id(b.node) in guarded for b in bindings)


def fill_values(fn: Function, name: str) -> list[tuple[cst.Assign, cst.BaseExpression]]:
    """The None fills of parameter `name` of `fn` (`if name is None: name = 64`), each as its
    assignment and the value it assigns, in source order."""
    out: list[tuple[cst.Assign, cst.BaseExpression]] = []
    for stmt in _fill_statements(fn, name):
        if isinstance(stmt, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in stmt.targets
        ):
            out.append((stmt, stmt.value))
    return out


def _fill_statements(fn: Function, name: str) -> list[cst.BaseSmallStatement]:
    body = fn.node.body
    out: list[cst.BaseSmallStatement] = []
    for stmt in body.body if isinstance(body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.If) and stmt.orelse is None and _is_none_test(stmt.test, name):
            for line in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
                if isinstance(line, cst.SimpleStatementLine):
                    out.extend(line.body)
    return out


def _is_none_test(test: cst.BaseExpression, name: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )


def _none_fills(fn: Function, name: str) -> set[int]:
    """Statements that fill a None placeholder: `if name is None: name = ...` written directly
    in `fn`'s body (no elif/else). They run only when None is passed, and a block knob's value
    is a number, so the value passed (or its literal default) is what the kernel reads."""
    return {id(small) for small in _fill_statements(fn, name)}


def rebound(f: Facts, fn: Function | None, name: str) -> str | None:
    """Why the literal assigned to `name` in `fn` (None: at module level) is not the value the
    code after it reads, or None when nothing rebinds it."""
    b = _culprit(f, fn, name)
    if b is None:
        return None
    at, code = f.line(b.node), code_of(b.node)
    if b.augmented:
        where = f" in {fn.name}()" if fn else ""
        return (
            f"'{name}' is rebound at line {at} by `{code}`{where}: the value the kernel reads "
            f"is not the one a literal sets, so changing that literal would not set it to the "
            f"value tried"
        )
    assert fn is not None
    return (
        f"parameter '{name}' of {fn.name}() is reassigned at line {at} (`{code}`) inside a "
        f"branch or loop: whether the kernel reads the value assigned there or the one passed "
        f"in depends on the path taken"
    )


def unsure(f: Facts, fn: Function | None, name: str) -> bool:
    """True when `name`'s value in `fn` is not simply its one assignment (see `rebound`)."""
    return _culprit(f, fn, name) is not None


def augments(f: Facts, fn: Function | None, name: str) -> list[cst.AugAssign] | None:
    """The augmented assignments that make `name`'s value in `fn` (None: the module), in order,
    when that value is plain to compute: at most one plain assignment (or, in a function, the
    parameter) first, then only augmented ones, none inside a branch or loop (`M = 96;
    M *= 2`, or parameter `M` then `M *= 2`). None when nothing augments it or the order or a
    branch makes the value depend on the path."""
    bindings = assignments(f, fn, name)
    if not any(b.augmented for b in bindings) or any(b.conditional for b in bindings):
        return None
    plain = [i for i, b in enumerate(bindings) if not b.augmented]
    if plain != ([0] if plain else []):
        return None
    out = [b.node for b in bindings if isinstance(b.node, cst.AugAssign)]
    return out if len(out) == len(bindings) - len(plain) else None


def module_rebinders(f: Facts) -> frozenset[str]:
    """Module names some statement rebinds other than by assignment: a loop or `with ... as`
    target, a walrus or an `except ... as` at module level (`for N in (1024, 4096):` in the
    `__main__` block), or a `global` declaration in a function. Their module assignment is not
    the value every read sees. Kept on the parse."""
    return f.kept(("rebinding.module_rebinders",), lambda: _module_rebinders(f.wrapper.module))


def local_rebinders(f: Facts, fn: Function) -> frozenset[str]:
    """Names `fn`'s own body rebinds other than by assignment: a loop or `with ... as`
    target, a walrus or an `except ... as` (`for dtype in ("float16", "float32"):` over a
    parameter). A parameter or assignment of the same name is not the value every read
    sees. Kept on the parse."""
    return f.kept(
        ("rebinding.local_rebinders", id(fn.node)), lambda: _module_rebinders(fn.node.body, False)
    )


def _module_rebinders(module: cst.CSTNode, globals_too: bool = True) -> frozenset[str]:
    out: set[str] = set()

    def targets(node: cst.CSTNode | None) -> None:
        if isinstance(node, cst.Name):
            out.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for el in node.elements:
                targets(el.value)
        elif isinstance(node, cst.StarredElement):
            targets(node.value)

    def bound_by(node: cst.CSTNode) -> cst.CSTNode | None:
        """The target a loop, `with ... as`, walrus or `except ... as` binds."""
        if isinstance(node, (cst.For, cst.NamedExpr)):
            return node.target
        if isinstance(node, cst.WithItem) and node.asname is not None:
            return node.asname.name
        if isinstance(node, cst.ExceptHandler) and node.name is not None:
            return node.name.name
        return None

    scopes = (cst.FunctionDef, cst.ClassDef)

    class V(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0  # inside a def or a class: another scope's names

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, scopes):
                self.depth += 1
            elif isinstance(node, cst.Global):
                if globals_too:
                    out.update(n.name.value for n in node.names)
            elif not self.depth:
                targets(bound_by(node))
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if isinstance(original_node, scopes):
                self.depth -= 1

    module.visit(V())
    return frozenset(out)
