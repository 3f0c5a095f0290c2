"""Where the size of an open extent is lost: the step a refusal can name.

A knob that must divide an extent tunebot cannot size (`T.ceildiv(num_heads, block_heads)`)
is held to the divisors of its current value. Saying only "tunebot could not resolve its
extent" leaves a reader to guess whether the file fixes it: often it does, but through a
route tunebot does not open. This walk follows the extent's name back along the calls the
file runs and names the step where the size leaves what tunebot reads:

    num_heads   factory parameter, bound at `sparse_attn_kernel(..., num_heads, ...)`
    num_heads   in the caller, `batch, seq, num_heads, dim = q.size()`
    q           the caller's parameter, passed by its only call as `**data["inputs"]`

A `T.symbolic` extent is sized by the tensor the compiled kernel is called with
(`kernel = tilelang.compile(factory(...))`, then `kernel(A, B, C)`); the walk follows that
argument the same way, and also stops at a tensor built by a function the file imports
(`A = gen_tensor((M, K), ...)`): what shape it returns is not in the file.

The walk says something only when every call the file runs ends at such a step (a
`*args` / `**kwargs` whose contents are not spelled out in the file); anywhere else it
returns None and the refusal keeps its general wording. It never sizes anything: the rule
stays "only divisors of the current value".
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from bot.strategies import callsites, splats
from bot.strategies.binding import Resolver
from bot.strategies.callerbuffers import _declared
from bot.strategies.callsizes import runs_kernel, shapes_symbols, symbol_places
from bot.strategies.evaluate import Env, code_of
from bot.strategies.facts import Call, Function, names_in
from bot.strategies.tensorshapes import shape_source

MAX_STEPS = 4  # callers followed


def lost_at(
    resolver: Resolver, chain: tuple[Function, ...], expr: cst.BaseExpression
) -> str | None:
    """Where the size of `expr` (an extent read in `chain`) leaves what tunebot reads, as a
    clause for a refusal, or None when the walk cannot tell. Kept on the parse: the answer
    depends only on the expression, its chain and the harness, and constraint checks ask it
    once per candidate value."""
    key = ("lostsize.lost_at", id(expr), tuple(id(fn.node) for fn in chain), resolver.harness)
    memo = resolver.f.derived
    if key not in memo:
        memo[key] = _lost_at(resolver, chain, expr)
    return cast("str | None", memo[key])


def _lost_at(
    resolver: Resolver, chain: tuple[Function, ...], expr: cst.BaseExpression
) -> str | None:
    factory = next((fn for fn in reversed(chain) if fn.prim_funcs), None)
    symbolic = shapes_symbols(factory) if factory is not None else set()
    for name in sorted(names_in(expr)):
        if name in symbolic and factory is not None:
            story = _symbol(resolver, factory, name)
            if story:
                return story
            continue
        fn = next(
            (fn for fn in reversed(chain) if name in fn.params and name not in fn.assigns), None
        )
        if fn is None:
            continue
        story = _param(resolver, fn, name, 0)
        if story:
            return f"`{name}` is {story}"
    return None


def _symbol(resolver: Resolver, factory: Function, name: str) -> str | None:
    """`name`, a `T.symbolic` size of `factory`'s one prim_func: where the size of the tensor
    that binds it is lost, on every call of the compiled kernel the file runs."""
    places = symbol_places(resolver, factory, named=True).get(name)
    if not places:
        return None
    declared = _declared(factory.prim_funcs[0])
    index = places[0][0]  # the first tensor that declares it
    f = resolver.f
    runs = callsites.reached(f, resolver.harness)
    stories: list[str] = []
    for call in f.calls:
        # the calls the file runs, and those in its pytest tests (collected by name)
        tested = bool(call.scope) and call.scope[0].name.startswith("test")
        if (runs is not None and id(call.node) not in runs and not tested) or not runs_kernel(
            resolver, call, {factory.name}, compiled=True
        ):
            continue
        args = call.node.args
        if index >= len(args) or any(a.star or a.keyword is not None for a in args):
            return None
        caller = call.scope[-1] if call.scope else None
        story = _tensor(resolver, caller, args[index].value) if caller is not None else None
        if story is None:
            return None
        if story not in stories:
            stories.append(story)
    if not stories:
        return None
    return (
        f"`{name}` is a `T.symbolic` size the kernel takes from its tensor "
        f"`{declared[index][0]}`, and the file calls it with " + "; or ".join(stories)
    )


def _tensor(resolver: Resolver, caller: Function, node: cst.BaseExpression) -> str | None:
    """`node`, a tensor argument written in `caller`: where its shape is lost, or None."""
    if not isinstance(node, cst.Name):
        return None
    values = caller.assigns.get(node.value, [])
    if node.value in caller.params and not values:
        inner = _param(resolver, caller, node.value, 1)
        return None if inner is None else f"`{node.value}`, {inner}"
    if len(values) != 1 or not isinstance(values[0], cst.Call):
        return None
    built = values[0]
    source = _imported(resolver, built.func)
    if source is None:
        return None
    return (
        f"`{node.value}` set to `{code_of(built)}` in {caller.name}() (line "
        f"{resolver.f.line(built)}), built by `{code_of(built.func)}`, which the file imports "
        f"from {source}: the shape it returns is not in this file"
    )


def _imported(resolver: Resolver, func: cst.BaseExpression) -> str | None:
    """The module a `from m import name` brings `func` (a plain name) from, when the file
    defines no function or module name of that spelling; else None."""
    if not isinstance(func, cst.Name):
        return None
    name = func.value
    if name in resolver.by_name or name in resolver.f.module_assigns:
        return None
    for stmt in resolver.f.wrapper.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not isinstance(small.names, cst.ImportStar)
            ):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    if isinstance(bound, cst.Name) and bound.value == name:
                        return f"`{code_of(small.module)}`"
    return None


def _run_calls(resolver: Resolver, fn: Function) -> list[Call]:
    runs = callsites.reached(resolver.f, resolver.harness)
    return [
        c
        for c in resolver.f.calls
        if resolver.calls(c, fn) and (runs is None or id(c.node) in runs)
    ]


def _param(resolver: Resolver, fn: Function, name: str, steps: int) -> str | None:
    """`name`, a parameter of `fn`: where its size is lost on every call the file runs."""
    if steps > MAX_STEPS:
        return None
    calls = _run_calls(resolver, fn)
    if not calls:
        return None  # no caller: the general wording is the true one
    f = resolver.f
    stories: list[str] = []
    opaque_lines: list[str] = []
    opaque_code: set[str] = set()
    for call in calls:
        bound = resolver.bound_by(call, fn, name)
        if bound is None:
            return None  # its default, or not passed: not this walk's case
        node, kind = bound
        if kind == "opaque":
            spread = splats.call_keywords(call.node, Env(resolver, call.scope))
            if spread and any(name in kw for kw in spread):
                return None  # tunebot reads that dict (splats.py): it is lost further on
            arg = next((a for a in call.node.args if a.value is node), None)
            star = arg.star if arg is not None and isinstance(arg.star, str) else ""
            opaque_lines.append(str(f.line(call.node)))
            opaque_code.add(f"{star}{code_of(node)}")
            continue
        caller = call.scope[-1] if call.scope else None
        if kind not in ("positional", "keyword") or caller is None:
            return None
        story = _local(resolver, caller, node, name, steps)
        if story is None:
            return None
        if story not in stories:
            stories.append(story)
    if opaque_lines:
        lines = ", ".join(opaque_lines)
        spelled = ", ".join(f"`{c}`" for c in sorted(opaque_code))
        many = len(opaque_lines) > 1
        stories.append(
            f"a parameter of {fn.name}(), whose call{'s' if many else ''} the file runs "
            f"(line{'s' if many else ''} {lines}) leave{'' if many else 's'} it to {spelled}, "
            f"whose contents tunebot does not read"
        )
    return "; or ".join(stories) if stories else None


def _local(
    resolver: Resolver, caller: Function, node: cst.BaseExpression, name: str, steps: int
) -> str | None:
    """`node`, the argument `caller` binds parameter `name` to: where its size is lost."""
    if not isinstance(node, cst.Name):
        return None
    theirs = node.value
    which = "" if theirs == name else f"bound to `{theirs}`, which is "
    if theirs in caller.params and theirs not in caller.assigns:
        inner = _param(resolver, caller, theirs, steps + 1)
        return None if inner is None else f"{which}{inner}"
    values = caller.assigns.get(theirs, [])
    if len(values) != 1:
        return None
    value = values[0]
    tensor = shape_source(value.value if isinstance(value, cst.Subscript) else value)
    if theirs not in caller.unpacked and not isinstance(value, cst.Subscript):
        return None
    if (
        not isinstance(tensor, cst.Name)
        or tensor.value not in caller.params
        or tensor.value in caller.assigns
    ):
        return None
    inner = _param(resolver, caller, tensor.value, steps + 1)
    if inner is None:
        return None
    how = "unpacked from" if theirs in caller.unpacked else "set to"
    return (
        f"{which}{how} `{code_of(value)}` in {caller.name}() (line "
        f"{resolver.f.line(value)}), and `{tensor.value}` is {inner}"
    )
