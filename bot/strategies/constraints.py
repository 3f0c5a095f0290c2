"""What a kernel demands of a knob's value, read from the kernel itself.

For a knob read by a kernel factory (bot/strategies/binding.py) the rules are:

- every `assert` of the factory that holds with the current value must still
  hold with the new one (`assert top_k % block_I == 0`, `group_size == block_N`);
- `X // knob`, `X % knob` with a plain shape X, and `T.ceildiv(X, knob)` when no
  `T.min(knob, ...)` handles a tail, mean full tiles: the new value must divide X;
- `T.ceildiv(X, knob)` with a tail handled means the block must not exceed X;
- a loop over `T.ceildiv(X, knob)` tiles whose index picks a row of a tensor
  laid out in `T.ceildiv(X, G)` groups (per-group scales) ties the knob to G;
- when X is not known in the file (a `T.symbolic` shape, a runtime size), only
  divisors of the current value are provably safe: the current value already
  divides every shape the op runs with.

A rule the current value itself breaks is not a requirement of this kernel
(e.g. a grid size of 20 over 16 guarded work items) and is ignored. A move
that breaks a rule is refused with the rule, before anything is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from bot.strategies.binding import CEILDIV, Env, Facts, Function, Resolver, evaluate
from bot.strategies.source import dotted


@dataclass(frozen=True)
class Rule:
    kind: str  # exact (must divide X) | cap (must not exceed X) | equal (must be X) | assert
    node: cst.BaseExpression  # the extent X, or the assert's test
    chain: tuple[Function, ...]  # scope the node is evaluated in
    line: int
    text: str  # the source text, for messages


class _Rules(cst.CSTVisitor):
    def __init__(self, f: Facts, aliases: set[str], base: tuple[Function, ...]) -> None:
        self.f, self.aliases = f, aliases
        self.by_node = {id(fn.node): fn for fn in f.functions}
        self.stack: list[Function] = list(base)
        self.rules: list[Rule] = []
        self.ceil: list[Rule] = []
        self.tails = False
        self.iterators = _iterators(f)

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
            isinstance(node.operator, (cst.FloorDivide, cst.Modulo))
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

    def visit_Assert(self, node: cst.Assert) -> None:
        if _names(node.test) & self.aliases:
            self.rules.append(self._rule("assert", node.test, node.test))


def _iterators(f: Facts) -> set[str]:
    """Loop and `with ... as` targets: indices (`k % slots` is a ring index), never shapes."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            found.update(_names(n.target))

        def visit_WithItem(self, n: cst.WithItem) -> None:
            if n.asname is not None:
                found.update(_names(n.asname.name))

    f.wrapper.module.visit(V())
    return found


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

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

    def _env(self, chain: tuple[Function, ...], value: int) -> Env:
        return Env(self.resolver, chain, 0, {a: value for a in self.aliases})

    def violation(self, value: int, current: int | None) -> str | None:
        """Why `value` breaks the kernel, or None."""
        if isinstance(value, bool):
            return None
        if value <= 0:
            return f"{self.name}={value}: a block size must be positive"
        for rule in self.rules:
            problem = self._check(rule, value, current)
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
            if current and current > extent:
                return None
            if value > extent:
                return f"{self.name}={value} exceeds the extent {extent} it tiles (`{rule.text}` at line {rule.line})"
        return None


def constraints_for(
    f: Facts, resolver: Resolver, name: str, owners: list[tuple[Function | None, Function]]
) -> Constraints:
    """Rules for `name` as read by each (owner, factory): owner holds the name, factory the prim_func."""
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
        rules.extend(_group_rules(f, factory, aliases))
        rules.extend(
            Rule("cap" if v.tails else "exact", r.node, r.chain, r.line, r.text) for r in v.ceil
        )
    return Constraints(name, frozenset(all_aliases), rules, resolver)


def _ceildiv_args(
    node: cst.BaseExpression | None,
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] in CEILDIV:
        args = [a.value for a in node.args if a.keyword is None]
        if len(args) == 2:
            return args[0], args[1]
    return None


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _group_rules(f: Facts, factory: Function, aliases: set[str]) -> list[Rule]:
    """`for k in T.Pipelined(T.ceildiv(K, knob))` + `scales[.., k]` with scales' dim `T.ceildiv(K, G)`."""
    rules: list[Rule] = []
    by_node = {id(fn.node): fn for fn in f.functions}
    for pf in factory.prim_funcs:
        chain = by_node[id(pf)].chain
        tensors: dict[str, list[cst.BaseExpression]] = {}
        for p in pf.params.params:
            ann = p.annotation.annotation if p.annotation else None
            if (
                isinstance(ann, cst.Call)
                and dotted(ann.func).endswith("Tensor")
                and ann.args
                and isinstance(ann.args[0].value, (cst.Tuple, cst.List))
            ):
                tensors[p.name.value] = [e.value for e in ann.args[0].value.elements]
        locals_: dict[str, list[cst.BaseExpression]] = {}
        for fn in chain:  # innermost wins
            locals_.update(fn.assigns)
        loops = _Loops(locals_, aliases)
        pf.visit(loops)
        index = _GroupIndex(f, tensors, loops.extents, aliases, chain)
        pf.visit(index)
        rules.extend(index.rules)
    return rules


class _Loops(cst.CSTVisitor):
    """Loop variable -> X for `for v in T.Pipelined(T.ceildiv(X, knob))` (directly or via a local)."""

    def __init__(self, locals_: dict[str, list[cst.BaseExpression]], aliases: set[str]) -> None:
        self.locals, self.aliases = locals_, aliases
        self.extents: dict[str, cst.BaseExpression] = {}

    def visit_For(self, n: cst.For) -> None:
        if (
            not isinstance(n.target, cst.Name)
            or not isinstance(n.iter, cst.Call)
            or not n.iter.args
        ):
            return
        extent = n.iter.args[0].value
        if isinstance(extent, cst.Name) and len(self.locals.get(extent.value, [])) == 1:
            extent = self.locals[extent.value][0]
        pair = _ceildiv_args(extent)
        if pair and isinstance(pair[1], cst.Name) and pair[1].value in self.aliases:
            self.extents[n.target.value] = pair[0]


class _GroupIndex(cst.CSTVisitor):
    """`S[.., v]` where v walks knob tiles of X and S's dimension is `T.ceildiv(X, G)`: knob must be G."""

    def __init__(
        self,
        f: Facts,
        tensors: dict[str, list[cst.BaseExpression]],
        loops: dict[str, cst.BaseExpression],
        aliases: set[str],
        chain: tuple[Function, ...],
    ) -> None:
        self.f, self.tensors, self.loops, self.aliases, self.chain = (
            f,
            tensors,
            loops,
            aliases,
            chain,
        )
        self.rules: list[Rule] = []

    def visit_Subscript(self, n: cst.Subscript) -> None:
        if not isinstance(n.value, cst.Name) or n.value.value not in self.tensors:
            return
        dims = self.tensors[n.value.value]
        for i, el in enumerate(n.slice):
            idx = el.slice.value if isinstance(el.slice, cst.Index) else None
            if not (isinstance(idx, cst.Name) and idx.value in self.loops) or i >= len(dims):
                continue
            pair = _ceildiv_args(dims[i])
            if (
                pair
                and _code(pair[0]) == _code(self.loops[idx.value])
                and not (isinstance(pair[1], cst.Name) and pair[1].value in self.aliases)
            ):
                self.rules.append(Rule("equal", pair[1], self.chain, self.f.line(n), _code(n)))
