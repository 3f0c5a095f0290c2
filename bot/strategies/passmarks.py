"""A branch that marks one pass of a loop by number, in a loop whose pass count follows the knob.

Hand-synchronised kernels release a buffer slot or set a flag on a given pass of an inner loop:

    loop_kk = T.ceildiv(K_L1, block_K)        # 4 passes at block_K = 64
    for kk in T.serial(loop_kk):
        ...
        if kk == 3:                           # the last pass, written as a number
            T.set_flag("mte1", "mte2", k % S1)

The number is written for the pass count the current value gives. When the knob changes that
count, the branch fires on another pass than the last one (8 passes at 32: the slot is released
while passes 4-7 still read it) or never (2 passes at 128: the flag is never set and the next
wait hangs). So a value that changes the count is refused where the literal is the last pass
now, or would be past the last pass at the new value. `kk == 0` (the first pass, there at any
count) and comparisons with an expression of the count (`kk == loop_kk - 1`) make no rule, and
nothing is judged where the count cannot be read at both values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import kernels_of
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, int_value

COUNTED = frozenset({"serial", "Pipelined", "unroll", "range"})  # loops whose one arg is a count


@dataclass(frozen=True)
class _Mark:
    loop_line: int
    loop_text: str  # `for kk in T.serial(loop_kk)`
    count: cst.BaseExpression
    number: int  # the pass the branch names
    line: int  # of the branch
    test: str  # `kk == 3`


class _Marks(cst.CSTVisitor):
    """The numbered-pass branches of one prim_func, with the loop each names."""

    def __init__(self, f: Facts) -> None:
        self.f = f
        # (variable, count, line, text) of each enclosing loop; None for one not counted
        self.loops: list[tuple[str, cst.BaseExpression, int, str] | None] = []
        self.marks: list[_Mark] = []

    def visit_For(self, node: cst.For) -> None:
        count = _count(node.iter)
        if isinstance(node.target, cst.Name) and count is not None:
            text = f"for {node.target.value} in {code_of(node.iter)}"
            self.loops.append((node.target.value, count, self.f.line(node), text))
        else:
            self.loops.append(None)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()

    def visit_If(self, node: cst.If) -> None:
        test = node.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return
        if not isinstance(test.comparisons[0].operator, cst.Equal):
            return
        left, right = test.left, test.comparisons[0].comparator
        if isinstance(right, cst.Name) and int_value(left) is not None:
            left, right = right, left
        number = int_value(right)
        if not isinstance(left, cst.Name) or number is None or number <= 0:
            return
        for loop in reversed(self.loops):
            if loop is None:
                continue
            var, count, line, text = loop
            if var == left.value:
                self.marks.append(
                    _Mark(line, text, count, number, self.f.line(node), code_of(test))
                )
                return


def _count(it: cst.BaseExpression) -> cst.BaseExpression | None:
    """The pass count of `T.serial(n)`, `range(n)`, `T.Pipelined(n, num_stages=2)` (also with
    the stage count positional) or `T.serial(0, n)`; None for any other iterable."""
    if not isinstance(it, cst.Call) or dotted(it.func).rsplit(".", 1)[-1] not in COUNTED:
        return None
    args = [a for a in it.args if a.keyword is None]
    if not args or any(a.star for a in args):
        return None
    if len(args) == 1 or dotted(it.func).endswith("Pipelined"):
        return args[0].value
    if len(args) == 2 and int_value(args[0].value) == 0:
        return args[1].value  # `T.serial(0, n)`
    return None


def _passes(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


@dataclass
class PassMarkCheck:
    """Refuses a value that moves a loop's last pass away from the pass a branch names."""

    name: str
    kernels: list[tuple[tuple[Function, ...], list[_Mark]]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for chain, marks in self.kernels:
            for m in marks:
                now = evaluate(m.count, env(chain, current))
                new = evaluate(m.count, env(chain, value))
                if type(now) is not int or type(new) is not int or now == new:
                    continue
                if m.number == now - 1:
                    effect = (
                        "would never fire"
                        if m.number >= new
                        else f"would fire on pass {m.number + 1} of {new}, not the last"
                    )
                elif m.number >= new:
                    effect = "would never fire"
                else:
                    continue
                return (
                    f"{self.name}={value}: `{m.loop_text}` (line {m.loop_line}) would run "
                    f"{_passes(new)} instead of {now}, and the branch `if {m.test}:` (line "
                    f"{m.line}) names a pass by number"
                    + (
                        f", pass {m.number + 1}, the last one at the current {self.name}"
                        if m.number == now - 1
                        else ""
                    )
                    + f": it {effect}"
                )
        return None


def pass_mark_check(f: Facts, name: str, factories: list[Function]) -> PassMarkCheck | None:
    """The numbered-pass rule of knob `name` over `factories`' kernels."""
    kernels: list[tuple[tuple[Function, ...], list[_Mark]]] = []
    for _, fn in kernels_of(f, factories):
        v = _Marks(f)
        fn.node.visit(v)
        if v.marks:
            kernels.append((fn.chain, v.marks))
    return PassMarkCheck(name, kernels) if kernels else None
