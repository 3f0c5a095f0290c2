"""The keywords a `**d` argument passes, one set per way the file runs the call.

Test drivers often hand a kernel's host function its inputs as a dict: `sparse_attn(**inputs)`
with `inputs = make_inputs(**kwargs)`, `kwargs = case["params"]` and `for case in TEST_CASES`
walking a module list of dict literals, `make_inputs` returning `{"q": q, ...}` with
`q = torch.randn((batch, seq, heads, dim))`. The sizes the kernel runs with (dim = 512) are
then in the file, only behind the splat. `keywords(node, env)` follows `**node` to the dicts
the file spells out and returns, for each, keyword -> (value node, the Env to read it in):

- a dict literal (`{"M": 1024}`, `dict(M=1024)`), directly or through a name assigned once
  and never changed after (bot/strategies/containers.py);
- a dict a `for` loop binds from a list of dict literals the file spells out: one set per
  entry (every entry is a pass the op runs), and an entry's string key (`case["params"]`);
- the dict a module helper returns (`return {"q": q, ...}`, its one `return`), read with the
  helper's parameters bound to what the call passes (itself possibly a `**kwargs` of the kinds
  above: one set per entry again);
- the `**kw` parameter of the function the call is in (`def run(**kw): kernel(**kw)`): the
  keywords each call of that function on the run path passes and its named parameters do not
  take.

Anything else (a parameter's dict, a dict changed after it is written, a helper with several
returns) is not spelled out: None, and the sizes stay unknown as before.
"""

from __future__ import annotations

import itertools

import libcst as cst

from bot.strategies import callsites
from bot.strategies.containers import dict_items, element
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Function, Loop
from bot.strategies.signature import takes

Keywords = dict[str, tuple[cst.BaseExpression, Env]]
MAX_DEPTH = 8  # names, helpers and callers followed
MAX_SETS = 64  # keyword sets kept per splat


def keywords(node: cst.BaseExpression, env: Env, depth: int = 0) -> list[Keywords] | None:
    """One keyword set per way the file runs `**node` in `env`, or None when the dict is not
    spelled out."""
    if depth > MAX_DEPTH:
        return None
    found = _keywords(node, env, depth)
    return None if found is None else found[:MAX_SETS]


def call_keywords(call: cst.Call, env: Env, depth: int = 0) -> list[Keywords] | None:
    """The keywords the `**` arguments of `call` pass, one set per way the file runs it; [{}]
    without any; None when one is not spelled out, or when several splats each have several
    sets (which pass goes with which is not known)."""
    sets: list[Keywords] = [{}]
    for arg in call.args:
        if arg.star != "**":
            continue
        found = keywords(arg.value, env, depth)
        if found is None or (len(found) > 1 and len(sets) > 1):
            return None
        sets = [{**a, **b} for a, b in itertools.product(sets, found)]
    return sets


def _keywords(node: cst.BaseExpression, env: Env, depth: int) -> list[Keywords] | None:
    resolver = env.resolver
    items = dict_items(node)
    if items is not None:
        return [{k: (v, env) for k, v in items.items()}]
    if isinstance(node, cst.Name):
        return _name(node.value, env, depth)
    if isinstance(node, cst.Subscript):  # `case["params"]`: that entry of each dict
        key = _key(node)
        outer = keywords(node.value, env, depth + 1) if key is not None else None
        if outer is None:
            return None
        out: list[Keywords] = []
        for kw in outer:
            if key not in kw:
                return None
            inner = keywords(kw[key][0], kw[key][1], depth + 1)
            if inner is None:
                return None
            out.extend(inner)
        return out
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
        fns = [fn for fn in resolver.by_name.get(node.func.value, []) if not fn.parents]
        if len(fns) != 1 or any(
            takes(fn, node.func.value) or node.func.value in fn.assigns for fn in env.chain
        ):
            return None
        return _returned(fns[0], node, env, depth)
    return None


def _key(sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    index = sub.slice[0].slice.value
    value = index.evaluated_value if isinstance(index, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def _name(var: str, env: Env, depth: int) -> list[Keywords] | None:
    resolver = env.resolver
    spelled = resolver.spelled
    if spelled.changed(var, env.chain) is not None:
        return None  # `d["M"] = 2048`, `d.update(...)`: not the dict as written
    for i in range(len(env.chain) - 1, -1, -1):
        fn = env.chain[i]
        here = _at(env, fn.chain)
        if var in fn.assigns:
            values = fn.assigns[var]
            if len(values) != 1 or var in fn.unpacked:
                return None
            return keywords(values[0], here, depth + 1)
        if takes(fn, var):
            star = fn.node.params.star_kwarg
            if isinstance(star, cst.Param) and star.name.value == var:
                return _forwarded(fn, env, depth)
            return None
        if var in fn.loop_targets:
            return _entries(var, fn.loop_targets[var], here, depth)
    f = resolver.f
    module = _at(env, ())
    written = f.module_assigns.get(var)
    if written:
        if len(written) != 1 or var in f.module_unpacked:
            return None
        return keywords(written[0], module, depth + 1)
    if var in f.module_loops:
        return _entries(var, f.module_loops[var], module, depth)
    return None


def _at(env: Env, chain: tuple[Function, ...]) -> Env:
    return Env(env.resolver, chain, env.depth + 1, env.overrides, env.tensors)


def _entries(var: str, loop: Loop, env: Env, depth: int) -> list[Keywords] | None:
    """`for case in CASES`: one keyword set per entry of the list the file spells out."""
    entries = env.resolver.spelled.entries(loop, env.chain)
    if not entries:
        return None
    out: list[Keywords] = []
    for entry in entries:
        part = element(loop.target, entry, var)
        found = keywords(part, env, depth + 1) if part is not None else None
        if found is None:
            return None
        out.extend(found)
    return out


def _returned(fn: Function, call: cst.Call, env: Env, depth: int) -> list[Keywords] | None:
    """The dict a module helper returns, per binding of its parameters by `call`."""
    from bot.strategies.tensorshapes import _returns, shape_of, size_of

    returns = _returns(fn.node)
    if len(returns) != 1:
        return None
    passed = call_keywords(call, env, depth + 1)
    if passed is None:
        return None
    given: dict[str, tuple[cst.BaseExpression, Env]] = {}
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if any(a.star == "*" for a in call.args) or len(positional) > len(fn.params):
        return None
    given.update({p: (v, env) for p, v in zip(fn.params, positional, strict=False)})
    given.update({a.keyword.value: (a.value, env) for a in call.args if a.keyword is not None})
    out: list[Keywords] = []
    for kw in passed:
        ints: dict[str, int] = {}
        tensors: dict[str, tuple[int | None, ...]] = {}
        for p, (value, at) in {**kw, **given}.items():
            size = size_of(value, at)
            if size is not None:
                ints[p] = size
                continue
            shape = shape_of(value, at)
            if shape is not None:
                tensors[p] = shape
        for p, default in fn.defaults.items():  # what the call leaves to its defaults
            if p not in ints and p not in tensors and p not in kw and p not in given:
                fixed = evaluate(default, Env(env.resolver, fn.parents, env.depth + 1))
                if isinstance(fixed, int):
                    ints[p] = fixed
        inner = Env(env.resolver, fn.chain, env.depth + 1, ints, tensors)
        found = keywords(returns[0], inner, depth + 1)
        if found is None:
            return None
        out.extend(found)
    return out


def _forwarded(fn: Function, env: Env, depth: int) -> list[Keywords] | None:
    """`def run(**kw): kernel(**kw)`: the keywords each call of `run` on the run path passes
    beyond `run`'s own named parameters."""
    resolver = env.resolver
    runs = callsites.reached(resolver.f, resolver.harness)
    out: list[Keywords] = []
    for call in resolver.f.calls:
        if not resolver.calls(call, fn) or (runs is not None and id(call.node) not in runs):
            continue
        at = Env(resolver, call.scope, env.depth + 1)
        passed = call_keywords(call.node, at, depth + 1)
        if passed is None:
            return None
        own = {a.keyword.value: (a.value, at) for a in call.node.args if a.keyword is not None}
        for kw in passed:
            merged = {**kw, **own}
            out.append({k: v for k, v in merged.items() if not _named(fn, k)})
    return out or None


def _named(fn: Function, name: str) -> bool:
    p = fn.node.params
    return any(x.name.value == name for x in (*p.posonly_params, *p.params, *p.kwonly_params))
