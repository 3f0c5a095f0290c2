"""The auto-scheduled Ascend dialect of TileLang and the memory limits its scheduler keeps.

Kernels written against `tilelang.ascend.language` (PTO-ISA/tilelang's A5 AutoSchedule,
targets "ascend"/"pto") are placed in memory by a scheduler with per-scope limits that the
dialect documents: 216 KB of UB (`shared`) and 512 KB of L1 (`shared.l1`)
(examples/ascend/example_annotate_unlimit_memory.py). Its GEMM examples keep a 256 x 256
fp32 accumulator, 256 KB of L0C. `T.annotate_unlimit_memory(scope)` lifts the limit of one
scope for the kernel that says so. A file is taken to be in this dialect when it imports
`tilelang.ascend.language` or annotates buffer versions (`T.annotate_buffer_versions`),
which only that scheduler reads.
"""

from __future__ import annotations

import re

import libcst as cst

from bot.strategies.source import dotted

KB = 1024
LIMITS: dict[str, int] = {"UB": 216 * KB, "L1": 512 * KB, "L0C": 256 * KB}
SCOPES = {"shared": "UB", "shared.l1": "L1", "shared.l0c": "L0C"}  # unlimit scope -> memory
AUTO_SCHEDULED = re.compile(
    r"tilelang\.ascend\.language|from\s+tilelang\.ascend\s+import\s+language|"
    r"annotate_buffer_versions"
)


def auto_scheduled(source: str) -> bool:
    return AUTO_SCHEDULED.search(source) is not None


def unlimited(prim_func: cst.CSTNode) -> set[str]:
    """The memories `T.annotate_unlimit_memory(...)` lifts the limit of in `prim_func`."""
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).rsplit(".", 1)[-1] != "annotate_unlimit_memory":
                return
            for a in node.args:
                if isinstance(a.value, cst.SimpleString) and a.value.evaluated_value in SCOPES:
                    found.add(SCOPES[str(a.value.evaluated_value)])

    prim_func.visit(_V())
    return found
