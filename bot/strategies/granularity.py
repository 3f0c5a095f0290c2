"""A per-tile table laid out by the host at another granularity pins the knob.

    @tilelang.jit(...)
    def attn(seq_q, seq_kv, downsample_len):
        block_M = 64
        mask_shape = [downsample_len, downsample_len]
        ...
        with T.Kernel(T.ceildiv(seq_q, block_M), is_npu=True) as (cid, _):
            bx = cid % T.ceildiv(seq_q, block_M)       # the block_M tile index
            T.copy(Mask[bx, :], mask_row)              # one mask row per block_M tile

    def test():
        factor = 64
        n = math.ceil(seq / factor)                    # the host's count of 64-wide blocks
        kernel = attn(seq, seq, n)

The kernel reads one entry of a table (`Mask`, or a buffer the kernel allocates with the same
dimension) per knob tile: the index at that dimension is the knob's tile index (a grid index at
any place of a multi-dimensional grid, a remainder modulo a count of knob tiles, or the
variable of a loop over such a count, `T.serial(n)` or `T.serial(0, n)`). The
table's dimension is a count the host builds with another divisor (`math.ceil(seq / factor)`,
`T.ceildiv(seq, G)`, `(seq + G - 1) // G`, `seq // G`), so entry i describes the i-th
G-wide block, not the i-th knob tile: the two agree only while the knob equals G. Any other
value reads the wrong entries (a larger knob skips some, a smaller one reads past the table).
The rule is made only where G's value is known on every call the file makes and is the
knob's current value (a kernel already off G is not ours to judge), and G is not the knob's
own literal passed on (then the table follows the knob).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.binding import Resolver
from bot.strategies.evaluate import CEILDIV, Env, code_of, evaluate
from bot.strategies.facts import Facts, Function, names_in
from bot.strategies.source import dotted, launch

MAX_DEPTH = 4  # single assignments followed to a count's expression


@dataclass(frozen=True)
class _Pin:
    table: str  # the subscript, as written
    line: int
    index: str  # the knob tile index the table is read at
    dim: str  # the table's dimension, as written
    built: str  # the host's count, as written
    built_line: int
    divisor: str  # G, as written
    value: int  # G's value on every call
    names: tuple[str, ...]  # the host names G is spelled through (`factor`, `BLOCK`)


def _count_divisor(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """G of a count of G-wide blocks: `T.ceildiv(X, G)`, `math.ceil(X / G)`, `(X + G - 1) // G`,
    `-(-X // G)`, `X // G`; else None."""
    if isinstance(node, cst.Call):
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short in CEILDIV and len(args) == 2:
            return args[1]
        if (
            short == "ceil"
            and len(args) == 1
            and isinstance(args[0], cst.BinaryOperation)
            and isinstance(args[0].operator, cst.Divide)
        ):
            return args[0].right
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = node.expression
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.FloorDivide):
            return inner.right  # -(-X // G)
        return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide):
        return node.right  # X // G, and (X + G - 1) // G
    return None


def _is_count_of(node: cst.BaseExpression, aliases: set[str], counts: set[str]) -> bool:
    """`node` counts knob tiles: a count whose divisor is the knob, or a name for one."""
    if isinstance(node, cst.Name):
        return node.value in counts
    divisor = _count_divisor(node)
    return isinstance(divisor, cst.Name) and divisor.value in aliases


def _single(fn_chain: tuple[Function, ...], name: str) -> cst.BaseExpression | None:
    for fn in reversed(fn_chain):
        values = fn.assigns.get(name)
        if values is not None:
            return values[0] if len(values) == 1 else None
    return None


def _follow(
    node: cst.BaseExpression, chain: tuple[Function, ...], seen: list[str] | None = None
) -> cst.BaseExpression:
    """A name assigned once in `chain`, replaced by its value (up to MAX_DEPTH times); the
    names passed through are appended to `seen`."""
    for _ in range(MAX_DEPTH):
        if not isinstance(node, cst.Name):
            break
        value = _single(chain, node.value)
        if value is None:
            break
        if seen is not None:
            seen.append(node.value)
        node = value
    return node


class _Kernel(cst.CSTVisitor):
    """The knob's tile indices in one prim_func, the dimensions of its tables, and every
    subscript reading a table at a tile index."""

    def __init__(self, aliases: set[str], chain: tuple[Function, ...]) -> None:
        self.aliases, self.chain = aliases, chain
        self.counts: set[str] = set()  # names holding a count of knob tiles
        for fn in chain:
            for name, values in fn.assigns.items():
                if len(values) == 1 and _is_count_of(values[0], aliases, set()):
                    self.counts.add(name)
        self.indices: set[str] = set()
        self.bound: dict[str, int] = {}  # how many times the kernel binds each name
        self.dims: dict[str, list[cst.BaseExpression]] = {}
        self.reads: list[tuple[cst.Subscript, int, str]] = []  # (subscript, dim, index name)

    def _count(self, node: cst.BaseExpression) -> bool:
        return _is_count_of(node, self.aliases, self.counts)

    def _shape(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        node = _follow(node, self.chain)
        if isinstance(node, (cst.List, cst.Tuple)):
            return [e.value for e in node.elements]
        return None

    def visit_Param(self, node: cst.Param) -> None:
        ann = node.annotation.annotation if node.annotation else None
        if isinstance(ann, cst.Call) and dotted(ann.func).endswith("Tensor") and ann.args:
            shape = self._shape(ann.args[0].value)
            if shape is not None:
                self.dims[node.name.value] = shape

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            k = launch(item)
            if k is None:
                continue
            # `T.Kernel(gx, gy, ...) as (bx, by)`: each grid extent binds the name at its place
            for grid, index in zip(k.grid, k.names, strict=False):
                if index and self._count(grid):
                    self.indices.add(index)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if not isinstance(t.target, cst.Subscript):
                self._bind(t.target)
        value = node.value
        if isinstance(value, cst.Call) and dotted(value.func).rsplit(".", 1)[-1].startswith(
            "alloc"
        ):
            args = [a.value for a in value.args if a.keyword is None]
            shape = self._shape(args[0]) if args else None
            for t in node.targets:
                if shape is not None and isinstance(t.target, cst.Name):
                    self.dims[t.target.value] = shape
            return
        if (
            isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Modulo)
            and self._count(value.right)
        ):  # `bx = cid % T.ceildiv(seq_q, block_M)`: the position among the knob's tiles
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.indices.add(t.target.value)

    def _bind(self, target: cst.CSTNode) -> None:
        for name in names_in(target):
            self.bound[name] = self.bound.get(name, 0) + 1

    def tile_indices(self) -> set[str]:
        """The tile indices no other binding of the kernel shadows (`for j, k in T.Parallel`
        inside `for k in T.Pipelined(...)`)."""
        return {n for n in self.indices if self.bound.get(n, 0) <= 1}

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)
        it = node.iter
        if not (isinstance(node.target, cst.Name) and isinstance(it, cst.Call)):
            return
        args = [a.value for a in it.args if a.keyword is None]
        if len(args) == 2 and isinstance(args[0], cst.Integer) and args[0].value == "0":
            args = args[1:]  # `T.serial(0, n)`, `range(0, n)`: the same trips as `T.serial(n)`
        if len(args) == 1 and self._count(_follow(args[0], self.chain)):
            self.indices.add(node.target.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not isinstance(node.value, cst.Name):
            return
        for i, el in enumerate(node.slice):
            idx = el.slice.value if isinstance(el.slice, cst.Index) else None
            if isinstance(idx, cst.Name):
                self.reads.append((node, i, idx.value))


def _builds(
    f: Facts,
    resolver: Resolver,
    factory: Function,
    dim: cst.BaseExpression,
    knob_sites: set[int],
) -> list[tuple[cst.BaseExpression, cst.BaseExpression, int | None, tuple[str, ...]]] | None:
    """(the count, its divisor G, G's value, the names G is spelled through) for each place
    that sets the table dimension `dim`: a factory local, or a parameter at each call of the
    factory. None when one of them is not a count of G-wide blocks, or when G is the knob
    itself."""
    places: list[tuple[cst.BaseExpression, tuple[Function, ...]]] = []
    if (
        isinstance(dim, cst.Name)
        and dim.value in factory.params
        and dim.value not in (factory.assigns)
    ):
        for call in f.calls:
            if not resolver.calls(call, factory):
                continue
            bound = resolver.bound_by(call, factory, dim.value)
            if bound is None or bound[1] not in ("keyword", "positional"):
                return None
            places.append((_follow(bound[0], call.scope), call.scope))
    else:
        places.append((_follow(dim, factory.chain), factory.chain))
    out: list[tuple[cst.BaseExpression, cst.BaseExpression, int | None, tuple[str, ...]]] = []
    for count, scope in places:
        divisor = _count_divisor(count)
        if divisor is None:
            return None
        seen: list[str] = []
        _follow(divisor, scope, seen)
        res = (
            resolver.name(divisor.value, scope) if isinstance(divisor, cst.Name) else None
        )  # G passed on from the knob's own literal: the table follows the knob
        if res is not None and res.site is not None and id(res.site.node) in knob_sites:
            return None
        value = evaluate(divisor, Env(resolver, scope))
        out.append((count, divisor, value if type(value) is int else None, tuple(seen)))
    return out or None


@dataclass
class GranularityCheck:
    """Refuses moving a knob off the granularity of a per-tile table the host lays out."""

    name: str
    pins: list[_Pin]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for p in self.pins:
            if p.value != current:
                continue  # the kernel already runs off that granularity: not ours to judge
            return (
                f"{self.name}={value}: `{p.table}` (line {p.line}) is read at `{p.index}`, the "
                f"index of the {self.name}-sized tile, along a dimension `{p.dim}` that the file "
                f"builds as `{p.built}` (line {p.built_line}), a count of {p.value}-wide blocks "
                f"(`{p.divisor}` = {p.value}): entry i describes the i-th block of {p.value}, "
                f"which is the i-th tile only while {self.name} is {p.value}; {value} would read "
                f"the wrong entries"
            )
        return None

    def layouts(self) -> dict[str, str]:
        """The host names a pinned granularity is spelled through (`BLOCK = 64` in a test), each
        with why it is a layout of the file's data rather than a tile of a kernel."""
        out: dict[str, str] = {}
        for p in self.pins:
            for n in p.names:
                out.setdefault(
                    n,
                    f"the granularity ({p.value}) in which the file lays out the table `{p.table}` "
                    f"(line {p.line}; its dimension `{p.dim}` is built as `{p.built}`, line "
                    f"{p.built_line}), not a tile of a kernel: changing it changes the data, and "
                    f"the kernel's {self.name} is pinned to it",
                )
        return out


def granularity_check(
    f: Facts, resolver: Resolver, name: str, aliases: set[str], factories: list[Function]
) -> GranularityCheck | None:
    """The granularity rule of knob `name` over the tables `factories`' kernels read."""
    by_node = {id(fn.node): fn for fn in f.functions}
    knob_sites: set[int] = set()
    for factory in factories:
        res = resolver.name(name, factory.chain)
        if res.site is not None:
            knob_sites.add(id(res.site.node))
    wanted = aliases | {name}
    pins: list[_Pin] = []
    for factory in factories:
        for pf in factory.prim_funcs:
            fn = by_node.get(id(pf))
            if fn is None:
                continue
            k = _Kernel(wanted, fn.chain)
            pf.visit(k)
            indices = k.tile_indices()
            for sub, i, index in k.reads:
                table = sub.value.value  # type: ignore[attr-defined]
                dims = k.dims.get(table)
                if index not in indices or dims is None or i >= len(dims):
                    continue
                dim = dims[i]
                if names_in(dim) & wanted or _is_count_of(dim, wanted, k.counts):
                    continue  # the table follows the knob
                built = _builds(f, resolver, factory, dim, knob_sites)
                if not built:
                    continue
                values = {v for _, _, v, _ in built}
                if len(values) != 1 or None in values:
                    continue  # G unknown on some call, or not one value
                count, divisor, value, _ = built[0]
                names = {n for *_, seen in built for n in seen}
                assert value is not None
                pins.append(
                    _Pin(
                        code_of(sub),
                        f.line(sub),
                        index,
                        code_of(dim),
                        code_of(count),
                        f.line(count),
                        code_of(divisor),
                        value,
                        tuple(sorted(names)),
                    )
                )
    return GranularityCheck(name, pins) if pins else None
