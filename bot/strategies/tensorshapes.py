"""The shapes of the tensors a file builds, for sizes a kernel reads from them at run time.

A host function often takes its sizes from the tensors it is given, not from literals:
`M, K = a.shape`, `heads = q.shape[1]`, `n = x.size(-1)`, and passes them to the kernel
factory. The file usually builds those tensors itself on the path it runs, with literal
sizes: `torch.randn(M, K)` or `torch.empty((B, H, S, D), ...)` in the `__main__` block or a
test function, possibly moved or cast on the way (`.npu()`, `.to(dtype)`, `.contiguous()`,
`* 0.2 + 0.9`, `torch.clamp(x, ...)`, `x = x.to(dev)` rebinding the same name) or built by a
module helper (`make_indices(B, S, topk)` returning `torch.full((B, S, topk), ...)`).

`shape_of(node, env)` follows a tensor expression to that source, within the file and with
the same scoping as every other name (bot/strategies/evaluate.py's `Env`): a local or a module
name, a parameter bound by the calls of its function that the file runs (callsites.reached;
all calls agree, else the sizes come per call path from bot/strategies/callsizes.py), a helper's
`return`. Each dimension is an int or None (unknown); the whole shape is None when the tensor
cannot be followed, and the sizes read from it stay unknown (the honest "could not resolve its
extent from this file" of bot/strategies/constraints.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from bot.strategies import rebinding
from bot.strategies.facts import Function, contains, names_in
from bot.strategies.signature import takes
from bot.strategies.source import dotted

if TYPE_CHECKING:
    from bot.strategies.evaluate import Env

Shape = tuple[int | None, ...]

# tensor builders whose positional sizes (`randn(M, K)`) or one size tuple (`randn((M, K))`,
# `size=(M, K)`) give the shape; `full` and `randint` take the size in one argument
_BUILDERS = frozenset({"randn", "rand", "zeros", "ones", "empty"})
_PACKAGES = ("torch.", "np.", "numpy.", "np.random.", "numpy.random.", "torch.random.")
# methods and functions whose result has the shape of the tensor they are given
_SAME_SHAPE_METHODS = frozenset(
    {
        "npu",
        "cuda",
        "cpu",
        "to",
        "contiguous",
        "half",
        "float",
        "bfloat16",
        "double",
        "int",
        "long",
        "bool",
        "clone",
        "detach",
        "requires_grad_",
        "uniform_",
        "normal_",
        "zero_",
        "fill_",
        "abs",
        "exp",
        "sigmoid",
        "tanh",
        "neg",
        "pin_memory",
    }
)
_SAME_SHAPE_FUNCTIONS = frozenset({"clamp", "abs", "exp", "sigmoid", "tanh", "neg"})
MAX_DEPTH = 12


def shape_of(node: cst.BaseExpression, env: Env) -> Shape | None:
    """The shape of the tensor (or the size tuple) `node` evaluates to in `env`, or None."""
    if env.depth > MAX_DEPTH:
        return None
    try:
        return _shape(node, env)
    except RecursionError:
        return None


def dim(shape: Shape | None, index: int) -> int | None:
    """`shape[index]` (negative indices counted from the end), or None."""
    if shape is None or not -len(shape) <= index < len(shape):
        return None
    return shape[index]


def shape_source(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.shape` or `x.size()`: the tensor whose shape `node` is, else None."""
    if isinstance(node, cst.Attribute) and node.attr.value == "shape":
        return node.value
    if (
        isinstance(node, cst.Call)
        and not node.args
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "size"
    ):
        return node.func.value
    return None


def unpacked_dim(target: cst.BaseExpression, value: cst.BaseExpression, name: str, env: Env):
    """`M, K = a.shape`: the dimension `name` takes, or None (also when `value` is no shape)."""
    tensor = shape_source(value)
    if tensor is None or not isinstance(target, (cst.Tuple, cst.List)):
        return None
    elements = target.elements
    if any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    index = next(
        (
            i
            for i, e in enumerate(elements)
            if isinstance(e.value, cst.Name) and e.value.value == name
        ),
        None,
    )
    shape = shape_at(tensor, value, env)
    if index is None or shape is None or len(shape) != len(elements):
        return None
    return shape[index]


def shape_at(tensor: cst.BaseExpression, read: cst.BaseExpression, env: Env) -> Shape | None:
    """The shape of `tensor` as the expression `read` (`tensor.shape`, `tensor.shape[0]`,
    `tensor.size(1)`, in the file's tree) sees it: the parameter as passed where the read comes
    before its one rebinding, else as `shape_of` finds it."""
    return _before_rebinding(tensor, read, env) or shape_of(tensor, env)


def _before_rebinding(
    tensor: cst.BaseExpression, read: cst.BaseExpression, env: Env
) -> Shape | None:
    """`bs, heads, dim = q.shape` and only then `q = q.view(bs * heads, dim)`: the read, a
    statement of the function's own body before the one unconditional rebinding of the
    parameter, sees the parameter as passed. Its shape, or None when that is not the case."""
    from bot.strategies.writes import writes

    if not isinstance(tensor, cst.Name) or not env.chain:
        return None
    fn, name = env.chain[-1], tensor.value
    if not takes(fn, name):
        return None
    bindings = writes(env.resolver.f.wrapper).bindings.get(id(fn.node), {}).get(name, [])
    if len(bindings) != 1 or bindings[0].augmented or bindings[0].conditional:
        return None
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    seen_read = False
    for line in body:
        if not isinstance(line, cst.SimpleStatementLine):
            if name in names_in(line):
                return None  # a loop or branch reading it first: order not followed
            continue
        if any(contains(stmt, read) for stmt in line.body):
            seen_read = True
        if any(b is bindings[0].node for b in line.body):
            return _param(fn, name, env) if seen_read else None
    return None


def _deeper(env: Env, chain: tuple[Function, ...] | None = None, **kw: object) -> Env:
    from bot.strategies.evaluate import Env

    overrides = kw.get("overrides", env.overrides)
    tensors = kw.get("tensors", env.tensors)
    return Env(
        env.resolver,
        env.chain if chain is None else chain,
        env.depth + 1,
        overrides,  # type: ignore[arg-type]
        tensors,  # type: ignore[arg-type]
    )


def size_of(node: cst.BaseExpression, env: Env) -> int | None:
    """An integer size: folded in `env`, else the one value the binding gives a name or an
    option (`M` bound to `args.m`, the argparse default), else None."""
    from bot.strategies.evaluate import evaluate

    v = evaluate(node, env)
    if v is None and isinstance(node, (cst.Name, cst.Attribute)):
        name = node.value if isinstance(node, cst.Name) else node.attr.value
        v = env.resolver.expr(node, env.chain, env.depth + 1, name, "size").value
    return v if type(v) is int else None


def _dims(nodes: list[cst.BaseExpression], env: Env) -> Shape:
    return tuple(size_of(n, env) for n in nodes)


def _shape(node: cst.BaseExpression, env: Env) -> Shape | None:
    if isinstance(node, (cst.Tuple, cst.List)):  # a size tuple `(M, K)`
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return None
        return _dims([e.value for e in node.elements], env)
    if isinstance(node, cst.Name):
        return _name(node.value, env)
    if isinstance(node, cst.BinaryOperation):  # `x * 0.2 + 0.9`: the tensor's shape
        left, right = (_side(s, env) for s in (node.left, node.right))
        if left is _NUMBER:
            return right if isinstance(right, tuple) else None
        if right is _NUMBER:
            return left if isinstance(left, tuple) else None
        return left if isinstance(left, tuple) and left == right else None
    if isinstance(node, cst.Call):
        return _call(node, env)
    return None


_NUMBER = object()


def _side(node: cst.BaseExpression, env: Env) -> object:
    if isinstance(node, (cst.Integer, cst.Float)):
        return _NUMBER
    if isinstance(node, cst.UnaryOperation) and isinstance(
        node.expression, (cst.Integer, cst.Float)
    ):
        return _NUMBER
    return _shape(node, env)


def _name(name: str, env: Env) -> Shape | None:
    if name in env.tensors:
        return env.tensors[name]
    f = env.resolver.f
    for fn in reversed(env.chain):
        if name in fn.assigns:
            if name in fn.unpacked or name in fn.loop_targets:
                return None
            return _assigned(name, fn.assigns[name], fn, fn.chain, env)
        if takes(fn, name):
            return _param(fn, name, env)
        if name in fn.loop_targets:
            return None
    values = f.module_assigns.get(name)
    if values and name not in f.module_unpacked and name not in f.module_loops:
        return _assigned(name, values, None, (), env)
    return None


def _assigned(
    name: str,
    values: list[cst.BaseExpression],
    fn: Function | None,
    chain: tuple[Function, ...],
    env: Env,
) -> Shape | None:
    """The shape every assignment of `name` gives it: one builder, and any number of
    rebindings of the same tensor (`x = x.to(dev)`) that keep its shape."""
    if rebinding.augments(env.resolver.f, fn, name) is not None:
        return None  # `x += y`: an augmented assignment (broadcasting) is not followed
    if fn is not None and takes(fn, name):
        first = _reshaped_parameter(fn, name, env)
        if first is not None:
            value, passed = first
            return shape_of(value, _deeper(env, chain, tensors={**env.tensors, name: passed}))
    found: list[Shape] = []
    for value in values:
        inner = _deeper(env, chain, tensors={**env.tensors, name: _SELF_SHAPE})
        s = shape_of(value, inner) if len(values) > 1 else shape_of(value, _deeper(env, chain))
        if s is None:
            return None
        if s is not _SELF_SHAPE:
            found.append(s)
    if len(set(found)) != 1:
        return None
    return found[0]


_SELF_SHAPE: Shape = (None, None, None, None, None, None, None, None, None)  # marker, by identity


def _reshaped_parameter(
    fn: Function, name: str, env: Env
) -> tuple[cst.BaseExpression, Shape] | None:
    """`indices = indices.unsqueeze(0)`: a parameter rebound once, unconditionally, in a
    statement of the function's own body that no earlier statement reads it before: every read
    of the name sees that value, computed from the parameter as passed. (value, the passed
    shape), or None (other rebindings are followed as same-shape ones, or not at all)."""
    from bot.strategies.writes import writes

    bindings = writes(env.resolver.f.wrapper).bindings.get(id(fn.node), {}).get(name, [])
    if len(bindings) != 1 or bindings[0].augmented or bindings[0].conditional:
        return None
    stmt = bindings[0].node
    if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0].target
    if not isinstance(target, cst.Name) or target.value != name:
        return None
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    for line in body:
        if isinstance(line, cst.SimpleStatementLine) and any(b is stmt for b in line.body):
            break
        if name in names_in(line):
            return None
    else:
        return None
    if name not in names_in(stmt.value):
        return None  # a fresh tensor: followed as any other assignment
    passed = _param(fn, name, env)
    return None if passed is None else (stmt.value, passed)


def _param(fn: Function, name: str, env: Env) -> Shape | None:
    """A parameter's shape: the one every call of `fn` the file runs gives it."""
    from bot.strategies import callsites

    resolver = env.resolver
    runs = callsites.reached(resolver.f, resolver.harness)
    found: list[Shape | None] = []
    for call in resolver.f.calls:
        if not resolver.calls(call, fn) or (runs is not None and id(call.node) not in runs):
            continue
        bound = resolver.bound_by(call, fn, name)
        if bound is None or bound[1] not in ("keyword", "positional"):
            return None
        found.append(shape_of(bound[0], _deeper(env, call.scope, overrides={}, tensors={})))
    if not found and name in fn.defaults:
        return shape_of(fn.defaults[name], _deeper(env, fn.parents, overrides={}, tensors={}))
    if not found or any(s is None for s in found) or len(set(found)) != 1:
        return None
    return found[0]


def _call(node: cst.Call, env: Env) -> Shape | None:
    func = dotted(node.func)  # '' for a method of a call's result (`torch.randn(M).npu()`)
    short = node.func.attr.value if isinstance(node.func, cst.Attribute) else func.split(".")[-1]
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    if any(a.star for a in node.args):
        return None
    package = func[: len(func) - len(short)] if func else ""
    if package in _PACKAGES:
        if "size" in keywords:
            return _shape(keywords["size"], env)
        if short in _BUILDERS:
            if len(positional) == 1 and not _is_int(positional[0], env):
                return _shape(positional[0], env)  # `randn((M, K))`, `randn(shape)`
            return _dims(positional, env) if positional else None
        if short == "full" and positional:
            return _shape(positional[0], env)
        if short == "randint" and len(positional) in (2, 3):
            return _shape(positional[-1], env)
        if short.endswith("_like") and positional:
            return _shape(positional[0], env)
        if short in _SAME_SHAPE_FUNCTIONS and positional:
            return _shape(positional[0], env)
        return None
    if isinstance(node.func, cst.Attribute) and short in _SAME_SHAPE_METHODS:
        return _shape(node.func.value, env)  # `x.npu()`, `x.to(dtype)`, `x.contiguous()`
    if isinstance(node.func, cst.Attribute) and short in ("unsqueeze", "squeeze"):
        return _squeezed(short, _shape(node.func.value, env), positional, keywords, env)
    if isinstance(node.func, cst.Attribute) and short in ("view", "reshape") and positional:
        if len(positional) == 1 and not _is_int(positional[0], env):
            wanted = _shape(positional[0], env)
        else:
            wanted = _dims(positional, env)
        return _reshaped(_shape(node.func.value, env), wanted)
    if isinstance(node.func, cst.Name):
        return _helper(node, env)
    return None


def _squeezed(
    method: str,
    source: Shape | None,
    positional: list[cst.BaseExpression],
    keywords: dict[str, cst.BaseExpression],
    env: Env,
) -> Shape | None:
    """`x.unsqueeze(d)` inserts a size-1 dimension at d; `x.squeeze(d)` drops dimension d when
    it is 1 (a dimension of another size stays). Without a literal d, unknown."""
    from bot.strategies.evaluate import evaluate

    if source is None:
        return None
    where = positional[0] if len(positional) == 1 else keywords.get("dim")
    if where is None or len(positional) + len(keywords) != 1:
        return None
    d = evaluate(where, env)
    if type(d) is not int:
        return None
    if method == "unsqueeze":
        rank = len(source) + 1
        if not -rank <= d < rank:
            return None
        d %= rank
        return (*source[:d], 1, *source[d:])
    if not -len(source) <= d < len(source):
        return None
    d %= len(source)
    if source[d] is None:
        return None
    return source if source[d] != 1 else (*source[:d], *source[d + 1 :])


def _reshaped(source: Shape | None, wanted: Shape | None) -> Shape | None:
    """The shape `view`/`reshape` gives: a -1 is the one size the others leave, inferred from
    the source's known sizes, else unknown; it is never a size of -1."""
    if wanted is None or not any(d is not None and d < 0 for d in wanted):
        return wanted
    rest = [d for d in wanted if d is None or d >= 0]
    known = source is not None and all(d is not None and d > 0 for d in source)
    inferred: int | None = None
    if known and len(rest) == len(wanted) - 1 and all(d is not None and d > 0 for d in rest):
        total = math.prod(d for d in source if d is not None) if source is not None else 0
        part = math.prod(d for d in rest if d is not None)
        inferred = total // part if total % part == 0 else None
    return tuple(inferred if d is not None and d < 0 else d for d in wanted)


def _is_int(node: cst.BaseExpression, env: Env) -> bool:
    from bot.strategies.evaluate import evaluate

    return type(evaluate(node, env)) is int


def _helper(node: cst.Call, env: Env) -> Shape | None:
    """A module function's returned tensor, its parameters bound to this call's values."""
    from bot.strategies.evaluate import evaluate

    assert isinstance(node.func, cst.Name)
    fns = [fn for fn in env.resolver.by_name.get(node.func.value, []) if not fn.parents]
    if len(fns) != 1 or any(node.func.value in fn.assigns for fn in env.chain):
        return None
    fn = fns[0]
    returns = _returns(fn.node)
    if not returns:
        return None
    ints: dict[str, int] = {}
    tensors: dict[str, Shape] = {}
    for i, arg in enumerate(node.args):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword is not None else None
        if name is None:
            if i >= len(fn.params):
                return None
            name = fn.params[i]
        v = evaluate(arg.value, env)
        if type(v) is int:
            ints[name] = v
        else:
            s = shape_of(arg.value, env)
            if s is not None:
                tensors[name] = s
    inner = _deeper(env, fn.chain, overrides=ints, tensors=tensors)
    shapes = [shape_of(r, inner) for r in returns]
    if any(s is None for s in shapes) or len(set(shapes)) != 1:
        return None
    return shapes[0]


def _returns(node: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The values of the function's own `return` statements (nested functions excluded)."""
    out: list[cst.BaseExpression] = []
    bare = False

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return n is node

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

        def visit_Return(self, n: cst.Return) -> None:
            nonlocal bare
            if n.value is None:
                bare = True
            else:
                out.append(n.value)

    node.visit(V())
    return [] if bare else out
