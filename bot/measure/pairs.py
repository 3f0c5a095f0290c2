"""The cpu backend's comparison: best and candidate timed side by side in pairs.

The single-result rule (a best measured earlier against a fresh candidate) is bot.measure.decide;
this module is the paired rule that backends able to time two kernels side by side use.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bot.measure.decide import (
    MeasurePair,
    Rule,
    fmt_gain,
    gain_between,
    measured_noise,
    median_of,
    median_standard_error,
)
from bot.measure.types import Decision, LatencyResult


def decide_in_pairs(
    best_source: Path, candidate_source: Path, pair: MeasurePair, rule: Rule = Rule()
) -> tuple[LatencyResult, Decision]:
    """The cpu backend's comparison: best and candidate timed side by side from the start.

    Both sides share the moment, core and load, each in its own process (runners/forked.py),
    so a pair compares like with like (benchmarks/noise.py: the gain of one such pair of identical kernels stays within
    +-2 % in 98 % of runs, where two separate processes differ by 5-10 %). Returns the
    candidate's side of the first pair (its recorded latency) and the decision:

    1. first pair's gain < close_low * floor (1.5 %): not better (one run);
    2. otherwise `pair_rounds` (2) pairs in all, 3 (`pair_rounds_close`) while their median
       gain is under twice the floor and the two differ by more than `pair_agree` (0.75
       points), the import order swapped each round, stopped at the
       first pair that is not beyond the floor; better only if every pair's gain >= floor,
       the median gain >= max(floor, twice the standard error estimated from the pairs'
       spread), and no sample is suspect. One pair never decides "better": an identical
       copy measured >= 3 % faster in one pair in 2 % of the runs, and once in 600 runs in
       two pairs in a row (3.5 % and 4.6 %).
    """
    floor = rule.noise_floor
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
            detectable=floor,
        )
    gain = gain_between(ra, rb)
    noise = measured_noise(ra, rb)
    first = {
        "gain": gain,
        "noise": noise,
        "threshold": floor,
        "best_us": ra.median_us,
        "candidate_us": rb.median_us,
        "in_one_process": True,  # timed side by side in one run (the key predates a process per side)
    }
    if gain < rule.close_low * floor:
        return rb, Decision(
            False,
            gain,
            floor,
            noise,
            False,
            f"gain {fmt_gain(gain)} is below the threshold {floor * 100:.1f}% (timed side by side)",
            ra.median_us,
            rb.median_us,
            {"first": first},
            detectable=floor,
        )
    pa_list, pb_list = [ra], [rb]
    rounds = rule.pair_rounds
    i = 0
    while len(pa_list) < rounds or (
        len(pa_list) < rule.pair_rounds_close and _close(pa_list, pb_list, rule)
    ):
        i += 1
        if gain_between(pa_list[-1], pb_list[-1]) < floor:
            break  # a pair not beyond the floor: better is out of reach
        # the order of import swaps each round: the candidate loads first in the second pair
        x, y = (
            pair(candidate_source, best_source)[::-1]
            if i % 2
            else pair(best_source, candidate_source)
        )
        if not (x.ok and y.ok):
            return rb, Decision(
                False,
                gain,
                floor,
                noise,
                True,
                f"re-measure failed ({(x if not x.ok else y).status})",
                ra.median_us,
                rb.median_us,
                {"first": first},
                detectable=floor,
            )
        pa_list.append(x)
        pb_list.append(y)
    round_gains = [gain_between(a, b) for a, b in zip(pa_list, pb_list, strict=True)]
    gain2 = statistics.median(round_gains)
    noise2 = 2 * median_standard_error(round_gains)
    threshold2 = max(floor, noise2)
    short = sum(1 for g in round_gains if g < floor)
    complete = len(round_gains) >= rule.pair_rounds and (
        len(round_gains) >= rule.pair_rounds_close or not _close(pa_list, pb_list, rule)
    )
    suspect = any(r.suspect for r in pa_list + pb_list)
    better = complete and short == 0 and gain2 >= threshold2 and not suspect
    pairs = f"{len(round_gains) - short} of {len(round_gains)} pairs"
    if suspect:
        reason = f"pairs side by side: suspect (down-clocked) samples; gain {fmt_gain(gain2)} not trusted"
    elif better:
        reason = (
            f"pairs side by side: gain {fmt_gain(gain2)} >= threshold {threshold2 * 100:.1f}%, "
            f"beyond the floor in {pairs}"
        )
    elif short or not complete:
        reason = f"pairs side by side: gain {fmt_gain(gain2)}, beyond the {floor * 100:.1f}% floor in only {pairs}"
    else:
        reason = (
            f"pairs side by side: gain {fmt_gain(gain2)} < threshold "
            f"{threshold2 * 100:.1f}% (the pairs disagree)"
        )
    details = {
        "first": first,
        "round_gains": round_gains,
        "best_rounds_us": [r.median_us for r in pa_list],
        "candidate_rounds_us": [r.median_us for r in pb_list],
        "suspect": suspect,
    }
    return rb, Decision(
        better,
        gain2,
        threshold2,
        noise2,
        len(round_gains) > 1,
        reason,
        statistics.median(median_of(r) for r in pa_list),
        statistics.median(median_of(r) for r in pb_list),
        details,
        detectable=threshold2,
    )


def _close(pa: list[LatencyResult], pb: list[LatencyResult], rule: Rule) -> bool:
    """The pairs so far put the gain under twice the floor: one more pair must confirm it,
    unless the first two are both beyond the floor and agree within `rule.pair_agree`."""
    floor = rule.noise_floor
    gains = [gain_between(a, b) for a, b in zip(pa, pb, strict=True)]
    if len(gains) == 2 and min(gains) >= floor and abs(gains[0] - gains[1]) <= rule.pair_agree:
        return False
    return statistics.median(gains) < 2 * floor
