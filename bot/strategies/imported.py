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
from typing import NamedTuple

import libcst as cst

from bot.strategies.facts import Facts
from bot.strategies.source import dotted

_LIBRARIES = frozenset({"tilelang", "torch", "torch_npu", "numpy", "triton", "pytest", "yaml"})


class _Pass(NamedTuple):
    call: cst.Call
    callee: str  # `matmul` / `kernels.matmul`
    handed: str | None  # a kernel factory of this file the call is also handed (`profile(rows)`)


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
    keyword literal (`matmul(M, block_M=128)`); None otherwise. A read in a parameter's default
    (`def build(block_M=BLOCK_M)`) is such a pass only when every read of that parameter in its
    function is one. An imported callable handed one of this file's kernel factories
    (`profile(rows, block_M=BLOCK_M)`) is a helper that calls that factory, not the factory:
    the reason says so instead of claiming the kernel is elsewhere."""
    module = f.wrapper.module
    imported = imported_callables(module)
    if not imported:
        return None
    defined = {fn.name for fn in f.functions} | set(f.module_assigns)
    # this file's kernel factories and the functions around them (an outer factory)
    factories = {fn.name for fac in f.factories for fn in fac.chain}
    reads: list[cst.Name] = []
    literals: list[_Pass] = []  # `matmul(M, block_M=128)`: the call's own keyword literal
    fed: dict[int, _Pass] = {}  # a name read as an argument of an imported callable
    defaults: dict[int, tuple[str, cst.FunctionDef]] = {}  # read in a default -> (param, def)
    by_param: dict[tuple[int, str], list[cst.Name]] = {}  # (def, param) -> its reads there
    scopes: list[cst.FunctionDef] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            callee = _callee(node, imported, defined)
            if callee is None:
                return
            handed = next(
                (
                    a.value.value
                    for a in node.args
                    if isinstance(a.value, cst.Name) and a.value.value in factories
                ),
                None,
            )
            for arg in node.args:
                if isinstance(arg.value, cst.Name):
                    fed[id(arg.value)] = _Pass(node, callee, handed)
                elif (
                    arg.keyword is not None
                    and arg.keyword.value == name
                    and isinstance(arg.value, cst.Integer)
                ):
                    literals.append(_Pass(node, callee, handed))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name:
                reads.append(node)
            for fn in reversed(scopes):
                key = (id(fn), node.value)
                if key in by_param:
                    by_param[key].append(node)
                    break

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)  # a keyword's own name (`block_M=`) is no read
            return False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
            return False  # `BLOCK_M = 128`: the binding, not a read

        def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
            if node.value is not None:  # `BLOCK_M: int = 128`: the binding, not a read
                node.value.visit(self)
            return False

        def visit_Param(self, node: cst.Param) -> bool:
            return False  # a lambda's parameter (a def's are read below): its name is no read

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            for d in node.decorators:
                d.visit(self)
            if node.returns is not None:
                node.returns.visit(self)
            params = node.params
            star = [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
            for p in (*params.posonly_params, *params.params, *params.kwonly_params, *star):
                if p.annotation is not None:  # `A: T.Tensor((M, block_M), ...)` reads them
                    p.annotation.visit(self)
                if p.default is not None:
                    before = len(reads)
                    p.default.visit(self)  # read where the function is defined
                    for r in reads[before:]:
                        defaults[id(r)] = (p.name.value, node)
                by_param.setdefault((id(node), p.name.value), [])
            scopes.append(node)
            node.body.visit(self)
            scopes.pop()
            return False  # a parameter's own name is no read

    module.visit(V())

    def reached(read: cst.Name) -> _Pass | None:
        """The imported call a read is passed to: directly, or through the default of a
        parameter its function only passes on to imported callables (`def build(block_M=
        BLOCK_M): return matmul(M, block_M=block_M)`)."""
        if id(read) in fed:
            return fed[id(read)]
        if id(read) not in defaults:
            return None
        param, fn = defaults[id(read)]
        uses = by_param.get((id(fn), param), [])
        return fed[id(uses[0])] if uses and all(id(u) in fed for u in uses) else None

    passes = [reached(r) for r in reads]
    if any(p is None for p in passes):
        return None  # read in this file: its kernel (or the code around it) uses it
    found = [p for p in passes if p is not None] + literals
    if not found:
        return None
    call, callee, handed = found[0]
    where = imported[callee.split(".", 1)[0]]
    if handed is not None:
        return (
            f"'{name}' is passed to {callee}() (line {f.line(call)}), which this file imports "
            f"from {where}, together with this file's own {handed}(): how {callee}() hands it "
            f"on to {handed}() is not in this file, so which parameter it sets there is "
            f"unknown; it is not tuned"
        )
    return (
        f"'{name}' is passed only to {callee}() (line {f.line(call)}), which this file imports "
        f"from {where}: that kernel's body is not in this file, so tunebot cannot check a new "
        f"value against its rules (asserts, full tiles, extents, on-chip capacity) nor see that "
        f"it reads the parameter; it is not tuned"
    )
