"""Order statistics: quantiles, the distribution-free CI of the median."""

from __future__ import annotations

import math
import random

import pytest

from bot.measure.stats import median_ci_ranks, quantile, relative_change, summarize


def binom_coverage(n: int, lo: int) -> float:
    # X ~ Bin(n, 1/2) samples below the median; the CI [x_lo, x_{n-1-lo}] (0-based) covers
    # the median when lo + 1 <= X <= n - 1 - lo, with probability 1 - 2 P(X <= lo)
    tail = sum(math.comb(n, i) for i in range(lo + 1)) / 2**n
    return 1 - 2 * tail


@pytest.mark.parametrize("n", [6, 10, 30, 31, 100, 200])
def test_median_ci_ranks_cover_95_percent_and_are_the_tightest(n):
    lo, hi = median_ci_ranks(n)
    assert hi == n - 1 - lo
    assert binom_coverage(n, lo) >= 0.95
    assert binom_coverage(n, lo + 1) < 0.95  # one rank tighter would not cover


def test_median_ci_matches_the_published_table_for_n_100():
    # Conover's table: ranks 40 and 61 (1-based) for 95 % at n = 100
    assert median_ci_ranks(100) == (39, 60)


def test_tiny_samples_fall_back_to_the_full_range():
    assert median_ci_ranks(1) == (0, 0)
    assert median_ci_ranks(4) == (0, 3)


def test_quantile_interpolates_like_numpy():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert quantile(xs, 0.5) == 2.5
    assert quantile(xs, 0.25) == 1.75
    assert quantile(xs, 0.75) == 3.25


def test_summarize_orders_and_covers():
    rng = random.Random(1)
    xs = [100 + rng.expovariate(0.1) for _ in range(61)]
    s = summarize(xs)
    assert s.n == 61 and s.min == min(xs)
    assert s.ci_low <= s.median <= s.ci_high
    assert s.q1 <= s.median <= s.q3
    assert s.median == sorted(xs)[30]
    assert 0 < s.rel_ci_half_width < 1


def test_summarize_rejects_no_samples():
    with pytest.raises(ValueError):
        summarize([])


def test_relative_change_sign():
    assert relative_change(100.0, 90.0) == pytest.approx(0.10)
    assert relative_change(100.0, 110.0) == pytest.approx(-0.10)


@pytest.mark.parametrize("n", [500, 1001, 4000])
def test_log_space_ranks_equal_the_exact_integer_sum(n):
    # the exact rule with big integers: the largest k with P(X <= k) <= 2.5 %
    total, cdf, k = 2**n, 0, -1
    for i in range(n + 1):
        cdf += math.comb(n, i)
        if cdf * 40 > total:
            break
        k = i
    assert median_ci_ranks(n) == (max(k, 0), n - 1 - max(k, 0))


def test_median_ci_of_20000_samples_matches_the_normal_approximation():
    lo, hi = median_ci_ranks(20_000)
    # normal approximation of the 95 % ranks: n/2 -+ 1.96 sqrt(n)/2
    assert abs(lo - (10_000 - 1.96 * math.sqrt(20_000) / 2)) < 3
