"""Where the compiler places a buffer that names no memory of its own.

`T.alloc_shared` and `T.alloc_fragment` leave the memory to the compiler, which
places a buffer by what the kernel does with it: the A/B operands of a matrix
multiply live in L1, its accumulator in L0C, and the operands of vector
instructions (`T.tile.*`, `T.reduce_*`, NPUIR `T.v*`) in UB. A buffer used both
ways, or only copied, is left unplaced (bot/strategies/capacity.py then checks
it against the largest memory it could be in).
"""

from __future__ import annotations

import libcst as cst

from bot.strategies.source import dotted

# matrix multiplies (A, B, C, ...): A/B in L1, C in L0C. `npuir_dot` is TileLang-NPUIR's own
# spelling of the `gemm` it exports; checked before VECTOR_PREFIXES, whose `T.npuir_` would
# otherwise put its operands in UB. `mma_mx` is tile-ai/tilelang-ascend's `npu_gemm_mx(A, B,
# C, scale_A, scale_B, ...)` (MX block-scaled, A/B in L0A/L0B): a cube multiply like `mma`
GEMMS = frozenset({"gemm", "gemm_v0", "gemm_v1", "gemm_mx", "mma", "mma_mx", "npuir_dot"})
VECTOR_PREFIXES = ("T.tile.", "T.reduce", "T.v", "T.npuir_")


def _base(node: cst.BaseExpression) -> str | None:
    """`acc_o` for `acc_o` or `acc_o[h_i, :]`."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


class _Uses(cst.CSTVisitor):
    def __init__(self) -> None:
        self.uses: dict[str, set[str]] = {}

    def _add(self, node: cst.BaseExpression, memory: str) -> None:
        name = _base(node)
        if name is not None:
            self.uses.setdefault(name, set()).add(memory)

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        args = [a.value for a in node.args if a.keyword is None]
        if name.rsplit(".", 1)[-1] in GEMMS and name.startswith("T.") and len(args) >= 3:
            self._add(args[0], "L1")
            self._add(args[1], "L1")
            self._add(args[2], "L0C")
        elif name.startswith(VECTOR_PREFIXES):
            for a in args:
                self._add(a, "UB")


def placements(prim_func: cst.FunctionDef) -> dict[str, str]:
    """Buffer name -> the one memory its uses in `prim_func` put it in."""
    v = _Uses()
    prim_func.visit(v)
    return {name: next(iter(m)) for name, m in v.uses.items() if len(m) == 1}
