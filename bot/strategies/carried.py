"""A pipelined loop that reads global memory a later statement of its body writes.

In a `T.Pipelined` body, a statement that reads a region of a global tensor (a kernel
parameter: an input, or a GM workspace the cube and vector halves exchange data through)
before a later statement of the same body writes that region, at an index that does not
move with the loop variable, reads what an earlier trip wrote: a dependence carried from
trip to trip through memory.

    for i_i in T.Pipelined(NI, num_stages=2):
        T.copy(workspace_1[b, s, 0:BI, 0:D], kv_l1)        # cube: reads workspace_1
        ...
        T.copy(kv_ub, workspace_1[b, s, bi_i, :])          # vector: writes it, later

Which trip's write such a read sees is decided by how the compiler splits the body into
stages and overlaps trips at the loop's depth (here: the writer placed in an earlier stage
than the reader); the file shows that only its own depth gives the result it checks. At
another depth the stages, the prologue and the overlap differ, and the read can see the
write of another trip, or none. So a change of the depth of such a loop is refused, with
the two statements. Reads and writes are read from `T.copy(src, dst)` (src read, dst
written) and from subscript assignments; a region indexed by the loop variable (or a name
computed from it) moves with the trip and is not carried.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies.facts import flowing, names_in
from bot.strategies.source import annotation_heads, dotted, line_of


def _base(node: cst.BaseExpression) -> tuple[str, cst.Subscript | None] | None:
    """(`X`, the subscript) for `X[...]`, (`X`, None) for a bare name."""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
        return node.value.value, node
    if isinstance(node, cst.Name):
        return node.value, None
    return None


class _Accesses(cst.CSTVisitor):
    """(tensor, read?, moves with the trip?, statement node) in program order."""

    def __init__(self, tensors: set[str], moving: set[str]) -> None:
        self.tensors, self.moving = tensors, moving
        self.found: list[tuple[str, bool, bool, cst.CSTNode]] = []
        self.stmt: cst.CSTNode | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.stmt = node

    def _add(self, expr: cst.BaseExpression, read: bool) -> None:
        base = _base(expr)
        if base is None or base[0] not in self.tensors or self.stmt is None:
            return
        name, sub = base
        moves = sub is None or bool(names_in(sub) & self.moving)
        self.found.append((name, read, moves, self.stmt))

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func).rsplit(".", 1)[-1] != "copy":
            return
        args = [a.value for a in node.args if a.keyword is None]
        if len(args) >= 2:
            self._add(args[0], True)
            self._add(args[1], False)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._add(t.target, False)


def moving(loop: cst.For, inner_loops: bool = True) -> set[str]:
    """The loop variable and the body's names computed from it (`base = i * BI`); with
    inner_loops, also the variables of inner loops over a range computed from it."""
    moving = names_in(loop.target)
    assigns: list[tuple[set[str], set[str]]] = []

    class _A(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            targets: set[str] = set()
            for t in node.targets:
                targets |= names_in(t.target)
            assigns.append((targets, names_in(node.value)))

        def visit_For(self, node: cst.For) -> None:  # an inner loop over a moving range
            if inner_loops:
                assigns.append((names_in(node.target), names_in(node.iter)))

    loop.body.visit(_A())
    return flowing(moving, assigns)


def carried(
    loop: cst.For, tensors: set[str], line: Callable[[cst.CSTNode], int]
) -> tuple[str, int, int] | None:
    """(tensor, read line, write line) of the first global tensor `loop`'s body reads at a fixed
    region before a later statement writes it at a fixed region; None when there is none."""
    v = _Accesses(tensors, moving(loop))
    loop.body.visit(v)
    for name, read, moves, stmt in v.found:
        if not read or moves:
            continue
        for other, r2, m2, s2 in v.found:
            if other == name and not r2 and not m2 and line(s2) > line(stmt):
                return name, line(stmt), line(s2)
    return None


def _global_tensors(fn: cst.FunctionDef) -> set[str]:
    """Parameters of a prim_func, of any kind, annotated as global tensors (`X: T.Tensor(...)`,
    `X: T.Buffer(...)`)."""
    heads = annotation_heads(fn, every_kind=True)
    return {name for name, head in heads.items() if head.rsplit(".", 1)[-1] in ("Tensor", "Buffer")}


class _Loop(cst.CSTVisitor):
    """The `for` whose iterator is `call`, and the function around it."""

    def __init__(self, call: cst.Call) -> None:
        self.call = call
        self.stack: list[cst.FunctionDef] = []
        self.found: tuple[cst.For, cst.FunctionDef] | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_For(self, node: cst.For) -> None:
        if node.iter is self.call and self.stack and self.found is None:
            self.found = (node, self.stack[-1])


def refusal(
    wrapper: MetadataWrapper, call: cst.Call, line: int, depth: int, current: int | None
) -> str | None:
    """Why the depth of the T.Pipelined loop of `call` (at `line`) may not change from
    `current` to `depth`, or None."""
    if current is None or depth == current:
        return None
    v = _Loop(call)
    wrapper.module.visit(v)
    if v.found is None:
        return None
    loop, fn = v.found
    hit = carried(loop, _global_tensors(fn), lambda n: line_of(wrapper, n))
    if hit is None:
        return None
    name, read, write = hit
    return (
        f"T.Pipelined at line {line}: its body reads the global tensor {name} at line {read} "
        f"before line {write} of the same body writes it, at a region that does not move with "
        f"the loop variable, so each trip reads what another trip wrote: which one is decided "
        f"by how the compiler splits the body into stages and overlaps trips at "
        f"num_stages={current}, the depth the file runs with; at num_stages={depth} the split "
        f"and overlap differ, and nothing in the file shows the read still sees the write it "
        f"needs"
    )
