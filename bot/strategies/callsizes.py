"""The sizes each call that builds a kernel binds, followed through the callers' parameters.

`gemm_splitk(M, N, K, block_M, block_N, block_K, split_k)` inside `test(M, N, K, split_k)`,
with `test(128, 128, 128, 2)` and `test(1024, 1024, 1024, 4)` in `main()`: the factory runs
with (K=128, split_k=2) and (K=1024, split_k=4), never with (K=128, split_k=4). A rule
over `K // split_k` must hold for the pairs the file runs, so the sizes come per call path
(one dict of open name -> size each), not as independent lists whose every combination
would be checked. A path that binds a size of 0 or less (an argparse default of 0 that
switches the call off) is not a size the kernel runs with and is left out.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies import callsites, parametrized, rebinding, splats, tensorshapes
from bot.strategies.binding import Resolver
from bot.strategies.callerbuffers import _declared
from bot.strategies.containers import dict_items, element
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Call, Facts, Function, Loop, contains, literal, names_in
from bot.strategies.signature import star_names
from bot.strategies.source import dotted
from bot.strategies.tensorshapes import Shape

MAX_DEPTH = 4  # caller levels followed
MAX_PATHS = 64  # call paths kept per factory


def call_sizes(
    f: Facts, resolver: Resolver, factory: Function, wanted: set[str]
) -> list[dict[str, int]]:
    """One dict per call path that builds `factory`: the open names it binds to known sizes."""
    out: list[dict[str, int]] = []
    for fn in factory.chain:
        names = wanted & set(fn.params)
        if names:
            for env in _paths(f, resolver, fn, names, 0):
                if env and env not in out:
                    out.append(env)
    return out[:MAX_PATHS]


def _paths(
    f: Facts, resolver: Resolver, fn: Function, names: set[str], depth: int
) -> list[dict[str, int]]:
    """Per call of `fn`: the sizes its parameters `names` take (a parameter bound to a
    parameter of the calling function takes that function's own call paths)."""
    if depth > MAX_DEPTH:
        return []
    paths: list[dict[str, int]] = []
    if not any(resolver.calls(call, fn) for call in f.calls):
        return _pytest_passes(resolver, fn, names)
    for call in f.calls:
        if not resolver.calls(call, fn):
            continue
        known: dict[str, int] = {}
        passed: dict[str, str] = {}  # our parameter -> the caller's parameter it is bound to
        pending: dict[str, cst.BaseExpression] = {}  # read from the caller's tensors' shapes
        caller = call.scope[-1] if call.scope else None
        start = len(paths)
        spread = _spread(resolver, call, fn, names)
        for name in sorted(names):
            bound = resolver.bound_by(call, fn, name)
            if bound is None or bound[1] not in ("keyword", "positional"):
                continue
            node = bound[0]
            value = evaluate(node, Env(resolver, call.scope))
            if type(value) is int:
                known[name] = value
            elif caller is not None and (theirs := _param_name(node, caller)) is not None:
                passed[name] = theirs
            elif caller is not None:
                pending[name] = node
        looped = _loop_passes(resolver, caller, pending, call) if caller is not None else []
        if looped:  # `run(cfg["M"], cfg["dim"])` in `for cfg in configs`: one path per entry
            for sizes in looped:
                paths.append({**known, **sizes})
        elif pending and caller is not None:  # `M, K = a.shape`, a a parameter: per call of caller
            for ints, tensors in param_values(f, resolver, caller, depth + 1):
                full = dict(known)
                full.update(
                    {ours: ints[theirs] for ours, theirs in passed.items() if theirs in ints}
                )
                for name, node in pending.items():
                    value = evaluate(node, Env(resolver, call.scope, 0, ints, tensors))
                    if type(value) is int:
                        full[name] = value
                paths.append(full)
        elif passed and caller is not None:
            upper = _paths(f, resolver, caller, set(passed.values()), depth + 1)
            for env in upper or [{}]:
                full = dict(known)
                full.update({ours: env[theirs] for ours, theirs in passed.items() if theirs in env})
                paths.append(full)
        else:
            paths.append(known)
        if spread:  # `f(**cfg)` over several configurations: each pass with the call's others
            paths[start:] = [{**kw, **p} for p in paths[start:] for kw in spread]
    return [p for p in paths if all(v > 0 for v in p.values())]


_MAX_LOOPED = 64  # size combinations read from nested configuration loops


def _loop_passes(
    resolver: Resolver, caller: Function, nodes: dict[str, cst.BaseExpression], call: Call
) -> list[dict[str, int]]:
    """The sizes a call inside `for cfg in configs` (or `for i, cfg in enumerate(configs)`)
    passes as `cfg["dim"]` / `cfg[1]`, or inside `for M, N in SHAPE_CASES` as `M`, the list
    spelled out in the file and never changed: one dict per entry. The loop is the one around
    the call (two loops may bind one name); a target the loop's body rebinds before the call
    (`M = M - 24`) is that expression of each entry. [] when the nodes read no such loop."""
    reads: list[tuple[str, str, cst.BaseExpression | None, Loop]] = []
    loops: dict[int, Loop] = {}
    rebound: dict[str, cst.BaseExpression] = {}  # loop target -> its value in the body
    for name, node in nodes.items():
        base = node.value if isinstance(node, cst.Name) else None
        if (
            isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Name)
            and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
        ):
            base = node.value.value
        if base is None:
            continue
        loop = _around(caller, base, call.node)
        if loop is None:
            continue
        if isinstance(node, cst.Subscript) and _changed_before(loop, base, node, call.node):
            continue  # `cfg["M"] = 512` / `cfg.update(...)`: the entries are not what it reads
        inside = [  # assignments in the body before the statement that holds the call
            b
            for b in rebinding.assignments(resolver.f, caller, base)
            if loop.node is not None and _before(loop.node, b.node, call.node)
        ]
        if inside:  # the body assigns the target itself
            body_value = _rebinding(inside, base, loop, call.node)
            if body_value is None:
                continue  # changed in a way not read here: no size from the loop
            if not _copy_of(body_value, base):  # `cfg = dict(cfg)` keeps every entry's sizes
                rebound[base] = body_value
        loops[id(loop)] = loop
        key = None
        if isinstance(node, cst.Subscript) and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
        reads.append((name, base, key, loop))  # key None: the target's own part of each entry
    # nested loops (`for M, N in SHAPES:` around `for dtype in DTYPES:`): a loop that gives
    # no size (dtypes, op names) leaves the paths as they are; the others multiply them
    out: list[dict[str, int]] = [{}]
    sized = False
    for loop in loops.values():
        passes: list[dict[str, int]] = []
        for entry in resolver.spelled.entries(loop, caller.chain) or []:
            sizes: dict[str, int] = {}
            for name, base, key, around in reads:
                if around is not loop:
                    continue
                part = element(loop.target, entry, base)
                value: object = literal(part if key is None else _keyed(part, key))
                if base in rebound and key is None:  # `M = M - 24` in the body: this entry's M
                    pinned = {
                        n: v
                        for n in names_in(loop.target)
                        if isinstance(v := literal(element(loop.target, entry, n)), int)
                    }
                    value = evaluate(rebound[base], Env(resolver, caller.chain, 0, pinned))
                elif base in rebound:
                    value = None
                if isinstance(value, int) and not isinstance(value, bool):
                    sizes[name] = value
            if sizes and sizes not in passes:
                passes.append(sizes)
        if passes:
            sized = True
            out = [{**a, **b} for a in out for b in passes][:_MAX_LOOPED]
    return out if sized else []


def _around(caller: Function, name: str, call: cst.Call) -> Loop | None:
    """The innermost loop of `caller` that binds `name` and holds `call` in its body."""
    around = [
        loop
        for loop in caller.loops_of.get(name, [])
        if loop.node is not None and contains(loop.node.body, call)
    ]
    return around[-1] if around else None


def _before(loop: cst.For, node: cst.CSTNode, call: cst.Call) -> bool:
    """Whether `node` lies in a statement of the loop's body before the one holding `call`
    (an assignment after the call, `M = M * 2` for the next pass's print, changes nothing the
    call saw)."""
    statements = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
    at = next((i for i, st in enumerate(statements) if contains(st, call)), len(statements))
    return any(contains(st, node) for st in statements[:at]) or (
        at < len(statements) and contains(statements[at], node) and node is not statements[at]
    )


def _rebinding(bindings: list, name: str, loop: Loop, call: cst.Call) -> cst.BaseExpression | None:
    """The value a loop target takes when the loop's body (`bindings`: its assignments there)
    assigns it once, plainly and before the statement that holds the call (`for M, N in
    CASES:` / `M = M - 24`); None for any other rebinding (augmented, in a branch, after the
    call, more than once)."""
    if len(bindings) != 1 or loop.node is None:
        return None
    stmt = bindings[0].node
    if bindings[0].augmented or not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
        return None
    if not (isinstance(stmt.targets[0].target, cst.Name) and stmt.targets[0].target.value == name):
        return None
    body = loop.node.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    for line in body.body:  # the loop's own statements, in order
        if contains(line, call):
            return None  # reached the call first
        if isinstance(line, cst.SimpleStatementLine) and any(s is stmt for s in line.body):
            return stmt.value
    return None


# calls that read a configuration without changing it
_READS = {"get", "keys", "values", "items", "copy", "index", "count"}
_PASSIVE = {"print", "len", "str", "repr", "dict", "list", "tuple", "sorted", "format"}


def _changed_before(loop: Loop, base: str, read: cst.Subscript, call: cst.Call) -> bool:
    """Whether the loop's body, before the statement holding `call`, may change the entry
    `base` names under the key `read` takes (`cfg["M"] = 1000` for `cfg["M"]`; a change
    under another literal key, `cfg["dtype"] = ...`, does not): an item assignment or
    deletion, a method that is not a read (`cfg.update(...)`), an alias (`c = cfg`) or the
    entry passed to a function (`tweak(cfg)`)."""
    if loop.node is None or not isinstance(loop.node.body, cst.IndentedBlock):
        return True
    key = read.slice[0].slice.value if isinstance(read.slice[0].slice, cst.Index) else None
    wanted = _key(key)
    statements = list(loop.node.body.body)
    at = next((i for i, st in enumerate(statements) if contains(st, call)), len(statements))
    changed = False

    def item(target: cst.BaseExpression) -> None:
        nonlocal changed
        if not (
            isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
            and target.value.value == base
        ):
            return
        part = target.slice[0].slice if len(target.slice) == 1 else None
        other = _key(part.value) if isinstance(part, cst.Index) else None
        # another literal key than the one read changes nothing the call reads
        changed = changed or other is None or wanted is None or other == wanted

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            item(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            item(node.target)

        def visit_Del(self, node: cst.Del) -> None:
            item(node.target)

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal changed
            if isinstance(node.value, cst.Name) and node.value.value == base:
                changed = True  # `c = cfg`: changes through the alias are not followed

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal changed
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == base
                and func.attr.value not in _READS
            ):
                changed = True
            if dotted(func) not in _PASSIVE and any(
                isinstance(a.value, cst.Name) and a.value.value == base for a in node.args
            ):
                changed = True  # `tweak(cfg)`: what the function does to it is not followed

    for st in statements[:at]:
        st.visit(_V())
    return changed


def _key(node: cst.BaseExpression | None) -> object:
    """A subscript's literal key (`"M"`, `0`), else None."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return literal(node) if node is not None else None


_COPIES = {"dict", "list", "tuple", "copy.copy", "copy.deepcopy", "deepcopy"}


def _copy_of(node: cst.BaseExpression, name: str) -> bool:
    """Whether `node` is a plain copy of `name`: `dict(cfg)`, `list(cfg)`, `cfg.copy()`,
    `copy.deepcopy(cfg)` (the same entries under the same keys)."""
    if not isinstance(node, cst.Call):
        return False
    func = dotted(node.func)
    if func == f"{name}.copy" and not node.args:
        return True
    return (
        func in _COPIES
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
        and isinstance(node.args[0].value, cst.Name)
        and node.args[0].value.value == name
    )


def _keyed(node: cst.BaseExpression | None, key: cst.BaseExpression) -> cst.BaseExpression | None:
    """The part `node[key]` names in a dict or tuple written out (`{"dim": 512}["dim"]`)."""
    if isinstance(key, cst.SimpleString):
        items = dict_items(node)
        return items.get(str(key.evaluated_value)) if items is not None else None
    index = literal(key)
    if isinstance(node, (cst.Tuple, cst.List)) and type(index) is int:
        elements = node.elements
        if -len(elements) <= index < len(elements):
            part = elements[index]
            return None if isinstance(part, cst.StarredElement) else part.value
    return None


def _pytest_passes(resolver: Resolver, fn: Function, names: set[str]) -> list[dict[str, int]]:
    """A test function no call in the file names: pytest calls it once per pass of its
    `@pytest.mark.parametrize` lists (parametrized.py); the integer sizes each pass gives the
    parameters `names`, one dict per pass ([] when none gives one)."""
    out: list[dict[str, int]] = []
    for given in parametrized.int_passes(fn, resolver):
        sizes = {n: given[n] for n in sorted(names & set(given))}
        if sizes and sizes not in out:
            out.append(sizes)
    return out


def _spread(resolver: Resolver, call: Call, fn: Function, names: set[str]) -> list[dict[str, int]]:
    """The sizes a `**` argument of `call` binds to the parameters `names` of `fn` that no
    keyword or position binds, one dict per keyword set (splats.py); [] when it binds none."""
    loose = {
        n
        for n in names
        if (b := resolver.bound_by(call, fn, n)) is None or b[1] not in ("keyword", "positional")
    }
    if not loose or not any(a.star == "**" for a in call.node.args):
        return []
    out: list[dict[str, int]] = []
    for kw in splats.call_keywords(call.node, Env(resolver, call.scope)) or []:
        sizes = {
            n: v for n in sorted(loose & set(kw)) if (v := tensorshapes.size_of(*kw[n])) is not None
        }
        if sizes and sizes not in out:
            out.append(sizes)
    return out


def param_values(
    f: Facts, resolver: Resolver, fn: Function, depth: int
) -> list[tuple[dict[str, int], dict[str, Shape]]]:
    """Per call of `fn` on the path the file runs: the sizes (ints) and the tensor shapes its
    parameters take, each call's arguments read with its own caller's values in turn (a
    tensor built from the sizes `test(96, 128)` passes)."""
    if depth > MAX_DEPTH:
        return []
    runs = callsites.reached(f, resolver.harness)
    params = [p for p in fn.params if p not in fn.assigns and p not in star_names(fn)]
    if not any(resolver.calls(call, fn) for call in f.calls):
        return [(ints, {}) for ints in _pytest_passes(resolver, fn, set(params))]
    out: list[tuple[dict[str, int], dict[str, Shape]]] = []
    for call in f.calls:
        if not resolver.calls(call, fn) or (runs is not None and id(call.node) not in runs):
            continue
        bound = {p: resolver.bound_by(call, fn, p) for p in params}
        nodes = {p: b[0] for p, b in bound.items() if b and b[1] in ("keyword", "positional")}
        caller = call.scope[-1] if call.scope else None
        uppers = param_values(f, resolver, caller, depth + 1) if caller is not None else []
        for upper_ints, upper_tensors in uppers or [({}, {})]:
            env = Env(resolver, call.scope, 0, upper_ints, upper_tensors)
            # `f(**inputs)`: what the dict passes, one set per way the file runs it (splats.py)
            spread = splats.call_keywords(call.node, env) or [{}]
            for kw in spread:
                ints: dict[str, int] = {}
                tensors: dict[str, Shape] = {}
                reads = {p: (node, env) for p, node in nodes.items()}
                reads.update({p: kw[p] for p in params if p in kw and p not in nodes})
                for p, (node, at) in reads.items():
                    value = tensorshapes.size_of(node, at)  # `K` bound to `args.K`: its default
                    if value is not None:
                        ints[p] = value
                        continue
                    shape = tensorshapes.shape_of(node, at)
                    if shape is not None:
                        tensors[p] = shape
                if (ints, tensors) not in out:
                    out.append((ints, tensors))
        if len(out) >= MAX_PATHS:
            break
    return out[:MAX_PATHS]


def _param_name(node: cst.BaseExpression, caller: Function) -> str | None:
    """The caller's own parameter `node` is (not reassigned in the caller), else None."""
    if (
        isinstance(node, cst.Name)
        and node.value in caller.params
        and node.value not in caller.assigns
    ):
        return node.value
    return None


def symbol_sizes(
    f: Facts, resolver: Resolver, factory: Function, wanted: set[str]
) -> dict[str, list[int]]:
    """Sizes of the factory's symbolic shapes (`M = T.symbolic("M")`) that the compiled kernel
    takes from the tensors it is called with: `kernel = factory(...)`, then `kernel(a, ...)`
    with `A: T.Tensor((M, K), ...)` binds M to `a.shape[0]`, read where the file builds `a`
    (bot/strategies/tensorshapes.py; per call path of the calling function)."""
    where = {n: at for n, at in symbol_places(resolver, factory).items() if n in wanted}
    if not where:
        return {}
    builders = {fn.name for fn in factory.chain}
    out: dict[str, list[int]] = {}
    runs = callsites.reached(f, resolver.harness)
    for call in f.calls:
        if (runs is not None and id(call.node) not in runs) or not runs_kernel(
            resolver, call, builders
        ):
            continue
        if any(a.star or a.keyword is not None for a in call.node.args):
            continue
        args = [a.value for a in call.node.args]
        caller = call.scope[-1] if call.scope else None
        uppers = param_values(f, resolver, caller, 1) if caller is not None else []
        for ints, tensors in uppers or [({}, {})]:
            env = Env(resolver, call.scope, 0, ints, tensors)
            for name, places in where.items():
                for i, j in places:
                    if i < len(args):
                        size = tensorshapes.dim(tensorshapes.shape_of(args[i], env), j)
                        if size is not None and size > 0 and size not in out.get(name, []):
                            out.setdefault(name, []).append(size)
    return out


def runs_kernel(resolver: Resolver, call: Call, builders: set[str], compiled: bool = False) -> bool:
    """`call` runs the kernel a function named in `builders` builds: `kernel(...)` with
    `kernel = builder(...)`; with `compiled`, also `kernel = tilelang.compile(program)` with
    `program = builder(...)`, and `builder(...)(...)`."""
    func = call.node.func
    if isinstance(func, cst.Call):
        return compiled and isinstance(func.func, cst.Name) and func.func.value in builders
    if not isinstance(func, cst.Name):
        return False
    handle = resolver.spelled.assigned(func.value, call.scope)
    for _ in range(2):
        if not isinstance(handle, cst.Call):
            return False
        if isinstance(handle.func, cst.Name) and handle.func.value in builders:
            return True
        if not compiled or not dotted(handle.func).endswith(".compile") or not handle.args:
            return False
        program = handle.args[0].value
        if not isinstance(program, cst.Name):
            return False
        handle = resolver.spelled.assigned(program.value, call.scope)
    return False


def symbol_places(
    resolver: Resolver, factory: Function, named: bool = False
) -> dict[str, list[tuple[int, int]]]:
    """Each symbolic shape (`M = T.symbolic("M")`) of the factory's one prim_func -> where its
    tensors declare it: (tensor parameter index, dimension index), in order. With `named`, a
    tensor declared through a name the factory sets to a tuple (`A: T.Tensor(a_shape, dt)`)
    counts too ({} when the factory holds no prim_func or several)."""
    if len(factory.prim_funcs) != 1:
        return {}
    symbolic = shapes_symbols(factory)
    where: dict[str, list[tuple[int, int]]] = {}
    for i, (_, dims) in enumerate(_declared(factory.prim_funcs[0])):
        read = dims or (_named_shape(resolver, factory, i) if named else ())
        for j, d in enumerate(read):
            if isinstance(d, cst.Name) and d.value in symbolic:
                where.setdefault(d.value, []).append((i, j))
    return where


def _named_shape(
    resolver: Resolver, factory: Function, index: int
) -> tuple[cst.BaseExpression, ...]:
    """The dims of the prim_func's `index`-th tensor declared through a name the factory sets
    to a tuple once (`a_shape = (M, K)`, `A: T.Tensor(a_shape, dtype)`), else ()."""
    param = factory.prim_funcs[0].params.params[index]
    ann = param.annotation.annotation if param.annotation else None
    if not isinstance(ann, cst.Call) or not ann.args or not isinstance(ann.args[0].value, cst.Name):
        return ()
    shape = resolver.spelled.assigned(ann.args[0].value.value, factory.chain)
    if isinstance(shape, (cst.Tuple, cst.List)):
        return tuple(e.value for e in shape.elements)
    return ()


def shapes_symbols(factory: Function) -> set[str]:
    """The Python names bound to `T.symbolic(...)` in the factory's chain."""
    out: set[str] = set()
    for fn in factory.chain:
        for name, values in fn.assigns.items():
            v = values[0] if len(values) == 1 else None
            if isinstance(v, cst.Call) and dotted(v.func).endswith("symbolic"):
                out.add(name)
    return out
