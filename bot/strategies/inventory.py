"""The block-size knobs of a TileLang source, and every name left out with its reason.

A knob is a block-size-like name (block_*/BLOCK_*) that a kernel factory (a
function holding a `@T.prim_func`) reads: one of its parameters or locals, or
of the factories around it. Each is bound to the one literal that sets its
effective value (bot/strategies/binding.py) and carries the kernel's rules
for new values (bot/strategies/constraints.py). Left out, with a reason:

- a name the kernel never reads (a dead parameter): tuning it is a no-op;
- a name the kernel reads only through locals that come out the same for every
  value a run could try (`BLOCK_N = block_n if IN % block_n == 0 else IN` with
  IN=4): tuning it is a no-op too;
- a name bound at several places (two call sites, two kernels sharing it), unless
  one module constant feeds the calls the file runs and the others pass their own
  literals (bot/strategies/callsites.py: the constant is the knob);
- a name set by an expression rather than a literal;
- a name set to 1: one row or element per step is how that kernel is written
  (e.g. one partial sum per tile row), not a tile size to grow; unless it is the grid of a
  kernel that reads the core index it binds (bot/strategies/corecount.py: a core count);
- a name that counts warps or threads (`block_row_warps`): execution units, not a tile;
- a block-like literal (an argparse option, a dict entry, a default) that no
  kernel factory reads.

Sources without a `@T.prim_func` (the CPU demo ops) keep the name-based
discovery of bot/strategies/knobs.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.config.schema import DEFAULT_HARNESS, DeclaredShape
from bot.strategies import callsites, imported, passedas, unbuilt
from bot.strategies.binding import Resolution, Resolver
from bot.strategies.constraints import Check, Constraints, constraints_for
from bot.strategies.corecount import core_count, unread_grid
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import (
    Facts,
    Function,
    Site,
    facts,
    literal,
    names_in,
    names_kept,
    on_facts,
    reads_of,
)
from bot.strategies.granularity import GranularityCheck
from bot.strategies.signature import parameter_names, takes
from bot.strategies.source import ParseFailure, dotted, int_value

BLOCK_NAME = re.compile(r"^(block|BLOCK)_?[A-Za-z0-9_]*$")
# `K_L1`, `N_L0B`: the extent of a tile staged in one memory level
STAGE_TILE = re.compile(r"^[A-Za-z]+_L(1|0[ABC]?)$")
# `tile_n`, `TILE_M`, `tile_size`, `inner_tile`: a tile's size under the other common word
TILE_NAME = re.compile(r"^(tile|TILE)(_[A-Za-z]|_?(size|SIZE))$|(^|_)(tile|TILE)(_|$)")
# a pipeline depth (`num_stages`): listed when a factory takes it and its kernel never reads it
STAGES = re.compile(r"^(num_)?stages$", re.IGNORECASE)
HOST_LOCAL = "a host local "  # how a block-named host local no factory is given is listed
# `block_row_warps`, `BLOCK_THREADS`: how many warps or threads a block runs, not a tile size
UNIT_COUNT = re.compile(r"(?i)(warp|thread)s?(?![a-z])")
BLOCK_WORD = callsites.BLOCK_WORD
# values a run could give a discovered block knob (bot/strategies/builtin.py's space)
TRIED = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class Dropped:
    """A knob, loop or flag that is not planned, and why."""

    strategy: str
    name: str
    reason: str
    # a name discovery leaves to the user (`K_L1`, `tile_n`, `KV_BLOCK`): one tune.yaml
    # declares is read as the file binds it, and this listing does not stand in its way
    declarable: bool = False

    def __str__(self) -> str:
        return f"{self.strategy}: {self.name}: {self.reason}"


@dataclass
class KnobInfo:
    name: str
    site: Site
    value: int
    path: tuple[str, ...]
    constraints: Constraints
    note: str | None = None  # what tuning it leaves alone (calls that pass their own literal)

    def legal(
        self, values: tuple[int, ...], declared: tuple[DeclaredShape, ...] = ()
    ) -> tuple[tuple[int, ...], list[tuple[int, str]]]:
        """The values that meet the kernel's rules (`declared`: the op's declared shapes, for
        the sizes the kernel leaves open), and (value, reason) for the others."""
        ok, refused = [], []
        for v in values:
            problem = (
                None if v == self.value else self.constraints.violation(v, self.value, declared)
            )
            if problem:
                refused.append((v, problem))
            else:
                ok.append(v)
        return tuple(ok), refused


@dataclass
class Inventory:
    tilelang: bool  # False: no @T.prim_func, the name-based rules apply
    knobs: list[KnobInfo]
    dropped: list[Dropped]

    def knob(self, name: str) -> KnobInfo | None:
        return next((k for k in self.knobs if k.name == name), None)


def _live_names(factory: Function, f: Facts) -> set[str]:
    """Names whose value reaches a prim_func body of `factory` (through local assignments)."""
    used: set[str] = set()
    for pf in factory.prim_funcs:
        used |= names_kept(pf)
    scopes = [fn for fn in f.functions if any(p is c for c in factory.chain for p in fn.chain)]
    # helpers nested in the factory's chain that the kernel calls (a `@T.macro`, a plain function)
    # are traced into the prim_func: what their bodies read reaches the kernel too
    helpers = [
        fn
        for fn in f.functions
        if fn.parents
        and any(fn.parents[-1] is c for c in factory.chain)
        and not any(fn.node is pf for pf in factory.prim_funcs)
    ]
    changed = True
    while changed:
        changed = False
        for fn in helpers:
            if fn.name in used:
                new = names_in(fn.node.body) - used
                if new:
                    used |= new
                    changed = True
        for fn in scopes:
            for local, values in fn.assigns.items():
                if local in used:
                    for v in values:
                        new = names_in(v) - used
                        if new:
                            used |= new
                            changed = True
    return used


def _owners(
    f: Facts, wanted=BLOCK_NAME.match, skip: tuple[Function, ...] = ()
) -> dict[str, list[tuple[Function | None, Function, bool]]]:
    """name -> (owner, factory, live) for every wanted name a factory chain holds (factories
    in `skip`, which the run never builds, left out)."""
    out: dict[str, list[tuple[Function | None, Function, bool]]] = {}
    for factory in f.factories:
        if any(factory is s for s in skip):
            continue
        live = _live_names(factory, f)
        for owner in factory.chain:
            own = sorted(parameter_names(owner.node))  # keyword-only and `*args` too
            names = list(dict.fromkeys([*owner.params, *owner.defaults, *own, *owner.assigns]))
            for name in names:
                if wanted(name):
                    out.setdefault(name, []).append((owner, factory, name in live))
            for name in sorted(passedas.block_named(f, owner, wanted)):  # `K_L1` <- `block_K`
                out.setdefault(name, []).append((owner, factory, name in live))
        for name in sorted(live):
            if (
                wanted(name)
                and name in f.module_assigns
                and not any(takes(o, name) or name in o.assigns for o in factory.chain)
            ):
                out.setdefault(name, []).append((None, factory, True))
    return out


def _bind(
    f: Facts, resolver: Resolver, name: str, owners: list[tuple[Function | None, Function, bool]]
) -> KnobInfo | Dropped | list[KnobInfo | Dropped]:
    live = [(o, fac) for o, fac, is_live in owners if is_live]
    unit = UNIT_COUNT.search(name)
    if unit:
        return Dropped(
            "block_size",
            name,
            f"counts {unit.group(1).lower()}s (the execution units a block runs), not the size "
            f"of a tile: a tile size's values would launch that many of them",
        )
    if not live:
        where = ", ".join(sorted({f"{fac.name}()" for _, fac, _ in owners}))
        return Dropped(
            "block_size",
            name,
            f"never read by the kernel ({where}): tuning it cannot change anything",
        )
    results = [(o, fac, resolver.name(name, o.chain if o else ())) for o, fac in live]
    sites = {id(r.site.node): r for _, _, r in results if r.site is not None and r.problem is None}
    if len(sites) > 1:
        found = [r.site for r in sites.values() if r.site]
        split = _split(f, resolver, name, results, found) or _per_factory(
            f, resolver, name, results, found
        )
        if split is not None:  # a factory that holds the name and never reads it: listed too
            dead = {
                id(fac): fac
                for _, fac, is_live in owners
                if not is_live and not any(fac is other for _, other in live)
            }
            # a factory that reads the name from no one literal (a parametrize list, a
            # computed value) beside those the split tunes: listed under its own name
            tuned = {
                id(fac)
                for _, fac, x in results
                if x.site is not None
                and any(isinstance(k, KnobInfo) and x.site.node is k.site.node for k in split)
            }
            unread: dict[str, Dropped] = {}
            for _, fac, x in results:
                if id(fac) not in tuned and (x.site is None or x.problem is not None):
                    unread.setdefault(
                        fac.name,
                        Dropped("block_size", f"{fac.name}.{name}", x.problem or "not a literal"),
                    )
            return (
                split
                + [
                    Dropped(
                        "block_size",
                        f"{fac.name}.{name}",
                        f"never read by the kernel ({fac.name}()): tuning it cannot change "
                        f"anything",
                    )
                    for fac in dead.values()
                ]
                + list(unread.values())
            )
        lines = ", ".join(f"line {r.site.line}" for r in sites.values() if r.site)
        if all(r.site and r.site.kind == "default" for r in sites.values()):
            # each factory's own default, but the factories cannot be named apart
            # (_per_factory): which kernel a change reaches is not known
            return Dropped(
                "block_size",
                name,
                f"bound at {len(sites)} different places ({lines}), each the default of its "
                f"own kernel factory, but the factories cannot be told apart here (one not "
                f"called by its own name in this file, or two of one name), so which kernel "
                f"one change reaches is not known: none is tuned",
            )
        return Dropped(
            "block_size",
            name,
            f"bound at {len(sites)} different places ({lines}) for different "
            f"kernels; one change cannot pick one",
        )
    if not sites:
        problems = "; ".join(dict.fromkeys(r.problem or "not a literal" for _, _, r in results))
        subjects = {r.subject for _, _, r in results}
        (subject,) = subjects if len(subjects) == 1 else (None,)
        if subject and subject != name and BLOCK_WORD.search(subject):
            # the value is written under a caller's name whose calls disagree: listed under it
            return Dropped("block_size", subject, f"{problems} (the kernel reads it as {name})")
        return Dropped("block_size", name, problems)
    r = next(iter(sites.values()))
    assert r.site is not None
    apart = _apart(name, results, r)
    if apart:
        # another kernel factory reads the same name from a binding of its own that cannot be
        # tuned: the knob is this factory's (`vec_select_partial.block_M`), theirs are listed
        owner = next(o for o, _, x in results if x is r)
        knob = f"{owner.name}.{name}" if owner is not None else name
        return [_knob_at(f, resolver, knob, name, r.site, r.path, results), *apart]
    return _knob_at(f, resolver, name, name, r.site, r.path, results)


def _unchecked_reach(
    f: Facts, resolver: Resolver, name: str, site: Site, readers: list[Function]
) -> str | None:
    """`narrow() as tile_m` when a call of a kernel factory other than `readers` (those whose
    rules the knob is checked against) passes an expression reading `name` as bound at
    `site` (`narrow(M, 1024, block_M, 1024)` beside `fill(M, N, block_M, block_N)`); None
    when no such call exists."""
    checked = {id(fac) for fac in readers}
    checked |= {id(fac) for fac in unbuilt.unbuilt(f, resolver.harness)}  # never built: moot
    for fac in f.factories:
        if id(fac) in checked:
            continue
        for fn in fac.chain:
            for call in f.calls:
                if not any(name in reads_of(a.value) for a in call.node.args):
                    continue
                if not resolver.calls(call, fn):
                    continue
                for param in fn.params:
                    bound = resolver.bound_by(call, fn, param)
                    if bound is None or name not in reads_of(bound[0]):
                        continue
                    seen = resolver.name(name, call.scope, 0).site
                    if seen is not None and seen.node is site.node:
                        return f"{fac.name}() as {param} (line {f.line(call.node)})"
    return None


def _chained_names(f: Facts, site: Site) -> list[str]:
    """The other targets of a chained assignment whose one value is the site's literal."""
    scopes = [f.module_assigns, *(fn.assigns for fn in f.functions)]
    return [
        local
        for assigns in scopes
        for local, values in assigns.items()
        if local != site.name and any(v is site.node for v in values)
    ]


def _apart(name: str, results: list, r: Resolution) -> list[Dropped]:
    """Factories that read `name` but not from `r`'s site, each listed under its own name with
    why its binding is not tuned (`vec_select.block_M: bound at 4 call sites ...`)."""
    readers = {id(fac) for _, fac, x in results if x.site is not None and x.site is r.site}
    out: dict[str, Dropped] = {}
    for _, fac, x in results:
        if id(fac) not in readers and (x.site is None or x.problem is not None):
            why = x.problem or "not a literal"
            out.setdefault(fac.name, Dropped("block_size", f"{fac.name}.{name}", why))
    return list(out.values())


def _split(
    f: Facts, resolver: Resolver, name: str, results: list, sites: list[Site]
) -> list[KnobInfo | Dropped] | None:
    """One knob per literal when a kernel parameter is bound at several places under distinct
    block-like names (`staged(M, N, partial_block_N=32, apply_block_N=32)` feeding two
    kernels' `block_N`): each literal is its own knob, named as written. None otherwise."""
    names = [s.name for s in sites]
    if len(set(names)) != len(names) or any(n == name or "block" not in n.lower() for n in names):
        return None
    return [_knob_at(f, resolver, s.name, name, s, _path(results, s), results) for s in sites]


def _per_factory(
    f: Facts, resolver: Resolver, name: str, results: list, sites: list[Site]
) -> list[KnobInfo | Dropped] | None:
    """One knob per factory when each kernel factory binds the name itself (three kernels, each
    with `block_M = 64`, or each with its own default `block_M=16`, built by calls of its own
    name): editing one changes only the kernel that function builds. Each is named after its
    function (`rms_quant.block_M`). A function that builds a kernel with a local of its own
    (a test binding `M, N, block_M, block_N = 1024, 1024, 128, 128` before `fill(M, N, block_M,
    block_N)`) owns that binding the same way: the local is seen only by the calls it makes. A
    literal argument of the one call building a factory is that factory's (`simple_copy_2d.
    block_M`). None otherwise (a site no function owns, two owners of one name)."""
    owners: list[str] = []
    for site in sites:
        readers = [fac for _, fac, r in results if r.site is not None and r.site.node is site.node]
        if not readers:
            return None
        owner = _owner(f, name, site)
        if owner is not None:
            owners.append(owner.name)
        elif site.kind in ("positional", "keyword") and len({id(r) for r in readers}) == 1:
            # a literal written in the one call that builds a factory (`simple_copy_2d(1024,
            # 1024, 128, 128)`): seen by that kernel alone, named after it
            owners.append(readers[0].name)
        else:
            return None
    if len(set(owners)) != len(owners):
        return None
    return [
        _knob_at(f, resolver, f"{o}.{name}", name, s, _path(results, s), results)
        for o, s in zip(owners, sites, strict=True)
    ]


def _owner(f: Facts, name: str, site: Site) -> Function | None:
    """The function whose own binding of `name` is `site`: a local bound once in its body, or
    a default of its signature when the file calls the function by its name (the resolver
    has already found the default live on the run path; a factory the file never calls is a
    library's, whose callers are elsewhere). None for any other site."""
    if site.name != name:
        return None
    if site.kind == "default":
        fn = next((fn for fn in f.functions if fn.defaults.get(name) is site.node), None)
        called = fn is not None and any(
            isinstance(c.node.func, cst.Name) and c.node.func.value == fn.name for c in f.calls
        )
        return fn if called else None
    scope = f.chain_at(site.line)
    if site.kind != "local" or not scope:
        return None
    owner = scope[-1]
    return owner if len(owner.assigns.get(name, [])) == 1 else None


def _path(results: list, site: Site) -> tuple[str, ...]:
    return next(r.path for _, _, r in results if r.site is not None and r.site.node is site.node)


def _knob_at(
    f: Facts,
    resolver: Resolver,
    knob: str,
    name: str,
    site: Site,
    path: tuple[str, ...],
    results: list,
) -> KnobInfo | Dropped:
    """Knob `knob` set by `site`, read by the kernels as `name`; or why it is not tuned."""
    if isinstance(site.value, bool) or not isinstance(site.value, int):
        return Dropped("block_size", knob, f"set to {site.value!r}, not an integer")
    if isinstance(site.node, cst.BinaryOperation):
        # `64 * 1024`: the value is read for the rules, but the author wrote it as arithmetic
        return Dropped(
            "block_size",
            knob,
            f"'{site.name}' is set by an expression at line {site.line}, not by a literal",
        )
    readers = [fac for _, fac, r in results if r.site is not None and r.site.node is site.node]
    if site.value == 1 and not core_count(name, readers):
        return Dropped(
            "block_size",
            knob,
            f"set to 1 ({site.where()}): the kernel takes one row or element per step there, "
            f"and the smallest block a run could try ({TRIED[0]}) would change how it is "
            f"written (e.g. one partial result per tile row), not only a tile size",
        )
    shared = _shared_literal(f, name, site)
    if shared:
        return Dropped("block_size", knob, shared)
    elsewhere = _unchecked_reach(f, resolver, name, site, readers)
    for other in _chained_names(f, site):  # `block_M = block_R = 64`: the literal sets both
        elsewhere = elsewhere or _unchecked_reach(f, resolver, other, site, readers)
    if elsewhere:
        return Dropped(
            "block_size",
            knob,
            f"the literal at line {site.line} also reaches {elsewhere}: a change would move "
            f"that kernel too, whose rules are not checked for this name",
        )
    mine = [(o, fac, r) for o, fac, r in results if r.site is not None and r.site.node is site.node]
    bound = [(o, fac) for o, fac, _ in mine]
    shared = next((r.shared for _, _, r in mine if r.shared is not None), None)
    calls = shared.fed if shared else ()  # the sizes of the calls the constant feeds, only
    info = KnobInfo(knob, site, site.value, path, constraints_for(f, resolver, name, bound, calls))
    info.note = callsites.note(f, shared) if shared else None
    capped = resolver.min_caps.get(id(site.node))
    if capped is not None:
        info.constraints.checks.append(_past_min(name, *capped))
    if info.constraints.layout:
        return Dropped("block_size", knob, info.constraints.layout)
    same = _no_effect(f, resolver, info, bound)
    return Dropped("block_size", knob, same) if same else info


def _past_min(name: str, extent: int, text: str) -> Check:
    """Refuses a value past the other side of `name = min(LIT, extent)`: it runs as the extent."""

    def check(
        value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if value <= extent:
            return None
        if current is not None and current >= extent:
            return (
                f"{name}={value}: {name} is the smaller of the literal and `{text}` = {extent}, "
                f"so any literal past {extent} runs as {extent}, as now: no change"
            )
        return (
            f"{name}={value}: {name} is the smaller of the literal and `{text}` = {extent}, "
            f"so a literal of {value} runs as {extent}, not as {value}: the kernel's rules "
            f"are checked for the value tried, so the value that would run is not the one "
            f"checked"
        )

    return check


def _no_effect(
    f: Facts, resolver: Resolver, info: KnobInfo, bound: list[tuple[Function | None, Function]]
) -> str | None:
    """Why no value a run could try changes what the kernels read, or None.

    A kernel that reads the knob itself is affected. One that reads it only through locals
    computed from it (`BLOCK_N = block_n if ... else IN`) is not when each of those locals
    evaluates to the same value for the current value and every value tried."""
    aliases = set(info.constraints.aliases)
    grid = unread_grid(f.wrapper.module, aliases, [o.node if o else None for o, _ in bound])
    if grid:
        return (
            f"read only as the grid of {grid}: every core runs the whole kernel, so the "
            f"count repeats the same work and splits none"
        )
    found: list[str] = []
    for _, factory in bound:
        read: set[str] = set()
        for pf in factory.prim_funcs:
            read |= names_in(pf)
        if read & aliases:
            return None
        derived: list[tuple[Function, str]] = []
        names = set(aliases)
        changed = True
        while changed:
            changed = False
            for fn in factory.chain:
                for local, values in fn.assigns.items():
                    if local not in names and any(names_in(v) & names for v in values):
                        names.add(local)
                        derived.append((fn, local))
                        changed = True
        seen = [(fn, local) for fn, local in derived if local in read]
        if not seen:
            return None
        for fn, local in seen:
            outcomes = {
                evaluate(cst.Name(local), Env(resolver, fn.chain, 0, dict.fromkeys(aliases, v)))
                for v in (info.value, *TRIED)
            }
            if len(outcomes) != 1 or None in outcomes:
                return None
            line = f.line(fn.assigns[local][0])
            found.append(f"{local} = {outcomes.pop()} (line {line})")
    if not found:
        return None
    return (
        f"the kernel reads it only through {', '.join(dict.fromkeys(found))}, the same for the "
        f"current {info.value} and every value a run could try ({TRIED[0]}-{TRIED[-1]}): "
        f"tuning it cannot change anything"
    )


def _shared_literal(f: Facts, name: str, site: Site) -> str | None:
    """Why the literal reached for `name` is not the block's own: it is a shape or size that the
    file also uses elsewhere (`f(N, block_N=N)`, `vec_add(seq_len, seq_len)`), so editing it would
    change the problem, not only the block. A parameter's default counts too
    (`def attn(heads=64): block_h = heads` with `heads` also in a tensor shape)."""
    if (
        site.kind not in ("local", "constant", "default")
        or site.name == name
        or BLOCK_WORD.search(site.name)
    ):
        return None
    scope = f.chain_at(site.line)  # a default's line lies inside its own function
    root = scope[-1].node if scope and site.kind != "constant" else f.wrapper.module
    uses = _load_count(root, site.name)
    if uses <= 1:
        return None
    return (
        f"its value comes from '{site.name}' ({site.where()}), which the file also reads "
        f"{uses - 1} more time(s) (a shape or size, e.g. the kernel's own extent): editing that "
        f"literal would change the problem, not only the block"
    )


def _load_count(node: cst.CSTNode, name: str) -> int:
    """How many times `name` is read under `node` (text only, an f-string or a name printed
    as it is, `print(N)`, is not a use: it sizes nothing; a computation inside print() is)."""
    count = 0

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal count
            count += n.value == name

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            return False  # a target is a store, not a read

        def visit_AnnAssign(self, n: cst.AnnAssign) -> bool:
            if n.value is not None:  # `block_M: int = 64`: its target is a store too
                n.value.visit(self)
            return False

        def visit_FormattedString(self, n: cst.FormattedString) -> bool:
            return False

        def visit_Call(self, n: cst.Call) -> bool:
            if dotted(n.func) != "print":
                return True
            for a in n.args:  # only what print() shows as it is is left out
                if not isinstance(a.value, (cst.Name, cst.SimpleString, cst.FormattedString)):
                    a.value.visit(self)
            return False

    node.visit(V())
    return count


@on_facts
def inventory(source: str, harness: tuple[str, ...] = DEFAULT_HARNESS) -> Inventory:
    """Knobs and dropped names of `source` (cached; callers must not mutate). `harness`: the
    functions a harness calls by name (OpConfig.harness_functions), which the file runs."""
    try:
        f = facts(source)
    except ParseFailure as exc:
        return Inventory(False, [], [Dropped("block_size", "*", str(exc))])
    if not f.factories:
        return Inventory(False, [], [])
    resolver = Resolver(f, harness)
    knobs: list[KnobInfo] = []
    dropped: list[Dropped] = []
    taken: dict[int, str] = {}  # id(site node) -> knob name
    dead = tuple(unbuilt.unbuilt(f, harness))
    live_owners = _owners(f, skip=dead)
    all_owners = _owners(f)
    for name, owners in all_owners.items():
        if name not in live_owners:
            facs = list({id(fac): fac for _, fac, _ in owners}.values())
            dropped.append(Dropped("block_size", name, unbuilt.reason_for(f, harness, facs)))
            continue
        # the same name in a factory the run never builds, beside those it does: listed apart
        unbuilt_here = {
            id(fac): fac for _, fac, _ in owners if any(fac is d for d in dead)
        }.values()
        for fac in unbuilt_here:
            reason = unbuilt.reason_for(f, harness, [fac])
            dropped.append(Dropped("block_size", f"{fac.chain[0].name}.{name}", reason))
    for name, owners in live_owners.items():
        bound = _bind(f, resolver, name, owners)
        for found in bound if isinstance(bound, list) else [bound]:
            if isinstance(found, Dropped):
                dropped.append(found)
            elif (
                id(found.site.node) not in taken
            ):  # the same literal under another name is one knob
                if found.site.kind == "constant" and BLOCK_WORD.search(found.site.name):
                    found.name = found.site.name  # a module constant keeps its own name (BLOCK_M)
                elif (
                    found.name == name
                    and not BLOCK_NAME.match(name)
                    and BLOCK_NAME.match(found.site.name)
                ):
                    found.name = found.site.name  # `K_L1` passed `block_K`: the literal's name
                taken[id(found.site.node)] = found.name
                knobs.append(found)
    for info in list(knobs):  # a block every tile of which writes one place is no tile
        why = info.constraints.whole_extent(info.value)
        if why is not None:
            knobs.remove(info)
            dropped.append(Dropped("block_size", info.name, why))
    _unread_literals(f, taken, dropped)
    _kernel_locals(f, {k.name for k in knobs} | set(all_owners), dropped)
    _host_locals(f, resolver, taken, {k.name for k in knobs} | set(all_owners), dropped)
    _dead_stage_tiles(f, dropped)
    _inner_block_words(f, {k.name for k in knobs} | set(all_owners), dropped)
    _expression_inputs(f, {k.name for k in knobs}, dropped)
    _overridden_defaults(f, harness, {k.name for k in knobs}, dropped)
    _layouts(knobs, dropped)
    knobs.sort(key=lambda k: (k.site.line, k.name))
    return Inventory(True, knobs, dropped)


def _passed_as_values(module: cst.Module) -> set[str]:
    """Names read other than as the function of a call (`partial(fwd, ..)`, `g = fwd`,
    `tilelang.jit(fwd)`, `return fwd`): a call through such a value is not a call by name."""
    called: set[int] = set()
    loads: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name):
                called.add(id(node.func))

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `mod.fwd`'s attribute is no load of a local `fwd`
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            for part in (node.params, node.body, *node.decorators):
                part.visit(self)  # not the def's own name
            return False

        def visit_Name(self, node: cst.Name) -> None:
            loads.append(node)

    module.visit(V())
    return {n.value for n in loads if id(n) not in called}


def _overridden_defaults(
    f: Facts, harness: tuple[str, ...], known: set[str], dropped: list[Dropped]
) -> None:
    """A block-named parameter default (`def fwd(..., block_N=64)`) that no call in the file
    uses, because every call passes its own value (`fwd(..., BLOCK_N_FWD)`), is listed: the
    knob is what the calls pass, and editing the default would change nothing. Left alone: a
    function the harness calls (with its defaults), one passed as a value (a call through it
    may use the default), and calls with `*args` / `**kw`."""
    listed = known | {d.name for d in dropped}
    values = _passed_as_values(f.wrapper.module)
    for fn in f.functions:
        if fn.name in harness or fn.name in values:
            continue
        calls = [c.node for c in f.calls if dotted(c.node.func) == fn.name]
        if not calls or any(a.star for c in calls for a in c.args):
            continue  # `fwd(*args)`, `fwd(**cfg)`: which parameters a call passes is unread
        p = fn.node.params
        by_keyword = {x.name.value for x in (*p.params, *p.kwonly_params)}
        for name, default in fn.defaults.items():
            if name in listed or not BLOCK_NAME.match(name) or int_value(default) is None:
                continue
            at = fn.params.index(name) if name in fn.params else None
            if all(
                any(
                    a.keyword is not None and a.keyword.value == name and name in by_keyword
                    for a in c.args
                )
                or (at is not None and len([a for a in c.args if a.keyword is None]) > at)
                for c in calls
            ):
                lines = ", ".join(str(n) for n in sorted({f.line(c) for c in calls}))
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"its default in {fn.name}() (line {f.line(default)}) never runs: every "
                        f"call of {fn.name}() in this file passes its own value (line {lines}); "
                        f"what the call passes is what a run tunes"
                    ),
                )


@on_facts
def resolve(
    source: str, name: str, harness: tuple[str, ...] = DEFAULT_HARNESS
) -> KnobInfo | str | None:
    """Knob `name` as the kernel factories read it; a reason when they read it but it cannot be
    tuned; None when no factory reads it (the name-based rules apply)."""
    inv = inventory(source, harness)
    if not inv.tilelang:
        return None
    known = inv.knob(name)
    if known is not None:
        return known
    for d in inv.dropped:
        if d.name == name and not d.declarable and not d.reason.startswith(HOST_LOCAL):
            return d.reason  # (a host local is the user's to declare: the name rules apply)
    # a name the literal is written under (`--block_i`, a dict key) rather than the kernel's own
    written = [k for k in inv.knobs if k.site.name == name]
    if len(written) == 1:
        return written[0]
    f = facts(source)
    fed = callsites.fed_params(f, name)
    if len(fed) == 1 and name not in fed:  # `f(block_I=args.block_i)`: the rules of block_I
        return resolve(source, next(iter(fed)), harness)
    owners = _owners(f, lambda n: n == name, tuple(unbuilt.unbuilt(f, harness))).get(name)
    if not owners:
        return None
    found = _bind(f, Resolver(f, harness), name, owners)
    if isinstance(found, list):  # split into knobs named as written: `name` itself is none
        return f"bound at {len(found)} places, tuned as " + ", ".join(k.name for k in found)
    return found.reason if isinstance(found, Dropped) else found


def _layouts(knobs: list[KnobInfo], dropped: list[Dropped]) -> None:
    """Block-like host names that set the granularity of a table a knob is pinned to
    (bot/strategies/granularity.py): a layout of the file's data, not a tile."""
    listed = {d.name for d in dropped} | {k.name for k in knobs}
    for info in knobs:
        for check in info.constraints.checks:
            if not isinstance(check, GranularityCheck):
                continue
            for name, why in check.layouts().items():
                if BLOCK_NAME.match(name) and name not in listed:
                    listed.add(name)
                    dropped.append(Dropped("block_size", name, why))


def _option_reads(f: Facts, dest: str) -> list[int]:
    """Lines reading argparse option `dest` as an attribute (`args.block_size`)."""
    lines: list[int] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == dest and isinstance(node.value, cst.Name):
                lines.append(f.line(node))

    f.wrapper.module.visit(V())
    return sorted(set(lines))


# a tile size's own name: block_m, BLOCK_N, block_size (not block_id, blockx, block_offset)
SIZE_NAME = re.compile(r"^(block|BLOCK)_?([A-Za-z]|size|SIZE)$")


def _drop(
    listed: set[str],
    dropped: list[Dropped],
    name: str,
    reason: str,
    strategy: str = "block_size",
    declarable: bool = False,
) -> None:
    """List block-like `name` as not tuned, with why (once: `listed` holds what is listed);
    `strategy` is the one that would have tuned it; `declarable`: the user may declare it."""
    listed.add(name)
    dropped.append(Dropped(strategy, name, reason, declarable))


def _kernel_locals(f: Facts, known: set[str], dropped: list[Dropped]) -> None:
    """Tile-size names a prim_func computes in its own body (`block_m = (num_tokens + task_num
    - 1) // task_num` from run-time sizes): no literal of the file sets them. Listed with why,
    so the dry run says what it saw and left. Left out: indices and offsets (`block_id`), a
    literal (a knob's own rules apply), a buffer, and anything that reads a name the file tunes
    or binds as a block (`block_N // 2`, `T.min(block_M, n)`): those are judged under that
    name."""
    listed = known | {d.name for d in dropped}
    for factory in f.factories:
        for fn in f.functions:
            if not any(fn.node is pf for pf in factory.prim_funcs):
                continue
            for name, values in fn.assigns.items():
                if name in listed or not SIZE_NAME.match(name) or len(values) != 1:
                    continue
                value = values[0]
                if int_value(value) is not None or isinstance(value, cst.Name):
                    continue
                if isinstance(value, cst.Call) and "alloc" in dotted(value.func):
                    continue
                read = names_in(value)
                if read & listed or any(BLOCK_NAME.match(n) for n in read):
                    continue
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"'{name}' is computed inside the kernel {fn.name}() at line "
                        f"{f.line(value)} (`{code_of(value)}`), not bound to a literal: no "
                        f"value of the file sets it as a tile size, so there is nothing to tune"
                    ),
                )


def _host_locals(
    f: Facts, resolver: Resolver, taken: dict[int, str], known: set[str], dropped: list[Dropped]
) -> None:
    """Block-named integer locals and defaults of host functions that no kernel factory is given
    (`BLOCK_M = 128` in a forward() that only pads its token count to it, `def quantize_ref(x,
    block_size=32)`), with why: a move could not change
    any kernel's tile. A local passed on by name to any call, or read in a factory call's
    arguments, may reach a kernel and is left to the binding rules."""
    listed = {d.name for d in dropped}
    kernel_side = {id(fn) for fac in f.factories for fn in fac.chain}
    calls_in: dict[int, list[cst.Call]] = {}
    for call in f.calls:
        if call.scope:
            calls_in.setdefault(id(call.scope[-1]), []).append(call.node)
    factory_args: set[str] = set()
    for call in f.calls:
        if any(resolver.calls(call, fac) for fac in f.factories):
            for a in call.node.args:
                factory_args |= names_in(a.value)
    # names a call's function may be bound to in this file: a kernel may be built through
    # them (a function, a handle, a local object); anything else is a library's, a builtin or
    # another module's
    defined = {fn.name for fn in f.functions} | set(f.module_assigns)
    # each host scope as (where, its bindings, the calls made there, the names it returns, the
    # names its calls may build through); the module's own top level too, less any name a
    # kernel factory reads as a global
    scopes: list[
        tuple[str, dict[str, list[cst.BaseExpression]], list[cst.Call], set[str], set[str]]
    ] = [
        (
            f"in {fn.name}()",
            fn.assigns,
            calls_in.get(id(fn), []),
            set(fn.returns),
            defined | set(fn.assigns) | set(fn.params),
        )
        for fn in f.functions
        if id(fn) not in kernel_side and not any(id(p) in kernel_side for p in fn.parents)
    ]
    kernel_reads = set().union(*(names_in(fac.node) for fac in f.factories))
    module_calls = [c.node for c in f.calls if not c.scope]
    module = {n: v for n, v in f.module_assigns.items() if n not in kernel_reads}
    scopes.append(("at module level", module, module_calls, set(), defined))
    for where, assigns, calls, returns, bound in scopes:
        for name, values in assigns.items():
            if (
                not BLOCK_NAME.match(name)
                or UNIT_COUNT.search(name)
                or name in known
                or name in listed
                or name in factory_args
                or len(values) != 1
                or id(values[0]) in taken
            ):
                continue
            value = literal(values[0])
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            passed = any(
                isinstance(a.value, cst.Name) and a.value.value == name
                for node in calls
                if _may_build(node, bound)
                for a in node.args
            )
            if passed or name in returns or imported.imported_only(f, name) is not None:
                continue  # passed on, or listed by the imported-factory rule with its reason
            _drop(
                listed,
                dropped,
                name,
                (
                    f"{HOST_LOCAL}({name} = {value} at line {f.line(values[0])}, {where}) "
                    f"that no kernel factory is given: the host computes with it "
                    f"itself (padding, sizes), so a move could not change a kernel's tile"
                ),
            )
    _host_defaults(f, kernel_side, calls_in, defined, known | factory_args, taken, listed, dropped)


def _host_defaults(
    f: Facts,
    kernel_side: set[int],
    calls_in: dict[int, list[cst.Call]],
    defined: set[str],
    known: set[str],
    taken: dict[int, str],
    listed: set[str],
    dropped: list[Dropped],
) -> None:
    """Block-named integer defaults of host functions (`def quantize_ref(x, block_size=32)`)
    that reach no call which may build a kernel, themselves or through any local computed from
    them (`bm = block_size * 2; matmul(M, N, bm)` reaches one), with why. A function of this
    file from which no kernel factory can be called (a torch reference helper) builds none.
    A tensor the host builds from the value (`cache = torch.zeros(n, block_size, D)`) carries
    it on (a callee may read `cache.shape`); one that reaches only the host is named in the
    reason, the value being a size of that data. Filling a local list (`row.append(offset +
    i)`) builds no kernel; the list joins the value."""
    own = {fn.name for fn in f.functions}
    reaching = _reaching_factories(f)
    for fn in f.functions:
        if id(fn) in kernel_side or any(id(p) in kernel_side for p in fn.parents):
            continue
        bound = defined | set(fn.assigns) | set(fn.params)
        tensors = {
            local
            for local, values in fn.assigns.items()
            if values and all(_host_tensor(v) for v in values)
        }
        fills = [c for c in calls_in.get(id(fn), []) if _container_fill(c, fn)]
        calls = [
            c
            for c in calls_in.get(id(fn), [])
            if _may_build(c, bound)
            and (_base(c) not in own or _base(c) in reaching)
            and not any(c is d for d in fills)
        ]
        # a parameter without a default takes whatever its callers pass: no literal of this
        # function sets it, and when no kernel factory can be reached with it, none is a tile
        bare: list[tuple[str, cst.BaseExpression | None]] = [
            (name, None) for name in fn.params if name not in fn.defaults
        ]
        for name, node in [*fn.defaults.items(), *bare]:
            value = literal(node) if node is not None else None
            if (
                not BLOCK_NAME.match(name)
                or UNIT_COUNT.search(name)
                or name in known
                or name in listed
                or name in fn.assigns
                or name in fn.returns
            ):
                continue
            if node is not None and (
                id(node) in taken or not isinstance(value, int) or isinstance(value, bool)
            ):
                continue
            derived = {name}
            shaped: set[str] = set()  # host tensors the value sizes
            grew = True
            while grew:
                grew = False
                for local, values in fn.assigns.items():
                    if local in derived:
                        continue
                    if any(names_in(v) & derived for v in values):
                        derived.add(local)  # a tensor too: a callee may read its shape
                        if local in tensors:
                            shaped.add(local)
                        grew = True
                for local, (_, packed) in fn.unpacked.items():
                    if local not in derived and names_in(packed) & derived:
                        derived.add(local)
                        grew = True
                for local, loop in fn.loop_targets.items():
                    if local not in derived and names_in(loop.iter) & derived:
                        derived.add(local)  # `for bm in sizes:` takes the list's values
                        grew = True
                for fill in fills:
                    held = _base(fill)
                    if (
                        held is not None
                        and held not in derived
                        and any(names_in(a.value) & derived for a in fill.args)
                    ):
                        derived.add(held)
                        grew = True
            if derived & set(fn.returns) or any(
                names_in(a.value) & derived for c in calls for a in c.args
            ):
                continue  # it may reach a kernel: left to the binding rules
            if shaped:
                why = (
                    f"it sizes tensors the host builds ({', '.join(sorted(shaped))}) that reach "
                    f"no kernel factory either: a size of host data, not a tile, so a move could "
                    f"not change a kernel's tile"
                )
            else:
                why = "the host computes with it itself, so a move could not change a kernel's tile"
            where = (
                f"a default of the host function {fn.name}() ({name}={value}, line {f.line(node)})"
                if node is not None
                else (
                    f"a parameter of the host function {fn.name}() (line {f.line(fn.node)}, no "
                    f"default: its callers' value)"
                )
            )
            _drop(listed, dropped, name, f"{where} that reaches no kernel factory: {why}")


# tensor constructors of the array libraries: what they return holds data, whatever its shape
_TENSOR_BUILDERS = frozenset(
    {
        "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "tensor",
        "arange", "linspace", "as_tensor", "from_numpy", "array", "asarray",
        "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    }
)  # fmt: skip
_ARRAY_MODULES = frozenset({"torch", "np", "numpy", "torch_npu"})
# methods that put a value into a list, set or dict the function holds
_FILLS = frozenset({"append", "extend", "insert", "add", "update", "appendleft"})


def _host_tensor(node: cst.BaseExpression) -> bool:
    """`torch.zeros(n, block_size, D)`, `np.arange(0, n, block)`: a tensor built on the host."""
    if not isinstance(node, cst.Call):
        return False
    name = dotted(node.func)
    root, _, last = name.partition(".")
    return root in _ARRAY_MODULES and last.rpartition(".")[2] in _TENSOR_BUILDERS


def _container_fill(call: cst.Call, fn: Function) -> bool:
    """`row.append(offset + lb)` on a local `row` of fn: it fills a container, builds nothing."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.attr.value in _FILLS
        and func.value.value in fn.assigns
    )


def _inner_block_words(f: Facts, known: set[str], dropped: list[Dropped]) -> None:
    """Names set to an integer literal with the word block inside, not first (`MX_SCALE_BLOCK =
    32`, `KV_BLOCK = 64`) that a kernel reads: a group of a format or a tile, which the name
    alone does not tell. Discovery tunes only names that start with block, so they are listed
    with why, and the dry run says how to tune one that is a tile. Stage tiles the kernel
    reads (`K_L1`, a parameter or a literal) and tile-named sizes (`tile_n`, `TILE_M`) are
    listed the same way."""
    listed = known | {d.name for d in dropped}
    for factory in f.factories:
        live = _live_names(factory, f)
        scopes = [("module", f.module_assigns)] + [
            (f"{fn.name}()", fn.assigns) for fn in factory.chain
        ]
        found: list[tuple[str, str]] = []  # (name, where it is set)
        chosen: dict[str, str] = {}  # name -> where: literals the code picks among by branches
        for where, assigns in scopes:
            for name, values in assigns.items():
                if len(values) == 1 and int_value(values[0]) is not None:
                    found.append(
                        (name, f"= {int_value(values[0])} (line {f.line(values[0])}, {where})")
                    )
                elif len(values) > 1 and all(int_value(v) is not None for v in values):
                    lines = ", ".join(str(f.line(v)) for v in values)
                    chosen[name] = (
                        f"is set to one of {len(values)} literals (lines {lines}, {where})"
                    )
        for name, where in chosen.items():
            if name in listed or name not in live or BLOCK_NAME.match(name):
                continue
            if BLOCK_WORD.search(name) or TILE_NAME.search(name):
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"'{name}' {where}, picked by the code's own branches (on the problem "
                        f"size, a mode): no one literal sets it, so it is not tuned"
                    ),
                )
        for fn in factory.chain:
            found += [
                (name, f"(a parameter of {fn.name}())") for name in sorted(parameter_names(fn.node))
            ]
        for name, where in found:
            if name in listed or name not in live or BLOCK_NAME.match(name):
                continue
            if TILE_NAME.search(name):
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"'{name}' {where} is named as a tile size, but discovery tunes names "
                        f"that start with block, so it is not tuned; declare it in tune.yaml "
                        f"`knobs:` to tune it"
                    ),
                    declarable=True,
                )
                continue
            if STAGE_TILE.match(name):
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"'{name}' {where} is the tile of one memory level; discovery tunes "
                        f"names that start with block, so it is not tuned; declare it in "
                        f"tune.yaml `knobs:` to tune it"
                    ),
                    declarable=True,
                )
                continue
            if not BLOCK_WORD.search(name):
                continue
            _drop(
                listed,
                dropped,
                name,
                (
                    f"'{name}' {where} does not start with block: a block of a format, a "
                    f"layout or a group, not known to be a tile, so it is not tuned; declare "
                    f"it in tune.yaml `knobs:` if it is a tile size"
                ),
                declarable=True,
            )


_EXPRESSION = re.compile(
    r"^'(\w+)' is (?:set by an expression|computed) at line (\d+), not (?:set )?by a literal$"
)


def _expression_inputs(f: Facts, known: set[str], dropped: list[Dropped]) -> None:
    """Block-named names an expression that sets a dropped knob reads (`block_M = max_block if
    rows % max_block == 0 else 32`): no literal sets the knob, so they are not tuned either,
    and are listed under their own names so the dry run says where they went."""
    listed = known | {d.name for d in dropped}
    for d in list(dropped):
        m = _EXPRESSION.match(d.reason)
        if m is None:
            continue
        knob, line = m.group(1), int(m.group(2))
        scopes = [f.module_assigns, *(fn.assigns for fn in f.functions)]
        values = [v for a in scopes for v in a.get(knob, []) if f.line(v) == line]
        for value in values[:1]:
            for name in sorted(names_in(value)):
                if name in listed or name == knob or not BLOCK_WORD.search(name):
                    continue
                _drop(
                    listed,
                    dropped,
                    name,
                    (
                        f"'{name}' feeds {knob} through the expression at line {line} "
                        f"(`{code_of(value)}`): no one literal sets {knob}, and {name} is not "
                        f"tuned in its place"
                    ),
                )


def _dead_stage_tiles(f: Facts, dropped: list[Dropped]) -> None:
    """Names of a tile staged in one memory level (`K_L1 = 256`, the K extent an L1 copy
    holds) that a factory binds and its kernel never reads, listed as dropped with why. They
    are not block names, so discovery never tunes them; a live one is left alone."""
    listed = {d.name for d in dropped}
    for factory in f.factories:
        live = _live_names(factory, f)
        for owner in factory.chain:
            for name in [*owner.params, *owner.assigns]:
                if (
                    (STAGE_TILE.match(name) or STAGES.match(name))
                    and name not in live
                    and name not in listed
                ):
                    _drop(
                        listed,
                        dropped,
                        name,
                        (
                            f"never read by the kernel ({factory.name}()): tuning it cannot "
                            f"change anything"
                        ),
                        # a dead pipeline depth is pipeline_depth's, a dead stage tile block_size's
                        "pipeline_depth" if STAGES.match(name) else "block_size",
                    )


def _base(call: cst.Call) -> str | None:
    """The name a call's function starts from (`run` of `run(...)`, `x` of `x.float()`)."""
    base = call.func
    while isinstance(base, (cst.Attribute, cst.Call)):
        base = base.value if isinstance(base, cst.Attribute) else base.func
    return base.value if isinstance(base, cst.Name) else None


def _reaching_factories(f: Facts) -> set[str]:
    """Names of the file's functions from which a kernel factory can be called: the
    factories themselves and every function whose body calls one of these, transitively."""
    reaching = {fn.name for fac in f.factories for fn in fac.chain}
    grew = True
    while grew:
        grew = False
        for call in f.calls:
            if _base(call.node) in reaching:
                for fn in call.scope:
                    if fn.name not in reaching:
                        reaching.add(fn.name)
                        grew = True
    return reaching


def _may_build(call: cst.Call, defined: set[str]) -> bool:
    """Whether a call may hand its arguments on to a kernel factory of this file: its function
    is one the file defines or binds (`run(block)`, `kernel(x)`), not a library's, a builtin or
    one imported from another module (`torch.randperm(n // BLOCK)`, `naive_nsa(block_size=
    BLOCK)`), which cannot build this file's kernels."""
    base = call.func
    while isinstance(base, cst.Attribute):
        base = base.value
    return isinstance(base, cst.Name) and base.value in defined


def _unread_literals(f: Facts, taken: dict[int, str], dropped: list[Dropped]) -> None:
    """Block-like argparse options no kernel factory reads as a knob, with why."""
    left_out = {d.name: d.reason for d in dropped}
    for dest, sites in f.argparse.items():
        if not BLOCK_NAME.match(dest) or any(id(s.node) in taken for s in sites):
            continue
        fed = sorted(callsites.fed_params(f, dest))
        where = f"argparse option at line {sites[0].line}"
        read = _option_reads(f, dest)
        if not fed and read:  # `block_size = args.block_size`, then passed on by other functions
            reason = (
                f"{where} is read at line {', '.join(str(n) for n in read)} but not passed "
                f"directly to a kernel factory; a factory parameter its value reaches through "
                f"the file's functions is listed under its own name"
            )
        elif not fed:
            reason = f"{where} is not passed to any kernel factory"
        elif all(p in left_out for p in fed):
            reason = f"{where} is passed to " + ", ".join(f"{p} ({left_out[p]})" for p in fed)
        else:
            reason = (
                f"{where} is passed to {', '.join(fed)}, a name not discovered as a block size; "
                f"declare it in tune.yaml `knobs:` to tune it"
            )
        declarable = reason.endswith("to tune it")
        dropped.append(Dropped("block_size", dest, reason, declarable))
