"""What a kernel demands of a knob's value, read from the kernel itself.

For a knob read by a kernel factory (bot/strategies/binding.py) the rules are
(read from its expressions by bot/strategies/exprrules.py, from how it walks its
tiles by bot/strategies/tiling.py):

- every `assert` of the factory that holds with the current value must still
  hold with the new one (`assert top_k % block_I == 0`, `group_size == block_N`);
- a check that raises (`if N % block_N != 0: raise ValueError(...)`) is an assert
  of the opposite condition;
- `X // knob` with a plain shape X, `X % knob` inside an assert or a raising check,
  and `T.ceildiv(X, knob)` when no `T.min(knob, ...)` handles a tail, mean full
  tiles: the new value must divide X. A remainder computed anywhere else
  (`valid = real_top_k % block_I`, then a mask of `valid` lanes) is how a kernel
  handles the partial tile, not a demand for full ones;
- `T.ceildiv(X, knob)` with a tail handled (`T.min(knob, ...)`, or copies through
  slices whose bound grows with the knob, `A[i * knob : (i + 1) * knob]`, which the
  compiler clips at the tensor's end, and no element index computed from the knob,
  `S[i * knob + j]`, which nothing clips) means the block must not exceed X (nor the
  current value, when that already covers X: a larger block adds nothing);
- `T.ceildiv(X, knob)` whose every element access from the knob sits under an `if` that
  keeps its offset below a bound (`if row_idx < M:`) asks nothing: a tile past X idles;
- a loop over `T.ceildiv(X, knob)` tiles whose index picks a row of a tensor
  laid out in `T.ceildiv(X, G)` groups (per-group scales) ties the knob to G;
- when X is open (a `T.symbolic` shape, a runtime size) it takes every size the
  op runs with: from the file (get_inputs, the factory's callers) and declared in
  tune.yaml `shapes:` / DESIGN.md (bot/strategies/shapes.py); a refusal says
  where the size came from. With none, only divisors of the current value are
  provably safe: the current value already divides every shape the op runs with.

A rule the current value itself breaks is not a requirement of this kernel
(e.g. a grid size of 20 over 16 guarded work items) and is ignored. A move
that breaks a rule is refused with the rule, before anything is measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import libcst as cst

from bot.config.schema import DeclaredShape
from bot.strategies import shapes
from bot.strategies.addresses import address_check
from bot.strategies.bandtie import band_check
from bot.strategies.binding import Resolver
from bot.strategies.branches import run_path_taken
from bot.strategies.callerbuffers import caller_buffer_check
from bot.strategies.callsizes import call_sizes, symbol_sizes
from bot.strategies.capacity import capacity_check
from bot.strategies.clamps import clamp_rules
from bot.strategies.copyfit import copy_fit
from bot.strategies.corecount import guarded_share
from bot.strategies.coreshare import core_share_check
from bot.strategies.coverage import coverage_check
from bot.strategies.crossed import crossed_check
from bot.strategies.evaluate import Env, code_of, evaluate
from bot.strategies.exprrules import Rules, aliases_of
from bot.strategies.facts import Call, Facts, Function
from bot.strategies.fixedcount import fixed_count_check, layout_only
from bot.strategies.fixedslice import fixed_slice_check
from bot.strategies.fractal import fractal_check
from bot.strategies.granularity import granularity_check
from bot.strategies.hostasserts import wrapper_asserts
from bot.strategies.hostpad import pad_rules
from bot.strategies.instrcount import instruction_count_check
from bot.strategies.l0fit import l0_check
from bot.strategies.liveness import live_peak
from bot.strategies.lostsize import lost_at
from bot.strategies.overpaper import over_paper
from bot.strategies.paddedtensors import padded_symbols, padded_tiles
from bot.strategies.padflow import clip_extents, padded_reduction
from bot.strategies.passmarks import pass_mark_check
from bot.strategies.pinned import pinned_check
from bot.strategies.roundup import multiple_of
from bot.strategies.sameshape import same_shape_check
from bot.strategies.slicefill import slice_fill
from bot.strategies.tiling import Rule, group_rules, whole_rules
from bot.strategies.ubrows import row_check


class _Idle(str):
    """A refusal only because the block is past the extent it tiles: with a tail handled the
    kernel stays right, and the tile only idles. It holds for the op only if it holds for
    every size the op runs with (a block past the smallest test case tiles the largest)."""

    extent: int

    def __new__(cls, why: str, extent: int) -> _Idle:
        out = super().__new__(cls, why)
        out.extent = extent
        return out


class Check(Protocol):
    """A rule that is not one extent: why `value` breaks the kernel, or None."""

    def __call__(
        self, value: int, current: int | None, env: Callable[[tuple[Function, ...], int], Env]
    ) -> str | None: ...


@dataclass
class Constraints:
    """The rules one knob must meet, for every factory that reads it."""

    name: str
    aliases: frozenset[str]
    rules: list[Rule]
    resolver: Resolver
    checks: list[Check] = field(default_factory=list)  # capacity and other whole-kernel rules
    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # open names -> sizes run with
    open_names: frozenset[str] = frozenset()  # left open by the kernel: declared shapes fill these
    symbols: dict[str, str] = field(default_factory=dict)  # T.symbolic("name") -> Python name
    joint: tuple[dict[str, int], ...] = ()  # the sizes each call path binds together
    layout: str | None = None  # why the knob is a size of the kernel's data, not a tile

    def _env(self, chain: tuple[Function, ...], value: int) -> Env:
        return Env(self.resolver, chain, 0, {a: value for a in self.aliases})

    def violation(
        self, value: int, current: int | None, declared: tuple[DeclaredShape, ...] = ()
    ) -> str | None:
        """Why `value` breaks the kernel, or None. `declared`: the op's declared shapes
        (tune.yaml, DESIGN.md); they fill only the names the kernel leaves open."""
        if isinstance(value, bool):
            return None
        if value <= 0:
            return f"{self.name}={value}: a block size must be positive"
        sizes, origins = self.declared_sizes(declared)
        for name, size, _ in self.contradicted(current, sizes, origins):
            sizes[name] = tuple(v for v in sizes[name] if v != size)
            if not sizes[name]:
                del sizes[name]  # unknown again: the rules for an unknown extent apply
        idle: list[tuple[int, str]] = []  # (extent, why) for sizes where the block only idles
        hard: str | None = None  # the first rule broken outright, at a size where it also idles
        useful = False  # some size the op runs with has work for the block and no rule broken
        alone: tuple[str | None, _Idle | None] | None = None  # the problems with no sizes set
        try:
            for choice in shapes.choices(sizes, self.joint):
                self.resolver.fallback = choice  # open sizes: every one the op runs with
                broken, idles = self._problems(value, current)
                if broken is None and idles is None:
                    useful = True
                    continue
                self.resolver.fallback = {}
                if alone is None:
                    alone = self._problems(value, current)
                if idles is None:  # wrong at a size with work for it: refused, whatever else
                    return _noted(broken or "", alone[0], choice, origins)
                idle.append((idles.extent, _noted(idles, alone[1], choice, origins)))
                if broken is not None and hard is None:
                    hard = _noted(broken, alone[0], choice, origins)
        finally:
            self.resolver.fallback = {}
        if idle and not useful:  # past the extent of every size: say that first
            return max(idle, key=lambda item: item[0])[1]
        return hard

    def whole_extent(self, current: int) -> str | None:
        """Why the knob is the extent itself rather than a tile size, or None: each knob-sized
        tile makes one write at the same place (a per-row result of a reduction over the knob's
        axis), so the kernel is right only with one tile over the whole extent, and the file
        fixes that extent nowhere (no size it runs the op with gives it): the current value
        stands for a problem size the caller sets. Checked with the file's sizes, as a move
        is; where they fix the extent the knob stays, its one valid value known."""
        wholes = [
            r
            for r in self.rules
            if r.kind == "whole" and evaluate(r.node, self._env(r.chain, current)) is None
        ]
        others = {current * 2, max(1, current // 2)} - {current}
        if not wholes or not others:
            return None
        sizes, _ = self.declared_sizes(())
        found: Rule | None = None
        try:
            for choice in shapes.choices(sizes, self.joint):
                self.resolver.fallback = choice
                hit = next(
                    (
                        r
                        for r in wholes
                        if evaluate(r.node, self._env(r.chain, current)) is None
                        and all(self._check(r, v, current) for v in others)
                    ),
                    None,
                )
                if hit is None:
                    return None
                found = found or hit
        finally:
            self.resolver.fallback = {}
        if found is None:
            return None
        return (
            f"every {self.name}-sized tile writes `{found.text}` (line {found.line}), which does "
            f"not depend on the tile's position, so a second tile would overwrite the first: "
            f"{self.name} must cover the whole extent `{code_of(found.node)}`, which this "
            f"file fixes nowhere: the current {current} stands for that problem size, which "
            f"the caller sets; it is not a tile size to tune"
        )

    def declared_sizes(
        self, declared: tuple[DeclaredShape, ...]
    ) -> tuple[dict[str, tuple[int, ...]], dict[tuple[str, int], str]]:
        """The sizes the rules use (the file's and the declared ones), and each one's origin."""
        return shapes.merged(self.sizes, self.open_names, declared, self.symbols)

    def contradicted(
        self,
        current: int | None,
        sizes: dict[str, tuple[int, ...]],
        origins: dict[tuple[str, int], str],
    ) -> list[tuple[str, int, str]]:
        """(name, size, why) for each declared size with which the current value itself breaks
        a rule: the declaration does not describe the kernel as it runs, so it is not used (a
        wrong declaration must not lift the rule that guards the unknown extent)."""
        if current is None or all(o == shapes.IN_FILE for o in origins.values()):
            return []
        out: list[tuple[str, int, str]] = []
        try:
            alone = self._violation(current, None)
            for (name, size), origin in origins.items():
                if origin == shapes.IN_FILE or size not in sizes.get(name, ()):
                    continue
                self.resolver.fallback = {name: size}
                problem = self._violation(current, None)
                self.resolver.fallback = {}
                if problem and problem != alone:
                    out.append((name, size, problem))
        finally:
            self.resolver.fallback = {}
        return out

    def _violation(self, value: int, current: int | None) -> str | None:
        """The first rule `value` breaks with the sizes now set (past the extent first)."""
        broken, idles = self._problems(value, current)
        return idles or broken

    def _problems(self, value: int, current: int | None) -> tuple[str | None, _Idle | None]:
        """The first rule `value` breaks outright, and the first that says it only idles
        past the extent it tiles (`_Idle`), with the sizes now set."""
        idle: _Idle | None = None
        for rule in self.rules:
            problem = self._check(rule, value, current)
            if isinstance(problem, _Idle):
                idle = idle or problem
            elif problem:
                return problem, idle
        for check in self.checks:
            problem = check(value, current, self._env)
            if problem:
                return problem, idle
        return None, idle

    def _check(self, rule: Rule, value: int, current: int | None) -> str | None:
        if rule.kind == "assert":
            now = (
                evaluate(rule.node, self._env(rule.chain, current)) if current is not None else None
            )
            if now is False:
                return None  # the kernel's own assert already fails: not ours to judge
            verdict = evaluate(rule.node, self._env(rule.chain, value))
            if verdict is False:
                return f"{self.name}={value} breaks the kernel's assert at line {rule.line}: `{rule.text}`"
            x = _divided(rule.node, self.aliases) if verdict is None and now is None else None
            if (
                x is not None
                and current
                and current % value != 0
                and not multiple_of(self.resolver, x, rule.chain, self.aliases)
            ):  # (an extent the host rounds up to the knob holds any value)
                # `assert size % block_K == 0` over a size the file does not fix: the current
                # value passes it, so only its divisors provably do
                return (
                    f"{self.name}={value}: the assert at line {rule.line} (`{rule.text}`) needs "
                    f"{self.name} to divide `{code_of(x)}`, which tunebot could not size from "
                    f"this file; only divisors of the current {current} are planned"
                )
            return None
        if rule.kind == "raises":
            now = (
                evaluate(rule.node, self._env(rule.chain, current)) if current is not None else None
            )
            if now is True:
                return None  # the kernel already raises with the current value: not ours to judge
            if evaluate(rule.node, self._env(rule.chain, value)) is True:
                return (
                    f"{self.name}={value} makes the kernel raise: `if {rule.text}` "
                    f"(line {rule.line}) holds"
                )
            return None
        extent = evaluate(
            rule.node, self._env(rule.chain, current if current is not None else value)
        )
        if isinstance(extent, bool) or (extent is not None and not isinstance(extent, int)):
            return None
        if rule.kind == "exact":
            if extent is None:
                if not current or current % value == 0:
                    return None
                lost = lost_at(self.resolver, rule.chain, rule.node)  # where its size is lost
                unsized = (
                    f"tunebot could not size its extent ({lost})"
                    if lost
                    else "tunebot could not resolve its extent from this file"
                )
                if rule.why:
                    return (
                        f"{self.name}={value}: `{rule.text}` (line {rule.line}) leaves a partial "
                        f"last tile when {self.name} does not divide its extent, and {rule.why}; "
                        f"{unsized}, so only divisors of the current {current} are planned"
                    )
                return (
                    f"{self.name}={value}: `{rule.text}` (line {rule.line}) needs full tiles and "
                    f"{unsized}; only divisors of the current {current} are planned"
                )
            if current and extent % current != 0:
                # the current value does not divide it either, so a partial last tile already
                # runs and full tiles are no requirement here; a tile past the extent only idles
                return self._check(replace(rule, kind="cap"), value, current)
            if extent % value != 0 and rule.why:
                return (
                    f"{self.name}={value} does not divide {extent}: `{rule.text}` (line "
                    f"{rule.line}) would leave a partial last tile, and {rule.why}"
                )
            if extent % value != 0:
                return (
                    f"{self.name}={value} does not divide {extent} "
                    f"(`{rule.text}` at line {rule.line} needs full tiles)"
                )
            return None
        if rule.kind == "multiple":
            if not extent or extent < 2 or (current and current % extent != 0):
                return None  # the current value is not a multiple either: not a requirement here
            if value % extent != 0 and rule.why:  # a part of a part of the knob
                return (
                    f"{self.name}={value} is not a multiple of {extent}: `{rule.text}` "
                    f"(line {rule.line}), {rule.why}, needs {self.name} in whole parts of "
                    f"{extent}"
                )
            if value % extent != 0:
                return (
                    f"{self.name}={value} is not a multiple of {extent}: `{rule.text}` "
                    f"(line {rule.line}) splits it into parts of {extent}"
                )
            return None
        if rule.kind == "whole":
            target = extent if extent is not None else current
            if target is None or (current is not None and current != target):
                return None  # the current value does not cover the extent either
            if value != target:
                known = f"the extent {extent}" if extent is not None else f"the current {current}"
                return (
                    f"{self.name}={value}: every {self.name}-sized tile writes `{rule.text}` "
                    f"(line {rule.line}), which does not depend on the tile's position, so a "
                    f"second tile would overwrite the first; {self.name} must cover the whole "
                    f"extent ({known})"
                )
            return None
        if rule.kind == "equal":
            target = extent if extent is not None else current
            if target is not None and current is not None and current != target:
                return None
            if target is not None and value != target:
                return (
                    f"{self.name}={value}: the loop over {self.name}-sized tiles indexes `{rule.text}` "
                    f"(line {rule.line}), laid out in groups of {target}"
                )
            return None
        if rule.kind == "cap" and extent is not None:
            if current and current > extent:  # one tile already covers the extent
                if value > current:
                    return _Idle(
                        f"{self.name}={value} exceeds the extent {extent} it tiles (`{rule.text}` "
                        f"at line {rule.line}); the current {current} already covers it in one tile",
                        extent,
                    )
                return None
            if value > extent:
                return _Idle(
                    f"{self.name}={value} exceeds the extent {extent} it tiles (`{rule.text}` "
                    f"at line {rule.line})",
                    extent,
                )
        return None


def _noted(
    problem: str, alone: str | None, choice: dict[str, int], origins: dict[tuple[str, int], str]
) -> str:
    """`problem` with the sizes it was found at, unless it holds without them (`alone`)."""
    return problem + ("" if alone == problem else shapes.note(choice, origins))


def _divided(test: cst.BaseExpression, aliases: frozenset[str]) -> cst.BaseExpression | None:
    """X of an assert `X % knob == 0` (or `0 == X % knob`), else None."""
    if not (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
    ):
        return None
    for side, other in (
        (test.left, test.comparisons[0].comparator),
        (test.comparisons[0].comparator, test.left),
    ):
        if (
            isinstance(side, cst.BinaryOperation)
            and isinstance(side.operator, cst.Modulo)
            and isinstance(side.right, cst.Name)
            and side.right.value in aliases
            and isinstance(other, cst.Integer)
            and other.value == "0"
        ):
            return side.left
    return None


def _clipped_elsewhere(
    resolver: Resolver, rule: Rule, clips: list[tuple[cst.BaseExpression | None, int]]
) -> str | None:
    """Why slices clipped at the tensor's end do not handle the tail of `rule`'s extent X:
    they clip at a tensor dim other than X (a per-group size inside one tensor, where a
    partial tile reads and writes the next group's elements). None when one clips at X, or
    when a clipped dim cannot be read."""
    if not clips or any(dim is None for dim, _ in clips):
        return None
    env = Env(resolver, rule.chain, 0)
    x = code_of(rule.node)
    x_value = evaluate(rule.node, env)
    for dim, _ in clips:
        assert dim is not None
        if code_of(dim) == x:
            return None
        value = evaluate(dim, env)
        if type(value) is int and value == x_value:
            return None
    at = " or ".join(dict.fromkeys(f"`{code_of(d)}`" for d, _ in clips if d is not None))
    lines = ", ".join(str(line) for line in sorted({line for _, line in clips}))
    return (
        f"the copies that clip a partial tile (line {lines}) clip it at {at}, not at `{x}`, "
        f"so a partial last tile would read and write elements past `{x}`"
    )


def constraints_for(
    f: Facts,
    resolver: Resolver,
    name: str,
    owners: list[tuple[Function | None, Function]],
    calls: tuple[Call, ...] = (),
) -> Constraints:
    """Rules for `name` as read by each (owner, factory): owner holds the name, factory the
    prim_func. `calls`: the only calls the knob's literal reaches (a module constant some calls
    share): the sizes come from those calls alone."""
    rules: list[Rule] = []
    all_aliases: set[str] = set()
    sized_by: list[tuple[Function, set[str]]] = []

    def taken(test: cst.BaseExpression, chain: tuple[Function, ...]) -> bool | None:
        return run_path_taken(resolver, chain, test)

    clamps: list[list[Rule]] = []  # per factory: a clamp idles only where every one clamps
    for owner, factory in owners:
        root = owner or factory
        chain = root.chain
        aliases = aliases_of(name, factory.chain, f)
        all_aliases |= aliases
        sized_by.append((factory, aliases))
        v = Rules(f, aliases, chain[:-1], root, taken)
        root.node.visit(v)
        rules.extend(
            r
            for r in v.rules  # an extent the file pads to whole blocks demands nothing
            if r.kind != "exact" or not multiple_of(resolver, r.node, r.chain, frozenset(aliases))
        )
        rules.extend(group_rules(f, factory, aliases))
        rules.extend(wrapper_asserts(resolver, factory, aliases))
        rules.extend(pad_rules(f, v.ceil, shapes.symbols([factory]), chain))
        rules.extend(whole_rules(f, factory, aliases))
        clamps.append(clamp_rules(f, factory, aliases))
        if not v.tail_handled:  # `T.ceildiv(knob, X)` walked in whole tiles of X
            rules.extend(v.tiled)
        clipped = v.tail_handled and not v.tails  # handled only by slices the compiler clips
        leak = padded_reduction(f, factory, v.sized, v.offsets, taken) if clipped else None
        clips = clip_extents(f, factory, v.sized, v.offsets, taken) if clipped and not leak else []
        padded: bool | None = None  # the host pads every tensor a tile touches (once per factory)
        for r in v.ceil:
            if multiple_of(resolver, r.node, r.chain, frozenset(aliases)):
                continue
            if guarded_share(aliases, factory, r.node):
                continue  # a core count: each core's share of guarded work items, no tile
            if not v.tail_handled and v.tail_guarded:
                # a guarded tail takes any value, but a tile past the extent only idles
                rules.append(Rule("cap", r.node, r.chain, r.line, r.text, ""))
                continue
            if padded is None:
                padded = padded_tiles(f, resolver, factory, aliases, v.offsets)
            if padded:
                continue  # a partial last tile ends inside tensors padded to whole tiles
            why = leak or _clipped_elsewhere(resolver, r, clips)
            whole = v.whole_tile_copy(r) if v.tail_handled else None
            if whole is not None and not why:  # a `T.min` elsewhere does not clip this copy
                why = (
                    f"the copy at line {whole} moves a whole {name}-sized tile at an offset "
                    f"this loop sets, which nothing clips"
                )
            kind = "cap" if v.tail_handled and not why else "exact"
            rules.append(Rule(kind, r.node, r.chain, r.line, r.text, why or ""))
    if clamps and all(clamps):  # a factory that reads it unclamped makes larger values count
        rules.extend(r for found in clamps for r in found)
    factories = list({id(fac): fac for _, fac in owners}.values())
    capacity = capacity_check(f, name, factories)
    padded_sizes = frozenset(
        n for fac, aliases in sized_by for n in padded_symbols(f, resolver, fac, aliases)
    )
    fit = copy_fit(f, name, factories, padded_sizes)
    fixed = fixed_count_check(f, name, sized_by)
    layout = layout_only(f, sized_by)
    l0 = l0_check(f, name, factories)
    fractal = fractal_check(f, name, factories)
    rows = row_check(f, name, factories)
    crossed = crossed_check(f, name, all_aliases, factories)
    band = band_check(f, name, all_aliases, factories)
    pinned = pinned_check(f, name, all_aliases, factories)
    part = fixed_slice_check(f, name, all_aliases, factories)
    granular = granularity_check(f, resolver, name, all_aliases, factories)
    passed = caller_buffer_check(f, name, factories)
    filled = slice_fill(f, name, factories)
    peak = live_peak(f, name, factories)
    grown = over_paper(f, name, factories)
    covered = coverage_check(f, name, factories)
    counted = instruction_count_check(f, name, factories)
    marked = pass_mark_check(f, name, factories)
    placed = address_check(f, name, factories)
    dealt = core_share_check(f, name, factories)
    same = same_shape_check(f, name, factories)
    open_: set[str] = set()
    joint: list[dict[str, int]] = []
    for factory in factories:
        wanted = shapes.open_names(f, resolver, factory)
        open_ |= wanted
        if not calls:  # a constant some calls share: only those calls' sizes (shapes.sizes)
            joint += [p for p in call_sizes(f, resolver, factory, wanted) if p not in joint]
    sizes = shapes.sizes(f, resolver, factories, calls)
    for factory in factories:  # `kernel(a, ...)` binds a symbolic M to a size of a
        wanted = shapes.open_names(f, resolver, factory)
        for open_name, found in symbol_sizes(f, resolver, factory, wanted).items():
            if open_name not in sizes:  # the file's own literals for the name come first
                sizes[open_name] = tuple(found)
    for path in joint:
        for open_name, size in path.items():
            if size not in sizes.get(open_name, ()):
                sizes[open_name] = (*sizes.get(open_name, ()), size)
    return Constraints(
        name,
        frozenset(all_aliases),
        rules,
        resolver,
        [
            c
            for c in (
                capacity,
                peak,
                grown,
                fit,
                filled,
                fixed,
                l0,
                fractal,
                crossed,
                band,
                pinned,
                part,
                granular,
                passed,
                covered,
                counted,
                marked,
                placed,
                dealt,
                same,
                rows,  # last: a more specific rule's reason comes first
            )
            if c is not None
        ],
        sizes,
        frozenset(open_),
        shapes.symbols(factories),
        tuple(joint),
        layout,
    )
