"""The planner: which ONE change to try next, as a pure function of (best source, history).

Nothing is kept between calls: a resumed run rebuilds the history from
results.jsonl and plans exactly as before. The order (docs/strategies.md):

1. Candidate moves are built from the best source: each knob (declared in
   tune.yaml, or discovered block_*/BLOCK_* names, each T.Pipelined loop,
   the auto multi-buffer pass config) may step to its neighbouring value up
   or down; each proposer strategy may be asked once per best source; the
   style-only v-prefix rename comes last.
2. Moves are ranked by tier, then by score = expected gain (catalog) x
   evidence weight (this repository's history). Tier 0: keep going in the
   direction that just won. Tier 1: fresh moves. Tier 2: a direction that
   lost (or that we came from) at this knob value, retried only because
   another knob has changed since. A direction that lost from the current
   best is abandoned as a neighbour move; one that measured faster but
   within the noise (a plateau) is stepped over to the next value. Tier 3 (exploration): only when no
   neighbour move is left, values further away, nearest first (a default run
   rarely gets there: the loop stops after 3 evaluations without gain).
3. The first move whose source was never evaluated (sha256 over every
   attempt) is returned; when none is left the planner reports exhausted.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Knob, OpConfig
from bot.strategies import catalog, knobs, multibuffer, pipeline, vprefix
from bot.strategies.base import Attempt, PlanContext, Refusal, Variant
from bot.strategies.evidence import Evidence
from bot.strategies.proposer import ExternalProposer
from bot.strategies.source import source_hash

DISCOVERED_BLOCK_VALUES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
PROPOSER_STRATEGIES = tuple(s.id for s in catalog.CATALOG if s.applied == "proposer")
MAX_PROPOSALS_PER_STRATEGY = 3  # per run, accepted or not
EXPLORE_TIER = 3
STYLE_TIER = 9


@dataclass(frozen=True)
class KnobSpec:
    key: str  # what Change.knob of its variants holds
    strategy: str
    kind: str  # knob | stages | flag
    values: tuple  # ordered space
    knob: Knob | None = None
    index: int = 0  # T.Pipelined loop index for kind "stages"
    order: int = 0


@dataclass(frozen=True)
class Move:
    strategy: str
    key: str
    tier: int
    score: float
    order: int
    old: object = None
    new: object = None
    spec: KnobSpec | None = None
    distance: int = 1  # steps along the knob's space (tier 3 explores nearest first)

    def sort_key(self) -> tuple:
        return (self.tier, self.distance, -self.score, self.order, 0 if _direction(self.old, self.new) >= 0 else 1)

    def describe(self) -> str:
        if self.spec is None:
            return f"{self.strategy}: ask the external proposer" if self.strategy != "vprefix" \
                else "vprefix: rename T.npuir_xxx -> T.vxxx (style only, never counted as a gain)"
        return f"{self.strategy}: {self.key}: {self.old} -> {self.new}"


def _direction(old: object, new: object) -> int:
    try:
        return (new > old) - (new < old)  # type: ignore[operator]
    except TypeError:
        return 0


class Planner:
    def __init__(self, op: OpConfig, evidence: Evidence | None = None,
                 proposer: ExternalProposer | None = None) -> None:
        self.op = op
        self.evidence = evidence or Evidence()
        self.proposer = proposer

    # ------------------------------------------------------------ public

    def next(self, ctx: PlanContext) -> Variant | Refusal:
        moves, skipped = self._moves(ctx)
        seen = _seen(ctx)
        reasons = list(skipped)
        evaluated = 0
        for move in moves:
            if move.spec is None and move.strategy in PROPOSER_STRATEGIES:
                assert self.proposer is not None
                return self.proposer.propose(self.op, move.strategy, ctx, seen)
            result = self._apply(move, ctx.best_source)
            if isinstance(result, Refusal):
                reasons.append(f"{move.describe()}: {result.reason}")
            elif result.source_hash in seen:
                evaluated += 1
            else:
                return result
        if evaluated:
            reasons.append(f"{evaluated} remaining candidate change(s) were already evaluated")
        if not moves and not skipped:
            reasons.append("no strategy applies to this op (declare knobs in tune.yaml or configure a proposer)")
        return Refusal(tuple(dict.fromkeys(reasons)), exhausted=True)

    def plan(self, ctx: PlanContext) -> list[str]:
        """What `next` would try from this best source, in order (for --dry-run)."""
        moves, skipped = self._moves(ctx)
        lines = [f"plan for {self.op.qualified} ({self.op.kernel_kind} kernel), "
                 f"best source {source_hash(ctx.best_source)[:12]}, {len(ctx.history)} attempts so far:"]
        seen = _seen(ctx)
        n = 0
        explore = [m for m in moves if m.tier == EXPLORE_TIER]
        shown = set(map(id, explore[:4]))  # a few exploration moves; the rest as a count
        for move in moves:
            if move.tier == EXPLORE_TIER and id(move) not in shown:
                if len(shown) == 4:  # say it once, where the hidden moves would be
                    lines.append(f"  ... and {len(explore) - 4} more exploration moves (tier 3, further values)")
                    shown.add(-1)
                continue
            note = ""
            if move.spec is not None or move.strategy == "vprefix":
                result = self._apply(move, ctx.best_source)
                if isinstance(result, Refusal):
                    note = f"  [skip: {result.reason}]"
                elif result.source_hash in seen:
                    note = "  [skip: already evaluated]"
            if not note:
                n += 1
            weight = self.evidence.weight(move.strategy, self.op.kernel_kind)
            label = f"{n:2d}." if not note else "  -"
            lines.append(f"{label} {move.describe()}  (tier {move.tier}, score {move.score:.3f}, "
                         f"evidence x{weight:.2f}){note}")
        lines.extend(f"  - not planned: {s}" for s in skipped)
        if n == 0:
            lines.append("nothing left to try: the run would stop with 'strategies exhausted'")
        return lines

    # ------------------------------------------------------------ moves

    def allowed(self, ctx: PlanContext) -> tuple[list[str], list[str]]:
        """Strategy ids to plan (catalog order), and sentences for those left out."""
        ids, skipped = [], []
        for s in catalog.CATALOG:
            if ctx.allowed is not None and s.id not in ctx.allowed:
                continue
            if self.op.strategies is not None and s.id not in self.op.strategies:
                continue
            if not s.applies_to(self.op.kernel_kind):
                skipped.append(f"{s.id}: does not apply to {self.op.kernel_kind} kernels")
                continue
            if s.applied == "proposer" and self.proposer is None:
                skipped.append(f"{s.id}: needs an external proposer (set 'proposer' in .tunebot.yml; "
                               f"see docs/proposer.md)")
                continue
            ids.append(s.id)
        return ids, skipped

    def specs(self, source: str, strategies: list[str]) -> tuple[list[KnobSpec], list[str]]:
        """The knobs of this source, declared first, then discovered."""
        specs: list[KnobSpec] = []
        skipped: list[str] = []
        declared = {k.strategy for k in self.op.knobs}
        for k in self.op.knobs:
            if k.strategy not in strategies:
                continue
            if knobs.current_value(source, k.name) is None:
                skipped.append(f"{k.strategy}: knob '{k.name}': {knobs.locate(source, k.name)}")
                continue
            legal, refused = knobs.legal_values(source, k.name, tuple(k.values))  # the kernel's own rules
            skipped.extend(knobs.refusal_lines(k.strategy, k.name, refused))
            k = Knob(k.name, k.strategy, legal, k.divides, k.multiple_of)  # hashable, for the caches
            specs.append(KnobSpec(k.name, k.strategy, "knob", k.values, k, order=len(specs)))
        names = {s.key for s in specs}
        if "block_size" in strategies and "block_size" not in declared:
            for name in knobs.discover(source):
                value = knobs.current_value(source, name)
                if name in names or not isinstance(value, int) or isinstance(value, bool):
                    continue
                values = tuple(sorted(set(DISCOVERED_BLOCK_VALUES) | {value}))
                values, refused = knobs.legal_values(source, name, values)  # the kernel's own rules
                skipped.extend(knobs.refusal_lines("block_size", name, refused))
                specs.append(KnobSpec(name, "block_size", "knob", values, Knob(name, "block_size", values),
                                      order=len(specs)))
                names.add(name)
        if "block_size" in strategies and "block_size" not in declared:
            skipped.extend(str(d) for d in knobs.dropped(source))
        if "pipeline_depth" in strategies and "pipeline_depth" not in declared:
            for loop in pipeline.find_loops(source):
                key = loop.bound_to or f"num_stages#{loop.index}"
                if key in names or pipeline.current_depth(source, loop.index) is None:
                    continue
                specs.append(KnobSpec(key, "pipeline_depth", "stages", pipeline.DEFAULT_DEPTHS,
                                      index=loop.index, order=len(specs)))
                names.add(key)
        if "multi_buffer" in strategies and "tilelang" in source and multibuffer.current(source) is not None:
            flip = multibuffer.set_flag(source, not multibuffer.current(source))
            if not isinstance(flip, Refusal):
                specs.append(KnobSpec(multibuffer.FLAG, "multi_buffer", "flag", (False, True), order=len(specs)))
            else:
                skipped.append(f"multi_buffer: {multibuffer.FLAG}: {flip.reason}")
        return specs, skipped

    def _moves(self, ctx: PlanContext) -> tuple[list[Move], list[str]]:
        source = ctx.best_source
        strategies, skipped = self.allowed(ctx)
        specs, spec_skipped = self.specs(source, strategies)
        skipped += spec_skipped
        best = source_hash(source)
        moves: list[Move] = []
        kind = self.op.kernel_kind
        for spec in specs:
            score = catalog.get(spec.strategy).expected_gain * self.evidence.weight(spec.strategy, kind)
            current = self._current(spec, source)
            for d in (+1, -1):
                new = _neighbour(spec, current, d)
                if new is None:
                    continue
                further = _beyond(spec, current, d, new)
                # A neighbour that measured faster, but not beyond the noise, is a plateau, not a
                # loss: step over it in the same direction instead of abandoning the direction.
                while further and _plateau(ctx.history, spec.key, current, new, best):
                    new = further.pop(0)
                tier = _tier(ctx.history, spec.key, current, d, best, new)
                if tier is not None:
                    moves.append(Move(spec.strategy, spec.key, tier, score, spec.order, current, new, spec))
                # Tier 3, exploration: once no neighbour move is left, jump further, nearest first.
                for distance, far in enumerate(further, start=2):
                    moves.append(Move(spec.strategy, spec.key, EXPLORE_TIER, score, spec.order, current, far, spec,
                                      distance))
        for sid in PROPOSER_STRATEGIES:
            if sid not in strategies:
                continue
            mine = [a for a in ctx.history if a.change.strategy == sid and a.change.knob is None]
            if len(mine) >= MAX_PROPOSALS_PER_STRATEGY or any(a.parent_hash == best for a in mine):
                continue
            score = catalog.get(sid).expected_gain * self.evidence.weight(sid, kind)
            moves.append(Move(sid, sid, 1, score, len(specs) + catalog.get(sid).priority))
        if "vprefix" in strategies and vprefix.applicable(source):
            moves.append(Move("vprefix", "vprefix", STYLE_TIER, 0.0, 999))
        moves.sort(key=Move.sort_key)
        return moves, skipped

    def _current(self, spec: KnobSpec, source: str) -> object:
        if spec.kind == "stages":
            return pipeline.current_depth(source, spec.index)
        if spec.kind == "flag":
            return multibuffer.current(source)
        return knobs.current_value(source, spec.key)

    def _apply(self, move: Move, source: str) -> Variant | Refusal:
        name = f"{self.op.name}.py"
        if move.strategy == "vprefix":
            return vprefix.rename(source, name)
        spec = move.spec
        assert spec is not None
        if spec.kind == "stages":
            return pipeline.set_depth(source, int(move.new), spec.index, name)  # type: ignore[arg-type]
        if spec.kind == "flag":
            return multibuffer.set_flag(source, bool(move.new), name)
        assert spec.knob is not None
        return knobs.set_knob(source, spec.knob, move.new, spec.strategy, name)  # type: ignore[arg-type]


def _seen(ctx: PlanContext) -> set[str]:
    seen = {source_hash(ctx.best_source)}
    for a in ctx.history:
        if a.source_hash:
            seen.add(a.source_hash)
        if a.parent_hash:
            seen.add(a.parent_hash)
    return seen


def _neighbour(spec: KnobSpec, current: object, d: int) -> object | None:
    """The next allowed value above (d=+1) or below (d=-1) `current` in the knob's space."""
    if spec.kind == "flag":
        other = not current
        return other if _direction(current, other) == d else None
    ordered = sorted(v for v in spec.values if _direction(current, v) == d)
    candidates = ordered if d > 0 else list(reversed(ordered))
    for value in candidates:
        if spec.knob is None or knobs.check_constraints(spec.knob, value) is None:
            return value
    return None


def _beyond(spec: KnobSpec, current: object, d: int, neighbour: object) -> list:
    """Allowed values past the neighbour in direction d, nearest first (none for flags)."""
    if spec.kind == "flag" or neighbour is None:
        return []
    ordered = sorted(v for v in spec.values if _direction(neighbour, v) == d)
    ordered = ordered if d > 0 else list(reversed(ordered))
    return [v for v in ordered if spec.knob is None or knobs.check_constraints(spec.knob, v) is None]


def _plateau(history: tuple[Attempt, ...], key: str, current: object, value: object, best: str) -> bool:
    """`current -> value` was tried from this best and measured faster, but not significantly."""
    return any(a.change.knob == key and a.change.old == current and a.change.new == value and a.parent_hash == best
               and a.verdict == "not_better" and a.gain is not None and a.gain > 0 for a in history)


def _tier(history: tuple[Attempt, ...], key: str, current: object, d: int, best: str, new: object) -> int | None:
    """0: continue a win; 1: fresh; 2: retry in a changed context; None: abandoned."""
    mine = [a for a in history if a.change.knob == key]
    tier = 1
    for a in mine:
        direction = _direction(a.change.old, a.change.new)
        if a.verdict == "better":
            if direction == -d and a.change.new == current:
                tier = max(tier, 2)  # we came from there
            continue
        if direction == d and a.change.old == current:
            if a.parent_hash == best:
                if _plateau((a,), key, current, a.change.new, best) and a.change.new != new:
                    continue  # stepped over
                return None  # lost from this very source: direction abandoned
            tier = max(tier, 2)
    wins = [a for a in history if a.verdict == "better"]
    if tier == 1 and wins and wins[-1].change.knob == key and _direction(wins[-1].change.old, wins[-1].change.new) == d \
            and wins[-1].change.new == current:
        return 0
    return tier
