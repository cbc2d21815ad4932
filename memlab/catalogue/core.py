"""The catalogue's core types and the readers of a dataset every source module shares.

:class:`Verdict`, :class:`Claim`, :class:`Number` (and its :class:`Provenance`), :class:`Source`, :class:`Item`
and :class:`NotMeasurable`; the dataset helpers (:func:`rows_where`,
:func:`value_of`, :func:`curve`, :func:`caches`, :func:`region` ...) and the
quick variants of sweeps (:func:`shorter`, :func:`at_working_sets`,
:func:`only`). How a claim is judged (its rule against the source's effect)
lives in :mod:`memlab.catalogue.claims`; the items in one module per source.

>>> Verdict(INCONCLUSIVE, "the interval straddles the bound").status
'inconclusive'
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from memlab import clear, hierarchy
from memlab.chart import cache_sizes_of
from memlab.dataset import Dataset
from memlab.grid import Sweep
from memlab.registry import family as get_family
from memlab.units import format_bytes

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
#: The run-level interval of the measured quantity straddles the claim's bound: this run cannot tell.
INCONCLUSIVE = "inconclusive"
NOT_MEASURABLE = "not measurable"
#: The verdicts of a claim, in the order a report lists them.
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURABLE)

#: A sanity check (a statement that holds on any working machine: an index above UnixBench's
#: baseline, copy no faster than its slower half) passes or fails; it is shown apart from the
#: claims and never counted as reproduced.
PASSES = "passes"
FAILS = "fails"
SANITY_VERDICTS = (PASSES, FAILS, NOT_MEASURABLE)


# ---- verdicts and claims -------------------------------------------------------


class NotMeasurable(Exception):
    """Raised inside a claim's check: the dataset or the machine cannot tell (the reason)."""


@dataclass(frozen=True)
class Verdict:
    """What a claim's check found: ``status`` (one of :data:`VERDICTS`), a sentence with the
    measured values or the reason, and the values by name. ``reason``: why this machine differs
    from the source's, for a verdict that is not "reproduced" (:func:`memlab.reasons.explain`;
    ``memlab reproduce`` fills it in)."""

    status: str
    detail: str
    values: Mapping[str, float] = field(default_factory=dict)
    reason: str = ""

    def __post_init__(self) -> None:
        known = (*VERDICTS, PASSES, FAILS)
        if self.status not in known:
            raise ValueError(f"status={self.status!r} is not one of {', '.join(map(repr, known))}")


def verdict(holds: bool, detail: str, **values: float) -> Verdict:
    """``reproduced`` when holds, else ``not reproduced``; detail carries the measured values.

    >>> verdict(False, "random 3.1x sequential", ratio=3.1).status
    'not reproduced'
    """
    return Verdict(REPRODUCED if holds else NOT_REPRODUCED, detail, values)


@dataclass(frozen=True)
class Claim:
    """A shape the source states, checkable on a dataset.

    ``text``: the claim; ``cite``: where the source says it (section, figure,
    and its numbers); ``check(dataset)``: returns a :class:`Verdict` or raises
    :class:`NotMeasurable` with the reason. A claim's check is a rule of
    :mod:`memlab.catalogue.claims` (a ratio against the source's effect, steps
    along an axis, about the same), which carries the source's ``effect``; a
    check marked ``sanity`` (:class:`memlab.catalogue.claims.Sanity`) makes the
    claim a sanity check, shown apart and never counted as reproduced.
    """

    text: str
    cite: str
    check: Callable[[Dataset], Verdict]

    @property
    def sanity(self) -> bool:
        """Whether this is a sanity check rather than a claim about the source's effect."""
        return bool(getattr(self.check, "sanity", False))

    @property
    def effect(self) -> float | None:
        """The source's effect the claim's bound comes from (None for a sanity check)."""
        return getattr(self.check, "effect", None)

    def judge(self, dataset: Dataset) -> Verdict:
        """The verdict of this claim on ``dataset`` (a NotMeasurable becomes that verdict)."""
        try:
            result = self.check(dataset)
        except NotMeasurable as reason:
            return Verdict(NOT_MEASURABLE, str(reason))
        if not isinstance(result, Verdict):
            raise TypeError(f"the check of claim {self.text!r} returned {type(result).__name__}, not a Verdict")
        return result


#: A published number read in the source's own text (its original language, at its URL).
ORIGINAL = "original"
#: A published number read in a translation of the source, not checked against the original's text.
TRANSLATION = "translation"
#: Where a published number may have been read, in the order a report explains them.
PROVENANCES = (ORIGINAL, TRANSLATION)


@dataclass(frozen=True)
class Provenance:
    """Where a published :class:`Number` was read: ``kind`` (:data:`ORIGINAL`: in the source's
    own text; :data:`TRANSLATION`: in a translation of it, so a digit the translation changed
    would be copied here) and ``url``, the public original the number belongs to (for a
    translation: the original it translates, the text to check the number against).

    >>> str(Provenance("translation", "https://lwn.net/Articles/855226/"))
    'translation of https://lwn.net/Articles/855226/'
    >>> Provenance("copied", "https://lwn.net/")
    Traceback (most recent call last):
    ...
    ValueError: provenance kind='copied' is not one of 'original', 'translation'
    """

    kind: str
    url: str

    def __post_init__(self) -> None:
        if self.kind not in PROVENANCES:
            raise ValueError(f"provenance kind={self.kind!r} is not one of {', '.join(map(repr, PROVENANCES))}")
        if not self.url.startswith(("https://", "http://")):
            raise ValueError(f"provenance url={self.url!r} is not an http(s) URL")

    def __str__(self) -> str:
        return f"{self.kind} at {self.url}" if self.kind == ORIGINAL else f"translation of {self.url}"

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "url": self.url}


@dataclass(frozen=True)
class Number:
    """One published number of the source, beside the same quantity measured here.

    ``measured(dataset)`` returns this machine's value in ``unit`` (or raises
    :class:`NotMeasurable`); ``compare`` says whether the ratio measured /
    source means something (same quantity, same unit; not a machine
    constant such as a TLB size); ``provenance`` (a :class:`Provenance`): whether the
    source's value was read in the original or in a translation, and the original's URL.
    """

    quantity: str
    source: float | None
    unit: str
    measured: Callable[[Dataset], float] | None = None
    note: str = ""
    compare: bool = True
    provenance: Provenance | None = None

    def __post_init__(self) -> None:
        if self.provenance is not None and not isinstance(self.provenance, Provenance):
            raise TypeError(f"number {self.quantity!r}: provenance={self.provenance!r} is not a Provenance")

    def measure(self, dataset: Dataset) -> tuple[float | None, str]:
        """(value, "") or (None, the reason it cannot be read from ``dataset``)."""
        if self.measured is None:
            return None, "not measured by this sweep"
        try:
            value = float(self.measured(dataset))
        except NotMeasurable as reason:
            return None, str(reason)
        return (value, "") if math.isfinite(value) else (None, "no finite value")

    def ratio(self, value: float | None) -> float | None:
        """measured / source where they compare."""
        if not self.compare or value is None or not self.source:
            return None
        return value / self.source


@dataclass(frozen=True)
class Source:
    """A public source: title, author, year, URL, and what it is."""

    key: str
    title: str
    author: str
    year: int
    url: str
    kind: str
    short: str

    @property
    def citation(self) -> str:
        return f'{self.author}, "{self.title}" ({self.year}), {self.url}'


SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        Source("drepper", "What every programmer should know about memory", "Ulrich Drepper", 2007,
               "https://people.freebsd.org/~lstewart/articles/cpumemory.pdf", "paper", "Drepper"),
        Source("pipes", "Making Linux pipes fast", "Francesco Mazzoli", 2022,
               "https://mazzo.li/posts/fast-pipes.html", "article", "Pipes"),
        Source("clearing", "mm: folio_zero_user: clear page ranges (patch series; the patch "
               "'mm: folio_zero_user: clear pages sequentially')", "Ankur Arora", 2026,
               "https://lore.kernel.org/all/20251121202352.494700-1-ankur.a.arora@oracle.com/",
               "kernel patch series", "Clearing patches"),
        Source("lwn-bulk", "A pair of memory-allocation improvements in 5.13", "Jonathan Corbet", 2021,
               "https://lwn.net/Articles/855226/", "article", "LWN"),
        Source("unixbench", "byte-unixbench (UnixBench 5.1)", "Kelly Lucas and contributors", 2007,
               "https://github.com/kdlucas/byte-unixbench", "benchmark suite", "UnixBench"),
    )
}


@dataclass(frozen=True)
class Item:
    """One figure or table of a source, and how memlab reproduces it.

    - ``key``: the name ``memlab reproduce`` takes (``fig3.15``, ``pipes-ladder``);
      ``source``: a key of :data:`SOURCES`; ``section``, ``label`` (``Figure 3.15``),
      ``title``.
    - ``sweep``: the named sweep (``family.sweep``) that reproduces it;
      ``quick``: a named sweep, or a function making the quick variant from the
      full sweep (a few points chosen for the claims, short samples).
    - ``rows``: when several items share one sweep, the parameters that pick
      this item's rows.
    - ``measured``: what the source measured; ``machine``: on what.
    - ``numbers``, ``claims``: see :class:`Number`, :class:`Claim`.
    - ``script`` (``experiments/...``), ``notebook`` (``notebooks/...``): where
      else it lives; ``note``: what the reader must know (printed as the
      figure's caption in the report).
    - ``compare_with``: keys of items whose rows the claims also read (figure
      3.27's two threads against figure 3.26's one); ``memlab reproduce`` runs
      them too and judges the item on both datasets together.
    - ``full``: how the full run's adaptive variant departs from the named sweep beyond its
      runs, a function of the named sweep (UnixBench's shorter samples); None: only the runs
      (``memlab reproduce --fixed`` measures the named sweep as it is).
    """

    key: str
    source: str
    section: str
    label: str
    title: str
    sweep: str
    quick: str | Callable[[Sweep], Sweep]
    measured: str
    machine: str
    numbers: tuple[Number, ...]
    claims: tuple[Claim, ...]
    script: str
    notebook: str
    rows: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    compare_with: tuple[str, ...] = ()
    full: Callable[[Sweep], Sweep] | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"item {self.key!r}: source={self.source!r} is not one of {', '.join(SOURCES)}")
        if "." not in self.sweep:
            raise ValueError(f"item {self.key!r}: sweep={self.sweep!r} must be written family.sweep")
        if not self.claims:
            raise ValueError(f"item {self.key!r} has no claim")

    @property
    def family(self) -> str:
        return self.sweep.split(".", 1)[0]

    @property
    def heading(self) -> str:
        """``Drepper, Figure 3.15: sequential vs random read``: the item's title in reports and notebooks."""
        return f"{SOURCES[self.source].short}, {self.label}: {self.title}"

    def select_rows(self, dataset: Dataset) -> Dataset:
        """The item's rows of a dataset of its sweep (all of them when ``rows`` is empty)."""
        if not self.rows:
            return dataset
        return dataset.filter(lambda row: all(_matches(row.get(k), v) for k, v in self.rows.items()))


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, (tuple, list, set, frozenset)):
        return any(_matches(value, w) for w in wanted)
    return value == wanted


# ---- reading datasets ------------------------------------------------------------


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _describe(match: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_bytes(v) if k.endswith('_bytes') and finite(v) else v}"
                     for k, v in match.items())


#: The rows :func:`rows_where` has handed out inside :func:`rows_read` (their ids), else None.
_ROWS_READ: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("memlab_rows_read", default=None)


@contextlib.contextmanager
def rows_read() -> Iterator[set[int]]:
    """The ids of the rows :func:`rows_where` hands out (to a check, a statistic) while inside:
    what a run-level interval needs to resample (:func:`memlab.catalogue.claims.run_level_interval`).

    >>> ds = Dataset([{"order": "random", "t": 1.0}, {"order": "sequential", "t": 2.0}])
    >>> with rows_read() as read:
    ...     _ = rows_where(ds, "t", order="random")
    >>> read == {id(ds.rows[0])}
    True
    """
    read: set[int] = set()
    token = _ROWS_READ.set(read)
    try:
        yield read
    finally:
        _ROWS_READ.reset(token)


def rows_where(ds: Dataset, metric: str | None = None, **match: Any) -> list[dict]:
    """Rows whose parameters equal ``match`` (a tuple value: any of them) and, with ``metric``,
    that have a finite value of it. NotMeasurable when there is none.

    >>> len(rows_where(Dataset([{"order": "random", "t": 1.0}]), "t", order="random"))
    1
    """
    found = [row for row in ds.rows if all(_matches(row.get(k), v) for k, v in match.items())]
    reading = _ROWS_READ.get()
    if reading is not None:
        reading.update(id(row) for row in found)
    if not found:
        raise NotMeasurable(f"the dataset has no rows with {_describe(match)}" if match
                            else "the dataset has no rows")
    if metric is not None:
        found = [row for row in found if finite(_value(row, metric))]
        if not found:
            raise NotMeasurable(f"no row with {_describe(match)} has a value of {metric}")
    return found


def _value(row: Mapping[str, Any], metric: str) -> float | None:
    """A row's value of ``metric``; per-element times and bytes per cycle prefer the on-CPU
    measurement where there is one (time the thread really ran)."""
    if metric == "ns_per_element" and finite(row.get("cpu_ns_per_element")):
        return float(row["cpu_ns_per_element"])
    if metric == "bytes_per_cycle" and finite(row.get("on_cpu_bytes_per_cycle")):
        return float(row["on_cpu_bytes_per_cycle"])
    value = row.get(metric)
    return float(value) if finite(value) else None


def value_of(ds: Dataset, metric: str, **match: Any) -> float:
    """The median of ``metric`` over the rows matching ``match``.

    >>> value_of(Dataset([{"v": "a", "t": 1.0}, {"v": "a", "t": 3.0}]), "t", v="a")
    2.0
    """
    return statistics.median(_value(row, metric) for row in rows_where(ds, metric, **match))


def curve(ds: Dataset, metric: str, x: str = "working_set_bytes", **match: Any) -> dict[float, float]:
    """{x: median metric} over the rows matching ``match``, sorted by x.

    >>> curve(Dataset([{"w": 2, "t": 1.0}, {"w": 1, "t": 5.0}]), "t", x="w")
    {1: 5.0, 2: 1.0}
    """
    values: dict[float, list[float]] = {}
    for row in rows_where(ds, metric, **match):
        if finite(row.get(x)):
            values.setdefault(row[x], []).append(_value(row, metric))
    if not values:
        raise NotMeasurable(f"no row with {_describe(match)} has a value of {x}")
    return {k: statistics.median(values[k]) for k in sorted(values)}


def caches(ds: Dataset) -> dict[str, int]:
    """Data cache sizes of the dataset's machine (``L1d``, ``L2``, ...; NotMeasurable without L1d and L2).

    The one definition of the cache edges the catalogue judges by: :func:`region` and the quick
    variants read it here, and the source modules call it as ``core.caches``, so how the edges are
    found can change in this one place: the edges measured on this machine's latency curve where
    ``memlab reproduce`` attached them (:func:`memlab.hierarchy.attach`), else the sizes sysfs
    reports."""
    measured = hierarchy.attached(ds.metadata)
    if measured is not None:
        sizes = hierarchy.cache_sizes_measured(measured[0])
        if "L1d" not in sizes or "L2" not in sizes:
            raise NotMeasurable(f"this machine's latency curve shows no L1d and L2 edges "
                                f"({hierarchy.summary(measured[0])})")
        return sizes
    sizes, _ = cache_sizes_of(ds)
    if "L1d" not in sizes or "L2" not in sizes:
        raise NotMeasurable("the machine's L1d and L2 sizes are unknown (no cache facts in sysfs)")
    return sizes


def region(ds: Dataset, points: Mapping[float, float], where: str) -> dict[float, float]:
    """The points of a working-set curve in a cache region of the dataset's machine.

    Where ``memlab reproduce`` attached this machine's measured hierarchy, the
    regions of :func:`memlab.hierarchy.regions` (from the edges of its own
    latency curve; "beyond the last cache" is four times the measured last
    cache and more), and a region without a point says where the sweep stops
    and the last cache ends. Else from the sizes sysfs reports: ``where``: ``l1`` (4 KiB to half the L1d), ``l2`` (twice the L1d to half
    the L2), ``l3`` (four times the L2 to half the L3), ``beyond_l2`` (four
    times the L2 and more) or ``beyond_llc`` (twice the largest data cache and
    more: main memory).

    >>> ds = Dataset([], {"machine": {"caches": [{"level": 1, "type": "Data", "size_bytes": 32768},
    ...     {"level": 2, "type": "Unified", "size_bytes": 1 << 20}]}})
    >>> region(ds, {8192: 1.0, 1 << 19: 2.0, 1 << 22: 3.0}, "beyond_llc")
    {4194304: 3.0}
    """
    if hierarchy.attached(ds.metadata) is not None:
        found, why = hierarchy.points_in(ds.metadata, points, where)
        if not found:
            raise NotMeasurable(why)
        return found
    sizes = caches(ds)
    l1, l2 = sizes["L1d"], sizes["L2"]
    llc = max(size for name, size in sizes.items() if not name.endswith("i"))
    bounds = {"l1": (4096, l1 / 2), "l2": (2 * l1, l2 / 2), "beyond_l2": (4 * l2, math.inf),
              "beyond_llc": (2 * llc, math.inf)}
    if where == "l3":
        if "L3" not in sizes:
            raise NotMeasurable("the machine has no L3 (or its size is unknown)")
        bounds["l3"] = (4 * l2, sizes["L3"] / 2)
    if where not in bounds:
        raise ValueError(f"where={where!r} is not one of l1, l2, l3, beyond_l2, beyond_llc")
    low, high = bounds[where]
    found = {k: v for k, v in points.items() if low <= k <= high}
    if not found:
        names = {"l1": f"within the L1d ({format_bytes(l1)})", "l2": f"within the L2 ({format_bytes(l2)})",
                 "l3": f"between 4x the L2 and half the L3 ({format_bytes(sizes.get('L3', 0))})",
                 "beyond_l2": f"beyond 4x the L2 ({format_bytes(4 * l2)})",
                 "beyond_llc": f"beyond 2x the last cache ({format_bytes(2 * llc)})"}
        largest = format_bytes(max(points)) if points else "none"
        raise NotMeasurable(f"no working set {names[where]} was measured (largest: {largest})")
    return found


def largest(points: Mapping[float, float]) -> tuple[float, float]:
    size = max(points)
    return size, points[size]


def at_largest_common(ds: Dataset, metric: str, where: str, groups: Mapping[str, Mapping[str, Any]],
                      x: str = "working_set_bytes") -> tuple[float, dict[str, float]]:
    """The largest working set in ``where`` that every group (name -> match) measured, and each
    group's value there."""
    curves = {name: region(ds, curve(ds, metric, x, **match), where) for name, match in groups.items()}
    common = set.intersection(*(set(c) for c in curves.values()))
    if not common:
        raise NotMeasurable(f"{' and '.join(groups)} share no working set in that region")
    size = max(common)
    return size, {name: c[size] for name, c in curves.items()}


def ghz(row: Mapping[str, Any]) -> float | None:
    """The core clock a row was measured at (its context), else from its own cycles and ns."""
    if finite(row.get("context_core_GHz")):
        return float(row["context_core_GHz"])
    cycles, ns = row.get("cycles_per_element"), row.get("ns_per_element")
    if finite(cycles) and finite(ns) and ns > 0:
        return float(cycles) / float(ns)
    return None


def cycles_in(ds: Dataset, where: str, **match: Any) -> float:
    """Median cycles per element over a cache region (ns per element x the row's core clock)."""
    values = {}
    for row in rows_where(ds, "ns_per_element", **match):
        clock = ghz(row)
        if clock is not None and finite(row.get("working_set_bytes")):
            values.setdefault(row["working_set_bytes"], []).append(_value(row, "ns_per_element") * clock)
    if not values:
        raise NotMeasurable("the rows record no core clock to turn ns into cycles")
    points = {k: statistics.median(v) for k, v in values.items()}
    return statistics.median(region(ds, points, where).values())


def _ratio_text(a: str, b: str, ratio: float) -> str:
    return f"{a} / {b} = {ratio:.3g}"


def machine_fact(ds: Dataset, name: str) -> Any:
    return (ds.metadata.get("machine") or {}).get(name)


def need_cpus(ds: Dataset, count: int, rows: Sequence[Mapping[str, Any]] | None = None) -> None:
    """NotMeasurable when the dataset's machine had fewer than ``count`` CPUs, or the run could use
    fewer (its CPU affinity: taskset, a container's cpuset).

    >>> need_cpus(Dataset([], {"machine": {"cpu_count": 2, "cpus_allowed": 1}}), 2)
    Traceback (most recent call last):
    ...
    memlab.catalogue.core.NotMeasurable: needs 2 CPUs; the run could use 1 of the machine's 2 (its CPU affinity)
    """
    cpus = machine_fact(ds, "cpu_count")
    if finite(cpus) and cpus < count:
        raise NotMeasurable(f"needs {count} CPUs; the machine has {int(cpus)}")
    allowed = machine_fact(ds, "cpus_allowed")
    if finite(allowed) and allowed < count:
        of = f" of the machine's {int(cpus)}" if finite(cpus) else ""
        raise NotMeasurable(f"needs {count} CPUs; the run could use {int(allowed)}{of} (its CPU affinity)")


# ---- the sweeps' quick variants ----------------------------------------------------


def shorter(sweep: Sweep, points: list[dict[str, Any]] | None = None, *, repeat: int = 2,
            target_seconds: float | None = 0.03, **changes: Any) -> Sweep:
    """A quick copy of ``sweep``: these points (default all), fewer repetitions, shorter samples."""
    points = list(sweep.points) if points is None else list(points)
    if not points:
        raise ValueError(f"no point of sweep {sweep.family}.{sweep.name} is left for its quick variant")
    target = target_seconds
    if target is not None and sweep.target_seconds is not None:
        target = min(target, sweep.target_seconds)
    elif target is None:
        target = sweep.target_seconds
    return dataclasses.replace(sweep, name=sweep.name + "_quick", points=points,
                               repeat=min(repeat, sweep.repeat), target_seconds=target, **changes)


def _nearest(sizes: Iterable[float], wanted: float) -> float:
    return min(sizes, key=lambda s: (abs(math.log(s / wanted)), s))


def at_working_sets(*extra: int) -> Callable[[Sweep], Sweep]:
    """Quick variant of a working-set sweep: every series at four working sets of this machine
    (a quarter of the L1d, a quarter of the L2, twice and eight times the L2, capped at 256 MiB)
    plus ``extra`` sizes, each the nearest the full sweep has."""

    def quick(sweep: Sweep) -> Sweep:
        sizes = caches(Dataset([], {}))
        sweep_sizes = sorted({p["working_set_bytes"] for p in sweep.points})
        targets = [sizes["L1d"] / 4, sizes["L2"] / 4, min(2 * sizes["L2"], 1 << 28), min(8 * sizes["L2"], 1 << 28),
                   *extra]
        keep = {_nearest(sweep_sizes, t) for t in targets}
        return shorter(sweep, [p for p in sweep.points if p["working_set_bytes"] in keep])

    quick.__doc__ = at_working_sets.__doc__
    return quick


def full_variant(keep: Callable[[Mapping[str, Any]], bool] | None = None,
                 update: Callable[[], Mapping[str, Any]] | Mapping[str, Any] | None = None) -> Callable[[Sweep], Sweep]:
    """An item's ``full``: the full run's variant of the named sweep, its points that ``keep``
    accepts (default all) with ``update`` applied to each (a mapping, or a function giving one
    when the run is planned: a size read from this machine). Its samples and runs stay what the
    full run makes of any sweep (:func:`memlab.reproduce.in_full_runs`); ``memlab reproduce
    --fixed`` measures the named sweep as it is.

    >>> from memlab.grid import Sweep
    >>> thin = full_variant(keep=lambda p: p["x"] % 2 == 0, update={"y": 1})
    >>> thin(Sweep("s", "calibrate", [{"x": 1}, {"x": 2}])).points
    [{'x': 2, 'y': 1}]
    """

    def full(sweep: Sweep) -> Sweep:
        changes = dict(update() if callable(update) else update or {})
        points = [dict(p, **changes) for p in sweep.points if keep is None or keep(p)]
        if not points:
            raise ValueError(f"no point of sweep {sweep.family}.{sweep.name} is left for the full run")
        unique = list({repr(sorted(p.items())): p for p in points}.values())
        return dataclasses.replace(sweep, points=unique)

    return full


def whole_octaves(sweep: Sweep) -> Sweep:
    """The full run's variant of a working-set sweep with two sizes an octave (2^k and about
    2^(k+1/2)): its points at whole octaves only. Each cache's plateau and edge still have points
    (an octave apart, as most of the chase figures' sweeps have them), the region a claim judges
    gets a point from the named sweep where it has none (:func:`memlab.reproduce.region_points`),
    and the long fixed run (``--fixed``) keeps every size. A sweep whose sizes are all whole
    octaves is returned as it is.

    >>> from memlab.grid import Sweep
    >>> sweep = Sweep("s", "chase", [{"working_set_bytes": s} for s in (1024, 1472, 2048, 2880, 4096)])
    >>> [p["working_set_bytes"] for p in whole_octaves(sweep).points]
    [1024, 2048, 4096]
    """
    sizes = {p["working_set_bytes"] for p in sweep.points if "working_set_bytes" in p}
    octaves = {size for size in sizes if size > 0 and size & (size - 1) == 0}
    if not octaves or octaves == sizes:
        return sweep
    return full_variant(keep=lambda p: p.get("working_set_bytes", 1) in octaves or "working_set_bytes" not in p)(sweep)


def only(repeat: int = 2, target_seconds: float | None = 0.03, warmup: int | None = None,
         update: Mapping[str, Any] | None = None, **match: Any) -> Callable[[Sweep], Sweep]:
    """Quick variant: the full sweep's points whose parameters (defaults included) match ``match``
    (tuple values: any of them), with ``update`` applied to each (say, a smaller region)."""

    def quick(sweep: Sweep) -> Sweep:
        family = get_family(sweep.family)
        points = [dict(p, **(update or {})) for p in sweep.points
                  if all(_matches(dataclasses.asdict(family.params(p)).get(k), v) for k, v in match.items())]
        changes = {} if warmup is None else {"warmup": warmup}
        return shorter(sweep, points, repeat=repeat, target_seconds=target_seconds, **changes)

    return quick



#: The quick demand-fault sweep that clear-fault (the clearing slides) and bulk-populate (LWN)
#: both judge: 4 KiB and THP faults of a 256 MiB region, touched at its first byte, three samples
#: of one pass each. One transform, so that the two items plan the same points (measured once).
FAULT_QUICK = only(repeat=3, target_seconds=None, region_bytes=256 << 20, pages=("4k", "thp"),
                   touch_offset="first", pause_s=0.0)


#: The largest region the full run faults (bytes); the named sweep goes to 4 GiB, the long fixed
#: run too. A region past the last cache faults at the same rate per byte whatever its size, and
#: 4 GiB in 4 KiB pages took 4 s a sample on a Zen 3 guest.
FULL_FAULT_MAX_REGION_BYTES = 1 << 30


def _fault_point_needed(point: Mapping[str, Any]) -> bool:
    params = get_family("clear_fault").params(point)
    return (params.touch_offset == "first" and not params.pause_s
            and params.region_bytes <= FULL_FAULT_MAX_REGION_BYTES
            and clear.hugetlb_can_serve(params.pages, params.region_bytes))


#: The full demand-fault sweep of the same two items: the points their rows pick (touched at the
#: first byte, no pause), every page kind and populate mode, regions up to
#: :data:`FULL_FAULT_MAX_REGION_BYTES`; a hugetlb kind only where its pool holds the region (else
#: the point falls back to 4 KiB pages and measures the 4k points again). The touch-offset and
#: pause panels judge nothing (the long fixed run and ``memlab run clear_fault`` draw them).
FAULT_FULL = full_variant(keep=_fault_point_needed)

#: Names of the cache regions :func:`region` knows, as the verdicts write them.
REGION_NAMES = {"l1": "L1d region", "l2": "L2 region", "l3": "L3 region", "beyond_l2": "beyond the L2",
                "beyond_llc": "beyond the last cache"}

#: Two-thread points count only where the threads ran together at least this share of the time:
#: on a busy machine they take turns on the CPUs, and neither contention nor sharing shows.
TOGETHER = 0.5


def together(check: Callable[[Dataset], Any]) -> Callable[[Dataset], Any]:
    """``check`` on the dataset without the points of two or more threads that ran together less
    than :data:`TOGETHER` of the time (``overlap_fraction``); a NotMeasurable then says how many
    were left out and why."""

    def checked(ds: Dataset) -> Any:
        several = [row for row in ds.rows if finite(row.get("threads")) and row["threads"] >= 2]
        apart = {id(row) for row in several
                 if finite(row.get("overlap_fraction")) and row["overlap_fraction"] < TOGETHER}
        kept = Dataset([row for row in ds.rows if id(row) not in apart], ds.metadata) if apart else ds
        try:
            return check(kept)
        except NotMeasurable as reason:
            if not apart:
                raise
            raise NotMeasurable(f"{reason}: {len(apart)} of the {len(several)} points of several threads ran "
                                f"together less than {TOGETHER:.0%} of the time (the CPUs were busy with other "
                                f"work) and were left out") from None

    return checked


def region_median(ds: Dataset, where: str, metric: str = "ns_per_element", **match: Any) -> float:
    """Median of ``metric`` over the working sets of one cache region, for the rows matching ``match``."""
    return statistics.median(region(ds, curve(ds, metric, **match), where).values())


def nearest(sizes: Iterable[float], wanted: float) -> float:
    """The size of ``sizes`` nearest ``wanted`` on a log scale (the smaller on a tie)."""
    return _nearest(sizes, wanted)
