"""A pipelined loop whose body keeps its trips apart in a fixed number of hand-rotated slots.

A `T.Pipelined` body that picks one of k buffers by the trip (`task_id = i % 2` indexing
`kv_gather[task_id, ...]`, or `if si % 2 == 0:` accumulating into `sum_a`, else `sum_b`) was
written for at most k trips in flight: trip i and trip i + k share a slot, so they must not
overlap. A pipeline of s stages keeps s trips in flight (bot/strategies/stagefit.py), so a depth
deeper than k (and than the depth the file already runs) would overlap two trips that write the
same slot. Shallower depths, serial order included, keep them apart and are left alone.

The trip is the loop variable or a name the body computes from it (`g = i * n + j`, then
`task = g % 2`); k is an integer literal of 2 or more. A remainder selects a slot when it (or
the name it is assigned to) is an index of a subscript, or when an `if` tests it; not an index
of a buffer or tensor the body only copies from (`T.copy(W[si % 2, 0], w)`: a row of a table no
trip writes, which trips in flight may share), nor an `if` with an `else` whose two sides pass
their calls the same buffers (`T.tile.add(acc, acc, buf)` on even trips, `T.tile.sub(acc, acc,
buf)` on odd ones: the test picks an operation, not a buffer).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies.carried import moving
from bot.strategies.facts import names_in
from bot.strategies.source import dotted, line_of


def _remainder(node: cst.BaseExpression, moving: set[str]) -> int | None:
    """k for `x % k` with x moving with the trip and k an integer literal >= 2, else None."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)):
        return None
    right = node.right
    if not isinstance(right, cst.Integer) or not names_in(node.left) & moving:
        return None
    k = int(right.evaluated_value)
    return k if k >= 2 else None


class _Slots(cst.CSTVisitor):
    """(k, node) of each remainder of the trip that selects a slot."""

    def __init__(self, moving: set[str], read_only: set[str]) -> None:
        self.moving = moving
        self.read_only = read_only  # names the loop body only copies from
        self.named: dict[str, tuple[int, cst.CSTNode]] = {}  # `task = i % 2`
        self.found: list[tuple[int, cst.CSTNode]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        k = _remainder(node.value, self.moving)
        if (
            k is not None
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
        ):
            self.named[node.targets[0].target.value] = (k, node)

    def _selector(self, node: cst.BaseExpression) -> tuple[int, cst.CSTNode] | None:
        k = _remainder(node, self.moving)
        if k is not None:
            return k, node
        if isinstance(node, cst.Name) and node.value in self.named:
            return self.named[node.value]
        return None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Name) and node.value.value in self.read_only:
            return  # a row of a table the loop only reads: no trip overwrites it
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                hit = self._selector(element.slice.value)
                if hit is not None:
                    self.found.append(hit)

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.Else) and _passed(node.body) == _passed(node.orelse.body):
            return  # both sides work on the same buffers: the test picks an operation, no slot
        test = node.test
        sides = (
            [test.left, *(c.comparator for c in test.comparisons)]
            if isinstance(test, cst.Comparison)
            else [test]
        )
        for side in sides:
            hit = self._selector(side)
            if hit is not None:
                self.found.append(hit)


def _passed(block: cst.CSTNode) -> set[str]:
    """The buffers a block's calls take: each argument's name, or the name it subscripts."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            value = node.value
            head = value.value if isinstance(value, cst.Subscript) else value
            if isinstance(head, cst.Name):
                found.add(head.value)

    block.visit(V())
    return found


def _copied_from_only(body: cst.CSTNode) -> set[str]:
    """Names whose every mention in `body` is inside the source (first argument) of a
    `T.copy`: a buffer or tensor the body reads and never writes."""
    sources: set[int] = set()
    mentions: dict[str, list[cst.Name]] = {}

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func) == "T.copy" and node.args and node.args[0].keyword is None:
                value = node.args[0].value
                head = value.value if isinstance(value, cst.Subscript) else value
                if isinstance(head, cst.Name):
                    sources.add(id(head))

        def visit_Name(self, node: cst.Name) -> None:
            mentions.setdefault(node.value, []).append(node)

    body.visit(V())
    return {name for name, at in mentions.items() if all(id(n) in sources for n in at)}


class _Loop(cst.CSTVisitor):
    def __init__(self, call: cst.Call) -> None:
        self.call = call
        self.found: cst.For | None = None

    def visit_For(self, node: cst.For) -> None:
        if node.iter is self.call and self.found is None:
            self.found = node


def refusal(
    wrapper: MetadataWrapper, call: cst.Call, line: int, depth: int, current: int | None
) -> str | None:
    """Why the T.Pipelined loop of `call` (at `line`) may not run `depth` stages: its body keeps
    fewer slots than trips in flight; None when it keeps no slots by the trip, or enough."""
    if current is None or depth <= max(current, 1):
        return None
    v = _Loop(call)
    wrapper.module.visit(v)
    if v.found is None:
        return None
    s = _Slots(moving(v.found, inner_loops=False), _copied_from_only(v.found.body))
    v.found.body.visit(s)
    if not s.found:
        return None
    k, node = min(s.found, key=lambda hit: hit[0])
    if depth <= k:
        return None
    code = wrapper.module.code_for_node(node).strip()
    return (
        f"T.Pipelined at line {line}: its body picks one of {k} slots by a count that moves "
        f"with the trip (`{code}` at line {line_of(wrapper, node)}): it keeps the data of at "
        f"most {k} trips apart, and num_stages={depth} would keep {depth} trips in flight, two "
        f"of them in the same slot"
    )
