"""The values pytest passes a test function's parameter through `@pytest.mark.parametrize`.

Upstream's kernel tests (tilelang-ascend `testing/npuir`) build the kernel inside a test
function whose dtypes come from a parametrize list:

    DTYPE_CASES = [("float16", "float32")]

    @pytest.mark.parametrize("in_dtype,out_dtype", DTYPE_CASES)
    def test_matmul_exp(in_dtype, out_dtype):
        program = matmul(..., in_dtype=in_dtype, out_dtype=out_dtype)

No call in the file passes `in_dtype`: pytest does, once per entry of the list. `entries`
returns the expression each entry gives the parameter (the entry itself for one argument
name, its element at the name's position for several), when the decorator and the list are
written out in the file; None when they are not, or when the function is also called in the
file (then the calls say what it gets). Callers read strings from them (a dtype); a block
size from such a list is a value per test pass and stays out of the knobs.

The names may be given as `argnames=` and the list as `argvalues=`; an entry may be a
`pytest.param(512, 64, id=...)` (its positional values), and one whose marks skip it
(`marks=pytest.mark.skip`) is no pass. A list given with `indirect=` goes to fixtures, which
hand the test what they make of each value: not spelled out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted

if TYPE_CHECKING:
    from bot.strategies.binding import Resolver


def _names(node: cst.BaseExpression) -> list[str] | None:
    """`"a,b"` / `"a, b"` / `("a", "b")` / `["a", "b"]` -> ["a", "b"]."""
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return [n.strip() for n in node.evaluated_value.split(",") if n.strip()]
    if isinstance(node, (cst.Tuple, cst.List)):
        out = []
        for e in node.elements:
            if not isinstance(e.value, cst.SimpleString) or not isinstance(
                e.value.evaluated_value, str
            ):
                return None
            out.append(e.value.evaluated_value.strip())
        return out
    return None


def _spelled(node: cst.BaseExpression, f: Facts) -> cst.List | cst.Tuple | None:
    """A list/tuple literal, or a module name bound once to one."""
    if isinstance(node, cst.Name):
        values = f.module_assigns.get(node.value, [])
        node = values[0] if len(values) == 1 else node
    return node if isinstance(node, (cst.List, cst.Tuple)) else None


def entries(fn: Function, name: str, f: Facts) -> list[cst.BaseExpression] | None:
    """What each parametrize entry passes `fn`'s parameter `name`; None when not spelled out.
    Only pytest calls such a function: the caller asks this of one no call in the file names."""
    for deco in fn.node.decorators:
        call = deco.decorator
        if not isinstance(call, cst.Call) or not dotted(call.func).endswith("mark.parametrize"):
            continue
        args = [a.value for a in call.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        names = _argnames(call)
        argvalues = args[1] if len(args) > 1 else kw.get("argvalues")
        if names is None or name not in names or argvalues is None:
            continue
        indirect = kw.get("indirect")
        if indirect is not None and not (
            isinstance(indirect, cst.Name) and indirect.value == "False"
        ):
            return None  # the values go to fixtures, which hand the test what they make of them
        listed = _spelled(argvalues, f)
        if listed is None:
            return None
        i = names.index(name)
        out: list[cst.BaseExpression] = []
        for e in listed.elements:
            if isinstance(e, cst.StarredElement):
                return None
            value = _param(e.value)
            if value is None:
                return None  # a `pytest.param` the file does not spell out
            if value is SKIPPED:
                continue
            if len(names) == 1:
                out.append(value)
            elif isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
                part = value.elements[i]
                if isinstance(part, cst.StarredElement):
                    return None
                out.append(part.value)
            else:
                return None  # an entry the file builds
        return out or None
    return None


SKIPPED = cst.Name("SKIPPED")  # the entry of a pass pytest skips


def _argnames(call: cst.Call) -> list[str] | None:
    """The parameter names a parametrize call lists, given first or as `argnames=`."""
    args = [a.value for a in call.args if a.keyword is None]
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    argnames = args[0] if args else kw.get("argnames")
    return _names(argnames) if argnames is not None else None


def _param(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """An entry as the values it passes: `pytest.param(512, 64, id="big")` is `(512, 64)`;
    SKIPPED when its marks skip the pass (`marks=pytest.mark.skip`); None for a `pytest.param`
    whose values are not written out (`pytest.param(*case)`); any other entry as it is."""
    if not (isinstance(value, cst.Call) and dotted(value.func).endswith("pytest.param")):
        return value
    if any(a.star for a in value.args):
        return None
    for a in value.args:
        if a.keyword is not None and a.keyword.value == "marks":
            marks = a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value]
            for m in marks:
                mark = m.value if isinstance(m, cst.BaseElement) else m
                head = mark.func if isinstance(mark, cst.Call) else mark
                if dotted(head).endswith("mark.skip"):
                    return SKIPPED
    values = [a.value for a in value.args if a.keyword is None]
    if len(values) == 1:
        return values[0]
    return cst.Tuple([cst.Element(v) for v in values])


MAX_PASSES = 64  # pytest passes kept per test function


def passes(fn: Function, f: Facts) -> list[dict[str, cst.BaseExpression]] | None:
    """One dict per pytest pass of `fn`: parameter -> the expression its parametrize entry
    gives it, stacked decorators combined as pytest combines them (every pairing); None when
    `fn` has no parametrize list the file spells out. Only pytest calls such a function: the
    caller asks this of one no call in the file names."""
    out: list[dict[str, cst.BaseExpression]] = [{}]
    found = False
    for deco in fn.node.decorators:
        call = deco.decorator
        if not isinstance(call, cst.Call) or not dotted(call.func).endswith("mark.parametrize"):
            continue
        names = _argnames(call)
        if not names:
            return None
        columns = {n: entries(fn, n, f) for n in names}
        if any(c is None for c in columns.values()):
            return None  # a list the file does not spell out: the passes are not known
        rows = [
            {n: col[i] for n, col in columns.items() if col is not None}
            for i in range(min(len(c or []) for c in columns.values()))
        ]
        out = [{**a, **b} for a in out for b in rows][:MAX_PASSES]
        found = True
    return out if found else None


def int_passes(fn: Function, resolver: Resolver) -> list[dict[str, int]]:
    """The integer sizes each pytest pass gives `fn`'s parameters (`tensorshapes.size_of` of
    each entry, read where `fn` is defined), one dict per pass of `passes`."""
    from bot.strategies.evaluate import Env
    from bot.strategies.tensorshapes import size_of

    env = Env(resolver, fn.parents)
    out: list[dict[str, int]] = []
    for given in passes(fn, resolver.f) or []:
        sizes = {n: v for n, node in given.items() if (v := size_of(node, env)) is not None}
        out.append(sizes)
    return out
