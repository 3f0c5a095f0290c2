"""A block the factory clamps to an extent: past the extent it runs as the extent.

`bn = min(bn, N)` (or `T.min`, either order) in a factory makes every value at or past `N` run
as `N`. A move past the extent of every size the op runs with therefore changes nothing the
kernel reads: it is a `cap` rule on `N`, so such a value is refused as idle (and kept where
some size runs it below the extent). The rule is read from the single assignments of the
factory chain whose value is a two-argument `min` of a name the knob binds and another
expression.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.evaluate import code_of
from bot.strategies.facts import Facts, Function
from bot.strategies.source import min_operands
from bot.strategies.tiling import Rule


def _clamp(value: cst.BaseExpression, names: set[str]) -> cst.BaseExpression | None:
    """X of `min(n, X)` / `T.min(X, n)` with n one of `names`; else None."""
    args = min_operands(value)
    if args is None or len(args) != 2:
        return None
    mine = [isinstance(a, cst.Name) and a.value in names for a in args]
    if mine.count(True) != 1:
        return None
    return args[1] if mine[0] else args[0]


def clamp_rules(f: Facts, factory: Function, aliases: set[str]) -> list[Rule]:
    """A `cap` rule against X for each `name = min(alias, X)` in the factory chain, and for
    each `bn = min(bn, X)` clamping a local whose other bindings copy the knob (`bn = block_n`
    or `bl, bn = block_l, block_n` first)."""
    rules: list[Rule] = []
    for fn in factory.chain:
        for local, values in fn.assigns.items():
            names = set(aliases)
            if local not in aliases:
                copies = [v for v in values if isinstance(v, cst.Name) and v.value in aliases]
                clamped = [v for v in values if _clamp(v, aliases | {local}) is not None]
                if not copies or len(copies) + len(clamped) != len(values):
                    continue
                names.add(local)
            for value in values:
                extent = _clamp(value, names)
                if extent is not None:
                    rules.append(Rule("cap", extent, fn.chain, f.line(value), code_of(value)))
    return rules
