"""Tensors the host allocates padded to a multiple of the knob: a partial last tile stays in them.

A kernel may walk a run-time extent in `T.ceildiv(top_k, block)` tiles while every tensor
those tiles read and write is one the host allocates with that extent rounded up to a
multiple of the same block: `torch.empty((B, S, next_divisible_number(top_k, block_cube),
D))` passed for `SparseKVBuffer: T.Tensor((B, S, top_k_reserved, D))`, indexed at
`k * block_top_k_cube`. The last tile then ends at the padded size, inside the tensor, for
every value of the block: the host's padding is the whole-tile guarantee, as a padded extent
is (bot/strategies/roundup.py), and divisibility of the raw extent is not required.

`padded_tiles` says so only when every access of a kernel tensor at an index that reads the
knob (or a name that scales or shifts with it) is at a dimension that is a multiple of the
knob on every call the file makes: a factory parameter bound to one (roundup.multiple_of), or
a `T.symbolic` size the compiled kernel takes from a tensor the calling function builds with
`torch.empty / zeros / ones / full / randn / rand` and a size tuple whose entry there is one
(with the knob spelled as that function passes it to the factory). Any access, call or tensor
it cannot follow keeps the rule.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from bot.strategies.binding import Resolver
from bot.strategies.callerbuffers import _declared, out_idx
from bot.strategies.callsizes import shapes_symbols
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Call, Facts, Function, names_in
from bot.strategies.roundup import multiple_of
from bot.strategies.source import dotted

_BUILDERS = frozenset({"empty", "zeros", "ones", "full", "randn", "rand"})


def _accesses(
    pf: cst.FunctionDef, tensors: dict[str, int], moving: set[str]
) -> set[tuple[int, int]] | None:
    """(tensor parameter index, dimension) of each access whose index reads a moving name;
    None when a tensor is indexed in a way whose dimensions cannot be told."""
    found: set[tuple[int, int]] = set()
    unclear = False

    class V(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            nonlocal unclear
            if not isinstance(node.value, cst.Name) or node.value.value not in tensors:
                return
            for j, el in enumerate(node.slice):
                s = el.slice
                parts = (
                    [s.value]
                    if isinstance(s, cst.Index)
                    else [s.lower, s.upper, s.step]
                    if isinstance(s, cst.Slice)
                    else []
                )
                if any(p is not None and names_in(p) & moving for p in parts):
                    if isinstance(s, cst.Index) and s.star is not None:
                        unclear = True
                    found.add((tensors[node.value.value], j))

    pf.visit(V())
    return None if unclear else found


def _handle(f: Facts, resolver: Resolver, call: Call) -> cst.Call | None:
    """The factory call whose result the called kernel is: `kernel = factory(...)` or
    `fn.kernel = factory(...)` (one such assignment in the file)."""
    func = call.node.func
    if isinstance(func, cst.Name):
        value = resolver.spelled.assigned(func.value, call.scope)
        return value if isinstance(value, cst.Call) else None
    if not isinstance(func, cst.Attribute):
        return None
    found = _assigned_by_spelling(f).get(code_of(func), [])
    return found[0] if len(found) == 1 and isinstance(found[0], cst.Call) else None


def _assigned_by_spelling(f: Facts) -> dict[str, list[cst.BaseExpression]]:
    """Every assignment of the module by the spelling of its target (`fn.kernel`), in order,
    one entry per statement. Read once per parse: a file makes hundreds of attribute calls."""
    key = ("paddedtensors._assigned_by_spelling",)
    memo = f.derived.get(key)
    if memo is None:
        by: dict[str, list[cst.BaseExpression]] = {}

        class V(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for spelled in dict.fromkeys(code_of(t.target) for t in node.targets):
                    by.setdefault(spelled, []).append(node.value)

        f.wrapper.module.visit(V())
        f.derived[key] = memo = by
    return cast(dict[str, list[cst.BaseExpression]], memo)


def _built(
    resolver: Resolver, node: cst.BaseExpression, chain: tuple[Function, ...]
) -> list[cst.BaseExpression] | None:
    """The size entries of a tensor the host builds: `torch.empty((B, S, n, D), ...)`."""
    if isinstance(node, cst.Name):
        value = resolver.spelled.assigned(node.value, chain)
        return _built(resolver, value, chain) if value is not None else None
    if not isinstance(node, cst.Call) or dotted(node.func).rsplit(".", 1)[-1] not in _BUILDERS:
        return None
    args = [a for a in node.args if a.keyword is None and not a.star]
    size = next((a.value for a in node.args if a.keyword and a.keyword.value == "size"), None)
    if size is None and args and isinstance(args[0].value, (cst.Tuple, cst.List)):
        size = args[0].value
    if isinstance(size, (cst.Tuple, cst.List)):
        return [e.value for e in size.elements]
    if size is None and dotted(node.func).rsplit(".", 1)[-1] != "full":
        return [a.value for a in args]  # `torch.empty(B, S, n, D)`
    return None


def _symbolic_padded(
    f: Facts,
    resolver: Resolver,
    factory: Function,
    knob: str,
    places: set[tuple[int, int]],
    count: int,
) -> bool:
    """Every call of the compiled kernel passes, at each (parameter, dimension) of `places`,
    a tensor the host builds with a multiple of the knob there."""
    builders = {fn.name for fn in factory.chain}
    made = out_idx(factory, count)
    if made is None:
        return False
    passed = [i for i in range(count) if i not in made]  # parameter of each call argument
    seen = False
    for call in f.calls:
        handle = _handle(f, resolver, call)
        if handle is None or not isinstance(handle.func, cst.Name):
            continue
        if handle.func.value not in builders:
            continue
        building = next((c for c in f.calls if c.node is handle), None)
        bound = resolver.bound_by(building, factory, knob) if building is not None else None
        if bound is None or not isinstance(bound[0], cst.Name):
            return False  # the knob is not a name the host can pad with
        spelled = frozenset({bound[0].value})
        if any(a.star or a.keyword is not None for a in call.node.args):
            return False
        args = [a.value for a in call.node.args]
        if len(args) != len(passed):
            return False
        for i, j in places:
            sizes = _built(resolver, args[passed.index(i)], call.scope) if i in passed else None
            if sizes is None or j >= len(sizes):
                return False
            if not multiple_of(resolver, sizes[j], call.scope, spelled):
                return False
        seen = True
    return seen


def padded_tiles(
    f: Facts, resolver: Resolver, factory: Function, aliases: set[str], offsets: set[str]
) -> bool:
    """Whether every tensor access a tile of the knob makes is in a dimension the host pads
    to a multiple of the knob, so a partial last tile stays inside the tensors."""
    if len(factory.prim_funcs) != 1:
        return False
    knob = next((a for a in aliases if a in factory.params), None)
    if knob is None:
        return False
    pf = factory.prim_funcs[0]
    declared = _declared(pf)
    tensors = {name: i for i, (name, dims) in enumerate(declared) if dims}
    places = _accesses(pf, tensors, set(aliases) | set(offsets))
    if not places:
        return False
    symbolic = shapes_symbols(factory)
    by_symbol: set[tuple[int, int]] = set()
    for i, j in places:
        dims = declared[i][1]
        dim = dims[j] if j < len(dims) else None
        if not isinstance(dim, cst.Name):
            return False
        if dim.value in symbolic:
            by_symbol.add((i, j))
        elif not multiple_of(resolver, dim, factory.chain, frozenset(aliases)):
            return False
    return not by_symbol or _symbolic_padded(f, resolver, factory, knob, by_symbol, len(declared))


def padded_symbols(
    f: Facts, resolver: Resolver, factory: Function, aliases: set[str]
) -> frozenset[str]:
    """The `T.symbolic` sizes of the kernel that every call binds to a dimension the host pads
    to a multiple of the knob: each is at least the knob (a positive multiple of it)."""
    if len(factory.prim_funcs) != 1:
        return frozenset()
    knob = next((a for a in aliases if a in factory.params), None)
    if knob is None:
        return frozenset()
    declared = _declared(factory.prim_funcs[0])
    places: dict[str, set[tuple[int, int]]] = {}
    for i, (_, dims) in enumerate(declared):
        for j, d in enumerate(dims):
            if isinstance(d, cst.Name) and d.value in shapes_symbols(factory):
                places.setdefault(d.value, set()).add((i, j))
    return frozenset(
        name
        for name, at in places.items()
        if _symbolic_padded(f, resolver, factory, knob, at, len(declared))
    )
