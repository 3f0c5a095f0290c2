"""The cpu backend's comparison: best and candidate timed side by side in pairs.

The single-result rule (a best measured earlier against a fresh candidate) is bot.measure.decide;
this module is the paired rule that backends able to time two kernels side by side use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.measure.decide import (
    MeasurePair,
    Rule,
    fmt_gain,
    gain_between,
    measured_noise,
    median_of,
)
from bot.measure.types import Decision, LatencyResult

# the standard error of the median of n normal values is this times sd / sqrt(n)
MEDIAN_SE = 1.2533


class PairSpread:
    """The standard deviation of one pair's gain, learned over a run.

    Every decision that took two pairs or more adds its gains' squared deviations from
    their mean (n - 1 degrees of freedom). The estimate starts at `prior` with `prior_df`
    degrees of freedom of weight, so one lucky decision cannot shrink it to nothing, and one
    decision adds at most `cap` times the current estimate per degree of freedom (in sd), so
    one wild candidate cannot blind the rest of the run. The decision in progress counts in
    full: a candidate whose own pairs scatter needs more of them.

    A pair's gain spreads between runs because each side is a fresh process: kernels whose
    speed depends on where the process's memory lands (benchmarks/pair_interference.py:
    blur5, chan_hist) read 10-30 % apart from one pair to the next, where a pure-Python
    loop reads within about 1 %. One fixed rule cannot suit both.
    """

    def __init__(self, prior: float = Rule.pair_prior, prior_df: int = 3, cap: float = 3.0) -> None:
        self.prior, self.prior_df, self.cap = prior, prior_df, cap
        self.ss = 0.0
        self.df = 0

    def add(self, gains: Sequence[float]) -> None:
        if len(gains) >= 2 and all(math.isfinite(g) for g in gains):
            df = len(gains) - 1
            variance = min(_sum_of_squares(gains) / df, (self.cap * self.sd()) ** 2)
            self.ss += variance * df
            self.df += df

    def learn(self, details: Mapping[str, Any]) -> None:
        """Learn from one decision's details as recorded (`round_gains`, `suspect`): the live
        run and a run resumed from results.jsonl go through this same step."""
        gains = details.get("round_gains")
        if details.get("suspect") or not isinstance(gains, list):
            return  # a down-clocked decision teaches nothing
        if all(isinstance(g, int | float) and not isinstance(g, bool) for g in gains):
            self.add([float(g) for g in gains])

    def state(self) -> tuple[float, int]:
        """What has been learned, to put back with `restore` (a decision taken back)."""
        return self.ss, self.df

    def restore(self, state: tuple[float, int]) -> None:
        self.ss, self.df = state

    def sd(self, current: Sequence[float] = ()) -> float:
        """The pooled estimate, counting the gains of a decision in progress too."""
        ss, df = self.ss, self.df
        if len(current) >= 2:
            ss += _sum_of_squares(current)
            df += len(current) - 1
        return math.sqrt((self.prior**2 * self.prior_df + ss) / (self.prior_df + df))


def _sum_of_squares(xs: Sequence[float]) -> float:
    m = statistics.fmean(xs)
    return sum((x - m) ** 2 for x in xs)


def shorts_allowed(n: int) -> int:
    """Pairs under the floor that a "better" over n pairs may include: 0 up to 3, 1 at 4-5, 2 at 6."""
    return max(0, n // 2 - 1)


def detectable(rule: Rule, sd: float) -> float:
    """The smallest gain a full decision (`pair_rounds_max` pairs) can call better at this spread."""
    return max(rule.noise_floor, rule.pair_z * MEDIAN_SE * sd / math.sqrt(rule.pair_rounds_max))


def decide_in_pairs(
    best_source: Path,
    candidate_source: Path,
    pair: MeasurePair,
    rule: Rule = Rule(),
    spread: PairSpread | None = None,
) -> tuple[LatencyResult, Decision]:
    """Best and candidate timed side by side, pair after pair, until the evidence decides.

    Both sides share the moment, core and load, each in its own process (runners/forked.py).
    `spread` is the run's learned spread of one pair's gain (s below; None: a fresh one, the
    prior pooled with this decision's own pairs, and nothing kept). A decision with a suspect
    (down-clocked) sample teaches it nothing. Returns the candidate's side of the first pair (its recorded
    latency) and the decision:

    1. first pair's gain < close_low (0.5) * floor - reject_z (1.5) * s: not better (one run). A noisy
       run's first look rejects less: what its spread explains may still be a gain.
    2. otherwise more pairs, the import order swapped each round, from `pair_rounds` (2) to
       `pair_rounds_max` (6). After each, with the median m of the gains so far and
       se = 1.2533 * s / sqrt(n) (s pooled over the run and this decision):
       - better when m >= max(floor, pair_z (2.5) * se), at most `shorts_allowed(n)` pairs
         under the floor (none up to 3 pairs, 1 at 4-5, 2 at 6) and no suspect sample;
       - not better once that is out of reach: more short pairs than `pair_rounds_max`
         pairs allow, or m + pair_futility_z (1.0) * se under the floor;
       - not better after `pair_rounds_max` pairs without an answer.

    Why: with pair gains spread normally at sd s, one pair never decides "better", and
    the A/A false-"better" rate stays near 0.5 % at every spread from 1 to 6.4 % (a fixed
    "every pair beyond the floor" rule reached 3-6 % at 4-6 %: docs/measurement.md). A
    kernel whose speed differs between processes needs more pairs before its median is
    trusted; a quiet kernel decides in two.
    """
    floor = rule.noise_floor
    s0 = spread.sd() if spread is not None else rule.pair_prior
    ra, rb = pair(best_source, candidate_source)
    if not (ra.ok and rb.ok):
        failed = rb if not rb.ok else ra
        return failed, Decision(
            False,
            0.0,
            floor,
            0.0,
            False,
            f"candidate has no latency (status {failed.status})",
            None,
            None,
            detectable=detectable(rule, s0),
        )
    gain = gain_between(ra, rb)
    noise = measured_noise(ra, rb)
    first = {
        "gain": gain,
        "noise": noise,
        "threshold": floor,
        "pair_spread": s0,
        "best_us": ra.median_us,
        "candidate_us": rb.median_us,
        "in_one_process": True,  # timed side by side in one run (the key predates a process per side)
    }
    reject_below = rule.close_low * floor - rule.reject_z * s0
    first["reject_below"] = reject_below
    if not math.isfinite(gain):
        return rb, _no_gain(first, ra, rb, rule, s0)
    if gain < reject_below:
        return rb, Decision(
            False,
            gain,
            floor,
            noise,
            False,
            f"gain {fmt_gain(gain)} is below {reject_below * 100:.1f}% "
            f"(floor {floor * 100:.1f}%, pair spread {s0 * 100:.1f}%; timed side by side)",
            ra.median_us,
            rb.median_us,
            {"first": first},
            detectable=detectable(rule, s0),
        )
    pa_list, pb_list = [ra], [rb]
    gains = [gain]
    verdict: bool | None = None
    why = ""
    sd = s0
    threshold, se = floor, 0.0
    while verdict is None:
        i = len(gains)
        # the order of import swaps each round: the candidate loads first in the second pair
        x, y = (
            pair(candidate_source, best_source)[::-1]
            if i % 2
            else pair(best_source, candidate_source)
        )
        if not (x.ok and y.ok):
            partial: dict[str, Any] = {"first": first, "round_gains": gains}
            if spread is not None:
                spread.learn(partial)
            return rb, Decision(
                False,
                statistics.median(gains),
                floor,
                noise,
                True,
                f"re-measure failed ({(x if not x.ok else y).status})",
                ra.median_us,
                rb.median_us,
                partial,
                detectable=detectable(rule, sd),
            )
        pa_list.append(x)
        pb_list.append(y)
        gains.append(gain_between(x, y))
        if not math.isfinite(gains[-1]):
            return rb, _no_gain(first, x, y, rule, sd)
        verdict, why, sd, threshold, se = _step(gains, rule, spread)
    suspect = any(r.suspect for r in pa_list + pb_list)
    median_gain = statistics.median(gains)
    better = verdict and not suspect
    n = len(gains)
    beyond = sum(1 for g in gains if g >= floor)
    counted = (
        f"{beyond} of {n} pairs beyond the {floor * 100:.1f}% floor, pair spread {sd * 100:.1f}%"
    )
    if suspect and verdict:
        reason = f"pairs side by side: suspect (down-clocked) samples; gain {fmt_gain(median_gain)} not trusted"
    elif better:
        reason = f"pairs side by side: gain {fmt_gain(median_gain)} >= threshold {threshold * 100:.1f}% ({counted})"
    else:
        reason = f"pairs side by side: gain {fmt_gain(median_gain)}, {why} ({counted})"
    details = {
        "first": first,
        "round_gains": gains,
        "best_rounds_us": [r.median_us for r in pa_list],
        "candidate_rounds_us": [r.median_us for r in pb_list],
        "pair_spread": sd,
        "suspect": suspect,
    }
    if spread is not None:
        spread.learn(details)
    return rb, Decision(
        better,
        median_gain,
        threshold,
        rule.pair_z * se,
        True,
        reason,
        statistics.median(median_of(r) for r in pa_list),
        statistics.median(median_of(r) for r in pb_list),
        details,
        detectable=detectable(rule, sd),
    )


def _step(
    gains: list[float], rule: Rule, spread: PairSpread | None
) -> tuple[bool | None, str, float, float, float]:
    """(verdict or None to take another pair, why not better, sd, threshold, se) after len(gains) pairs."""
    floor = rule.noise_floor
    n = len(gains)
    sd = spread.sd(gains) if spread is not None else _prior_pooled(rule, gains)
    se = MEDIAN_SE * sd / math.sqrt(n)
    threshold = max(floor, rule.pair_z * se)
    m = statistics.median(gains)
    short = sum(1 for g in gains if g < floor)
    if n >= rule.pair_rounds and m >= threshold and short <= shorts_allowed(n):
        return True, "", sd, threshold, se
    if short > shorts_allowed(rule.pair_rounds_max):
        return False, "too many pairs under the floor", sd, threshold, se
    if m + rule.pair_futility_z * se < floor:
        return False, "too far under the floor to get there", sd, threshold, se
    if n >= rule.pair_rounds_max:
        return (
            False,
            f"under the threshold {threshold * 100:.1f}% after {n} pairs",
            sd,
            threshold,
            se,
        )
    return None, "", sd, threshold, se


def _no_gain(first: dict, ra: LatencyResult, rb: LatencyResult, rule: Rule, sd: float) -> Decision:
    """Two medians that give no finite gain (a zero or broken figure): nothing to decide on."""
    return Decision(
        False,
        0.0,
        rule.noise_floor,
        float(first["noise"]),
        False,
        f"no finite gain from the medians {ra.median_us} and {rb.median_us} us (timed side by side)",
        ra.median_us,
        rb.median_us,
        {"first": {**first, "gain": None}},
        detectable=detectable(rule, sd),
    )


def _prior_pooled(rule: Rule, gains: list[float]) -> float:
    spread = PairSpread(rule.pair_prior)
    return spread.sd(gains)
