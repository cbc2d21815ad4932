"""Statistics for comparing measured points, in numpy only.

``memlab.compare`` judges a change the way asv and Google Benchmark's compare
tool do: a rank test on the raw samples (is the candidate really different?)
together with the size of the change (is it large enough to matter?) and an
interval around that size. This module holds the statistics; ``compare.py``
holds the matching of dataset rows and the reporting.

- :func:`mann_whitney_u`: two-sided Mann-Whitney U test. Exact distribution
  when neither side has ties and both have at most ``EXACT_MAX_SAMPLES``
  samples; otherwise the normal approximation with tie and continuity
  correction.
- :func:`median_ratio_interval`: percentile-bootstrap confidence interval of
  ``median(candidate) / median(baseline)``, seeded, so reruns agree.
- :func:`coefficient_of_variation`: sample stdev over mean.
- :func:`repetitions_to_decide`: how many samples per side would shrink an
  interval that straddles a threshold until it lies on one side of it.

A point is measured in *runs* (docs/dataset.md, "Runs"): each run a fresh
setup and its own samples. What changes between runs (the physical pages a
region got, where its lines fall in the caches, the neighbours on a shared
host) is invisible inside one run, so every interval over a point comes from
the run level:

- :func:`run_medians`, :func:`median_of_runs`: each run's median, and the
  median of those (a point's value).
- :func:`run_spread` (largest / smallest run median) beside
  :func:`within_run_spread` (a typical run's largest / smallest sample), and
  :func:`is_unstable`: runs that disagree by more than
  ``UNSTABLE_RUN_SPREAD``.
- :func:`median_of_runs_interval`, :func:`runs_ratio_interval`: two-level
  (hierarchical) percentile-bootstrap intervals of the median of run
  medians and of the ratio of two points' medians;
  :func:`median_of_runs_half_width`: the first as a fraction of the value
  (what a sweep's precision rule stops on, ``memlab.grid.Precision``).
- ``INCONCLUSIVE``: the status of a judgement the runs cannot support.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "EXACT_MAX_SAMPLES",
    "INCONCLUSIVE",
    "MannWhitneyResult",
    "UNSTABLE_RUN_SPREAD",
    "coefficient_of_variation",
    "clean_samples",
    "is_unstable",
    "mann_whitney_u",
    "median_of_runs",
    "median_of_runs_half_width",
    "median_of_runs_interval",
    "median_ratio_interval",
    "repetitions_to_decide",
    "run_medians",
    "run_spread",
    "runs_ratio_interval",
    "smallest_two_sided_p",
    "within_run_spread",
]

EXACT_MAX_SAMPLES = 50

INCONCLUSIVE = "inconclusive"
"""The status of a comparison or claim the runs cannot decide: the interval
straddles the threshold, or the runs of a point disagree (``is_unstable``)."""

UNSTABLE_RUN_SPREAD = 1.25
"""A point whose largest run median exceeds its smallest by more than this
factor is unstable. Chosen by simulation (tests/test_significance.py,
``test_the_unstable_bound_spares_stable_points``): run medians whose
between-run coefficient of variation is 5%, as large as the default minimum
effect of a comparison (5 samples a run, within-run CV up to 3%), exceed it
in under 1% of sets of 3 runs and about 2% of sets of 5 (5-8% of sets of 10:
the range of more runs is wider); the issue's 4 MiB random chase (runs of 75 to 317 ns, 4.2x)
and populate baseline (8.60 and 4.97 GB/s, 1.73x) are far beyond it."""


@dataclass(frozen=True)
class MannWhitneyResult:
    """Outcome of a two-sided Mann-Whitney U test.

    ``u`` is the statistic of the first sample (the number of pairs in which
    the first sample's value is larger, ties counting one half); ``p_value``
    is two-sided; ``method`` is ``"exact"`` or ``"normal"``.
    """

    u: float
    p_value: float
    method: str


def clean_samples(values: Sequence[float] | None) -> np.ndarray:
    """The finite values of a sample list as a float array (NaN/inf/None dropped).

    >>> clean_samples([1.0, float("nan"), None, 2.0]).tolist()
    [1.0, 2.0]
    """
    if values is None:
        return np.empty(0)
    floats = [float(v) for v in values if v is not None]
    array = np.asarray(floats, dtype=float)
    return array[np.isfinite(array)]


def coefficient_of_variation(samples: Sequence[float]) -> float:
    """Sample standard deviation divided by the mean (a fraction, 0.05 = 5%).

    NaN when fewer than two samples or a mean of zero.

    >>> round(coefficient_of_variation([9.0, 10.0, 11.0]), 3)
    0.1
    """
    array = clean_samples(samples)
    if array.size < 2:
        return math.nan
    mean = float(np.mean(array))
    if mean == 0.0:
        return math.nan
    return float(np.std(array, ddof=1)) / abs(mean)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with tied values sharing the mean of their ranks."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(values.size, dtype=float)
    start = 0
    while start < values.size:
        stop = start + 1
        while stop < values.size and sorted_values[stop] == sorted_values[start]:
            stop += 1
        ranks[order[start:stop]] = (start + stop + 1) / 2.0
        start = stop
    return ranks


@functools.lru_cache(maxsize=64)
def _u_distribution_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the C(n1+n2, n1) arrangements give each U = 0..n1*n2.

    These are the coefficients of the Gaussian binomial coefficient
    prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i), computed with exact integers.
    """
    size = n1 * n2 + 1
    counts = [0] * (size + n1 + n2 + 1)
    counts[0] = 1
    for i in range(1, n1 + 1):
        shift = n2 + i
        for j in range(len(counts) - 1, shift - 1, -1):
            counts[j] -= counts[j - shift]
        for j in range(i, len(counts)):
            counts[j] += counts[j - i]
    return tuple(counts[:size])


def smallest_two_sided_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the U test can give for these sizes.

    With 3 samples per side it is 0.1, so no difference can be significant at
    alpha 0.05 however large it is; with 5 per side it is 0.0079.

    >>> round(smallest_two_sided_p(5, 5), 4)
    0.0079
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    arrangements = math.comb(n1 + n2, n1)
    return min(1.0, 2.0 / arrangements) if arrangements < 10**300 else 0.0


def mann_whitney_u(first: Sequence[float], second: Sequence[float]) -> MannWhitneyResult:
    """Two-sided Mann-Whitney U test of two independent samples.

    Exact p-value when there are no ties and both samples have at most
    ``EXACT_MAX_SAMPLES`` values; otherwise the normal approximation with the
    tie-corrected variance and a continuity correction. All values equal on
    both sides give p = 1. Raises ValueError when a side has no finite value.

    >>> result = mann_whitney_u([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0])
    >>> result.u, round(result.p_value, 4), result.method
    (0.0, 0.0079, 'exact')
    """
    x = clean_samples(first)
    y = clean_samples(second)
    if x.size == 0 or y.size == 0:
        raise ValueError(
            f"mann_whitney_u needs at least one finite sample on each side "
            f"(got {x.size} and {y.size})"
        )
    n1, n2 = x.size, y.size
    combined = np.concatenate([x, y])
    ranks = _average_ranks(combined)
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    _, tie_sizes = np.unique(combined, return_counts=True)
    has_ties = bool(np.any(tie_sizes > 1))
    if not has_ties and n1 <= EXACT_MAX_SAMPLES and n2 <= EXACT_MAX_SAMPLES:
        counts = _u_distribution_counts(n1, n2)
        total = math.comb(n1 + n2, n1)
        u_int = int(round(u))
        lower_tail = sum(counts[: u_int + 1]) / total
        upper_tail = sum(counts[u_int:]) / total
        return MannWhitneyResult(u, min(1.0, 2.0 * min(lower_tail, upper_tail)), "exact")
    n = n1 + n2
    tie_term = float(np.sum(tie_sizes.astype(float) ** 3 - tie_sizes))
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0.0:
        return MannWhitneyResult(u, 1.0, "normal")
    distance = max(0.0, abs(u - n1 * n2 / 2.0) - 0.5)
    z = distance / math.sqrt(variance)
    return MannWhitneyResult(u, min(1.0, math.erfc(z / math.sqrt(2.0))), "normal")


def median_ratio_interval(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Bootstrap interval of median(candidate) / median(baseline).

    Each side is resampled with replacement on its own ``resamples`` times;
    the interval is the central ``confidence`` part of the resampled ratios.
    Seeded, so the same data give the same interval. NaN bounds when a side
    is empty or a resampled baseline median is not positive.

    >>> low, high = median_ratio_interval([10.0, 10.1, 9.9, 10.0, 10.05],
    ...                                   [12.0, 12.1, 11.9, 12.0, 12.05])
    >>> 1.18 < low <= high < 1.22
    True
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} is outside (0, 1)")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} is below the minimum 1")
    x = clean_samples(baseline)
    y = clean_samples(candidate)
    if x.size == 0 or y.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    baseline_medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    candidate_medians = np.median(y[rng.integers(0, y.size, size=(resamples, y.size))], axis=1)
    if np.any(baseline_medians <= 0.0):
        return (math.nan, math.nan)
    ratios = candidate_medians / baseline_medians
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return (float(low), float(high))


def repetitions_to_decide(
    samples_per_side: int,
    estimate: float,
    low: float,
    high: float,
    edges: Sequence[float],
) -> int | None:
    """Samples per side that would make the interval ``[low, high]`` clear of every edge.

    An interval that straddles an edge (a threshold such as ratio 1.05)
    decides nothing. Its half-widths shrink roughly as 1/sqrt(samples), so
    the interval around ``estimate`` stops straddling once it has shrunk by
    the factor f = (distance from the estimate to its far end) / (distance
    from the estimate to the edge) on the side of each edge it crosses; that
    takes ``samples_per_side * f**2`` samples. Returns that count (at least
    ``samples_per_side + 1``), ``samples_per_side`` when no edge lies inside
    the interval, and None when the estimate sits on an edge (no number of
    samples decides it) or a bound is not finite.

    >>> repetitions_to_decide(9, 1.10, 1.02, 1.20, [0.95, 1.05])  # (0.08/0.05)**2 * 9
    24
    >>> repetitions_to_decide(9, 1.10, 1.06, 1.20, [0.95, 1.05])
    9
    """
    values = (estimate, low, high)
    if not all(math.isfinite(v) for v in values) or samples_per_side < 1:
        return None
    factor = 1.0
    for edge in edges:
        if not low < edge < high:
            continue
        if estimate == edge:
            return None
        end = low if edge < estimate else high
        factor = max(factor, abs(estimate - end) / abs(estimate - edge))
    if factor == 1.0:
        return samples_per_side
    return max(samples_per_side + 1, math.ceil(samples_per_side * factor * factor))


RunsLike = Sequence[Sequence[float]]


def _runs(runs: RunsLike) -> list[np.ndarray]:
    """Each run's finite samples; runs without one are left out."""
    cleaned = [clean_samples(run) for run in runs]
    return [run for run in cleaned if run.size]


def run_medians(runs: RunsLike) -> np.ndarray:
    """The median of each run's samples (runs without a finite sample left out).

    >>> run_medians([[1.0, 2.0, 3.0], [10.0, 11.0], []]).tolist()
    [2.0, 10.5]
    """
    return np.array([float(np.median(run)) for run in _runs(runs)], dtype=float)


def median_of_runs(runs: RunsLike) -> float:
    """A point's value: the median of its run medians (NaN without a sample).

    >>> median_of_runs([[10.0, 10.2], [12.0], [9.0, 9.4, 9.8]])
    10.1
    """
    medians = run_medians(runs)
    return float(np.median(medians)) if medians.size else math.nan


def run_spread(runs: RunsLike) -> float:
    """How far a point's runs disagree: largest run median / smallest (1.0 for one run).

    NaN without a sample or when a run median is not positive.

    >>> round(run_spread([[100.0, 101.0], [125.0, 126.0], [110.0]]), 3)
    1.249
    """
    medians = run_medians(runs)
    if medians.size == 0 or medians.min() <= 0.0:
        return math.nan
    return float(medians.max() / medians.min())


def within_run_spread(runs: RunsLike) -> float:
    """How far samples disagree inside a run: the median over runs of largest / smallest sample.

    The counterpart of :func:`run_spread`: a point whose within-run spread is
    tight while its run spread is wide changes between setups, not between
    samples. NaN without a run of positive samples.

    >>> within_run_spread([[100.0, 110.0], [200.0, 202.0, 204.0], [50.0]])
    1.02
    """
    ratios = [float(run.max() / run.min()) for run in _runs(runs) if run.min() > 0.0]
    return float(np.median(ratios)) if ratios else math.nan


def is_unstable(spread: float, limit: float = UNSTABLE_RUN_SPREAD) -> bool:
    """Whether a point's runs disagree beyond ``limit`` (``spread`` from :func:`run_spread`).

    >>> is_unstable(1.1), is_unstable(1.73), is_unstable(float("nan"))
    (False, True, False)
    """
    if not limit >= 1.0:
        raise ValueError(f"limit={limit} is below the minimum 1 (a ratio of largest to smallest)")
    return math.isfinite(spread) and spread > limit


def _two_level_medians(runs: list[np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The bootstrap distribution of the median of run medians, resampled on both levels.

    Each resample draws as many runs as there are, with replacement, and
    from every drawn run as many samples as it holds, with replacement.
    """
    count = len(runs)
    sizes = np.array([run.size for run in runs])
    width = int(sizes.max())
    padded = np.full((count, width), np.inf)
    for index, run in enumerate(runs):
        padded[index, : run.size] = run
    chosen = rng.integers(0, count, size=(resamples, count))
    drawn_sizes = sizes[chosen]
    positions = (rng.random((resamples, count, width)) * drawn_sizes[..., None]).astype(np.intp)
    values = padded[chosen[..., None], positions]
    values[np.arange(width) >= drawn_sizes[..., None]] = np.inf  # beyond a shorter run's size
    values.sort(axis=2)
    lower = ((drawn_sizes - 1) // 2)[..., None]
    upper = (drawn_sizes // 2)[..., None]
    medians = (np.take_along_axis(values, lower, 2) + np.take_along_axis(values, upper, 2))[..., 0] / 2.0
    return np.median(medians, axis=1)


def _check_bootstrap(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} is outside (0, 1)")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} is below the minimum 1")


def _percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(distribution, [tail, 100.0 - tail])
    return (float(low), float(high))


def median_of_runs_interval(
    runs: RunsLike,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-level bootstrap interval of a point's median of run medians.

    Percentile interval of ``resamples`` two-level resamples: runs drawn with
    replacement, then samples drawn with replacement inside each drawn run.
    It assumes runs independent and alike (each a fresh setup from the same
    distribution of setups) and samples independent within a run; it
    resamples both levels, which counts the within-run spread twice and so
    errs wide when runs are tight and samples spread. Measured coverage of a
    95% interval over 500 lognormal two-level sets (between-run CV 2-10%,
    within-run 1-5%, tests/test_significance.py): 79-95% with 3 runs (the
    median of 3 values cannot do better than 75% from the runs alone),
    92-99% with 5, 94-99% with 10. With one run it is the one-level
    bootstrap of that run's median (``scipy.stats.bootstrap`` with
    ``method="percentile"``), which says nothing about between-run variation.
    Seeded: the same runs give the same interval. NaN bounds without a sample.

    >>> low, high = median_of_runs_interval([[10.0, 10.1, 9.9], [10.4, 10.5, 10.3], [9.6, 9.7, 9.8]])
    >>> 9.6 <= low < 10.0 < high <= 10.5
    True
    """
    _check_bootstrap(confidence, resamples)
    cleaned = _runs(runs)
    if not cleaned:
        return (math.nan, math.nan)
    distribution = _two_level_medians(cleaned, resamples, np.random.default_rng(seed))
    return _percentile_interval(distribution, confidence)


def median_of_runs_half_width(runs: RunsLike, *, confidence: float = 0.95, resamples: int = 2000,
                              seed: int = 0) -> float:
    """Half the width of :func:`median_of_runs_interval` over :func:`median_of_runs`: a point's
    relative precision (0.05: the interval spans about +-5% of its value). NaN without a sample
    or when the value is not positive.

    >>> round(median_of_runs_half_width([[10.0, 10.1, 9.9], [10.4, 10.5, 10.3], [9.6, 9.7, 9.8]]), 3)
    0.035
    """
    value = median_of_runs(runs)
    if not value > 0.0:
        return math.nan
    low, high = median_of_runs_interval(runs, confidence=confidence, resamples=resamples, seed=seed)
    return (high - low) / 2.0 / value


def runs_ratio_interval(
    baseline_runs: RunsLike,
    candidate_runs: RunsLike,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-level bootstrap interval of median_of_runs(candidate) / median_of_runs(baseline).

    Each side is resampled on its own as in :func:`median_of_runs_interval`
    (the two points are independent: different setups, different runs); the
    interval is the central ``confidence`` part of the resampled ratios, with
    the same assumptions. NaN bounds when a side has no sample or a
    resampled baseline median is not positive.

    >>> base = [[10.0, 10.1, 9.9], [10.3, 10.2, 10.4], [9.8, 9.7, 9.9]]
    >>> cand = [[v * 2.0 for v in run] for run in base]
    >>> low, high = runs_ratio_interval(base, cand)
    >>> 1.85 < low <= 2.0 <= high < 2.15
    True
    """
    _check_bootstrap(confidence, resamples)
    base, cand = _runs(baseline_runs), _runs(candidate_runs)
    if not base or not cand:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    base_medians = _two_level_medians(base, resamples, rng)
    cand_medians = _two_level_medians(cand, resamples, rng)
    if np.any(base_medians <= 0.0):
        return (math.nan, math.nan)
    return _percentile_interval(cand_medians / base_medians, confidence)
