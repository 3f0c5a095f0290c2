"""Noise-aware decisions: is a candidate really faster than the best so far?

The rule (docs/measurement.md, figures from benchmarks/noise.py):

1. gain = (best - candidate) / best on the medians; noise = the relative
   half-widths of the two medians' 95 % confidence intervals, added;
   threshold = max(noise_floor, noise).
2. gain < close_low (0.5) * max(noise_floor, min(noise, remeasure_cap)): not
   better, no re-measure. The cap (10 %) means a first look of 5 % or more is
   always re-measured, however wide one slow sample made the interval.
3. gain >= max(threshold * close_high (8, i.e. >= 24 % at the 3 % floor),
   fast_z * sqrt(2) * spread) and neither result suspect (down-clocked):
   better. `spread` is the relative standard deviation of one measurement's
   median between processes (and over time), learned during the run
   (`SpreadTracker`); smaller first-look gains are within what two processes
   measured minutes apart differ by.
4. Otherwise re-measure both interleaved, A B, B A, A B, ... (`rounds` = 5
   pairs; stopped early once too many pairs were lost for "better" to remain
   possible), and decide on those runs alone: gain = the median of the per-pair
   gains; noise = max(CI noise of the pooled samples, twice the standard
   error of that median estimated from the pairs' MAD); better only if
   gain >= max(noise_floor, noise) AND the candidate was faster in every pair
   but at most one (none lost with fewer than 4 pairs), and no re-measured
   run of either side was suspect (down-clocked). The pooled medians go into
   the Decision.
5. A best-so-far without a latency is never beaten (a guard: the loop always
   holds a measured best). Two results on different clocks (cpu vs wall) are
   never compared at first look: the re-measure decides.

Every Decision carries `detectable`: the smallest gain this decision could
have called better (the re-measure's threshold, or the one a re-measure of
`rounds` pairs would have had at the known spread). The report warns when it
exceeds the configured level.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.measure.stats import relative_change, summarize
from bot.measure.types import Decision, LatencyResult

Measure = Callable[[Path], LatencyResult]
MeasurePair = Callable[[Path, Path], "tuple[LatencyResult, LatencyResult]"]


PRIOR_SPREAD = (
    0.05  # between-process sd of a median before the run has measured its own (cpu, 2-core host)
)


@dataclass(frozen=True)
class Rule:
    noise_floor: float = 0.03
    close_low: float = 0.5  # re-measure when threshold*close_low <= gain < threshold*close_high
    close_high: float = 8.0
    rounds: int = 5
    remeasure_cap: float = 0.10  # first looks >= close_low * this are always re-measured
    fast_z: float = 3.5  # first-look acceptance needs gain >= fast_z * sqrt(2) * spread
    # paired rule (bot.measure.pairs): at least pair_rounds and at most pair_rounds_max pairs;
    # better needs the median pair gain >= pair_z standard errors (from the run's learned
    # pair spread), stops once the gain is pair_futility_z standard errors short of the floor
    pair_rounds: int = 2
    pair_rounds_max: int = 6
    pair_z: float = 2.5
    pair_futility_z: float = 1.0
    pair_prior: float = 0.05  # sd of one pair's gain before the run has learned its own
    # first-look rejection allows for reject_z times the pair spread (decide_in_pairs), or
    # sqrt(2) times the between-process spread when `decide` re-measures in pairs, of bad luck
    reject_z: float = 1.5

    def __post_init__(self) -> None:
        if not 2 <= self.pair_rounds <= self.pair_rounds_max:
            raise ValueError(
                f"Rule: need 2 <= pair_rounds ({self.pair_rounds}) <= pair_rounds_max "
                f"({self.pair_rounds_max})"
            )
        if not self.pair_prior > 0:
            raise ValueError(f"Rule: pair_prior must be > 0, not {self.pair_prior}")


class SpreadTracker:
    """Between-process spread of a measurement's median, pooled over every source measured twice or more.

    `add(key, median)` after each measurement (key: the source's content hash). `spread()`
    is the pooled standard deviation of log(median) around each source's mean, i.e. the
    relative sd of one measurement; before `min_df` degrees of freedom it is the prior.
    """

    def __init__(self, prior: float = PRIOR_SPREAD, min_df: int = 3) -> None:
        self.prior, self.min_df = prior, min_df
        self._logs: dict[str, list[float]] = {}

    def add(self, key: str, median_us: float | None) -> None:
        if median_us and median_us > 0:
            self._logs.setdefault(key, []).append(math.log(median_us))

    @property
    def df(self) -> int:
        return sum(len(v) - 1 for v in self._logs.values() if len(v) > 1)

    def spread(self) -> float:
        if self.df < self.min_df:
            return self.prior
        ss = sum(
            sum((x - statistics.fmean(v)) ** 2 for x in v)
            for v in self._logs.values()
            if len(v) > 1
        )
        return math.sqrt(ss / self.df)


def detectable_gain(rule: Rule, spread: float) -> float:
    """Smallest gain a re-measure of `rule.rounds` pairs can call better at this spread.

    A pair's gain has sd sqrt(2) * spread; the median of n pairs 1.2533 times that over
    sqrt(n); the re-measure asks for twice that standard error, and at least the floor.
    """
    se = 1.2533 * math.sqrt(2) * spread / math.sqrt(max(rule.rounds, 1))
    return max(rule.noise_floor, 2 * se)


def rel_half_ci(r: LatencyResult) -> float:
    if not r.median_us or r.ci_low_us is None or r.ci_high_us is None:
        return 0.0
    return (r.ci_high_us - r.ci_low_us) / (2 * r.median_us)


def measured_noise(best: LatencyResult, candidate: LatencyResult) -> float:
    """Uncertainty of the relative difference of two medians (conservative: CI halves added)."""
    return rel_half_ci(best) + rel_half_ci(candidate)


def median_standard_error(xs: list[float]) -> float:
    """Standard error of the median of `xs`, from their MAD (robust to one wild value)."""
    if len(xs) < 2:
        return 0.0
    m = statistics.median(xs)
    mad = statistics.median(abs(x - m) for x in xs)
    # 1.4826 * MAD estimates sigma for normal data; the median's SE is ~1.2533 sigma / sqrt(n)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(xs))


def first_look(
    best: LatencyResult, candidate: LatencyResult, noise_floor: float
) -> tuple[float, float, float]:
    """(gain, noise, threshold) from the two results as measured."""
    gain = gain_between(best, candidate)
    noise = measured_noise(best, candidate)
    return gain, noise, max(noise_floor, noise)


def pooled(results: list[LatencyResult]) -> LatencyResult:
    """One result holding every sample of `results` (same backend)."""
    samples = [s for r in results for s in r.samples_us]
    s = summarize(samples)
    return LatencyResult(
        status="ok",
        backend=results[0].backend,
        samples_us=samples,
        median_us=s.median,
        min_us=s.min,
        q1_us=s.q1,
        q3_us=s.q3,
        ci_low_us=s.ci_low,
        ci_high_us=s.ci_high,
        command=results[0].command,
        suspect=any(r.suspect for r in results),
        notes=[f"pooled from {len(results)} interleaved runs"],
    )


def allowed_losses(rounds: int) -> int:
    return 1 if rounds >= 4 else 0


def interleave(
    measure: Measure,
    a: Path,
    b: Path,
    rounds: int,
    stop_after_losses: int | None = None,
    pair: MeasurePair | None = None,
) -> tuple[list[LatencyResult], list[LatencyResult]]:
    """A B, B A, A B, ...: alternating the order cancels a linear drift within each pair.

    With `pair` (a backend that times two variants side by side in one run), each
    round is one such run, a first then b first alternately. With `stop_after_losses`,
    stop once more pairs than that were lost by b (b not faster): "better" is then out of
    reach and further pairs would only cost time. A failed run stops too.
    """
    ra: list[LatencyResult] = []
    rb: list[LatencyResult] = []
    lost = 0
    for i in range(rounds):
        if pair is not None:
            x, y = pair(a, b) if i % 2 == 0 else pair(b, a)[::-1]
            ra.append(x)
            rb.append(y)
        elif i % 2 == 0:
            ra.append(measure(a))
            rb.append(measure(b))
        else:
            rb.append(measure(b))
            ra.append(measure(a))
        if not (ra[-1].ok and rb[-1].ok):
            break
        lost += median_of(rb[-1]) >= median_of(ra[-1])
        if stop_after_losses is not None and lost > stop_after_losses:
            break
    return ra, rb


def fmt_gain(x: float) -> str:
    return f"{x * 100:+.1f}%"


def decide(
    best_source: Path,
    best: LatencyResult,
    candidate_source: Path,
    candidate: LatencyResult,
    measure: Measure,
    rule: Rule = Rule(),
    spread: float | None = None,
    pair: MeasurePair | None = None,
) -> Decision:
    """Apply the rule above; `measure(source)` runs one latency measurement (used to re-measure).

    `spread` is the run's between-process spread (SpreadTracker.spread()); None: the prior.
    `pair(a, b)`, when the backend has one, times both side by side for each re-measure
    round; the spread between processes then cancels out of the pair's gain.
    """
    floor = rule.noise_floor
    spread = PRIOR_SPREAD if spread is None else spread
    detectable = floor if pair is not None else detectable_gain(rule, spread)
    if not candidate.ok:
        return Decision(
            False,
            0.0,
            floor,
            0.0,
            False,
            f"candidate has no latency (status {candidate.status})",
            best.median_us,
            None,
            detectable=detectable,
        )
    if not best.ok or best.median_us is None:
        # a guard: the loop always holds a measured best; nothing can be "better" than no number
        return Decision(
            False,
            0.0,
            floor,
            0.0,
            False,
            f"the best so far has no latency (status {best.status}); cannot compare",
            None,
            candidate.median_us,
            detectable=detectable,
        )
    gain, noise, threshold = first_look(best, candidate, floor)
    first = {
        "gain": gain,
        "noise": noise,
        "threshold": threshold,
        "spread": spread,
        "best_us": best.median_us,
        "candidate_us": candidate.median_us,
    }
    suspect = best.suspect or candidate.suspect
    comparable = _clock(best) == _clock(candidate)
    fast = max(threshold * rule.close_high, rule.fast_z * math.sqrt(2) * spread)
    reject_below = rule.close_low * max(floor, min(noise, rule.remeasure_cap))
    if pair is not None:
        # the best was measured in another process, often minutes earlier: a real gain can
        # look like a small loss at first; the cheap in-process re-measure settles it
        reject_below -= rule.reject_z * math.sqrt(2) * spread
    if comparable and gain < reject_below:
        return Decision(
            False,
            gain,
            threshold,
            noise,
            False,
            f"gain {fmt_gain(gain)} is below the threshold {threshold * 100:.1f}%",
            best.median_us,
            candidate.median_us,
            {"first": first},
            detectable=min(detectable, fast),
        )
    if comparable and gain >= fast and not suspect:
        return Decision(
            True,
            gain,
            threshold,
            noise,
            False,
            f"gain {fmt_gain(gain)} is far beyond the threshold {threshold * 100:.1f}%",
            best.median_us,
            candidate.median_us,
            {"first": first},
            detectable=min(detectable, fast),
        )
    rounds = rule.pair_rounds if pair is not None else rule.rounds
    allowed = allowed_losses(rounds)
    ra, rb = interleave(
        measure, best_source, candidate_source, rounds, stop_after_losses=allowed, pair=pair
    )
    failed = [r for r in ra + rb if not r.ok]
    if failed:
        return Decision(
            False,
            gain,
            threshold,
            noise,
            True,
            f"re-measure failed ({failed[0].status}: {'; '.join(failed[0].notes)})",
            best.median_us,
            candidate.median_us,
            {"first": first},
            detectable=detectable,
        )
    pa, pb = pooled(ra), pooled(rb)
    round_gains = [gain_between(a, b) for a, b in zip(ra, rb, strict=True)]
    # the median of paired gains shrugs off one pair disturbed by a load spike
    gain2 = statistics.median(round_gains)
    # pairs of separate processes: their gains cannot be surer than the known spread allows
    # (a few pairs can agree by chance); pairs timed side by side do not carry that spread
    if (
        pair is not None
    ):  # each pair's own interval: pooling would add the offsets between processes
        within = statistics.median(measured_noise(a, b) for a, b in zip(ra, rb, strict=True))
        noise2 = max(within, 2 * median_standard_error(round_gains))
    else:
        noise2 = max(
            measured_noise(pa, pb),
            2 * median_standard_error(round_gains),
            detectable_gain(rule, spread),
        )
    threshold2 = max(floor, noise2)
    lost = sum(1 for g in round_gains if g <= 0)
    stopped = len(round_gains) < rounds
    # a down-clocked core makes a sample incomparable; such runs must never produce "better"
    down_clocked = pa.suspect or pb.suspect
    better = gain2 >= threshold2 and lost <= allowed and not down_clocked and not stopped
    pairs = f"{len(round_gains) - lost} of {len(round_gains)} pairs"
    if down_clocked:
        side = "both" if pa.suspect and pb.suspect else "best" if pa.suspect else "candidate"
        reason = (
            f"interleaved re-measure: suspect (down-clocked) samples ({side}); "
            f"gain {fmt_gain(gain2)} not trusted"
        )
    elif better:
        reason = (
            f"interleaved re-measure: gain {fmt_gain(gain2)} >= threshold "
            f"{threshold2 * 100:.1f}%, faster in {pairs}"
        )
    elif stopped:
        reason = (
            f"interleaved re-measure: stopped after {len(round_gains)} of {rounds} pairs, "
            f"faster in only {pairs}"
        )
    elif gain2 < threshold2:
        reason = (
            f"interleaved re-measure: gain {fmt_gain(gain2)} < threshold "
            f"{threshold2 * 100:.1f}% (faster in {pairs})"
        )
    else:
        reason = f"interleaved re-measure: gain {fmt_gain(gain2)} but faster in only {pairs}"
    details = {
        "first": first,
        "round_gains": round_gains,
        "best_rounds_us": [r.median_us for r in ra],
        "candidate_rounds_us": [r.median_us for r in rb],
        "suspect": suspect or pa.suspect or pb.suspect,
    }
    return Decision(
        better,
        gain2,
        threshold2,
        noise2,
        True,
        reason,
        pa.median_us,
        pb.median_us,
        details,
        detectable=detectable if stopped else max(threshold2, floor),
    )


def median_of(r: LatencyResult) -> float:
    """The median of a result known to be ok."""
    assert r.median_us is not None, "only results with status ok are compared"
    return r.median_us


def gain_between(before: LatencyResult, after: LatencyResult) -> float:
    return relative_change(median_of(before), median_of(after))


def _clock(r: LatencyResult) -> str:
    return str((r.extra or {}).get("clock", "wall"))


def drift(start: LatencyResult, end: LatencyResult) -> float | None:
    """Relative change of the baseline between the start and the end of a run (positive: slower now)."""
    if start.median_us is None or end.median_us is None or not (start.ok and end.ok):
        return None
    return (end.median_us - start.median_us) / start.median_us
