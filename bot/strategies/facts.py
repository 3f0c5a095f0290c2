"""What one kernel source says, parsed once: its functions, calls, assignments and argparse options.

The kernel factories (functions that directly hold a `@T.prim_func`), every
function's parameters, defaults, direct assignments, asserts and returned
names, every call with the functions around it, module-level assignments and
argparse defaults. bot/strategies/binding.py resolves names over these facts;
bot/strategies/evaluate.py computes small expressions with them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Concatenate, ParamSpec, TypeVar, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from bot.strategies import envdefault
from bot.strategies.source import ParseFailure, bool_value, dotted, int_value, line_of, parse


@dataclass(frozen=True)
class Site:
    """The literal that sets a knob's effective value."""

    name: (
        str  # the name the literal is written under (constant, parameter, argparse dest, dict key)
    )
    kind: str  # constant | local | default | keyword | positional | argparse | dict | entry
    line: int
    value: int | bool
    node: cst.BaseExpression

    def where(self) -> str:
        if self.kind == "entry":
            return f"the one entry of a configuration list, at line {self.line}"
        return f"{self.kind} at line {self.line}"


@dataclass(frozen=True)
class Loop:
    """A `for` statement: the names it binds take one value per pass."""

    line: int
    target: cst.BaseAssignTargetExpression  # `block_N`, `(M, N, block_M, block_N)`
    iter: cst.BaseExpression  # `[8, 16]`, `test_configs`, `range(3)`
    node: cst.For | None = field(default=None, compare=False)  # the statement itself


@dataclass
class Function:
    node: cst.FunctionDef
    name: str
    parents: tuple[Function, ...]  # enclosing functions, outermost first
    params: list[str]  # positional parameters in order
    defaults: dict[str, cst.BaseExpression]
    assigns: dict[str, list[cst.BaseExpression]] = field(
        default_factory=dict
    )  # direct body, name -> values
    loads: set[str] = field(
        default_factory=set
    )  # every Name loaded anywhere inside (nested included)
    prim_funcs: list[cst.FunctionDef] = field(default_factory=list)  # directly nested @T.prim_func
    asserts: list[cst.Assert] = field(default_factory=list)  # direct body
    returns: list[str] = field(
        default_factory=list
    )  # names returned (`return _func`: an inner factory)
    loop_targets: dict[str, Loop] = field(default_factory=dict)  # for-loop target -> its loop
    # for-loop target -> every loop that binds it, in source order (two loops may share one)
    loops_of: dict[str, list[Loop]] = field(default_factory=dict)
    # name -> (tuple target, value) of `M, N, block_M = cfg` (a value not spelled as a tuple)
    unpacked: dict[str, tuple[cst.BaseExpression, cst.BaseExpression]] = field(default_factory=dict)

    @property
    def chain(self) -> tuple[Function, ...]:
        return (*self.parents, self)


@dataclass
class Call:
    node: cst.Call
    scope: tuple[Function, ...]  # functions enclosing the call, outermost first


def _is_prim_func(fn: cst.FunctionDef) -> bool:
    return any(
        dotted(d.decorator if not isinstance(d.decorator, cst.Call) else d.decorator.func).endswith(
            "prim_func"
        )
        for d in fn.decorators
    )


class _Loads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def names_in(node: cst.CSTNode) -> set[str]:
    v = _Loads()
    node.visit(v)
    return v.names


def flowing(names: set[str], assigns: list[tuple[set[str], set[str]]]) -> set[str]:
    """`names` and every target of an assignment (targets, names read) that reads one of
    them, followed to a fixed point: the names a value flows into."""
    out = set(names)
    changed = True
    while changed:
        changed = False
        for targets, reads in assigns:
            if reads & out and not targets <= out:
                out |= targets
                changed = True
    return out


class _Reads(_Loads):
    """Variables an expression reads: not an attribute's name (`args.block_M`) nor a keyword
    (`f(block_M=1)`)."""

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def reads_of(node: cst.CSTNode) -> set[str]:
    v = _Reads()
    node.visit(v)
    return v.names


def _plain(node: cst.BaseExpression) -> bool:
    """A name, an attribute or a tuple of them: reading it does nothing else."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_plain(e.value) for e in node.elements)
    return isinstance(node, (cst.Name, cst.Attribute))


class _Kept(_Loads):
    def visit_Assign(self, node: cst.Assign) -> bool:
        # `_ = n_num`: a value thrown away (a design skeleton's placeholder) reaches nothing;
        # `_ = T.call_extern(..., n_num)` still runs the call
        return not (
            all(isinstance(t.target, cst.Name) and t.target.value == "_" for t in node.targets)
            and _plain(node.value)
        )


def names_kept(node: cst.CSTNode) -> set[str]:
    """The names `node` reads, less those read only into `_` (`_ = n_num`)."""
    v = _Kept()
    node.visit(v)
    return v.names


class _Finds(cst.CSTVisitor):
    def __init__(self, inner: cst.CSTNode) -> None:
        self.inner, self.found = inner, False

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.found = self.found or node is self.inner
        return not self.found


def contains(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """True when `inner` (this very node) is `node` or inside it."""
    v = _Finds(inner)
    node.visit(v)
    return v.found


def _blocks(node: cst.CSTNode) -> list[tuple[cst.CSTNode, Sequence[cst.BaseStatement]]]:
    """The statement lists directly under a compound statement (or a function), with their owner."""
    out: list[tuple[cst.CSTNode, Sequence[cst.BaseStatement]]] = []
    for attr in ("body", "orelse", "finalbody"):
        b = getattr(node, attr, None)
        if isinstance(b, cst.IndentedBlock):
            out.append((node, b.body))
        elif isinstance(b, (cst.Else, cst.Finally)):
            out += _blocks(b)
        elif isinstance(b, cst.If):  # `elif`
            out.append((node, [b]))
    for h in getattr(node, "handlers", ()):
        out += _blocks(h)
    return out


def _path(
    node: cst.CSTNode, use: cst.CSTNode
) -> list[tuple[cst.CSTNode, Sequence[cst.BaseStatement], int]]:
    """(owner, statements, index) of each statement on the way from `node` down to `use`."""
    for owner, stmts in _blocks(node):
        for i, s in enumerate(stmts):
            if contains(s, use):
                inner = [] if isinstance(s, cst.SimpleStatementLine) else _path(s, use)
                return [(owner, stmts, i), *inner]
    return []


def _binds(node: cst.CSTNode, name: str) -> bool:
    """Whether `name` may be bound anywhere in `node` (an assignment, a loop or `with` target,
    ...; a name an attribute or item target hangs off counts, to be safe)."""
    return any(name in names_in(t) for t in _targets(node))


class _Targets(cst.CSTVisitor):
    """Every binding target inside a node: assignments, loop and `with` targets, walruses."""

    def __init__(self) -> None:
        self.out: list[cst.CSTNode] = []

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self.out.append(n.target)

    def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
        self.out.append(n.target)

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        self.out.append(n.target)

    def visit_For(self, n: cst.For) -> None:
        self.out.append(n.target)

    def visit_AsName(self, n: cst.AsName) -> None:
        self.out.append(n.name)

    def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
        self.out.append(n.target)


def _targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    v = _Targets()
    node.visit(v)
    return v.out


def reaching(name: str, use: cst.CSTNode, root: cst.FunctionDef) -> cst.BaseExpression | None:
    """The value `name` holds at `use` inside `root`, where straight-line code says so: the last
    plain `name = value` before the use, in the use's own block or an enclosing one, with no other
    binding of the name between them (inside a compound statement passed over, or later in a loop
    body around the use, which the next trip would see first). None when that is not clear.

    A tail computed in steps reads through it: `t = i * block_n; t = seq_len - t;
    t = T.min(block_n, t)` holds `T.min(block_n, t)` at the copy that follows."""
    for owner, stmts, i in reversed(_path(root, use)):
        if isinstance(owner, (cst.For, cst.While)) and any(_binds(s, name) for s in stmts[i + 1 :]):
            return None
        for s in reversed(stmts[:i]):
            if not isinstance(s, cst.SimpleStatementLine):
                if _binds(s, name):
                    return None
                continue
            for small in reversed(s.body):
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and small.targets[0].target.value == name
                ):
                    return small.value
                if _binds(small, name):
                    return None
    return None


def _simple_targets(stmt: cst.Assign) -> list[tuple[str, cst.BaseExpression]]:
    out: list[tuple[str, cst.BaseExpression]] = []
    for target in stmt.targets:
        t = target.target
        if isinstance(t, cst.Name):
            out.append((t.value, stmt.value))
        elif (
            isinstance(t, cst.Tuple)
            and isinstance(stmt.value, cst.Tuple)
            and len(t.elements) == len(stmt.value.elements)
        ):
            for te, ve in zip(t.elements, stmt.value.elements, strict=True):
                if isinstance(te.value, cst.Name):
                    out.append((te.value.value, ve.value))
        elif isinstance(t, (cst.Tuple, cst.List)):
            # `B, H, L, D = q.shape`: bound here to a part of a value that is not spelled out,
            # so the names are local (never the same-named module names) and not literals
            for name in names_in(t):
                out.append((name, stmt.value))
    return out


class _Collector(cst.CSTVisitor):
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.stack: list[Function] = []
        self.functions: list[Function] = []
        self.calls: list[Call] = []
        self.module_assigns: dict[str, list[cst.BaseExpression]] = {}
        self.argparse: dict[str, list[Site]] = {}
        self.env_defaults: list[tuple[str, cst.Call]] = []  # `default=env_int("X", 256)`
        self.switches: dict[str, bool] = {}  # store_true/store_false options without a default
        self.module_loops: dict[str, Loop] = {}
        self.module_unpacked: dict[str, tuple[cst.BaseExpression, cst.BaseExpression]] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        p = node.params
        params = [x.name.value for x in (*p.posonly_params, *p.params)]
        defaults = {
            x.name.value: x.default
            for x in (*p.posonly_params, *p.params, *p.kwonly_params)
            if x.default is not None
        }
        fn = Function(node, node.name.value, tuple(self.stack), params, defaults)
        fn.loads = names_in(node.body)
        if self.stack and _is_prim_func(node):
            self.stack[-1].prim_funcs.append(node)
        self.functions.append(fn)
        self.stack.append(fn)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def _assigns(self) -> dict[str, list[cst.BaseExpression]]:
        return self.stack[-1].assigns if self.stack else self.module_assigns

    def visit_Assign(self, node: cst.Assign) -> None:
        for name, value in _simple_targets(node):
            self._assigns().setdefault(name, []).append(value)
        for target in node.targets:  # `M, N, block_M = cfg`: each name is a part of cfg
            t = target.target
            if isinstance(t, (cst.Tuple, cst.List)) and not isinstance(
                node.value, (cst.Tuple, cst.List)
            ):
                unpacked = self.stack[-1].unpacked if self.stack else self.module_unpacked
                for name in names_in(t):
                    unpacked[name] = (t, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self._assigns().setdefault(node.target.value, []).append(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):  # `x *= 2`: no longer a plain literal binding
            self._assigns().setdefault(node.target.value, []).append(node.value)

    def visit_For(self, node: cst.For) -> None:
        targets = self.stack[-1].loop_targets if self.stack else self.module_loops
        loop = Loop(line_of(self.wrapper, node), node.target, node.iter, node)
        for name in names_in(node.target):
            targets.setdefault(name, loop)
            if self.stack:
                self.stack[-1].loops_of.setdefault(name, []).append(loop)

    def visit_Return(self, node: cst.Return) -> None:
        if self.stack and isinstance(node.value, cst.Name):
            self.stack[-1].returns.append(node.value.value)

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.stack:
            self.stack[-1].asserts.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(Call(node, tuple(self.stack)))
        if dotted(node.func).endswith("add_argument"):
            self._argparse(node)

    def _argparse(self, node: cst.Call) -> None:
        dest = None
        for a in node.args:
            if a.keyword is None and isinstance(a.value, cst.SimpleString):
                text = a.value.evaluated_value
                if isinstance(text, str) and text.startswith("--"):
                    dest = text[2:].replace("-", "_")
                    break
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        dest_node = kw.get("dest")
        if isinstance(dest_node, cst.SimpleString):
            dest = str(dest_node.evaluated_value)
        default = kw.get("default")
        value = literal(default)
        action = kw.get("action")
        if dest and default is None and isinstance(action, cst.SimpleString):
            implicit = {"store_true": False, "store_false": True}.get(str(action.evaluated_value))
            if implicit is not None:  # `action="store_true"` with no default: False
                self.switches[str(dest)] = implicit
        if dest and isinstance(default, cst.Call) and value is None:
            self.env_defaults.append((str(dest), default))  # resolved once functions are known
        if dest and default is not None and value is not None:
            self.argparse.setdefault(str(dest), []).append(
                Site(str(dest), "argparse", line_of(self.wrapper, default), value, default)
            )


def literal(node: cst.BaseExpression | None) -> int | bool | None:
    b = bool_value(node)
    return b if b is not None else int_value(node)


K = TypeVar("K")  # what Facts.kept keeps


@dataclass
class Facts:
    wrapper: MetadataWrapper
    functions: list[Function]
    calls: list[Call]
    module_assigns: dict[str, list[cst.BaseExpression]]
    argparse: dict[str, list[Site]]
    module_loops: dict[str, Loop] = field(default_factory=dict)  # for-loop target -> its loop
    module_unpacked: dict[str, tuple[cst.BaseExpression, cst.BaseExpression]] = field(
        default_factory=dict
    )
    switches: dict[str, bool] = field(default_factory=dict)  # `--tune` (store_true): False
    # what other modules derive from this parse (on_facts): it lives and dies with the parse
    derived: dict[Hashable, object] = field(default_factory=dict, repr=False, compare=False)

    def kept(self, key: Hashable, compute: Callable[[], K]) -> K:
        """`compute()` the first time `key` is asked of this parse, the kept answer after: for
        what every knob or loop of the file asks again. Callers must not mutate the answer."""
        if key not in self.derived:
            self.derived[key] = compute()
        return cast(K, self.derived[key])

    @property
    def factories(self) -> list[Function]:
        """Functions that directly hold a @T.prim_func (the kernel builders)."""
        return [f for f in self.functions if f.prim_funcs]

    def line(self, node: cst.CSTNode) -> int:
        return line_of(self.wrapper, node)

    def chain_at(self, line: int) -> tuple[Function, ...]:
        """The functions enclosing source line `line`, outermost first (() at module level)."""
        positions = self.wrapper.resolve(PositionProvider)
        inside = [
            fn
            for fn in self.functions
            if positions[fn.node].start.line <= line <= positions[fn.node].end.line
        ]
        return max((fn.chain for fn in inside), key=len, default=())


P = ParamSpec("P")
R = TypeVar("R")


def on_facts(fn: Callable[Concatenate[str, P], R]) -> Callable[Concatenate[str, P], R]:
    """Cache `fn(source, ...)` on the parse `facts(source)` returns. Results that hold CST nodes
    must share one parse: caches of their own could outlive each other, and a site found in one
    parse cannot be replaced in another's module. A source that does not parse is not cached."""

    signature = inspect.signature(fn)

    @wraps(fn)
    def cached(source: str, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            memo = facts(source).derived
        except ParseFailure:
            return fn(source, *args, **kwargs)
        # one key per request however it is spelled: positional or keyword, a default left
        # out or passed, a list or a tuple (`inventory(src)` is `inventory(src, harness=...)`)
        bound = signature.bind(source, *args, **kwargs)
        bound.apply_defaults()
        key = (
            fn.__qualname__,
            tuple((n, _hashable(v)) for n, v in list(bound.arguments.items())[1:]),
        )
        if key not in memo:
            memo[key] = fn(source, *args, **kwargs)
        return cast(R, memo[key])

    return cached


def _hashable(value: object) -> Hashable:
    """`value` as a cache key part: lists and sets as tuples (their items in order)."""
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_hashable(v) for v in value)
    return cast(Hashable, value)


@lru_cache(maxsize=256)
def facts(source: str) -> Facts:
    """Parsed facts of a source (raises ParseFailure). Cached: callers must not mutate."""
    wrapper = parse(source)
    c = _Collector(wrapper)
    wrapper.visit(c)
    for dest, call in c.env_defaults:  # an environment-override helper's literal fallback
        node = envdefault.fallback(call, c.functions)
        if node is not None:
            value = literal(node)
            assert value is not None
            c.argparse.setdefault(dest, []).append(
                Site(dest, "argparse", line_of(wrapper, node), value, node)
            )
    return Facts(
        wrapper,
        c.functions,
        c.calls,
        c.module_assigns,
        c.argparse,
        c.module_loops,
        c.module_unpacked,
        c.switches,
    )


def follow_assigned(node: cst.BaseExpression, chain: tuple[Function, ...]) -> cst.BaseExpression:
    """`node`, or what a name assigned once in the kernel or its factory holds (up to four
    steps): `bx` -> `blockx * block_M`, `n_num` -> `T.ceildiv(N, block_N)`."""
    for _ in range(4):
        if not isinstance(node, cst.Name):
            return node
        for fn in reversed(chain):
            values = fn.assigns.get(node.value)
            if values is not None:
                if len(values) != 1:
                    return node
                node = values[0]
                break
        else:
            return node
    return node


def kernel_functions(f: Facts, factories: list[Function]) -> list[Function]:
    """The @T.prim_func functions the factories hold, as the file's Function facts."""
    by_node = {id(fn.node): fn for fn in f.functions}
    return [
        by_node[id(pf)] for factory in factories for pf in factory.prim_funcs if id(pf) in by_node
    ]
