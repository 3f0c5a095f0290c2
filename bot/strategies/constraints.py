"""What a kernel demands of a knob's value, read from the kernel itself.

For a knob read by a kernel factory (bot/strategies/binding.py) the rules are:

- every `assert` of the factory that holds with the current value must still
  hold with the new one (`assert top_k % block_I == 0`, `group_size == block_N`);
- a check that raises (`if N % block_N != 0: raise ValueError(...)`) is an assert
  of the opposite condition;
- `X // knob` with a plain shape X, `X % knob` inside an assert or a raising check,
  and `T.ceildiv(X, knob)` when no `T.min(knob, ...)` handles a tail, mean full
  tiles: the new value must divide X. A remainder computed anywhere else
  (`valid = real_top_k % block_I`, then a mask of `valid` lanes) is how a kernel
  handles the partial tile, not a demand for full ones;
- `T.ceildiv(X, knob)` with a tail handled (`T.min(knob, ...)`, or copies through
  slices whose bound grows with the knob, `A[i * knob : (i + 1) * knob]`, which the
  compiler clips at the tensor's end, and no element index computed from the knob,
  `S[i * knob + j]`, which nothing clips) means the block must not exceed X (nor the
  current value, when that already covers X: a larger block adds nothing);
- a loop over `T.ceildiv(X, knob)` tiles whose index picks a row of a tensor
  laid out in `T.ceildiv(X, G)` groups (per-group scales) ties the knob to G;
- when X is open (a `T.symbolic` shape, a runtime size) it takes every size the
  op runs with: from the file (get_inputs, the factory's callers) and declared in
  tune.yaml `shapes:` / DESIGN.md (bot/strategies/shapes.py); a refusal says
  where the size came from. With none, only divisors of the current value are
  provably safe: the current value already divides every shape the op runs with.

A rule the current value itself breaks is not a requirement of this kernel
(e.g. a grid size of 20 over 16 guarded work items) and is ignored. A move
that breaks a rule is refused with the rule, before anything is measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from bot.config.schema import DeclaredShape
from bot.strategies import shapes
from bot.strategies.binding import Resolver
from bot.strategies.capacity import capacity_check
from bot.strategies.copyfit import copy_fit
from bot.strategies.evaluate import CEILDIV, Env, evaluate
from bot.strategies.facts import Call, Facts, Function
from bot.strategies.source import dotted
from bot.strategies.tiling import Rule, group_rules, whole_rules


class Check(Protocol):
    """A rule that is not one extent: why `value` breaks the kernel, or None."""

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None: ...


class _Rules(cst.CSTVisitor):
    def __init__(self, f: Facts, aliases: set[str], base: tuple[Function, ...]) -> None:
        self.f, self.aliases = f, aliases
        self.by_node = {id(fn.node): fn for fn in f.functions}
        self.stack: list[Function] = list(base)
        self.rules: list[Rule] = []
        self.ceil: list[Rule] = []
        self.tails = False
        self.iterators = _iterators(f)
        self.sized = _sized_by(f, aliases)
        self.offsets = _sized_by(f, aliases, _offset_names)
        self.sliced = self.indexed = False
        self.checking = 0  # inside an assert's or a raising check's condition

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        fn = self.by_node.get(id(node))
        if fn is not None and (not self.stack or self.stack[-1] is not fn):
            self.stack.append(fn)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.stack and self.stack[-1].node is original_node and len(self.stack) > 1:
            self.stack.pop()

    def _is_knob(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and node.value in self.aliases

    def _rule(self, kind: str, node: cst.BaseExpression, whole: cst.CSTNode) -> Rule:
        text = cst.Module([]).code_for_node(whole)
        return Rule(kind, node, tuple(self.stack), self.f.line(whole), " ".join(text.split()))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        left = node.left
        if (
            isinstance(node.operator, cst.FloorDivide)
            and self._is_knob(left)
            and isinstance(node.right, (cst.Name, cst.Integer))
            and not self._is_knob(node.right)
        ):  # `block_M // VEC_NUM`: the knob is split into VEC_NUM parts
            self.rules.append(self._rule("multiple", node.right, node))
        if (
            (
                isinstance(node.operator, cst.FloorDivide)
                or (isinstance(node.operator, cst.Modulo) and self.checking)
            )
            and self._is_knob(node.right)
            and isinstance(left, (cst.Name, cst.Integer, cst.Attribute))
            and not (isinstance(left, cst.Name) and left.value in self.iterators)
        ):
            self.rules.append(self._rule("exact", node.left, node))

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        short = name.rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short in CEILDIV and len(args) == 2 and self._is_knob(args[1]):
            self.ceil.append(self._rule("ceil", args[0], node))
        elif short == "min" and any(self._is_knob(a) for a in args):
            self.tails = True

    def visit_Slice(self, node: cst.Slice) -> None:
        if node.upper is not None and _names(node.upper) & self.sized:
            self.sliced = True  # a copy through this slice is clipped at the tensor's end

    def visit_Index(self, node: cst.Index) -> None:
        if _names(node.value) & self.offsets:
            self.indexed = True  # one element at an offset from the knob: not clipped

    @property
    def tail_handled(self) -> bool:
        return self.tails or (self.sliced and not self.indexed)

    def visit_Assert(self, node: cst.Assert) -> None:
        self.checking += 1
        if _names(node.test) & self.aliases:
            self.rules.append(self._rule("assert", node.test, node.test))

    def leave_Assert(self, original_node: cst.Assert) -> None:
        self.checking -= 1

    def visit_If(self, node: cst.If) -> bool:
        if not _raises(node):
            return True
        if _names(node.test) & self.aliases:
            self.rules.append(self._rule("raises", node.test, node.test))
        self.checking += 1
        node.test.visit(self)
        self.checking -= 1
        node.body.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        return False


def _raises(node: cst.If) -> bool:
    """`if cond: raise ...`: a check the kernel makes of its arguments."""
    if isinstance(node.body, cst.SimpleStatementSuite):  # `if cond: raise X` on one line
        return any(isinstance(s, cst.Raise) for s in node.body.body)
    first = node.body.body[0] if node.body.body else None
    return isinstance(first, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Raise) for s in first.body
    )


def _iterators(f: Facts) -> set[str]:
    """Loop and `with ... as` targets inside the kernel factories (and the functions around
    them): indices (`k % slots` is a ring
    index), never shapes. A loop outside them walks configurations (`for M, N, block_M in
    test_configs`): its names are the sizes the kernel is built with."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            found.update(_names(n.target))

        def visit_WithItem(self, n: cst.WithItem) -> None:
            if n.asname is not None:
                found.update(_names(n.asname.name))

    for outer in {id(fac.chain[0]): fac.chain[0] for fac in f.factories}.values():
        outer.node.visit(V())
    return found


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(V())
    return found


def _sized_by(
    f: Facts, aliases: set[str], used: Callable[[cst.CSTNode], set[str]] | None = None
) -> set[str]:
    """The knob's names and the locals computed from them (`sub_block_M = block_M // 2`);
    with `used`, only through the names `used` picks out of an expression."""
    pick = used or _names
    names = set(aliases)
    changed = True
    while changed:
        changed = False
        for fn in f.functions:
            for local, values in fn.assigns.items():
                if local not in names and any(pick(v) & names for v in values):
                    names.add(local)
                    changed = True
    return names


def _offset_names(node: cst.CSTNode) -> set[str]:
    """Names that scale or shift an expression's value: not a divisor (`cid // n_num`,
    `T.ceildiv(N, block_N)`), which makes a tile index or count, not an element offset."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> bool:
            if isinstance(n.operator, (cst.FloorDivide, cst.Modulo)):
                n.left.visit(self)
                return False
            return True

        def visit_Call(self, n: cst.Call) -> bool:
            args = [a.value for a in n.args if a.keyword is None]
            if dotted(n.func).rsplit(".", 1)[-1] in CEILDIV and len(args) == 2:
                args[0].visit(self)
                return False
            return True

    node.visit(V())
    return found


def aliases_of(name: str, chain: tuple[Function, ...], f: Facts) -> set[str]:
    """`name` and the locals that are plain copies of it (`block_m = block_M`)."""
    names = {name}
    scopes = [fn for fn in f.functions if any(p is c for c in chain for p in fn.chain)]
    changed = True
    while changed:
        changed = False
        for fn in scopes:
            for local, values in fn.assigns.items():
                if (
                    local not in names
                    and len(values) == 1
                    and isinstance(values[0], cst.Name)
                    and values[0].value in names
                ):
                    names.add(local)
                    changed = True
    return names


@dataclass
class Constraints:
    """The rules one knob must meet, for every factory that reads it."""

    name: str
    aliases: frozenset[str]
    rules: list[Rule]
    resolver: Resolver
    checks: list[Check] = field(default_factory=list)  # capacity and other whole-kernel rules
    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # open names -> sizes run with
    open_names: frozenset[str] = frozenset()  # left open by the kernel: declared shapes fill these
    symbols: dict[str, str] = field(default_factory=dict)  # T.symbolic("name") -> Python name

    def _env(self, chain: tuple[Function, ...], value: int) -> Env:
        return Env(self.resolver, chain, 0, {a: value for a in self.aliases})

    def violation(
        self, value: int, current: int | None, declared: tuple[DeclaredShape, ...] = ()
    ) -> str | None:
        """Why `value` breaks the kernel, or None. `declared`: the op's declared shapes
        (tune.yaml, DESIGN.md); they fill only the names the kernel leaves open."""
        if isinstance(value, bool):
            return None
        if value <= 0:
            return f"{self.name}={value}: a block size must be positive"
        sizes, origins = self.declared_sizes(declared)
        for name, size, _ in self.contradicted(current, sizes, origins):
            sizes[name] = tuple(v for v in sizes[name] if v != size)
            if not sizes[name]:
                del sizes[name]  # unknown again: the rules for an unknown extent apply
        try:
            for choice in shapes.choices(sizes):
                self.resolver.fallback = choice  # open sizes: every one the op runs with
                problem = self._violation(value, current)
                if problem:
                    self.resolver.fallback = {}
                    alone = self._violation(value, current)  # the same without the sizes?
                    return problem + ("" if alone == problem else shapes.note(choice, origins))
        finally:
            self.resolver.fallback = {}
        return None

    def declared_sizes(
        self, declared: tuple[DeclaredShape, ...]
    ) -> tuple[dict[str, tuple[int, ...]], dict[tuple[str, int], str]]:
        """The sizes the rules use (the file's and the declared ones), and each one's origin."""
        return shapes.merged(self.sizes, self.open_names, declared, self.symbols)

    def contradicted(
        self,
        current: int | None,
        sizes: dict[str, tuple[int, ...]],
        origins: dict[tuple[str, int], str],
    ) -> list[tuple[str, int, str]]:
        """(name, size, why) for each declared size with which the current value itself breaks
        a rule: the declaration does not describe the kernel as it runs, so it is not used (a
        wrong declaration must not lift the rule that guards the unknown extent)."""
        if current is None or all(o == shapes.IN_FILE for o in origins.values()):
            return []
        out: list[tuple[str, int, str]] = []
        try:
            alone = self._violation(current, None)
            for (name, size), origin in origins.items():
                if origin == shapes.IN_FILE or size not in sizes.get(name, ()):
                    continue
                self.resolver.fallback = {name: size}
                problem = self._violation(current, None)
                self.resolver.fallback = {}
                if problem and problem != alone:
                    out.append((name, size, problem))
        finally:
            self.resolver.fallback = {}
        return out

    def _violation(self, value: int, current: int | None) -> str | None:
        for rule in self.rules:
            problem = self._check(rule, value, current)
            if problem:
                return problem
        for check in self.checks:
            problem = check(value, current, self._env)
            if problem:
                return problem
        return None

    def _check(self, rule: Rule, value: int, current: int | None) -> str | None:
        if rule.kind == "assert":
            now = (
                evaluate(rule.node, self._env(rule.chain, current)) if current is not None else None
            )
            if now is False:
                return None  # the kernel's own assert already fails: not ours to judge
            if evaluate(rule.node, self._env(rule.chain, value)) is False:
                return f"{self.name}={value} breaks the kernel's assert at line {rule.line}: `{rule.text}`"
            return None
        if rule.kind == "raises":
            now = (
                evaluate(rule.node, self._env(rule.chain, current)) if current is not None else None
            )
            if now is True:
                return None  # the kernel already raises with the current value: not ours to judge
            if evaluate(rule.node, self._env(rule.chain, value)) is True:
                return (
                    f"{self.name}={value} makes the kernel raise: `if {rule.text}` "
                    f"(line {rule.line}) holds"
                )
            return None
        extent = evaluate(
            rule.node, self._env(rule.chain, current if current is not None else value)
        )
        if isinstance(extent, bool) or (extent is not None and not isinstance(extent, int)):
            return None
        if rule.kind == "exact":
            if extent is None:
                if current and current % value != 0:
                    return (
                        f"{self.name}={value}: `{rule.text}` (line {rule.line}) needs full tiles and its "
                        f"extent is not known in this file; only divisors of the current {current} are safe"
                    )
                return None
            if current and extent % current != 0:
                return None  # the current value does not divide it either: not a requirement here
            if extent % value != 0:
                return (
                    f"{self.name}={value} does not divide {extent} "
                    f"(`{rule.text}` at line {rule.line} needs full tiles)"
                )
            return None
        if rule.kind == "multiple":
            if not extent or extent < 2 or (current and current % extent != 0):
                return None  # the current value is not a multiple either: not a requirement here
            if value % extent != 0:
                return (
                    f"{self.name}={value} is not a multiple of {extent}: `{rule.text}` "
                    f"(line {rule.line}) splits it into parts of {extent}"
                )
            return None
        if rule.kind == "whole":
            target = extent if extent is not None else current
            if target is None or (current is not None and current != target):
                return None  # the current value does not cover the extent either
            if value != target:
                known = f"the extent {extent}" if extent is not None else f"the current {current}"
                return (
                    f"{self.name}={value}: every {self.name}-sized tile writes `{rule.text}` "
                    f"(line {rule.line}), which does not depend on the tile's position, so a "
                    f"second tile would overwrite the first; {self.name} must cover the whole "
                    f"extent ({known})"
                )
            return None
        if rule.kind == "equal":
            target = extent if extent is not None else current
            if target is not None and current is not None and current != target:
                return None
            if target is not None and value != target:
                return (
                    f"{self.name}={value}: the loop over {self.name}-sized tiles indexes `{rule.text}` "
                    f"(line {rule.line}), laid out in groups of {target}"
                )
            return None
        if rule.kind == "cap" and extent is not None:
            if current and current > extent:  # one tile already covers the extent
                if value > current:
                    return (
                        f"{self.name}={value} exceeds the extent {extent} it tiles (`{rule.text}` "
                        f"at line {rule.line}); the current {current} already covers it in one tile"
                    )
                return None
            if value > extent:
                return f"{self.name}={value} exceeds the extent {extent} it tiles (`{rule.text}` at line {rule.line})"
        return None


def constraints_for(
    f: Facts,
    resolver: Resolver,
    name: str,
    owners: list[tuple[Function | None, Function]],
    calls: tuple[Call, ...] = (),
) -> Constraints:
    """Rules for `name` as read by each (owner, factory): owner holds the name, factory the
    prim_func. `calls`: the only calls the knob's literal reaches (a module constant some calls
    share): the sizes come from those calls alone."""
    rules: list[Rule] = []
    all_aliases: set[str] = set()
    for owner, factory in owners:
        root = owner or factory
        chain = root.chain
        aliases = aliases_of(name, factory.chain, f)
        all_aliases |= aliases
        v = _Rules(f, aliases, chain[:-1])
        root.node.visit(v)
        rules.extend(v.rules)
        rules.extend(group_rules(f, factory, aliases))
        rules.extend(whole_rules(f, factory, aliases))
        rules.extend(
            Rule("cap" if v.tail_handled else "exact", r.node, r.chain, r.line, r.text)
            for r in v.ceil
        )
    factories = list({id(fac): fac for _, fac in owners}.values())
    capacity = capacity_check(f, name, factories)
    fit = copy_fit(f, name, factories)
    open_: set[str] = set()
    for factory in factories:
        open_ |= shapes.open_names(f, resolver, factory)
    return Constraints(
        name,
        frozenset(all_aliases),
        rules,
        resolver,
        [c for c in (capacity, fit) if c is not None],
        shapes.sizes(f, resolver, factories, calls),
        frozenset(open_),
        shapes.symbols(factories),
    )
