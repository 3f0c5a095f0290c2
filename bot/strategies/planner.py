"""The planner: which ONE change to try next, as a pure function of (best source, history).

Nothing is kept between calls: a resumed run rebuilds the history from
results.jsonl and plans exactly as before. Every move is one change from the
best source. The planner names no strategy: it asks every registered one
(bot/strategies/registry.py) for its spaces or its one-shot change. The order
(docs/strategies.md):

1. Spaces: tune.yaml's knobs, then what each allowed strategy finds (block
   constants, T.Pipelined loops, the multi-buffer flag...); one-shot changes;
   each proposer strategy once per best source; style-only changes last.
2. An honest attempt at a knob is two probes: the far end on the side with more
   room (optima often sit at an edge, and one probe spans the most), then, if
   that lost, the far end of the other side, or, for a knob at an edge of its
   space, the value halfway to the far end that lost. A move that failed L0,
   timed out or errored is no attempt: the knob's next value comes next, and the
   failed value is never planned again, from any parent.
3. Tiers (lower first):
   0 the rest of a knob's honest attempt; continue the direction that just won,
     once every knob has had a try;
   1 the first probe of each knob (and each proposer strategy) never tried; after them, a
     knob's parabola (tier 2's last item) where it puts its value faster than here by the 3 %
     noise floor or more, the larger predicted gain first;
   2 a knob tried before from another best (the context changed): first the value
     that measured at least as fast as its parent there, else the preferred
     direction; a win's continuation before every knob was tried; the values
     between a win and the value it came from (refining the jump); a knob measured
     slower on both sides of here (or twice on the only side a knob at an edge has):
     the value nearest the vertex of the parabola through the three nearest measured
     values (successive parabolic interpolation, on the knob's ladder), where the parabola
     predicts less than the floor there;
   3 the values short of a loss (bisection); refining a win that gained 10 % or more
     (REFINE_AFTER_BIG_WIN); one value past a plateau;
   4 valley crossing past the farthest loss: the log-midpoint and the far end;
   5 exploration: every other value, nearest first;
   6 exploration of values the knob's profile puts clearly slower than here (more than the
     3 % noise floor), nearest first: re-measured only after every value never measured.
   A knob's measured profile (its gains chained through every attempt on it, the
   knob taken to act alone) marks values clearly slower than here; they bound the
   searches like a loss from here does.
   A knob's preferred direction: the one that won last (if we stand on that
   win), else the one whose attempts in this run gained most, else the side with
   more values left (never a fixed "up first": optima lie on both sides).
   Within a tier, knobs tried less often come first (round robin), then
   score = expected gain (catalog) x evidence weight (this repository's history),
   then, between first probes, the share of the knob's other values the probe spans
   (an edge knob's far end spans all of them).
4. The first move whose source was never evaluated (sha256 over every attempt) is
   returned; when none is left the planner reports exhausted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from bot.config.schema import Knob, OpConfig, RepoConfig
from bot.strategies import builtin, catalog, knobs, space
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.evidence import Evidence
from bot.strategies.proposer import ExternalProposer
from bot.strategies.protocol import KnobSpec
from bot.strategies.registry import STRATEGIES
from bot.strategies.source import source_hash
from bot.strategies.space import FAILED_VERDICTS

# What a planned move is for (a closed set, so a misspelt label is a type error)
Why = Literal[
    "",
    "continue",
    "first",
    "other_side",
    "revisit",
    "pref_step",
    "other_step",
    "half_edge",
    "refine",
    "bisect",
    "plateau",
    "valley",
    "explore",
    "interpolate",
]

MAX_PROPOSALS_PER_STRATEGY = 3  # per run, accepted or not
ONCE_TIER = 1  # a one-shot change, beside each knob's first move
OTHER_SIDE_TIER = 0  # the second probe of an honest attempt, before any other knob's first
EXPLORE_TIER = 5
# exploration re-measures a value this knob's profile already puts clearly slower than here
# (by more than the noise floor) only after every value not yet measured
RETRY_SLOWER_TIER = 6
CLEARLY_SLOWER = RepoConfig.noise_floor  # the default noise floor: under it is noise
INTERPOLATE_TIER = 2  # after every knob's first probe, before new bisections
# ... and beside the first probes (after them: the knob has been tried) when the parabola puts
# its value faster than here by the noise floor or more, the larger predicted gain first. A
# knob that tied within the noise at one end and lost at the other names its inside value
# that way, where a tier-2 revisit or refinement of another knob would have come first: on
# the thirteen seen families 7400-9999 (tunebot's column rerun against the stored random and
# TPE runs, budget 10) 2329 -> 2341 wins of 2600, no family fewer; with 10200-10399 (run once
# on the planner before) the median run rose on 48 landscapes and fell on 23 (sign test p
# 0.004). Tried in 2026-12-01's sessions under the old charging it had moved nothing (711 of 800)
PROMISING_INTERPOLATE_TIER = 1
# a win that gained this much is refined (halfway back to where it came from) only with the
# bisections (tier 3): on the seen generated landscapes (even seeds 5000-5798, 3 runs, budget 20)
# that refinement won none of 182 decisions after a win of 40 % or more, 3 % of 1,241 after
# 20-40 %, 9 % of 786 after 10-20 %, 20 % of 519 after a win under 10 % (42 % when the jump
# spanned 5 steps or more): a long jump that gained little crossed the bottom of a bowl, one
# that gained much landed near it. 0.10: against 0.30 it won 8 more of the 1,600 landscapes of
# families 7400-8999, 4 more of 9200-9399, 3 more of the fresh 9400-9599 (run once with 0.30
# first) and 4 more of the next fresh family 9600-9799 (run once with 0.10); it costs the
# tuning set's seed 11 (a 21 % win whose refinement led to its optimum) 16 points of its
# median run, with the tuning set's wins unchanged (38 of 43)
REFINE_AFTER_BIG_WIN = 0.10
REVISIT_WITHIN = 0.0  # revisit values that measured at least as fast as their parent
STYLE_TIER = 9


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
    distance: int = 1  # steps along the knob's space (exploration goes nearest first)
    tries: int = 0  # attempts on this knob so far in the run (round robin: fewer first)
    why: Why = ""  # what the move is for; untried() keeps a knob open on some of these
    # a first probe's share of the knob's other values on its side, per mille: between knobs
    # of equal score, the one whose first probe spans more of its space comes first
    room: int = 0

    def sort_key(self) -> tuple:
        # distance orders exploration (nearest first); a stride's length says nothing about promise
        return (
            self.tier,
            self.tries,
            self.distance if self.tier in (EXPLORE_TIER, RETRY_SLOWER_TIER) else 0,
            -self.score,
            -self.room,
            self.order,
            0 if space.direction(self.old, self.new) >= 0 else 1,
        )

    def describe(self) -> str:
        if self.spec is None:
            entry = catalog.get(self.strategy)
            if entry.applied == "proposer":
                return f"{self.strategy}: ask the external proposer"
            style = ", never counted as a gain" if entry.style_only else ""
            return f"{self.strategy}: {entry.title}{style}"
        return f"{self.strategy}: {self.key}: {self.old} -> {self.new}"


class Planner:
    def __init__(
        self,
        op: OpConfig,
        evidence: Evidence | None = None,
        proposer: ExternalProposer | None = None,
    ) -> None:
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
            if move.spec is None and catalog.get(move.strategy).applied == "proposer":
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
            reasons.append(
                "no strategy applies to this op (declare knobs in tune.yaml or configure a proposer)"
            )
        return Refusal(tuple(dict.fromkeys(reasons)), exhausted=True)

    def plan(self, ctx: PlanContext) -> list[str]:
        """What `next` would try from this best source, in order (for --dry-run)."""
        moves, skipped = self._moves(ctx)
        lines = [
            f"plan for {self.op.qualified} ({self.op.kernel_kind} kernel), "
            f"best source {source_hash(ctx.best_source)[:12]}, {len(ctx.history)} attempts so far:"
        ]
        seen = _seen(ctx)
        n = 0
        exploring = (EXPLORE_TIER, RETRY_SLOWER_TIER)
        explore = [m for m in moves if m.tier in exploring]
        shown = set(map(id, explore[:4]))  # a few exploration moves; the rest as a count
        for move in moves:
            if move.tier in exploring and id(move) not in shown:
                if len(shown) == 4:  # say it once, where the hidden moves would be
                    lines.append(
                        f"  ... and {len(explore) - 4} more exploration moves (tiers "
                        f"{EXPLORE_TIER}-{RETRY_SLOWER_TIER}, further values)"
                    )
                    shown.add(-1)
                continue
            note = ""
            if move.spec is not None or catalog.get(move.strategy).applied != "proposer":
                result = self._apply(move, ctx.best_source)
                if isinstance(result, Refusal):
                    note = f"  [skip: {result.reason}]"
                elif result.source_hash in seen:
                    note = "  [skip: already evaluated]"
            if not note:
                n += 1
            weight = self.evidence.weight(move.strategy, self.op.kernel_kind)
            label = f"{n:2d}." if not note else "  -"
            lines.append(
                f"{label} {move.describe()}  (tier {move.tier}, score {move.score:.3f}, "
                f"evidence x{weight:.2f}){note}"
            )
        lines.extend(
            f"  - {s}" if s.startswith(builtin.WARNING) else f"  - not planned: {s}"
            for s in skipped
        )
        if n == 0:
            lines.append("nothing left to try: the run would stop with 'strategies exhausted'")
        return lines

    def untried(self, ctx: PlanContext) -> list[str]:
        """Knobs whose honest attempt is unfinished: never tried in this run, or tried from the
        best source with the second probe (its other side, or halfway to the far end that lost)
        still plannable, or measured slower on both sides with the parabola's first guess
        not tried yet (at most two honest probes from here so far).

        Patience counts different things tried without a gain; a knob whose attempt is not
        finished has not had its most promising moves, so the loop does not stop for patience
        while one is left (bot/run/stops/no_gain.py)."""
        # a knob whose every move so far failed L0 or errored had no honest attempt
        tried = {
            a.change.knob
            for a in ctx.history
            if a.change.knob is not None and a.verdict not in FAILED_VERDICTS
        }
        best = source_hash(ctx.best_source)
        here: dict[str, int] = {}
        for a in ctx.history:
            if a.change.knob and a.parent_hash == best and a.verdict not in FAILED_VERDICTS:
                here[a.change.knob] = here.get(a.change.knob, 0) + 1
        seen = _seen(ctx)
        moves, _ = self._moves(ctx)
        out: list[str] = []
        for move in moves:
            if move.spec is None or move.key in out:
                continue
            unfinished = move.why in ("other_side", "half_edge") or (
                move.why == "interpolate" and here.get(move.key, 0) <= 2
            )
            if move.key in tried and not unfinished:
                continue
            result = self._apply(move, ctx.best_source)
            if not isinstance(result, Refusal) and result.source_hash not in seen:
                out.append(move.key)
        return out

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
                skipped.append(
                    f"{s.id}: needs an external proposer (set 'proposer' in .tunebot.yml; "
                    f"see docs/proposer.md)"
                )
                continue
            ids.append(s.id)
        return ids, skipped

    def _onces(self, source: str, strategies: list[str]) -> dict[str, Variant | Refusal | None]:
        """Each single-change strategy's one change of this source, why not, or None."""
        return {
            sid: STRATEGIES[sid].once(source, f"{self.op.name}.py")
            for sid in strategies
            if catalog.get(sid).applied != "proposer"
        }

    def once_refused(self, source: str, strategies: list[str]) -> list[str]:
        """Why each single-change strategy will not make the change it has for this source."""
        return _refused_lines(self._onces(source, strategies))

    def specs(self, source: str, strategies: list[str]) -> tuple[list[KnobSpec], list[str]]:
        """The knobs of this source: tune.yaml's first, then what each strategy finds."""
        specs: list[KnobSpec] = []
        skipped: list[str] = []
        for k in self.op.knobs:
            if k.strategy not in strategies:
                continue
            harness = self.op.harness_functions
            if knobs.current_value(source, k.name, harness) is None:
                where = knobs.locate(source, k.name, harness)
                skipped.append(f"{k.strategy}: knob '{k.name}': {where}")
                continue
            legal, refused = knobs.legal_values(  # kernel's rules, with the declared shapes
                source, k.name, tuple(k.values), self.op.shapes, harness
            )
            skipped.extend(knobs.refusal_lines(k.strategy, k.name, refused))
            legal_knob = Knob(k.name, k.strategy, legal, k.divides, k.multiple_of)  # for caches
            specs.append(KnobSpec(k.name, k.strategy, "knob", legal, legal_knob, order=len(specs)))
        taken = {s.key for s in specs}
        for sid in strategies:
            found, left_out = STRATEGIES[sid].spaces(source, self.op, set(taken))
            skipped.extend(left_out)
            for spec in found:
                if spec.key not in taken:
                    specs.append(replace(spec, order=len(specs)))
                    taken.add(spec.key)
        return specs, skipped

    def _moves(self, ctx: PlanContext) -> tuple[list[Move], list[str]]:
        source = ctx.best_source
        strategies, skipped = self.allowed(ctx)
        specs, spec_skipped = self.specs(source, strategies)
        skipped += spec_skipped
        best = source_hash(source)
        moves: list[Move] = []
        kind = self.op.kernel_kind
        history = ctx.history
        tried_keys = {a.change.knob for a in history if a.change.knob is not None}
        every_knob_tried = all(spec.key in tried_keys for spec in specs)
        wins = [a for a in history if a.verdict == "better"]
        last_win = wins[-1] if wins else None
        for spec in specs:
            score = catalog.get(spec.strategy).expected_gain * self.evidence.weight(
                spec.strategy, kind
            )
            current = self._current(spec, source)
            mine = [a for a in history if a.change.knob == spec.key]
            # a move that failed L0 or errored is no attempt at the knob's speed
            honest = [a for a in mine if a.verdict not in FAILED_VERDICTS]
            failed = {space.value_key(a.change.new) for a in mine if a.verdict in FAILED_VERDICTS}
            from_here = [a for a in mine if a.parent_hash == best and a.change.old == current]
            preferred = space.preferred_direction(spec, current, mine, last_win)
            # this knob's profile as measured so far (log latency relative to here), chained
            # through every attempt on it from any best: a value that tied or won elsewhere is
            # its likeliest gain once the context changed; one clearly slower bounds a search
            levels = space.profile(current, honest)
            tie = math.log(1.0 + REVISIT_WITHIN)
            known_slower = {space.value_key(v) for v, lv in levels.items() if lv > tie}
            clearly_slower = {
                space.value_key(v) for v, lv in levels.items() if lv > math.log1p(CLEARLY_SLOWER)
            }
            tried_here = {space.value_key(a.change.new) for a in from_here}
            revisits = sorted(
                (lv, v)
                for v, lv in levels.items()
                if lv <= tie
                and v != current
                and space.value_key(v) not in tried_here
                and space.value_key(v) not in failed
            )
            revisit = revisits[0][1] if revisits else None
            for d in (preferred, -preferred):
                ladder = [
                    v
                    for v in space.side_values(spec, current, d)
                    if space.value_key(v) not in failed
                ]
                if not ladder:
                    continue
                # a move that failed L0 or errored says nothing about speed: it is only never retried
                lost = [
                    a
                    for a in from_here
                    if space.direction(a.change.old, a.change.new) == d
                    and a.verdict not in FAILED_VERDICTS
                    and a.verdict != "better"
                ]
                plateau = [
                    a
                    for a in lost
                    if a.verdict == "not_better" and a.gain is not None and a.gain > 0
                ]
                # values known slower than here on this side: losses from here, and the value a
                # win on this knob came from (stepping back onto it would only re-measure it)
                worse = [a.change.new for a in lost] + [
                    a.change.old
                    for a in honest
                    if a.verdict == "better"
                    and a.change.new == current
                    and space.direction(a.change.new, a.change.old) == d
                ]
                worse += [v for v in ladder if space.value_key(v) in known_slower]
                worse = [v for v in worse if v in ladder]
                planned: dict[object, int] = {}

                def add(
                    value: object,
                    tier: int,
                    planned: dict = planned,
                    ladder: list = ladder,
                    spec: KnobSpec = spec,
                    score: float = score,
                    current: object = current,
                    tries: int = len(honest),
                    why: Why = "",
                    room: int = 0,
                ) -> None:
                    key = space.value_key(value)
                    if key not in planned or planned[key] > tier:
                        planned[key] = tier
                        moves[:] = [
                            m
                            for m in moves
                            if not (m.key == spec.key and space.value_key(m.new) == key)
                        ]
                        moves.append(
                            Move(
                                spec.strategy,
                                spec.key,
                                tier,
                                score,
                                spec.order,
                                current,
                                value,
                                spec,
                                ladder.index(value) + 1,
                                tries,
                                why,
                                room,
                            )
                        )

                step = space.stride(ladder)
                if not worse:
                    continuing = (
                        last_win is not None
                        and last_win.change.knob == spec.key
                        and space.direction(last_win.change.old, last_win.change.new) == d
                        and last_win.change.new == current
                    )
                    if continuing:
                        add(step, 0 if every_knob_tried else 2, why="continue")
                    elif d == preferred and not honest:
                        # the knob's most promising move: its far end; how much of the knob
                        # that probe spans (an edge knob's spans all) orders first probes
                        # between knobs of equal score
                        other = len(space.side_values(spec, current, -d))
                        room = round(1000 * len(ladder) / (len(ladder) + other))
                        add(ladder[-1], 1, why="first", room=room)
                    elif not any(
                        space.direction(a.change.old, a.change.new) == d for a in honest
                    ) and any(
                        space.direction(a.change.old, a.change.new) == -d
                        and a.verdict not in FAILED_VERDICTS
                        and a.verdict != "better"
                        for a in from_here
                    ):
                        add(
                            ladder[-1], OTHER_SIDE_TIER, why="other_side"
                        )  # its other side: the rest of one honest attempt
                    elif revisit is not None and revisit in ladder:
                        add(revisit, 2, why="revisit")
                    elif d == preferred:
                        add(step, 2, why="pref_step")
                    else:
                        add(step, 3, why="other_step")
                else:
                    nearest = min(ladder.index(v) for v in worse)
                    if nearest > 0:  # a stride lost: bisect the values short of it
                        # a knob at the edge of its space has no other side: the second half
                        # of its honest attempt is halfway to the far end that lost
                        one_sided = not [
                            v
                            for v in space.side_values(spec, current, -d)
                            if space.value_key(v) not in failed
                        ]
                        first_probe_lost = len([a for a in honest if a.parent_hash == best]) == 1
                        wins_here = [
                            a
                            for a in honest
                            if a.verdict == "better"
                            and a.change.new == current
                            and a.change.old in ladder
                        ]
                        came_from = bool(wins_here)
                        # refining a win comes before a new bisection, unless the jump gained
                        # much: then its far end is likely near the bottom of the knob's bowl
                        big = came_from and (wins_here[-1].gain or 0.0) >= REFINE_AFTER_BIG_WIN
                        refine = 2 if came_from and not big else 3
                        add(
                            ladder[(nearest - 1) // 2],
                            OTHER_SIDE_TIER if one_sided and first_probe_lost else refine,
                            why="half_edge"
                            if one_sided and first_probe_lost
                            else ("refine" if came_from else "bisect"),
                        )
                    if plateau and nearest + 1 < len(ladder):
                        add(
                            ladder[nearest + 1], 3, why="plateau"
                        )  # faster within the noise: look one value further
                    farthest = max(ladder.index(v) for v in worse)
                    for value in space.valley_crossing(ladder[farthest:]):  # past the farthest loss
                        add(value, 4, why="valley")
                for value in ladder:
                    retry = space.value_key(value) in clearly_slower
                    add(value, RETRY_SLOWER_TIER if retry else EXPLORE_TIER, why="explore")
            # both sides of here measured (or, at an edge, two values on the only side): the
            # parabola through the three nearest measured values says where the optimum lies
            found = space.interpolation(spec, current, levels, tried_here | failed)
            if found is not None:
                guess, level = found
                _place(
                    moves,
                    Move(
                        spec.strategy,
                        spec.key,
                        PROMISING_INTERPOLATE_TIER
                        if -level >= math.log1p(CLEARLY_SLOWER)
                        else INTERPOLATE_TIER,
                        score,
                        spec.order,
                        current,
                        guess,
                        spec,
                        tries=len(honest),
                        why="interpolate",
                        # between promising values, the larger predicted gain first
                        room=max(0, round(-1000 * level)),
                    ),
                )
        onces = self._onces(source, strategies)
        skipped.extend(_refused_lines(onces))
        for sid, once in onces.items():
            if isinstance(once, Variant):
                entry = catalog.get(sid)
                tier = STYLE_TIER if entry.style_only else ONCE_TIER
                moves.append(Move(sid, sid, tier, entry.expected_gain, 900 + entry.priority))
        for sid in strategies:
            if sid in onces:
                continue
            mine_p = [a for a in history if a.change.strategy == sid and a.change.knob is None]
            if len(mine_p) >= MAX_PROPOSALS_PER_STRATEGY or any(
                a.parent_hash == best for a in mine_p
            ):
                continue
            score = catalog.get(sid).expected_gain * self.evidence.weight(sid, kind)
            moves.append(
                Move(sid, sid, 1, score, len(specs) + catalog.get(sid).priority, tries=len(mine_p))
            )
        moves.sort(key=Move.sort_key)
        return moves, skipped

    def _current(self, spec: KnobSpec, source: str) -> object:
        if spec.kind == "knob":  # a named constant, whoever found it
            return knobs.current_value(source, spec.key, self.op.harness_functions)
        return STRATEGIES[spec.strategy].current(source, spec)

    def _apply(self, move: Move, source: str) -> Variant | Refusal:
        name = f"{self.op.name}.py"
        spec = move.spec
        if spec is None:
            once = STRATEGIES[move.strategy].once(source, name)
            if once is None:
                return Refusal((f"{move.strategy}: nothing to change",), strategy=move.strategy)
            return once
        if spec.kind == "knob":
            assert spec.knob is not None
            return knobs.set_knob(
                source,
                spec.knob,
                move.new,
                spec.strategy,
                name,
                self.op.shapes,
                self.op.harness_functions,
            )
        return STRATEGIES[spec.strategy].apply(source, spec, move.new, name)


def _place(moves: list[Move], move: Move) -> None:
    """Plan `move` unless the same value of the same knob is already planned at a tier as low."""
    key = space.value_key(move.new)
    same = [m for m in moves if m.key == move.key and space.value_key(m.new) == key]
    if any(m.tier <= move.tier for m in same):
        return
    moves[:] = [m for m in moves if not (m.key == move.key and space.value_key(m.new) == key)]
    moves.append(move)


def _seen(ctx: PlanContext) -> set[str]:
    seen = {source_hash(ctx.best_source)}
    for a in ctx.history:
        if a.source_hash:
            seen.add(a.source_hash)
        if a.parent_hash:
            seen.add(a.parent_hash)
    return seen


def _refused_lines(onces: dict[str, Variant | Refusal | None]) -> list[str]:
    """One line per reason a single-change strategy gave for not making its change."""
    return [
        f"{sid}: {reason}"
        for sid, once in onces.items()
        if isinstance(once, Refusal)
        for reason in once.reasons
    ]
