"""Rules read from a kernel factory's own expressions, for one knob and its aliases.

`Rules` walks the factory and collects (bot/strategies/constraints.py checks them):

- `assert` tests that read the knob, and `if cond: raise ...` checks (an assert
  of the opposite);
- `X // knob` (full tiles of X), `X // (c * knob)` (full tiles of c knobs: the knob
  divides X // c), `knob // P` (the knob split into P parts);
- `X % knob` only inside an assert or a raising check: a remainder computed
  anywhere else sizes the partial tile the kernel handles;
- `T.ceildiv(X, knob)` (or `(X + knob - 1) // knob`), full tiles unless a tail is
  handled (`T.min(knob, ...)`, slice copies the compiler clips, or accesses under an
  `if` that keeps the knob's offset below a bound, `if row_idx < M:`, with no other
  element index computed from the knob).

A module helper that only returns an expression (`def grid(M, N, bm, bn): return
T.ceildiv(M, bm), T.ceildiv(N, bn), bm // 2`), called with the knob, is read as its return
expression with the call's arguments in place of its parameters, at the line of the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from bot.strategies.branches import IfForm, as_if
from bot.strategies.evaluate import CEILDIV, code_of
from bot.strategies.evaluate import returned as evaluate_returned
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted
from bot.strategies.tiling import Rule, _names

# the side `test` takes on every path the file runs the kernel by (None: not one side)
Taken = Callable[[cst.BaseExpression, tuple[Function, ...]], bool | None]


class Rules(cst.CSTVisitor):
    def __init__(
        self,
        f: Facts,
        aliases: set[str],
        base: tuple[Function, ...],
        within: Function | None = None,
        taken: Taken | None = None,
    ) -> None:
        self.f, self.aliases = f, aliases
        self.by_node = {id(fn.node): fn for fn in f.functions}
        self.stack: list[Function] = list(base)
        self.rules: list[Rule] = []
        self.ceil: list[Rule] = []
        # `T.ceildiv(knob, X)` walking the knob in whole parts of X: a multiple of X unless
        # clipped (walks_whole_parts: a count that only sizes threads or buffers asks nothing)
        self.tiled: list[Rule] = []
        self.tails = False
        self.iterators = _iterators(f)
        # the names computed from the knob in `within` (the function that holds it), the
        # functions around it and those inside it: a same-named local elsewhere is another name
        scope = [
            fn for fn in f.functions if within is None or within in fn.chain or fn in within.chain
        ]
        self.sized = sized_by(f, aliases, within=scope)
        self.offsets = sized_by(f, aliases, _offset_names, scope)
        self.sliced = self.indexed = self.guarded = False
        # copies that move a whole knob-sized tile (a knob-sized buffer, or `size=[1, knob]`)
        # to or from a point at an offset from the knob (`T.copy(Idx[b, k * block], idxs)`):
        # (line, the loop variables the offset is computed from)
        self.full_copies: list[tuple[int, set[str]]] = []
        # id of a `ceil` rule -> the variables of the loops whose trip count it is
        self.ceil_loops: dict[int, set[str]] = {}
        self._counted: list[tuple[set[str], Rule]] = []  # (names it is assigned to, rule)
        self._assigning: set[str] = set()
        # a local bound to one of several parts of the knob -> the number of parts
        # (`sub_block_M = block_M // vec_num`: sub_block_M -> vec_num)
        self.parts: dict[str, tuple[cst.BaseExpression, str]] = {}
        self._iters: list[set[str]] = []  # the variables of loops whose iter is being visited
        self.guards: list[cst.Comparison] = []  # the `if` tests bounding a knob offset around
        # a guard read from a remaining-extent test -> the offset terms and lane it bounds
        self.moved: dict[int, tuple[list[str], set[str]]] = {}
        self.checking = 0  # inside an assert's or a raising check's condition
        self.loops: list[set[str]] = []  # the names each enclosing for loop binds
        self.taken = taken  # the side a condition takes on the run path (branches.py)
        self._inlined_at = 0  # the line of the helper call whose return is being read
        self._helpers = {fn.name: fn for fn in f.functions if not fn.parents and not fn.prim_funcs}

    def _line(self, node: cst.CSTNode) -> int:
        """The source line of `node`; for a helper's return read at its call, that call's."""
        if self._inlined_at:
            return self._inlined_at
        return self.f.line(node)

    def _inline(self, node: cst.Call) -> None:
        """Read a module helper's returned expression at a call that passes it the knob."""
        if self._inlined_at or not isinstance(node.func, cst.Name):
            return
        fn = self._helpers.get(node.func.value)
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if fn is None or len(args) != len(node.args) or not any(map(self._is_knob, args)):
            return
        returned = evaluate_returned(fn.node)
        if returned is None or len(args) > len(fn.params):
            return
        bound: dict[str, cst.BaseExpression] = dict(zip(fn.params, args, strict=False))
        for p in fn.params[len(args) :]:  # the parameters the call leaves at their defaults
            if p not in fn.defaults:
                return  # the call raises TypeError: nothing to read
            bound[p] = fn.defaults[p]
        # a name the helper reads besides its parameters must be the module's, as the
        # caller's scope may bind the same name to something else
        free = _free_names(returned)
        if free is None or any(
            n not in bound and n not in self.f.module_assigns and n not in _MODULES for n in free
        ):
            return
        inlined = returned.visit(_Substitute(bound))
        if not isinstance(inlined, cst.BaseExpression):
            return
        self._inlined_at = self.f.line(node)
        try:
            inlined.visit(self)
        finally:
            self._inlined_at = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        fn = self.by_node.get(id(node))
        if fn is not None and (not self.stack or self.stack[-1] is not fn):
            self.stack.append(fn)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.stack and self.stack[-1].node is original_node and len(self.stack) > 1:
            self.stack.pop()

    def _is_knob(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and node.value in self.aliases

    def _rule(self, kind: str, node: cst.BaseExpression, whole: cst.CSTNode) -> Rule:
        text = cst.Module([]).code_for_node(whole)
        return Rule(kind, node, tuple(self.stack), self._line(whole), " ".join(text.split()))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        left = node.left
        x = _rounded_up(node, self._is_knob)
        if x is not None:  # `(X + knob - 1) // knob`: a ceildiv spelled out
            self.ceil.append(self._rule("ceil", x, node))
            return
        if (
            isinstance(node.operator, cst.FloorDivide)
            and self._is_knob(left)
            and isinstance(node.right, (cst.Name, cst.Integer))
            and not self._is_knob(node.right)
        ):  # `block_M // VEC_NUM`: the knob is split into VEC_NUM parts
            self.rules.append(self._rule("multiple", node.right, node))
        if (
            isinstance(node.operator, cst.FloorDivide)
            and isinstance(left, cst.Name)
            and left.value in self.parts
            and isinstance(node.right, (cst.Name, cst.Integer))
            and not self._is_knob(node.right)
        ):  # `sub_block_M // row_factor` with sub_block_M = block_M // vec_num: parts of both
            parts, spelled = self.parts[left.value]
            whole = cst.BinaryOperation(left=parts, operator=cst.Multiply(), right=node.right)
            rule = self._rule("multiple", whole, node)
            self.rules.append(replace(rule, why=f"with `{left.value} = {spelled}`"))
        if (
            (
                isinstance(node.operator, cst.FloorDivide)
                or (isinstance(node.operator, cst.Modulo) and self.checking)
            )
            and self._is_knob(node.right)
            and isinstance(left, (cst.Name, cst.Integer, cst.Attribute))
            and not (isinstance(left, cst.Name) and left.value in self.iterators)
        ):
            self.rules.append(self._rule("exact", node.left, node))
        scaled = _scaled_knob(node.right, self._is_knob)
        if (
            isinstance(node.operator, cst.FloorDivide)
            and scaled is not None
            and isinstance(left, (cst.Name, cst.Integer, cst.Attribute))
            and not (isinstance(left, cst.Name) and left.value in self.iterators)
        ):  # `M // (2 * block_M)`: full tiles of 2 * block_M, so block_M divides M // 2
            part = cst.BinaryOperation(left=left, operator=cst.FloorDivide(), right=scaled)
            self.rules.append(self._rule("exact", part, node))

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        short = name.rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        self._inline(node)
        if short in CEILDIV and len(args) == 2 and self._is_knob(args[1]):
            rule = self._rule("ceil", args[0], node)
            self.ceil.append(rule)
            if self._iters:  # the trip count of the loop whose iter it sits in
                self.ceil_loops.setdefault(id(rule), set()).update(self._iters[-1])
            if self._assigning:  # `n = T.ceildiv(X, knob)`: a loop over `n` may come later
                self._counted.append((set(self._assigning), rule))
        elif short in CEILDIV and len(args) == 2 and self._is_knob(args[0]):
            root = self.stack[-1].node if self.stack else None
            if root is not None and walks_whole_parts(root, node):
                self.tiled.append(self._rule("multiple", args[1], node))
        elif short == "min" and any(self._is_knob(a) for a in args):
            self.tails = True
        elif short == "copy" and len(args) >= 2:
            self._full_copy(node, args)

    def _full_copy(self, node: cst.Call, args: list[cst.BaseExpression]) -> None:
        size = next(
            (a.value for a in node.args if a.keyword is not None and a.keyword.value == "size"),
            args[2] if len(args) > 2 else None,
        )
        bound = set().union(*self.loops) if self.loops else set()
        for point, whole in ((args[0], args[1]), (args[1], args[0])):
            offset = self._offset_names(point)
            if not offset:
                continue
            full = (size is None and self._knob_sized(whole)) or (
                isinstance(size, (cst.List, cst.Tuple))
                and any(self._is_knob(e.value) for e in size.elements)
            )
            if full:
                self.full_copies.append((self._line(node), self._sources(offset) & bound))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assigning = {n for t in node.targets for n in _names(t.target)}
        value = node.value
        for name in self._assigning:  # bound again: no longer that part of the knob
            self.parts.pop(name, None)
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.FloorDivide)
            and self._is_knob(value.left)
            and isinstance(value.right, (cst.Name, cst.Integer))
            and not self._is_knob(value.right)
        ):  # `sub_block_M = block_M // vec_num`: one of vec_num parts of the knob
            self.parts[node.targets[0].target.value] = (value.right, code_of(value))

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._assigning = set()

    def visit_For(self, node: cst.For) -> None:
        targets = _names(node.target)
        self.loops.append(targets)
        counts = self._sources(_names(node.iter))
        for names, rule in self._counted:  # `for i in T.serial(n)` over `n = T.ceildiv(...)`
            if names & counts:
                self.ceil_loops.setdefault(id(rule), set()).update(targets)

    def visit_For_iter(self, node: cst.For) -> None:
        self._iters.append(_names(node.target))

    def leave_For_iter(self, node: cst.For) -> None:
        self._iters.pop()

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()

    def _offset_names(self, node: cst.BaseExpression) -> set[str]:
        """The names placing `T[b, k * block]`, a point of a tensor at an offset from the knob."""
        if not isinstance(node, cst.Subscript):
            return set()
        out: set[str] = set()
        for e in node.slice:
            if isinstance(e.slice, cst.Index) and self._live(e.slice.value) & self.offsets:
                out |= _names(e.slice.value)  # the loop variables placing it included
        return out

    def _knob_sized(self, node: cst.BaseExpression) -> bool:
        """`node` names a buffer allocated (`T.alloc_*`) with a shape read from the knob."""
        if not isinstance(node, cst.Name):
            return False
        for fn in reversed(self.stack):
            values = fn.assigns.get(node.value)
            if values:
                return all(
                    isinstance(v, cst.Call)
                    and "alloc" in dotted(v.func)
                    and bool(v.args)
                    and bool(_names(v.args[0].value) & (self.sized | self.aliases))
                    for v in values
                )
        return False

    def whole_tile_copy(self, rule: Rule) -> int | None:
        """The line of a copy that moves a whole knob-sized tile at an offset set by a loop
        `rule` counts: that loop needs full tiles whatever `T.min` clips elsewhere."""
        loops = self.ceil_loops.get(id(rule), set())
        return next((line for line, names in self.full_copies if names & loops), None)

    def _live(self, node: cst.CSTNode) -> set[str]:
        """The names an expression reads, less those an enclosing for loop binds there (a loop
        index `col` is not the same-named local computed from the knob elsewhere)."""
        shadowed = set().union(*self.loops) if self.loops else set()
        return _names(node) - shadowed

    def visit_Slice(self, node: cst.Slice) -> None:
        sized = node.upper is not None and self._live(node.upper) & self.sized
        if sized and not self._guarded_slice(node):
            self.sliced = True  # a copy through this slice is clipped at the tensor's end

    def visit_Index(self, node: cst.Index) -> None:
        if self._live(node.value) & self.offsets and not any(
            self._covers(g, node.value) for g in self.guards
        ):
            self.indexed = True  # one element at an offset from the knob: not clipped

    def _covers(self, guard: cst.Comparison, index: cst.BaseExpression) -> bool:
        """Whether `guard` keeps `index` inside the extent. A lane kept below what is left of
        the extent (`_remainder`) guards only the index placed by the same offset (`j <
        remain_n` guards `no * BLOCK + j`, not the row `mo * BLOCK + i` nor `no * BLOCK + i`);
        any other guard is taken to cover the accesses under it."""
        read = self.moved.get(id(guard))
        if read is None:
            return True
        terms, lane = read
        return sorted(terms) == sorted(_terms(index, self.offsets)[0]) and lane <= _names(index)

    def _guarded_slice(self, node: cst.Slice) -> bool:
        """A slice an enclosing guard keeps inside the extent: its end is the bounded offset
        (`if col_end <= n:` around `src[base + col_start : base + col_end]`; `if col < n:`
        around `src[base + col : base + col + 1]`), or, under such a guard, a window the knob
        alone sizes (`buf[0:block]`). Nothing clips it: it is never past the end."""
        if not self.guards or node.upper is None:
            return False
        upper = _terms(node.upper, self.offsets)
        if (
            upper[0]
            and set(upper[0]) <= self.aliases
            and not (node.lower is not None and _names(node.lower) & self.offsets)
        ):
            return True
        for guard in self.guards:
            bound = _terms(guard.left, self.offsets)
            slack = 1 if isinstance(guard.comparisons[0].operator, cst.LessThan) else 0
            if sorted(upper[0]) == sorted(bound[0]) and upper[1] - bound[1] <= slack:
                return True
        # `if block_id < m_num * n_num:` around `A[bx : bx + block_M]` with bx computed from
        # block_id (= i * knob + cid): the knob only places the slice, through a tile index the
        # guard bounds, and its length moves with nothing the knob sizes: a whole tile of the
        # kernel's own grid, never past its end
        if node.lower is None or sorted(upper[0]) != sorted(_terms(node.lower, self.offsets)[0]):
            return False
        placed = self._sources(_names(node.lower))
        return any(_names(guard.left) & self.offsets & placed for guard in self.guards)

    def _sources(self, names: set[str]) -> set[str]:
        """`names` and every local they are computed from, in the functions around the visit."""
        found = set(names)
        frontier = set(names)
        for _ in range(8):
            nxt: set[str] = set()
            for fn in self.stack:
                for name in frontier:
                    for value in fn.assigns.get(name, []):
                        nxt |= _names(value) - found
            if not nxt:
                break
            found |= nxt
            frontier = nxt
        return found

    @property
    def tail_handled(self) -> bool:
        return self.tails or (self.sliced and not self.indexed)

    @property
    def tail_guarded(self) -> bool:
        """Every element index from the knob sits under an `if` that bounds it: a tile past
        the extent does no work, so the tile count demands nothing of the knob."""
        return self.guarded and not self.indexed

    def _bounds(self, test: cst.BaseExpression) -> bool:
        """`row_idx < M` / `row_base + n <= M`: a knob offset kept below a bound that does not
        grow with the knob, so the accesses the `if` guards stop at the tensor's end."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        target = test.comparisons[0]
        return (
            isinstance(target.operator, (cst.LessThan, cst.LessThanEqual))
            and bool(_names(test.left) & self.offsets)
            and not _names(target.comparator) & self.offsets
        )

    def _guards_of(self, test: cst.BaseExpression) -> list[cst.Comparison]:
        """The bounds an `if` test holds: itself, each bounding side of an `and` (`if i <
        remain_m and j < remain_n:`), and a lane kept below what is left of the extent (`i <
        remain_m` with `remain_m = M - mo * BLOCK_M`), read as the offset it bounds (`mo *
        BLOCK_M + i < M`)."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._guards_of(test.left) + self._guards_of(test.right)
        if self._bounds(test):
            return [test]  # type: ignore[list-item]
        moved = self._remainder(test)
        if moved is None or not self._bounds(moved):
            return []
        lane = _names(test.left) if isinstance(test, cst.Comparison) else set()
        self.moved[id(moved)] = (_terms(moved.left, self.offsets)[0], lane)
        return [moved]

    def _remainder(self, test: cst.BaseExpression) -> cst.Comparison | None:
        """`lane < rest` with `rest` a local assigned once as `extent - offset`: the same test
        as `offset + lane < extent`. None for any other form."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        if not isinstance(target.operator, cst.LessThan):
            return None  # `i <= remain` lets one lane past the extent
        rest = target.comparator
        if not isinstance(rest, cst.Name):
            return None
        values = next(
            (fn.assigns[rest.value] for fn in reversed(self.stack) if rest.value in fn.assigns), []
        )
        if len(values) != 1:
            return None
        value = values[0]
        if not (
            isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract)
        ):
            return None
        return cst.Comparison(
            left=cst.BinaryOperation(left=value.right, operator=cst.Add(), right=test.left),
            comparisons=[target.with_changes(comparator=value.left)],
        )

    def visit_Assert(self, node: cst.Assert) -> None:
        self.checking += 1
        if _names(node.test) & self.aliases:
            self.rules.append(self._rule("assert", node.test, node.test))

    def leave_Assert(self, original_node: cst.Assert) -> None:
        self.checking -= 1

    def visit_If(self, node: cst.If) -> bool:
        if not _raises(node):
            form = as_if(node)
            assert form is not None
            self._branch(form)
            return False
        if _names(node.test) & self.aliases:
            self.rules.append(self._rule("raises", node.test, node.test))
        self.checking += 1
        node.test.visit(self)
        self.checking -= 1
        node.body.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_With(self, node: cst.With) -> bool:
        form = as_if(node)  # `with T.If(cond): with T.Then(): ...`: an `if`
        if form is None:
            return True
        self._branch(form)
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        taken = self._taken(node.test)  # `a if is_causal else b`: the side the run path takes
        if taken is None:
            return True
        node.test.visit(self)
        (node.body if taken else node.orelse).visit(self)
        return False

    def _branch(self, form: IfForm) -> None:
        """Both sides of an `if`, or only the one the run path takes when its condition is one
        value there (`if is_causal:` with is_causal False on every call path): a rule read
        from a side that never runs is no rule of the kernel as it runs."""
        form.test.visit(self)
        taken = self._taken(form.test)
        if taken is not False:
            held = self._guards_of(form.test)
            if held:
                self.guarded = True
                self.guards += held
            for stmt in form.body:
                stmt.visit(self)
            if held:
                del self.guards[-len(held) :]
        if taken is not True:
            for stmt in form.orelse:
                stmt.visit(self)

    def _taken(self, test: cst.BaseExpression) -> bool | None:
        names = _names(test)
        if self.taken is None or names & self.sized or names & self.iterators:
            return None
        return self.taken(test, tuple(self.stack))


def walks_whole_parts(root: cst.FunctionDef, count: cst.Call) -> bool:
    """True when the count `T.ceildiv(knob, X)` walks the knob in whole parts of X: it is the
    extent of a loop (directly, or through a local assigned once) whose body neither clips a
    part with `min` nor guards it with an `if`, or a part's offset (`vid * half` with
    `half = T.ceildiv(block_M, 2)`). A count used otherwise (`threads=T.ceildiv(block_M, 64)`,
    a buffer's size) is how a kernel allows a knob that is not a multiple of X: no rule."""
    names: set[str] = set()
    loops: list[cst.For] = []
    offsets = False

    class Uses(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if node.value is count:
                for t in node.targets:
                    if isinstance(t.target, cst.Name):
                        names.add(t.target.value)

    class Walks(cst.CSTVisitor):
        def _is_count(self, node: cst.BaseExpression) -> bool:
            return node is count or (isinstance(node, cst.Name) and node.value in names)

        def visit_For(self, node: cst.For) -> None:
            it = node.iter
            if isinstance(it, cst.Call) and it.args and self._is_count(it.args[0].value):
                loops.append(node)
            elif (
                isinstance(it, cst.Call) and len(it.args) >= 2 and self._is_count(it.args[1].value)
            ):
                loops.append(node)  # `range(0, n)`

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            nonlocal offsets
            if isinstance(node.operator, cst.Multiply) and (
                (isinstance(node.left, cst.Name) and node.left.value in names)
                or (isinstance(node.right, cst.Name) and node.right.value in names)
            ):
                offsets = True

    root.visit(Uses())
    root.visit(Walks())
    if offsets:
        return True
    return any(not _clips_or_guards(loop.body) for loop in loops)


def _clips_or_guards(body: cst.CSTNode) -> bool:
    """True when a loop body clips a part (`T.min(...)`) or guards one (`if`, `T.If`)."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if dotted(node.func).rsplit(".", 1)[-1] in ("min", "If"):
                found = True

        def visit_If(self, node: cst.If) -> None:
            nonlocal found
            found = True

    body.visit(V())
    return found


def _terms(node: cst.BaseExpression, offsets: set[str]) -> tuple[list[str], int]:
    """An index as a sum: the code of its terms that move with the knob, and the sum of its
    integer literals (other terms, a row's base offset, shift both sides alike)."""
    moving: list[str] = []
    constant = 0
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Add):
            stack += [n.left, n.right]
        elif isinstance(n, cst.Integer):
            constant += int(n.value)
        elif _names(n) & offsets:
            moving.append(" ".join(cst.Module([]).code_for_node(n).split()))
    return moving, constant


def _rounded_up(
    node: cst.BinaryOperation, is_knob: Callable[[cst.BaseExpression], bool]
) -> cst.BaseExpression | None:
    """X of `(X + knob - 1) // knob`, else None."""
    if not (isinstance(node.operator, cst.FloorDivide) and is_knob(node.right)):
        return None
    top = node.left
    if not (
        isinstance(top, cst.BinaryOperation)
        and isinstance(top.operator, cst.Subtract)
        and isinstance(top.right, cst.Integer)
        and top.right.value == "1"
        and isinstance(top.left, cst.BinaryOperation)
        and isinstance(top.left.operator, cst.Add)
    ):
        return None
    added = top.left
    if is_knob(added.right):
        return added.left
    return added.right if is_knob(added.left) else None


def _scaled_knob(
    node: cst.BaseExpression, is_knob: Callable[[cst.BaseExpression], bool]
) -> cst.BaseExpression | None:
    """c of `c * knob` or `knob * c` (c not the knob), else None."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    for mine, other in ((node.left, node.right), (node.right, node.left)):
        if is_knob(mine) and isinstance(other, (cst.Name, cst.Integer)) and not is_knob(other):
            return other
    return None


def _raises(node: cst.If) -> bool:
    """`if cond: raise ...`: a check the kernel makes of its arguments."""
    if isinstance(node.body, cst.SimpleStatementSuite):  # `if cond: raise X` on one line
        return any(isinstance(s, cst.Raise) for s in node.body.body)
    first = node.body.body[0] if node.body.body else None
    return isinstance(first, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Raise) for s in first.body
    )


def _iterators(f: Facts) -> set[str]:
    """Loop and `with ... as` targets inside the kernel factories (and the functions around
    them): indices (`k % slots` is a ring
    index), never shapes. A loop outside them walks configurations (`for M, N, block_M in
    test_configs`): its names are the sizes the kernel is built with."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            found.update(_names(n.target))

        def visit_WithItem(self, n: cst.WithItem) -> None:
            if n.asname is not None:
                found.update(_names(n.asname.name))

    for outer in {id(fac.chain[0]): fac.chain[0] for fac in f.factories}.values():
        outer.node.visit(V())
    return found


def sized_by(
    f: Facts,
    aliases: set[str],
    used: Callable[[cst.CSTNode], set[str]] | None = None,
    within: list[Function] | None = None,
) -> set[str]:
    """The knob's names and the locals computed from them (`sub_block_M = block_M // 2`) in
    the functions `within` (default: all); with `used`, only through the names `used` picks
    out of an expression."""
    pick = used or _names
    names = set(aliases)
    changed = True
    while changed:
        changed = False
        for fn in f.functions if within is None else within:
            for local, values in fn.assigns.items():
                if local not in names and any(pick(v) & names for v in values):
                    names.add(local)
                    changed = True
    return names


def _offset_names(node: cst.CSTNode) -> set[str]:
    """Names that scale or shift an expression's value: not a divisor (`cid // n_num`,
    `T.ceildiv(N, block_N)`), which makes a tile index or count, not an element offset."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> bool:
            if isinstance(n.operator, (cst.FloorDivide, cst.Modulo)):
                n.left.visit(self)
                return False
            return True

        def visit_Call(self, n: cst.Call) -> bool:
            args = [a.value for a in n.args if a.keyword is None]
            if dotted(n.func).rsplit(".", 1)[-1] in CEILDIV and len(args) == 2:
                args[0].visit(self)
                return False
            return True

    node.visit(V())
    return found


def class_fields(f: Facts) -> frozenset[str]:
    """The names the module's classes bind in their own bodies (a settings dataclass's fields)."""

    def collect() -> frozenset[str]:
        out: set[str] = set()
        for stmt in f.wrapper.module.body:
            if not isinstance(stmt, cst.ClassDef):
                continue
            for line in stmt.body.body:
                if not isinstance(line, cst.SimpleStatementLine):
                    continue
                for small in line.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        out.add(small.target.value)
                    elif isinstance(small, cst.Assign):
                        out |= {
                            t.target.value for t in small.targets if isinstance(t.target, cst.Name)
                        }
        return frozenset(out)

    return f.kept(("exprrules.class_fields",), collect)


def aliases_of(name: str, chain: tuple[Function, ...], f: Facts) -> set[str]:
    """`name` and the locals that are plain copies of it (`block_m = block_M`, the other targets
    of a chained assignment `block_M = block_N = 128`, or, for a field
    a class of the file declares, of an object's attribute of that name: `BLOCK_TOP_K =
    tiling.block_topk` with `class FwdTiling: block_topk: int = 128`)."""
    names = {name}
    fields = class_fields(f)
    scopes = [fn for fn in f.functions if any(p is c for c in chain for p in fn.chain)]
    # the value of a chained assignment (`block_M = block_N = 128`) is one node for every
    # target: editing it for one name moves the others too, so they are read as copies
    shared = {
        id(values[0])
        for fn in scopes
        for local, values in fn.assigns.items()
        if local == name and len(values) == 1
    }
    # a chained target clamped afterwards (`block_N = min(block_N, 4096)`) still takes the
    # shared literal: its joint move is checked at the new value (at most over-cautious)
    for fn in scopes:
        for local, values in fn.assigns.items():
            if local != name and len(values) > 1 and any(id(v) in shared for v in values):
                names.add(local)
    changed = True
    while changed:
        changed = False
        for fn in scopes:
            for local, values in fn.assigns.items():
                if (
                    local not in names
                    and len(values) == 1
                    and (
                        (isinstance(values[0], cst.Name) and values[0].value in names)
                        or id(values[0]) in shared
                        or (
                            isinstance(values[0], cst.Attribute)
                            and isinstance(values[0].value, cst.Name)
                            and values[0].attr.value == name
                            and name in fields
                        )
                    )
                ):
                    names.add(local)
                    changed = True
    return names


# module names a helper's expression may read besides its parameters (`T.ceildiv`, `math.gcd`)
_MODULES = frozenset({"T", "tl", "tilelang", "math", "min", "max", "abs", "int"})


def _free_names(node: cst.BaseExpression) -> set[str] | None:
    """The names `node` reads (not attribute names or keywords), or None when it binds names
    of its own (a lambda, a comprehension), which substitution would not respect."""
    names: set[str] = set()
    binds = False

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            nonlocal binds
            binds = True
            return False

        def visit_CompFor(self, n: cst.CompFor) -> bool:
            nonlocal binds
            binds = True
            return False

    node.visit(V())
    return None if binds else names


class _Substitute(cst.CSTTransformer):
    """Each parameter name replaced by the argument the call passes it."""

    def __init__(self, args: dict[str, cst.BaseExpression]) -> None:
        self.args = args

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.args.get(original_node.value, updated_node)

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        return updated_node.with_changes(attr=original_node.attr)  # `T.ceildiv`'s own name
