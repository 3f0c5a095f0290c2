"""Calls and kernel factories that the run path's own branches never reach.

A host entry often dispatches on the problem it is given: `if kh == 1 and kw == 1: return
_conv2d_1x1(...)` before the general path, with `kh` read from a tensor the file's
`__main__` builds with `torch.rand(Cout, C, 3, 3)`. The file's own run then never calls the
1x1 path, and a literal only that path passes to a kernel factory changes nothing measured.

A call is off the run path when it sits on a side of an `if` the run never takes, or after
an `if` without `else` whose body always leaves the function (`return` / `raise`) and whose
test holds on the run, both decided by `branches.run_path_taken` (the sizes the file runs
with, through call sites, tensor shapes, argparse defaults and constants). A test that is
not one value on the run decides nothing: the call stays live.

`live` walks the calls the file runs as `callsites.reached` does, skipping those off the run
path and what only they call; `dispatched` names the factories the run reaches by name only
through such calls, with the branch that takes it elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from bot.strategies.branches import run_path_taken
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Call, Facts, Function
from bot.strategies.source import name_reads

if TYPE_CHECKING:
    from bot.strategies.binding import Resolver

# (the `if`, the side a statement runs on: True for the body, False for `else` or after an
# early exit the body takes)
Guard = tuple[cst.If, bool]


def _exits(body: cst.BaseSuite) -> bool:
    """Whether a suite always leaves the function: its last statement is `return` / `raise`."""
    if isinstance(body, cst.SimpleStatementSuite):
        last_small = body.body[-1] if body.body else None
        return isinstance(last_small, (cst.Return, cst.Raise))
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    return (
        isinstance(last, cst.SimpleStatementLine)
        and bool(last.body)
        and isinstance(last.body[-1], (cst.Return, cst.Raise))
    )


def _guards(root: cst.CSTNode) -> dict[int, tuple[Guard, ...]]:
    """id of every call in `root`'s own scope (nested functions and classes are theirs) ->
    the `if` sides it runs under, outermost first."""
    out: dict[int, tuple[Guard, ...]] = {}

    def block(stmts: Sequence[cst.CSTNode], guards: tuple[Guard, ...]) -> None:
        here = guards
        for stmt in stmts:
            node(stmt, here)
            if isinstance(stmt, cst.If) and stmt.orelse is None and _exits(stmt.body):
                here = (*here, (stmt, False))  # what follows runs only when the test fails

    def node(n: cst.CSTNode, guards: tuple[Guard, ...]) -> None:
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n is not root:
            return
        if isinstance(n, cst.If):
            node(n.test, guards)
            node(n.body, (*guards, (n, True)))
            if n.orelse is not None:
                node(n.orelse, (*guards, (n, False)))
            return
        if isinstance(n, cst.Call):
            out[id(n)] = guards
        if isinstance(n, (cst.IndentedBlock, cst.Module)):
            block(n.body, guards)
            return
        for child in n.children:
            node(child, guards)

    node(root.body if isinstance(root, cst.FunctionDef) else root, ())
    return out


def guards_of(f: Facts, call: Call) -> tuple[Guard, ...]:
    """The `if` sides `call` runs under in its function (or the module), outermost first."""
    root = call.scope[-1].node if call.scope else f.wrapper.module
    table = f.kept(("dispatch.guards", id(root)), lambda: _guards(root))
    return table.get(id(call.node), ())


def off_path(resolver: Resolver, call: Call) -> Guard | None:
    """The `if` side `call` needs that the file's run path never takes, or None."""
    for branch, side in guards_of(resolver.f, call):
        if run_path_taken(resolver, call.scope, branch.test) is (not side):
            return branch, side
    return None


def live(resolver: Resolver) -> set[int] | None:
    """ids of the call nodes the file runs, as `callsites.reached`, less those off the run
    path and whatever only they reach. None when nothing runs at module level."""
    f = resolver.f
    key = ("dispatch.live", tuple(resolver.harness))
    return f.kept(key, lambda: _live(resolver))


def _live(resolver: Resolver) -> set[int] | None:
    from bot.strategies import callsites

    return callsites.walk(
        resolver.f, resolver.harness, lambda call: off_path(resolver, call) is not None
    )


def dispatched(f: Facts, harness: tuple[str, ...]) -> dict[int, str]:
    """id of each kernel factory (outermost function of its chain) the file reads only as the
    callee of calls, that its run reaches by name but only through calls off the run path ->
    the sentence saying which branch takes the run elsewhere."""
    return f.kept(("dispatch.dispatched", tuple(harness)), lambda: _dispatched(f, harness))


def _dispatched(f: Facts, harness: tuple[str, ...]) -> dict[int, str]:
    from bot.strategies import callsites
    from bot.strategies.binding import Resolver

    coarse = callsites.reached(f, harness)
    if coarse is None or not f.factories:
        return {}
    resolver = Resolver(f, harness)
    runs = live(resolver)
    if runs is None:
        return {}
    by_name = callsites.top_level(f)
    callers: dict[int, list[Call]] = {}  # id(function) -> the calls naming it
    for c in f.calls:
        if isinstance(c.node.func, cst.Name):
            for fn in by_name.get(c.node.func.value, []):
                callers.setdefault(id(fn), []).append(c)
    out: dict[int, str] = {}
    for fac in f.factories:
        outer = fac.chain[0]
        if outer.parents or outer.name in harness or id(fac) in out:
            continue
        calls = callers.get(id(outer), [])
        if not calls or _reads(f, outer.name) != len(calls):
            continue  # passed on, returned or stored somewhere: it may be built elsewhere
        if not any(id(c.node) in coarse for c in calls) or any(id(c.node) in runs for c in calls):
            continue
        cut = _cut(f, resolver, outer, callers, coarse)
        if cut:
            out[id(fac)] = _sentence(f, outer, cut)
    return out


def _reads(f: Facts, name: str) -> int:
    """How many times the module reads `name` (a def's own name excluded)."""
    return f.kept(("source.name_reads",), lambda: name_reads(f.wrapper.module)).get(name, 0)


def _cut(
    f: Facts,
    resolver: Resolver,
    target: Function,
    callers: dict[int, list[Call]],
    coarse: set[int],
) -> list[tuple[Call, Guard]]:
    """The reached calls off the run path through which the run would reach `target`, each
    with the branch side it needs; empty when any way to `target` is not explained so, or when
    a function whose parameters decide a branch may be called otherwise (`_plain`)."""
    out: list[tuple[Call, Guard]] = []
    todo, seen = [target], {id(target)}
    deciding: list[Function] = []  # functions whose own branches were decided
    while todo:
        fn = todo.pop()
        calls = _plain(f, resolver, fn, callers, coarse, fn is target)
        if calls is None:
            return []
        for c in calls:
            guard = off_path(resolver, c)
            if guard is not None:
                out.append((c, guard))
                if c.scope:
                    deciding.append(c.scope[0])
            elif not c.scope:
                return []  # a module-level call on the run path: not dispatched away
            elif id(c.scope[0]) not in seen:
                seen.add(id(c.scope[0]))
                todo.append(c.scope[0])
    # a branch decided with a function's parameters holds only if every way to call that
    # function is one of the plain calls its values were read from, all the way up
    checked: set[int] = set()
    while deciding:
        fn = deciding.pop()
        if id(fn) in checked:
            continue
        checked.add(id(fn))
        calls = _plain(f, resolver, fn, callers, coarse, False)
        if calls is None:
            return []
        deciding.extend(c.scope[0] for c in calls if c.scope)
    return out


def _plain(
    f: Facts,
    resolver: Resolver,
    fn: Function,
    callers: dict[int, list[Call]],
    coarse: set[int],
    decorated_ok: bool,
) -> list[Call] | None:
    """The calls of `fn` when every way the run can reach it is one of them, else None: a
    method or nested function, a harness entry (a harness calls it with its own arguments,
    not `__main__`'s), a decorated host function (the decorator may call it), a name read
    other than as the callee of a plain call (passed on as a callback, stored, partially
    applied), or a call from code the run does not reach by plain calls (a pytest function, a
    method) or from a nested function."""
    top = {id(stmt) for stmt in f.wrapper.module.body}
    calls = callers.get(id(fn), [])
    if (
        fn.parents
        or id(fn.node) not in top
        or fn.name in resolver.harness
        or not calls
        or _reads(f, fn.name) != len(calls)
        or (fn.node.decorators and not decorated_ok)
    ):
        return None
    if any(id(c.node) not in coarse or len(c.scope) > 1 for c in calls):
        return None
    return calls


def _sentence(f: Facts, target: Function, cut: list[tuple[Call, Guard]]) -> str:
    parts = []
    for c, (branch, side) in sorted(cut, key=lambda x: f.line(x[0].node))[:3]:
        where = f"{c.scope[-1].name}()" if c.scope else "the module"
        head = f"{where} calls {code_of(c.node.func)}() at line {f.line(c.node)}"
        test = f"`{code_of(branch.test)}` (line {f.line(branch)})"
        if side:
            parts.append(f"{head} only when {test} holds, and it is False on the file's run")
        elif _inside(branch, c.node):
            parts.append(f"{head} only when {test} fails, and it is True on the file's run")
        else:
            parts.append(
                f"{head} only past {test}, whose branch returns or raises, and the test is True "
                f"on the file's run"
            )
    return (
        f"{target.name}() is built only through calls its run path never makes: "
        + "; ".join(parts)
        + ": tuning it cannot change anything measured"
    )


def _inside(branch: cst.If, node: cst.CSTNode) -> bool:
    """Whether `node` lies in `branch` (its `else` included)."""
    found = False

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            nonlocal found
            if n is node:
                found = True
            return not found

    branch.visit(V())
    return found
