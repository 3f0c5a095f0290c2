"""Tensors the caller allocates for a kernel, against the shape the kernel declares.

A kernel declares each tensor parameter's shape from its knobs
(`workspace: T.Tensor((m_num * n_num, block_M, block_K), dtype)`) and indexes it
up to that shape, while the caller allocates the tensor it passes with sizes of
its own (`w1 = torch.zeros(size=[8, block_M, block_K])`). When a knob value makes
a declared dimension larger than the caller's tensor, the kernel reads and writes
past it. The rule holds only where both sizes can be read and the current value
keeps the declared shape within the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, int_value

ALLOCATORS = frozenset({"zeros", "empty", "ones", "randn", "rand", "full"})
MOVES = frozenset({"npu", "cuda", "to", "contiguous"})


@dataclass(frozen=True)
class _Pair:
    param: str
    declared: tuple[cst.BaseExpression, ...]
    kernel_chain: tuple[Function, ...]
    allocated: tuple[cst.BaseExpression, ...]
    caller_chain: tuple[Function, ...]
    line: int


def _dims(node: cst.BaseExpression | None) -> tuple[cst.BaseExpression, ...] | None:
    if isinstance(node, (cst.Tuple, cst.List)):
        return tuple(e.value for e in node.elements)
    return None


def _allocated(value: cst.BaseExpression) -> tuple[cst.BaseExpression, ...] | None:
    """The sizes of `torch.zeros(size=[...])` / `torch.empty((a, b)).npu()`, else None."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in MOVES
    ):  # `.npu()`, `.to(device)`: the same sizes
        value = value.func.value
    if not isinstance(value, cst.Call) or dotted(value.func).rsplit(".", 1)[-1] not in ALLOCATORS:
        return None
    kw = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
    args = [a.value for a in value.args if a.keyword is None]
    if len(args) > 1 and dotted(value.func).rsplit(".", 1)[-1] != "full":
        return tuple(args)  # `torch.zeros(32, D, dtype=...)`: the sizes one by one
    return _dims(kw.get("size")) or (_dims(args[0]) if args else None)


def _declared(
    pf: cst.FunctionDef, factory: Function | None = None
) -> list[tuple[str, tuple[cst.BaseExpression, ...]]]:
    """Each parameter of `pf` with the dims its `T.Tensor(shape, ...)` annotation declares: a
    tuple or list written there, or a name the factory binds once to one (`workspace_shape =
    [n, BI, D]`); () where neither can be read."""
    out: list[tuple[str, tuple[cst.BaseExpression, ...]]] = []
    for p in pf.params.params:
        ann = p.annotation.annotation if p.annotation else None
        shape = (
            ann.args[0].value
            if isinstance(ann, cst.Call) and dotted(ann.func).endswith("Tensor") and ann.args
            else None
        )
        if isinstance(shape, cst.Name) and factory is not None:
            bound = next(
                (
                    fn.assigns[shape.value]
                    for fn in reversed(factory.chain)
                    if shape.value in fn.assigns
                ),
                [],
            )
            shape = bound[0] if len(bound) == 1 else None
        out.append((p.name.value, _dims(shape) or ()))
    return out


def out_idx(factory: Function, count: int) -> set[int] | None:
    """The parameters the jit creates itself (`@tilelang.jit(out_idx=[2])`): the call does not
    pass them. None when the decorator's list cannot be read."""
    return jit_indices(factory, "out_idx", count)


def jit_indices(factory: Function, keyword: str, count: int) -> set[int] | None:
    """The prim_func parameter positions a decorator of `factory` lists under `keyword`
    (`out_idx=[2]`, `workspace_idx=[4, 5]`), negative ones counted from `count` (when known);
    empty without one, None when the list cannot be read."""
    out: set[int] = set()
    for d in factory.node.decorators:
        call = d.decorator
        if not isinstance(call, cst.Call):
            continue
        for a in call.args:
            if a.keyword is None or a.keyword.value != keyword:
                continue
            items = a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value]
            for item in items:
                value = int_value(item.value if isinstance(item, cst.BaseElement) else item)
                if value is None:
                    return None
                out.add(value % count if count else value)
    return out


@dataclass
class CallerBufferCheck:
    """Refuses a knob value that declares a tensor larger than the one its caller passes."""

    name: str
    pairs: list[_Pair]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for p in self.pairs:
            for decl, alloc in zip(p.declared, p.allocated, strict=False):
                new_k = evaluate(decl, env(p.kernel_chain, value))
                new_c = evaluate(alloc, env(p.caller_chain, value))
                now_k = evaluate(decl, env(p.kernel_chain, current))
                now_c = evaluate(alloc, env(p.caller_chain, current))
                if not all(type(x) is int for x in (new_k, new_c, now_k, now_c)):
                    continue
                assert isinstance(new_k, int) and isinstance(new_c, int)
                assert isinstance(now_k, int) and isinstance(now_c, int)
                fixed = evaluate(alloc, env(p.caller_chain, value + 1)) == new_c
                if fixed and now_k == now_c and 0 < new_k < new_c:
                    return (
                        f"{self.name}={value}: the kernel declares `{p.param}` with a dimension "
                        f"`{code_of(decl)}` = {new_k}, but the caller passes a tensor of "
                        f"`{code_of(alloc)}` = {new_c} there (line {p.line}), the current size: "
                        f"the kernel would read only part of the tensor it is given"
                    )
                if new_k > new_c and now_k <= now_c:
                    return (
                        f"{self.name}={value}: the kernel declares `{p.param}` with a dimension "
                        f"`{code_of(decl)}` = {new_k}, but the caller allocates it with "
                        f"`{code_of(alloc)}` = {new_c} (line {p.line}): the kernel would read "
                        f"and write past the tensor it is given"
                    )
        return None


def caller_buffer_check(f: Facts, name: str, factories: list[Function]) -> CallerBufferCheck | None:
    """The rule of knob `name` for the tensors callers of `factories`' kernels allocate: in a
    function or at module level, `kernel = factory(...)` then `kernel(a, b, ...)`, each passed
    tensor paired with the parameter it lands on (those `out_idx` makes are not passed)."""
    by_node = {id(fn.node): fn for fn in f.functions}
    pairs: list[_Pair] = []
    # (the function calls are made in, or None for module level; its bindings; its chain)
    scopes: list[tuple[Function | None, dict[str, list[cst.BaseExpression]], tuple[Function, ...]]]
    scopes = [(fn, fn.assigns, fn.chain) for fn in f.functions]
    scopes.append((None, f.module_assigns, ()))
    for factory in factories:
        if len(factory.prim_funcs) != 1:
            continue  # which kernel a handle runs is not read here
        pf = factory.prim_funcs[0]
        declared = _declared(pf, factory)
        made = out_idx(factory, len(declared))
        if made is None:
            continue
        passed = [d for i, d in enumerate(declared) if i not in made]
        for fn, assigns, chain in scopes:
            handles = {
                local
                for local, values in assigns.items()
                if len(values) == 1
                and isinstance(values[0], cst.Call)
                and dotted(values[0].func) == factory.name
            }
            if not handles:
                continue
            for call in f.calls:
                if (call.scope[-1] if call.scope else None) is not fn:
                    continue
                if dotted(call.node.func) not in handles:
                    continue
                args = [a.value for a in call.node.args if a.keyword is None and not a.star]
                for (param, dims), arg in zip(passed, args, strict=False):
                    if not dims or not isinstance(arg, cst.Name):
                        continue
                    # one allocation; any other binding of the name is a cache lookup of it
                    allocs = [a for a in map(_allocated, assigns.get(arg.value, [])) if a]
                    alloc = allocs[0] if len(allocs) == 1 else None
                    values = [v for v in assigns[arg.value] if _allocated(v)] if alloc else []
                    if alloc is None or len(alloc) != len(dims):
                        continue
                    pairs.append(
                        _Pair(param, dims, by_node[id(pf)].chain, alloc, chain, f.line(values[0]))
                    )
    return CallerBufferCheck(name, pairs) if pairs else None
