"""Block sizes a file passes to a kernel factory it imports from another module.

`from kernels.gemm import matmul` then `matmul(M, N, K, block_M=BLOCK_M)`: the kernel that
reads BLOCK_M is built in another file, which tunebot does not read. None of the kernel's
rules (asserts, full tiles, extents, on-chip capacity) can be checked against a new value, and
whether the factory reads the parameter at all is unknown. Such a name is not discovered as a
knob; it is listed as dropped with that reason, never tuned on a guess. A call of a library
(the standard library, tilelang, torch, numpy) is not a kernel factory of the op's project.
"""

from __future__ import annotations

import sys

import libcst as cst

from bot.strategies.facts import Facts
from bot.strategies.source import dotted

_LIBRARIES = frozenset({"tilelang", "torch", "torch_npu", "numpy", "triton", "pytest", "yaml"})


def _library(module: str) -> bool:
    top = module.split(".", 1)[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names


def imported_callables(module: cst.Module) -> dict[str, str]:
    """Local name -> the module it is imported from, for names imported from a module that is
    not a library (`from kernels.gemm import matmul` -> matmul: kernels.gemm; `import kernels`
    -> kernels: kernels)."""
    out: dict[str, str] = {}

    class V(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if node.relative:
                base = "." * len(node.relative) + (dotted(node.module) if node.module else "")
            else:
                base = dotted(node.module) if node.module else ""
            if not base or (not node.relative and _library(base)):
                return
            if isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                local = alias.asname.name if alias.asname else alias.name
                if isinstance(local, cst.Name):
                    out[local.value] = base

        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                name = dotted(alias.name)
                if _library(name):
                    continue
                local = alias.asname.name if alias.asname else None
                key = local.value if isinstance(local, cst.Name) else name.split(".", 1)[0]
                out[key] = name

    module.visit(V())
    return out


def _callee(call: cst.Call, imported: dict[str, str], defined: set[str]) -> str | None:
    """`matmul` / `kernels.matmul` when the call's function is imported, else None."""
    func = call.func
    base = func
    while isinstance(base, cst.Attribute):
        base = base.value
    if not isinstance(base, cst.Name) or base.value not in imported or base.value in defined:
        return None
    return dotted(func) or None


def imported_only(f: Facts, name: str) -> str | None:
    """Why `name` is not tuned when every read of it is an argument of a call of a factory
    imported from another module (`matmul(M, block_M=BLOCK_M)`), or when it is that call's own
    keyword literal (`matmul(M, block_M=128)`); None otherwise."""
    module = f.wrapper.module
    imported = imported_callables(module)
    if not imported:
        return None
    defined = {fn.name for fn in f.functions} | set(f.module_assigns)
    reads: list[cst.Name] = []
    passed: list[tuple[cst.Call, str]] = []  # (call, callee) each read or keyword reaches
    fed: set[int] = set()  # ids of the reads that are arguments of an imported callable

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            callee = _callee(node, imported, defined)
            if callee is None:
                return
            for arg in node.args:
                if isinstance(arg.value, cst.Name) and arg.value.value == name:
                    fed.add(id(arg.value))
                    passed.append((node, callee))
                elif (
                    arg.keyword is not None
                    and arg.keyword.value == name
                    and isinstance(arg.value, cst.Integer)
                ):
                    passed.append((node, callee))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name:
                reads.append(node)

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)  # a keyword's own name (`block_M=`) is no read
            return False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
            return False  # `BLOCK_M = 128`: the binding, not a read

        def visit_Param(self, node: cst.Param) -> bool:
            return False  # `def f(block_M=...)`: a parameter's own name is no read

    module.visit(V())
    if not passed or any(id(r) not in fed for r in reads):
        return None
    call, callee = passed[0]
    where = imported[callee.split(".", 1)[0]]
    return (
        f"'{name}' is passed only to {callee}() (line {f.line(call)}), which this file imports "
        f"from {where}: that kernel's body is not in this file, so tunebot cannot check a new "
        f"value against its rules (asserts, full tiles, extents, on-chip capacity) nor see that "
        f"it reads the parameter; it is not tuned"
    )
