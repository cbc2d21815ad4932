"""Statistics for comparing two sets of raw samples, in numpy only.

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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "EXACT_MAX_SAMPLES",
    "MannWhitneyResult",
    "coefficient_of_variation",
    "clean_samples",
    "mann_whitney_u",
    "median_ratio_interval",
    "repetitions_to_decide",
    "smallest_two_sided_p",
]

EXACT_MAX_SAMPLES = 50


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
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


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
