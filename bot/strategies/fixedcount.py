"""A knob that sizes a kernel's tiles while the number of tiles does not depend on it.

A kernel covers an extent with (number of tiles) x (tile size). When the knob sizes
a buffer of the prim_func (`T.alloc_*((BLOCK_M, BLOCK_K), ...)`) but neither the
grid (`T.Kernel(1)`) nor any loop count of the prim_func (`T.serial(K // BLOCK_K)`
counts BLOCK_K's tiles, not BLOCK_M's) shrinks when the knob grows, the kernel
runs the same number of tiles whatever the knob: a smaller tile leaves part of the
extent unread or unwritten, a larger one reads and writes past it. Only the
current value keeps what the kernel computes.

A count that cannot be read (an open size, a call the evaluator does not know) may
hide a dependence on the knob, so the rule is not made then: a refusal never rests
on a guess. Loops whose count grows with the knob (`T.Parallel(block_M)`) walk the
elements of one tile and say nothing about the number of tiles. A knob taken as a
modulus (`slot = k % multi_l1`) counts the slots of a ring, not a tile's size, and a
knob that is a loop's step (`range(0, N, block)`) sets the count itself: neither is
judged here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from bot.strategies.callerbuffers import jit_indices
from bot.strategies.callsizes import shapes_symbols
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.exprrules import sized_by
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted
from bot.strategies.tiling import _names

PROBE = 4096  # how far past the current value the knob is also tried
STEPPED = frozenset({"range", "serial"})  # (start, stop, step): the step is the tile size


class _Counts(cst.CSTVisitor):
    """The grid's and every loop's count expressions in a prim_func, the buffers the knob
    sizes, and whether the knob is a loop's step."""

    def __init__(self, sized: set[str]) -> None:
        self.sized = sized
        self.counts: list[cst.BaseExpression] = []
        self.buffers: list[cst.CSTNode] = []
        self.stepped = False
        self.ring = False  # `k % multi_l1`: the knob counts slots of a ring, not a tile size
        # `for m in T.Parallel(block): if m < n:`: lanes past the extent n idle (line, n)
        self.guards: list[tuple[cst.For, cst.BaseExpression]] = []

    def visit_Call(self, node: cst.Call) -> None:
        short = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None]
        if short == "Kernel":
            self.counts.extend(args)
        elif short.startswith("alloc") and args and _names(args[0]) & self.sized:
            self.buffers.append(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Modulo) and _names(node.right) & self.sized:
            self.ring = True

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        if not isinstance(it, cst.Call):
            return
        args = [a.value for a in it.args if a.keyword is None]
        self.counts.extend(args)
        short = dotted(it.func).rsplit(".", 1)[-1]
        if short == "Parallel" and len(args) == 1 and _names(args[0]) & self.sized:
            bound = _lane_guard(node)
            if bound is not None:
                self.guards.append((node, bound))
        if short in STEPPED and len(args) == 3 and _names(args[2]) & self.sized:
            self.stepped = True


def _lane_guard(loop: cst.For) -> cst.BaseExpression | None:
    """X when the whole body of `for m in T.Parallel(knob)` is `if m < X:` (no else)."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else []
    if len(body) != 1 or not isinstance(body[0], cst.If) or body[0].orelse is not None:
        return None
    test = body[0].test
    if (
        isinstance(loop.target, cst.Name)
        and isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == loop.target.value
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.LessThan)
    ):
        return test.comparisons[0].comparator
    return None


@dataclass
class FixedCountCheck:
    """Refuses any value but the current one for a knob whose tile count is fixed."""

    name: str
    kernels: list[tuple[tuple[Function, ...], list[cst.BaseExpression], int]]
    # per kernel: (line, X) of each `for m in T.Parallel(knob): if m < X:` (lanes past X idle)
    guards: list[list[tuple[int, cst.BaseExpression]]]
    # per kernel: a tensor parameter the knob shapes (`A: T.Tensor((block_M, block_K), ..)`,
    # its line), or None: the one tile is then the whole problem, not a part of it
    shaped: list[tuple[str, int] | None]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for (chain, counts, line), guards, shaped in zip(
            self.kernels, self.guards, self.shaped, strict=True
        ):
            if not _fixed(counts, chain, value, current, env):
                continue
            if guards:  # one tile covers the extent; lanes past it idle
                for at, bound in guards:
                    x = evaluate(bound, env(chain, value))
                    if type(x) is not int and value < current:
                        return (
                            f"{self.name}={value}: the kernel covers its extent with one tile of "
                            f"{self.name} lanes (`T.Parallel({self.name})` at line {at} guards "
                            f"the lanes past it), and the extent cannot be read: only a value "
                            f"above the current {current} is known to cover it"
                        )
                    if type(x) is int and value < x:
                        return (
                            f"{self.name}={value}: the kernel covers its extent of {x} with one "
                            f"tile of {self.name} lanes (`T.Parallel({self.name})` at line {at}, "
                            f"lanes past {x} idle): fewer lanes than {x} leave part uncomputed"
                        )
                continue
            if shaped is not None:
                tensor, at = shaped
                tile = f" as well as the tile of the buffer at line {line}" if line else ""
                return (
                    f"{self.name}={value}: {self.name} sizes the kernel's own tensor {tensor} "
                    f"(line {at}){tile}, and no count of tiles shrinks as it grows (the grid "
                    f"and the loops): the tensor grows with it, so another value changes the "
                    f"problem the kernel computes, not its tiling; only the current {current} "
                    f"keeps it"
                )
            return (
                f"{self.name}={value}: {self.name} sizes the tile of the buffer at line "
                f"{line}, but no tile count of the kernel (its grid and its loops) depends "
                f"on {self.name}, so the kernel runs the same tiles whatever its value: a "
                f"smaller tile leaves part of the extent uncomputed, a larger one goes past "
                f"it; only the current {current} keeps the result"
            )
        return None


def _fixed(
    counts: list[cst.BaseExpression],
    chain: tuple[Function, ...],
    value: int,
    current: int,
    env: Callable[[tuple[Function, ...], int], Env],
) -> bool:
    """True when every count can be read with both values and none is a count of knob tiles
    (fewer tiles with a larger knob). Besides the two values, the knob is also tried far from
    them (1 and 4096 times the current value): a count rounded up over a fixed grid
    (`T.ceildiv(m_num * n_num, 20)`) can stay the same for two nearby values. A count read
    only from `T.symbolic` shapes is unknown until run time but cannot depend on the knob."""
    probes = sorted({1, value, current, current * PROBE})
    symbols = shapes_symbols(chain[-1]) if chain else set()
    for node in counts:
        names = _names(node)
        if names and names <= symbols:
            continue  # a run-time shape (`batch = T.symbolic("batch")`): it counts no knob tiles
        new, now = evaluate(node, env(chain, value)), evaluate(node, env(chain, current))
        if type(new) is not int or type(now) is not int:
            return False  # unreadable: it may count the knob's tiles
        seen = [evaluate(node, env(chain, k)) for k in probes]
        known = [c for c in seen if isinstance(c, int) and not isinstance(c, bool)]
        if any(a > b for a, b in zip(known, known[1:], strict=False)):
            return False  # fewer tiles with a larger knob: a count of its tiles
    return True


def _counted(
    f: Facts, owners: list[tuple[Function, set[str]]]
) -> Iterator[tuple[Function, cst.FunctionDef, set[str], _Counts]]:
    """(factory, prim_func, the names computed from the knob, its counts and buffers) for each
    prim_func of each (factory, aliases)."""
    for factory, aliases in owners:
        scope = [fn for fn in f.functions if factory in fn.chain or fn in factory.chain]
        sized = sized_by(f, aliases, within=scope)
        for pf in factory.prim_funcs:
            v = _Counts(sized)
            pf.visit(v)
            yield factory, pf, sized, v


def fixed_count_check(
    f: Facts, name: str, owners: list[tuple[Function, set[str]]]
) -> FixedCountCheck | None:
    """The rule for knob `name` over the prim_funcs of each (factory, aliases)."""
    by_node = {id(fn.node): fn for fn in f.functions}
    kernels: list[tuple[tuple[Function, ...], list[cst.BaseExpression], int]] = []
    guards: list[list[tuple[int, cst.BaseExpression]]] = []
    shaped: list[tuple[str, int] | None] = []
    for _, pf, sized, v in _counted(f, owners):
        if v.stepped or v.ring:
            continue
        tensor = _shaped_tensor(f, pf, sized)
        if not v.buffers and tensor is None:
            continue
        # line 0: the knob sizes no buffer, only the kernel's tensors
        kernels.append((by_node[id(pf)].chain, v.counts, f.line(v.buffers[0]) if v.buffers else 0))
        guards.append([(f.line(loop), bound) for loop, bound in v.guards])
        shaped.append(tensor)
    return FixedCountCheck(name, kernels, guards, shaped) if kernels else None


def _shaped_tensor(
    f: Facts, pf: cst.FunctionDef, sized: set[str], skip: frozenset[int] = frozenset()
) -> tuple[str, int] | None:
    """(name, line) of the first tensor parameter of `pf` whose declared shape reads the knob
    (`skip`: positions of parameters left out)."""
    params = (*pf.params.posonly_params, *pf.params.params, *pf.params.kwonly_params)
    for i, p in enumerate(params):
        if i in skip:
            continue
        ann = p.annotation.annotation if p.annotation is not None else None
        if not (isinstance(ann, cst.Call) and "Tensor" in dotted(ann.func) and ann.args):
            continue
        if _names(ann.args[0].value) & sized:
            return p.name.value, f.line(p)
    return None


def _workspaces(factory: Function, pf: cst.FunctionDef) -> frozenset[int]:
    """The positions of `pf`'s parameters that `@tilelang.jit(workspace_idx=[...])` has the
    runtime allocate from their declared shapes: scratch space sized by the tiles, not the
    kernel's data."""
    count = len(pf.params.params) + len(pf.params.posonly_params)
    for fn in factory.chain:
        found = jit_indices(fn, "workspace_idx", count)
        if found:
            return frozenset(found)
    return frozenset()


def layout_only(f: Facts, owners: list[tuple[Function, set[str]]]) -> str | None:
    """Why the knob is a size of the data the kernel is given, not a tile, or None: in every
    prim_func of its factories it sizes no buffer, no count of the grid or of a loop reads
    anything computed from it, and it shapes a tensor parameter (a paged cache's page length
    `KV: T.Tensor([block_num, block_size, D])`, or its page count)."""
    shaped: tuple[str, int] | None = None
    for factory, pf, sized, v in _counted(f, owners):
        # (a modulus here is the offset within a page, `index % block_size`, not a ring)
        if v.buffers or v.stepped or any(_names(c) & sized for c in v.counts):
            return None
        found = _shaped_tensor(f, pf, sized, skip=_workspaces(factory, pf))
        if found is None:
            return None
        shaped = shaped or found
    if shaped is None:
        return None
    tensor, at = shaped
    return (
        f"it shapes the kernel's tensor {tensor} (line {at}) and no buffer or tile count of the "
        f"kernel: a size of the data the kernel is given (a page length, a page count), not a "
        f"tile; another value changes the problem, not its tiling"
    )
