"""Tile products within the on-chip buffers a kernel allocates.

A TileLang-Ascend kernel sizes its buffers from its block knobs
(`T.alloc_ub((block_M // 2, block_N), "float")`). Each memory of the chip
has a fixed size, so a block that makes the buffers of one memory add up
to more than it holds cannot compile or run. For every
`T.alloc_<scope>(shape, dtype)` whose shape and dtype can be read from the
file (through the factory's locals, parameters and call sites), the bytes
are summed per memory with the knob's new value; a move whose sum goes past
the memory's size while the current value fits is refused with the sum, the
size and the buffers' lines.

The sum is of the buffers as written: a compiler that overlaps buffers whose
lifetimes do not overlap (memory planning) could fit more, so a refusal says
"as allocated". Buffers whose size cannot be read are left out, which only
makes the sum smaller: a refusal never rests on a guess.

Sizes are those of Ascend A2/A3 (Atlas 800T A2, the 910B the upstream
examples run on). `alloc_shared`/`alloc_fragment` name no memory of their
own: the compiler places them by use (bot/strategies/placement.py), and one
whose use does not tell is checked against the largest memory it can be in. A
matrix multiply's accumulator is in L0C whatever else reads it, and the buffers of a
kernel with no matrix multiply that only copies them (its vector work runs on buffers
of another kind) are in UB: the vector cores reach no other on-chip memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar, cast

import libcst as cst

from bot.strategies import dialect, opaquesize, rebinding
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.placement import GEMMS, placements
from bot.strategies.signature import takes
from bot.strategies.source import dotted
from bot.strategies.strings import Reading
from bot.strategies.strings import strings as _strings

V = TypeVar("V", bound=cst.CSTVisitor)

KIB = 1024
# memory -> bytes (Ascend A2/A3: UB 192 KiB, L1 512 KiB, L0A/L0B 64 KiB, L0C 128 KiB)
CAPACITY: dict[str, int] = {
    "UB": 192 * KIB,
    "L1": 512 * KIB,
    "L0A": 64 * KIB,
    "L0B": 64 * KIB,
    "L0C": 128 * KIB,
    "shared (UB or L1)": 512 * KIB,
    "fragment (UB or L0C)": 192 * KIB,
}
# allocation call (last dotted part) -> memory
MEMORY: dict[str, str] = {
    "alloc_ub": "UB",
    "alloc_UB": "UB",
    "alloc_L1": "L1",
    "alloc_l1": "L1",
    "alloc_L0A": "L0A",
    "alloc_L0B": "L0B",
    "alloc_L0C": "L0C",
    "alloc_l0a": "L0A",
    "alloc_l0b": "L0B",
    "alloc_l0c": "L0C",
    "alloc_shared": "shared (UB or L1)",
    "alloc_fragment": "fragment (UB or L0C)",
    "alloc_local": "fragment (UB or L0C)",
}
UNPLACED = frozenset({"shared (UB or L1)", "fragment (UB or L0C)"})
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "int32": 4,
    "uint32": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "int16": 2,
    "uint16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
    # torch's and TVM's spellings of the 8-bit floats (a dtype string a file passes on)
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "e4m3_float8": 1,
    "e5m2_float8": 1,
    "float64": 8,
    "int64": 8,
}


@dataclass(frozen=True)
class Buffer:
    name: str
    memory: str
    dims: tuple[cst.BaseExpression, ...]
    dtype_bytes: int  # the smallest element size it may run with (row and fractal rules)
    line: int
    chain: tuple[Function, ...]
    scope: int = field(default=0, compare=False)  # id of the innermost def allocating it
    # the element size that must fit: the largest dtype the file runs it with, where every
    # one runs (0: the same as dtype_bytes)
    most_bytes: int = field(default=0, compare=False)

    @property
    def fit_bytes(self) -> int:
        return self.most_bytes or self.dtype_bytes


def buffer_bytes(b: Buffer, env: Env) -> int | None:
    """The bytes `b` takes at its fit size under `env`, or None when a dim cannot be read."""
    size = b.fit_bytes
    for d in b.dims:
        extent = evaluate(d, env)
        if type(extent) is not int or extent <= 0:
            return None
        size *= extent
    return size


def _dims(node: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return tuple(e.value for e in node.elements)
    return (node,)  # `T.alloc_ub((block_N), dtype)`: one dimension


class _Around(cst.CSTVisitor):
    """The defs around each call of a function, innermost first."""

    def __init__(self) -> None:
        self.scopes: list[int] = [0]  # the defs around the visit, innermost last
        self.around: dict[int, tuple[int, ...]] = {}  # id of a call -> its defs, innermost first
        self.params: dict[int, frozenset[str]] = {}  # id of a def -> the names it takes

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(id(node))
        p = node.params
        self.params[id(node)] = frozenset(
            a.name.value for a in (*p.posonly_params, *p.params, *p.kwonly_params)
        )

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self.around[id(node)] = tuple(reversed(self.scopes))


class _Allocs(_Around):
    """The readable allocations of a prim_func, and the defs around each of its calls."""

    def __init__(self, f: Facts, chain: tuple[Function, ...]) -> None:
        super().__init__()
        self.f, self.chain = f, chain
        self.buffers: list[Buffer] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        call = node.value
        if not isinstance(call, cst.Call) or len(node.targets) != 1:
            return
        memory = MEMORY.get(dotted(call.func).rsplit(".", 1)[-1])
        target = node.targets[0].target
        args = [a.value for a in call.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        shape = args[0] if args else kw.get("shape")
        dtype = args[1] if len(args) > 1 else kw.get("dtype")
        if memory is None or shape is None or dtype is None or not isinstance(target, cst.Name):
            return
        reading = Reading()
        sizes = {DTYPE_BYTES.get(s) for s in _strings(dtype, self.chain, self.f, 0, reading)}
        if not sizes or None in sizes:
            return  # dtype not readable: left out (the sum stays a lower bound)
        known = [s for s in sizes if s is not None]
        self.buffers.append(
            Buffer(
                target.value,
                memory,
                _dims(shape),
                min(known),
                self.f.line(node),
                self.chain,
                self.scopes[-1],
                # every dtype the file runs with (call sites, parametrize entries, loop
                # passes) runs, so the largest must fit; alternatives (`a if c else b`, a
                # default standing in for an unknown value): the smaller, a lower bound
                min(known) if reading.either else max(known),
            )
        )


class _Gemms(cst.CSTVisitor):
    """The accumulators of the matrix multiplies in a prim_func, and whether it has any."""

    def __init__(self) -> None:
        self.any = False
        self.accumulators: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if not (name.startswith("T.") and name.rsplit(".", 1)[-1] in GEMMS):
            return
        self.any = True
        args = [a.value for a in node.args if a.keyword is None]
        base = args[2] if len(args) >= 3 else None
        while isinstance(base, cst.Subscript):
            base = base.value
        if isinstance(base, cst.Name):
            self.accumulators.add(base.value)


# calls that may be a cube multiply under a name GEMMS does not list (`T.gemm_v2`,
# `T.gemm_v0_fixp`, a `matmul` helper)
CUBE_WORD = re.compile(r"gemm|mma|matmul|dot", re.IGNORECASE)


def _cube_out_of_sight(prim_func: Function) -> bool:
    """True when the factory around `prim_func` may run a matrix multiply the prim_func's own
    walk does not see: a `@T.macro` (its body runs inside the kernel) or a call whose name
    reads like one."""
    found = False

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            nonlocal found
            if any(dotted(d.decorator).endswith("macro") for d in node.decorators):
                found = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if CUBE_WORD.search(dotted(node.func).rsplit(".", 1)[-1]):
                found = True

    prim_func.chain[0].node.visit(_V())
    return found


def _by_role(pf: cst.FunctionDef) -> dict[str, str]:
    """Placements that hold whatever else a buffer is used for. A kernel with no matrix
    multiply runs on the vector cores only, which reach no memory but UB ("*": every
    buffer, used when the kernel places none of its buffers by name or by use). A matrix
    multiply's accumulator is in L0C while the multiply runs, even when vector
    instructions also read it (a copy in UB comes on top)."""
    v = _Gemms()
    pf.visit(v)
    if not v.any:
        return {"*": "UB"}
    return dict.fromkeys(v.accumulators, "L0C")


@dataclass(frozen=True)
class _Kernel:
    """What one walk of a prim_func reads, kept on the parse (`Facts.derived`)."""

    allocated: tuple[Buffer, ...]  # in the memory each call names (unplaced)
    placed: tuple[Buffer, ...]  # the same, placed in their memories
    around: dict[int, tuple[int, ...]]  # id of a call -> the defs around it, innermost first
    # id of a def -> name -> its one placed allocation there, None when they differ (Scoped)
    by_scope: dict[int, dict[str, Buffer | None]]
    params: dict[int, frozenset[str]]  # id of a def -> its parameter names (Scoped)


def _kernel(f: Facts, prim_func: Function) -> _Kernel:
    """The buffers of one prim_func and the scopes of its calls, read once per parse (every
    knob's rules and every check ask for them)."""
    key = ("capacity.kernel", id(prim_func.node))
    found = f.derived.get(key)
    if isinstance(found, _Kernel):
        return found
    pf = prim_func.node
    v = _Allocs(f, prim_func.chain)
    pf.visit(v)
    by_use = placements(pf)
    roles = _by_role(pf)
    placed_by_use = any(b.name in by_use for b in v.buffers)
    if any(b.memory not in UNPLACED for b in v.buffers) or (
        placed_by_use and _cube_out_of_sight(prim_func)
    ):
        # the kernel names memories itself (`alloc_ub`, `alloc_L1`), or may multiply matrices
        # where this walk does not see it: the buffers placed count alone. A kernel that
        # places some buffers by use (vector operands) and has no matrix multiply anywhere
        # runs on the vector cores alone: a buffer it only copies is in UB
        roles.pop("*", None)
    placed = {**roles, **by_use}
    in_memory = tuple(
        replace(b, memory=placed.get(b.name, placed.get("*", b.memory)))
        if b.memory in UNPLACED
        else b
        for b in v.buffers
    )
    held: dict[int, dict[str, list[Buffer]]] = {}
    for b in in_memory:
        held.setdefault(b.scope, {}).setdefault(b.name, []).append(b)
    by_scope = {
        scope: {name: _one(bufs) for name, bufs in names.items()} for scope, names in held.items()
    }
    kernel = _Kernel(tuple(v.buffers), in_memory, v.around, by_scope, v.params)
    f.derived[key] = kernel
    return kernel


def allocations(f: Facts, prim_func: Function) -> list[Buffer]:
    """Every readable allocation in `prim_func`, in the memory its call names (unplaced)."""
    return list(_kernel(f, prim_func).allocated)


def kernel_buffers(f: Facts, prim_func: Function) -> list[Buffer]:
    """Every readable allocation in one prim_func, placed in its memory."""
    return list(_kernel(f, prim_func).placed)


def macros(f: Facts, factory: Function) -> list[Function]:
    """The `@T.macro` functions inside `factory`: their bodies run inside its kernels."""
    return [
        fn
        for fn in f.functions
        if factory in fn.parents
        and any(dotted(d.decorator).endswith("macro") for d in fn.node.decorators)
    ]


def buffers(f: Facts, factory: Function) -> list[Buffer]:
    """Every readable allocation in the prim_funcs of `factory`."""
    by_node = {id(fn.node): fn for fn in f.functions}
    return [b for pf in factory.prim_funcs for b in kernel_buffers(f, by_node[id(pf)])]


class Scoped:
    """The buffers of one prim_func by name, as a call inside it sees them: the allocation in
    the innermost function around the call that allocates the name (a kernel's helper may
    reuse a name; another kernel's buffers are never seen); a def that takes the name as a
    parameter hides the buffers around it (`def store(a)` sees what its caller passes). `get` says None when that
    function allocates the name twice with different shapes, dtypes or memories."""

    def __init__(self, f: Facts, prim_func: Function) -> None:
        kernel = _kernel(f, prim_func)  # read once per parse
        self.by_scope, self.around, self.params = kernel.by_scope, kernel.around, kernel.params

    @classmethod
    def bound(cls, node: cst.FunctionDef, held: list[Buffer]) -> Scoped:
        """A helper's view of the buffers a kernel passes it (`held`, under the helper's
        parameter names and scope), as `Scoped` is a prim_func's view of its own."""
        by_name: dict[int, dict[str, list[Buffer]]] = {}
        for b in held:
            by_name.setdefault(b.scope, {}).setdefault(b.name, []).append(b)
        v = _Around()
        node.visit(v)
        view = cls.__new__(cls)
        view.by_scope = {
            s: {n: _one(bs) for n, bs in names.items()} for s, names in by_name.items()
        }
        view.around = v.around
        view.params = v.params
        return view

    def get(self, name: str, at: cst.Call) -> Buffer | None:
        for scope in self.around.get(id(at), ()):
            names = self.by_scope.get(scope, {})
            if name in names:
                return names[name]
            if name in self.params.get(scope, ()):
                return None  # a parameter of that def: what its caller passes, not told here
        return None


def _one(held: list[Buffer]) -> Buffer | None:
    """The first of one function's allocations of a name, when they agree on shape, dtype and
    memory; else None."""
    kinds = {(tuple(code_of(d) for d in b.dims), b.dtype_bytes, b.memory) for b in held}
    return held[0] if len(kinds) == 1 else None


def kernels_of(f: Facts, factories: list[Function]) -> list[tuple[Function, Function]]:
    """(factory, prim_func) for every prim_func of `factories`, as the parse's functions."""
    by_node = {id(fn.node): fn for fn in f.functions}
    return [
        (factory, by_node[id(pf)])
        for factory in factories
        for pf in factory.prim_funcs
        if id(pf) in by_node
    ]


def visit_kernels(f: Facts, factories: list[Function], make: Callable[[Scoped], V]) -> list[V]:
    """One visitor per prim_func of `factories`, made from that prim_func's buffers as its
    calls see them (`Scoped`) and run over it (the gemm rules read operands through it)."""
    out: list[V] = []
    for _, fn in kernels_of(f, factories):
        v = make(Scoped(f, fn))
        fn.node.visit(v)
        out.append(v)
    return out


@dataclass
class CapacityCheck:
    """Refuses a knob value whose buffers overflow a memory the current value fits in."""

    name: str
    kernels: list[list[Buffer]]  # the buffers of each kernel (prim_func) the knob sizes
    # memory -> bytes for each kernel (the auto-scheduled dialect's limits, lifted scopes out)
    limits: list[dict[str, int]] | None = None

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for i, group in enumerate(self.kernels):
            new_use, now_use = use(group, value, env), use(group, current, env)
            sizes = self.limits[i] if self.limits else CAPACITY
            for memory, (total, placed) in new_use.items():
                limit = sizes.get(memory)
                if limit is None or total <= limit or now_use.get(memory, (0, []))[0] > limit:
                    continue  # fits, or the current value does not fit either: not ours to judge
                where = ", ".join(placed)
                least = "at least " if any("unknown sizes as 1" in p for p in placed) else ""
                chip = (
                    f"of {memory} taken for the tilelang.ascend.language scheduler"
                    if self.limits
                    else "it can hold on Ascend A2/A3"
                )
                return (
                    f"{self.name}={value}: the kernel's {memory} buffers as allocated ({where}) "
                    f"would take {least}{total} bytes, more than the {limit // KIB} KiB {chip}"
                )
        return self._unsized(value, current, env)

    def _unsized(
        self, value: int, current: int, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        """A larger value where a buffer dim grows with the knob through a call tunebot
        cannot evaluate (bot/strategies/opaquesize.py): its bytes are unknown."""
        if value <= current:
            return None
        for group in self.kernels:
            for b in group:
                here = env(b.chain, value)
                for d in b.dims:
                    for factor in _factors(d):
                        if _extent(factor, here) is None and opaquesize.through_call(
                            factor, here, self.name
                        ):
                            return (
                                f"{self.name}={value}: {b.memory} buffer `{b.name}` (line "
                                f"{b.line}) is sized by `{code_of(factor)}`, which the file "
                                f"computes from {self.name} through a call tunebot cannot "
                                f"evaluate: how much {b.memory} a larger {self.name} takes is "
                                f"unknown, so only values up to the current {current} are planned"
                            )
        return None


def _factors(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The factors of a product (`range_h * 2` -> range_h, 2); the node itself otherwise."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _factors(node.left) + _factors(node.right)
    return [node]


def use(
    group: list[Buffer], value: int, env: Callable[[tuple[Function, ...], int], Env]
) -> dict[str, tuple[int, list[str]]]:
    """memory -> (bytes, ["name (line N)", ...]) of the buffers whose size can be read, at
    least in part: a dim the file does not fix (`block_Q * heads` with heads a runtime size)
    counts with its unknown factors at 1, so the sum stays a lower bound. A buffer sized by
    nothing the knob sets and nothing readable is left out."""
    out: dict[str, tuple[int, list[str]]] = {}
    for b in group:
        size, open_ = least_bytes(b, env(b.chain, value))
        if size:
            total, placed = out.get(b.memory, (0, []))
            shown = f"{b.name} (line {b.line}{', unknown sizes as 1' if open_ else ''})"
            out[b.memory] = (total + size, [*placed, shown])
    return out


def least_bytes(b: Buffer, env: Env) -> tuple[int, bool]:
    """(a lower bound of `b`'s bytes, whether any part of it is unknown); 0 when it cannot be
    bounded or nothing of its size is known."""
    size, open_ = b.fit_bytes, False
    for d in b.dims:
        extent = _at_least(d, env)
        if extent is None:
            return 0, False
        open_ = open_ or extent[1]
        size *= extent[0]
    if open_ and size == b.fit_bytes:
        return 0, True  # nothing of its size is known
    return size, open_


def _at_least(node: cst.BaseExpression, env: Env) -> tuple[int, bool] | None:
    """(a lower bound of a dim, whether any part of it is unknown); None when it cannot be
    bounded (a known extent that is not a positive integer). An unknown factor of a product,
    or an unknown dim, is at least 1: a buffer has no empty dims."""
    fed = _fed(node, env)
    if fed is not None:  # a size the callers compute from the knob: the largest they pass
        bounds = [_at_least(arg, here) for arg, here in fed]
        if any(b is None for b in bounds):
            return None
        each = [b for b in bounds if b is not None]
        return max(b[0] for b in each), any(b[1] for b in each)
    extent = evaluate(node, env)
    if isinstance(extent, int) and not isinstance(extent, bool):
        return (extent, False) if extent > 0 else None
    if extent is not None:
        return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left, right = _at_least(node.left, env), _at_least(node.right, env)
        if left is None or right is None:
            return None
        return left[0] * right[0], True
    if isinstance(node, cst.IfExp):  # `TILE_M if not trans_a else TILE_K`, trans_a per call
        test = evaluate(node.test, env)
        if test is not None:
            return _at_least(node.body if test else node.orelse, env)
        arms = [_at_least(node.body, env), _at_least(node.orelse, env)]
        if any(a is None for a in arms):
            return None
        return min(a[0] for a in arms if a is not None), True
    if isinstance(node, cst.Call) and dotted(node.func) in ("max", "T.max") and node.args:
        parts = [_at_least(a.value, env) for a in node.args if a.keyword is None]
        known = [p[0] for p in parts if p is not None]
        return (max(known) if known else 1), True  # `max(block, dim)` is at least block
    if isinstance(node, cst.Name) and env.depth < 8:  # a local computed once: its expression
        for fn in reversed(env.chain):
            values = fn.assigns.get(node.value)
            if values is not None and not rebinding.fills_only(env.resolver.f, fn, node.value):
                if len(values) == 1 and not rebinding.unsure(env.resolver.f, fn, node.value):
                    inner = Env(env.resolver, fn.chain, env.depth + 1, env.overrides)
                    return _at_least(values[0], inner)
                break
    return 1, True


def _extent(node: cst.BaseExpression, env: Env) -> object:
    """`node`'s value under `env`; for a parameter the callers compute from the knob, the
    largest value they pass with the knob at its new value (None when one cannot be read)."""
    fed = _fed(node, env)
    if fed is None:
        return evaluate(node, env)
    values = [evaluate(arg, here) for arg, here in fed]
    if any(type(v) is not int for v in values):
        return None
    return max(cast(list[int], values))


def _fed(node: cst.BaseExpression, env: Env) -> list[tuple[cst.BaseExpression, Env]] | None:
    """What the calls pass for `node`, each with the environment of its call's scope and the
    knob at its new value, when `node` is a parameter whose calls compute it from the knob;
    else None. A parameter's value is otherwise read where it is bound, with the knob at its
    current value (`range_h = block_H * 4` in the caller would stay 4 x the current block)."""
    if not isinstance(node, cst.Name) or node.value in env.overrides or not env.overrides:
        return None
    name = node.value
    for fn in reversed(env.chain):
        if name in fn.assigns:
            return None
        if takes(fn, name):
            passed = env.resolver.arguments(fn, name)
            knob = next(iter(env.overrides))
            if not passed or not any(
                opaquesize.reads_knob(arg, scope, env, knob) for arg, scope in passed
            ):
                return None
            deeper = env.depth + 1
            return [(a, Env(env.resolver, s, deeper, env.overrides)) for a, s in passed]
    return None


def capacity_check(f: Facts, name: str, factories: list[Function]) -> CapacityCheck | None:
    """The capacity rule of knob `name` over the buffers of the kernels of `factories`."""
    kernels = [group for factory in factories if (group := buffers(f, factory))]
    if not kernels:
        return None
    if not dialect.auto_scheduled(f.wrapper.module):
        return CapacityCheck(name, kernels)
    limits = []
    for factory in factories:
        if buffers(f, factory):
            lifted: set[str] = set()
            for pf in factory.prim_funcs:
                lifted |= dialect.unlimited(pf)
            limits.append({m: v for m, v in dialect.LIMITS.items() if m not in lifted})
    return CapacityCheck(name, kernels, limits)
