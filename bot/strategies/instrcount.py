"""Counts an Ascend tile instruction is given beside a buffer the knob sizes.

TileLang-Ascend's tile instructions (`T.tile.<op>(...)`) each become one AscendC vector
instruction over the buffers they are passed. Three rules follow from how such a call is
written; each is made only where the file gives every number it needs, and none where the
current value itself breaks it.

1. A fixed element count (the knob is pinned):

       mask = 64
       repeatTimes = 2
       a_ub = T.alloc_ub((block_M // 2, block_N), dtype)
       T.tile.wholereducesum(b_ub, a_ub, mask, repeatTimes, 1, 1, 4)

   The call's count-like arguments (passed by a count-like keyword, `count=`, `mask=`,
   `repeat_times=`, or as a bare name that says so, `mask`, `repeatTimes`, `calCount`; never
   a stride, never a buffer) are integers that do not change with the knob, and their product
   is the element count of a whole buffer the call reads or writes at the current value (64 x
   2 = 128 = a_ub's 1 x 128). The one instruction then covers exactly that buffer now, and the
   same number of elements whatever the knob: a smaller buffer is read or written past its
   end, a larger one is left partly unprocessed. Only the current value is kept. Where the
   product is not a whole buffer's size (a 64-lane mask over one repeat of 128 values), how the
   instruction walks the buffer is not known from the call, but it still covers what it covers
   now while a buffer it is given changes size: only the current value is kept there too. A
   count that follows the knob (`T.tile.cast(dst, src, mode, sub_block_M * block_N)`) makes no
   rule. AscendC intrinsics called under their own camelCase name (`T.blockReduceMax(b_ub,
   a_ub, repeat, mask, ...)`) are read as tile instructions.

2. A repeat count past 8 bits. AscendC's vector instructions take their repeat count as a
   uint8, at most 255 (TileLang-Ascend's own templates split longer runs by `VEC_REPEAT_MAX =
   255`, src/tl_templates/ascend/common.h). A count-like argument named for a repeat
   (`repeatTimes`, `repeat=`) that is at most 255 now must stay so. `T.tile.sort32(dst, src0,
   src1)` computes its repeat itself, `prod(src0.shape) // 32` (one repeat sorts 32 values,
   tilelang/language/ascend_tile.py), and passes it unsplit to `AscendC::Sort32`: src0's
   elements / 32 must stay at most 255. The pto target's `TSORT32` takes whole tiles and no
   repeat count, so a file that compiles for target "pto" gets no cap.

3. Sort groups within rows. `T.tile.sort32` sorts every 32 consecutive values of src0. When
   the knob sizes src0's last dimension (the row of the tile) and that row is a whole number
   of 32-value groups now, it must stay one: otherwise a group runs from the end of one tile
   row into the next, and other values are sorted together than now.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies.capacity import kernels_of
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted

REPEAT_MAX = 255  # AscendC's uint8 repeat count (VEC_REPEAT_MAX in TileLang-Ascend's templates)
SORT_GROUP = 32  # values one T.tile.sort32 repeat sorts
PROBES = (1, 4096)  # far values the knob is also tried at: a count must stay the same there too
_COUNT = re.compile(r"count|cnt|mask|repeat", re.IGNORECASE)
# an AscendC intrinsic exposed under its own camelCase name (`T.blockReduceMax(dst, src,
# repeat, mask, ...)`): one vector instruction, like a `T.tile.*` call
_ASCENDC = re.compile(r"^T\.[a-z]+[A-Z]\w*$")


def _count_like(name: str) -> bool:
    return bool(_COUNT.search(name)) and "stride" not in name.lower()


def _repeat_like(name: str) -> bool:
    return "repeat" in name.lower() and "stride" not in name.lower()


@dataclass(frozen=True)
class _Buffer:
    name: str
    dims: tuple[cst.BaseExpression, ...]


@dataclass(frozen=True)
class _TileCall:
    op: str  # the instruction, `wholereducesum`
    text: str  # the call as written
    line: int
    buffers: tuple[_Buffer, ...]  # whole buffers passed, in order
    counts: tuple[tuple[str, cst.BaseExpression], ...]  # (label, value) of count-like arguments
    others: tuple[cst.BaseExpression, ...] = ()  # every argument that is not a buffer or tensor


class _Kernel(cst.CSTVisitor):
    """The buffers one prim_func allocates (each name bound once) and its `T.tile.*` calls."""

    def __init__(self, f: Facts) -> None:
        self.f = f
        self.allocs: dict[str, list[tuple[cst.BaseExpression, ...] | None]] = {}
        self.calls: list[cst.Call] = []
        self.tensors: set[str] = set()

    def visit_Param(self, node: cst.Param) -> None:
        self.tensors.add(node.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        value = node.value
        if not (
            isinstance(value, cst.Call)
            and dotted(value.func).rsplit(".", 1)[-1].startswith("alloc")
        ):
            return
        args = [a.value for a in value.args if a.keyword is None]
        dims: tuple[cst.BaseExpression, ...] | None = None
        if args:
            shape = args[0]
            dims = (
                tuple(e.value for e in shape.elements)
                if isinstance(shape, (cst.Tuple, cst.List))
                else (shape,)
            )
        self.allocs.setdefault(name, []).append(dims)

    def visit_Call(self, node: cst.Call) -> None:
        func = dotted(node.func)
        if func.startswith("T.tile.") or func.startswith("tile.") or _ASCENDC.match(func):
            self.calls.append(node)

    def tile_calls(self) -> list[_TileCall]:
        out: list[_TileCall] = []
        for call in self.calls:
            buffers: list[_Buffer] = []
            counts: list[tuple[str, cst.BaseExpression]] = []
            others: list[cst.BaseExpression] = []
            for arg in call.args:
                value = arg.value
                if isinstance(value, cst.Name) and value.value in self.allocs:
                    shapes = self.allocs[value.value]
                    if len(shapes) == 1 and shapes[0] is not None:
                        buffers.append(_Buffer(value.value, shapes[0]))
                    continue  # a buffer, never a count
                if isinstance(value, cst.Name) and value.value in self.tensors:
                    continue
                others.append(value)
                if arg.keyword is not None:
                    if _count_like(arg.keyword.value):
                        counts.append((arg.keyword.value, value))
                elif isinstance(value, cst.Name) and _count_like(value.value):
                    counts.append((value.value, value))
            out.append(
                _TileCall(
                    dotted(call.func).rsplit(".", 1)[-1],
                    code_of(call),
                    self.f.line(call),
                    tuple(buffers),
                    tuple(counts),
                    tuple(others),
                )
            )
        return out


def _int(node: cst.BaseExpression, env: Env) -> int | None:
    value = evaluate(node, env)
    return value if type(value) is int else None


def _elements(buf: _Buffer, env: Env) -> int | None:
    dims = [_int(d, env) for d in buf.dims]
    if any(d is None for d in dims):
        return None
    return math.prod(d for d in dims if d is not None)


@dataclass
class InstructionCountCheck:
    """Refuses a knob value that breaks a tile instruction's element or repeat count."""

    name: str
    kernels: list[tuple[tuple[Function, ...], list[_TileCall]]]
    capped: bool  # the file compiles for an AscendC target (not "pto"): repeats are uint8

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None or value == current:
            return None
        for chain, calls in self.kernels:
            for call in calls:
                problem = (
                    self._fixed(call, chain, value, current, env)
                    or self._repeats(call, chain, value, current, env)
                    or self._rows(call, chain, value, current, env)
                )
                if problem:
                    return problem
        return None

    def _fixed(
        self,
        call: _TileCall,
        chain: tuple[Function, ...],
        value: int,
        current: int,
        env: Callable[[tuple[Function, ...], int], Env],
    ) -> str | None:
        """Rule 1: count-like arguments that do not follow the knob, covering a whole buffer
        that does."""
        if not call.counts:
            return None
        now: list[int] = []
        for _, node in call.counts:
            seen = {_int(node, env(chain, k)) for k in (value, current, *PROBES)}
            if len(seen) != 1 or None in seen:
                return None  # follows the knob, or unreadable: the instruction may follow it
            now.append(_int(node, env(chain, current)) or 0)
        covered = math.prod(now)
        each = [
            f"{label} = {n}" if label == code_of(node) else f"{label}={code_of(node)} = {n}"
            for (label, node), n in zip(call.counts, now, strict=True)
        ]
        counts = " x ".join(each)
        changed: tuple[str, int, int] | None = None
        for buf in call.buffers:
            before = _elements(buf, env(chain, current))
            after = _elements(buf, env(chain, value))
            if before is None or after is None or after == before:
                continue
            if before != covered:
                changed = changed or (buf.name, before, after)
                continue
            effect = (
                f"would reach {covered - after} elements past its end"
                if after < covered
                else f"would leave {after - covered} of its elements unprocessed"
            )
            return (
                f"{self.name}={value}: `{call.text}` (line {call.line}) is one instruction over "
                f"a fixed number of elements, {counts}"
                + (f" = {covered}" if len(now) > 1 else "")
                + f", which does not change with {self.name} and is all of `{buf.name}` "
                f"({before} elements) at the current {self.name}={current}; at {value} "
                f"`{buf.name}` holds "
                f"{after}, so the call {effect}"
            )
        if changed is not None and all(
            len(seen := {_int(node, env(chain, k)) for k in (value, current, *PROBES)}) == 1
            and None not in seen
            for node in call.others
        ):
            # the counts cover part of the buffer in a way the call does not spell out (a
            # mask over lanes, strides): the part covered stays, the buffer changes; made
            # only where no argument of the call follows the knob (a repeat computed from it)
            buf_name, before, after = changed
            return (
                f"{self.name}={value}: `{call.text}` (line {call.line}) is one instruction whose "
                f"counts, {', '.join(each)}, do not change with {self.name}, while `{buf_name}` it is "
                f"given would hold {after} elements instead of {before}: the instruction would "
                f"cover the same elements as now, so "
                + (
                    "part of the larger tile would be left out"
                    if after > before
                    else "it would reach past the end of the smaller tile"
                )
            )
        return None

    def _repeats(
        self,
        call: _TileCall,
        chain: tuple[Function, ...],
        value: int,
        current: int,
        env: Callable[[tuple[Function, ...], int], Env],
    ) -> str | None:
        """Rule 2: an 8-bit repeat count, passed or (sort32) computed from the source."""
        if not self.capped:
            return None
        if call.op == "sort32":
            if len(call.buffers) < 2:
                return None
            src = call.buffers[1]
            now = _elements(src, env(chain, current))
            new = _elements(src, env(chain, value))
            if now is None or new is None or now // SORT_GROUP > REPEAT_MAX:
                return None
            if new // SORT_GROUP > REPEAT_MAX:
                return (
                    f"{self.name}={value}: `{call.text}` (line {call.line}) sorts `{src.name}` "
                    f"in one AscendC Sort32 instruction whose repeat count is its elements / "
                    f"{SORT_GROUP} (TileLang-Ascend passes it unsplit): {new} elements give "
                    f"{new // SORT_GROUP} repeats, past the 8-bit limit of {REPEAT_MAX} "
                    f"({now // SORT_GROUP} at the current {self.name}={current})"
                )
            return None
        for label, node in call.counts:
            if not _repeat_like(label):
                continue
            now_r, new_r = _int(node, env(chain, current)), _int(node, env(chain, value))
            if now_r is None or new_r is None or now_r > REPEAT_MAX:
                continue
            if new_r > REPEAT_MAX:
                return (
                    f"{self.name}={value}: `{call.text}` (line {call.line}) passes the repeat "
                    f"count {label} = {new_r}, past the 8-bit limit of {REPEAT_MAX} of an "
                    f"AscendC vector instruction ({now_r} at the current {self.name}={current})"
                )
        return None

    def _rows(
        self,
        call: _TileCall,
        chain: tuple[Function, ...],
        value: int,
        current: int,
        env: Callable[[tuple[Function, ...], int], Env],
    ) -> str | None:
        """Rule 3: sort32's 32-value groups stay inside the rows of its source tile."""
        if call.op != "sort32" or len(call.buffers) < 2:
            return None
        src = call.buffers[1]
        if len(src.dims) < 2:
            return None
        last = src.dims[-1]
        now, new = _int(last, env(chain, current)), _int(last, env(chain, value))
        if now is None or new is None or now == new or now % SORT_GROUP:
            return None
        if new % SORT_GROUP:
            return (
                f"{self.name}={value}: `{call.text}` (line {call.line}) sorts every "
                f"{SORT_GROUP} consecutive values of `{src.name}`, whose rows of "
                f"`{code_of(last)}` = {new} values would no longer be a whole number of "
                f"{SORT_GROUP}-value groups ({now} at the current {self.name}={current}): a "
                f"group would run "
                f"from the end of one row of the tile into the next, sorting other values "
                f"together than now"
            )
        return None


def _pto(f: Facts) -> bool:
    """The file compiles for target "pto" somewhere (`target="pto"`)."""
    found = False

    class _V(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            nonlocal found
            if (
                node.keyword is not None
                and node.keyword.value == "target"
                and isinstance(node.value, cst.SimpleString)
                and node.value.evaluated_value == "pto"
            ):
                found = True

    f.wrapper.module.visit(_V())
    return found


def instruction_count_check(
    f: Facts, name: str, factories: list[Function]
) -> InstructionCountCheck | None:
    """The tile-instruction count rules of knob `name` over `factories`' kernels."""
    kernels: list[tuple[tuple[Function, ...], list[_TileCall]]] = []
    for _, fn in kernels_of(f, factories):
        k = _Kernel(f)
        fn.node.visit(k)
        calls = [c for c in k.tile_calls() if c.buffers]
        if calls:
            kernels.append((fn.chain, calls))
    if not kernels:
        return None
    return InstructionCountCheck(name, kernels, not _pto(f))
