"""A deeper pipeline must fit the on-chip memory its ring buffers take, and have iterations to fill.

In the auto-scheduled Ascend dialect of TileLang (`tilelang.ascend.language`, the A5
AutoSchedule of PTO-ISA/tilelang), `T.Pipelined(n, num_stages=s)` overlaps the data movement
of s iterations: every on-chip buffer the loop body writes is kept in one version per stage
(a ring the scheduler indexes by iteration), and a buffer given a count with
`T.annotate_buffer_versions({buf: k})` is kept in k versions. The scheduler holds the
versions of all buffers within its per-scope limits, which that dialect documents as 216 KB
of UB (`shared`) and 512 KB of L1 (`shared.l1`); `T.annotate_unlimit_memory(scope)` lifts
one. A depth whose versions no longer fit, while the current depth's do, is refused with the
sum (buffers whose size cannot be read are left out: the sum is a lower bound). The sizes are
every size the op runs with (its callers, loops over test shapes), as for block rules.

Any dialect: a pipeline of s stages keeps s iterations in flight, so a loop that runs n
iterations with every size the op runs with has nothing more to overlap past n stages: a depth
above both n and the current one is refused (the current depth stays allowed, as do shallower
ones). In the software-pipelining model the extra stages only move every copy of the loop into
the prologue (at n + 1 stages no copy overlaps any compute); in the ring-buffer model they are
versions no iteration fills. A loop whose trip count is unknown for some size is left alone,
except that a run-time size (`top_k = T.symbolic("topK")`) the kernel uses as the `size=` of a
region of an on-chip buffer it allocates, read from the buffer's origin, cannot exceed that
buffer's dimension: `T.reduce_max(acc_s, m, dim=1, size=[block_heads, top_k])` with `acc_s` of
(block_heads, 256) bounds top_k by 256, so `T.Pipelined(T.ceildiv(top_k, 128))` runs at most 2
iterations (only extents that grow with the size, `n`, `T.ceildiv(n, b)`, `n // b`, are bounded).
"""

from __future__ import annotations

import libcst as cst

from bot.strategies import capacity, dialect, shapes
from bot.strategies.binding import Resolver
from bot.strategies.callsizes import call_sizes
from bot.strategies.evaluate import CEILDIV, Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted
from bot.strategies.versioncap import pinned_cap

KB = dialect.KB
LIMITS = {m: dialect.LIMITS[m] for m in ("UB", "L1")}  # the scopes versions are kept in
PLACED = {"UB": "UB", "L1": "L1", "shared (UB or L1)": "UB"}  # alloc_shared is UB there


def _written(body: cst.CSTNode) -> set[str]:
    """Buffers a loop body writes: copy destinations and element stores (`buf[i] = ...`)."""
    found: set[str] = set()

    def base(node: cst.BaseExpression) -> None:
        while isinstance(node, cst.Subscript):
            node = node.value
        if isinstance(node, cst.Name):
            found.add(node.value)

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            args = [a.value for a in node.args if a.keyword is None]
            if dotted(node.func).rsplit(".", 1)[-1] in ("copy", "dual_copy") and len(args) > 1:
                base(args[1])

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Subscript):
                base(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Subscript):
                base(node.target)

    body.visit(_V())
    return found


class _Annotations(cst.CSTVisitor):
    """`T.annotate_buffer_versions({buf: k})` counts (None: the scheduler picks)."""

    def __init__(self) -> None:
        self.versions: dict[str, cst.BaseExpression | None] = {}
        self.unlimited: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short == "annotate_buffer_versions" and args and isinstance(args[0], cst.Dict):
            for e in args[0].elements:
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.Name):
                    v = e.value
                    v = v.elements[0].value if isinstance(v, cst.Tuple) and v.elements else v
                    self.versions[e.key.value] = None if isinstance(v, cst.SimpleString) else v


def _loop_at(pf: cst.FunctionDef, line: int, f: Facts) -> cst.For | None:
    found: list[cst.For] = []

    class _V(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            it = node.iter
            if (
                isinstance(it, cst.Call)
                and dotted(it.func).endswith("Pipelined")
                and f.line(it) == line
            ):
                found.append(node)

    pf.visit(_V())
    return found[0] if found else None


def _choices(f: Facts, resolver: Resolver, factory: Function) -> list[dict[str, int]]:
    wanted = shapes.open_names(f, resolver, factory)
    joint = call_sizes(f, resolver, factory, wanted)
    sizes = shapes.sizes(f, resolver, [factory])
    for path in joint:
        for name, size in path.items():
            if size not in sizes.get(name, ()):
                sizes[name] = (*sizes.get(name, ()), size)
    return shapes.choices(sizes, tuple(joint))


def _use(
    bufs: list[capacity.Buffer],
    written: set[str],
    ann: _Annotations,
    env: Env,
    depth: int,
) -> dict[str, tuple[int, list[str]]]:
    """memory -> (bytes, shown) of the readable buffers at `depth`, each times its versions."""
    use: dict[str, tuple[int, list[str]]] = {}
    for b in bufs:
        memory = PLACED.get(b.memory)
        if memory is None or memory in ann.unlimited:
            continue
        # a lower bound: a dim chosen per call (`TILE_M if not trans_a else TILE_K`) counts as
        # its smaller arm, an unknown factor as 1
        size, open_ = capacity.least_bytes(b, env)
        fixed = ann.versions.get(b.name)
        count = evaluate(fixed, env) if fixed is not None else None
        if type(count) is not int:
            count = max(depth, 1) if b.name in written else 1
        if size:
            total, shown = use.get(memory, (0, []))
            what = f"{b.name} x{count} (line {b.line}{', at least' if open_ else ''})"
            use[memory] = (total + size * count, [*shown, what])
    return use


def refusal(
    f: Facts, line: int, bound: str | None, depth: int, current: int, source: str
) -> str | None:
    """Why `depth` does not fit the loop `T.Pipelined` at `line` (num_stages bound to the name
    `bound`, or a literal), or None. `current`: the depth the file runs now."""
    chain = f.chain_at(line)
    pf_fn = next(
        (
            fn
            for fn in reversed(chain)
            if fn.parents and id(fn.node) in {id(p) for p in fn.parents[-1].prim_funcs}
        ),
        None,
    )
    if pf_fn is None or depth <= current:
        return None
    factory = pf_fn.parents[-1]
    loop = _loop_at(pf_fn.node, line, f)
    if loop is None:
        return None
    resolver = Resolver(f)
    auto = dialect.auto_scheduled(source)
    ann = _Annotations()
    pf_fn.node.visit(ann)
    ann.unlimited = dialect.unlimited(pf_fn.node)
    all_bufs = capacity.allocations(f, pf_fn)
    bufs = all_bufs if auto else []
    written = _written(loop.body)
    bounds = _bounds(loop.iter)  # type: ignore[arg-type]
    where = f"T.Pipelined at line {line}"
    try:
        choices = list(_choices(f, resolver, factory))
        # nothing more to overlap only when every size the op runs with gives fewer iterations
        short: list[str] = []
        for choice in choices:
            resolver.fallback = choice
            env = Env(resolver, pf_fn.chain, 0, {bound: depth} if bound else {})
            trips = _trips(bounds, env)
            capped = ""
            if trips is None:
                trips, capped = _trip_cap(bounds, pf_fn.node, capacity.Scoped(f, pf_fn), env)
            if trips is None or trips >= depth or depth <= 1:
                short = []
                break
            sizes = "".join(f", {k}={v}" for k, v in choice.items())
            loop_code = ", ".join(code_of(b) for b in bounds)
            many = f"{trips} iteration{'s' if trips != 1 else ''}"
            short.append(f"{'at most ' if capped else ''}{many} (`{loop_code}`{sizes}{capped})")
        if short:
            return (
                f"{where}: num_stages={depth} is deeper than the loop runs with every size the "
                f"op runs with ({'; '.join(short)}): there is nothing more to overlap"
            )
        for choice in choices:
            resolver.fallback = choice
            sizes = "".join(f", {k}={v}" for k, v in choice.items())
            pins = {bound: depth} if bound else {}
            now_pins = {bound: current} if bound else {}
            env = Env(resolver, pf_fn.chain, 0, pins)
            pinned = pinned_cap(ann.versions, written, env, depth, current, where)
            if pinned:
                return pinned
            new = _use(bufs, written, ann, env, depth)
            now = _use(bufs, written, ann, Env(resolver, pf_fn.chain, 0, now_pins), current)
            for memory, (total, shown) in new.items():
                limit = LIMITS[memory]
                if total > limit and now.get(memory, (0, []))[0] <= limit:
                    least = "at least " if any(", at least" in x for x in shown) else ""
                    return (
                        f"{where}: num_stages={depth} keeps one version per stage of the buffers "
                        f"the loop writes: the {memory} buffers ({', '.join(shown)}) would take "
                        f"{least}{total} bytes{sizes and ' (with' + sizes[1:] + ')'}, more than the "
                        f"{limit // KB} KB the auto-scheduler holds there"
                    )
    finally:
        resolver.fallback = {}
    return None


def _bounds(call: cst.Call) -> list[cst.BaseExpression]:
    """`T.Pipelined(extent, ...)` -> [extent]; `T.Pipelined(start, stop, ...)` -> [start, stop]."""
    out = [a.value for a in call.args if a.keyword is None][:2]
    stop = next((a.value for a in call.args if a.keyword and a.keyword.value == "stop"), None)
    if stop is not None and len(out) == 1:
        out.append(stop)
    return out


def _trips(bounds: list[cst.BaseExpression], env: Env) -> int | None:
    """How many iterations the loop runs, when the sizes make it a number."""
    values = [evaluate(b, env) for b in bounds]
    if not values or any(type(v) is not int for v in values):
        return None
    ints = [v for v in values if isinstance(v, int)]
    return ints[0] if len(ints) == 1 else ints[1] - ints[0]


def _trip_cap(
    bounds: list[cst.BaseExpression],
    pf: cst.FunctionDef,
    scoped: capacity.Scoped,
    env: Env,
) -> tuple[int | None, str]:
    """The most iterations a loop `T.Pipelined(extent)` can run when its extent grows with one
    run-time size that an on-chip buffer's `size=` region bounds, and the bound shown; else
    (None, "")."""
    if len(bounds) != 1:
        return None, ""
    extent = bounds[0]
    name, divisor = _growing(extent)
    if name is None or evaluate(cst.Name(name), env) is not None:
        return None, ""
    if divisor is not None:
        d = evaluate(divisor, env)
        if type(d) is not int or d <= 0:
            return None, ""
    cap = _size_caps(pf, scoped, env).get(name)
    if cap is None:
        return None, ""
    limit, shown = cap
    trips = _trips(bounds, Env(env.resolver, env.chain, env.depth, {**env.overrides, name: limit}))
    if trips is None:
        return None, ""
    return trips, f", with {name} <= {limit}: {shown}"


def _growing(extent: cst.BaseExpression) -> tuple[str | None, cst.BaseExpression | None]:
    """`n` -> (n, None); `T.ceildiv(n, b)` / `n // b` -> (n, b); anything else (None, None)."""
    if isinstance(extent, cst.Name):
        return extent.value, None
    if (
        isinstance(extent, cst.BinaryOperation)
        and isinstance(extent.operator, cst.FloorDivide)
        and isinstance(extent.left, cst.Name)
    ):
        return extent.left.value, extent.right
    # T.ceildiv(n, b) grows with n
    if isinstance(extent, cst.Call) and dotted(extent.func).rsplit(".", 1)[-1] in CEILDIV:
        args = [a.value for a in extent.args if a.keyword is None]
        if len(args) == 2 and len(extent.args) == 2 and isinstance(args[0], cst.Name):
            return args[0].value, args[1]
    return None, None


def _size_caps(
    pf: cst.FunctionDef, scoped: capacity.Scoped, env: Env
) -> dict[str, tuple[int, str]]:
    """name -> (the largest value it can take, why): names a `size=[...]` region of an on-chip
    buffer reads from the buffer's origin (`T.copy(src, buf, size=[..])` for both operands,
    `T.reduce_*(buf, out, size=[..])` for its source), bounded by that buffer's dimension (the
    buffer as the call sees it: capacity.Scoped)."""
    caps: dict[str, tuple[int, str]] = {}

    def origin(node: cst.BaseExpression) -> str | None:
        """The buffer `node` names from its origin: `buf` or `buf[0, 0]`."""
        if isinstance(node, cst.Name):
            return node.value
        zero = isinstance(node, cst.Subscript) and all(
            isinstance(e.slice, cst.Index)
            and isinstance(e.slice.value, cst.Integer)
            and e.slice.value.value == "0"
            for e in node.slice
        )
        if zero and isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
            return node.value.value
        return None

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            short = dotted(node.func).rsplit(".", 1)[-1]
            size = next(
                (a.value for a in node.args if a.keyword and a.keyword.value == "size"), None
            )
            if not isinstance(size, (cst.List, cst.Tuple)):
                return
            args = [a.value for a in node.args if a.keyword is None]
            if short == "copy":
                operands = args[:2]
            elif short.startswith("reduce"):
                operands = args[:1]
            else:
                return
            extents = [e.value for e in size.elements]
            for operand in operands:
                named = origin(operand)
                buf = scoped.get(named, node) if named is not None else None
                if buf is None or len(buf.dims) != len(extents):
                    continue
                for i, e in enumerate(extents):
                    if not isinstance(e, cst.Name):
                        continue
                    dim = evaluate(buf.dims[i], env)
                    if type(dim) is not int or dim <= 0:
                        continue
                    if e.value not in caps or dim < caps[e.value][0]:
                        line = env.resolver.f.line(node)
                        caps[e.value] = (
                            dim,
                            f"line {line} reads {e.value} elements of {buf.name}, whose "
                            f"dimension {i} holds {dim} (line {buf.line})",
                        )

    pf.visit(_V())
    return caps
