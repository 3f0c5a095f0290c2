"""Calls that leave a parameter at its default bind the default.

A wrapper parameter one call passes as a keyword (`test(s1=64, block_n=64)` on a `--quick`
path) and another call leaves alone (`test(s1=512)`, block_n's default 256) has two values
on the paths the file runs: no one literal is the knob. Each call the file runs that binds
nothing for the parameter therefore counts as binding its default. A call on a side of an
`if` the run path never takes (`if not tune: ... else: f()` with `--tune` a `store_true`
option, False) runs nothing and binds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.strategies import callsites, dispatch
from bot.strategies.facts import Call, Function

if TYPE_CHECKING:
    from bot.strategies.binding import Resolution, Resolver


def calls(
    resolver: Resolver,
    fn: Function,
    name: str,
    pairs: list[tuple[Call, Resolution]],
    depth: int,
) -> list[tuple[Call, Resolution]]:
    """The calls of `fn` the file runs that leave `name` unset, each bound to the default
    (`pairs`: the calls that bind it)."""
    from bot.strategies.binding import Resolution

    binding = {id(c.node) for c, _ in pairs}
    runs = callsites.reached(resolver.f, resolver.harness)
    out: list[tuple[Call, Resolution]] = []
    for call in resolver.f.calls:
        if id(call.node) in binding or (runs is not None and id(call.node) not in runs):
            continue
        args = (
            list(call.node.args)
            if resolver.calls(call, fn)
            else resolver.wrappers.arguments(call, fn)
        )
        if args is None or resolver.bound_in(args, call, fn, name, depth) is not None:
            continue
        if off_path(resolver, call):
            continue
        r = resolver.expr(fn.defaults[name], fn.parents, depth + 1, name, "default")
        path = ("default", *r.path)
        out.append((call, Resolution(r.site, r.value, path, r.problem, none=r.none)))
    return out


def off_path(resolver: Resolver, call: Call) -> bool:
    """True when `call` sits on a side of an `if` the file's run path never takes, or past an
    early return the run takes (bot/strategies/dispatch.py)."""
    return dispatch.off_path(resolver, call) is not None
