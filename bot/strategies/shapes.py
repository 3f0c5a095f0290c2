"""The sizes an op runs with, for extents the kernel factory itself does not fix.

A factory often leaves a shape open: `M = T.symbolic("M")`, or a parameter
bound at run time (`act_quant_kernel(x.size(-1))`). The rules of
bot/strategies/constraints.py then know only that the current block divides
whatever the size is. The file usually says more, by name:

- `get_inputs()` builds the op's inputs from literal sizes (`M, N = 4096, 1024`);
- a function that calls the factory sets the sizes it runs it with, possibly
  several times (`M, N, K = 1024, 512, 2048` ... `M, N, K = 512, 1024, 512`);
- the calls that build the kernel bind an open parameter to different values
  (`rows(SIZE_M, ...)` in one, `rows(96, ...)` in another): each is a size (for a
  knob that a module constant shared by some calls sets, only those calls count);
- a configuration loop, in such a function or at module level, walks a list of
  the sizes (`for B, H, L, D, block_L in [(2, 32, 512, 128, 64), ...]`): every
  entry is a size the op runs with, and so is each part of a configuration
  unpacked by name (`M, N, block_M = cfg`);

Each open name gets every literal value such a function assigns to the same
name. Outside the file, the op's tune.yaml (`shapes:`) and DESIGN.md (a shapes
section) declare sizes by name (bot/config/shapes.py); they join the file's
sizes for the open names. A rule must then hold for every value, wherever it
came from: a block must divide all of them (or not exceed the smallest). Names
the factory fixes itself are never overridden: these values only fill what is
otherwise unknown, and a declaration of such a name is not used (`unused`).
"""

from __future__ import annotations

import itertools
import math

import libcst as cst

from bot.config.schema import DeclaredShape
from bot.strategies import parametrized, rebinding
from bot.strategies.binding import Resolver
from bot.strategies.ceiling import augmented_operands, ceiling
from bot.strategies.facts import Call, Facts, Function, Loop, contains
from bot.strategies.source import dotted, int_value

INPUTS = "get_inputs"  # the op contract's input builder (docs/architecture.md)
IN_FILE = "in-file"  # the origin of a size read from the source itself
MAX_CHOICES = 27  # combinations of several sizes checked per rule


def open_names(f: Facts, resolver: Resolver, factory: Function) -> set[str]:
    """Names the factory reads whose value the file does not fix: symbolic shapes, run-time sizes."""
    found: set[str] = set()
    for fn in factory.chain:
        for name, values in fn.assigns.items():
            v = values[0] if len(values) == 1 else None
            if isinstance(v, cst.Call) and dotted(v.func).endswith("symbolic"):
                found.add(name)
        for name in fn.params:
            if resolver.param(fn, name, 0).value is None:
                found.add(name)
    return found


def symbols(factories: list[Function]) -> dict[str, str]:
    """Symbol name -> the Python name bound to it (`n = T.symbolic("num_tokens")`): a shape may
    be declared under either."""
    out: dict[str, str] = {}
    for factory in factories:
        for fn in factory.chain:
            for name, values in fn.assigns.items():
                v = values[0] if len(values) == 1 else None
                if (
                    isinstance(v, cst.Call)
                    and dotted(v.func).endswith("symbolic")
                    and v.args
                    and isinstance(v.args[0].value, cst.SimpleString)
                ):
                    out.setdefault(str(v.args[0].value.evaluated_value), name)
    return out


def _callers(f: Facts, factory: Function) -> list[Function]:
    """Functions that call the factory (or the factory it is returned from) by name."""
    names = {fn.name for fn in factory.chain}
    out: list[Function] = []
    for call in f.calls:
        if isinstance(call.node.func, cst.Name) and call.node.func.value in names and call.scope:
            caller = call.scope[-1]
            if caller not in out and caller not in factory.chain:
                out.append(caller)
    return out


def _literal_assignments(fn: Function) -> dict[str, list[int]]:
    """name -> every integer literal the function assigns to it (tuple targets included)."""
    out: dict[str, list[int]] = {}
    operands = augmented_operands(fn)  # `block -= 16` does not set block to 16
    for name, values in fn.assigns.items():
        for v in values:
            n = int_value(v) if id(v) not in operands else None
            if n is not None and not isinstance(n, bool) and n > 0:
                out.setdefault(name, []).append(n)
    return out


def _pytest_passes(f: Facts, resolver: Resolver, fn: Function) -> list[dict[str, int]]:
    """The integer sizes each pytest pass gives `fn`'s parameters, when no call in the file
    names `fn` (pytest calls it once per parametrize pass: parametrized.py)."""
    if any(resolver.calls(call, fn) for call in f.calls):
        return []
    return parametrized.int_passes(fn, resolver)


def sizes(
    f: Facts, resolver: Resolver, factories: list[Function], calls: tuple[Call, ...] = ()
) -> dict[str, tuple[int, ...]]:
    """Open name -> the sizes the file runs it with (get_inputs and the factory's callers;
    with `calls`, only the functions holding those calls)."""
    out: dict[str, list[int]] = {}
    for factory in factories:
        wanted = open_names(f, resolver, factory)
        if not wanted:
            continue
        callers = _callers(f, factory)
        if calls:
            callers = [fn for fn in callers if any(c.scope and c.scope[-1] is fn for c in calls)]
        scopes = callers + [fn for fn in f.functions if fn.name == INPUTS]
        for scope in scopes:
            for name, values in _literal_assignments(scope).items():
                if name in wanted:
                    out.setdefault(name, []).extend(values)
            # a test function pytest calls: each `@pytest.mark.parametrize` pass sets its names
            for given in _pytest_passes(f, resolver, scope):
                for name, size in given.items():
                    if name in wanted and size > 0:
                        out.setdefault(name, []).append(size)
        # every loop of a scope (two loops may bind one name, each with its own list)
        loops = [(loop, fn.chain) for fn in scopes for ls in fn.loops_of.values() for loop in ls]
        loops += [(loop, ()) for loop in f.module_loops.values()]
        # what each call that builds the kernel binds an open parameter to (with `calls`: only
        # those), e.g. a module constant some calls pass and a local literal others do
        only = {id(c.node) for c in calls}
        for fn in factory.chain:
            for name in wanted & set(fn.params):
                for call, r in resolver.bindings(fn, name, 0):
                    if (not only or id(call.node) in only) and type(r.value) is int:
                        out.setdefault(name, []).append(r.value)
                    elif not only or id(call.node) in only:  # `min(1024, h)`: at most 1024
                        bound = resolver.bound_by(call, fn, name)
                        top = ceiling(bound[0], call.scope) if bound else None
                        if top is not None:
                            out.setdefault(name, []).append(top)
        # `M, N, block_M = cfg` with cfg spelled out (a configuration entry, a module tuple)
        unpacked = [(name, fn.chain) for fn in scopes for name in fn.unpacked]
        unpacked += [(name, ()) for name in f.module_unpacked]
        for name, chain in unpacked:
            value = resolver.name(name, chain, 0).value if name in wanted else None
            if type(value) is int:
                out.setdefault(name, []).append(value)
        seen: set[int] = set()
        for loop, chain in loops:
            if id(loop) in seen:  # one loop binds several names: read it once
                continue
            seen.add(id(loop))
            for name, values in resolver.loop_values(loop, chain).items():
                if name in wanted and not _rebound_in(f, chain, loop, name):
                    out.setdefault(name, []).extend(values)
    return {name: tuple(dict.fromkeys(values)) for name, values in out.items()}


def _rebound_in(f: Facts, chain: tuple[Function, ...], loop: Loop, name: str) -> bool:
    """True when the loop's body assigns its own target (`M = M - 24`): the entries are not
    the sizes the body goes on with."""
    bindings = rebinding.assignments(f, chain[-1] if chain else None, name)
    if loop.node is None or not isinstance(loop.node.body, cst.IndentedBlock):
        return False
    statements = list(loop.node.body.body)
    # an assignment after the body's last call (`M = M * 2` for a print) changes no call
    last = max((i for i, st in enumerate(statements) if _has_call(st)), default=-1)
    return any(contains(st, b.node) for st in statements[: last + 1] for b in bindings)


def _has_call(node: cst.CSTNode) -> bool:
    class V(cst.CSTVisitor):
        found = False

        def visit_Call(self, n: cst.Call) -> None:
            self.found = True

    v = V()
    node.visit(v)
    return v.found


def choices(
    found: dict[str, tuple[int, ...]], joint: tuple[dict[str, int], ...] = ()
) -> list[dict[str, int]]:
    """Combinations of the sizes to check a rule with (one empty choice when none).

    `joint`: the sizes each call path binds together (bot/strategies/callsizes.py); the names
    they bind take those combinations only, never a pairing no call makes. A size of such a
    name that no call path binds (a declared one) is checked with the first path's others."""
    if joint:
        together = set().union(*joint)
        rest = choices({n: v for n, v in found.items() if n not in together})
        out: list[dict[str, int]] = []
        for combo in joint:
            missing = {n: found[n] for n in together - set(combo) if found.get(n)}
            for fill in choices(missing):
                for other in rest:
                    choice = {**other, **fill, **combo}
                    if choice not in out:
                        out.append(choice)
        for name in sorted(together):
            for v in found.get(name, ()):
                if not any(c.get(name) == v for c in joint):
                    out.append({**out[0], name: v})
        return out
    return _product(found)


def _product(found: dict[str, tuple[int, ...]]) -> list[dict[str, int]]:
    """Every combination of the sizes, or a bounded set of them.

    Every combination while there are at most MAX_CHOICES; beyond that the first MAX_CHOICES
    and, so that no size goes unchecked, each size of each name with the others at their first
    size (a rule on one extent sees every size it can take)."""
    found = {name: values for name, values in found.items() if values}
    if not found:
        return [{}]
    names = sorted(found)
    combos = list(itertools.islice(itertools.product(*(found[n] for n in names)), MAX_CHOICES))
    if math.prod(len(found[n]) for n in names) > MAX_CHOICES:
        first = tuple(found[n][0] for n in names)
        for i, name in enumerate(names):
            for v in found[name][1:]:
                combo = first[:i] + (v,) + first[i + 1 :]
                if combo not in combos:
                    combos.append(combo)
    return [dict(zip(names, combo, strict=True)) for combo in combos]


def merged(
    found: dict[str, tuple[int, ...]],
    open_: frozenset[str],
    declared: tuple[DeclaredShape, ...],
    symbol_names: dict[str, str] | None = None,
) -> tuple[dict[str, tuple[int, ...]], dict[tuple[str, int], str]]:
    """The file's sizes joined with the declared ones for the open names, and where each
    (name, size) came from (IN_FILE, or the declaration's origin: "tune.yaml shapes", ...).
    A declaration under a symbol's own name (`num_tokens`) fills the name bound to it (`n`)."""
    sizes = {name: list(values) for name, values in found.items()}
    origins = {(name, v): IN_FILE for name, values in found.items() for v in values}
    for shape in declared:
        name = shape.name
        if name not in open_:
            name = (symbol_names or {}).get(name, name)
        if name not in open_:
            continue  # the kernel fixes it itself (or never reads it): never overridden
        values = sizes.setdefault(name, [])
        for v in shape.values:
            if v not in values:
                values.append(v)
            origins.setdefault((name, v), shape.origin)
    return {name: tuple(values) for name, values in sizes.items()}, origins


def note(choice: dict[str, int], origins: dict[tuple[str, int], str]) -> str:
    """Where the sizes a refusal used came from: ` (with M=4096 from tune.yaml shapes)`."""
    if not choice:
        return ""
    parts: dict[str, list[str]] = {}
    for name, value in sorted(choice.items()):
        parts.setdefault(origins.get((name, value), IN_FILE), []).append(f"{name}={value}")
    said = [
        f"{', '.join(items)}, a size this file runs the op with"
        if origin == IN_FILE
        else f"{', '.join(items)} from {origin}"
        for origin, items in parts.items()
    ]
    return f" (with {'; '.join(said)})"


def unused(
    f: Facts, resolver: Resolver, factories: list[Function], declared: tuple[DeclaredShape, ...]
) -> list[str]:
    """One sentence per declared name no kernel leaves open (so the declaration is not used)."""
    open_: set[str] = set()
    for factory in factories:
        open_ |= open_names(f, resolver, factory)
    by_symbol = symbols(factories)
    out: list[str] = []
    for shape in declared:
        if shape.name in open_ or by_symbol.get(shape.name) in open_ or not factories:
            continue
        reads = shape.name in f.module_assigns or any(
            shape.name in fn.params or shape.name in fn.assigns
            for factory in factories
            for fn in factory.chain
        )
        why = (
            "the kernel fixes it itself, which a declaration never overrides"
            if reads
            else "no kernel factory reads that name"
        )
        out.append(f"shape {shape.name}={_values(shape.values)} ({shape.origin}) not used: {why}")
    return out


def _values(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(values) == 1 else "[" + ", ".join(map(str, values)) + "]"
