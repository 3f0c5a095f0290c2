"""Whether the padded elements of a clipped tile reach a reduction unmasked.

A kernel that walks `T.ceildiv(X, knob)` tiles and loads each through a slice the
compiler clips at the tensor's end (`K[t * block_N : (t + 1) * block_N, :]`) leaves
the last tile partly unfilled when the knob does not divide X. That tail is handled
only if those padded elements never reach a reduction along the padded axis with a
value that changes its result. `padded_reduction` follows the tile through the
prim_func in statement order (loop bodies twice, for what one pass carries into the
next) and tracks, per buffer, the value its padded elements hold:

- a clipped load pads with its `pad_value=` (else with what a `T.tile.fill` /
  `T.clear` just before it in the same block left, else with unknown data);
- copies, element-wise tile ops, gemm and reductions along another axis carry the
  padding on, with the pad value followed through each op (bot/strategies/padvalues.py;
  a buffer a fill sets once and nothing else writes is that constant there);
- a bounded view (`x_ub[:, 0:valid_n]`) is written and read only up to its bound: a
  clipped load into one pads nothing, and an op reading one reads no padding;
- `T.if_then_else(offset < X, v, c)` (or an `if` on the offset that writes `c` past
  the end) masks the padded elements with `c`;
- a reduction over an axis sized by the knob (`T.reduce_max/min/sum(..., dim=d)`,
  the K axis of a gemm) fails unless the pad value is neutral for it (-inf for a max,
  +inf for a min, 0 for a sum or a gemm accumulation).

The answer is the first such reduction, described for a refusal; None when the
padding never reaches one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from bot.strategies.branches import IfForm, as_if
from bot.strategies.facts import Facts, Function
from bot.strategies.fractal import transposes
from bot.strategies.padexprs import (
    accumulates,
    base_name,
    code_of,
    elementwise_loop,
    expression_pad,
)
from bot.strategies.padvalues import FINITE, NEUTRAL, UNKNOWN, WHAT, combine, pad_of
from bot.strategies.source import dotted, one_assignment
from bot.strategies.tiling import _names

Taken = Callable[[cst.BaseExpression, tuple[Function, ...]], bool | None]

# NPUIR vector ops (`T.vexp(src, dst)`): their result is the last argument
V_OPS = frozenset(
    {"vadd", "vsub", "vmul", "vdiv", "vmax", "vmin", "vexp", "vln", "vlog", "vabs", "vrelu"}
    | {"vsqrt", "vrsqrt", "vcast", "vneg", "vbrc"}
)


def _shape(node: cst.BaseExpression, scope: dict[str, list[cst.BaseExpression]]) -> list | None:
    if isinstance(node, cst.Name) and len(scope.get(node.value, [])) == 1:
        node = scope[node.value][0]
    if isinstance(node, (cst.List, cst.Tuple)):
        return [e.value for e in node.elements]
    return None


class _Flow:
    def __init__(
        self,
        f: Facts,
        sized: tuple[set[str], set[str]],
        scope: dict[str, list[cst.BaseExpression]],
        taken: Callable[[cst.BaseExpression], bool | None] | None = None,
    ) -> None:
        self.f, self.scope, self.taken = f, scope, taken
        self.sized, self.offsets = sized  # names sized by the knob; element offsets from it
        self.iterators: set[str] = set()  # loop indices of the prim_func
        self.shapes: dict[str, list[cst.BaseExpression]] = {}  # buffer/tensor -> dims
        self.tensors: set[str] = set()
        self.pad: dict[str, tuple[str, int]] = {}  # padded buffer -> (pad value, line of the clip)
        self.filled: dict[str, str] = {}  # buffer -> what a fill just wrote (this block)
        self.found: str | None = None
        self.clips: list[tuple[cst.BaseExpression | None, int]] = []  # (tensor dim, line)
        self.constant: dict[str, str] = {}  # buffer -> the value a fill gives all of it, for good

    # shapes ---------------------------------------------------------------------------
    def params(self, pf: cst.FunctionDef) -> None:
        for p in pf.params.params:
            ann = p.annotation.annotation if p.annotation else None
            if isinstance(ann, cst.Call) and "Tensor" in dotted(ann.func) and ann.args:
                dims = _shape(ann.args[0].value, self.scope)
                self.tensors.add(p.name.value)
                if dims is not None:
                    self.shapes[p.name.value] = dims

    def _sized(self, node: cst.CSTNode) -> bool:
        return bool(_names(node) & self.sized)

    def _axes(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """The dims an argument spans (a subscript keeps its sliced dims)."""
        base = base_name(node)
        dims = self.shapes.get(base or "")
        if dims is None:
            return None
        if not isinstance(node, cst.Subscript):
            return dims
        kept = [
            d for el, d in zip(node.slice, dims, strict=False) if isinstance(el.slice, cst.Slice)
        ]
        return kept + dims[len(node.slice) :]

    def _clipped(self, node: cst.BaseExpression) -> bool:
        """A tensor slice whose bound grows with the knob, on a dim the knob does not size
        (recorded with that dim, where the compiler clips it, in `clips`)."""
        if not isinstance(node, cst.Subscript) or base_name(node) not in self.tensors:
            return False
        dims = self.shapes.get(base_name(node) or "", [])
        found = False
        for i, el in enumerate(node.slice):
            s = el.slice
            if (
                isinstance(s, cst.Slice)
                and s.upper is not None
                and self._sized(s.upper)
                and (i >= len(dims) or not self._sized(dims[i]))
            ):
                self.clips.append((dims[i] if i < len(dims) else None, self.f.line(node)))
                found = True
        return found

    # statements -----------------------------------------------------------------------
    def block(self, stmts: Sequence[cst.BaseStatement | cst.BaseSmallStatement]) -> None:
        for s in stmts:
            if self.found:
                return
            self.statement(s)

    def statement(self, s: cst.CSTNode) -> None:
        if isinstance(s, cst.SimpleStatementLine):
            self.block(s.body)
        elif isinstance(s, cst.Expr) and isinstance(s.value, cst.Call):
            self.call(s.value)
        elif (pair := one_assignment(s)) is not None:
            self.assign(*pair)
        elif isinstance(s, (cst.If, cst.With)) and (form := as_if(s)) is not None:
            self.branch(form)
        elif isinstance(s, cst.With):
            self.block(s.body.body)
        elif isinstance(s, (cst.For, cst.While)):
            # what one pass leaves, the next reads; an element-wise loop (`T.Parallel`) writes
            # each element once, from the values before it: one pass
            for _ in range(1 if elementwise_loop(s) else 2):
                self.filled = {}
                self.block(s.body.body)

    def branch(self, s: IfForm) -> None:
        taken = self._taken(s.test)
        if taken is not None:  # one side on every run path (`if is_causal:`, bound False)
            self.block(s.body if taken else s.orelse)
            return
        side = self._side(s.test)
        if side == "inside":  # only elements before the end are written: padding unchanged
            before = dict(self.pad)
            self.block(s.body)
            self.pad = {**before, **{k: v for k, v in self.pad.items() if k not in before}}
        elif side == "past":  # writes to elements past the end: a mask
            for stmt in s.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if (pair := one_assignment(small)) is not None:
                            base = base_name(pair[0])
                            if base in self.pad:
                                self.pad[base] = (pad_of(pair[1]), self.pad[base][1])
        else:
            self.block(s.body)
        self.block(s.orelse)

    def _taken(self, test: cst.BaseExpression) -> bool | None:
        names = _names(test)
        if self.taken is None or names & (self.sized | self.offsets | self.iterators):
            return None
        return self.taken(test)

    def _side(self, test: cst.BaseExpression) -> str | None:
        """Which elements a comparison keeps: "inside" the extent (`t * block_N + j < N`,
        `j < valid_n` with valid_n the tile's valid length) or "past" it (`offset >= N`)."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        op = target.operator
        left = bool(_names(test.left) & self.offsets)
        right = bool(_names(target.comparator) & self.offsets)
        if left == right:
            return None
        less = isinstance(op, (cst.LessThan, cst.LessThanEqual))
        more = isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual))
        if not (less or more):
            return None
        other = _names(target.comparator if left else test.left)
        if other and other <= self.iterators:  # a lane index against a valid length
            return "inside" if less != left else "past"
        return "inside" if less == left else "past"

    def assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        base = base_name(target)
        if base is None:
            return
        if isinstance(value, cst.Call) and dotted(value.func).rsplit(".", 1)[-1].startswith(
            "alloc"
        ):
            dims = _shape(value.args[0].value, self.scope) if value.args else None
            if dims is not None:
                self.shapes[base] = dims
            return
        if (
            isinstance(value, cst.Call)
            and dotted(value.func).rsplit(".", 1)[-1] == "if_then_else"
            and len(value.args) == 3
        ):
            side = self._side(value.args[0].value)
            if side is not None:  # a mask keyed on the offset: the padded elements take one side
                past = value.args[2].value if side == "inside" else value.args[1].value
                line = self.pad.get(base, ("", self.f.line(value)))[1]
                self.pad[base] = (pad_of(past), line)
                return
        read = [self.pad[n] for n in _names(value) if n in self.pad]
        if read:
            pad = expression_pad(value, set(self.pad), self._operand, self.scope)
            self.pad[base] = (UNKNOWN if pad == FINITE else pad, read[0][1])

    def call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        short = name.rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if short == "vbrc" and len(args) == 2 and base_name(args[0]) not in self.shapes:
            short, args = "fill", [args[1], args[0]]  # NPUIR `T.vbrc(value, dst)`: a fill
        if short in ("fill", "clear") and args:
            base = base_name(args[0])
            if base:
                self.pad.pop(base, None)
                self.filled[base] = (
                    "0" if short == "clear" else self._const(args[1] if len(args) > 1 else None)
                )
            return
        if short == "copy" and len(args) >= 2:
            self._clipped(args[1])  # a store clipped at the tensor's end
            self.copy(node, args[0], args[1], kw.get("pad_value"))
        elif short.startswith("gemm") or short in ("mma", "npuir_dot"):
            if len(args) >= 3:
                self.gemm(node, args, kw)
        elif short.startswith("reduce"):
            if len(args) >= 2:
                self.reduce(node, short.removeprefix("reduce").strip("_"), args, kw)
        elif name.startswith(("T.tile.", "tile.")) and args:
            self.elementwise(short, args)
        elif name.startswith("T.") and short in V_OPS and len(args) >= 2:
            self.elementwise(short[1:], [args[-1], *args[:-1]])  # NPUIR: the result comes last

    def _const(self, node: cst.BaseExpression | None) -> str:
        """The pad value of a constant, also through a name the kernel binds to one once."""
        if isinstance(node, cst.Name) and len(self.scope.get(node.value, [])) == 1:
            node = self.scope[node.value][0]
        return pad_of(node)

    def _write(self, dst: cst.BaseExpression, pad: tuple[str, int] | None) -> None:
        base = base_name(dst)
        if base is None:
            return
        self.filled.pop(base, None)
        if pad is not None:
            self.pad[base] = pad
        elif not isinstance(dst, cst.Subscript):
            self.pad.pop(base, None)  # overwritten whole by data without padding

    def copy(
        self,
        node: cst.Call,
        src: cst.BaseExpression,
        dst: cst.BaseExpression,
        pad_value: cst.BaseExpression | None,
    ) -> None:
        if self._clipped(src):
            base = base_name(dst) or ""
            if self._view(dst):  # only the valid part is written (`buf[:, 0:valid_n]`)
                self.filled.pop(base, None)
                return
            value = pad_of(pad_value) if pad_value is not None else self.filled.get(base, UNKNOWN)
            self._write(dst, (value, self.f.line(node)))
            return
        self._write(dst, self._padded(src))

    def _view(self, node: cst.BaseExpression) -> bool:
        """A bounded part of an on-chip buffer (`buf[:, 0:valid_n]`): an op on it reads and
        writes no element past the bound, so none of the padding."""
        if not isinstance(node, cst.Subscript) or base_name(node) in self.tensors:
            return False
        dims = self.shapes.get(base_name(node) or "", [])
        for i, el in enumerate(node.slice):
            s = el.slice
            if isinstance(s, cst.Slice) and s.upper is not None:
                if i < len(dims) and code_of(s.upper) == code_of(dims[i]):
                    continue  # the whole dim
                return True
        return False

    def _padded(self, node: cst.BaseExpression) -> tuple[str, int] | None:
        """The padding an operand reads: its buffer's, unless it is a bounded view."""
        return None if self._view(node) else self.pad.get(base_name(node) or "")

    def _reduced(self, arg: cst.BaseExpression, axis: int) -> bool:
        dims = self._axes(arg)
        if not dims or not -len(dims) <= axis < len(dims):
            return False
        return self._sized(dims[axis])

    def gemm(self, node: cst.Call, args: list[cst.BaseExpression], kw: dict) -> None:
        # the transpose flags by keyword or by position, as each spelling's signature puts
        # them (fractal.transposes); None: not a literal, so either axis may be K
        flags = transposes(node)
        # the K axis of A (M x K, or K x M transposed) and of B (K x N, or N x K transposed)
        axes: list[tuple[int, ...]] = [
            (-1, -2) if flags[0] is None else ((-2,) if flags[0] else (-1,)),
            (-2, -1) if flags[1] is None else ((-1,) if flags[1] else (-2,)),
        ]
        padded = [
            (a, ks, pad)
            for a, ks in zip(args[:2], axes, strict=True)
            if (pad := self._padded(a)) is not None
        ]
        if not padded:
            return
        on_k = [(p, len(ks) > 1) for a, ks, p in padded if any(self._reduced(a, k) for k in ks)]
        if on_k:
            pads = [p for (p, _), _ in on_k]
            # a zero in one operand zeroes the product; stale data in the other is finite
            if "0" not in pads or any("inf" in p for p in pads):
                self.report(node, "the gemm accumulation", pads[0], "0", on_k[0][0][1])
                if on_k[0][1] and self.found:
                    self.found += (
                        " (a transpose flag of the gemm is not a literal, so the padded axis "
                        "may be the one it reduces)"
                    )
            return
        value, line = padded[0][2]
        acc = self.pad.get(base_name(args[2]) or "")
        if acc is not None and "inf" in acc[0] and accumulates(args, kw):
            # C += A @ B onto a C whose padded elements hold -inf (a mask): a finite product
            # (stale data is finite, as above) leaves them -inf
            product = UNKNOWN if "inf" in value else FINITE
            self._write(args[2], (combine("add", [acc[0], product]), acc[1]))
            return
        self._write(args[2], ("0" if value == "0" else UNKNOWN, line))

    def reduce(self, node: cst.Call, kind: str, args: list[cst.BaseExpression], kw: dict) -> None:
        padded = self._padded(args[0])
        if padded is None:
            return
        dim = kw.get("dim")
        ints = [a for a in args[2:] if isinstance(a, (cst.Integer, cst.UnaryOperation))]
        node_dim = dim if dim is not None else (ints[0] if ints else None)
        code = code_of(node_dim) if node_dim is not None else "-1"
        try:
            axis = int(code)
        except ValueError:
            axis = -1
        pad, line = padded
        if self._reduced(args[0], axis):
            if NEUTRAL.get(kind) != pad:
                self.report(
                    node,
                    WHAT.get(kind, f"the reduction ({kind or 'reduce'})"),
                    pad,
                    NEUTRAL.get(kind),
                    line,
                )
            return
        self._write(args[1], (pad, line))

    def elementwise(self, op: str, args: list[cst.BaseExpression]) -> None:
        srcs = args[1:]
        lines = [p[1] for a in srcs if (p := self._padded(a)) is not None]
        if not lines:
            self._write(args[0], None)
            return
        if self._view(args[0]):
            return  # writes the valid part only: the padding stays as it was
        pads = [self._operand(a) for a in srcs]
        self._write(args[0], (combine(op, pads), lines[0]))

    def _operand(self, node: cst.BaseExpression) -> str:
        """An operand's pad value: a padded buffer's, a literal's, else a finite value."""
        padded = self._padded(node)
        if padded is not None:
            return padded[0]
        if isinstance(node, cst.Name) and node.value in self.constant:
            return self.constant[node.value]
        value = self._const(node)
        return FINITE if value == UNKNOWN else value

    def report(self, node: cst.Call, what: str, pad: str, neutral: str | None, clip: int) -> None:
        holds = "unknown data" if pad == UNKNOWN else f"{pad}"
        need = f"; {what} needs {neutral} there" if neutral else ""
        self.found = (
            f"the padded elements of the tile clipped at line {clip} ({holds}) would enter "
            f"{what} `{code_of(node)}` at line {self.f.line(node)} unmasked{need}"
        )


def _loop_indices(pf: cst.FunctionDef) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.update(_names(node.target))

    pf.visit(V())
    return found


def _constants(pf: cst.FunctionDef) -> dict[str, str]:
    """Buffers a fill sets to one value and nothing else ever writes (`T.tile.fill(one, 1.0)`)."""
    fills: dict[str, list[str]] = {}
    written: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            short = dotted(node.func).rsplit(".", 1)[-1]
            args = [a.value for a in node.args if a.keyword is None]
            at = {"copy": 1, "reduce": 1, "gemm": 2, "mma": 2, "npuir_dot": 2}
            index = next((i for k, i in at.items() if short.startswith(k)), 0)
            if short in V_OPS:  # NPUIR: the result comes last
                index = len(args) - 1
            if index < len(args) and (base := base_name(args[index])):
                if short == "fill" and len(args) > 1:
                    fills.setdefault(base, []).append(pad_of(args[1]))
                else:
                    written.add(base)

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Subscript) and (base := base_name(t.target)):
                    written.add(base)

    pf.visit(V())
    return {
        b: v[0]
        for b, v in fills.items()
        if b not in written and len(set(v)) == 1 and v[0] != UNKNOWN
    }


def _at(taken: Taken, chain: tuple[Function, ...]) -> Callable[[cst.BaseExpression], bool | None]:
    """`taken` for the conditions read inside `chain`."""
    return lambda test: taken(test, chain)


def _flows(
    f: Facts, factory: Function, sized: set[str], offsets: set[str], taken: Taken | None
) -> list[_Flow]:
    by_node = {id(fn.node): fn for fn in f.functions}
    flows = []
    for pf in factory.prim_funcs:
        scope: dict[str, list[cst.BaseExpression]] = {}
        chain = by_node[id(pf)].chain
        for fn in chain:  # innermost wins
            scope.update(fn.assigns)
        flow = _Flow(f, (sized, offsets), scope, None if taken is None else _at(taken, chain))
        flow.params(pf)
        flow.constant = _constants(pf)
        flow.iterators = _loop_indices(pf)
        flow.block(pf.body.body)
        flows.append(flow)
    return flows


def clip_extents(
    f: Facts, factory: Function, sized: set[str], offsets: set[str], taken: Taken | None = None
) -> list[tuple[cst.BaseExpression | None, int]]:
    """(tensor dim, line) of every slice a partial tile of the knob would be clipped at:
    the compiler clips there, at the tensor's extent along that dim (None: not readable).
    `taken`: the side a condition takes on the run path (bot/strategies/branches.py)."""
    return [clip for flow in _flows(f, factory, sized, offsets, taken) for clip in flow.clips]


def padded_reduction(
    f: Facts, factory: Function, sized: set[str], offsets: set[str], taken: Taken | None = None
) -> str | None:
    """Why a partial last tile of the knob would corrupt a reduction, or None. `sized`: the
    knob and the names computed from it; `offsets`: those that scale or shift with it."""
    flows = _flows(f, factory, sized, offsets, taken)
    return next((fl.found for fl in flows if fl.found), None)
