"""Knob transforms: change the value of ONE named integer (or bool) knob.

In a TileLang source (one with a `@T.prim_func` factory) a knob the kernel
factories read is bound scope-correctly and checked against the kernel's own
rules (bot/strategies/inventory.py, binding.py, constraints.py); the
name-based rules below apply to everything else (the CPU demo ops).

A knob lives at one of these sites, found by name:

- a module constant              `BLOCK_M = 64`        (also `BLOCK_M: int = 64`)
- a local constant in a factory  `block_M, block_N = 64, 64`
- a factory default              `def matmul(M, N, block_M=128):`
- a call-site keyword            `matmul(1024, block_M=128)` / `T.Pipelined(n, num_stages=2)`
- a call-site positional         `matmul(1024, 1024, 128)` where `matmul`'s 3rd parameter is `block_M`

The effective value is the one the running kernel sees, so call sites win
over constants, and constants over defaults. If the winning level has more
than one site the change would not be ONE logical change: refuse and say
where the sites are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.config.schema import DEFAULT_HARNESS, DeclaredShape, Knob
from bot.strategies import imported, inventory, shapes
from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.binding import Resolver
from bot.strategies.facts import facts, on_facts
from bot.strategies.source import (
    ParseFailure,
    bool_value,
    int_value,
    line_of,
    literal_node,
    make_variant,
    replace_node,
)

# Call sites win over constants, constants over defaults (lower = wins).
_LEVEL = {
    "keyword": 0,
    "positional": 0,
    "constant": 1,
    "local": 1,
    "argparse": 1,
    "dict": 1,
    "entry": 1,
    "default": 2,
}
BLOCK_NAME = re.compile(r"^(block|BLOCK)_?[A-Za-z0-9_]*$")


@dataclass(frozen=True)
class KnobSite:
    name: str
    kind: str  # constant | local | default | keyword | positional | argparse | dict | entry
    line: int
    value: int | bool
    node: cst.BaseExpression  # the literal to replace

    def where(self) -> str:
        if self.kind == "entry":
            return f"the one entry of a configuration list, at line {self.line}"
        return f"{self.kind} at line {self.line}"


def _literal(node: cst.BaseExpression | None) -> int | bool | None:
    b = bool_value(node)
    return b if b is not None else int_value(node)


class _SiteFinder(cst.CSTVisitor):
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.sites: list[KnobSite] = []
        self.indirect: list[tuple[str, str, int]] = []  # (knob, name it is bound to, line)
        self.functions: dict[str, list[str]] = {}  # factory name -> positional parameter names
        self.calls: list[cst.Call] = []
        self.depth = 0

    def _add(self, name: str, kind: str, node: cst.BaseExpression) -> None:
        value = _literal(node)
        if value is not None:
            self.sites.append(KnobSite(name, kind, line_of(self.wrapper, node), value, node))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1
        params = node.params
        self.functions.setdefault(
            node.name.value, [p.name.value for p in (*params.posonly_params, *params.params)]
        )
        for p in (*params.posonly_params, *params.params, *params.kwonly_params):
            if p.default is not None:
                self._add(p.name.value, "default", p.default)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= 1

    def _kind(self) -> str:
        return "local" if self.depth else "constant"

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Name):
                self._add(t.value, self._kind(), node.value)
            elif (
                isinstance(t, cst.Tuple)
                and isinstance(node.value, cst.Tuple)
                and len(t.elements) == len(node.value.elements)
            ):
                for te, ve in zip(t.elements, node.value.elements, strict=True):
                    if isinstance(te.value, cst.Name):
                        self._add(te.value.value, self._kind(), ve.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self._add(node.target.value, self._kind(), node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)
        for arg in node.args:
            if arg.keyword is not None:
                if _literal(arg.value) is not None:
                    self._add(arg.keyword.value, "keyword", arg.value)
                elif isinstance(arg.value, cst.Name):
                    self.indirect.append(
                        (arg.keyword.value, arg.value.value, line_of(self.wrapper, arg.value))
                    )

    def finish(self) -> None:
        """Positional call-site arguments of factories defined in this module."""
        for call in self.calls:
            if not isinstance(call.func, cst.Name) or call.func.value not in self.functions:
                continue
            names = self.functions[call.func.value]
            for i, arg in enumerate(call.args):
                if arg.keyword is not None or arg.star or i >= len(names):
                    break
                if _literal(arg.value) is not None:
                    self._add(names[i], "positional", arg.value)
                elif isinstance(arg.value, cst.Name):
                    self.indirect.append(
                        (names[i], arg.value.value, line_of(self.wrapper, arg.value))
                    )


@on_facts  # the planner asks about the same best source many times per step
def find_sites(source: str) -> tuple[MetadataWrapper, list[KnobSite], list[tuple[str, str, int]]]:
    """Every literal knob site of the source (callers must not mutate the cached lists)."""
    f = facts(source)
    wrapper = f.wrapper  # one parse shared with the scope-aware binding: same nodes
    finder = _SiteFinder(wrapper)
    wrapper.visit(finder)
    finder.finish()
    # `parser.add_argument("--block_M", default=128)`: the option's default is a site of its own
    finder.sites.extend(
        KnobSite(s.name, s.kind, s.line, s.value, s.node)
        for sites in f.argparse.values()
        for s in sites
    )
    return wrapper, finder.sites, finder.indirect


Harness = tuple[str, ...]  # the functions a harness calls by name (OpConfig.harness_functions)


def locate(source: str, name: str, harness: Harness = DEFAULT_HARNESS) -> KnobSite | str:
    """The one site that sets knob `name`, or a sentence saying why there is none."""
    try:
        _, sites, indirect = find_sites(source)
    except ParseFailure as exc:
        return str(exc)
    bound = _bound(source, name, harness)
    if bound is not None:
        return bound
    return _choose(name, sites, indirect)


def _bound(source: str, name: str, harness: Harness) -> KnobSite | str | None:
    """The scope-correct site of a name the kernel factories read; None when none reads it."""
    found = inventory.resolve(source, name, harness)
    if found is None or isinstance(found, str):
        return found
    s = found.site
    return KnobSite(s.name, s.kind, s.line, s.value, s.node)


def _choose(
    name: str,
    sites: list[KnobSite],
    indirect: list[tuple[str, str, int]],
    seen: frozenset = frozenset(),
) -> KnobSite | str:
    mine = [s for s in sites if s.name == name]
    # `f(num_stages=num_stages)` only forwards a parameter: not a site of its own.
    bound = [(n, line) for k, n, line in indirect if k == name and n != name]
    if bound:
        # `f(block_M=BM)`: the call site wins, so follow BM to its constant.
        if len(bound) > 1 or any(s.kind in ("keyword", "positional") for s in mine):
            lines = ", ".join(str(line) for _, line in bound)
            return f"knob '{name}' is passed at several call sites (lines {lines}); one change cannot pick one"
        target, line = bound[0]
        if target in seen:
            return f"knob '{name}' is passed as '{target}' (line {line}) in a cycle of names"
        found = _choose(
            target, [s for s in sites if s.kind in ("constant", "local")], [], seen | {name}
        )
        if isinstance(found, str):
            return f"knob '{name}' is passed as '{target}' (line {line}), which is not a single integer constant"
        return found
    if not mine:
        return f"knob '{name}' is not set by an integer literal anywhere (module constant, default or call site)"
    best = min(_LEVEL[s.kind] for s in mine)
    top = [s for s in mine if _LEVEL[s.kind] == best]
    if len(top) > 1:
        where = ", ".join(s.where() for s in top)
        return f"knob '{name}' is set at {len(top)} places ({where}); one logical change cannot pick one"
    return top[0]


def discover(source: str, harness: Harness = DEFAULT_HARNESS) -> list[str]:
    """Block-size-like names (block_*/BLOCK_*) set by a literal, in source order.

    In a TileLang source: only the names a kernel reads that are bound to one
    literal (`dropped(source)` lists the others, with reasons).
    """
    inv = inventory.inventory(source, harness)
    if inv.tilelang:
        return [k.name for k in inv.knobs]
    away = {d.name for d in _imported(source, harness)}
    return [n for n in _block_names(source) if n not in away]


def _block_names(source: str) -> list[str]:
    """Block-like names set by an integer literal, in source order."""
    try:
        _, sites, _ = find_sites(source)
    except ParseFailure:
        return []
    names: list[str] = []
    for s in sorted(sites, key=lambda s: s.line):
        if BLOCK_NAME.match(s.name) and not isinstance(s.value, bool) and s.name not in names:
            names.append(s.name)
    return names


def _imported(source: str, harness: Harness) -> list[inventory.Dropped]:
    """Block-like names passed only to a kernel factory imported from another module, each
    with the reason (bot/strategies/imported.py): the kernel's rules are not in this file."""
    inv = inventory.inventory(source, harness)
    listed = {k.name for k in inv.knobs} | {d.name for d in inv.dropped}
    out: list[inventory.Dropped] = []
    try:
        f = facts(source)
    except ParseFailure:
        return []
    for name in _block_names(source):
        why = imported.imported_only(f, name) if name not in listed else None
        if why is not None:
            out.append(inventory.Dropped("block_size", name, why))
    return out


def dropped(source: str, harness: Harness = DEFAULT_HARNESS) -> list[inventory.Dropped]:
    """Block-like names that are not tuned, each with its reason (a TileLang source's names
    its kernels read but cannot be tuned; names passed only to an imported kernel factory)."""
    return list(inventory.inventory(source, harness).dropped) + _imported(source, harness)


def imported_notes(source: str, names: list[str]) -> list[str]:
    """For declared knobs passed only to an imported kernel factory: that tunebot plans the
    declared values without checking them against a kernel it cannot read."""
    try:
        f = facts(source)
    except ParseFailure:
        return []
    out: list[str] = []
    for name in names:
        why = imported.imported_only(f, name)
        if why is not None:
            why = why.removesuffix("; it is not tuned")
            out.append(
                f"{name}: {why}; the values tune.yaml declares are planned as declared, unchecked"
            )
    return out


def notes(source: str, harness: Harness = DEFAULT_HARNESS) -> list[str]:
    """For each tuned knob of a TileLang source whose edit leaves some calls as they are (they
    pass their own literal): those literals, so the dry run and the report name them."""
    return [k.note for k in inventory.inventory(source, harness).knobs if k.note]


DeclaredShapes = tuple[DeclaredShape, ...]  # the op's declared shapes (OpConfig.shapes)


def legal_values(
    source: str,
    name: str,
    values: tuple,
    declared: DeclaredShapes = (),
    harness: Harness = DEFAULT_HARNESS,
) -> tuple[tuple, list[tuple[int, str]]]:
    """`values` that meet the kernel's own rules for knob `name` (with the op's declared shapes
    filling the sizes the kernel leaves open), and (value, reason) for the rest."""
    info = inventory.resolve(source, name, harness)
    if info is None or isinstance(info, str):
        return tuple(values), []
    return info.legal(tuple(values), declared)


@lru_cache(maxsize=256)  # asked once per planning step about the same best source
def unused_shapes(
    source: str, declared: DeclaredShapes, harness: Harness = DEFAULT_HARNESS
) -> tuple[str, ...]:
    """One sentence per declared shape the kernel's rules cannot use, with the reason."""
    if not declared:
        return ()
    try:
        f = facts(source)
    except ParseFailure:
        return ()
    if not f.factories:
        return tuple(
            f"shape {s.name} ({s.origin}) not used: the source has no TileLang kernel factory "
            "(`@T.prim_func`) whose rules could use it"
            for s in declared
        )
    out = shapes.unused(f, Resolver(f, harness), list(f.factories), declared)
    for info in inventory.inventory(source, harness).knobs:
        c = info.constraints
        sizes, origins = c.declared_sizes(declared)
        for name, size, problem in c.contradicted(info.value, sizes, origins):
            out.append(
                f"shape {name}={size} ({origins[(name, size)]}) not used for {info.name}: the "
                f"current {info.name}={info.value} already breaks the kernel's rule with it "
                f"({problem}), so the declaration does not describe the kernel as it runs"
            )
    return tuple(out)


def refusal_lines(strategy: str, name: str, refused: list[tuple[int, str]]) -> list[str]:
    """One line per refused value of a knob, for the dry run, opt_log.md and the report."""
    return [f"{strategy}: {name}={value} refused: {reason}" for value, reason in refused]


def current_value(source: str, name: str, harness: Harness = DEFAULT_HARNESS) -> int | bool | None:
    site = locate(source, name, harness)
    return None if isinstance(site, str) else site.value


def check_constraints(knob: Knob, value: int) -> str | None:
    """Why `value` breaks the knob's declared constraints, or None."""
    from bot.strategies.registry import STRATEGIES  # late: the registry imports this module

    strategy = STRATEGIES.get(knob.strategy)
    sizes = strategy.entry.positive if strategy is not None else None
    if value <= 0 and sizes:
        return f"{knob.name}={value}: {sizes} must be positive"
    if knob.divides is not None and value > 0 and knob.divides % value != 0:
        return f"{knob.name}={value} does not divide {knob.divides}"
    if knob.multiple_of is not None and value % knob.multiple_of != 0:
        return f"{knob.name}={value} is not a multiple of {knob.multiple_of}"
    return None


def kernel_violation(
    source: str,
    name: str,
    value: int,
    declared: DeclaredShapes = (),
    harness: Harness = DEFAULT_HARNESS,
) -> str | None:
    """Why `value` breaks the kernel's own rules for knob `name` (asserts, full tiles, extents,
    with the op's declared shapes for open sizes), or None."""
    info = inventory.resolve(source, name, harness)
    if info is None or isinstance(info, str) or value == info.value:
        return None
    return info.constraints.violation(value, info.value, declared)


# pure: the planner re-derives the same variants while it searches; the declared shapes are part
# of the key, so a changed tune.yaml / DESIGN.md is never answered from an old entry
@lru_cache(maxsize=1024)
def set_knob(
    source: str,
    knob: Knob,
    new: int | bool,
    strategy: str | None = None,
    name: str = "kernel.py",
    declared: DeclaredShapes = (),
    harness: Harness = DEFAULT_HARNESS,
) -> Variant | Refusal:
    """Set knob `knob.name` to `new` at its one effective site (`declared`: the op's shapes;
    `harness`: the functions a harness calls by name, OpConfig.harness_functions)."""
    strategy = strategy or knob.strategy
    try:
        wrapper, _, _ = find_sites(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=strategy)
    site = locate(source, knob.name, harness)
    if isinstance(site, str):
        return Refusal((site,), strategy=strategy)
    if not isinstance(new, bool):
        problem = check_constraints(knob, new) or kernel_violation(
            source, knob.name, new, declared, harness
        )
        if problem:
            return Refusal((problem,), strategy=strategy)
    if site.value == new and type(site.value) is type(new):
        return Refusal((f"{knob.name} is already {new}",), strategy=strategy)
    own = site.name == knob.name or knob.name.endswith(f".{site.name}")  # `gemm.block_M`
    label = knob.name if own else f"{knob.name} (via {site.name})"
    change = Change(
        strategy=strategy,
        description=f"{label}: {site.value} -> {new} ({site.where()})",
        knob=knob.name,
        old=site.value,
        new=new,
    )
    new_source = replace_node(wrapper.module, site.node, literal_node(new))
    return make_variant(source, new_source, change, name)
