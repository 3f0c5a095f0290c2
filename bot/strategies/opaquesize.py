"""Buffer sizes a knob changes through a computation tunebot cannot follow.

`range_h = build_height_block_info(H_in, H_out, block_H, ...)[-1]` computes a buffer's row
count on the host from the block (tile-ai/tilelang-ascend cann-bench resize_bilinear: the
source rows one block of output rows reads). The capacity rule counts a dim it cannot compute
as 1, a lower bound that holds for any value of a knob the dim does not depend on; one computed
from the knob by a call may grow with it without bound, so a larger value's bytes are unknown.
`through_call` says whether a dim is such a one: it reads the knob, following names to their
assignments and parameters to what their calls pass, and the knob's value passes through a call
on the way (arithmetic on the knob itself, `T.ceildiv(seq, block_N)`, is not: the capacity rule
bounds it as it is).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from bot.strategies.evaluate import Env
from bot.strategies.facts import Function, reads_of
from bot.strategies.signature import takes
from bot.strategies.source import dotted

MAX_DEPTH = 8
# calls whose result is plain arithmetic on their arguments, which the capacity rule reads
ARITHMETIC = {
    *("T.ceildiv", "ceildiv", "min", "max", "T.min", "T.max", "int", "float", "abs", "round"),
    *("len", "range", "sum", "pow", "divmod"),
}
PURE_MODULES = {"math", "np", "numpy", "T", "tl", "tilelang", "operator"}


def through_call(node: cst.BaseExpression, env: Env, knob: str) -> bool:
    """Whether `node` (read in `env.chain`) takes its value from `knob` through a call other
    than plain arithmetic."""
    return _Walk(env, knob.rsplit(".", 1)[-1]).opaque(node, env.chain, 0)


def reads_knob(node: cst.BaseExpression, chain: tuple[Function, ...], env: Env, knob: str) -> bool:
    """Whether `node` (read in `chain`) takes its value from `knob` in any way."""
    return _Walk(env, knob.rsplit(".", 1)[-1]).reaches(node, chain, 0)


class _Walk:
    def __init__(self, env: Env, knob: str) -> None:
        self.env = env
        self.knob = knob
        self.seen: set[tuple[int, int, str]] = set()  # (node, scope, test) already followed

    def reaches(self, node: cst.BaseExpression, chain: tuple[Function, ...], depth: int) -> bool:
        """Whether `node` reads the knob, directly or through the names it reads."""
        return any(self._name(n, chain, depth, "reaches") for n in reads_of(node))

    def opaque(self, node: cst.BaseExpression, chain: tuple[Function, ...], depth: int) -> bool:
        """Whether `node` reads the knob through a call that is not plain arithmetic."""
        for call in _calls(node):
            if self._pure(call):
                continue
            if any(self.reaches(a.value, chain, depth) for a in call.args):
                return True
        return any(self._name(n, chain, depth, "opaque") for n in reads_of(node))

    def _pure(self, call: cst.Call) -> bool:
        """A call whose result is arithmetic on its arguments: a numeric builtin, `math.` /
        `numpy` / TileLang helpers, or a function of the file that calls nothing else."""
        func = dotted(call.func)
        if func in ARITHMETIC or func.split(".", 1)[0] in PURE_MODULES:
            return True
        defined = [g for g in self.env.resolver.f.functions if g.name == func]
        return len(defined) == 1 and all(
            dotted(c.func) in ARITHMETIC or dotted(c.func).split(".", 1)[0] in PURE_MODULES
            for c in _calls(defined[0].node.body)
        )

    def _name(self, name: str, chain: tuple[Function, ...], depth: int, test: str) -> bool:
        """`test` over what `name` stands for in `chain`: its assignments in the scope that
        binds it, or what the calls of the function that takes it pass."""
        if test == "reaches" and name == self.knob:
            return True
        if depth > MAX_DEPTH:
            return False
        for fn in reversed(chain):
            if name in fn.assigns:
                return any(self._once(v, fn.chain, depth, test) for v in fn.assigns[name])
            if takes(fn, name):
                for passed, scope in self.env.resolver.arguments(fn, name):
                    if self._once(passed, scope, depth, test):
                        return True
                default = fn.defaults.get(name)
                return default is not None and self._once(default, fn.parents, depth, test)
        values = self.env.resolver.f.module_assigns.get(name, [])
        return any(self._once(v, (), depth, test) for v in values)

    def _once(
        self, node: cst.BaseExpression, chain: tuple[Function, ...], depth: int, test: str
    ) -> bool:
        key = (id(node), id(chain[-1].node) if chain else 0, test)
        if key in self.seen:
            return False
        self.seen.add(key)
        walk = self.reaches if test == "reaches" else self.opaque
        return walk(node, chain, depth + 1)


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    """Every call inside `node`, nested ones included."""
    return [n for n in m.findall(node, m.Call()) if isinstance(n, cst.Call)]
