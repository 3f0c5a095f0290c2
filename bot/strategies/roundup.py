"""Whether an extent is a multiple of the knob by construction.

A caller often pads a size up to a whole number of blocks before it builds the kernel:
`M_pad = ((M + block_M - 1) // block_M) * block_M` (or `T.ceildiv(M, block_M) * block_M`),
then `matmul(M_pad, ..., block_M, ...)`. Inside the factory `M // block_M` then always
has full tiles, whatever block_M is, because the padding uses the same block. `multiple_of`
follows the extent through local assignments and, for a parameter, through every call
that binds it (mapping the knob to what that call passes for it): the extent is a multiple
of the knob when it is a product with the knob as a factor, on every path.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.binding import Resolver
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Function

MAX_DEPTH = 6


def multiple_of(
    resolver: Resolver,
    node: cst.BaseExpression,
    chain: tuple[Function, ...],
    knob: frozenset[str],
    depth: int = 0,
) -> bool:
    """`node`, read in `chain`, is always a multiple of the knob (`knob`: how the knob is
    spelled in that scope)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return (
            code_of(node.left) in knob
            or code_of(node.right) in knob
            or multiple_of(resolver, node.left, chain, knob, depth + 1)
            or multiple_of(resolver, node.right, chain, knob, depth + 1)
        )
    if not isinstance(node, cst.Name):
        return False
    name = node.value
    for i in range(len(chain) - 1, -1, -1):
        fn = chain[i]
        if name in fn.assigns:
            values = fn.assigns[name]
            return len(values) == 1 and multiple_of(
                resolver, values[0], chain[: i + 1], knob, depth + 1
            )
        if name in fn.params:
            return _through_calls(resolver, fn, name, knob, depth)
    return False


def _through_calls(
    resolver: Resolver, fn: Function, name: str, knob: frozenset[str], depth: int
) -> bool:
    """Every call of `fn` binds parameter `name` to a multiple of what it passes as the knob."""
    passes = [k for k in knob if k in fn.params]
    if not passes:
        return False
    seen = False
    for call in resolver.f.calls:
        if not resolver.calls(call, fn):
            continue
        bound = resolver.bound_by(call, fn, name)
        knobs = [resolver.bound_by(call, fn, k) for k in passes]
        spelled = frozenset(  # a name: a literal here is not the knob's site, and would stay
            code_of(b[0]) for b in knobs if b is not None and isinstance(b[0], cst.Name)
        )
        if bound is None or bound[1] == "opaque" or not spelled:
            return False
        if not multiple_of(resolver, bound[0], call.scope, spelled, depth + 1):
            return False
        seen = True
    return seen
