"""memlab.significance cross-checked against scipy.stats on random fixtures.

scipy is a test-only dependency (the ``test`` extra): memlab computes its
statistics with numpy alone, and these tests hold that code to scipy's.
Hypothesis draws the fixtures; ``derandomize`` keeps every run identical.
"""

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.significance import (
    EXACT_MAX_SAMPLES,
    mann_whitney_u,
    median_of_runs_interval,
    median_ratio_interval,
    repetitions_to_decide,
    runs_ratio_interval,
)

SETTINGS = settings(derandomize=True, deadline=None, max_examples=60,
                    suppress_health_check=[HealthCheck.too_slow])

distinct_floats = st.floats(min_value=0.01, max_value=1000.0, allow_nan=False, allow_infinity=False)


@st.composite
def tie_free_pair(draw, max_size=EXACT_MAX_SAMPLES):
    """Two samples without any tied value (within or across the sides)."""
    n1 = draw(st.integers(1, max_size))
    n2 = draw(st.integers(1, max_size))
    values = draw(st.lists(distinct_floats, min_size=n1 + n2, max_size=n1 + n2, unique=True))
    return values[:n1], values[n1:]


@st.composite
def tied_pair(draw):
    """Two samples of small integers (many ties), not all values equal."""
    n1 = draw(st.integers(2, 80))
    n2 = draw(st.integers(2, 80))
    levels = draw(st.integers(2, 12))
    first = draw(st.lists(st.integers(0, levels), min_size=n1, max_size=n1))
    second = draw(st.lists(st.integers(0, levels), min_size=n2, max_size=n2))
    if len(set(first + second)) < 2:
        second[0] = first[0] + 1
    return [float(v) for v in first], [float(v) for v in second]


@SETTINGS
@given(tie_free_pair())
def test_exact_u_test_matches_scipy(pair):
    first, second = pair
    ours = mann_whitney_u(first, second)
    theirs = scipy.stats.mannwhitneyu(first, second, alternative="two-sided", method="exact")
    assert ours.method == "exact"
    assert ours.u == theirs.statistic
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-15)


@SETTINGS
@given(tied_pair())
def test_tie_corrected_normal_approximation_matches_scipy(pair):
    first, second = pair
    ours = mann_whitney_u(first, second)
    theirs = scipy.stats.mannwhitneyu(first, second, alternative="two-sided",
                                      method="asymptotic", use_continuity=True)
    assert ours.method == "normal"
    assert ours.u == theirs.statistic
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-15)


@SETTINGS
@given(tie_free_pair(max_size=120).filter(lambda p: max(map(len, p)) > EXACT_MAX_SAMPLES))
def test_large_samples_use_scipys_asymptotic_p(pair):
    first, second = pair
    ours = mann_whitney_u(first, second)
    theirs = scipy.stats.mannwhitneyu(first, second, alternative="two-sided",
                                      method="asymptotic", use_continuity=True)
    assert ours.method == "normal"
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-15)


def _ratio_of_medians(baseline, candidate, axis=-1):
    return np.median(candidate, axis=axis) / np.median(baseline, axis=axis)


@st.composite
def lognormal_pair(draw):
    """A baseline and a candidate as a benchmark makes them: positive, skewed, any spread."""
    seed = draw(st.integers(0, 2**32 - 1))
    n1 = draw(st.integers(3, 40))
    n2 = draw(st.integers(3, 40))
    spread1 = draw(st.floats(0.005, 0.8))
    spread2 = draw(st.floats(0.005, 0.8))
    shift = draw(st.floats(-1.0, 1.0))
    rng = np.random.default_rng(seed)
    baseline = rng.lognormal(2.0, spread1, n1)
    candidate = rng.lognormal(2.0 + shift, spread2, n2)
    return baseline, candidate, seed


@settings(derandomize=True, deadline=None, max_examples=40,
          suppress_health_check=[HealthCheck.too_slow])
@given(lognormal_pair(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_bootstrap_interval_matches_scipy(pair, confidence):
    """Each bound is a quantile of scipy's bootstrap distribution, within Monte Carlo error.

    The two bootstraps draw different resamples, and the median of a small
    sample takes few values, so the bounds are compared where it is fair: in
    probability. Below our lower bound, scipy's 20000 resampled ratios must
    hold at most (1 - confidence) / 2 + tol of their mass, and at or below it
    at least (1 - confidence) / 2 - tol; likewise at the upper bound. tol is
    five standard errors of the difference of two independent estimates of
    the tail's quantile level from 20000 resamples each,
    5 * sqrt(2 * tail * (1 - tail) / 20000), and at least 0.0075 (the value
    for a 2.5% tail): 0.015 for the 10% tails of an 80% interval, where a
    fixed 0.0075 was 2.5 standard errors and failed a case at 0.0076.
    """
    baseline, candidate, seed = pair
    resamples = 20_000
    low, high = median_ratio_interval(baseline, candidate, confidence=confidence,
                                      resamples=resamples, seed=seed)
    result = scipy.stats.bootstrap(
        (baseline, candidate), _ratio_of_medians, vectorized=True, paired=False,
        method="percentile", n_resamples=resamples, confidence_level=confidence,
        rng=np.random.default_rng(seed + 1),
    )
    distribution = np.sort(result.bootstrap_distribution)
    tail = (1.0 - confidence) / 2.0
    tol = max(0.0075, 5.0 * math.sqrt(2.0 * tail * (1.0 - tail) / resamples))

    def below(value):
        return np.searchsorted(distribution, value, side="left") / distribution.size

    def at_or_below(value):
        return np.searchsorted(distribution, value, side="right") / distribution.size

    assert below(low) <= tail + tol and at_or_below(low) >= tail - tol
    assert below(high) <= 1.0 - tail + tol and at_or_below(high) >= 1.0 - tail - tol
    scipy_low, scipy_high = result.confidence_interval
    assert (low <= scipy_high) and (scipy_low <= high)  # the intervals overlap


def _holds_scipys_quantiles(low, high, distribution, confidence, tol=0.0075):
    """Our bounds sit at scipy's bootstrap distribution's tail quantiles (see above)."""
    distribution = np.sort(distribution)
    tail = (1.0 - confidence) / 2.0

    def below(value):
        return np.searchsorted(distribution, value, side="left") / distribution.size

    def at_or_below(value):
        return np.searchsorted(distribution, value, side="right") / distribution.size

    return (below(low) <= tail + tol and at_or_below(low) >= tail - tol
            and below(high) <= 1.0 - tail + tol and at_or_below(high) >= 1.0 - tail - tol)


@settings(derandomize=True, deadline=None, max_examples=30,
          suppress_health_check=[HealthCheck.too_slow])
@given(lognormal_pair(), st.sampled_from([0.8, 0.95, 0.99]))
def test_the_one_level_case_of_the_two_level_bootstrap_matches_scipy(pair, confidence):
    """One run per side: the two-level bootstrap is scipy's bootstrap of the median (ratio).

    And its other one-level case, runs of one sample each: resampling runs is
    resampling the values."""
    baseline, candidate, seed = pair
    resamples = 20_000
    rng = np.random.default_rng(seed + 1)
    single = scipy.stats.bootstrap((baseline,), np.median, vectorized=True, method="percentile",
                                   n_resamples=resamples, confidence_level=confidence, rng=rng)
    for runs in ([baseline], [[value] for value in baseline]):
        low, high = median_of_runs_interval(runs, confidence=confidence, resamples=resamples, seed=seed)
        assert _holds_scipys_quantiles(low, high, single.bootstrap_distribution, confidence)
    ratio = scipy.stats.bootstrap(
        (baseline, candidate), _ratio_of_medians, vectorized=True, paired=False,
        method="percentile", n_resamples=resamples, confidence_level=confidence, rng=rng,
    )
    low, high = runs_ratio_interval([baseline], [candidate], confidence=confidence,
                                    resamples=resamples, seed=seed)
    assert _holds_scipys_quantiles(low, high, ratio.bootstrap_distribution, confidence)


def test_bootstrap_interval_covers_the_true_ratio_as_often_as_scipys():
    """Coverage over 200 fixtures with a known true ratio of medians (1.3)."""
    rng = np.random.default_rng(7)
    ours = theirs = 0
    trials = 200
    for trial in range(trials):
        baseline = rng.lognormal(0.0, 0.3, 15)
        candidate = 1.3 * rng.lognormal(0.0, 0.3, 15)
        low, high = median_ratio_interval(baseline, candidate, resamples=2000, seed=trial)
        ours += low <= 1.3 <= high
        result = scipy.stats.bootstrap(
            (baseline, candidate), _ratio_of_medians, vectorized=True, paired=False,
            method="percentile", n_resamples=2000, rng=np.random.default_rng(trial + 10_000),
        )
        theirs += result.confidence_interval.low <= 1.3 <= result.confidence_interval.high
    # the same method on the same data: coverage agrees within a few trials
    assert abs(ours - theirs) <= 0.04 * trials
    assert ours >= 0.85 * trials


@SETTINGS
@given(lognormal_pair())
def test_repetitions_to_decide_is_consistent(pair):
    baseline, candidate, seed = pair
    low, high = median_ratio_interval(baseline, candidate, seed=seed)
    ratio = float(np.median(candidate) / np.median(baseline))
    n = max(len(baseline), len(candidate))
    needed = repetitions_to_decide(n, ratio, low, high, (0.95, 1.05))
    straddles = low < 0.95 < high or low < 1.05 < high
    if not straddles:
        assert needed == n
    elif needed is not None:
        assert needed > n
        # the interval shrunk by sqrt(n / needed) around the ratio clears both edges
        scale = (n / needed) ** 0.5
        shrunk_low = ratio - (ratio - low) * scale
        shrunk_high = ratio + (high - ratio) * scale
        for edge in (0.95, 1.05):
            assert not shrunk_low < edge - 1e-12 or not edge + 1e-12 < shrunk_high
