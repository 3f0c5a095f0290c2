"""The decision rule: pure cases with given samples, and the interleaved re-measure for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.measure.backends.common import from_samples
from bot.measure.backends.cpu import measure_cpu
from bot.measure.decide import (
    Rule,
    decide,
    drift,
    first_look,
    interleave,
    measured_noise,
    pooled,
)
from bot.measure.types import LatencyResult

KERNELS = Path(__file__).parent / "measure_kernels"


def result(center: float, spread: float = 0.002, n: int = 31) -> LatencyResult:
    # evenly spread samples around `center`: a known median and a narrow CI
    xs = [center * (1 + spread * (i - n // 2) / (n // 2)) for i in range(n)]
    return from_samples("cpu", xs, ["x"])


class Recorder:
    """A measure function that returns prepared results and records the order of calls."""

    def __init__(self, by_source: dict[Path, LatencyResult]):
        self.by_source, self.calls = by_source, []

    def __call__(self, source: Path) -> LatencyResult:
        self.calls.append(source)
        return self.by_source[source]


A, B = Path("a.py"), Path("b.py")


def test_clear_loss_is_not_better_and_not_remeasured():
    m = Recorder({})
    d = decide(A, result(100), B, result(101), m)
    assert not d.better and not d.remeasured and m.calls == []
    assert d.gain == pytest.approx(-0.01, abs=1e-9)
    assert d.threshold == 0.03


def test_far_beyond_threshold_is_better_without_remeasure():
    d = decide(A, result(100), B, result(50), Recorder({}))
    assert d.better and not d.remeasured
    assert d.best_us == 100 and d.candidate_us == 50


def test_close_call_is_remeasured_interleaved_and_the_new_medians_decide():
    # first look says +5 %; the interleaved re-measure finds the candidate a little slower
    m = Sequence(
        {A: [result(100), result(100), result(100)], B: [result(99), result(99), result(101)]}
    )
    d = decide(A, result(105), B, result(100), m, Rule(rounds=3))
    assert d.remeasured and not d.better
    assert m.calls == [A, B, B, A, A, B]  # A B, B A, A B
    assert d.best_us == pytest.approx(100) and d.candidate_us == pytest.approx(99, rel=0.01)
    assert d.details["first"]["gain"] == pytest.approx(0.05 / 1.05)


def test_close_call_confirmed_by_remeasure():
    m = Recorder({A: result(100), B: result(94)})
    d = decide(A, result(100), B, result(95), m, Rule(rounds=2), spread=0.01)
    assert d.remeasured and d.better
    assert d.gain == pytest.approx(0.06)
    assert "faster in 2 of 2 pairs" in d.reason


def test_measured_noise_raises_the_threshold():
    wide_a, wide_b = result(100, spread=0.2), result(93, spread=0.2)
    gain, noise, threshold = first_look(wide_a, wide_b, 0.03)
    assert noise == pytest.approx(measured_noise(wide_a, wide_b))
    assert threshold == noise > 0.03
    # 7 % gain but +-~12 % noise: the re-measure (same noise) keeps it not better
    d = decide(A, wide_a, B, wide_b, Recorder({A: wide_a, B: wide_b}))
    assert not d.better and d.threshold > 0.07


def test_suspect_sample_is_always_remeasured():
    best = result(100)
    best.suspect = True  # e.g. down-clocked
    d = decide(A, best, B, result(50), Recorder({A: result(100), B: result(50)}))
    assert d.remeasured and d.better


def suspect(center: float) -> LatencyResult:
    r = result(center)
    r.suspect = True  # down-clocked
    return r


@pytest.mark.parametrize("side", ["best", "candidate", "both"])
def test_suspect_samples_in_the_remeasure_are_never_better(side):
    remeasure = {
        A: suspect(100) if side in ("best", "both") else result(100),
        B: suspect(50) if side in ("candidate", "both") else result(50),
    }
    # a suspect first look forces the re-measure; what the re-measure sees decides
    d = decide(A, result(100), B, suspect(50), Recorder(remeasure))
    assert d.remeasured and not d.better
    assert "suspect (down-clocked) samples" in d.reason and f"({side})" in d.reason
    assert d.details["suspect"]


def test_suspect_first_look_but_clean_remeasure_decides_on_the_remeasure():
    d = decide(A, result(100), B, suspect(90), Recorder({A: result(100), B: result(90)}))
    assert d.remeasured and d.better and "suspect" not in d.reason


def test_a_best_without_latency_is_never_beaten():
    failed = LatencyResult(status="error", backend="cpu")
    d = decide(A, failed, B, result(50), Recorder({}))
    assert not d.better and d.gain == 0.0
    assert "the best so far has no latency (status error)" in d.reason


def test_failed_candidate_and_failed_remeasure():
    failed = LatencyResult(status="timeout", backend="cpu")
    d = decide(A, result(100), B, failed, Recorder({}))
    assert not d.better and "status timeout" in d.reason
    d = decide(A, result(100), B, result(96), Recorder({A: result(100), B: failed}))
    assert not d.better and d.remeasured and "re-measure failed" in d.reason


def test_pooled_and_drift():
    p = pooled([result(100), result(110)])
    assert len(p.samples_us) == 62 and p.ok
    assert drift(result(100), result(110)) == pytest.approx(0.10)
    assert drift(result(100), LatencyResult(status="error", backend="cpu")) is None


def test_interleave_with_real_measurements_ranks_real_kernels(tmp_path):
    src = (KERNELS / "work.py").read_text()
    fast, slow = tmp_path / "fast.py", tmp_path / "slow.py"
    # an 8x difference in work: far above what a loaded CI host's spread can hide, so the
    # assertions below test the re-measure, not the host's quietness
    fast.write_text(src.replace("WORK = 4000", "WORK = 500"))
    slow.write_text(src)

    def measure(p: Path) -> LatencyResult:
        return measure_cpu(p, repeats=15, timeout_s=60)

    # a stale best measurement (10 % above the candidate's) makes the first look a close
    # call; the interleaved re-measure of the real files must find the real, much larger gain
    cand = measure(fast)
    stale_best = result(cand.median_us * 1.10)
    d = decide(slow, stale_best, fast, cand, measure)
    assert d.details["first"]["gain"] == pytest.approx(0.1 / 1.1)
    assert d.remeasured and d.better and d.gain > 0.3
    ra, rb = interleave(measure, slow, fast, 1)
    assert ra[0].median_us > rb[0].median_us


class Sequence:
    """A measure function that returns each source's prepared results in turn."""

    def __init__(self, by_source: dict[Path, list[LatencyResult]]):
        self.queues = {k: list(v) for k, v in by_source.items()}
        self.calls: list[Path] = []

    def __call__(self, source: Path) -> LatencyResult:
        self.calls.append(source)
        return self.queues[source].pop(0)


def test_one_disturbed_pair_of_five_is_tolerated():
    # the candidate is 8 % faster, but a load spike hits it in the third pair
    cand = [result(92), result(92), result(140), result(92), result(92)]
    m = Sequence({A: [result(100)] * 5, B: cand})
    d = decide(A, result(100), B, result(95), m, Rule(rounds=5))
    assert d.remeasured and d.better
    assert d.gain == pytest.approx(0.08)
    assert "faster in 4 of 5 pairs" in d.reason
    assert d.details["round_gains"][2] == pytest.approx(-0.4)


def test_two_lost_pairs_are_not_better():
    cand = [result(92), result(110), result(92), result(110), result(92)]
    d = decide(
        A, result(100), B, result(95), Sequence({A: [result(100)] * 5, B: cand}), Rule(rounds=5)
    )
    # the fourth pair is the second lost one: "better" is out of reach, the fifth is not measured
    assert not d.better and "stopped after 4 of 5 pairs, faster in only 2 of 4 pairs" in d.reason


def test_scattered_pairs_raise_the_noise_above_the_floor():
    # every pair is faster, but by 1 % to 12 %: the median (4 %) is within the scatter
    gains = [0.01, 0.02, 0.04, 0.09, 0.12]
    cand = [result(100 * (1 - g)) for g in gains]
    d = decide(
        A, result(100), B, result(95), Sequence({A: [result(100)] * 5, B: cand}), Rule(rounds=5)
    )
    assert d.gain == pytest.approx(0.04)
    assert d.noise > 0.04 and d.threshold == d.noise and not d.better


def test_median_standard_error():
    from bot.measure.decide import median_standard_error

    assert median_standard_error([0.05]) == 0.0
    assert median_standard_error([0.05] * 5) == 0.0
    assert median_standard_error([0.0, 0.1, 0.2, 0.3, 0.4]) == pytest.approx(
        1.2533 * 1.4826 * 0.1 / 5**0.5
    )


def test_a_huge_first_look_gain_with_a_wide_interval_is_remeasured_not_discarded():
    # issue 16 item 8: repeats 10, one slow sample widened the interval to ~200 %
    wide = from_samples("cpu", [100.0] * 6 + [2000.0] * 4, ["x"])  # median 100, CI spans 100..2000
    cand = result(15)  # +85 % at first look
    m = Sequence({A: [result(100)] * 5, B: [result(15)] * 5})
    d = decide(A, wide, B, cand, m)
    assert (
        d.details["first"]["gain"] < 0.5 * d.details["first"]["threshold"]
    )  # the old rule discarded it
    assert d.remeasured and d.better and m.calls


def test_the_fast_path_needs_the_gain_to_beat_the_between_process_spread():
    # 30 % at first look: beyond 8 x 3 %, but with a spread of 10 % two processes differ by that
    m = Sequence({A: [result(100)] * 5, B: [result(70)] * 5})
    d = decide(A, result(100), B, result(70), m, spread=0.10)
    assert d.remeasured and d.better
    d = decide(A, result(100), B, result(70), Recorder({}), spread=0.02)
    assert d.better and not d.remeasured


def test_results_on_different_clocks_are_not_compared_at_first_look():
    wall = result(100)
    wall.extra["clock"] = "wall"
    cpu = result(50)
    cpu.extra["clock"] = "cpu"
    m = Sequence({A: [cpu] * 5, B: [cpu] * 5})
    d = decide(A, wall, B, cpu, m)
    assert d.remeasured and not d.better  # same source, same clock now: no gain


def test_every_decision_states_its_smallest_detectable_gain():
    from bot.measure.decide import detectable_gain

    d = decide(A, result(100), B, result(101), Recorder({}), spread=0.05)
    assert d.detectable == pytest.approx(detectable_gain(Rule(), 0.05))
    assert 0.07 < d.detectable < 0.09  # 2 x 1.2533 x sqrt(2) x 5 % / sqrt(5)
    noisy = decide(A, result(100), B, result(101), Recorder({}), spread=0.30)
    assert noisy.detectable > 0.4
    assert (
        decide(A, result(100), B, result(101), Recorder({}), spread=0.001).detectable == 0.03
    )  # the floor


def test_spread_tracker_pools_repeated_sources_and_falls_back_to_the_prior():
    import math

    from bot.measure.decide import PRIOR_SPREAD, SpreadTracker

    t = SpreadTracker(min_df=3)
    t.add("a", 100.0)
    t.add("b", 50.0)
    assert t.spread() == PRIOR_SPREAD and t.df == 0
    for x in (110.0, 90.0):
        t.add("a", x)
    t.add("b", 55.0)
    assert t.df == 3
    logs_a = [math.log(x) for x in (100, 110, 90)]
    logs_b = [math.log(x) for x in (50, 55)]
    ss = sum((x - sum(logs_a) / 3) ** 2 for x in logs_a) + sum(
        (x - sum(logs_b) / 2) ** 2 for x in logs_b
    )
    assert t.spread() == pytest.approx(math.sqrt(ss / 3))


class Pairs:
    """A pair-measure function: returns prepared (a, b) results and records the argument order."""

    def __init__(self, gains: list[float]):
        self.gains, self.calls = list(gains), []

    def __call__(self, x: Path, y: Path) -> tuple[LatencyResult, LatencyResult]:
        self.calls.append((x, y))
        g = self.gains.pop(0)
        a, b = result(100), result(100 * (1 - g))
        return (a, b) if x == A else (b, a)


def test_pairs_timed_in_one_process_decide_when_available():
    pairs = Pairs([0.05, 0.05, 0.05])
    d = decide(
        A, result(100), B, result(99), Recorder({}), Rule(pair_rounds=3), pair=pairs, spread=0.05
    )
    # -1 % at first look is no reason to reject when the best was measured in another process
    assert d.remeasured and d.better and d.gain == pytest.approx(0.05)
    assert pairs.calls == [(A, B), (B, A), (A, B)]  # the order alternates between rounds
    assert d.detectable == 0.03


def test_pairs_stop_at_the_first_lost_round_and_never_accept_it():
    pairs = Pairs([0.05, -0.001, 0.05])
    d = decide(A, result(100), B, result(95), Recorder({}), Rule(pair_rounds=3), pair=pairs)
    assert not d.better and len(pairs.calls) == 2 and "stopped after 2 of 3 pairs" in d.reason


def test_with_pairs_only_a_clear_first_look_loss_skips_the_remeasure():
    d = decide(A, result(100), B, result(130), Recorder({}), pair=Pairs([]), spread=0.05)
    assert not d.remeasured and not d.better


def test_side_by_side_a_loss_takes_one_run_and_a_win_at_least_two():
    from bot.measure.pairs import decide_in_pairs

    # the prior spread (5 %) explains a first look down to 1.5 - 1.5 * 5 = -6 %
    loss = Pairs([-0.07])
    cand, d = decide_in_pairs(A, B, loss)
    assert not d.better and not d.remeasured and len(loss.calls) == 1
    assert cand.median_us == pytest.approx(107) and "pair spread 5.0%" in d.reason
    win = Pairs([0.30, 0.29])
    cand, d = decide_in_pairs(A, B, win)
    assert d.better and len(win.calls) == 2 and d.gain == pytest.approx(0.295)
    assert "side by side" in d.reason and d.details["first"]["in_one_process"]
    fluke = Pairs([0.07, 0.001, -0.01, -0.02, 0.0, 0.01])  # one pair can be off by several %
    _, d = decide_in_pairs(A, B, fluke)
    n = len(fluke.calls)
    assert not d.better and 3 <= n < 6 and f"1 of {n} pairs beyond" in d.reason


def test_side_by_side_a_small_first_loss_is_looked_at_again_and_the_order_swaps():
    from bot.measure.pairs import decide_in_pairs

    pairs = Pairs([-0.01, 0.06, 0.055, 0.06, 0.06, 0.06])  # -1 %: within what spread explains
    _, d = decide_in_pairs(A, B, pairs)
    assert d.remeasured and pairs.calls[:3] == [(A, B), (B, A), (A, B)]
    # a short first pair is allowed from the fourth on, when the median clears the threshold
    assert d.better and len(pairs.calls) in (4, 5, 6) and d.gain == pytest.approx(0.06)


def test_side_by_side_an_identical_copy_seen_faster_twice_is_not_enough():
    from bot.measure.pairs import decide_in_pairs

    # two lucky pairs at +3.5 / +4.6 % (benchmarks/noise.py saw these for an identical copy):
    # at the prior 5 % spread two pairs need a median near 10 %; more pairs show no gain
    aa = Pairs([0.035, 0.046, 0.004, 0.01, 0.0, 0.0])
    _, d = decide_in_pairs(A, B, aa)
    assert not d.better and len(aa.calls) >= 3
    close = Pairs(
        [0.04, 0.045, 0.05, 0.045, 0.04, 0.05]
    )  # a real 4-5 % gain: more pairs confirm it
    _, d = decide_in_pairs(A, B, close)
    assert d.better and len(close.calls) >= 3 and d.gain == pytest.approx(0.045)


def test_side_by_side_the_learned_spread_sets_how_much_evidence_a_decision_needs():
    from bot.measure.pairs import PairSpread, decide_in_pairs

    quiet, noisy = PairSpread(), PairSpread()
    for _ in range(40):
        quiet.add([0.10, 0.105, 0.095])  # sd 0.5 %
        noisy.add([0.0, 0.10, -0.10])  # sd 10 % (capped per decision at 3x the estimate)
    assert quiet.sd() < 0.012 and noisy.sd() > 0.06
    # a candidate faster in most processes, 8 % slower in some (loaded_ops chan_hist)
    moded = [-0.08, 0.30, 0.28, -0.07, 0.31, 0.29]
    first = Pairs(moded)
    _, d = decide_in_pairs(A, B, first, spread=quiet)
    assert not d.better and len(first.calls) == 1  # a quiet run rejects -8 % at first look
    again = Pairs(moded)
    _, d = decide_in_pairs(A, B, again, spread=noisy)
    assert d.better and len(again.calls) == 6 and d.gain > 0.2
    # the quiet run decides a clear gain in two pairs; its detectable gain is the floor
    _, d = decide_in_pairs(A, B, Pairs([0.05, 0.052]), spread=quiet)
    assert d.better and d.detectable == pytest.approx(0.03)
    _, d = decide_in_pairs(A, B, Pairs([0.5, 0.5]), spread=noisy)
    assert d.better and d.detectable > 0.05


def test_pair_spread_pools_decisions_with_a_prior_and_caps_one_wild_decision():
    import math

    from bot.measure.pairs import PairSpread

    s = PairSpread(prior=0.03, prior_df=3)
    assert s.sd() == pytest.approx(0.03)
    s.add([0.01])  # one pair: nothing to learn
    assert s.df == 0
    s.add([0.0, 0.02])  # ss = 2e-4, df 1
    assert s.sd() == pytest.approx(math.sqrt((0.03**2 * 3 + 2e-4) / 4))
    before = s.sd()
    s.add([-1.0, 1.0])  # a wild candidate: at most (3 * sd)^2 per degree of freedom
    assert s.sd() == pytest.approx(math.sqrt((0.03**2 * 3 + 2e-4 + (3 * before) ** 2) / 5))
    # the decision in progress counts in full
    assert s.sd([-1.0, 1.0]) > s.sd()


def test_side_by_side_identical_kernels_rarely_pass_at_any_spread():
    """A/A pairs drawn normally at spreads 1-6.4 % (work.py to a kernel with process modes),
    the run's spread learned from earlier decisions: under 1 % false "better" at every spread,
    and a true 10 % gain found in most runs. The rule's previous form ("every pair beyond
    the floor", no learned spread) passed 2.9 % and 6.2 % of A/A decisions at 4 and 6.4 %."""
    import random

    from bot.measure.pairs import PairSpread, decide_in_pairs

    rng = random.Random(7)
    for sd in (0.01, 0.023, 0.04, 0.064):
        spread = PairSpread()
        false_better = found = 0
        n = 1500
        for _ in range(n):
            same = [rng.gauss(0, sd) for _ in range(6)]
            false_better += decide_in_pairs(A, B, Pairs(same), spread=spread)[1].better
            faster = [0.10 + rng.gauss(0, sd) for _ in range(6)]
            found += decide_in_pairs(A, B, Pairs(faster), spread=spread)[1].better
        assert false_better / n < 0.01, (sd, false_better)
        assert found / n > (0.95 if sd <= 0.04 else 0.7), (sd, found)
        assert abs(spread.sd() - sd) < max(0.3 * sd, 0.005), (sd, spread.sd())


def test_in_one_process_a_failed_candidate_has_no_decision_to_make():
    from bot.measure.pairs import decide_in_pairs

    broken = LatencyResult(status="error", backend="cpu", notes=["exit code 1"])
    cand, d = decide_in_pairs(A, B, lambda a, b: (broken, broken))
    assert cand.status == "error" and not d.better


def test_side_by_side_a_broken_median_is_no_gain_and_teaches_nothing():
    import math

    from bot.measure.pairs import PairSpread, decide_in_pairs

    spread = PairSpread()
    _, d = decide_in_pairs(A, B, Pairs([math.nan]), spread=spread)
    assert not d.better and "no finite gain" in d.reason and spread.df == 0
    _, d = decide_in_pairs(A, B, Pairs([0.2, math.nan]), spread=spread)
    assert not d.better and "no finite gain" in d.reason and spread.df == 0
