"""Whether an extent is a multiple of the knob by construction.

A caller often pads a size up to a whole number of blocks before it builds the kernel:
`M_pad = ((M + block_M - 1) // block_M) * block_M` (or `T.ceildiv(M, block_M) * block_M`),
then `matmul(M_pad, ..., block_M, ...)`. Inside the factory `M // block_M` then always
has full tiles, whatever block_M is, because the padding uses the same block. `multiple_of`
follows the extent through local assignments and, for a parameter, through every call
that binds it (mapping the knob to what that call passes for it): the extent is a multiple
of the knob when it is a product with the knob as a factor, on every path.

The padding is recognised by what it computes, not by how it is spelled: an expression
over the knob and other sizes (`M + (block_M - M % block_M) % block_M`, `-(-M // block_M) *
block_M`), or a call of a helper of the file that returns one
(`next_divisible_number(top_k, block)`), is a multiple of the knob when it evaluates to one
for every size and knob value of a sample grid (0 ... 70 against 1 ... 24 and powers of two;
0 tries a size read as a condition false: a round-up on one side of an `if` is none).
A name the host assigns more than once is followed in statement order up to its use:
`n = x.shape[-1]` then `if padded != n: n = padded` leaves n a multiple (when the `if` is not
taken, n already equals padded), as does `if n % block != 0: n = ...multiple...`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from bot.strategies.binding import Resolver
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Function, contains, names_in
from bot.strategies.source import dotted, one_assignment

MAX_DEPTH = 6
# the sizes and knob values a padding expression is tried with: a multiple for all of them
SIZES = tuple(range(1, 71))
BLOCKS = (*range(1, 25), 32, 64, 128, 256)


def multiple_of(
    resolver: Resolver,
    node: cst.BaseExpression,
    chain: tuple[Function, ...],
    knob: frozenset[str],
    depth: int = 0,
) -> bool:
    """`node`, read in `chain`, is always a multiple of the knob (`knob`: how the knob is
    spelled in that scope)."""
    if depth > MAX_DEPTH:
        return False
    if (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.Multiply)
        and (
            code_of(node.left) in knob
            or code_of(node.right) in knob
            or multiple_of(resolver, node.left, chain, knob, depth + 1)
            or multiple_of(resolver, node.right, chain, knob, depth + 1)
        )
    ):
        return True
    if not isinstance(node, cst.Name):
        return _rounds_up(resolver, node, chain, knob)
    name = node.value
    for i in range(len(chain) - 1, -1, -1):
        fn = chain[i]
        if name in fn.assigns:
            values = fn.assigns[name]
            if len(values) == 1:
                return multiple_of(resolver, values[0], chain[: i + 1], knob, depth + 1)
            if i != len(chain) - 1:
                return False  # read in a nested function: which assignment it sees is not told
            return _in_order(resolver, node, chain, knob, depth)
        if name in fn.params:
            return _through_calls(resolver, fn, name, knob, depth)
    return False


def _assigns(stmt: cst.CSTNode, name: str) -> bool:
    """Whether `stmt` binds `name` anywhere inside (assignment, loop target, with ... as)."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            found = found or n.value == name

        def visit_Arg(self, n: cst.Arg) -> bool:
            return False

        def visit_Call(self, n: cst.Call) -> bool:
            return False

        def visit_Subscript(self, n: cst.Subscript) -> bool:
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            return False

    targets: list[cst.CSTNode] = []

    class T(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            targets.append(n.target)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            targets.append(n.target)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            targets.append(n.target)

        def visit_For(self, n: cst.For) -> None:
            targets.append(n.target)

        def visit_AsName(self, n: cst.AsName) -> None:
            targets.append(n.name)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

    stmt.visit(T())
    for t in targets:
        t.visit(V())
    return found


def _in_order(
    resolver: Resolver,
    use: cst.Name,
    chain: tuple[Function, ...],
    knob: frozenset[str],
    depth: int,
) -> bool:
    """`use`, a name its function assigns more than once, is a multiple of the knob where it
    is read: followed through the statements of the function before the one that reads it."""
    fn = chain[-1]
    name = use.value
    flow = _Flow(resolver, chain, knob, depth, name)
    state = fn.params.count(name) > 0 and _through_calls(resolver, fn, name, knob, depth)
    for stmt in fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ():
        if contains(stmt, use):
            return state and not _assigns(stmt, name)
        state = flow.after(stmt, state)
    return False


@dataclass(frozen=True)
class _Flow:
    """Whether `name` is a multiple of the knob, followed statement by statement through a
    function of `chain` (the knob spelled `knob` there)."""

    resolver: Resolver
    chain: tuple[Function, ...]
    knob: frozenset[str]
    depth: int
    name: str

    def multiple(self, node: cst.BaseExpression) -> bool:
        return multiple_of(self.resolver, node, self.chain, self.knob, self.depth + 1)

    def after(self, stmt: cst.BaseStatement, state: bool) -> bool:
        """Whether `name` is a multiple after `stmt`, given `state` before it."""
        if not _assigns(stmt, self.name):
            return state
        if isinstance(stmt, cst.SimpleStatementLine):
            return self.smalls(stmt.body, state)
        if isinstance(stmt, cst.If):
            body = self.block(stmt.body, state)
            if stmt.orelse is None:
                # not taken: `if padded != n` leaves n equal to padded, `if n % knob != 0` a
                # multiple
                other = state or self.settles(stmt.test)
            elif isinstance(stmt.orelse, cst.If):
                other = self.after(stmt.orelse, state)
            else:
                other = self.block(stmt.orelse.body, state)
            return body and other
        if isinstance(stmt, cst.With):
            return self.block(stmt.body, state)
        return False  # a loop, try or def that rebinds it: not followed

    def smalls(self, smalls: Sequence[cst.BaseSmallStatement], state: bool) -> bool:
        for small in smalls:
            pair = one_assignment(small)
            if pair is not None and isinstance(pair[0], cst.Name) and pair[0].value == self.name:
                state = self.multiple(pair[1])
            elif _assigns(small, self.name):
                state = False
        return state

    def block(self, block: cst.BaseSuite, state: bool) -> bool:
        if isinstance(block, cst.SimpleStatementSuite):
            return self.smalls(block.body, state)
        assert isinstance(block, cst.IndentedBlock)
        for stmt in block.body:
            state = self.after(stmt, state)
        return state

    def settles(self, test: cst.BaseExpression) -> bool:
        """Whether `test` being false makes `name` a multiple of the knob: `name != P` or
        `P != name` with P a multiple, or `name % knob != 0` (also `name % knob` alone)."""
        if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo):
            return code_of(test.left) == self.name and code_of(test.right) in self.knob
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        target = test.comparisons[0]
        if not isinstance(target.operator, cst.NotEqual):
            return False
        left, right = test.left, target.comparator
        if isinstance(right, cst.Integer) and right.value == "0":
            return self.settles(left)
        if code_of(left) == self.name:
            return self.multiple(right)
        if code_of(right) == self.name:
            return self.multiple(left)
        return False


def _rounds_up(
    resolver: Resolver, node: cst.BaseExpression, chain: tuple[Function, ...], knob: frozenset[str]
) -> bool:
    """An expression over the knob and other sizes (or a call of a helper of the file that
    returns one) that evaluates to a multiple of the knob on the whole sample grid. Each part
    that does not read the knob (`M`, `x.shape[0]`, `M - 1`) is tried as a size of its own:
    parts that are tied to each other only take fewer combinations."""
    if isinstance(node, cst.Call) and dotted(node.func) not in _CEIL:
        spelled = next((k for k in knob if any(code_of(a.value) == k for a in node.args)), None)
        helper = _helper(resolver, node, spelled) if spelled is not None else None
        if helper is None:
            return False
        node, spelled = helper
    else:
        spelled = next((k for k in knob if k in names_in(node)), None)
    if spelled is None:
        return False
    leaves = _leaves(node, spelled)
    if leaves is None:
        return False
    free = sorted(leaves - {spelled})
    if len(free) > 2:
        return False  # too many sizes to try every combination of
    try:
        for block in BLOCKS:
            for sizes in _grid(len(free)):
                env = dict(zip(free, sizes, strict=True)) | {spelled: block}
                value = _eval(node, env)
                if type(value) is not int or value % block != 0:
                    return False
    except (ArithmeticError, KeyError, TypeError, ValueError):
        return False
    return True


def _grid(n: int) -> list[tuple[int, ...]]:
    """Values for the free parts; 0 among them, so a part read as a condition (`... if pad
    else M`, `... if M > 4096 else M`) is tried false too: a round-up on one side only is no
    whole-tile guarantee."""
    if n == 0:
        return [()]
    if n == 1:
        return [(x,) for x in (0, *SIZES)]
    few = (0, *SIZES[::3])
    return [(x, y) for x in few for y in few]


def _leaves(node: cst.BaseExpression, knob: str) -> set[str] | None:
    """The knob and the largest parts that do not read it, as `_eval` reads them; None when
    the expression holds something `_eval` cannot compute."""
    if isinstance(node, cst.Integer):
        return set()
    if knob not in names_in(node):
        return {code_of(node)}
    if isinstance(node, cst.Name):
        return {knob}
    parts: list[cst.BaseExpression]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        parts = [node.expression]
    elif isinstance(node, cst.BinaryOperation):
        parts = [node.left, node.right]
    elif isinstance(node, cst.IfExp):
        parts = [node.test, node.body, node.orelse]
    elif isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        parts = [node.left, node.comparisons[0].comparator]
    elif isinstance(node, cst.Call) and dotted(node.func) in _CEIL and len(node.args) == 2:
        parts = [a.value for a in node.args]
    else:
        return None
    out: set[str] = set()
    for part in parts:
        found = _leaves(part, knob)
        if found is None:
            return None
        out |= found
    return out


def _helper(resolver: Resolver, call: cst.Call, knob: str) -> tuple[cst.BaseExpression, str] | None:
    """The expression a helper of the file returns, with the name of the parameter the call
    passes the knob to: `next_divisible_number(top_k, block)` -> (its return, `divisor`)."""
    if not isinstance(call.func, cst.Name) or any(a.star for a in call.args):
        return None
    found = resolver.by_name.get(call.func.value, [])
    if len(found) != 1:
        return None
    fn = found[0]
    body = fn.node.body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
        return None
    stmt = body.body[0]
    if not (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Return)
        and stmt.body[0].value is not None
    ):
        return None
    passed = next(
        (
            fn.params[i] if a.keyword is None else a.keyword.value
            for i, a in enumerate(call.args)
            if code_of(a.value) == knob and (a.keyword is not None or i < len(fn.params))
        ),
        None,
    )
    if passed is None:
        return None
    return stmt.body[0].value, passed


_CEIL = ("T.ceildiv", "ceildiv", "tl.cdiv", "triton.cdiv", "cdiv")


def _eval(node: cst.BaseExpression, env: dict[str, int]) -> int | bool:
    """Integer arithmetic of a padding expression over the parts `_leaves` names."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if code_of(node) in env:
        return env[code_of(node)]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return -_eval(node.expression, env)
    if isinstance(node, cst.IfExp):
        return _eval(node.body if _eval(node.test, env) else node.orelse, env)
    if isinstance(node, cst.BinaryOperation):
        a, b = _eval(node.left, env), _eval(node.right, env)
        ops = {
            cst.Add: lambda: a + b,
            cst.Subtract: lambda: a - b,
            cst.Multiply: lambda: a * b,
            cst.FloorDivide: lambda: a // b,
            cst.Modulo: lambda: a % b,
        }
        op = ops.get(type(node.operator))
        if op is None:
            raise ValueError(code_of(node))
        return op()
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        a, b = _eval(node.left, env), _eval(node.comparisons[0].comparator, env)
        cmp = {
            cst.Equal: lambda: a == b,
            cst.NotEqual: lambda: a != b,
            cst.LessThan: lambda: a < b,
            cst.GreaterThan: lambda: a > b,
            cst.LessThanEqual: lambda: a <= b,
            cst.GreaterThanEqual: lambda: a >= b,
        }
        op = cmp.get(type(node.comparisons[0].operator))
        if op is None:
            raise ValueError(code_of(node))
        return op()
    if isinstance(node, cst.Call) and dotted(node.func) in _CEIL and len(node.args) == 2:
        a, b = _eval(node.args[0].value, env), _eval(node.args[1].value, env)
        return -(-a // b)
    raise ValueError(code_of(node))


def _through_calls(
    resolver: Resolver, fn: Function, name: str, knob: frozenset[str], depth: int
) -> bool:
    """Every call of `fn` binds parameter `name` to a multiple of what it passes as the knob."""
    passes = [k for k in knob if k in fn.params]
    if not passes:
        return False
    seen = False
    for call in resolver.f.calls:
        if not resolver.calls(call, fn):
            continue
        bound = resolver.bound_by(call, fn, name)
        knobs = [resolver.bound_by(call, fn, k) for k in passes]
        spelled = frozenset(  # a name: a literal here is not the knob's site, and would stay
            code_of(b[0]) for b in knobs if b is not None and isinstance(b[0], cst.Name)
        )
        if bound is None or bound[1] == "opaque" or not spelled:
            return False
        if not multiple_of(resolver, bound[0], call.scope, spelled, depth + 1):
            return False
        seen = True
    return seen
