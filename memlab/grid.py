"""What a sweep is, as plain data: a family's name and the points to measure.

The bottom layer of memlab: every family module builds its named sweeps from
:class:`Sweep`, :func:`grid` and :func:`zipped`, and the runner
(:mod:`memlab.sweep`) measures them. Nothing here measures, reads files or
knows a family; the shard helpers only pick points.

>>> Sweep("demo", "calibrate", grid(budget_ns=[10**7, 2 * 10**7]), repeat=1).points[1]
{'budget_ns': 20000000}
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["DEFAULT_RUNS", "MAX_RUNS", "Precision", "Sweep", "as_sweeps", "check_runs", "grid", "parse_shard",
           "shard_points", "zipped"]

DEFAULT_RUNS = 3
"""Runs of every point when a sweep does not say (docs/dataset.md, "Runs"): each run a fresh
setup, the runs of a sweep's points taken in rounds. Three is the fewest whose median of run
medians a single odd run cannot move, and what the A/A of docs/regression.md needed for no
point of chase.quick to change verdict between two identical sweeps."""

#: Upper bound of a point's runs: each is a fresh setup (and with processes a fresh Python).
MAX_RUNS = 1000


def check_runs(value: object, name: str = "runs") -> int:
    """``value`` as a number of runs, or ValueError naming ``name``, the value and the range.

    >>> check_runs(3)
    3
    >>> check_runs(0)
    Traceback (most recent call last):
    ...
    ValueError: runs=0 is below the minimum 1 (runs per point: 1..1000)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}={value!r} must be a whole number of runs per point (1..{MAX_RUNS})")
    number = int(value)  # numpy integers too
    if number < 1:
        raise ValueError(f"{name}={number} is below the minimum 1 (runs per point: 1..{MAX_RUNS})")
    if number > MAX_RUNS:
        raise ValueError(f"{name}={number} is above the maximum {MAX_RUNS} (runs per point: 1..{MAX_RUNS})")
    return number


@dataclass(frozen=True)
class Precision:
    """A sweep's rule for how many runs a point takes: never fewer than ``min_runs`` (at least 2:
    one run has no between-run interval), never more than ``max_runs``, and between them another
    run only while the point's run-level interval is wider than ``half_width`` (the 95% interval of
    its median of run medians, half its width over that median: 0.05 is +-5%). The run loop
    applies it after every round (:class:`memlab.runner.Run`, docs/dataset.md, "Runs").

    >>> Precision(2, 6, 0.05).min_runs
    2
    >>> Precision(1, 6, 0.05)
    Traceback (most recent call last):
    ...
    ValueError: min_runs=1 is below the minimum 2 (a between-run interval needs two runs)
    """

    min_runs: int
    max_runs: int
    half_width: float

    def __post_init__(self) -> None:
        low = check_runs(self.min_runs, "min_runs")
        if low < 2:
            raise ValueError(f"min_runs={low} is below the minimum 2 (a between-run interval needs two runs)")
        high = check_runs(self.max_runs, "max_runs")
        if high < low:
            raise ValueError(f"max_runs={high} is below min_runs={low} (max_runs: {low}..{MAX_RUNS})")
        width = self.half_width
        if isinstance(width, bool) or not isinstance(width, numbers.Real) or not 0.0 < float(width) < 1.0:
            raise ValueError(f"half_width={width!r} must be a fraction of the median between 0 and 1, "
                             "exclusive (0.05: an interval of +-5%)")
        object.__setattr__(self, "min_runs", low)
        object.__setattr__(self, "max_runs", high)
        object.__setattr__(self, "half_width", float(width))

    def to_dict(self) -> dict[str, Any]:
        """The rule as the sidecar records it (``metadata["precision"]``)."""
        return {"min_runs": self.min_runs, "max_runs": self.max_runs, "half_width": self.half_width}


@dataclass
class Sweep:
    """Points of one family to measure, with how to measure each.

    Every point is measured in ``runs`` runs (None: :data:`DEFAULT_RUNS`),
    each a fresh setup, or, with a ``precision`` rule (:class:`Precision`;
    then ``runs`` must be None), in as many runs as its interval needs
    between the rule's minimum and maximum; a run keeps ``repeat`` samples after ``warmup``
    ones, each lasting about ``target_seconds`` (None: the family's
    default); ``options`` go to the family's ``run`` (e.g.
    ``{"counters": False}``).
    """

    name: str
    family: str
    points: list[dict[str, Any]]
    repeat: int = 5
    warmup: int = 1
    target_seconds: float | None = None
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    runs: int | None = None
    precision: Precision | None = None

    def __post_init__(self) -> None:
        if self.runs is not None:
            self.runs = check_runs(self.runs)
        if self.precision is not None:
            if not isinstance(self.precision, Precision):
                raise ValueError(f"precision={self.precision!r} of sweep {self.name!r} must be a memlab.grid.Precision")
            if self.runs is not None:
                raise ValueError(f"sweep {self.name!r} has runs={self.runs} and a precision rule: give one "
                                 "(fixed runs, or the rule's min_runs..max_runs)")
        if not isinstance(self.points, list) or not all(isinstance(p, Mapping) for p in self.points):
            raise ValueError(f"points of sweep {self.name!r} must be a list of dicts")
        if not self.points:
            raise ValueError(f"sweep {self.name!r} has no points")

    def __len__(self) -> int:
        return len(self.points)

    @property
    def runs_per_point(self) -> int:
        """The runs each point gets: ``runs``, else :data:`DEFAULT_RUNS`.

        With a precision rule, its maximum (what a point may take).

        >>> Sweep("s", "calibrate", [{}]).runs_per_point, Sweep("s", "calibrate", [{}], runs=5).runs_per_point
        (3, 5)
        """
        if self.precision is not None:
            return self.precision.max_runs
        return DEFAULT_RUNS if self.runs is None else self.runs

    @property
    def expected_runs(self) -> int:
        """The runs a point is expected to take: with a precision rule its minimum (a point whose
        runs agree stops there), else :attr:`runs_per_point`.

        >>> Sweep("s", "calibrate", [{}], precision=Precision(2, 6, 0.05)).expected_runs
        2
        """
        return self.precision.min_runs if self.precision is not None else self.runs_per_point


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Cartesian product of the axes, the first axis varying slowest.

    >>> grid(npad=[0, 7], order=["sequential", "random"])[1]
    {'npad': 0, 'order': 'random'}
    """
    names = list(axes)
    values = [list(v) for v in axes.values()]
    for name, options in zip(names, values):
        if not options:
            raise ValueError(f"axis {name!r} of the grid is empty")
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def zipped(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Axes walked together (all the same length).

    >>> zipped(n=[1, 2], tile=[8, 16])
    [{'n': 1, 'tile': 8}, {'n': 2, 'tile': 16}]
    """
    lengths = {name: len(list(v)) for name, v in axes.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"zipped axes differ in length: {lengths}")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in zip(*axes.values())]


def as_sweeps(value: Sweep | Sequence[Sweep]) -> list[Sweep]:
    """One sweep or several as a list; ValueError for anything that is not a Sweep.

    >>> [s.name for s in as_sweeps(Sweep("a", "calibrate", [{}]))]
    ['a']
    """
    sweeps = [value] if isinstance(value, Sweep) else list(value)
    for item in sweeps:
        if not isinstance(item, Sweep):
            raise ValueError(f"expected Sweep objects, got {type(item).__name__}")
    return sweeps


def parse_shard(text: str | Sequence[int] | None) -> tuple[int, int] | None:
    """'i/n' (1-based i) -> (i, n); None stays None.

    >>> parse_shard("2/4")
    (2, 4)
    """
    if text is None:
        return None
    if isinstance(text, str):
        try:
            index_text, count_text = text.split("/")
            index, count = int(index_text), int(count_text)
        except ValueError:
            raise ValueError(f"shard={text!r} must look like i/n, e.g. 1/4") from None
    else:
        index, count = text
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard={index}/{count} needs 1 <= i <= n")
    return index, count


def shard_points(points: Sequence[Any], shard: tuple[int, int] | None) -> list[Any]:
    """The points of shard (i, n): every n-th point starting at the i-th.

    >>> shard_points([1, 2, 3, 4, 5], (2, 2))
    [2, 4]
    """
    if shard is None:
        return list(points)
    index, count = shard
    return list(points[index - 1 :: count])
