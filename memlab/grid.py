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
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Sweep", "as_sweeps", "grid", "parse_shard", "shard_points", "zipped"]


@dataclass
class Sweep:
    """Points of one family to measure, with how to measure each.

    ``repeat`` kept samples per point after ``warmup`` ones, each lasting
    about ``target_seconds`` (None: the family's default); ``options`` go to
    the family's ``run`` (e.g. ``{"counters": False}``).
    """

    name: str
    family: str
    points: list[dict[str, Any]]
    repeat: int = 5
    warmup: int = 1
    target_seconds: float | None = None
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.points, list) or not all(isinstance(p, Mapping) for p in self.points):
            raise ValueError(f"points of sweep {self.name!r} must be a list of dicts")
        if not self.points:
            raise ValueError(f"sweep {self.name!r} has no points")

    def __len__(self) -> int:
        return len(self.points)


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
