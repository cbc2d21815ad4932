"""The claim vocabulary: every rule a claim is judged by, written once.

A claim reads one quantity off a dataset (its *statistic*: a ratio of two
regions or two series, a series along an axis) and sets it against what the
source measured, its *effect*. Three rules, and the sanity check apart:

- :class:`Ratio`: the measured ratio against the source's. The bound is the
  source's effect halved in log space, ``sqrt(effect)`` (:func:`bound_of`):
  a source that measured 4.3x is reproduced by anything beyond 2.07x, and
  contradicted by anything below it.
- :class:`Direction`: a direction the source states without a size ("faster
  than"): the ratio's interval must exclude 1 on the source's side.
- :class:`Steps`: a direction along an axis ("the larger the element, the
  more each costs"): each step's ratio (value / the one before) must exclude
  1 in the source's direction.
- :class:`Same`: two things cost "about the same": the ratio lies within
  ``[1 / sqrt(effect), sqrt(effect)]``, where ``effect`` is the contrast the
  source sets beside it (what the difference is where it does matter).
- :class:`Sanity`: a statement any working machine meets (an index above
  UnixBench's baseline); it passes or fails and never counts as reproduced.

A rule decides on the *run-level interval* of its statistic
(:func:`run_level_interval`): the statistic recomputed on resampled copies of
the dataset, each drawing every point's runs with replacement and, within
each drawn run (a row), its kept samples with replacement: the two-level
bootstrap of :func:`memlab.significance.median_of_runs_interval`, applied to
the whole dataset so that any statistic (a median over a cache region, a
ratio of two series, a speed-up) gets one. A dataset without a ``run`` column
holds one run per point. The verdict is **reproduced** when the interval
clears the bound in the source's direction, **not reproduced** when it clears
it the other way, **inconclusive** when it straddles it; the detail shows the
value, the interval and the bound.

>>> from memlab.dataset import Dataset
>>> rule = Ratio(lambda ds: ds.rows[1]["t"] / ds.rows[0]["t"], effect=4.0, what="b / a")
>>> ds = Dataset([{"p": 1, "t": 1.0, "t_samples": [0.99, 1.0, 1.01]},
...               {"p": 2, "t": 3.0, "t_samples": [2.97, 3.0, 3.03]}], {"param_names": ["p"]})
>>> rule(ds).status, round(bound_of(4.0), 3)
('reproduced', 2.0)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from memlab.catalogue.core import (
    FAILS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    PASSES,
    REPRODUCED,
    NotMeasurable,
    Verdict,
    rows_read,
)
from memlab.dataset import Dataset, point_runs
from memlab.significance import clean_samples

__all__ = [
    "CONFIDENCE",
    "Direction",
    "RESAMPLES",
    "Interval",
    "Ratio",
    "Same",
    "Sanity",
    "Steps",
    "bound_of",
    "judge_interval",
    "run_level_interval",
]

#: The central share of the resampled statistics a verdict's interval spans.
CONFIDENCE = 0.95
#: How many resampled datasets an interval is drawn from (seeded: the same dataset, the same interval).
RESAMPLES = 200
_SAMPLES_SUFFIX = "_samples"

Statistic = Callable[[Dataset], "float | Mapping[str, float]"]


def bound_of(effect: float) -> float:
    """The bound a measured ratio must clear: the source's ``effect`` halved in log space.

    >>> bound_of(4.0), round(bound_of(0.25), 3)
    (2.0, 0.5)
    """
    if not (isinstance(effect, (int, float)) and math.isfinite(effect) and effect > 0 and effect != 1):
        raise ValueError(f"effect={effect!r} must be a finite ratio above 0 other than 1 (the source's effect)")
    return math.sqrt(effect)


@dataclass(frozen=True)
class Interval:
    """A statistic's value on the dataset and its run-level interval (low, high)."""

    value: float
    low: float
    high: float

    def text(self) -> str:
        if self.low == self.high == self.value:
            return f"{self.value:.3g} (no second run or sample to resample: no interval)"
        return f"{self.value:.3g} (run-level {CONFIDENCE:.0%} interval {self.low:.3g}-{self.high:.3g})"


def _samples_of(value: Any) -> np.ndarray | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, (list, tuple)):
        return None
    samples = clean_samples([v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)])
    return samples if samples.size >= 2 else None


@dataclass
class _Plan:
    """How to resample a dataset: its rows as plain dicts, each point's runs (row indices), and for
    each row its metrics' resampled medians, drawn up front (resample x slot of its point)."""

    rows: list[dict]
    points: list[list[int]]
    choices: list[np.ndarray]
    medians: dict[int, dict[str, np.ndarray]]


def _plan(ds: Dataset, resamples: int, rng: np.random.Generator) -> _Plan | None:
    """The resampling of ``ds`` (see :func:`run_level_interval`); None when no point has two runs
    and no row two samples (nothing to resample: the interval is the value)."""
    rows = [dict(row) for row in ds.rows]
    names = [n for n in ds.param_names if not n.endswith(_SAMPLES_SUFFIX)]
    position = {id(row): index for index, row in enumerate(ds.rows)}
    points = [[position[id(row)] for run in runs.values() for row in run]
              for runs in point_runs(ds.rows, names).values()]
    samples: dict[int, dict[str, np.ndarray]] = {}
    for index, row in enumerate(rows):
        for column, value in row.items():
            if column.endswith(_SAMPLES_SUFFIX) and column[: -len(_SAMPLES_SUFFIX)] in row:
                drawn = _samples_of(value)
                if drawn is not None:
                    samples.setdefault(index, {})[column[: -len(_SAMPLES_SUFFIX)]] = drawn
    if not samples and all(len(point) < 2 for point in points):
        return None
    choices, medians = [], {}
    for point in points:
        slots = len(point)
        choices.append(rng.integers(0, slots, size=(resamples, slots)))
        for index in point:
            for metric, values in samples.get(index, {}).items():
                picks = rng.integers(0, values.size, size=(resamples, slots, values.size))
                medians.setdefault(index, {})[metric] = np.median(values[picks], axis=2)
    return _Plan(rows, points, choices, medians)


def _resampled(ds: Dataset, plan: _Plan, draw: int) -> Dataset:
    """Resample number ``draw``: every point's runs drawn with replacement, each drawn row with its
    metrics' resampled medians for its slot."""
    rows = []
    for point, choice in zip(plan.points, plan.choices):
        for slot, pick in enumerate(choice[draw]):
            index = point[int(pick)]
            row = plan.rows[index]
            drawn = plan.medians.get(index)
            if drawn:
                row = dict(row)
                for metric, values in drawn.items():
                    row[metric] = float(values[draw, slot])
            rows.append(row)
    resampled = Dataset([], ds.metadata)
    resampled.rows = rows
    return resampled


def _as_mapping(value: Any) -> dict[str, float]:
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    return {"": float(value)}


def _points_read(ds: Dataset, read: set[int], statistic: Statistic, value: dict[str, float]) -> Dataset:
    """The points of ``ds`` (all their runs) with a row among those the statistic read (``read``:
    row ids, :func:`memlab.catalogue.core.rows_where`), when the statistic gives the same value on
    them alone; else ``ds``. The bootstrap then resamples, and the statistic reads, only those: a
    claim about one curve of a sweep of many no longer pays for the others (a full run's 85
    intervals took 93 s of one CPU)."""
    if not read or len(read) >= len(ds.rows):
        return ds
    names = [n for n in ds.param_names if not n.endswith(_SAMPLES_SUFFIX)]
    kept = [row for runs in point_runs(ds.rows, names).values()
            if any(id(row) in read for run in runs.values() for row in run)
            for run in runs.values() for row in run]
    if len(kept) >= len(ds.rows):
        return ds
    order = {id(row): index for index, row in enumerate(ds.rows)}
    subset = Dataset([], ds.metadata)
    subset.rows = sorted(kept, key=lambda row: order[id(row)])  # the rows in the dataset's order
    try:
        same = _as_mapping(statistic(subset)) == value
    except Exception:  # a statistic that reads rows some other way: resample them all
        return ds
    return subset if same else ds


def run_level_interval(ds: Dataset, statistic: Statistic, *, resamples: int = RESAMPLES,
                       seed: int = 0) -> dict[str, Interval]:
    """The statistic (a number, or numbers by name) on ``ds`` and its run-level interval.

    ``statistic(ds)`` is computed on the dataset and on ``resamples`` two-level
    resamples of it (every point's runs drawn with replacement, then each
    drawn row's samples, so a row's median becomes a resampled median). A
    resample on which the statistic cannot be computed is left out. A dataset
    whose points have one run and no samples gives the value as its interval.
    NotMeasurable from ``statistic(ds)`` itself propagates.

    >>> ds = Dataset([{"p": 1, "t": 2.0, "t_samples": [1.9, 2.0, 2.1]}], {"param_names": ["p"]})
    >>> found = run_level_interval(ds, lambda d: d.rows[0]["t"])[""]
    >>> 1.9 <= found.low <= found.value == 2.0 <= found.high <= 2.1
    True
    """
    with rows_read() as read:
        value = _as_mapping(statistic(ds))
    ds = _points_read(ds, read, statistic, value)
    plan = _plan(ds, resamples, np.random.default_rng(seed))
    if plan is None:
        return {name: Interval(v, v, v) for name, v in value.items()}
    drawn: dict[str, list[float]] = {name: [] for name in value}
    for draw in range(resamples):
        try:
            found = _as_mapping(statistic(_resampled(ds, plan, draw)))
        except (NotMeasurable, ZeroDivisionError, ValueError):
            continue
        for name in value:
            if name in found and math.isfinite(found[name]):
                drawn[name].append(found[name])
    tail = (1 - CONFIDENCE) / 2 * 100
    result = {}
    for name, v in value.items():
        if not drawn[name]:
            result[name] = Interval(v, v, v)
            continue
        low, high = np.percentile(drawn[name], [tail, 100 - tail])
        result[name] = Interval(v, float(min(low, v)), float(max(high, v)))
    return result


def judge_interval(interval: Interval, bound: float, above: bool) -> str:
    """The verdict of one interval against ``bound``: the claim wants the ratio above it (``above``)
    or below it.

    >>> judge_interval(Interval(3.0, 2.5, 3.5), 2.0, True), judge_interval(Interval(3.0, 1.5, 3.5), 2.0, True)
    ('reproduced', 'inconclusive')
    >>> judge_interval(Interval(1.2, 1.1, 1.3), 2.0, True)
    'not reproduced'
    """
    if above:
        return REPRODUCED if interval.low > bound else NOT_REPRODUCED if interval.high < bound else INCONCLUSIVE
    return REPRODUCED if interval.high < bound else NOT_REPRODUCED if interval.low > bound else INCONCLUSIVE


def _combine(statuses: list[str]) -> str:
    """Every part reproduced: reproduced; any part contradicted: not reproduced; else inconclusive."""
    if all(s == REPRODUCED for s in statuses):
        return REPRODUCED
    return NOT_REPRODUCED if NOT_REPRODUCED in statuses else INCONCLUSIVE


def _label(name: str, what: str) -> str:
    return f"{what}, {name}" if name else what


def _check_effect(effect: float) -> None:
    bound_of(effect)


@dataclass(frozen=True)
class Ratio:
    """The measured ratio against the source's ``effect`` (a ratio of the same quantities): reproduced
    when its run-level interval lies beyond ``sqrt(effect)`` on the effect's side of 1.

    ``statistic(ds)`` returns the ratio, or ratios by name (each region of a claim "in every
    region"): every one must clear the bound, and one that clears it the other way contradicts the
    claim. ``what`` names the ratio in the verdict; ``effect_note`` where the effect comes from.
    """

    statistic: Statistic
    effect: float
    what: str
    effect_note: str = ""

    def __post_init__(self) -> None:
        _check_effect(self.effect)

    @property
    def bound(self) -> float:
        return bound_of(self.effect)

    def __call__(self, ds: Dataset) -> Verdict:
        intervals = run_level_interval(ds, self.statistic)
        above = self.effect > 1
        statuses = [judge_interval(i, self.bound, above) for i in intervals.values()]
        parts = "; ".join(f"{_label(name, self.what)} {i.text()}" for name, i in intervals.items())
        side = "above" if above else "below"
        source = f"the source's {self.effect:.3g}x" + (f" ({self.effect_note})" if self.effect_note else "")
        detail = f"{parts} (claim: {side} {self.bound:.3g}, the square root of {source})"
        return Verdict(_combine(statuses), detail, {_label(n, "ratio"): i.value for n, i in intervals.items()})


@dataclass(frozen=True)
class Same:
    """Two things about the same: the ratio's run-level interval within ``[1/sqrt(effect),
    sqrt(effect)]``, ``effect`` being the contrast the source sets beside it (the difference where
    it does matter). Outside that range entirely: not reproduced; straddling its edge: inconclusive.
    ``statistic`` as for :class:`Ratio`."""

    statistic: Statistic
    effect: float
    what: str
    effect_note: str = ""

    def __post_init__(self) -> None:
        _check_effect(self.effect)

    @property
    def bound(self) -> float:
        return bound_of(max(self.effect, 1 / self.effect))

    def __call__(self, ds: Dataset) -> Verdict:
        intervals = run_level_interval(ds, self.statistic)
        high, low = self.bound, 1 / self.bound
        statuses = []
        for i in intervals.values():
            if low < i.low and i.high < high:
                statuses.append(REPRODUCED)
            elif i.high < low or i.low > high:
                statuses.append(NOT_REPRODUCED)
            else:
                statuses.append(INCONCLUSIVE)
        parts = "; ".join(f"{_label(name, self.what)} {i.text()}" for name, i in intervals.items())
        contrast = f"the source's contrast {max(self.effect, 1 / self.effect):.3g}x" + (
            f" ({self.effect_note})" if self.effect_note else "")
        detail = f"{parts} (claim: between {low:.3g} and {high:.3g}, the square root of {contrast})"
        return Verdict(_combine(statuses), detail, {_label(n, "ratio"): i.value for n, i in intervals.items()})


@dataclass(frozen=True)
class Direction:
    """A direction without a size (the source states none): the ratio's run-level interval must
    exclude 1 above it (``rising``) or below it; an interval beyond 1 the other way contradicts
    the claim. ``statistic`` as for :class:`Ratio`; ``effect``, where the source gives one that
    does not transfer to this machine (another thread count, an analogue), is shown, not used."""

    statistic: Statistic
    rising: bool
    what: str
    effect: float | None = None
    effect_note: str = ""

    def __call__(self, ds: Dataset) -> Verdict:
        return self._judge(run_level_interval(ds, self.statistic))

    def _judge(self, intervals: Mapping[str, Interval]) -> Verdict:
        statuses = [judge_interval(i, 1.0, self.rising) for i in intervals.values()]
        parts = "; ".join(f"{_label(name, self.what)} {i.text()}" for name, i in intervals.items())
        way = "above" if self.rising else "below"
        note = f"; the source: {self.effect:.3g}x" if self.effect is not None else ""
        note += f" ({self.effect_note})" if self.effect_note else ""
        detail = f"{parts} (claim: {'every' if len(intervals) > 1 else 'the'} interval {way} 1{note})"
        return Verdict(_combine(statuses), detail, {_label(n, "ratio"): i.value for n, i in intervals.items()})


@dataclass(frozen=True)
class Steps:
    """A direction along an axis: ``statistic(ds)`` returns the series in axis order (name ->
    value); each step's ratio (value / the value before) must exclude 1 above it (``rising``) or
    below it, as :class:`Direction` judges one ratio. ``effect``: the source's last value over
    its first, shown for its provenance (a direction claim has no size bound)."""

    statistic: Callable[[Dataset], Mapping[str, float]]
    rising: bool
    what: str
    effect: float | None = None
    effect_note: str = ""

    def steps(self, ds: Dataset) -> dict[str, float]:
        """The step ratios of the series on ``ds``: {"b / a": value(b) / value(a)}."""
        series = dict(self.statistic(ds))
        if len(series) < 2:
            raise NotMeasurable(f"{self.what}: fewer than two values along the axis ({len(series)})")
        names, values = list(series), list(series.values())
        if any(not (v > 0) for v in values):
            raise NotMeasurable(f"{self.what}: a value is not positive ({', '.join(f'{v:.3g}' for v in values)})")
        return {f"{b} / {a}": values[k + 1] / values[k] for k, (a, b) in enumerate(zip(names, names[1:]))}

    def __call__(self, ds: Dataset) -> Verdict:
        rule = Direction(self.steps, self.rising, self.what, self.effect, self.effect_note)
        return rule(ds)


@dataclass(frozen=True)
class Sanity:
    """A sanity check: ``check(ds)`` returns a Verdict (reproduced for holds); it becomes
    ``passes`` or ``fails``, shown apart from the claims and never counted as reproduced."""

    check: Callable[[Dataset], Verdict]
    why: str
    sanity: bool = True

    def __call__(self, ds: Dataset) -> Verdict:
        found = self.check(ds)
        if found.status == NOT_MEASURABLE:
            return found
        status = PASSES if found.status == REPRODUCED else FAILS
        return Verdict(status, f"{found.detail} (a sanity check: {self.why})", found.values, found.reason)
