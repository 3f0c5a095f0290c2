"""Where a kernel knob really gets its value, and what the kernel demands of it.

A TileLang kernel is built by a factory (a function holding a `@T.prim_func`,
possibly nested in another factory). A knob is a name the factory reads: a
parameter or a local. Its value comes from, in scope order:

- a literal local assignment in the factory (`block_M = 32`);
- for a parameter: the call sites of the factory (`matmul(1024, 128)`,
  `f(block_M=BM)`, `f(**config)`, `f(block_I=args.block_i)`), followed through
  names (local, parameter of the caller, module constant), `args.<dest>` to the
  argparse default and `**name` to a dict literal; with no call site binding
  it, the parameter's default (call sites binding different literals:
  bot/strategies/callsites.py);
- a module constant;
- a name a `for` loop binds from a one-entry list the file spells out
  (`for B, L, block_L in [(2, 512, 64)]`): that entry's element.
- an entry of a configuration the file spells out (`cfg["block_M"]`, `SIZES[1]`,
  `dict(block_M=64)`: bot/strategies/containers.py).

Calls through `functools.partial`, an alias, an outer factory's closure or a method count as
calls of the factory (bot/strategies/wrappers.py); a name rebound after its literal
(`block_M *= 2`) has no single literal (bot/strategies/rebinding.py).

The binding is scope-correct: a same-named variable in an unrelated function
is never taken for the knob. The facts gathered on the way (the values of the
factory's other names, its asserts, the `X // knob`, `T.ceildiv(X, knob)` and
`T.min(knob, ...)` uses) give the constraints a new value must meet
(bot/strategies/constraints.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst

from bot.config.schema import DEFAULT_HARNESS
from bot.strategies import callsites, defaulted, rebinding, tensorshapes, wrappers
from bot.strategies.containers import Spelled, dict_items, element
from bot.strategies.evaluate import MAX_DEPTH, Env, code_of, evaluate
from bot.strategies.facts import Call, Facts, Function, Loop, Site, literal, names_in, reads_of
from bot.strategies.signature import star_names, takes
from bot.strategies.source import dotted, min_operands
from bot.strategies.tiling import ceildiv_args


@dataclass(frozen=True)
class Resolution:
    site: Site | None  # the literal to edit; None when the value is computed
    value: object  # the effective value when known (int/bool), else None
    path: tuple[str, ...] = ()  # how it was reached, for messages
    problem: str | None = None  # why there is no single literal (ambiguous, computed, unbound)
    shared: callsites.Shared | None = None  # a module constant several (not all) calls share
    subject: str | None = None  # the parameter whose calls bind it differently (ambiguous)
    none: bool = False  # the value is the literal None (a parameter left to its None fill)


def _arm_values(node: cst.BaseExpression) -> set[str]:
    """The names an arm's value reads: a nested conditional's own test picks, it is no value."""
    if isinstance(node, cst.IfExp):
        return _arm_values(node.body) | _arm_values(node.orelse)
    return names_in(node)


def _divisors(node: cst.CSTNode) -> set[int]:
    """The integer literals `node` divides or groups by (`heads // 64`, `n % 16`,
    `T.ceildiv(n, 64)`): a size computed in groups of that literal."""
    found: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> None:
            if isinstance(n.operator, (cst.FloorDivide, cst.Divide, cst.Modulo)):
                v = literal(n.right)
                if isinstance(v, int):
                    found.add(v)

        def visit_Call(self, n: cst.Call) -> None:
            pair = ceildiv_args(n)
            v = literal(pair[1]) if pair is not None else None
            if isinstance(v, int):
                found.add(v)

    node.visit(V())
    return found


def _unresolved(problem: str, path: tuple[str, ...] = ()) -> Resolution:
    return Resolution(None, None, path, problem)


class Resolver:
    """Scope-aware resolution of names to literal sites over one source's facts."""

    MAX_DEPTH = MAX_DEPTH

    def __init__(self, f: Facts, harness: tuple[str, ...] = DEFAULT_HARNESS) -> None:
        self.f = f
        self.harness = harness  # the functions a harness calls by name (callsites.reached)
        self.spelled = Spelled(f)
        self.spelled.passed = self._passed
        self._following: set[tuple[int, str]] = set()  # parameters being followed (_passed)
        self.wrappers = wrappers.Wrappers(f, self.spelled)
        # sizes the file runs the op with, for names it leaves open (bot/strategies/shapes.py);
        # set by a check while it evaluates, never used to find a knob's literal
        self.fallback: dict[str, int] = {}
        # id of the literal in `name = min(LIT, extent)` -> (extent's value, its text): a value
        # past the extent runs as the extent (a no-op), so a move there is refused
        self.min_caps: dict[int, tuple[int, str]] = {}
        # a branch test is being decided per call path (branches.run_path_taken): not re-entered
        self.deciding_per_path = False
        self.by_name: dict[str, list[Function]] = {}
        for fn in f.functions:
            self.by_name.setdefault(fn.name, []).append(fn)

    # a name read inside `chain` (outermost first)
    def name(self, name: str, chain: tuple[Function, ...], depth: int = 0) -> Resolution:
        if depth > self.MAX_DEPTH:
            return _unresolved(f"'{name}' is bound through too many names")
        for fn in reversed(chain):
            if name in fn.assigns and not rebinding.fills_only(self.f, fn, name):
                why = rebinding.rebound(self.f, fn, name)
                if why is not None:
                    return _unresolved(why)
                values = fn.assigns[name]
                if len(values) > 1:
                    return _unresolved(f"'{name}' is assigned {len(values)} times in {fn.name}()")
                if name in fn.unpacked:
                    return self._unpacked(name, fn.unpacked[name], fn.chain, depth, "local")
                if name in reads_of(values[0]):  # `M = M - 24`: from the binding before it
                    return _unresolved(
                        f"'{name}' is reassigned from its own earlier value in {fn.name}() "
                        f"(line {self.f.line(values[0])})"
                    )
                return self.expr(values[0], fn.chain, depth + 1, name, "local")
            if takes(fn, name):
                return self.param(fn, name, depth + 1)
            if name in fn.loop_targets:
                loops = fn.loops_of.get(name, [])
                if len(loops) > 1:  # which one is meant depends on where it is read
                    lines = ", ".join(str(loop.line) for loop in loops)
                    return _unresolved(
                        f"'{name}' is bound by {len(loops)} for loops in {fn.name}() "
                        f"(lines {lines})"
                    )
                return self._loop(name, fn.loop_targets[name], fn.chain, depth)
        module_values = self.f.module_assigns.get(name)
        if module_values:
            why = rebinding.rebound(self.f, None, name)
            if why is not None:
                return _unresolved(why)
            if name in rebinding.module_rebinders(self.f):
                return _unresolved(
                    f"module name '{name}' is also rebound by a loop, `with ... as`, a walrus or "
                    f"a `global` statement: its assignment is not the value every read sees"
                )
            values = module_values
            if len(values) > 1:
                problem = f"module name '{name}' is assigned {len(values)} times"
                if len({code_of(v) for v in values}) == 1:  # the same assignment repeated
                    r = self.expr(values[0], (), depth + 1, name, "constant")
                    return Resolution(None, r.value, r.path, problem)  # a value, no single site
                return _unresolved(problem)
            if name in self.f.module_unpacked:
                return self._unpacked(name, self.f.module_unpacked[name], (), depth, "constant")
            return self.expr(values[0], (), depth + 1, name, "constant")
        if name in self.f.module_loops:
            return self._loop(name, self.f.module_loops[name], (), depth)
        return _unresolved(self.spelled.unbound(name))

    def _unpacked(
        self,
        name: str,
        unpack: tuple[cst.BaseExpression, cst.BaseExpression],
        chain: tuple[Function, ...],
        depth: int,
        kind: str,
    ) -> Resolution:
        """`M, N, block_M = cfg` with cfg a tuple the file spells out (one assignment, or the one
        entry of a configuration list): the part of it `name` takes."""
        target, value = unpack
        spelled = self.spelled.scoped(value, chain)
        part = element(target, spelled[0], name) if spelled is not None else None
        if part is None:
            size = tensorshapes.unpacked_dim(target, value, name, Env(self, chain, depth + 1))
            if size is not None:  # `M, K = a.shape` with a tensor the file builds
                return Resolution(
                    None,
                    size,
                    (f"{name} unpacked from {code_of(value)}",),
                    f"'{name}' is read from the shape of a tensor at line {self.f.line(value)}, "
                    f"not set by a literal",
                )
            return self.expr(value, chain, depth + 1, name, kind)  # says why it is no literal
        where = self.spelled.where(value, chain)
        scope = spelled[1] if spelled is not None else chain  # where the tuple is written
        r = self.expr(part, scope, depth + 1, name, where or kind)
        return Resolution(r.site, r.value, (f"{name} unpacked from {code_of(value)}", *r.path))

    def _loop(self, name: str, loop: Loop, chain: tuple[Function, ...], depth: int) -> Resolution:
        """A name a for loop binds: with one entry in the list it walks, that entry's element
        is the one value (`for B, L, block_L in [(2, 512, 64)]`); otherwise no single literal."""
        part = self.spelled.one_entry(name, loop, chain)
        if part is None:
            return _unresolved(Spelled.several(name, loop))
        r = self.expr(part, chain, depth + 1, name, "entry")
        how = f"the one entry of the list the for loop at line {loop.line} walks"
        return Resolution(r.site, r.value, (how, *r.path), r.problem)

    def loop_values(self, loop: Loop, chain: tuple[Function, ...]) -> dict[str, list[int]]:
        """name -> the integer literal each entry of the loop's list gives it (every pass)."""
        return self.spelled.loop_values(loop, chain)

    def expr(
        self,
        node: cst.BaseExpression,
        chain: tuple[Function, ...],
        depth: int,
        name: str,
        kind: str,
    ) -> Resolution:
        value = literal(node)
        if value is not None:
            return Resolution(
                Site(name, kind, self.f.line(node), value, node), value, (f"{kind} {name}",)
            )
        if isinstance(node, cst.Name) and node.value == "None":
            return Resolution(
                None,
                None,
                (f"{kind} {name} = None",),
                f"'{name}' is None at line {self.f.line(node)} ({kind}), not an integer literal",
                none=True,
            )
        if isinstance(node, cst.Name):
            r = self.name(node.value, chain, depth + 1)
            path = (f"{name} = {node.value}", *r.path)
            return Resolution(r.site, r.value, path, r.problem, subject=r.subject)
        if isinstance(node, cst.Subscript) and tensorshapes.shape_source(node.value) is None:
            # `cfg["block_M"]`, `cfg[2]`: the entry written (`x.shape[1]` is computed below)
            found = self.spelled.item(node, chain)
            if isinstance(found, str):
                return _unresolved(f"'{name}' is read from {found}")
            part, kind, scope = found
            r = self.expr(part, scope, depth + 1, name, kind)
            return Resolution(r.site, r.value, (f"{name} = {code_of(node)}", *r.path), r.problem)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            sites = self.f.argparse.get(node.attr.value)
            if sites:
                if len(sites) > 1:
                    return _unresolved(
                        f"argparse option --{node.attr.value} is declared {len(sites)} times"
                    )
                return Resolution(
                    sites[0], sites[0].value, (f"{name} = {dotted(node)}", "argparse default")
                )
        capped = self._min_literal(node, chain, depth, name, kind)
        if capped is not None:
            return capped
        if isinstance(node, cst.IfExp):
            arm = self._arm(node, chain, depth, name, kind)
            if arm is not None:
                return arm
        computed = evaluate(node, Env(self, chain, depth + 1))
        if computed is not None:
            return Resolution(
                None,
                computed,
                (f"{name} computed",),
                f"'{name}' is computed at line {self.f.line(node)}, not set by a literal",
            )
        return _unresolved(
            f"'{name}' is set by an expression at line {self.f.line(node)}, not by a literal"
        )

    def _arm(
        self, node: cst.IfExp, chain: tuple[Function, ...], depth: int, name: str, kind: str
    ) -> Resolution | None:
        """`BLOCK_M = 64 if Cout <= 64 else 128`: the arm the test picks with the sizes the file
        runs the op with sets the value (the other arm is dead for that run); a test those
        sizes do not decide leaves no single literal. None (computed) when the test reads what
        an arm reads (`m if rows % m == 0 else 32`): a new value could flip the test, so the
        value tried would not be the value that runs; and when a name the test reads is
        computed with the arm's own literal (`_tied`)."""
        if names_in(node.test) & (_arm_values(node.body) | _arm_values(node.orelse)):
            return None
        test = evaluate(node.test, Env(self, chain, depth + 1))
        line = self.f.line(node)
        if not isinstance(test, (bool, int)):
            return _unresolved(
                f"'{name}' is `{code_of(node)}` at line {line}, and the sizes this file runs "
                f"the op with do not decide `{code_of(node.test)}`: no single literal sets it"
            )
        arm = node.body if test else node.orelse
        value = literal(arm)
        if isinstance(value, int) and value > 1 and self._tied(node.test, chain, value):
            return None
        r = self.expr(arm, chain, depth + 1, name, kind)
        how = f"{name} = {code_of(node)} with `{code_of(node.test)}` {bool(test)}"
        return Resolution(r.site, r.value, (how, *r.path), r.problem, subject=r.subject)

    def _tied(self, test: cst.BaseExpression, chain: tuple[Function, ...], value: int) -> bool:
        """Whether a name `test` reads is computed in groups of the arm's literal
        (`REPLICATE_H = head_kv // 64` tested beside `block_H = ... else 64`): the two are one
        size written twice, and a move of the arm alone would break what the other sized. A
        plain size (`K = 64`, `seq = 64 * 64`) is no such group."""
        for read in names_in(test):
            for fn in chain:
                for bound in fn.assigns.get(read, []):
                    if value in _divisors(bound):
                        return True
        return False

    def _min_literal(
        self,
        node: cst.BaseExpression,
        chain: tuple[Function, ...],
        depth: int,
        name: str,
        kind: str,
    ) -> Resolution | None:
        """`min(256, W_out)`: the literal is the value that runs when the other side, evaluated
        with the sizes the file runs the op with, is at least the literal; a smaller literal
        then becomes the block, a larger one runs as the other side (refused as a no-op past
        it). Where the other side is smaller the literal is not what runs: computed. None when
        the expression is not a two-argument `min` with one positive integer literal."""
        operands = min_operands(node, ("min",))
        if operands is None or len(operands) != 2:
            return None
        values = [literal(a) for a in operands]
        lits = [i for i, v in enumerate(values) if isinstance(v, int) and not isinstance(v, bool)]
        if len(lits) != 1 or cast(int, values[lits[0]]) <= 0:
            return None
        lit = operands[lits[0]]
        other = operands[1 - lits[0]]
        value = cast(int, values[lits[0]])
        extent = evaluate(other, Env(self, chain, depth + 1))
        line = self.f.line(node)
        if not isinstance(extent, int) or isinstance(extent, bool):
            return _unresolved(
                f"'{name}' is `{code_of(node)}` at line {line}: the other side is not known "
                f"here, so whether the literal {value} is the value that runs is not known"
            )
        if extent < value:
            return Resolution(
                None,
                extent,
                (f"{name} computed",),
                f"'{name}' is `{code_of(node)}` at line {line}: `{code_of(other)}` is {extent} "
                f"here, below the literal {value}, so the literal is not the value that runs",
            )
        self.min_caps[id(lit)] = (extent, code_of(other))
        how = f"{name} = {code_of(node)} with `{code_of(other)}` = {extent}"
        return Resolution(Site(name, kind, self.f.line(lit), value, lit), value, (how,))

    def param(self, fn: Function, name: str, depth: int) -> Resolution:
        """A parameter: its call sites (by the function's name), else its default."""
        if name in star_names(fn):
            return _unresolved(
                f"'{name}' is the `*{name}`/`**{name}` parameter of {fn.name}(): it gathers "
                f"whatever each call passes, not one value a literal sets"
            )
        pairs = self.bindings(fn, name, depth)
        if pairs and name in fn.defaults:
            pairs += defaulted.calls(self, fn, name, pairs, depth)
        if pairs:
            idle = callsites.unrun(self.f, fn, name, pairs, self.harness)
            if idle is not None:
                return _unresolved(idle)
            pairs = callsites.on_run_path(self.f, pairs, self.harness)
            # a call that leaves it None runs its None fill: the fill's value, at the fill
            pairs = [(c, self._filled(fn, name, depth, r) if r.none else r) for c, r in pairs]
            found = [r for _, r in pairs]
            nodes = {id(r.site.node) if r.site else None for r in found}
            if len(found) == 1 or (len(nodes) == 1 and None not in nodes):
                r = found[0]
                path = (f"{fn.name}({name}=...)", *r.path)
                return Resolution(r.site, r.value, path, r.problem, subject=r.subject)
            shared = callsites.shared_constant(self.f, fn, name, pairs, self.harness)
            if isinstance(shared, str):
                return Resolution(None, None, (), shared, subject=name)
            r = shared.resolution
            path = (f"{fn.name}({name}=...) at {len(shared.fed)} of {len(pairs)} calls", *r.path)
            # a block's value is the constant's for the calls it feeds (a sibling knob's rules
            # read it there); any other name (a shape) differs by call: its sizes come per call
            value = r.value if callsites.BLOCK_WORD.search(name) else None
            return Resolution(r.site, value, path, r.problem, shared)
        if name in fn.defaults:
            hidden = self.wrappers.hidden(fn, name)
            if hidden is not None:
                return _unresolved(hidden)
            r = self.expr(fn.defaults[name], fn.parents, depth + 1, name, "default")
            return self._filled(fn, name, depth, r) if r.none else r
        if callsites.autotuned(fn):
            return _unresolved(
                f"'{name}' of {fn.name}() is left to @tilelang.autotune: no call in this file "
                f"passes it and it has no default, so the autotuner picks it from its configs"
            )
        return _unresolved(
            f"'{name}' of {fn.name}() has no default and no call site in this file binds it"
        )

    def _filled(self, fn: Function, name: str, depth: int, passed: Resolution) -> Resolution:
        """Parameter `name` of `fn` is None on the run (`passed` says where): its value is what
        its None fill (`if name is None: name = 64`) assigns, and that literal is the knob."""
        filled = self._fill(fn, name, depth)
        return passed if filled is None else filled  # no fill: the kernel reads None

    def _fill(self, fn: Function, name: str, depth: int) -> Resolution | None:
        """What the one None fill of parameter `name` of `fn` sets, None when there is not one
        fill. Kept on the parse (every call that leaves the parameter None asks) for what it
        depends on besides the file: the harness and the sizes in use (`fallback`)."""
        key = (
            "binding.fill",
            id(fn.node),
            name,
            depth,
            tuple(self.harness),
            tuple(sorted(self.fallback.items())),
        )
        memo = self.f.derived
        if key not in memo:
            memo[key] = self._fill_of(fn, name, depth)
        return cast("Resolution | None", memo[key])

    def _fill_of(self, fn: Function, name: str, depth: int) -> Resolution | None:
        fills = rebinding.fill_values(fn, name)
        if len(fills) != 1:
            return None
        stmt, value = fills[0]
        r = self.expr(value, fn.chain, depth + 1, name, "local")
        how = f"{name} is None, so the fill at line {self.f.line(stmt)} sets it"
        problem = r.problem and (
            f"{r.problem} (the None fill of parameter '{name}' of {fn.name}(), which runs "
            f"because the run leaves '{name}' None)"
        )
        return Resolution(r.site, r.value, (how, *r.path), problem, subject=r.subject)

    def bindings(self, fn: Function, name: str, depth: int) -> list[tuple[Call, Resolution]]:
        """Each call of `fn` that binds parameter `name`, with what it binds it to."""
        pairs: list[tuple[Call, Resolution]] = []
        for call, args in self._calls_to(fn):
            bound = self._bound_in(args, call, fn, name, depth)
            if bound is None:
                continue
            if bound[1] == "opaque":
                double = any(a.star == "**" and a.value is bound[0] for a in args)
                star = "**" if double else "*"
                whose = (
                    f"the `{star}{code_of(bound[0])}` parameter of {call.scope[-1].name}(), "
                    f"which passes on what each of its calls gives (positions not followed)"
                    if call.scope and code_of(bound[0]) in star_names(call.scope[-1])
                    else "whose values the file does not spell out as one literal (e.g. a loop "
                    "over several configurations)"
                )
                r = _unresolved(
                    f"'{name}' of {fn.name}() may come from `{star}{code_of(bound[0])}` at "
                    f"line {self.f.line(call.node)}, {whose}"
                )
            elif bound[1] == "type_error":
                why = _type_error(args, fn)
                r = _unresolved(
                    f"'{name}' of {fn.name}() is bound by the call at line "
                    f"{self.f.line(call.node)}, which raises TypeError before {fn.name}() runs "
                    f"({why}): nothing it passes reaches a kernel"
                )
            elif bound[1] == "forward":
                wrapper = call.scope[-1]
                r = self.param(wrapper, name, depth + 1)
                r = Resolution(r.site, r.value, (f"**{code_of(bound[0])}", *r.path), r.problem)
            elif bound[1] == "dict":
                r = self._dict_entry(bound[0], call.scope, name, depth + 1)
            else:
                r = self.expr(bound[0], call.scope, depth + 1, name, bound[1])
            pairs.append((call, r))
        return pairs

    def arguments(
        self, fn: Function, name: str
    ) -> list[tuple[cst.BaseExpression, tuple[Function, ...]]]:
        """What each call of `fn` passes for parameter `name` by position or keyword, with the
        call's scope (calls that leave it to its default or pass it through `*`/`**` left out)."""
        out = []
        for call, args in self._calls_to(fn):
            bound = self._bound_in(args, call, fn, name)
            if bound is not None and bound[1] in ("positional", "keyword"):
                out.append((bound[0], call.scope))
        return out

    def _passed(
        self, fn: Function, name: str
    ) -> tuple[cst.BaseExpression, tuple[Function, ...]] | None:
        """The node the one call of `fn` passes for parameter `name`, with that call's scope;
        None when there is no call, several that pass different configurations (a `def test_*`
        a test runner calls counts, on the run path or not; the one configuration the file
        writes, passed by several calls, is one), one that passes it through `*`/`**` or leaves
        it at its default (the configuration then differs by call), or one that passes it on
        to itself."""
        key = (id(fn.node), name)
        if name in star_names(fn) or key in self._following:
            return None  # a call that passes the parameter on to itself: no one configuration
        # every call counts, on the run path or not (a test runner runs `def test_*`)
        calls = self._calls_to(fn)
        if not calls:
            return None
        passed: list[tuple[cst.BaseExpression, tuple[Function, ...]]] = []
        self._following.add(key)
        try:
            for call, args in calls:
                bound = self._bound_in(args, call, fn, name)
                if bound is None or bound[1] not in ("positional", "keyword"):
                    return None
                passed.append((bound[0], call.scope))
            if len(passed) == 1:
                return passed[0]
            # several calls passing the one written configuration (`CFG` twice) are one
            written = {id(w[0]) if w else None for w in (self.spelled.scoped(*p) for p in passed)}
        finally:
            self._following.discard(key)
        return passed[0] if len(written) == 1 and None not in written else None

    def _calls_to(self, fn: Function) -> list[tuple[Call, list[cst.Arg]]]:
        """Each call of the file that reaches `fn` (by name, or through a partial or an alias),
        with the arguments it passes. It depends on the parse alone, and every parameter of
        `fn` asks it again: kept on the parse."""
        return self.f.kept(("binding.calls_to", id(fn.node)), lambda: self._find_calls_to(fn))

    def _find_calls_to(self, fn: Function) -> list[tuple[Call, list[cst.Arg]]]:
        found: list[tuple[Call, list[cst.Arg]]] = []
        for call in self.f.calls:
            args = (
                list(call.node.args)
                if self.calls(call, fn)
                else self.wrappers.arguments(call, fn)  # partial(fn, ...), `k = fn`
            )
            if args is not None:
                found.append((call, args))
        return found

    def calls(self, call: Call, fn: Function) -> bool:
        """`fn(...)` by name, or `p(...)` where `p = outer(...)` and `outer` returns `fn`, or
        `outer(...)(...)`."""
        func = call.node.func
        if (
            isinstance(func, cst.Call)
            and isinstance(func.func, cst.Name)
            and fn.parents
            and fn.name in fn.parents[-1].returns
        ):
            return func.func.value == fn.parents[-1].name
        if not isinstance(func, cst.Name):
            return False
        if func.value == fn.name:
            return not any(func.value in f.assigns for f in call.scope)  # not shadowed by a local
        if not fn.parents or fn.name not in fn.parents[-1].returns:
            return False
        v = self.spelled.assigned(func.value, call.scope)  # its one assignment, module included
        return (
            isinstance(v, cst.Call)
            and isinstance(v.func, cst.Name)
            and v.func.value == fn.parents[-1].name
        )

    def bound_by(
        self, call: Call, fn: Function, name: str
    ) -> tuple[cst.BaseExpression, str] | None:
        """What a direct call of `fn` (`calls`) binds parameter `name` to, and how."""
        return self._bound_in(list(call.node.args), call, fn, name)

    def bound_in(
        self, args: list[cst.Arg], call: Call, fn: Function, name: str, depth: int = 0
    ) -> tuple[cst.BaseExpression, str] | None:
        """What `args` (a call's arguments as they reach `fn`) bind parameter `name` to."""
        return self._bound_in(args, call, fn, name, depth)

    def _bound_in(
        self, args: list[cst.Arg], call: Call, fn: Function, name: str, depth: int = 0
    ) -> tuple[cst.BaseExpression, str] | None:
        """What `args` (a call's arguments as they reach `fn`) bind parameter `name` to."""
        if _type_error(args, fn):
            return call.node, "type_error"  # the call raises before `fn` runs
        positional: int | None = 0
        opaque: cst.BaseExpression | None = None  # a `*x` / `**x` whose contents are not known
        for arg in args:
            if arg.keyword is not None:
                if arg.keyword.value == name:
                    return arg.value, "keyword"
                continue
            if arg.star == "**":
                wrapper = self._forwarder(arg.value, call)
                if wrapper is not None:  # `def run(M, **kw): rows(M, **kw)`: run's callers
                    if depth <= self.MAX_DEPTH and self.bindings(wrapper, name, depth + 1):
                        return arg.value, "forward"
                    continue
                items = dict_items(self.spelled.node(arg.value, call.scope))
                if items is None and self._left_out(arg.value, call.scope, name):
                    continue  # no configuration the loop passes names it: the default holds
                if items is None:
                    opaque = opaque or arg.value
                elif name in items:
                    return arg.value, "dict"
                continue
            if arg.star == "*":  # `f(*cfg)` with cfg a tuple the file spells out
                seq = self.spelled.node(arg.value, call.scope)
                if (
                    positional is None
                    or not isinstance(seq, (cst.Tuple, cst.List))
                    or any(isinstance(e, cst.StarredElement) for e in seq.elements)
                ):
                    opaque = opaque or arg.value
                    positional = None  # the positions after it are not known
                    continue
                for e in seq.elements:
                    if positional < len(fn.params) and fn.params[positional] == name:
                        return e.value, "positional"
                    positional += 1
                continue
            if positional is None:
                continue
            if positional < len(fn.params) and fn.params[positional] == name:
                return arg.value, "positional"
            positional += 1
        return (opaque, "opaque") if opaque is not None else None

    def _left_out(self, node: cst.BaseExpression, chain: tuple[Function, ...], name: str) -> bool:
        """`for config in test_configs: test(**config)` where every configuration the file
        writes is a dict it spells out and none names `name`: no call binds it."""
        if not isinstance(node, cst.Name) or self.spelled.changed(node.value, chain) is not None:
            return False
        loop: Loop | None = None
        scope: tuple[Function, ...] = ()
        for fn in reversed(chain):
            if node.value in fn.assigns or takes(fn, node.value):
                return False
            if node.value in fn.loop_targets:
                loop, scope = fn.loop_targets[node.value], fn.chain
                break
        else:
            if node.value not in self.f.module_assigns:
                loop = self.f.module_loops.get(node.value)
        if loop is None or not isinstance(loop.target, cst.Name):
            return False
        entries = self.spelled.entries(loop, scope)
        if not entries:
            return False
        for entry in entries:
            items = dict_items(self.spelled.node(entry, scope))
            if items is None or name in items:
                return False
        return True

    def _forwarder(self, node: cst.BaseExpression, call: Call) -> Function | None:
        """The function whose `**kw` parameter a call passes on unchanged (`rows(M, **kw)`
        inside `def run(M, **kw)`), or None."""
        if not call.scope or not isinstance(node, cst.Name):
            return None
        inner = call.scope[-1]
        star = inner.node.params.star_kwarg
        if not isinstance(star, cst.Param) or star.name.value != node.value:
            return None
        if node.value in inner.assigns or self.spelled.changed(node.value, call.scope):
            return None
        return inner

    def _dict_entry(
        self, node: cst.BaseExpression, chain: tuple[Function, ...], name: str, depth: int
    ) -> Resolution:
        """`f(**cfg)` with cfg a dict the file spells out that has key `name`."""
        found = self.spelled.scoped(node, chain)
        items = dict_items(found[0]) if found is not None else None
        assert found is not None and items is not None and name in items
        r = self.expr(items[name], found[1], depth, name, "dict")
        return Resolution(r.site, r.value, (f"**{code_of(node)}", *r.path), r.problem)


def _type_error(args: list[cst.Arg], fn: Function) -> str | None:
    """Why a call passing `args` (no `*` / `**` among them) to `fn` raises TypeError before
    `fn` runs, or None: more positional arguments than `fn` takes without `*args`, or a
    parameter given both by position and by keyword."""
    if any(a.star for a in args):
        return None
    given = [a for a in args if a.keyword is None]
    if len(given) > len(fn.params) and not isinstance(fn.node.params.star_arg, cst.Param):
        return f"{len(given)} positional arguments to {len(fn.params)} parameters"
    by_position = set(fn.params[: len(given)])
    twice = [
        a.keyword.value for a in args if a.keyword is not None and a.keyword.value in by_position
    ]
    return f"'{twice[0]}' given by position and by keyword" if twice else None
