"""The string values an expression can take: dtype names, mode switches.

A kernel's dtypes and switches are strings (`dtype="bfloat16"`, `is_fp32 = dtype ==
"float32"`). They are read through literals, `a if c else b` (only the side the test picks
when it is a string switch every value of its operand decides the same way: `"float32" if
dtype in ["float16", "bfloat16"] else dtype` with dtype "float16" is "float32"), names bound once (a local, a
parameter: what every call site passes, its default where a call leaves it out or passes
a value the file does not spell out; a module constant), the one-value-per-pass
entries of a loop over a list the file spells out (`for dt, tol in [("bfloat16", 1e-2)]`),
an argparse option's string default, a TileLang dtype attribute (`T.float32`), and a torch
dtype's name cut from its text (`str(torch.float32)[len("torch.") :]` is "float32"). An
empty set means unknown.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies import parametrized, rebinding
from bot.strategies.facts import Facts, Function, Loop
from bot.strategies.source import dotted

DTYPE_MODULES = frozenset({"T", "tl", "tilelang.language"})  # `T.float16` names a dtype


class Reading:
    """What a `strings` walk met: `either` is set when an undecided `a if c else b` gave both
    sides, or a default stood in for a value the file does not spell out, so the values found
    are alternatives (one of them runs). Otherwise they are all values the file runs with:
    every call site, parametrize entry and loop pass is taken to run (a call site in code that
    never runs is not told apart)."""

    def __init__(self) -> None:
        self.either = False


def strings(
    node: cst.BaseExpression,
    chain: tuple[Function, ...],
    f: Facts,
    depth: int = 0,
    reading: Reading | None = None,
) -> set[str]:
    """The string values `node` can take (a literal, a name bound to one, `a if c else b`)."""
    r = reading
    if depth > 8:
        return set()
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return {value} if isinstance(value, str) else set()
    if isinstance(node, cst.IfExp):
        taken = _decided(node.test, chain, f, depth + 1)
        if taken is not None:  # every value the switch can take picks the same side
            return strings(node.body if taken else node.orelse, chain, f, depth + 1, r)
        a = strings(node.body, chain, f, depth + 1, r)
        b = strings(node.orelse, chain, f, depth + 1, r)
        if a and b and r is not None and a != b:
            r.either = True
        return a | b if a and b else set()
    if isinstance(node, cst.Name):
        for fn in reversed(chain):
            bound = node.value in fn.assigns or node.value in fn.params
            if bound and node.value in rebinding.local_rebinders(f, fn):
                return set()  # `for dtype in (...)` over a parameter: not one binding
            if node.value in fn.assigns:
                values = fn.assigns[node.value]
                return strings(values[0], fn.chain, f, depth + 1, r) if len(values) == 1 else set()
            if node.value in fn.defaults or node.value in fn.params:
                return _param_strings(fn, node.value, f, depth + 1, r)
            if node.value in fn.loop_targets:
                loop = fn.loop_targets[node.value]
                return _loop_strings(node.value, loop, fn.chain, f, depth, r)
        values = f.module_assigns.get(node.value, [])
        if values and node.value in rebinding.module_rebinders(f):
            return set()  # assigned, and rebound by a loop, `with ... as` or `global`
        if not values and node.value in f.module_loops:
            return _loop_strings(node.value, f.module_loops[node.value], (), f, depth, r)
        return strings(values[0], (), f, depth + 1, r) if len(values) == 1 else set()
    if isinstance(node, cst.Attribute) and dotted(node.value) in DTYPE_MODULES:
        return {node.attr.value}  # `T.float32`
    if isinstance(node, cst.Attribute) and dotted(node.value) == "torch":
        return {f"torch.{node.attr.value}"}  # a torch dtype, as `str()` writes it
    if isinstance(node, cst.Call) and dotted(node.func) == "str" and len(node.args) == 1:
        return strings(node.args[0].value, chain, f, depth + 1, r)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:  # `text[len("torch.") :]`
        cut = node.slice[0].slice
        start = _start(cut) if isinstance(cut, cst.Slice) else None
        if start is not None:
            return {v[start:] for v in strings(node.value, chain, f, depth + 1, r)}
    if isinstance(node, cst.Attribute):  # `args.dtype`: the argparse option's string default
        return _argparse_strings(f, node.attr.value)
    return set()


def _decided(
    test: cst.BaseExpression, chain: tuple[Function, ...], f: Facts, depth: int
) -> bool | None:
    """The side a string switch takes (`use_fp32 = dtype in ["bfloat16", "float16"]`, `dtype
    == "float32"`) when every value its operand can take gives the same answer; else None."""
    if depth > 8:
        return None
    if isinstance(test, cst.Name):  # a name bound once, in the functions around or the module
        for fn in reversed(chain):
            if test.value in fn.assigns:
                values = fn.assigns[test.value]
                return _decided(values[0], fn.chain, f, depth + 1) if len(values) == 1 else None
            if test.value in fn.params or test.value in fn.defaults:
                return None
        values = f.module_assigns.get(test.value, [])
        return _decided(values[0], (), f, depth + 1) if len(values) == 1 else None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    if isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.List, cst.Tuple, cst.Set)):
        options = [e.value for e in right.elements]
    elif isinstance(op, (cst.Equal, cst.NotEqual)):
        options = [right]
    else:
        return None
    wanted = {o.evaluated_value for o in options if isinstance(o, cst.SimpleString)}
    if len(wanted) != len(options):
        return None  # an option that is not a plain string literal
    found = strings(test.left, chain, f, depth + 1)
    if not found:
        return None
    hits = {v in wanted for v in found}
    if len(hits) != 1:
        return None
    hit = hits.pop()
    return not hit if isinstance(op, (cst.NotIn, cst.NotEqual)) else hit


def _param_strings(
    fn: Function, name: str, f: Facts, depth: int, r: Reading | None = None
) -> set[str]:
    """The strings parameter `name` of `fn` gets: at every call site the value it passes, or
    the default where a call leaves it out or passes a value the file does not spell out; the
    default alone when no call in the file names `fn`. Empty (unknown) when a call's value is
    unknown and there is no default (or a `*args`/`**kw` may hold it)."""
    index = fn.params.index(name) if name in fn.params else None
    default = fn.defaults.get(name)
    found: set[str] = set()
    calls = [c for c in f.calls if dotted(c.node.func) == fn.name]
    # a test function no call names: pytest calls it once per parametrize entry
    listed = parametrized.entries(fn, name, f) if not calls else None
    if listed is not None:
        for entry in listed:
            values = strings(entry, (), f, depth, r)
            if not values:
                return set()
            found |= values
        return found
    for call in calls:
        arg = next((a.value for a in call.node.args if a.keyword and a.keyword.value == name), None)
        positional = [a.value for a in call.node.args if a.keyword is None and not a.star]
        starred = any(a.star == "*" for a in call.node.args)  # positions after it unknown
        packed = any(a.star for a in call.node.args)  # `*args` / `**kw` may hold the parameter
        if arg is None and index is not None and index < len(positional) and not starred:
            arg = positional[index]
        values = strings(arg, call.scope, f, depth, r) if arg is not None else set()
        if not values and default is not None and (arg is not None or not packed):
            # left out, or passed a value the file does not spell out (`dtype=tl_dtype` from
            # the input tensor): the default the author wrote is the value taken for it
            values = strings(default, fn.parents, f, depth, r)
            if values and arg is not None and r is not None:
                r.either = True  # the default stands in for a value the file does not spell out
        if not values:
            return set()
        found |= values
    if not calls and default is not None:
        return strings(default, fn.parents, f, depth, r)
    return found


def _argparse_strings(f: Facts, dest: str) -> set[str]:
    """String defaults of argparse option `dest` (`add_argument("--dtype", default="float16")`)."""
    found: set[str] = set()
    for call in f.calls:
        if not dotted(call.node.func).endswith("add_argument"):
            continue
        names = [
            a.value.evaluated_value
            for a in call.node.args
            if a.keyword is None and isinstance(a.value, cst.SimpleString)
        ]
        kw = {a.keyword.value: a.value for a in call.node.args if a.keyword is not None}
        default = kw.get("default")
        if f"--{dest}" in names and isinstance(default, cst.SimpleString):
            value = default.evaluated_value
            if isinstance(value, str):
                found.add(value)
    return found


def _start(cut: cst.Slice) -> int | None:
    """The start of `[n:]` or `[len("text"):]`, or None for any other slice."""
    if cut.upper is not None or cut.step is not None or cut.lower is None:
        return None
    lo = cut.lower
    if isinstance(lo, cst.Integer):
        return int(lo.value)
    if (
        isinstance(lo, cst.Call)
        and dotted(lo.func) == "len"
        and len(lo.args) == 1
        and isinstance(lo.args[0].value, cst.SimpleString)
    ):
        text = lo.args[0].value.evaluated_value
        return len(text) if isinstance(text, str) else None
    return None


def _loop_strings(
    name: str,
    loop: object,
    chain: tuple[Function, ...],
    f: Facts,
    depth: int,
    r: Reading | None = None,
) -> set[str]:
    """The strings a for loop's target takes over a list the file spells out (every entry),
    in the loop or bound once to a name it walks (`for dtype in DTYPE_CASES:`)."""
    target, it = getattr(loop, "target", None), getattr(loop, "iter", None)
    if not isinstance(it, (cst.List, cst.Tuple)) and isinstance(loop, Loop):
        # a name bound to the list, `zip(Ms, dtypes)`, `enumerate(cases)`: the entries as
        # containers.py reads them. Imported here: containers reads values through evaluate,
        # which reads strings
        from bot.strategies.containers import Spelled

        spelled = f.kept(("strings.spelled",), lambda: Spelled(f))
        entries = spelled.entries(loop, chain)  # None when the file changes the list
        it = cst.List([cst.Element(e) for e in entries]) if entries else None
    if not isinstance(it, (cst.List, cst.Tuple)) or not it.elements or target is None:
        return set()
    from bot.strategies.containers import element

    found: set[str] = set()
    for e in it.elements:
        part = element(target, e.value, name)  # this pass's part bound to `name`
        values = strings(part, chain, f, depth + 1, r) if part is not None else set()
        if not values:
            return set()
        found |= values
    return found
