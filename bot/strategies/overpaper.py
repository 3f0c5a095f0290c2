"""A pipelined kernel already past a memory on paper: no growth past what the file runs with.

bot/strategies/capacity.py refuses a value whose buffers, as allocated, overflow a memory the
current value fits in, and says nothing when the current value does not fit either: the
file runs, so its compiler places more than the plain sum suggests (memory planning reuses
the bytes of buffers whose lifetimes do not overlap). bot/strategies/liveness.py bounds
what such reuse can achieve from the lifetimes in source order.

Inside a `T.Pipelined` loop of depth 2 or more that bound does not hold: the software
pipeline keeps a buffer that crosses stages once per stage (TileLang's
InjectSoftwarePipeline gives such buffers one version per stage), and which buffers cross
depends on the stage split the compiler makes, so lifetimes read in source order
understate the need by an amount the file does not show. What the file does show is that
its own allocation fits at its own value. So for a kernel whose buffers of a memory, as
allocated, already exceed that memory at the current value, and some of which a pipelined
loop of depth >= 2 uses, a value that allocates more of that memory than the current one
is refused: the limit is never set below what the file's own run needs, and never raised
past it without evidence. Shrinking, and growth of other memories, are judged as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.strategies import dialect
from bot.strategies.capacity import CAPACITY, KIB, Buffer, kernel_buffers, use
from bot.strategies.evaluate import Env, evaluate
from bot.strategies.facts import Facts, Function, names_in
from bot.strategies.pipeline import loops_in, num_stages


@dataclass(frozen=True)
class _Loop:
    line: int
    stages: cst.BaseExpression | None  # num_stages, None when absent (0)
    uses: frozenset[str]  # names the body reads or writes


def _loops(f: Facts, pf: cst.FunctionDef) -> list[_Loop]:
    """The `for ... in T.Pipelined(...)` loops of a prim_func (pipeline.py finds them)."""
    return [
        _Loop(f.line(p.loop), num_stages(p.call), frozenset(names_in(p.loop.body)))
        for p in loops_in(f.wrapper, pf)
        if p.loop is not None
    ]


@dataclass
class OverPaper:
    name: str
    # per kernel: its buffers, its pipelined loops, and the chain to evaluate num_stages in
    kernels: list[tuple[list[Buffer], list[_Loop], tuple[Function, ...]]]

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None:
        if current is None:
            return None
        for group, loops, chain in self.kernels:
            now_use, new_use = use(group, current, env), use(group, value, env)
            for memory, (now, _) in now_use.items():
                limit = CAPACITY.get(memory)
                new = new_use.get(memory, (0, []))[0]
                if limit is None or now <= limit or new <= now:
                    continue
                names = {b.name for b in group if b.memory == memory}
                deep = [
                    (loop, depth)
                    for loop in loops
                    if loop.uses & names
                    and type(depth := _depth(loop, env(chain, current))) is int
                    and depth >= 2
                ]
                if not deep:
                    continue
                loop, depth = deep[0]
                return (
                    f"{self.name}={value}: the kernel's {memory} buffers as allocated would take "
                    f"{new} bytes; at the current {current} they already take {now}, past the "
                    f"{limit // KIB} KiB {memory} holds on Ascend A2/A3, so the file fits only "
                    f"through the compiler's memory planning; the T.Pipelined loop at line "
                    f"{loop.line} (num_stages={depth}) keeps buffers that cross stages once per "
                    f"stage, so nothing in the file shows that more than its own {now} bytes "
                    f"still fit"
                )
        return None


def _depth(loop: _Loop, env: Env) -> object:
    return 0 if loop.stages is None else evaluate(loop.stages, env)


def over_paper(f: Facts, name: str, factories: list[Function]) -> OverPaper | None:
    """The rule for knob `name` over the kernels of `factories`; None where no kernel has a
    pipelined loop (or in the auto-scheduled dialect, whose stage buffers stagefit.py counts)."""
    if dialect.auto_scheduled(f.wrapper.module):
        return None
    by_node = {id(fn.node): fn for fn in f.functions}
    kernels = []
    for factory in factories:
        for pf in factory.prim_funcs:
            loops = _loops(f, pf)
            mine = kernel_buffers(f, by_node[id(pf)]) if loops else []
            if mine:
                kernels.append((mine, loops, by_node[id(pf)].chain))
    return OverPaper(name, kernels) if kernels else None
