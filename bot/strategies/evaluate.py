"""Integer and bool values of the small expressions kernels compute their sizes with.

`evaluate(node, env)` folds literals, names (through an `Env`: the factory's
locals, parameters bound at call sites, module constants, pinned knob values
and, for names the file leaves open, the sizes it runs the op with),
arithmetic, comparisons, `T.ceildiv`/`T.min`/`T.max`/`math.gcd` and module
helpers of one `return` line. Anything unknown makes the whole value None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import libcst as cst

from bot.strategies import armvalue, rebinding, tensorshapes
from bot.strategies.facts import Function, literal, reads_of
from bot.strategies.signature import takes
from bot.strategies.source import dotted
from bot.strategies.strings import strings

if TYPE_CHECKING:
    from bot.strategies.binding import Resolver

MAX_DEPTH = 12  # names followed through names before giving up


class Env:
    """Values of names in a scope, resolved lazily; `overrides` pins knob values."""

    def __init__(
        self,
        resolver: Resolver,
        chain: tuple[Function, ...],
        depth: int = 0,
        overrides: dict[str, int] | None = None,
        tensors: dict[str, tuple[int | None, ...]] | None = None,
    ) -> None:
        self.resolver, self.chain, self.depth = resolver, chain, depth
        self.overrides = dict(overrides or {})
        # shapes of tensor parameters pinned for one call path (bot/strategies/tensorshapes.py)
        self.tensors = dict(tensors or {})

    def get(self, name: str) -> object:
        if name in self.overrides:
            return self.overrides[name]
        if self.depth > MAX_DEPTH:
            return None
        value = self._get(name)
        return self.resolver.fallback.get(name) if value is None else value

    def _get(self, name: str) -> object:
        deeper = self.depth + 1
        for fn in reversed(self.chain):
            if (name in fn.assigns or takes(fn, name)) and name in rebinding.local_rebinders(
                self.resolver.f, fn
            ):
                return None  # `for dtype in (...)` over a parameter: not one value
            if name in fn.assigns and not rebinding.fills_only(self.resolver.f, fn, name):
                augs = rebinding.augments(self.resolver.f, fn, name)
                if augs is not None:  # `M *= 2` after its value: fold the changes in
                    plain = len(fn.assigns[name]) > len(augs)
                    base = (
                        evaluate(fn.assigns[name][0], Env(self.resolver, fn.chain, deeper))
                        if plain
                        else self.resolver.param(fn, name, deeper).value
                        if takes(fn, name)
                        else None
                    )
                    return self._augmented(base, augs, fn.chain)
                values = fn.assigns[name]
                if (
                    len(values) > 1
                    and (arms := armvalue.arms(self.resolver.f, fn, name)) is not None
                ):
                    # `if c: X = a` / `else: X = b`: the arm the run takes (armvalue.py)
                    here = Env(self.resolver, fn.chain, deeper, self.overrides, self.tensors)
                    for test, value in arms:
                        taken = True if test is None else evaluate(test, here)
                        if taken is None or type(taken) not in (bool, int):
                            return None
                        if taken:
                            return evaluate(value, here)
                    return None
                if len(values) != 1 or rebinding.unsure(self.resolver.f, fn, name):
                    return None
                if name in fn.unpacked:  # `M, N = cfg`: a part of a tuple the file spells out
                    target, value = fn.unpacked[name]
                    here = Env(self.resolver, fn.chain, deeper, self.overrides, self.tensors)
                    size = tensorshapes.unpacked_dim(target, value, name, here)  # `M, K = a.shape`
                    if size is None:  # `mn, nn, sub = grid(M, N, block_M, block_N)`
                        size = unpacked_call(target, value, name, here)
                    if size is not None:
                        return size
                    return self.resolver.name(name, fn.chain, deeper).value
                if name in reads_of(values[0]):
                    # `M = M - 24` reads the binding before it: a parameter's value is that
                    # binding (rebinding.unsure has ruled out a branch or loop around it); a
                    # loop's entry is read per pass (callsizes), and evaluated here it would
                    # read itself again
                    if not takes(fn, name) or name in fn.loop_targets:
                        return None
                    if _read_before(fn, name, values[0]):
                        return None  # a read before the rebinding sees the parameter itself
                    before = self.resolver.param(fn, name, deeper).value
                    if not isinstance(before, int) or isinstance(before, bool):
                        return None
                    pinned = {**self.overrides, name: before}
                    return evaluate(
                        values[0], Env(self.resolver, fn.chain, deeper, pinned, self.tensors)
                    )
                # computed in this scope: evaluate with the same pinned values
                return evaluate(
                    values[0], Env(self.resolver, fn.chain, deeper, self.overrides, self.tensors)
                )
            if takes(fn, name):
                return self.resolver.param(fn, name, deeper).value
            if name in fn.loop_targets:  # `for M in [96, 200]:` hides a module M here
                return self.resolver.name(name, fn.chain, deeper).value
        module_values = self.resolver.f.module_assigns.get(name)
        if module_values and name in rebinding.module_rebinders(self.resolver.f):
            return None  # `for N in (1024, 4096):` at module level: not one value
        augs = rebinding.augments(self.resolver.f, None, name) if module_values else None
        if module_values and augs is not None and len(module_values) > len(augs):
            base = evaluate(module_values[0], Env(self.resolver, (), deeper))
            return self._augmented(base, augs, ())
        if module_values and rebinding.unsure(self.resolver.f, None, name):
            return None
        if module_values and name in self.resolver.f.module_unpacked and len(module_values) == 1:
            target, value = self.resolver.f.module_unpacked[name]
            size = tensorshapes.unpacked_dim(target, value, name, Env(self.resolver, (), deeper))
            if size is not None:
                return size
            return self.resolver.name(name, (), deeper).value
        if module_values and len({code_of(v) for v in module_values}) == 1:
            # one assignment, or the same one repeated (`M = args.m` at the top and in __main__)
            return evaluate(module_values[0], Env(self.resolver, (), deeper, self.overrides))
        return None

    def _augmented(
        self, base: object, augs: list[cst.AugAssign], chain: tuple[Function, ...]
    ) -> object:
        """`base` changed by each `x op= value` in turn; None when any part is unknown."""
        value = base
        for aug in augs:
            op = _AUGOPS.get(type(aug.operator))
            right = evaluate(aug.value, Env(self.resolver, chain, self.depth + 1, self.overrides))
            if op is None or not isinstance(value, int) or not isinstance(right, int):
                return None
            try:
                value = _BINOPS[op](value, right)
            except (ZeroDivisionError, OverflowError):
                return None
        return value


def _read_before(fn: Function, name: str, value: cst.BaseExpression) -> bool:
    """Whether a statement of `fn`'s body before the one assigning `value` to `name` reads
    `name` (`compile(make(M)); M = M + 24`: the kernel was built with the parameter); True
    when the assignment is not a statement of the body itself."""
    body = fn.node.body
    if not isinstance(body, cst.IndentedBlock):
        return True
    for stmt in body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Assign) and small.value is value for small in stmt.body
        ):
            return False
        if name in reads_of(stmt):
            return True
    return True


def code_of(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


_BINOPS = {
    cst.Add: lambda a, b: a + b,
    cst.Subtract: lambda a, b: a - b,
    cst.Multiply: lambda a, b: a * b,
    cst.FloorDivide: lambda a, b: a // b,
    cst.Modulo: lambda a, b: a % b,
    cst.Power: lambda a, b: a**b if 0 <= b <= 64 else None,
}
_AUGOPS: dict[type, type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power,
}
_CMPS = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
}
CEILDIV = ("ceildiv", "cdiv")


def evaluate(node: cst.BaseExpression, env: Env) -> object:
    """Integer/bool value of a small expression, or None when any part is unknown."""
    try:
        return _eval(node, env)
    except (ZeroDivisionError, TypeError, ValueError, OverflowError, RecursionError):
        return None


def _eval(node: cst.BaseExpression, env: Env) -> object:
    lit = literal(node)
    if lit is not None:
        return lit
    if isinstance(node, cst.Name):
        return env.get(node.value)
    if isinstance(node, cst.Attribute):
        typed = _typed_attribute(node, env)
        if typed is not None:
            return typed
        option = isinstance(node.value, cst.Name) and dotted(node.value) not in (
            "T",
            "tl",
            "tilelang",
        )
        if option and node.attr.value in env.resolver.f.switches:  # `args.tune`, store_true
            return env.resolver.f.switches[node.attr.value]
        return (
            env.get(node.attr.value)
            if option and node.attr.value in env.resolver.f.argparse
            else None
        )
    if isinstance(node, cst.Subscript):  # `cfg["M"]`: the entry of a configuration written out
        size = _shape_index(node, env)  # `x.shape[1]`: a size of a tensor the file builds
        if size is not None:
            return size
        found = env.resolver.spelled.item(node, env.chain)
        if isinstance(found, str):
            return None
        # the entry's names are those of the scope that writes the container
        return _eval(
            found[0], Env(env.resolver, found[2], env.depth + 1, env.overrides, env.tensors)
        )
    if isinstance(node, cst.UnaryOperation):
        v = _eval(node.expression, env)
        if v is None:
            return None
        if isinstance(node.operator, cst.Minus):
            return -v  # type: ignore[operator]
        if isinstance(node.operator, cst.Not):
            return not v
        return None
    if isinstance(node, cst.BinaryOperation):
        op = _BINOPS.get(type(node.operator))
        a, b = _eval(node.left, env), _eval(node.right, env)
        if op is None or not isinstance(a, int) or not isinstance(b, int):
            return None
        return op(a, b)
    if isinstance(node, cst.Comparison):
        text = _text_test(node, env)
        if text is not None:
            return text
        left = _eval(node.left, env)
        for target in node.comparisons:
            op = _CMPS.get(type(target.operator))
            right = _eval(target.comparator, env)
            if op is None or left is None or right is None:
                return None
            if not op(left, right):
                return False
            left = right
        return True
    if isinstance(node, cst.BooleanOperation):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.operator, cst.And):
            return (
                False
                if a is False or b is False
                else (None if a is None or b is None else bool(a and b))
            )
        return (
            True if a is True or b is True else (None if a is None or b is None else bool(a or b))
        )
    if isinstance(node, cst.Call):
        return _eval_call(node, env)
    if isinstance(node, cst.IfExp):  # `block_n if IN % block_n == 0 else IN`
        test = _eval(node.test, env)
        return None if test is None else _eval(node.body if test else node.orelse, env)
    return None


def _typed_attribute(node: cst.Attribute, env: Env) -> int | None:
    """`DataType(dtype).bits`: the width TileLang's (TVM's) DataType gives a dtype string, in
    bits; `T.min(a, b).value` / `T.ceildiv(a, b).value`: the integer an IntImm holds, which is
    the value of the call (kernels unwrap a folded size to a Python int this way)."""
    inner = node.value
    if not isinstance(inner, cst.Call):
        return None
    if node.attr.value == "bits" and dotted(inner.func).rsplit(".", 1)[-1] == "DataType":
        if len(inner.args) != 1 or inner.args[0].keyword is not None or inner.args[0].star:
            return None
        from bot.strategies.capacity import DTYPE_BYTES  # capacity imports this module

        sizes = {
            DTYPE_BYTES.get(s) for s in strings(inner.args[0].value, env.chain, env.resolver.f)
        }
        if len(sizes) != 1 or None in sizes:
            return None  # several dtypes, or one whose width is not known here
        (size,) = sizes
        return cast("int", size) * 8  # None was ruled out above
    if node.attr.value == "value" and dotted(inner.func).rsplit(".", 1)[-1] in (
        "min",
        "max",
        *CEILDIV,
    ):
        value = _eval_call(inner, env)
        return value if type(value) is int else None
    return None


def _text_test(node: cst.Comparison, env: Env) -> bool | None:
    """`dtype == "float32"` / `!=`: decided when the name can take one string only."""
    if len(node.comparisons) != 1:
        return None
    op, right = node.comparisons[0].operator, node.comparisons[0].comparator
    if not isinstance(op, (cst.Equal, cst.NotEqual)):
        return None
    sides = [node.left, right]
    if not any(isinstance(x, cst.SimpleString) for x in sides):
        return None
    values = [strings(x, env.chain, env.resolver.f) for x in sides]
    if any(len(v) != 1 for v in values):
        return None
    same = values[0] == values[1]
    return same if isinstance(op, cst.Equal) else not same


def _shape_index(node: cst.Subscript, env: Env) -> int | None:
    """`x.shape[i]` / `x.size()[i]` with a literal i, where the file builds x with known sizes."""
    tensor = tensorshapes.shape_source(node.value)
    if tensor is None or len(node.slice) != 1:
        return None
    index = node.slice[0].slice
    i = literal(index.value) if isinstance(index, cst.Index) else None
    if type(i) is not int:
        return None
    return tensorshapes.dim(tensorshapes.shape_at(tensor, node, env), i)


def _eval_call(node: cst.Call, env: Env) -> object:
    name = dotted(node.func)
    if (  # `x.size(1)`: a size of a tensor the file builds
        isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "size"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
        and type(literal(node.args[0].value)) is int
    ):
        i = literal(node.args[0].value)
        assert type(i) is int
        return tensorshapes.dim(tensorshapes.shape_at(node.func.value, node, env), i)
    if any(a.star for a in node.args):
        return None
    args = [a for a in node.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    if keywords:  # only a module helper takes arguments by name here
        return _helper(name, [_eval(a.value, env) for a in args], keywords, env)
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get":
        return _dict_get(node.func.value, args, env)
    values = [_eval(a.value, env) for a in args]
    if any(not isinstance(v, int) for v in values):
        return None
    short = name.rsplit(".", 1)[-1]
    if short in CEILDIV and len(values) == 2:
        return -(-values[0] // values[1])  # type: ignore[operator]
    if name in ("max", "min", "T.max", "T.min") and values:
        return (max if short == "max" else min)(values)  # type: ignore[type-var]
    if short == "next_power_of_2" and len(values) == 1:  # tilelang's helper
        v = values[0]
        return 1 << (v - 1).bit_length() if isinstance(v, int) and v > 0 else None
    if name == "math.gcd" and len(values) == 2:
        import math

        return math.gcd(*values)  # type: ignore[arg-type]
    return _helper(name, values, {}, env)


def returned(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    """The expression a function's body does nothing but return (`return <expr>` on its own
    line or after the colon), or None."""
    body = fn.body.body
    if len(body) != 1:
        return None
    small = body[0].body if isinstance(body[0], cst.SimpleStatementLine) else [body[0]]
    if len(small) == 1 and isinstance(small[0], cst.Return) and small[0].value is not None:
        return small[0].value
    return None


def _helper(
    name: str,
    values: list[object],
    keywords: dict[str, cst.BaseExpression],
    env: Env,
    part: tuple[int, int] | None = None,
) -> object:
    """A module helper whose body is `return <expr>` (an align-up), called with integer
    arguments by position or by name (`_align_up(n=N, alignment=ALIGNMENT)`); defaults fill
    the rest. `part`: (index, length) of the element of the tuple it returns that a caller
    unpacks (`mn, nn, sub = grid(...)`); a tuple of another length, or starred, is no value."""
    for fn in env.resolver.by_name.get(name, []):
        if fn.parents or len(values) > len(fn.params):
            continue
        value = returned(fn.node)
        if value is None:
            continue
        if part is not None:
            index, length = part
            if (
                not isinstance(value, cst.Tuple)
                or len(value.elements) != length
                or any(isinstance(e, cst.StarredElement) for e in value.elements)
            ):
                continue
            value = value.elements[index].value
        bound = dict(zip(fn.params, values, strict=False))
        if any(k in bound or k not in fn.params for k in keywords):
            continue
        bound.update({k: _eval(v, env) for k, v in keywords.items()})
        for p in fn.params:
            if p not in bound and p in fn.defaults:
                bound[p] = _eval(fn.defaults[p], Env(env.resolver, (), env.depth + 1))
        if set(bound) != set(fn.params) or any(
            not isinstance(v, int) or isinstance(v, bool) for v in bound.values()
        ):
            continue
        inner = Env(env.resolver, (), env.depth + 1, bound)  # type: ignore[arg-type]
        return _eval(value, inner)
    return None


def unpacked_call(
    target: cst.BaseExpression, value: cst.BaseExpression, name: str, env: Env
) -> object:
    """`mn, nn, sub = grid(M, N, block_M, block_N)`: the element `name` takes of the tuple a
    module helper returns, or None."""
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and isinstance(target, (cst.Tuple, cst.List))
        and not any(a.star or a.keyword is not None for a in value.args)
    ):
        return None
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
    if name not in names or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    values = [_eval(a.value, env) for a in value.args]
    return _helper(value.func.value, values, {}, env, part=(names.index(name), len(names)))


def _dict_get(container: cst.BaseExpression, args: list[cst.Arg], env: Env) -> object:
    """`cfg.get("block_N", 128)`: the entry of a dict the file spells out, else the default
    (None without one, as Python gives)."""
    if not 1 <= len(args) <= 2 or not isinstance(args[0].value, cst.SimpleString):
        return None
    from bot.strategies.containers import dict_items  # containers imports this module

    found = env.resolver.spelled.scoped(container, env.chain)
    items = dict_items(found[0]) if found is not None else None
    if found is None or items is None:
        return None
    key = args[0].value.evaluated_value
    if key in items:  # the entry's names are those of the scope that writes the dict
        return _eval(
            items[key], Env(env.resolver, found[1], env.depth + 1, env.overrides, env.tensors)
        )
    return _eval(args[1].value, env) if len(args) == 2 else None
