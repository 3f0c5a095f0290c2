"""Which literal is the knob when several call sites bind a factory parameter differently.

A factory called from several places gets a parameter from each call. When the calls bind
different literals, one edit changes only some of the kernels the file builds. The file still
has one setting to tune when exactly one module constant feeds calls
(`DEFAULT_BLOCK_M = 128`, read by the typical test, the boundary tests and the benchmark's
`main`) and every other call passes a literal of its own (a small smoke test's
`block_M = 32`): the constant is the knob, its rules are checked with the sizes of every call
it feeds, and the other calls, which keep their own values, are named beside it. The constant
must feed a call the file runs: from module level (`if __name__ == "__main__":` included)
or the functions a harness calls by name (the op's entry, inputs and reference as tune.yaml
names them; `kernel`/`get_inputs`/`reference` when it does not), through the functions they
call; a constant that feeds only calls nothing runs would be a no-op. Anything else (a call
binding a computed value, several constants, no constant) stays ambiguous, and the reason says
which of these it is.

`fed_params` names the factory parameters an argparse option is passed to
(`f(block_I=args.block_i)`), so a knob declared under the option's name (`block_i`) takes the
rules and refusals of the parameter it feeds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from bot.config.schema import DEFAULT_HARNESS
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Call, Facts, Function, Site

if TYPE_CHECKING:
    from bot.strategies.binding import Resolution


@dataclass(frozen=True)
class Shared:
    """The module constant that is the knob, the calls it feeds, and the calls with their own."""

    resolution: Resolution
    fed: tuple[Call, ...]
    own: tuple[tuple[Call, Site], ...]


# a name its author made a block size (`DEFAULT_BLOCK_M`, `block_M`), not a shape it also feeds
BLOCK_WORD = re.compile(r"(?:^|_)(?:block|BLOCK)(?:_|$)")


def reached(f: Facts, harness: tuple[str, ...] = DEFAULT_HARNESS) -> set[int] | None:
    """ids of the call nodes the file runs: module level (`if __name__ == "__main__":`
    included), the functions a harness calls by name (`harness`: the op's entry, inputs and
    reference, OpConfig.harness_functions), and the functions these call, by name. None when
    nothing runs at module level (a library module: any call may run). Kept on the parse:
    callers must not mutate the set."""
    return f.kept(("callsites.reached", tuple(harness)), lambda: walk(f, harness))


def top_level(f: Facts) -> dict[str, list[Function]]:
    """The module-level functions by name (a name defined twice lists both). Kept on the
    parse: callers must not mutate it."""

    def build() -> dict[str, list[Function]]:
        by_name: dict[str, list[Function]] = {}
        for fn in f.functions:
            if not fn.parents:
                by_name.setdefault(fn.name, []).append(fn)
        return by_name

    return f.kept(("callsites.top_level",), build)


def walk(
    f: Facts, harness: tuple[str, ...], skip: Callable[[Call], bool] | None = None
) -> set[int] | None:
    """ids of the call nodes reached from module level and the harness functions through the
    functions they call by name, leaving out each call `skip` names (and what only it reaches).
    None when nothing runs at module level."""
    entry = [c for c in f.calls if not c.scope]
    if not entry:
        return None
    by_name = top_level(f)
    running: set[int] = {id(fn) for name in harness for fn in by_name.get(name, [])}
    todo = [c for c in f.calls if c.scope and id(c.scope[0]) in running] + entry
    seen: set[int] = set()
    while todo:
        call = todo.pop()
        if id(call.node) in seen or (skip is not None and skip(call)):
            continue
        seen.add(id(call.node))
        func = call.node.func
        for fn in by_name.get(func.value, []) if isinstance(func, cst.Name) else []:
            if id(fn) not in running:
                running.add(id(fn))
                todo.extend(c for c in f.calls if c.scope and c.scope[0] is fn)
    return seen


def on_run_path(
    f: Facts, bound: list[tuple[Call, Resolution]], harness: tuple[str, ...] = DEFAULT_HARNESS
) -> list[tuple[Call, Resolution]]:
    """`bound` without the calls of library wrappers the run never reaches, when some call
    lies on the file's run path. Such a wrapper passes on its own parameter
    (`def interface(q, block_I=64): return kernel(..., block_I=block_I)`), so the value it
    binds is its own default: nothing the file runs builds the kernel with it, and it does not
    compete with the literal the run passes. Off-path calls that bind a value of their own (a
    second test's literal or constant) are kept: a test runner may run them."""
    runs = reached(f, harness)
    if runs is None or not any(id(c.node) in runs for c, _ in bound):
        return bound

    def wrapper_default(c: Call, r: Resolution) -> bool:
        site = r.site
        return (
            site is not None
            and site.kind == "default"
            and any(site.node is d for fn in c.scope for d in fn.defaults.values())
        )

    return [(c, r) for c, r in bound if id(c.node) in runs or not wrapper_default(c, r)]


def shared_constant(
    f: Facts,
    fn: Function,
    name: str,
    bound: list[tuple[Call, Resolution]],
    harness: tuple[str, ...] = DEFAULT_HARNESS,
) -> Shared | str:
    """The one module constant several call sites share, or the sentence saying why none is."""
    lines = sorted({f.line(c.node) for c, _ in bound})  # the calls, not the literals they reach
    head = (
        f"'{name}' of {fn.name}() is bound at {len(bound)} call sites"
        f"{' (lines ' + ', '.join(map(str, lines)) + ')' if lines else ''}"
    )
    defaulted = [(c, r.site) for c, r in bound if r.site and r.site.kind == "default"]
    if defaulted:  # a call that passes nothing runs the kernel with the default
        at = ", ".join(str(f.line(c.node)) for c, _ in defaulted)
        plain = defaulted[0][1]
        s = "s" if len(defaulted) > 1 else ""
        head += (
            f", the call{s} at line{s} {at} by leaving it at its default {plain.value} "
            f"(line {plain.line})"
        )
    tail = "one change cannot pick one"
    computed = [(c, r) for c, r in bound if r.site is None]
    if computed:
        call, r = computed[0]
        why = r.problem or "a value that is not a literal"
        return f"{head}, and at the call at line {f.line(call.node)}: {why}; {tail}"
    groups: dict[int, list[tuple[Call, Resolution]]] = {}
    for call, r in bound:
        assert r.site is not None
        groups.setdefault(id(r.site.node), []).append((call, r))
    constants = [g for g in groups.values() if g[0][1].site and g[0][1].site.kind == "constant"]
    if not constants:
        return f"{head}, each to a literal of its own; {tail}"
    if len(constants) > 1:
        names = ", ".join(
            f"{g[0][1].site.name} (line {g[0][1].site.line})" for g in constants if g[0][1].site
        )
        return f"{head}, through {len(constants)} different module constants ({names}); {tail}"
    group = constants[0]
    site = group[0][1].site
    assert site is not None
    runs = reached(f, harness)
    if runs is not None and not any(id(c.node) in runs for c, _ in group):
        at = ", ".join(str(f.line(c.node)) for c, _ in group)
        return (
            f"{head}; the module constant {site.name} (line {site.line}) feeds only calls the "
            f"file never runs (lines {at}): changing it would change nothing measured"
        )
    own = tuple((c, r.site) for g in groups.values() if g is not group for c, r in g if r.site)
    return Shared(group[0][1], tuple(c for c, _ in group), own)


def unrun(
    f: Facts,
    fn: Function,
    name: str,
    bound: list[tuple[Call, Resolution]],
    harness: tuple[str, ...] = DEFAULT_HARNESS,
) -> str | None:
    """Why the values bound to `name` measure nothing, or None: every call that binds it lies
    off the path the file runs, and the calls of `fn` that the file does run leave it unset
    (the kernel's autotuner picks it)."""
    runs = reached(f, harness)
    if name in fn.defaults or runs is None or any(id(c.node) in runs for c, _ in bound):
        return None
    binding = {id(c.node) for c, _ in bound}
    unset = [
        c
        for c in f.calls
        if id(c.node) in runs
        and id(c.node) not in binding
        and isinstance(c.node.func, cst.Name)
        and c.node.func.value == fn.name
    ]
    if not unset:
        return None
    sites = sorted({(r.site.name, r.site.line) for _, r in bound if r.site})
    what = (
        " and ".join(f"{n} (line {line})" for n, line in sites)
        if sites
        else f"the value bound to '{name}'"
    )
    at = ", ".join(
        f"line {f.line(c.node)}{' in ' + c.scope[-1].name + '()' if c.scope else ''}"
        for c, _ in bound
    )
    plural = "calls" if len(bound) > 1 else "call"
    runs_at = ", ".join(str(f.line(c.node)) for c in unset)
    picks = "@tilelang.autotune picks it" if autotuned(fn) else "the call passes no value"
    return (
        f"{what} feeds only the {plural} at {at}, which the file never runs; the call at line"
        f"{'s' if len(unset) > 1 else ''} {runs_at} leaves it unset ({picks}): changing it "
        f"would change nothing measured"
    )


def autotuned(fn: Function) -> bool:
    """True when `fn` is decorated with `@tilelang.autotune(...)` (any spelling)."""
    return any(
        "autotune"
        in code_of(d.decorator if not isinstance(d.decorator, cst.Call) else d.decorator.func)
        for d in fn.node.decorators
    )


def note(f: Facts, shared: Shared) -> str | None:
    """The calls a shared constant does not change, named for the dry run and the report:
    `block_M=32 (local at line 95, the call at line 104 in test_basic()): ...`."""
    if not shared.own:
        return None
    const = shared.resolution.site
    assert const is not None
    fed = ", ".join(str(f.line(c.node)) for c in shared.fed)
    own = "; ".join(
        f"{s.name}={s.value} ({s.where()}, the call at line {f.line(c.node)}"
        f"{' in ' + c.scope[-1].name + '()' if c.scope else ''})"
        for c, s in shared.own
    )
    return (
        f"{own}: that call passes its own literal, which stays as it is; the module constant "
        f"{const.name} (line {const.line}), which feeds the calls at lines {fed}, is tuned instead"
    )


def fed_params(f: Facts, dest: str) -> set[str]:
    """The kernel factory parameters that argparse option `dest` is passed to
    (`f(block_I=args.block_i)`, `f(M, args.block_i)`), by the factory chains' names."""
    chains = {fn.name: fn for factory in f.factories for fn in factory.chain}
    out: set[str] = set()
    for call in f.calls:
        func = call.node.func
        fn = chains.get(func.value) if isinstance(func, cst.Name) else None
        if fn is None:
            continue
        for i, arg in enumerate(call.node.args):
            value = arg.value
            if not (
                isinstance(value, cst.Attribute)
                and isinstance(value.value, cst.Name)
                and value.attr.value == dest
            ):
                continue
            if arg.keyword is not None:
                out.add(arg.keyword.value)
            elif not arg.star and i < len(fn.params):
                out.add(fn.params[i])
    return out
