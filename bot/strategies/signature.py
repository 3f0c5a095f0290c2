"""The names a function's own signature binds, whatever their kind.

`Function.params` lists the positional parameters (the ones a call binds by position) and
`Function.defaults` those with a default; a keyword-only parameter without one
(`def rows(M, *, block_M)`), `*args` and `**kwargs` are in neither, yet each is a name of the
function's scope, never the same-named module constant. `takes` answers for all of them.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.facts import Function


def parameter_names(node: cst.FunctionDef) -> frozenset[str]:
    p = node.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return frozenset(names)


def takes(fn: Function, name: str) -> bool:
    """True when `name` is a parameter of `fn` (positional, keyword-only, `*args`, `**kw`)."""
    return name in fn.params or name in fn.defaults or name in parameter_names(fn.node)


def star_names(fn: Function) -> frozenset[str]:
    """`args` and `kw` of `def f(*args, **kw)`: parameters no call binds one value to by name."""
    p = fn.node.params
    return frozenset(s.name.value for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param))
