"""The statistics behind memlab.compare, checked against direct oracles."""

import itertools
import math

import numpy as np
import pytest

from memlab.significance import (
    UNSTABLE_RUN_SPREAD,
    clean_samples,
    coefficient_of_variation,
    is_unstable,
    mann_whitney_u,
    median_of_runs,
    median_of_runs_interval,
    median_ratio_interval,
    run_medians,
    run_spread,
    runs_ratio_interval,
    smallest_two_sided_p,
    within_run_spread,
)


def enumerated_p_value(first, second):
    """Two-sided exact p by listing every split of the pooled values."""
    pooled = list(first) + list(second)
    n1 = len(first)

    def u_of(group, rest):
        return sum((a > b) + 0.5 * (a == b) for a in group for b in rest)

    observed = u_of(first, second)
    low = high = total = 0
    for chosen in itertools.combinations(range(len(pooled)), n1):
        group = [pooled[i] for i in chosen]
        rest = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        u = u_of(group, rest)
        low += u <= observed
        high += u >= observed
        total += 1
    return min(1.0, 2 * min(low, high) / total)


@pytest.mark.parametrize("n1,n2,seed", [(3, 4, 1), (5, 5, 2), (6, 4, 3), (7, 6, 4), (1, 6, 5)])
def test_exact_p_value_equals_enumeration(n1, n2, seed):
    rng = np.random.default_rng(seed)
    first = rng.normal(10.0, 1.0, n1).tolist()
    second = rng.normal(10.8, 1.0, n2).tolist()
    result = mann_whitney_u(first, second)
    assert result.method == "exact"
    assert result.p_value == pytest.approx(enumerated_p_value(first, second), rel=1e-12)


def test_u_statistic_counts_pairs_where_the_first_is_larger():
    result = mann_whitney_u([1.0, 5.0, 9.0], [2.0, 6.0])
    # pairs (first > second): 5>2, 9>2, 9>6
    assert result.u == 3.0


def test_completely_separated_samples_reach_the_smallest_p():
    result = mann_whitney_u([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0])
    assert result.u == 0.0
    assert result.p_value == pytest.approx(2 / math.comb(10, 5))
    assert result.p_value == pytest.approx(smallest_two_sided_p(5, 5))


def test_the_test_is_symmetric():
    first, second = [3.1, 2.7, 4.4, 3.9], [5.0, 2.2, 6.1, 4.8, 5.5]
    forward, backward = mann_whitney_u(first, second), mann_whitney_u(second, first)
    assert forward.u + backward.u == len(first) * len(second)
    assert forward.p_value == pytest.approx(backward.p_value)


def test_ties_use_the_tie_corrected_normal_approximation():
    first = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    second = [3.0, 4.0, 4.0, 5.0, 2.0]
    result = mann_whitney_u(first, second)
    assert result.method == "normal"
    # by hand: pooled ranks with ties averaged
    pooled = sorted(first + second)
    rank = {v: np.mean([i + 1 for i, w in enumerate(pooled) if w == v]) for v in set(pooled)}
    u = sum(rank[v] for v in first) - 6 * 7 / 2
    assert result.u == pytest.approx(u)
    n1, n2, n = 6, 5, 11
    ties = [pooled.count(v) for v in set(pooled)]
    variance = n1 * n2 / 12 * ((n + 1) - sum(t**3 - t for t in ties) / (n * (n - 1)))
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    assert result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))
    # and the normal approximation is close to the enumerated exact answer
    assert result.p_value == pytest.approx(enumerated_p_value(first, second), abs=0.03)


def test_large_samples_use_the_normal_approximation_close_to_exact():
    rng = np.random.default_rng(7)
    first = rng.normal(0.0, 1.0, 40)
    second = rng.normal(0.5, 1.0, 45)
    exact = mann_whitney_u(first, second)
    assert exact.method == "exact"
    more = mann_whitney_u(np.concatenate([first, first + 1e-9]), np.concatenate([second, second + 1e-9]))
    assert more.method == "normal"
    # doubling both samples keeps U/(n1 n2) and shrinks p
    assert more.u / (80 * 90) == pytest.approx(exact.u / (40 * 45), abs=0.01)
    assert more.p_value < exact.p_value


def test_identical_values_everywhere_give_p_one():
    assert mann_whitney_u([2.0, 2.0, 2.0], [2.0, 2.0]).p_value == 1.0


def test_empty_side_is_an_error():
    with pytest.raises(ValueError, match="at least one finite sample on each side"):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError, match=r"got 2 and 0"):
        mann_whitney_u([1.0, 2.0], [float("nan")])


def test_smallest_p_for_small_samples():
    assert smallest_two_sided_p(3, 3) == pytest.approx(0.1)
    assert smallest_two_sided_p(0, 5) == 1.0
    assert smallest_two_sided_p(1, 1) == 1.0


def test_clean_samples_drops_missing_values():
    assert clean_samples([1.0, None, float("nan"), float("inf"), 2.5]).tolist() == [1.0, 2.5]
    assert clean_samples(None).size == 0


def test_coefficient_of_variation():
    assert coefficient_of_variation([9.0, 10.0, 11.0]) == pytest.approx(0.1)
    assert math.isnan(coefficient_of_variation([5.0]))
    assert math.isnan(coefficient_of_variation([-1.0, 1.0]))


def test_bootstrap_interval_brackets_the_ratio_and_is_reproducible():
    rng = np.random.default_rng(3)
    baseline = 10.0 * (1 + 0.01 * rng.standard_normal(15))
    candidate = 12.0 * (1 + 0.01 * rng.standard_normal(15))
    low, high = median_ratio_interval(baseline, candidate)
    ratio = np.median(candidate) / np.median(baseline)
    assert low <= ratio <= high
    assert 1.15 < low < high < 1.25
    assert median_ratio_interval(baseline, candidate) == (low, high)
    narrow = median_ratio_interval(baseline, candidate, confidence=0.5)
    assert low <= narrow[0] <= narrow[1] <= high


def test_bootstrap_interval_edge_cases():
    assert all(math.isnan(v) for v in median_ratio_interval([], [1.0]))
    assert all(math.isnan(v) for v in median_ratio_interval([0.0, 0.0], [1.0, 1.0]))
    with pytest.raises(ValueError, match=r"confidence=1.5 is outside \(0, 1\)"):
        median_ratio_interval([1.0], [1.0], confidence=1.5)
    with pytest.raises(ValueError, match="resamples=0 is below the minimum 1"):
        median_ratio_interval([1.0], [1.0], resamples=0)


# ---- runs: two-level data --------------------------------------------------------------------


def two_level_runs(rng, runs, samples, between, within, median=1.0):
    """Lognormal two-level samples: a run's level exp(N(0, between)), its samples exp(N(0, within)) around it.

    The run medians are symmetric around ``median`` in log space, so
    ``median`` is the true median of run medians.
    """
    levels = rng.normal(0.0, between, runs)
    return [median * np.exp(level + rng.normal(0.0, within, samples)) for level in levels]


def test_run_medians_spread_and_the_median_of_runs():
    runs = [[100.0, 104.0, 102.0], [125.0], [110.0, float("nan"), 112.0], []]
    assert run_medians(runs).tolist() == [102.0, 125.0, 111.0]
    assert median_of_runs(runs) == 111.0
    assert run_spread(runs) == pytest.approx(125.0 / 102.0)
    assert within_run_spread(runs) == pytest.approx(np.median([104 / 100, 1.0, 112 / 110]))
    assert run_spread([[5.0, 6.0]]) == 1.0  # one run cannot disagree with itself
    assert math.isnan(median_of_runs([])) and math.isnan(run_spread([[], [float("nan")]]))
    assert math.isnan(run_spread([[0.0], [1.0]]))  # no ratio to a zero median
    assert math.isnan(within_run_spread([[-1.0, 1.0]]))


def test_a_point_is_unstable_beyond_the_bound():
    assert UNSTABLE_RUN_SPREAD == 1.25
    # the numbers: one 4 MiB random chase point over four runs, a populate baseline
    assert is_unstable(run_spread([[196.0], [75.0], [317.0], [118.0]]))
    assert is_unstable(run_spread([[8.60], [4.97]]))
    assert not is_unstable(run_spread([[100.0], [110.0], [124.0]]))
    assert not is_unstable(math.nan)
    assert is_unstable(1.2, limit=1.1) and not is_unstable(1.2, limit=1.3)
    with pytest.raises(ValueError, match="limit=0.5 is below the minimum 1"):
        is_unstable(1.2, limit=0.5)


@pytest.mark.parametrize("runs,largest_share", [(3, 0.01), (5, 0.03)])
def test_the_unstable_bound_spares_stable_points(runs, largest_share):
    """How the bound was chosen: between-run noise as large as the 5% threshold is rarely flagged."""
    rng = np.random.default_rng(runs)
    sets = [two_level_runs(rng, runs, 5, between=0.05, within=0.02) for _ in range(4000)]
    flagged = sum(is_unstable(run_spread(point)) for point in sets)
    assert flagged <= largest_share * len(sets)
    noisy = [two_level_runs(rng, runs, 5, between=0.2, within=0.02) for _ in range(500)]
    assert sum(is_unstable(run_spread(point)) for point in noisy) >= 0.6 * len(noisy)


def test_the_two_level_interval_covers_the_true_median_of_runs():
    """A 95% interval covers the truth in 90-99% of 500 synthetic two-level sets (5 runs of 5)."""
    rng = np.random.default_rng(2024)
    covered = 0
    for trial in range(500):
        runs = two_level_runs(rng, 5, 5, between=0.05, within=0.02, median=40.0)
        low, high = median_of_runs_interval(runs, resamples=1000, seed=trial)
        covered += low <= 40.0 <= high
    assert 0.90 * 500 <= covered <= 0.99 * 500


def test_the_two_level_ratio_interval_covers_the_true_ratio():
    rng = np.random.default_rng(77)
    covered = 0
    for trial in range(300):
        base = two_level_runs(rng, 5, 5, between=0.05, within=0.02, median=10.0)
        cand = two_level_runs(rng, 5, 5, between=0.05, within=0.02, median=13.0)
        low, high = runs_ratio_interval(base, cand, resamples=1000, seed=trial)
        covered += low <= 1.3 <= high
    assert 0.90 * 300 <= covered <= 0.99 * 300


def test_within_run_samples_alone_miss_the_between_run_variation():
    """The issue's failure: tight runs far apart; one run's interval covers only that run."""
    rng = np.random.default_rng(5)
    missed = 0
    for trial in range(200):
        runs = two_level_runs(rng, 5, 7, between=0.3, within=0.02, median=200.0)
        low, high = median_of_runs_interval(runs[:1], resamples=500, seed=trial)
        missed += not low <= 200.0 <= high
    assert missed > 0.5 * 200


def test_two_level_intervals_are_reproducible_and_bracket_the_estimate():
    rng = np.random.default_rng(9)
    base = two_level_runs(rng, 4, 6, between=0.03, within=0.01, median=10.0)
    cand = [2.0 * run for run in base]
    low, high = runs_ratio_interval(base, cand)
    assert 1.85 < low < 2.0 < high < 2.15
    cand = two_level_runs(rng, 3, 2, between=0.03, within=0.01, median=20.0)  # runs of other sizes
    low, high = runs_ratio_interval(base, cand)
    assert low <= median_of_runs(cand) / median_of_runs(base) <= high
    assert runs_ratio_interval(base, cand) == (low, high)
    assert runs_ratio_interval(base, cand, seed=1) != (low, high)
    narrow = runs_ratio_interval(base, cand, confidence=0.5)
    assert low <= narrow[0] <= narrow[1] <= high
    low, high = median_of_runs_interval(base)
    assert min(run.min() for run in base) <= low <= median_of_runs(base) <= high


def test_two_level_interval_edge_cases():
    assert all(math.isnan(v) for v in median_of_runs_interval([[], [float("nan")]]))
    assert all(math.isnan(v) for v in runs_ratio_interval([], [[1.0]]))
    assert all(math.isnan(v) for v in runs_ratio_interval([[0.0, 0.0]], [[1.0]]))
    assert median_of_runs_interval([[3.0]]) == (3.0, 3.0)
    with pytest.raises(ValueError, match=r"confidence=1.0 is outside \(0, 1\)"):
        median_of_runs_interval([[1.0]], confidence=1.0)
    with pytest.raises(ValueError, match="resamples=0 is below the minimum 1"):
        runs_ratio_interval([[1.0]], [[1.0]], resamples=0)
