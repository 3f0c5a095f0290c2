"""Blocks that decide how much of an axis the kernel covers, with nothing walking the rest.

Most blocks are extents: a buffer, a loop or a slice is `block` long, and the grid or a loop
steps through the tensor in `block`-sized tiles, so another value still covers everything.
Two ways of reading a block leave no such walk, and then only the current value is right:

- one row per vector core: the prim_func reads the knob only as a row's position, a grid
  index times the knob plus the vector-core index times its share
  (`cid * block_M + vid * block_M // VEC_NUM`), never as an extent (no buffer, loop, slice
  or count is sized by it). Each (block, vector core) pair handles exactly one row, so the
  grid covers every row only when the knob equals the vector-core count VEC_NUM: a larger
  block skips rows, a smaller one has both vector cores handle the same row.
- a window that never moves: the prim_func reads the knob only as a buffer's dimension, and
  a copy fills that buffer from a tensor at a fixed origin (`T.copy(Q[b, m * block_m, g *
  d], q_l1)`, no index stepping by the knob): the kernel reads exactly `knob` elements
  along that axis (block_k of a d-wide head row) and nothing reads the rest. Another value
  reads a different part of the tensor, so the current one is the only value the file's
  arithmetic is written for (it is the axis's extent, or the kernel is already wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.exprrules import aliases_of, sized_by
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, launch, tensor_params

ALLOCS = ("alloc_",)


def _kernel_targets(pf: cst.FunctionDef) -> tuple[str, str] | None:
    """(block index, vector-core index) of the prim_func's `T.Kernel(..., is_npu=True) as
    (cid, vid)`, or None."""
    found: list[tuple[str, str]] = []

    class V(cst.CSTVisitor):
        def visit_WithItem(self, node: cst.WithItem) -> None:
            k = launch(node)
            if k is not None and k.npu and len(k.names) == 2 and all(k.names):
                found.append((k.names[0], k.names[1]))

    pf.body.visit(V())
    return found[0] if len(found) == 1 else None


class _Uses(cst.CSTVisitor):
    """Every read of the knob (or a name computed from it) inside a prim_func, with the nodes
    around it, innermost last."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.stack: list[cst.CSTNode] = []
        self.uses: list[tuple[cst.Name, list[cst.CSTNode]]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name) and node.value in self.names:
            self.uses.append((node, list(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _product_with(node: cst.CSTNode | None, knob: cst.CSTNode, other: str) -> bool:
    """`other * knob` or `knob * other`."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return False
    mate = node.right if node.left is knob else node.left if node.right is knob else None
    return isinstance(mate, cst.Name) and mate.value == other


def _vector_share(use: cst.Name, around: list[cst.CSTNode], vid: str) -> cst.BaseExpression | None:
    """V of `vid * knob // V` or `vid * (knob // V)` around `use`, else None."""
    parent = around[-1] if around else None
    grand = around[-2] if len(around) > 1 else None
    if _product_with(parent, use, vid) and (
        isinstance(grand, cst.BinaryOperation)
        and isinstance(grand.operator, cst.FloorDivide)
        and grand.left is parent
    ):
        return grand.right
    if (
        isinstance(parent, cst.BinaryOperation)
        and isinstance(parent.operator, cst.FloorDivide)
        and parent.left is use
        and _product_with(grand, parent, vid)
    ):
        return parent.right
    return None


def _in_grid(around: list[cst.CSTNode]) -> bool:
    """Inside the arguments of `T.Kernel(...)` (a tile count)."""
    return any(isinstance(n, cst.Call) and dotted(n.func).endswith("Kernel") for n in around)


def _alloc_of(around: list[cst.CSTNode]) -> cst.Call | None:
    """The `T.alloc_*(shape, ...)` call whose shape holds this read, else None."""
    for i, n in enumerate(around):
        if isinstance(n, cst.Call) and dotted(n.func).rsplit(".", 1)[-1].startswith(ALLOCS):
            first = next((a for a in n.args if a.keyword is None), None)
            return (
                n if first is not None and i + 1 < len(around) and around[i + 1] is first else None
            )
    return None


@dataclass(frozen=True)
class _Rows:
    chain: tuple[Function, ...]
    share: cst.BaseExpression  # V, the vector-core count
    line: int
    text: str


@dataclass(frozen=True)
class _Window:
    buffer: str
    buffer_line: int
    copy_line: int
    source: str


def _buffer_name(alloc: cst.Call, pf: cst.FunctionDef) -> tuple[str, cst.Assign] | None:
    found: list[tuple[str, cst.Assign]] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if (
                node.value is alloc
                and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)
            ):
                found.append((node.targets[0].target.value, node))

    pf.body.visit(V())
    return found[0] if found else None


def _fixed_origin_fills(pf: cst.FunctionDef, tensors: set[str]) -> dict[str, cst.Call]:
    """buffer -> a `T.copy(tensor[i, j, ...], buffer)` filling it from a point (no slice, no
    explicit size): the copy moves as much as the buffer holds."""
    out: dict[str, cst.Call] = {}

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).rsplit(".", 1)[-1] != "copy":
                return
            if any(a.keyword is not None for a in node.args):
                return
            args = [a.value for a in node.args]
            if len(args) != 2 or not isinstance(args[1], cst.Name):
                return
            src = args[0]
            if not (
                isinstance(src, cst.Subscript)
                and isinstance(src.value, cst.Name)
                and src.value.value in tensors
                and all(isinstance(e.slice, cst.Index) for e in src.slice)
            ):
                return
            out.setdefault(args[1].value, node)

    pf.body.visit(V())
    return out


@dataclass
class Coverage:
    name: str
    rows: list[_Rows]
    windows: list[tuple[_Window, tuple[Function, ...]]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for r in self.rows:
            share = evaluate(r.share, env(r.chain, current))
            if type(share) is not int or share < 2 or share != current:
                continue  # the current value is not one row per vector core either
            return (
                f"{self.name}={value}: each vector core handles the one row `{r.text}` (line "
                f"{r.line}) and nothing in the kernel loops over, allocates or slices "
                f"{self.name} rows, so the grid covers every row once only at {self.name} = "
                f"`{code_of(r.share)}` ({share}): a larger value skips rows, a smaller one "
                f"has two vector cores handle the same row"
            )
        for w, _ in self.windows:
            return (
                f"{self.name}={value}: {self.name} only sizes `{w.buffer}` (line "
                f"{w.buffer_line}), which the copy at line {w.copy_line} fills from a fixed "
                f"origin of `{w.source}`: nothing steps along that axis by {self.name}, so the "
                f"kernel reads exactly {self.name} elements there and another value reads a "
                f"different part of the tensor (the current {current} is the extent it is "
                f"written for)"
            )
        return None


def coverage_check(f: Facts, name: str, factories: list[Function]) -> Coverage | None:
    by_node = {id(fn.node): fn for fn in f.functions}
    rows: list[_Rows] = []
    windows: list[tuple[_Window, tuple[Function, ...]]] = []
    for factory in factories:
        aliases = aliases_of(name, factory.chain, f)
        derived = sized_by(f, aliases, within=list(factory.chain)) - aliases
        for pf in factory.prim_funcs:
            chain = by_node[id(pf)].chain
            v = _Uses(aliases | derived)
            pf.body.visit(v)
            if not v.uses:
                continue
            knob_uses = [(u, a) for u, a in v.uses if u.value in aliases]
            other = [(u, a) for u, a in v.uses if u.value not in aliases]
            targets = _kernel_targets(pf)
            row = _row_rule(knob_uses, other, targets, f, chain)
            if row is not None:
                rows.append(row)
                continue
            window = _window_rule(knob_uses, other, pf, f)
            if window is not None:
                windows.append((window, chain))
    return Coverage(name, rows, windows) if rows or windows else None


def _row_rule(
    knob_uses: list[tuple[cst.Name, list[cst.CSTNode]]],
    other: list[tuple[cst.Name, list[cst.CSTNode]]],
    targets: tuple[str, str] | None,
    f: Facts,
    chain: tuple[Function, ...],
) -> _Rows | None:
    if targets is None or not knob_uses or not all(_in_grid(a) for _, a in other):
        return None
    cid, vid = targets
    shares: list[tuple[cst.BaseExpression, cst.CSTNode]] = []
    for use, around in knob_uses:
        share = _vector_share(use, around, vid)
        if share is not None:
            shares.append((share, _row_expr(around)))
        elif not (around and _product_with(around[-1], use, cid)):
            return None  # read as an extent, or in some other way: not a row position
    if not shares or len({code_of(s) for s, _ in shares}) != 1:
        return None
    share, expr = shares[0]
    return _Rows(chain, share, f.line(expr), code_of(expr))


def _row_expr(around: list[cst.CSTNode]) -> cst.CSTNode:
    """The whole position expression around a read (the outermost arithmetic)."""
    top = around[-1]
    for n in reversed(around):
        if not isinstance(n, cst.BinaryOperation):
            break
        top = n
    return top


def _window_rule(
    knob_uses: list[tuple[cst.Name, list[cst.CSTNode]]],
    other: list[tuple[cst.Name, list[cst.CSTNode]]],
    pf: cst.FunctionDef,
    f: Facts,
) -> _Window | None:
    if not knob_uses or other:
        return None
    allocs = []
    for _, around in knob_uses:
        alloc = _alloc_of(around)
        if alloc is None:
            return None  # read as an index, a loop bound, a count: the tiles move
        allocs.append(alloc)
    fills = _fixed_origin_fills(pf, tensor_params(pf))
    for alloc in allocs:
        named = _buffer_name(alloc, pf)
        if named is None or named[0] not in fills:
            continue
        copy = fills[named[0]]
        src = copy.args[0].value
        assert isinstance(src, cst.Subscript)
        return _Window(named[0], f.line(named[1]), f.line(copy), code_of(src.value))
    return None
