"""Rules read from how a kernel walks its tiles.

- groups: a loop over `T.ceildiv(X, knob)` tiles whose index picks a row of a
  tensor laid out in `T.ceildiv(X, G)` groups (per-group scales) ties the
  knob to G;
- whole tile: when the kernel's grid walks `X // knob` tiles (or
  `T.ceildiv(X, knob)`) and a write to one of its output tensors does not
  depend on the tile's position (`S[bm * block_M, 0]` while the tiles run
  over bn), every tile writes the same place: the kernel is only correct
  with one tile, so the knob must cover the whole extent X (a per-row
  scale laid out `[M, 1]` ties block_N to N). Only when what is written
  depends on the tile's position: a value every tile computes alike (rows of
  a weight unpacked by the other axis's tile, `workspace[actual_row, ..]` with
  actual_row from bn while block_M tiles run over bm) is written again with the
  same bytes, which no tile can tell from one write.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from bot.strategies.evaluate import CEILDIV
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, launch, tensor_params


@dataclass(frozen=True)
class Rule:
    # exact (must divide X) | cap (must not exceed X) | equal (groups of X) | whole (one tile: must
    # be X) | multiple (must be a multiple of X) | assert | raises (`if test: raise`)
    kind: str
    node: cst.BaseExpression  # the extent X, or the assert's test
    chain: tuple[Function, ...]  # scope the node is evaluated in
    line: int
    text: str  # the source text, for messages
    why: str = (
        ""  # exact: why a partial last tile breaks the kernel, when it would otherwise be fine
    )


def ceildiv_args(
    node: cst.BaseExpression | None,
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] in CEILDIV:
        args = [a.value for a in node.args if a.keyword is None]
        if len(args) == 2:
            return args[0], args[1]
    return None


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def group_rules(f: Facts, factory: Function, aliases: set[str]) -> list[Rule]:
    """`for k in T.Pipelined(T.ceildiv(K, knob))` + `scales[.., k]` with scales' dim `T.ceildiv(K, G)`."""
    rules: list[Rule] = []
    by_node = {id(fn.node): fn for fn in f.functions}
    for pf in factory.prim_funcs:
        chain = by_node[id(pf)].chain
        tensors: dict[str, list[cst.BaseExpression]] = {}
        for p in pf.params.params:
            ann = p.annotation.annotation if p.annotation else None
            if (
                isinstance(ann, cst.Call)
                and dotted(ann.func).endswith("Tensor")
                and ann.args
                and isinstance(ann.args[0].value, (cst.Tuple, cst.List))
            ):
                tensors[p.name.value] = [e.value for e in ann.args[0].value.elements]
        locals_: dict[str, list[cst.BaseExpression]] = {}
        for fn in chain:  # innermost wins
            locals_.update(fn.assigns)
        loops = _Loops(locals_, aliases)
        pf.visit(loops)
        index = _GroupIndex(f, tensors, loops.extents, aliases, chain)
        index.locals = locals_
        pf.visit(index)
        rules.extend(index.rules)
    return rules


class _Loops(cst.CSTVisitor):
    """Loop variable -> X for `for v in T.Pipelined(T.ceildiv(X, knob))` (directly or via a local)."""

    def __init__(self, locals_: dict[str, list[cst.BaseExpression]], aliases: set[str]) -> None:
        self.locals, self.aliases = locals_, aliases
        self.extents: dict[str, cst.BaseExpression] = {}

    def visit_For(self, n: cst.For) -> None:
        if (
            not isinstance(n.target, cst.Name)
            or not isinstance(n.iter, cst.Call)
            or not n.iter.args
        ):
            return
        extent = n.iter.args[0].value
        if isinstance(extent, cst.Name) and len(self.locals.get(extent.value, [])) == 1:
            extent = self.locals[extent.value][0]
        pair = ceildiv_args(extent)
        if pair and isinstance(pair[1], cst.Name) and pair[1].value in self.aliases:
            self.extents[n.target.value] = pair[0]


class _GroupIndex(cst.CSTVisitor):
    """`S[.., v]` where v walks knob tiles of X and S's dimension is `T.ceildiv(X, G)`: knob must be G."""

    def __init__(
        self,
        f: Facts,
        tensors: dict[str, list[cst.BaseExpression]],
        loops: dict[str, cst.BaseExpression],
        aliases: set[str],
        chain: tuple[Function, ...],
    ) -> None:
        self.f, self.tensors, self.loops, self.aliases, self.chain = (
            f,
            tensors,
            loops,
            aliases,
            chain,
        )
        self.rules: list[Rule] = []
        self.locals: dict[str, list[cst.BaseExpression]] = {}

    def visit_Subscript(self, n: cst.Subscript) -> None:
        if not isinstance(n.value, cst.Name) or n.value.value not in self.tensors:
            return
        dims = self.tensors[n.value.value]
        for i, el in enumerate(n.slice):
            idx = el.slice.value if isinstance(el.slice, cst.Index) else None
            if not (isinstance(idx, cst.Name) and idx.value in self.loops) or i >= len(dims):
                continue
            dim = dims[i]  # a dimension named by a local (`k_groups = T.ceildiv(K, G)`)
            if isinstance(dim, cst.Name) and len(self.locals.get(dim.value, [])) == 1:
                dim = self.locals[dim.value][0]
            pair = ceildiv_args(dim)
            if (
                pair
                and _code(pair[0]) == _code(self.loops[idx.value])
                and not (isinstance(pair[1], cst.Name) and pair[1].value in self.aliases)
            ):
                self.rules.append(Rule("equal", pair[1], self.chain, self.f.line(n), _code(n)))


def _count_extent(
    node: cst.BaseExpression, aliases: set[str], counts: dict[str, cst.BaseExpression]
) -> cst.BaseExpression | None:
    """X when `node` is a count of knob tiles: `X // knob`, `T.ceildiv(X, knob)` or a name for one."""
    if isinstance(node, cst.Name) and node.value in counts:
        return counts[node.value]
    if (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.FloorDivide)
        and isinstance(node.right, cst.Name)
        and node.right.value in aliases
    ):
        return node.left
    pair = ceildiv_args(node)
    if pair and isinstance(pair[1], cst.Name) and pair[1].value in aliases:
        return pair[0]
    return None


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(V())
    return found


class _Grid(cst.CSTVisitor):
    """The tile index of the knob in a prim_func, the names derived from it, and the writes to
    its tensor parameters."""

    def __init__(
        self, aliases: set[str], counts: dict[str, cst.BaseExpression], tensors: set[str]
    ) -> None:
        self.aliases, self.counts, self.tensors = aliases, counts, tensors
        self.extent: cst.BaseExpression | None = None
        self.index: set[str] = set()  # names that hold the knob tile's position
        self.products: list[tuple[str, cst.BaseExpression, cst.BaseExpression]] = []
        self.assigns: list[tuple[str, cst.BaseExpression]] = []
        self.writes: list[cst.BaseExpression] = []  # destinations: Subscript or Name

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            k = launch(item)
            if k is None:
                continue
            names = k.names
            for i, g in enumerate(k.grid[:1] if k.npu else k.grid):
                if i >= len(names) or not names[i]:
                    continue
                x = _count_extent(g, self.aliases, self.counts)
                if x is not None:
                    self.extent, self.index = x, {names[i]}
                elif isinstance(g, cst.BinaryOperation) and isinstance(
                    g.operator, cst.Multiply
                ):  # `m_num * n_num`: the position is `cid % n_num` or `cid // m_num`
                    for mine, other in ((g.left, g.right), (g.right, g.left)):
                        x = _count_extent(mine, self.aliases, self.counts)
                        if x is not None:
                            self.extent = x
                            self.products.append((names[i], mine, other))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.assigns.append((target.target.value, node.value))
            elif isinstance(target.target, cst.Subscript):
                self._write(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.assigns.append((node.target.value, node.value))  # `row: T.int32 = bm * 32`

    def visit_Call(self, node: cst.Call) -> None:
        dst = _copy_dst(node)
        if dst is not None:
            self._write(dst)

    def _write(self, dst: cst.BaseExpression) -> None:
        base = dst.value if isinstance(dst, cst.Subscript) else dst
        if isinstance(base, cst.Name) and base.value in self.tensors:
            self.writes.append(dst)

    def other_axis(self) -> set[str]:
        """Names holding the position of another axis of a product grid (`bn = cid % n_num`
        beside the knob's `bm = cid // n_num`): they read the grid index without reading the
        knob tile's position."""
        return self._split(mine_axis=False, only_grid=True)

    def _split(self, mine_axis: bool, only_grid: bool) -> set[str]:
        """Names a product grid's index is split into along one axis: the knob's (`cid %
        mine`, `cid // other`) or the other (`cid % other`, `cid // mine`); with `only_grid`
        the split reads nothing but the grid index."""
        out: set[str] = set()
        for grid_var, mine, other in self.products:
            mod, div = (mine, other) if mine_axis else (other, mine)
            for name, value in self.assigns:
                if not isinstance(value, cst.BinaryOperation):
                    continue
                read = _names(value.left)
                if (read == {grid_var} if only_grid else grid_var in read) and (
                    isinstance(value.operator, cst.Modulo)
                    and _code(value.right) == _code(mod)
                    or isinstance(value.operator, cst.FloorDivide)
                    and _code(value.right) == _code(div)
                ):
                    out.add(name)
        return out

    def derived(self) -> set[str]:
        """The tile's position and every name computed from it."""
        index = self.index | self._split(mine_axis=True, only_grid=False)
        changed = True
        while changed:
            changed = False
            for name, value in self.assigns:
                if name not in index and _names(value) & index:
                    index.add(name)
                    changed = True
        return index


def whole_rules(f: Facts, factory: Function, aliases: set[str]) -> list[Rule]:
    """A write to an output tensor that every knob tile makes at the same place: one tile only."""
    rules: list[Rule] = []
    by_node = {id(fn.node): fn for fn in f.functions}
    counts: dict[str, cst.BaseExpression] = {}
    for fn in factory.chain:
        for name, values in fn.assigns.items():
            x = _count_extent(values[0], aliases, {}) if len(values) == 1 else None
            if x is not None:
                counts[name] = x
    for pf in factory.prim_funcs:
        chain = by_node[id(pf)].chain
        grid = _Grid(aliases, counts, tensor_params(pf))
        pf.visit(grid)
        if grid.extent is None:
            continue
        index = grid.derived()
        if not index:
            continue
        flows = _Flows()
        pf.visit(flows)
        roots = index | {g for g, _, _ in grid.products}  # the grid index itself, read raw
        tainted = flows.taint(roots, grid.other_axis())
        for dst in grid.writes:
            if _names(dst) & index:
                continue
            reads = flows.reads_of.get(id(dst))
            if reads is not None and not reads & tainted:
                continue  # every tile writes the same value there: a repeat, not an overwrite
            rules.append(Rule("whole", grid.extent, chain, f.line(dst), _code(dst)))
            break
    return rules


class _Flows(cst.CSTVisitor):
    """Per statement of a prim_func: the names it reads (with the tests of the `for`, `if` and
    `with` around it) and the names it writes, to follow what depends on a tile's position.
    A copy's destination may be given as `dst=`, a local may be annotated (`row: T.int32 =
    ...`), and an op may write a buffer it is handed by keyword; a constant it is handed
    (`True`) is written by none."""

    def __init__(self) -> None:
        self.headers: list[set[str]] = []
        self.flows: list[tuple[set[str], set[str]]] = []  # (reads, writes)
        self.reads_of: dict[int, set[str]] = {}  # id(written destination) -> what it reads
        self.allocated: set[str] = set()  # on-chip buffers the kernel allocates

    def _around(self) -> set[str]:
        return set().union(*self.headers) if self.headers else set()

    def _flow(self, reads: set[str], dsts: list[cst.BaseExpression]) -> None:
        reads = reads | self._around()
        writes: set[str] = set()
        for dst in dsts:
            base = dst
            while isinstance(base, cst.Subscript):
                base = base.value
            if isinstance(base, cst.Name):
                writes.add(base.value)
            self.reads_of[id(dst)] = reads
        self.flows.append((reads, writes))

    def visit_For(self, node: cst.For) -> None:
        self._flow(_names(node.iter), [node.target] if isinstance(node.target, cst.Name) else [])
        self.headers.append(_names(node.iter))

    def leave_For(self, original_node: cst.For) -> None:
        self.headers.pop()

    def visit_If(self, node: cst.If) -> None:
        self.headers.append(_names(node.test))

    def leave_If(self, original_node: cst.If) -> None:
        self.headers.pop()

    def visit_While(self, node: cst.While) -> None:
        self.headers.append(_names(node.test))

    def leave_While(self, original_node: cst.While) -> None:
        self.headers.pop()

    def visit_With(self, node: cst.With) -> None:
        self.headers.append(set().union(*(_names(i.item) for i in node.items)))

    def leave_With(self, original_node: cst.With) -> None:
        self.headers.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        if isinstance(node.value, cst.Call) and dotted(node.value.func).rsplit(".", 1)[
            -1
        ].startswith("alloc"):
            self.allocated |= {t.value for t in targets if isinstance(t, cst.Name)}
            return  # an allocation holds no value yet
        reads = _names(node.value)
        for t in targets:
            if isinstance(t, cst.Subscript):
                reads |= _names(t) - {t.value.value if isinstance(t.value, cst.Name) else ""}
        self._flow(reads, [t for t in targets if isinstance(t, (cst.Name, cst.Subscript))])

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._flow(_names(node.value) | _names(node.target), [node.target])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:  # `row: T.int32 = bm * block_M`
            self._flow(_names(node.value), [node.target])

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not isinstance(call, cst.Call):
            return
        dst = _copy_dst(call)
        if dst is not None:
            self._flow(_names(call) - _names(dst) | _index_names(dst), [dst])
        else:  # any buffer an op is handed, by position or by keyword, may be written
            args = [a.value for a in call.args]
            self._flow(_names(call), [a for a in args if _buffer_like(a)])

    def taint(self, roots: set[str], clean: set[str]) -> set[str]:
        """Every name whose value may differ between tiles: the roots, and what a statement
        reading one writes (`clean` names, another axis's position, stay clean)."""
        written = set().union(*(w for _, w in self.flows)) if self.flows else set()
        # a buffer nothing writes holds whatever each core's memory held: not one value
        tainted = set(roots) | (self.allocated - written)
        changed = True
        while changed:
            changed = False
            for reads, writes in self.flows:
                if reads & tainted and not writes <= tainted | clean:
                    tainted |= writes - clean
                    changed = True
        return tainted


def _copy_dst(call: cst.Call) -> cst.BaseExpression | None:
    """The destination of a `T.copy(src, dst)`, given second or as `dst=`; None for any other
    call."""
    if dotted(call.func).rsplit(".", 1)[-1] != "copy":
        return None
    args = [a.value for a in call.args if a.keyword is None]
    if len(args) >= 2:
        return args[1]
    return next((a.value for a in call.args if a.keyword and a.keyword.value == "dst"), None)


def _buffer_like(node: cst.BaseExpression) -> bool:
    """A name or a region an op may write: not a constant (`init=True`)."""
    if isinstance(node, cst.Name):
        return node.value not in ("True", "False", "None")
    return isinstance(node, cst.Subscript)


def _index_names(node: cst.BaseExpression) -> set[str]:
    """The names a subscripted destination reads in its indices (`Y[bx * 32, 0]`: bx)."""
    if isinstance(node, cst.Subscript):
        base = node.value.value if isinstance(node.value, cst.Name) else ""
        return _names(node) - {base}
    return set()
