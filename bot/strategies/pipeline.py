"""Pipeline depth: `num_stages` of one `T.Pipelined(...)` loop (0 = pipelining off).

Where `num_stages` is a literal it is changed in place; where it is absent
(upstream's default, 0) the keyword is added; where it is a name (a factory
parameter, a constant) the change goes to the one literal that name is bound
to where the loop reads it (scope-correct: bot/strategies/binding.py; a
same-named variable in another function is never touched). CPU demo ops have no T.Pipelined: they declare a
module constant knob with `strategy: pipeline_depth` in tune.yaml instead,
which the planner sends to the knob transform directly.

A kernel compiled for target npuir gets no depth move (`unpipelined`): that target's lowering
runs no software-pipeline pass, so every num_stages compiles to the same kernel.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.config.schema import DEFAULT_HARNESS
from bot.strategies import binding, carried, dialect, facts, installed, slots, stagefit, unbuilt
from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.source import (
    ParseFailure,
    dotted,
    int_value,
    line_of,
    literal_node,
    make_variant,
    parse,
    replace_node,
    with_keyword,
)

STRATEGY = "pipeline_depth"
DEFAULT_DEPTHS: tuple[int, ...] = (0, 1, 2, 3, 4)
# the deepest pipeline the transform writes: every stage past the first holds another copy of
# the loop's tiles on chip, and no upstream kernel is known to be verified deeper than this
MAX_DEPTH = max(DEFAULT_DEPTHS)

# The npuir target's lowering and the software-pipeline passes. In both upstream TileLang-NPUIR
# compilers (tile-ai/tilelang-ascend branch npuir bd7c60c, tile-ai/tilelang-mlir-ascend c07227b)
# `tilelang/engine/phase.py` OptimizeForTarget's `elif target.kind.name == "npuir":` branch runs
# NpuLoopVectorize, LegalizeNpuirBF16, PlanAndUpdateBufferAllocationLocation, LowerOpaqueBlock,
# LowerNpuirBlock, RemoveNoOp and returns: PipelinePlanning / InjectSoftwarePipeline run only in
# the other targets' branches, and the npuir codegen never reads num_stages. So every depth of a
# T.Pipelined loop compiles to the same npuir kernel. An installed TileLang's phase.py is read
# (never imported) so that a compiler whose npuir branch pipelines lifts the refusal.
PIPELINE_PASSES = ("PipelinePlanning", "InjectSoftwarePipeline")
_NPUIR_BRANCH = re.compile(
    r"""^(\s*)(?:el)?if\s+target\.kind\.name\s*==\s*["']npuir["']\s*:""", re.M
)
UPSTREAM_LOWERING = (
    "upstream TileLang-NPUIR (tile-ai/tilelang-ascend npuir bd7c60c, tilelang-mlir-ascend "
    "c07227b); TileLang is not installed here"
)


@dataclass(frozen=True)
class PipelinedLoop:
    index: int  # 0-based, in source order
    line: int
    stages: int | None  # literal value; 0 when the keyword is absent; None when it is a name
    bound_to: str | None  # the name num_stages is bound to, if any
    call: cst.Call
    # the `for` the call drives (`for k in T.Pipelined(...)`), None for a call elsewhere
    loop: cst.For | None = field(default=None, compare=False)


def num_stages(call: cst.Call) -> cst.BaseExpression | None:
    """What a `T.Pipelined(...)` call passes as num_stages, None when it is absent (0)."""
    return next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_stages"),
        None,
    )


class _Finder(cst.CSTVisitor):
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.loops: list[PipelinedLoop] = []
        self.fors: dict[int, cst.For] = {}  # id of a for's iterator -> the for

    def visit_For(self, node: cst.For) -> None:
        self.fors[id(node.iter)] = node  # visited before its iterator's call

    def visit_Call(self, node: cst.Call) -> None:
        if not dotted(node.func).endswith("Pipelined"):
            return
        given = num_stages(node)
        stages: int | None = 0
        bound: str | None = None
        if given is not None:
            stages = int_value(given)
            if stages is None and isinstance(given, cst.Name):
                bound = given.value
        self.loops.append(
            PipelinedLoop(
                len(self.loops),
                line_of(self.wrapper, node),
                stages,
                bound,
                node,
                self.fors.get(id(node)),
            )
        )


def loops_in(wrapper: MetadataWrapper, node: cst.CSTNode) -> list[PipelinedLoop]:
    """Every T.Pipelined call under `node` (a node of `wrapper`'s module), in source order;
    indexes count from the first one under `node`."""
    finder = _Finder(wrapper)
    node.visit(finder)
    return finder.loops


def find_loops(source: str) -> list[PipelinedLoop]:
    """Every T.Pipelined call in the source; [] if none (or the source does not parse)."""
    try:
        return list(_scan(source)[1])
    except ParseFailure:
        return []


@lru_cache(maxsize=256)
def _scan(source: str) -> tuple[MetadataWrapper, tuple[PipelinedLoop, ...]]:
    wrapper = parse(source)
    finder = _Finder(wrapper)
    wrapper.visit(finder)
    return wrapper, tuple(finder.loops)


class _SetStages(cst.CSTTransformer):
    def __init__(self, target: cst.Call, depth: int) -> None:
        self.target, self.depth = target, depth

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if original_node is not self.target:
            return updated_node
        args = list(updated_node.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == "num_stages":
                args[i] = a.with_changes(value=literal_node(self.depth))
                return updated_node.with_changes(args=args)
        return with_keyword(updated_node, "num_stages", literal_node(self.depth))


@lru_cache(maxsize=1024)  # pure: the planner re-derives the same variants while it searches
def set_depth(
    source: str, depth: int, index: int = 0, name: str = "kernel.py"
) -> Variant | Refusal:
    """Set num_stages of the `index`-th T.Pipelined loop to `depth` (the source edit; whether
    the target's lowering reads it is `unpipelined`, which the planner asks first)."""
    if depth < 0:
        return Refusal((f"num_stages must be >= 0 (0 = off), not {depth}",), strategy=STRATEGY)
    try:
        wrapper, loops = _scan(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=STRATEGY)
    if not loops:
        return Refusal(
            (
                "no T.Pipelined(...) loop in the source; declare a pipeline_depth knob in tune.yaml "
                "to tune a constant instead",
            ),
            strategy=STRATEGY,
        )
    if index >= len(loops):
        return Refusal(
            (f"there are only {len(loops)} T.Pipelined loops, not {index + 1}",), strategy=STRATEGY
        )
    loop = loops[index]
    current = current_depth(source, index)
    if depth == 0 and current != 0 and dialect.auto_scheduled(source):
        return Refusal(
            (
                f"T.Pipelined at line {loop.line}: num_stages=0 in the auto-scheduled Ascend "
                f"dialect, where each stage is one version of the buffers the loop writes: "
                f"1 is already the loop without overlap, and 0 stages would keep no version",
            ),
            strategy=STRATEGY,
        )
    too_deep = _too_deep(loop, depth, current)
    if too_deep:
        return Refusal((too_deep,), strategy=STRATEGY)
    unfit = (
        stagefit.refusal(facts.facts(source), loop.line, loop.bound_to, depth, current, source)
        if current is not None
        else None
    )
    if unfit:
        return Refusal((unfit,), strategy=STRATEGY)
    crossed_trips = carried.refusal(wrapper, loop.call, loop.line, depth, current)
    if crossed_trips:
        return Refusal((crossed_trips,), strategy=STRATEGY)
    few_slots = slots.refusal(wrapper, loop.call, loop.line, depth, current)
    if few_slots:
        return Refusal((few_slots,), strategy=STRATEGY)
    if loop.bound_to is not None:
        # num_stages=<name>: change the one literal that name is bound to where the loop reads it.
        return _set_bound(source, loop, depth, name)
    if loop.stages is None:
        return Refusal(
            (f"T.Pipelined at line {loop.line}: num_stages is an expression, not a literal",),
            strategy=STRATEGY,
        )
    if loop.stages == depth:
        return Refusal(
            (f"T.Pipelined at line {loop.line} already has num_stages={depth}",), strategy=STRATEGY
        )
    new_source = wrapper.module.visit(_SetStages(loop.call, depth)).code
    where = f"T.Pipelined #{index + 1} at line {loop.line}"
    change = Change(
        strategy=STRATEGY,
        description=f"num_stages: {loop.stages} -> {depth} ({where})",
        knob=f"num_stages#{index}",
        old=loop.stages,
        new=depth,
    )
    return make_variant(source, new_source, change, name)


def npuir_branch(phase_text: str) -> str | None:
    """The body of OptimizeForTarget's npuir branch in `phase_text` (lines indented deeper than
    its `if`/`elif`), or None when the file has no such branch. (LowerAndLegalize has an npuir
    branch of its own, which is not the one that would pipeline.)"""
    start = phase_text.find("def OptimizeForTarget(")
    if start < 0:
        return None
    end = phase_text.find("\ndef ", start + 1)
    m = _NPUIR_BRANCH.search(phase_text[start : end if end >= 0 else len(phase_text)])
    if m is None:
        return None
    indent = len(m.group(1))
    body: list[str] = []
    for line in phase_text[start + m.end() :].splitlines()[1:]:
        stripped = line.strip()
        if stripped and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


@functools.cache
def npuir_pipelines() -> tuple[bool, str]:
    """Whether the npuir target's lowering runs a software-pipeline pass, and where that comes
    from: the installed TileLang's tilelang/engine/phase.py (read, never imported) when it has
    an npuir branch, else upstream's two compilers (which run none)."""
    for path, text in installed.tilelang_files("engine/phase.py"):
        branch = npuir_branch(text)
        if branch is not None:
            return any(p in branch for p in PIPELINE_PASSES), f"installed TileLang ({path})"
    return False, UPSTREAM_LOWERING


def unpipelined(source: str) -> str | None:
    """Why no depth of any T.Pipelined loop in `source` changes the compiled kernel (it is
    compiled for target npuir, whose lowering runs no software-pipeline pass), or None."""
    if not dialect.npuir_target(source):
        return None
    pipelines, where = npuir_pipelines()
    if pipelines:
        return None
    return (
        "the npuir target's lowering (tilelang/engine/phase.py OptimizeForTarget) runs no "
        "software-pipeline pass: num_stages is stored, never read, so every depth compiles to "
        f"the same kernel (read from {where})"
    )


def unpipelined_at(source: str, index: int) -> str | None:
    """`unpipelined`'s reason for the `index`-th T.Pipelined loop, naming its line, or None."""
    loops = find_loops(source)
    no_pass = unpipelined(source) if index < len(loops) else None
    return f"T.Pipelined at line {loops[index].line}: {no_pass}" if no_pass else None


def _too_deep(loop: PipelinedLoop, depth: int, current: int | None) -> str | None:
    """Why `depth` is deeper than the transform writes, or None. A file that already runs the
    loop deeper may have it lowered: each stage fewer holds one copy fewer on chip."""
    where = f"T.Pipelined at line {loop.line}"
    if depth > MAX_DEPTH and (current is None or depth > current):
        return (
            f"{where}: num_stages={depth} is past the deepest pipeline tunebot writes "
            f"({MAX_DEPTH}): each further stage holds another copy of the loop's tiles on chip"
        )
    return None


def _bound_site(source: str, loop: PipelinedLoop) -> binding.Resolution:
    f = facts.facts(source)
    assert loop.bound_to is not None
    return binding.Resolver(f).name(loop.bound_to, f.chain_at(loop.line))


def _set_bound(source: str, loop: PipelinedLoop, depth: int, name: str) -> Variant | Refusal:
    r = _bound_site(source, loop)
    site = r.site
    if site is None or r.problem or isinstance(site.value, bool):
        why = r.problem or f"'{loop.bound_to}' is not an integer literal"
        return Refusal(
            (f"T.Pipelined at line {loop.line}: num_stages={loop.bound_to}: {why}",),
            strategy=STRATEGY,
        )
    if site.value == depth:
        return Refusal((f"{loop.bound_to} is already {depth}",), strategy=STRATEGY)
    new_source = replace_node(facts.facts(source).wrapper.module, site.node, literal_node(depth))
    label = loop.bound_to if site.name == loop.bound_to else f"{loop.bound_to} (via {site.name})"
    change = Change(
        strategy=STRATEGY,
        description=f"{label}: {site.value} -> {depth} ({site.where()})",
        knob=loop.bound_to,
        old=site.value,
        new=depth,
    )
    return make_variant(source, new_source, change, name)


def current_depth(source: str, index: int = 0) -> int | None:
    """The effective num_stages of loop `index` (following a bound name), or None."""
    loops = find_loops(source)
    if index >= len(loops):
        return None
    loop = loops[index]
    if loop.bound_to is not None:
        r = _bound_site(source, loop)
        value = r.site.value if r.site is not None and not r.problem else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return loop.stages


def not_tunable(source: str, index: int, harness: tuple[str, ...] = DEFAULT_HARNESS) -> str | None:
    """Why loop `index` has no depth a run can move (one line with the loop's line), or None."""
    dead = _in_unbuilt(source, index, harness)
    if dead:
        return dead
    no_pass = unpipelined_at(source, index)
    if no_pass:
        return no_pass
    if current_depth(source, index) is not None:
        return None
    r = set_depth(source, 1, index)
    reason = r.reason if isinstance(r, Refusal) else "num_stages is not a single integer literal"
    loop = find_loops(source)[index]
    return (
        reason
        if reason.startswith("T.Pipelined at line")
        else (f"T.Pipelined at line {loop.line}: {reason}")
    )


def _in_unbuilt(source: str, index: int, harness: tuple[str, ...]) -> str | None:
    """Why loop `index` sits in a kernel factory the file never builds (bot/strategies/
    unbuilt.py: one only parsed as text, or one its run path never calls), or None: a depth
    there changes nothing that runs."""
    try:
        f = facts.facts(source)
    except ParseFailure:
        return None
    loop = find_loops(source)[index]
    chain = f.chain_at(loop.line)
    if not chain:
        return None
    dead = [fac for fac in unbuilt.unbuilt(f, harness) if fac.chain[0] is chain[0]]
    if not dead:
        return None
    inspected = any(fac in unbuilt.only_inspected(f, harness) for fac in dead)
    return f"T.Pipelined at line {loop.line} is in " + unbuilt.never_built(
        [chain[0].name], inspected
    )
