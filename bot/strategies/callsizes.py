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

from bot.strategies.binding import Resolver
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function

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
    for call in f.calls:
        if not resolver.calls(call, fn):
            continue
        known: dict[str, int] = {}
        passed: dict[str, str] = {}  # our parameter -> the caller's parameter it is bound to
        caller = call.scope[-1] if call.scope else None
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
        if passed and caller is not None:
            upper = _paths(f, resolver, caller, set(passed.values()), depth + 1)
            for env in upper or [{}]:
                full = dict(known)
                full.update({ours: env[theirs] for ours, theirs in passed.items() if theirs in env})
                paths.append(full)
        else:
            paths.append(known)
    return [p for p in paths if all(v > 0 for v in p.values())]


def _param_name(node: cst.BaseExpression, caller: Function) -> str | None:
    """The caller's own parameter `node` is (not reassigned in the caller), else None."""
    if (
        isinstance(node, cst.Name)
        and node.value in caller.params
        and node.value not in caller.assigns
    ):
        return node.value
    return None
