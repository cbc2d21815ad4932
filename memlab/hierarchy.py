"""This machine's cache hierarchy, measured: where its L1d, its L2 and its last cache end.

sysfs says how large each cache is, but on a virtual machine it may report
the host's whole L3 (hundreds of MiB), and a host that other guests keep
busy may leave a guest little of its L3. So the regions the catalogue's
claims are judged in ("in the L2", "beyond the last cache") come from this
machine's own latency curve: a random pointer chase over 64-byte elements
(NPAD=7, one cache line each; huge pages where the kernel grants them, so
that TLB misses add no steps) from 4 KiB to beyond the last cache, three
working sets per doubling, read by :func:`memlab.chase_analysis.cache_levels`
(the one plateau detector; neighbouring plateaus at least :data:`MIN_RATIO`
apart). The last plateau is main memory; the first is
the L1d, the second the L2, the one before memory the last cache.
Consecutive plateaus that sysfs places in one cache (a random walk's
latency climbs in steps inside a large L2) are one level. A level's *edge*
is the largest working set measured on its plateau whose latency still
holds (at most :data:`HELD_RATIO` times the plateau's lower quartile): a
cache shared with other tenants of the host climbs over several sets, and
the sets of that climb are not "in" it. The curve is walked :data:`RUNS`
times and each set's latency is the median of its walks.

:func:`obtain` keeps the result in ``hierarchy.json`` of an output folder
under the machine's fingerprint (:func:`memlab.machine.fingerprint`) and
measures again when the fingerprint changes or when asked
(``memlab reproduce --remeasure``). :func:`regions` turns the edges into the
working-set regions of the claims, and :func:`attach` into what
``memlab reproduce`` puts into each dataset's metadata, where
:func:`memlab.catalogue.region` finds it.

>>> rows = [{"working_set_bytes": 1 << k, "ns_per_element": 1.0 if k < 15 else 4.0 if k < 20 else 80.0}
...         for k in range(12, 27)]
>>> found = from_curve(rows, {"caches": []})
>>> [(level.name, level.edge_bytes) for level in found.caches]
[('L1d', 16384), ('L2', 524288)]
>>> regions(found, available_bytes=8 << 30)["beyond_llc"]
(2097152, inf)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from memlab import chase
from memlab.chase_analysis import cache_levels
from memlab.dataset import Dataset
from memlab.files import atomic_write, cache_directory
from memlab.machine import cache_sizes, collect, identity
from memlab.units import format_bytes

__all__ = [
    "CACHE_FILE",
    "CURVE",
    "FORMAT",
    "HELD_RATIO",
    "Hierarchy",
    "Level",
    "MIN_RATIO",
    "REGION_NAMES",
    "RUNS",
    "attach",
    "attached",
    "cache_sizes_measured",
    "cap_note",
    "curve_sizes",
    "format_hierarchy",
    "from_curve",
    "largest_curve_bytes",
    "load",
    "measure",
    "memory_cap_bytes",
    "obtain",
    "points_in",
    "region_sizes",
    "regions",
    "summary",
    "with_region_points",
]

#: The file in an output folder that keeps the measured hierarchy.
CACHE_FILE = "hierarchy.json"
#: The version of that file's layout; another version is measured again (2: edges where the
#: plateau holds, over three walks of the curve).
FORMAT = 2
#: The chase parameters of the latency curve: one 64-byte line per element, random order (no
#: prefetcher hides a level), huge pages where granted (no TLB steps).
CURVE = {"npad": 7, "order": "random", "pages": "thp"}
#: Working sets per doubling on the curve (an edge is known to within 2^(1/3), 26%).
PER_DOUBLING = 3
#: Walks of the whole curve; a set's latency is the median over them.
RUNS = 3
#: A plateau holds while a set's latency is at most this times the plateau's lower quartile: past
#: it the walk is climbing to the next level (:func:`from_curve`).
HELD_RATIO = 1.5
#: Neighbouring plateaus differ at least this much in latency (cache_levels' ``min_ratio``): a
#: cache level is two to eight times slower than the one before it and main memory several times
#: slower than the last cache, while the climb of a walk through memory as page walks get longer
#: (150 -> 200 ns on a VM whose host maps it with small pages) and a set half in one level, half in
#: the next, are not levels. With cache_levels' 1.4, one curve of three on a Zen 5 guest showed such
#: a set (1.6 MiB at 112 ns, between the L2's 22 and memory's 158) as an L3.
MIN_RATIO = 2.0
SMALLEST_BYTES = 4096
#: The curve goes to four times the last cache sysfs reports, between these two sizes.
TOP_MIN_BYTES = 64 << 20
TOP_MAX_BYTES = 256 << 20
#: A working set in a region may take at most this fraction of the memory available (a point
#: of four threads on lists of their own maps four sets; a copy two).
MEMORY_FRACTION = 1 / 8
#: What each region is, for messages (the names are the catalogue's ``where``).
REGION_NAMES = {
    "l1": "in the L1d",
    "l2": "in the L2",
    "l3": "in the last cache beyond the L2",
    "beyond_l2": "beyond the L2",
    "beyond_llc": "beyond the last cache",
}


@dataclass(frozen=True)
class Level:
    """One cache level read off the curve: ``edge_bytes`` is the largest working set measured on
    its plateau, ``next_bytes`` the first one past it; the plateau's median latency; the cache
    sysfs would place the plateau in and that cache's size (None where sysfs says nothing)."""

    name: str
    edge_bytes: int
    next_bytes: int | None
    latency_ns: float
    latency_cycles: float | None
    sysfs_name: str | None
    sysfs_bytes: int | None


@dataclass(frozen=True)
class Hierarchy:
    """The measured caches (:class:`Level`, smallest first) and main memory's latency, with what
    the measurement was: its curve (working set, ns per element), the largest set measured, the
    sizes sysfs reports, the memory available then, the machine's fingerprint, when and how long."""

    caches: tuple[Level, ...]
    memory_latency_ns: float | None
    curve: tuple[tuple[int, float], ...]
    sysfs: Mapping[str, int] = field(default_factory=dict)
    memory_available_bytes: int | None = None
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    fingerprint_id: str = ""
    measured_at: str = ""
    seconds: float = 0.0
    huge_page_fraction: float | None = None

    def level(self, name: str) -> Level | None:
        return next((level for level in self.caches if level.name == name), None)

    @property
    def l1d_bytes(self) -> int | None:
        found = self.level("L1d")
        return found.edge_bytes if found else None

    @property
    def l2_bytes(self) -> int | None:
        found = self.level("L2")
        return found.edge_bytes if found else None

    @property
    def last_cache(self) -> Level | None:
        return self.caches[-1] if self.caches else None

    @property
    def curve_bytes(self) -> int:
        return max((size for size, _ in self.curve), default=0)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["curve"] = [list(point) for point in self.curve]
        data["sysfs"] = dict(self.sysfs)
        data["fingerprint"] = dict(self.fingerprint)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hierarchy:
        """The inverse of :meth:`to_dict`; ValueError for anything else."""
        try:
            caches = tuple(Level(**dict(level)) for level in data["caches"])
            curve = tuple((int(size), float(ns)) for size, ns in data["curve"])
            others = {name: data[name] for name in ("memory_latency_ns", "sysfs", "memory_available_bytes",
                                                    "fingerprint", "fingerprint_id", "measured_at", "seconds",
                                                    "huge_page_fraction") if name in data}
            return cls(caches=caches, curve=curve, **others)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a measured hierarchy: {type(error).__name__}: {error}") from None


# ---- reading the curve ------------------------------------------------------------------


def _data_caches(facts: Mapping[str, Any]) -> dict[str, int]:
    return {name: size for name, size in cache_sizes(dict(facts)).items() if not name.endswith("i")}


def from_curve(rows: Sequence[Mapping[str, Any]], facts: Mapping[str, Any], **about: Any) -> Hierarchy:
    """The hierarchy a latency curve shows: ``rows`` of chase points differing only in
    ``working_set_bytes`` (their ``cpu_ns_per_element`` where every row has it, else
    ``ns_per_element``), ``facts`` the machine facts whose ``caches`` name the plateaus (sysfs).
    ``about``: the other fields of :class:`Hierarchy` (fingerprint, seconds ...).

    The last plateau is main memory: the curve goes past the last cache (:func:`largest_curve_bytes`).
    ValueError when the curve has fewer than three working sets.

    >>> rows = [{"working_set_bytes": 1 << k, "ns_per_element": 1.0 if k < 16 else 90.0} for k in range(12, 22)]
    >>> [level.name for level in from_curve(rows, {"caches": []}).caches]
    ['L1d']
    """
    metadata = {"machine": {"caches": list(facts.get("caches") or [])}}
    levels = cache_levels(Dataset([dict(row) for row in rows], metadata), min_ratio=MIN_RATIO)
    metric = "cpu_ns_per_element" if all(row.get("cpu_ns_per_element") not in (None, "") for row in rows) \
        else "ns_per_element"
    by_size: dict[int, list[float]] = {}
    for row in rows:
        if isinstance(row.get(metric), (int, float)) and math.isfinite(row[metric]):
            by_size.setdefault(int(row["working_set_bytes"]), []).append(float(row[metric]))
    curve = tuple((size, statistics.median(values)) for size, values in sorted(by_size.items()))
    sizes = [size for size, _ in curve]
    plateaus: list[dict[str, Any]] = []
    for level in (_held(level, curve, sizes) for level in levels[:-1]):
        sysfs_name = level["level"] if level["level"] != "memory" else None
        if plateaus and sysfs_name is not None and plateaus[-1]["level"] == level["level"]:
            first = plateaus[-1]  # one cache: its edge from the last plateau, its latency from the first
            plateaus[-1] = dict(level, latency_ns=first["latency_ns"], latency_cycles=first["latency_cycles"])
            continue
        plateaus.append(dict(level))
    names = ["L1d"] + [f"L{number}" for number in range(2, len(plateaus) + 1)]
    caches = tuple(
        Level(name=name, edge_bytes=int(p["largest_working_set_bytes"]), next_bytes=p["next_working_set_bytes"],
              latency_ns=float(p["latency_ns"]), latency_cycles=p["latency_cycles"],
              sysfs_name=p["level"] if p["level"] != "memory" else None, sysfs_bytes=p["sysfs_bytes"])
        for name, p in zip(names, plateaus))
    memory = float(levels[-1]["latency_ns"]) if len(levels) > 1 else None
    fractions = [float(row["huge_page_fraction"]) for row in rows
                 if isinstance(row.get("huge_page_fraction"), (int, float))]
    about.setdefault("huge_page_fraction", min(fractions) if fractions else None)
    return Hierarchy(caches=caches, memory_latency_ns=memory, curve=curve, sysfs=_data_caches(facts), **about)


def _held(level: Mapping[str, Any], curve: Sequence[tuple[int, float]], sizes: list[int]) -> dict[str, Any]:
    """``level`` (a plateau of :func:`memlab.chase_analysis.cache_levels`) with its edge where its
    latency still holds: the plateau's last working sets whose latency exceeds :data:`HELD_RATIO`
    times its lower quartile are the climb to the next level, not the plateau. A cache that other
    tenants of the host share (a VM's L2 beside the host's SMT sibling, its L3 beside other
    guests) climbs over several sets instead of stepping, and where a least-squares split puts the
    edge inside that climb moves from one curve to the next by up to four sets; the last set at
    the plateau's latency moves by one."""
    largest = int(level["largest_working_set_bytes"])
    if largest not in sizes or int(level.get("points") or 0) < 2:
        return dict(level)
    end = sizes.index(largest)
    first = max(0, end - int(level["points"]) + 1)
    values = [value for _, value in curve[first:end + 1]]
    quartile = statistics.quantiles(values, n=4, method="inclusive")[0]
    held = end
    while held > first and curve[held][1] > HELD_RATIO * quartile:
        held -= 1
    if held == end:
        return dict(level)
    return dict(level, largest_working_set_bytes=sizes[held], next_working_set_bytes=sizes[held + 1])


# ---- measuring it ----------------------------------------------------------------------


def memory_cap_bytes(available_bytes: int | None) -> int | None:
    """The largest working set a region may ask for: a power of two, at most
    :data:`MEMORY_FRACTION` of the memory available (None: no cap known).

    >>> memory_cap_bytes(24 << 30) >> 20
    2048
    """
    if not available_bytes or available_bytes <= 0:
        return None
    return 1 << max(12, int(available_bytes * MEMORY_FRACTION).bit_length() - 1)


def largest_curve_bytes(sysfs: Mapping[str, int], available_bytes: int | None) -> int:
    """Where the curve stops: four times the last cache sysfs reports, at least
    :data:`TOP_MIN_BYTES` and at most :data:`TOP_MAX_BYTES` (a VM reporting its host's 480 MiB
    L3 stops at 256 MiB) and the memory cap.

    >>> largest_curve_bytes({"L1d": 48 << 10, "L2": 1 << 20, "L3": 32 << 20}, 24 << 30) >> 20
    128
    """
    last = max(sysfs.values(), default=0)
    top = min(max(4 * last, TOP_MIN_BYTES), TOP_MAX_BYTES)
    cap = memory_cap_bytes(available_bytes)
    return top if cap is None else max(SMALLEST_BYTES << 4, min(top, cap))


def curve_sizes(largest_bytes: int) -> list[int]:
    """The curve's working sets: :data:`PER_DOUBLING` per doubling from 4 KiB to ``largest_bytes``,
    multiples of the 64-byte element.

    >>> [size >> 10 for size in curve_sizes(16 << 10)]
    [4, 5, 6, 8, 10, 12, 16]
    """
    if largest_bytes < SMALLEST_BYTES:
        raise ValueError(f"largest_bytes={largest_bytes} is below the smallest working set {SMALLEST_BYTES}")
    low = SMALLEST_BYTES.bit_length() - 1
    steps = int(math.floor(math.log2(largest_bytes) * PER_DOUBLING + 1e-9))
    sizes = {int(round(2 ** (k / PER_DOUBLING) / 64)) * 64 for k in range(low * PER_DOUBLING, steps + 1)}
    return sorted(size for size in sizes if size <= largest_bytes)


def measure(*, largest_bytes: int | None = None, on_point: Callable[[int, int], None] | None = None,
            repeat: int = 2, target_seconds: float = 0.01, runs: int = RUNS) -> Hierarchy:
    """Measure the latency curve here and read the hierarchy off it (:func:`from_curve`).

    ``largest_bytes``: where the curve stops (default :func:`largest_curve_bytes`); ``on_point``
    is called with (points done, points in all) after each point (a progress bar). The curve is
    walked ``runs`` times (:data:`RUNS`), each time over every working set on a list of its own,
    and each set's latency is the median over the walks (:func:`from_curve`): a minute in which
    another job shared the caches then moves one walk of a set, not an edge. About 10-20 s on a
    two-CPU VM (most of it in the largest sets).

    >>> found = measure(largest_bytes=1 << 20, repeat=1)     # doctest: +SKIP
    >>> found.l1d_bytes                                        # doctest: +SKIP
    45120
    """
    started = time.monotonic()
    facts = collect(include_core=False)
    largest_bytes = largest_bytes or largest_curve_bytes(_data_caches(facts), facts.get("memory_available_bytes"))
    if runs < 1:
        raise ValueError(f"runs={runs} must be at least 1")
    sizes = curve_sizes(largest_bytes)
    rows = []
    walks = [size for _ in range(runs) for size in sizes]
    for done, size in enumerate(walks, 1):
        measured = chase.run(working_set_bytes=size, **CURVE, repeat=repeat, warmup=0, target_seconds=target_seconds)
        rows.append(measured.to_row())
        if on_point is not None:
            on_point(done, len(walks))
    who = identity(facts)
    return from_curve(rows, facts, memory_available_bytes=facts.get("memory_available_bytes"),
                      fingerprint=who["fingerprint"], fingerprint_id=who["fingerprint_id"],
                      measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      seconds=round(time.monotonic() - started, 1))


def load(out: str | os.PathLike, fingerprint_id: str | None = None) -> Hierarchy | None:
    """The hierarchy kept in ``out`` if it was measured on a machine of this fingerprint (this
    machine's by default), else None (no file, another layout, another machine)."""
    if fingerprint_id is None:
        fingerprint_id = identity(collect(include_core=False))["fingerprint_id"]
    try:
        data = json.loads((Path(out) / CACHE_FILE).read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        if data.get("fingerprint_id") != fingerprint_id:
            return None
        return Hierarchy.from_dict(data["hierarchy"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _keep(folder: Path, fingerprint_id: str, found: Hierarchy) -> None:
    atomic_write(folder / CACHE_FILE, json.dumps({"format": FORMAT, "fingerprint_id": fingerprint_id,
                                                  "hierarchy": found.to_dict()}, indent=1))


def obtain(out: str | os.PathLike, *, remeasure: bool = False,
           measuring: Callable[..., Hierarchy] | None = None,
           on_point: Callable[[int, int], None] | None = None,
           machine_folder: str | os.PathLike | bool = True) -> tuple[Hierarchy, str]:
    """The hierarchy of this machine for the output folder ``out``: the one kept there when it was
    measured on a machine of this fingerprint, else the one kept for this machine in
    ``machine_folder`` (default :func:`memlab.files.cache_directory`; False: none), copied into
    ``out``, else measured now and kept in both (``hierarchy.json``). ``remeasure``: measure
    even so. ``measuring``: what measures (default :func:`measure`), called with ``on_point``.
    Returns the hierarchy and why it was or was not measured.

    Kept per machine, the regions stay the same from one run to the next: a VM's caches shared
    with other tenants end at other sets from one minute to the next (its L2 and L3 edges moved by
    up to four sets between curves measured a minute apart on a 2-vCPU EPYC guest), and two runs
    that measured their own curves would judge "in the L2" over different sets.

    >>> found, why = obtain("r")       # doctest: +SKIP
    >>> why                            # doctest: +SKIP
    'kept in r/hierarchy.json (measured 2026-12-02T02:20:11Z)'
    """
    out = Path(out)
    path = out / CACHE_FILE
    shared = cache_directory() if machine_folder is True else Path(machine_folder) if machine_folder else None
    if shared is not None and shared.resolve() == out.resolve():
        shared = None
    current = identity(collect(include_core=False))["fingerprint_id"]
    if not remeasure:
        kept = load(out, current)
        if kept is not None:
            return kept, f"kept in {path} (measured {kept.measured_at or 'earlier'})"
        machine_kept = load(shared, current) if shared is not None else None
        if machine_kept is not None:
            _keep(out, current, machine_kept)
            return machine_kept, (f"kept for this machine in {shared / CACHE_FILE} (measured "
                                  f"{machine_kept.measured_at or 'earlier'}; --remeasure measures again)")
        why = "measured: the machine's fingerprint differs from the one kept" if path.exists() else "measured"
    else:
        why = "measured again (--remeasure)"
    found = (measuring or measure)(on_point=on_point)
    _keep(out, current, found)
    if shared is not None:
        try:
            shared.mkdir(parents=True, exist_ok=True)
            _keep(shared, current, found)
        except OSError:  # a read-only home: the output folder keeps it still
            pass
    return found, why


# ---- regions -----------------------------------------------------------------------------


def regions(found: Hierarchy, available_bytes: int | None = None) -> dict[str, tuple[float, float]]:
    """The working-set regions of the claims, in bytes (low, high), from the measured edges:

    - ``l1``, in the L1d: 4 KiB to half the L1d edge;
    - ``l2``, in the L2: twice the L1d edge (a random walk of twice the L1d still finds half its
      lines there) to the L2 edge;
    - ``l3``, in a last cache beyond the L2: twice the L2 edge to the last cache's edge;
    - ``beyond_l2``: four times the L2 edge and more;
    - ``beyond_llc``, beyond the last cache: four times the last cache's edge (and of the largest
      data cache sysfs reports, which a loaded curve can hide) and more, capped by
      the memory available (:func:`memory_cap_bytes`; ``available_bytes`` default: as when
      measured; :func:`cap_note` says when it is capped).

    A region the curve cannot give (no L2 plateau, no cache beyond the L2, edges too close for a
    region between them) is absent.

    >>> found = Hierarchy((Level("L1d", 32768, 49152, 1.0, None, "L1d", 49152),
    ...                    Level("L2", 1 << 20, 3 << 19, 4.0, None, "L2", 2 << 20)), 90.0, ())
    >>> {name: (low, high) for name, (low, high) in regions(found, 1 << 30).items() if high != math.inf}
    {'l1': (4096, 16384.0), 'l2': (65536, 1048576)}
    >>> regions(found, 1 << 30)["beyond_llc"]
    (4194304, inf)
    """
    bounds: dict[str, tuple[float, float]] = {}
    l1, l2, last = found.l1d_bytes, found.l2_bytes, found.last_cache
    if l1:
        bounds["l1"] = (SMALLEST_BYTES, l1 / 2)
    if l1 and l2:
        bounds["l2"] = (2 * l1, l2)
    if l2 and last is not None and last.name not in ("L1d", "L2"):
        bounds["l3"] = (2 * l2, last.edge_bytes)
    if l2:
        bounds["beyond_l2"] = (4 * l2, math.inf)
    if last is not None:
        # Never inside a cache sysfs reports: a curve measured while other jobs shared the L3
        # (load 10 and more here) can hide it, and main memory is then claimed at 4 MiB inside
        # a 32 MiB L3. Beyond the last cache is beyond both.
        low = 4 * max([last.edge_bytes, *(size for name, size in found.sysfs.items() if not name.endswith("i"))])
        cap = memory_cap_bytes(found.memory_available_bytes if available_bytes is None else available_bytes)
        bounds["beyond_llc"] = (low if cap is None else min(low, cap), math.inf)
    return {name: (low, high) for name, (low, high) in bounds.items() if low <= high}


def cap_note(found: Hierarchy, available_bytes: int | None = None) -> str:
    """What :func:`regions` says when free memory caps "beyond the last cache" ("" when it does not).

    >>> found = Hierarchy((Level("L1d", 32768, None, 1.0, None, None, None),
    ...                    Level("L2", 1 << 30, None, 4.0, None, None, None)), 90.0, ())
    >>> cap_note(found, 8 << 30)
    'beyond the last cache starts at 1 GiB here, not 4x the last cache (4 GiB): a working set there may take at most 1/8 of the 8 GiB of memory available'
    """
    last = found.last_cache
    available = found.memory_available_bytes if available_bytes is None else available_bytes
    cap = memory_cap_bytes(available)
    if last is None or cap is None or cap >= 4 * last.edge_bytes:
        return ""
    return (f"beyond the last cache starts at {format_bytes(cap)} here, not 4x the last cache "
            f"({format_bytes(4 * last.edge_bytes)}): a working set there may take at most "
            f"1/{round(1 / MEMORY_FRACTION)} of the {format_bytes(available)} of memory available")


def region_sizes(low: float, high: float) -> int | None:
    """The working set a sweep adds to reach a region: the power of two nearest the region's
    geometric middle (the smallest power of two from ``low`` on, for a region without end), else a
    multiple of 4 KiB inside it; None for an empty region.

    >>> region_sizes(65536, 1 << 20), region_sizes(4 << 20, math.inf), region_sizes(40000, 48000)
    (262144, 4194304, 40960)
    """
    if not low <= high:
        return None
    first = 1 << max(0, math.ceil(math.log2(low)))
    if high == math.inf:
        return first
    powers = [1 << k for k in range(math.ceil(math.log2(low)), math.floor(math.log2(high)) + 1)]
    if powers:
        middle = math.sqrt(low * high)
        return min(powers, key=lambda size: (abs(math.log(size / middle)), size))
    size = int(math.ceil(low / 4096)) * 4096
    return size if size <= high else None


# ---- what a dataset carries ----------------------------------------------------------------


def attach(found: Hierarchy, available_bytes: int | None = None) -> dict[str, Any]:
    """What ``memlab reproduce`` records in a dataset's metadata (``metadata["hierarchy"]``): the
    hierarchy, its regions (``high`` None: no end) and the cap's note; JSON as it is."""
    bounds = regions(found, available_bytes)
    return {"measured": found.to_dict(),
            "regions": {name: [low, None if high == math.inf else high] for name, (low, high) in bounds.items()},
            "cap": cap_note(found, available_bytes)}


def attached(metadata: Mapping[str, Any]) -> tuple[Hierarchy, dict[str, tuple[float, float]], str] | None:
    """The hierarchy, regions and cap note :func:`attach` put into a dataset's metadata (None: none)."""
    data = metadata.get("hierarchy")
    if not isinstance(data, Mapping):
        return None
    found = Hierarchy.from_dict(data["measured"])
    bounds = {name: (low, math.inf if high is None else high) for name, (low, high) in data["regions"].items()}
    return found, bounds, str(data.get("cap") or "")


def cache_sizes_measured(found: Hierarchy) -> dict[str, int]:
    """The measured edges by cache name, as :func:`memlab.machine.cache_sizes` names sysfs's sizes.

    >>> cache_sizes_measured(Hierarchy((Level("L1d", 32768, None, 1.0, None, None, None),), 90.0, ()))
    {'L1d': 32768}
    """
    return {level.name: level.edge_bytes for level in found.caches}


def points_in(metadata: Mapping[str, Any], points: Mapping[float, Any], where: str) -> tuple[dict[float, Any], str]:
    """The points of a working-set curve (size -> value) in the measured region ``where`` (one of
    :data:`REGION_NAMES`) of the hierarchy attached to ``metadata``, and, when there is none, why.

    >>> meta = attach(Hierarchy((Level("L1d", 32768, None, 1.0, None, None, None),
    ...                          Level("L2", 1 << 20, None, 4.0, None, None, None)), 90.0, ()), 1 << 34)
    >>> points_in({"hierarchy": meta}, {8192: 1.0, 1 << 23: 9.0}, "beyond_llc")
    ({8388608: 9.0}, '')
    >>> points_in({"hierarchy": meta}, {8192: 1.0}, "beyond_llc")[1]
    'the sweep stops at 8 KiB, the last cache ends at 1 MiB (measured here: the L2; beyond it is 4 MiB and more)'
    """
    if where not in REGION_NAMES:
        raise ValueError(f"where={where!r} is not one of {', '.join(REGION_NAMES)}")
    found_attached = attached(metadata)
    if found_attached is None:
        raise ValueError("the metadata has no measured hierarchy (memlab.hierarchy.attach)")
    found, bounds, cap = found_attached
    if where not in bounds:
        ends = found.last_cache
        shown = f"the measured caches end at the {ends.name} ({format_bytes(ends.edge_bytes)})" if ends else \
            "the latency curve showed no cache plateau"
        return {}, f"this machine's latency curve has no region {REGION_NAMES[where]}: {shown}"
    low, high = bounds[where]
    chosen = {size: value for size, value in points.items() if low <= size <= high}
    if chosen:
        return chosen, ""
    largest = format_bytes(max(points)) if points else "nothing"
    if high == math.inf:
        cache = found.last_cache if where == "beyond_llc" else found.level("L2")
        what = "the last cache" if where == "beyond_llc" else "the L2"
        capped = f"; {cap}" if cap and where == "beyond_llc" else ""
        return {}, (f"the sweep stops at {largest}, {what} ends at {format_bytes(cache.edge_bytes)} (measured here: "
                    f"the {cache.name}; beyond it is {format_bytes(low)} and more{capped})")
    sets = ", ".join(format_bytes(size) for size in sorted(points)) or "none"
    return {}, (f"no working set {REGION_NAMES[where]} ({format_bytes(low)} to {format_bytes(high)}, from the edges "
                f"measured here) was measured (the sweep's sets: {sets})")


# ---- sweeps that reach every region ----------------------------------------------------------


def _series_key(point: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in point.items() if k != "working_set_bytes"}, sort_keys=True, default=str)


def _pick(low: float, high: float, candidates: Sequence[int] | None) -> int | None:
    """The size to add for a region: one of ``candidates`` (the full sweep's sizes) inside it, the
    nearest its geometric middle (the smallest, for a region without end); None when the candidates
    stop short of it; :func:`region_sizes` without candidates or when they step over it."""
    if candidates is None:
        return region_sizes(low, high)
    inside = [size for size in candidates if low <= size <= high]
    if inside:
        if high == math.inf:
            return min(inside)
        middle = math.sqrt(low * high)
        return min(inside, key=lambda size: (abs(math.log(size / middle)), size))
    if not candidates or max(candidates) < low:
        return None
    return region_sizes(low, high)


def with_region_points(points: Sequence[Mapping[str, Any]], bounds: Mapping[str, tuple[float, float]], *,
                       full_points: Sequence[Mapping[str, Any]] | None = None,
                       needed: Sequence[str] = ("l1", "l2", "l3", "beyond_llc"),
                       accept: Callable[[dict[str, Any]], bool] = lambda point: True) -> list[dict[str, Any]]:
    """``points`` of a working-set sweep with, for each series (the points alike in everything but
    ``working_set_bytes``), one point added in each ``needed`` region of ``bounds`` it has no point
    in. ``full_points``: the full sweep a quick one was cut from; a series then gets a size the full
    sweep has in the region, and none where the full sweep stops short of it (its claims say so);
    without it, :func:`region_sizes`. ``accept`` may refuse an added point (a size the family
    refuses). The added points follow the sweep's own, in its order of series.

    >>> bounds = {"l1": (4096, 16384), "beyond_llc": (1 << 22, math.inf)}
    >>> [p["working_set_bytes"] for p in with_region_points([{"working_set_bytes": 8192}], bounds)]
    [8192, 4194304]
    >>> full = [{"working_set_bytes": 1 << k} for k in range(10, 22)]
    >>> [p["working_set_bytes"] for p in with_region_points([{"working_set_bytes": 8192}], bounds, full_points=full)]
    [8192]
    """
    reach: dict[str, list[int]] = {}
    for point in full_points or ():
        if "working_set_bytes" in point:
            reach.setdefault(_series_key(point), []).append(point["working_set_bytes"])
    everything = sorted({size for sizes in reach.values() for size in sizes})
    series: dict[str, tuple[dict[str, Any], set[float]]] = {}
    for point in points:
        if "working_set_bytes" in point:
            series.setdefault(_series_key(point), (dict(point), set()))[1].add(point["working_set_bytes"])
    added = []
    for key, (template, sizes) in series.items():
        candidates = None if full_points is None else sorted(reach.get(key, everything))
        for name in needed:
            if name not in bounds:
                continue
            low, high = bounds[name]
            if any(low <= size <= high for size in sizes):
                continue
            size = _pick(low, high, candidates)
            if size is None:
                continue
            point = dict(template, working_set_bytes=size)
            if accept(point):
                added.append(point)
                sizes.add(size)
    return [dict(point) for point in points] + added


# ---- telling ------------------------------------------------------------------------------------


def format_hierarchy(found: Hierarchy) -> str:
    """The measured levels as a text table beside sysfs's sizes.

    >>> print(format_hierarchy(Hierarchy((Level("L1d", 45120, 65536, 1.2, 4.2, "L1d", 49152),), 160.0, ())))
    level   ends at     next set    latency ns  sysfs
    L1d     44.1 KiB    64 KiB      1.2         L1d 48 KiB
    memory  -           -           160
    """
    lines = [f"{'level':<8}{'ends at':<12}{'next set':<12}{'latency ns':<12}sysfs"]
    for level in found.caches:
        sysfs = f"{level.sysfs_name} {format_bytes(level.sysfs_bytes)}" if level.sysfs_bytes else "-"
        following = format_bytes(level.next_bytes) if level.next_bytes else "-"
        lines.append(f"{level.name:<8}{format_bytes(level.edge_bytes):<12}{following:<12}"
                     f"{level.latency_ns:<12.3g}{sysfs}")
    memory = "-" if found.memory_latency_ns is None else f"{found.memory_latency_ns:.3g}"
    lines.append(f"{'memory':<8}{'-':<12}{'-':<12}{memory}")
    return "\n".join(line.rstrip() for line in lines)


def summary(found: Hierarchy) -> str:
    """One sentence: where each measured cache ends, beside sysfs.

    >>> summary(Hierarchy((Level("L1d", 45120, 65536, 1.2, 4.2, "L1d", 49152),), 160.0, (), {"L1d": 49152, "L3": 1 << 25}))
    'measured here: the L1d ends at 44.1 KiB, main memory beyond (the last cache measured: the L1d); sysfs reports L1d 48 KiB, L3 32 MiB'
    """
    parts = [f"the {level.name} ends at {format_bytes(level.edge_bytes)}" for level in found.caches]
    last = found.last_cache
    text = "measured here: " + (", ".join(parts) if parts else "no cache plateau") + ", main memory beyond"
    if last is not None:
        text += f" (the last cache measured: the {last.name})"
    if found.sysfs:
        text += "; sysfs reports " + ", ".join(f"{name} {format_bytes(size)}" for name, size in found.sysfs.items())
    return text
