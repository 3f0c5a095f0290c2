"""A run-time extent the host pads to a multiple of a literal: the tiles must divide it.

A kernel whose extent is only known at run time (`num_tokens = T.symbolic("num_tokens")`)
walks it in `T.ceildiv(num_tokens, block_m)` tiles. When the host code of the same file pads
that extent before the call, `((num_tokens + 15) // 16) * 16`, the padding is the whole-tile
guarantee the author relied on: every extent the kernel sees is a multiple of 16 and nothing
more. A block that does not divide 16 leaves a partial last tile over rows the host never
padded. So the block must divide the padding granule (an `exact` rule with the granule as its
extent), whether or not the kernel's copies would clip a partial tile.

Only a padding in code that builds the kernel counts: a function (or the module level) that
calls the factory, where the padded size is what the kernel is given. The same name padded
in an unrelated function (a reference, another kernel's host code) says nothing of this
kernel's extent, and neither does a rounding inside `min(...)`
(`block_W = min(256, ((W_out + 15) // 16) * 16)`), which sizes a tile from the extent (one
inside `max(...)` still pads: `max(16, ((n + 15) // 16) * 16)` is never below `n`).
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.evaluate import code_of
from bot.strategies.facts import Facts, Function
from bot.strategies.source import int_value
from bot.strategies.tiling import Rule


def _callee(call: cst.Call) -> str | None:
    """`rows` of `rows(...)` and of `rows(...)(x)`."""
    func = call.func
    if isinstance(func, cst.Call):
        func = func.func
    return func.value if isinstance(func, cst.Name) else None


def granules(
    f: Facts, builders: tuple[str, ...] | None = None
) -> dict[str, tuple[int, cst.BinaryOperation]]:
    """name -> (P, expression) for every `((name + P - 1) // P) * P` in the file; with
    `builders` (the factory chain's names), only in a scope that calls one of them. Kept on
    the parse: every knob of the factory asks, and each answer walks the whole module."""
    return dict(f.kept(("hostpad.granules", builders), lambda: _granules(f, builders)))


def _granules(
    f: Facts, builders: tuple[str, ...] | None
) -> dict[str, tuple[int, cst.BinaryOperation]]:
    found: dict[str, tuple[int, cst.BinaryOperation]] = {}
    building: set[int | None] = set()  # ids of the FunctionDefs that call a builder (None: module)
    for call in f.calls:
        if builders is not None and _callee(call.node) in builders:
            building.add(id(call.scope[-1].node) if call.scope else None)
    stack: list[cst.FunctionDef] = []
    clamps: list[cst.Call] = []  # the enclosing `min(...)` calls: a tile clamped to the extent

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Name) and n.func.value == "min":
                clamps.append(n)

        def leave_Call(self, original_node: cst.Call) -> None:
            if clamps and clamps[-1] is original_node:
                clamps.pop()

        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            stack.append(n)

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            stack.pop()

        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> None:
            scope = id(stack[-1]) if stack else None
            if builders is not None and scope not in building:
                return
            if clamps:  # `min(256, ((W + 15) // 16) * 16)` rounds a tile, not the extent
                # (`max(16, ((n + 15) // 16) * 16)` still pads: its result is never below n)
                return
            if not isinstance(n.operator, cst.Multiply):
                return
            p = int_value(n.right)
            div = n.left
            if p is None or p < 2 or not isinstance(div, cst.BinaryOperation):
                return
            if not isinstance(div.operator, cst.FloorDivide) or int_value(div.right) != p:
                return
            add = div.left
            if (
                isinstance(add, cst.BinaryOperation)
                and isinstance(add.operator, cst.Add)
                and isinstance(add.left, cst.Name)
                and int_value(add.right) == p - 1
            ):
                found.setdefault(add.left.value, (p, n))

    f.wrapper.module.visit(V())
    return found


def pad_rules(
    f: Facts, ceil: list[Rule], symbols: dict[str, str], chain: tuple[Function, ...]
) -> list[Rule]:
    """An `exact` rule against the granule for each `T.ceildiv(X, knob)` whose X the host pads."""
    pads = granules(f, tuple(fn.name for fn in chain))
    if not pads:
        return []
    python = {v: k for k, v in symbols.items()}  # Python name -> symbol name
    rules: list[Rule] = []
    for r in ceil:
        if not isinstance(r.node, cst.Name):
            continue
        name = r.node.value
        hit = pads.get(name) or pads.get(python.get(name, ""))
        if hit is None:
            continue
        p, expr = hit
        why = (
            f"the host pads `{name}` only to a multiple of {p} (`{code_of(expr)}`, line "
            f"{f.line(expr)}), so a larger or uneven tile runs past the rows it pads"
        )
        rules.append(Rule("exact", cst.Integer(str(p)), chain, r.line, r.text, why))
    return rules
