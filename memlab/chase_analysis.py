"""What a chase dataset says, and its figure drawn with the source's axes.

Part of the chase family (``memlab.chase`` re-exports what users call):
it imports only the layers below the families.

Analyses (pure Python, no plotting library):

- :func:`cache_levels`: the plateaus of a latency curve and the cache sizes
  sysfs reports.
- :func:`slowdown`: one placement against another, in percent, per working set
  (the critical word, fig. 3.30; two cache lines, fig. 6.2; misalignment,
  fig. 6.4; remote NUMA memory, figs. 5.3/5.4).
- :func:`thread_speedup` and :func:`efficiency_table`: what 2 and 4 walking
  threads gain over one (fig. 3.22 and table 3.3).
- :func:`associativity`: the L1d size and ways read off fig. 6.5's surface,
  beside what sysfs says.
- :func:`counter_ratios`: cycles per instruction and misses per instruction
  or per cache reference from the hardware counters (figs. 3.16, 7.1-7.3),
  and :func:`missing_counters`, why they are absent.

:func:`figure` draws a chase dataset's standard figure, chosen by the sweep
that produced it (the latency curve for sweeps without a figure of their own).

>>> rows = [{"working_set_bytes": 4096, "pointer_word": w, "order": "random", "ns_per_element": t}
...         for w, t in ((0, 2.0), (7, 2.1))]
>>> [round(r["slowdown_percent"], 3) for r in slowdown(rows, "pointer_word", 0, 7)]
[5.0]
"""

from __future__ import annotations

import math
import statistics
import textwrap
from typing import Any, Iterable, Mapping, Sequence

from memlab import chart
from memlab.dataset import Dataset
from memlab.machine import cache_sizes, collect_caches
from memlab.measure import Measurement
from memlab.units import format_bytes, metric_label

__all__ = [
    "FIGURES",
    "SOURCE_TABLE_3_3",
    "associativity",
    "cache_levels",
    "caption",
    "counter_ratios",
    "efficiency_table",
    "figure",
    "format_associativity",
    "format_cache_levels",
    "format_efficiency_table",
    "hops",
    "latency_figure",
    "missing_counters",
    "slowdown",
    "sweep_base",
    "thread_speedup",
]

LINE_BYTES = 64

#: Table 3.3 of the source: speed-up at the largest working set, (seq read, seq inc, random addnextlast).
SOURCE_TABLE_3_3 = {2: (1.69, 1.69, 1.54), 4: (2.98, 2.07, 1.65)}
_TABLE_3_3_COLUMNS = (("fig3_19", "sequential read"), ("fig3_20", "sequential inc"),
                      ("fig3_21", "random addnextlast"))


# --------------------------------------------------------------------------
# reading rows


def sweep_base(data: Any) -> str:
    """The sweep a dataset came from, without ``_quick``: ``fig6_5_quick`` -> ``fig6_5``.

    >>> sweep_base(Dataset([], {"sweep": "fig6_5_quick"}))
    'fig6_5'
    """
    name = str(getattr(data, "metadata", {}).get("sweep") or "")
    return name[: -len("_quick")] if name.endswith("_quick") else name


def _rows(data: Any) -> list[dict]:
    if isinstance(data, Dataset):
        return list(data.rows)
    return [row.to_row() if hasattr(row, "to_row") else dict(row) for row in data]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _time_metric(rows: Sequence[Mapping[str, Any]]) -> str:
    """On-CPU time per element where every row has it (robust when the CPU is shared), else wall time."""
    if rows and all(math.isfinite(_number(r.get("cpu_ns_per_element"))) for r in rows):
        return "cpu_ns_per_element"
    return "ns_per_element"


def _element_bytes(row: Mapping[str, Any]) -> int:
    given = row.get("element_bytes")
    if isinstance(given, int) and given > 0:
        return given
    return 8 * (int(row.get("npad") or 0) + 1)


# --------------------------------------------------------------------------
# cache levels: the plateaus of a latency curve


def _curve(rows: list[Mapping[str, Any]], metric: str) -> tuple[list[int], list[float], dict]:
    """Median metric (and cycles, from the run's core clock) per working set."""

    def number(value: Any) -> float | None:
        if value is None or isinstance(value, str):
            return None
        value = float(value)
        return None if math.isnan(value) else value

    by_size: dict[int, list[float]] = {}
    cycles: dict[int, list[float]] = {}
    for row in rows:
        value, size = number(row.get(metric)), row.get("working_set_bytes")
        if value is None or size is None:
            continue
        by_size.setdefault(int(size), []).append(value)
        ghz = number(row.get("context_core_GHz"))
        if ghz is None and metric == "ns_per_element":
            c = number(row.get("cycles_per_element"))
            if c is not None:
                cycles.setdefault(int(size), []).append(c)
        elif ghz is not None:
            cycles.setdefault(int(size), []).append(value * ghz)
    sizes = sorted(by_size)
    return sizes, [statistics.median(by_size[s]) for s in sizes], {
        s: statistics.median(v) for s, v in cycles.items()
    }


def _segment_cost(prefix: list[float], prefix_sq: list[float], i: int, j: int) -> float:
    count = j - i
    total = prefix[j] - prefix[i]
    return prefix_sq[j] - prefix_sq[i] - total * total / count


def _best_segmentation(values: list[float], segments: int, min_points: int) -> list[tuple[int, int]] | None:
    """Split values into `segments` runs minimising the squared error (DP)."""
    n = len(values)
    if segments * min_points > n:
        return None
    prefix, prefix_sq = [0.0], [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
        prefix_sq.append(prefix_sq[-1] + v * v)
    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(segments + 1)]
    cut = [[0] * (n + 1) for _ in range(segments + 1)]
    cost[0][0] = 0.0
    for k in range(1, segments + 1):
        for j in range(k * min_points, n + 1):
            for i in range((k - 1) * min_points, j - min_points + 1):
                if cost[k - 1][i] == inf:
                    continue
                c = cost[k - 1][i] + _segment_cost(prefix, prefix_sq, i, j)
                if c < cost[k][j]:
                    cost[k][j], cut[k][j] = c, i
    bounds = []
    j = n
    for k in range(segments, 0, -1):
        i = cut[k][j]
        bounds.append((i, j))
        j = i
    return bounds[::-1]


def _sysfs_levels(metadata: Mapping[str, Any] | None) -> list[tuple[str, int]]:
    facts = (metadata or {}).get("machine") if metadata else None
    if not isinstance(facts, Mapping) or "caches" not in facts:
        facts = {}
        collect_caches(facts)
    sizes = cache_sizes(dict(facts))
    return [(name, size) for name, size in sizes.items() if not name.endswith("i")]


def cache_levels(
    dataset: Any,
    *,
    metric: str | None = None,
    min_ratio: float = 1.4,
    max_levels: int = 6,
    min_points: int = 3,
) -> list[dict[str, Any]]:
    """Find the plateaus of a latency curve: each level's size and latency.

    ``dataset`` is a :class:`memlab.dataset.Dataset` (or rows, or
    Measurements) of chase points that differ only in ``working_set_bytes``
    (filter it first, e.g. ``ds.filter(order="random", npad=7)``). ``metric``
    defaults to ``cpu_ns_per_element`` where every row has it (time the walk
    really ran, robust on a shared machine), else ``ns_per_element``. The
    curve (log of the metric) is split by least squares into the most
    plateaus of at least ``min_points`` points whose neighbours differ by at
    least ``min_ratio``. One dict per level: ``level`` (the smallest sysfs
    data cache that holds the plateau, ``memory`` if none does),
    ``largest_working_set_bytes`` on the plateau, ``next_working_set_bytes``
    (first point of the next one), ``latency_ns`` and ``latency_cycles``
    (medians on the plateau; cycles from the run's measured core clock),
    ``points``, and ``sysfs_bytes`` of that cache (from the dataset's machine
    facts, else from this machine).

    >>> rows = [{"working_set_bytes": 2**k, "ns_per_element": 1.5 if k < 15 else 5.0}
    ...         for k in range(10, 20)]
    >>> [(lv["largest_working_set_bytes"], lv["latency_ns"]) for lv in cache_levels(rows)]
    [(16384, 1.5), (524288, 5.0)]
    """
    metadata = getattr(dataset, "metadata", None)
    rows = [m.to_row() if isinstance(m, Measurement) else m for m in dataset]
    if metric is None:
        on_cpu = all(row.get("cpu_ns_per_element") not in (None, "") for row in rows)
        metric = "cpu_ns_per_element" if rows and on_cpu else "ns_per_element"
    sizes, values, cycles = _curve(rows, metric)
    if len(sizes) < min_points:
        raise ValueError(f"cache_levels needs at least {min_points} working-set sizes, got {len(sizes)}")
    logs = [math.log(v) for v in values]
    chosen = [(0, len(sizes))]
    for segments in range(min(max_levels, len(sizes) // min_points), 0, -1):
        bounds = _best_segmentation(logs, segments, min_points)
        if bounds is None:
            continue
        medians = [statistics.median(values[i:j]) for i, j in bounds]
        if all(b / a >= min_ratio for a, b in zip(medians, medians[1:])):
            chosen = bounds
            break
    caches = _sysfs_levels(metadata)
    levels = []
    for i, j in chosen:
        largest = sizes[j - 1]
        holding = [(size, name) for name, size in caches if size >= largest]
        sysfs, name = min(holding) if holding else (None, "memory")
        plateau_cycles = [cycles[s] for s in sizes[i:j] if s in cycles]
        levels.append({
            "level": name,
            "largest_working_set_bytes": largest,
            "next_working_set_bytes": sizes[j] if j < len(sizes) else None,
            "latency_ns": statistics.median(values[i:j]),
            "latency_cycles": statistics.median(plateau_cycles) if plateau_cycles else None,
            "points": j - i,
            "sysfs_bytes": sysfs,
        })
    return levels


def format_cache_levels(levels: Sequence[Mapping[str, Any]]) -> str:
    """The levels of :func:`cache_levels` as a text table, measured beside sysfs.

    >>> print(format_cache_levels([{"level": "L1d", "largest_working_set_bytes": 32768,
    ...     "next_working_set_bytes": 65536, "latency_ns": 1.2, "latency_cycles": 4.0,
    ...     "points": 6, "sysfs_bytes": 32768}]))
    level  measured plateau              latency ns  cycles   sysfs size
    L1d    <= 32 KiB (< 64 KiB)          1.2         4        32 KiB
    """

    def size(value: Any) -> str:
        return "-" if value is None else format_bytes(value)

    lines = [f"{'level':<7}{'measured plateau':<30}{'latency ns':<12}{'cycles':<9}sysfs size"]
    for lv in levels:
        plateau = f"<= {size(lv['largest_working_set_bytes'])}"
        if lv.get("next_working_set_bytes") is not None:
            plateau += f" (< {size(lv['next_working_set_bytes'])})"
        cyc = lv.get("latency_cycles")
        lines.append(
            f"{lv['level']:<7}{plateau:<30}{lv['latency_ns']:<12.3g}"
            f"{'-' if cyc is None else format(cyc, '.3g'):<9}{size(lv.get('sysfs_bytes'))}"
        )
    return "\n".join(line.rstrip() for line in lines)


# --------------------------------------------------------------------------
# slowdowns


def slowdown(
    data: Any,
    vary: str,
    base: Any,
    other: Any,
    *,
    by: Sequence[str] = ("order", "element_bytes", "op"),
    metric: str | None = None,
) -> list[dict[str, Any]]:
    """How much slower rows with ``vary == other`` are than rows with ``vary == base``, in percent.

    Rows are paired by ``working_set_bytes`` and the parameters ``by``;
    each result has those, ``element_size_bytes``, ``base_ns``, ``other_ns`` (medians of ``metric``,
    by default on-CPU ns per element where every row has it) and
    ``slowdown_percent`` = (other / base - 1) x 100.

    >>> rows = [{"working_set_bytes": 1024, "misalign_bytes": m, "ns_per_element": t}
    ...         for m, t in ((0, 4.0), (4, 5.0))]
    >>> slowdown(rows, "misalign_bytes", 0, 4)[0]["slowdown_percent"]
    25.0
    """
    rows = _rows(data)
    metric = metric or _time_metric(rows)
    groups: dict[tuple, dict[str, list[float]]] = {}
    for row in rows:
        value = _number(row.get(metric))
        if not math.isfinite(value) or row.get(vary) not in (base, other):
            continue
        key = tuple(repr(row.get(name)) for name in by) + (row.get("working_set_bytes"),)
        side = "base" if row.get(vary) == base else "other"
        groups.setdefault(key, {"base": [], "other": [], "row": [row]})[side].append(value)
    result = []
    for key, values in groups.items():
        if not values["base"] or not values["other"]:
            continue
        base_ns, other_ns = statistics.median(values["base"]), statistics.median(values["other"])
        row = values["row"][0]
        entry = {name: row.get(name) for name in by}
        entry.update(working_set_bytes=key[-1], element_size_bytes=_element_bytes(row), base_ns=base_ns,
                     other_ns=other_ns,
                     slowdown_percent=(other_ns / base_ns - 1) * 100 if base_ns > 0 else math.nan)
        result.append(entry)
    return sorted(result, key=lambda e: (tuple(repr(e[n]) for n in by), e["working_set_bytes"]))


# --------------------------------------------------------------------------
# threads: fig. 3.22 and table 3.3


def thread_speedup(data: Any, metric: str | None = None) -> list[dict[str, Any]]:
    """Speed-up of n threads over one per working set: n x t(1) / t(n), t the fastest thread's time per element.

    As the source (fig. 3.22): each thread does the work one thread did, so
    n threads at one thread's speed give n. ``metric`` defaults to on-CPU
    ns per element where every row has it (else wall-clock).

    >>> rows = [{"working_set_bytes": 1024, "threads": n, "ns_per_element": t} for n, t in ((1, 2.0), (2, 2.5))]
    >>> thread_speedup(rows)[0]["speedup"]
    1.6
    """
    rows = _rows(data)
    metric = metric or _time_metric(rows)
    times: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        value = _number(row.get(metric))
        if math.isfinite(value) and value > 0:
            times.setdefault((int(row.get("threads") or 1), int(row["working_set_bytes"])), []).append(value)
    median = {key: statistics.median(values) for key, values in times.items()}
    result = []
    for (threads, size), value in sorted(median.items()):
        single = median.get((1, size))
        if threads > 1 and single:
            result.append({"threads": threads, "working_set_bytes": size, "speedup": threads * single / value,
                           "ns_per_element": value, "single_thread_ns_per_element": single})
    return result


def efficiency_table(datasets: Iterable[Any]) -> list[dict[str, Any]]:
    """Table 3.3: the speed-up of 2 and 4 threads at the largest working set, beside the source's.

    ``datasets`` are the fig3_19, fig3_20 and fig3_21 datasets (any order,
    any subset). One row per thread count of the source (2 and 4): for each
    test its measured speed-up (None where that count was not measured) and
    the source's number; ``cpus_usable`` says how many CPUs the runs had.

    >>> ds = Dataset([{"working_set_bytes": 2**20, "threads": n, "ns_per_element": t, "cpus_usable": 2}
    ...               for n, t in ((1, 10.0), (2, 12.5))], {"sweep": "fig3_21"})
    >>> efficiency_table([ds])[0]["random addnextlast"], efficiency_table([ds])[1]["random addnextlast"]
    (1.6, None)
    """
    by_sweep = {sweep_base(ds): ds for ds in datasets}
    cpus = [int(r["cpus_usable"]) for ds in by_sweep.values() for r in _rows(ds)
            if math.isfinite(_number(r.get("cpus_usable")))]
    table = []
    for threads, source in SOURCE_TABLE_3_3.items():
        row: dict[str, Any] = {"threads": threads, "cpus_usable": max(cpus) if cpus else None}
        for (sweep, column), published in zip(_TABLE_3_3_COLUMNS, source):
            row[f"source {column}"] = published
            row[column] = None
            speedups = thread_speedup(by_sweep[sweep]) if sweep in by_sweep else []
            mine = [s for s in speedups if s["threads"] == threads]
            if mine:
                largest = max(s["working_set_bytes"] for s in mine)
                row[column] = next(s["speedup"] for s in mine if s["working_set_bytes"] == largest)
                row["working_set_bytes"] = largest
        table.append(row)
    return table


def format_efficiency_table(table: Sequence[Mapping[str, Any]]) -> str:
    """Table 3.3 as text: measured speed-up (source's in brackets); unmeasured counts say why.

    >>> print(format_efficiency_table([{"threads": 2, "cpus_usable": 2, "sequential read": 1.5,
    ...     "source sequential read": 1.69}]))
    threads  sequential read  sequential inc   random addnextlast
    2        1.5 (1.69)       - (-)            - (-)
    """
    lines = [f"{'threads':<9}" + "".join(f"{column:<17}" for _, column in _TABLE_3_3_COLUMNS)]
    for row in table:
        cells = []
        for _, column in _TABLE_3_3_COLUMNS:
            mine, theirs = row.get(column), row.get(f"source {column}")
            text = "-" if mine is None else f"{mine:.3g}"
            cells.append(f"{text} ({'-' if theirs is None else theirs})")
        line = f"{row['threads']:<9}" + "".join(f"{cell:<17}" for cell in cells)
        cpus = row.get("cpus_usable")
        if all(row.get(column) is None for _, column in _TABLE_3_3_COLUMNS) and cpus and cpus < row["threads"]:
            line = f"{row['threads']:<9}not measured: this machine gave the walk {cpus} CPUs"
        lines.append(line.rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------
# associativity: fig. 6.5


def _sysfs_l1d(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    facts = (metadata or {}).get("machine") if metadata else None
    if not isinstance(facts, Mapping) or not facts.get("caches"):
        facts = {}
        collect_caches(facts)
    for cache in facts.get("caches", []):
        if cache.get("level") == 1 and cache.get("type") == "Data":
            return {"sysfs_bytes": cache.get("size_bytes"), "sysfs_ways": cache.get("ways")}
    return {"sysfs_bytes": None, "sysfs_ways": None}


def associativity(data: Any, *, threshold: float = 1.6, metric: str | None = None) -> dict[str, Any]:
    """The L1d's ways and size read off fig. 6.5's surface (time per element by distance and list length).

    A point is a *conflict* when its time exceeds ``threshold`` times the
    median of all points (most of the surface is L1d hits). For each
    element distance the first conflicting length is the shortest from which
    every longer list conflicts too. One way's span (``way_bytes``: all
    elements then map to one set) is the smallest conflicting distance whose
    every measured multiple conflicts too; the fewest elements that overflow
    one set there are ways + 1, so ``ways`` = (its first conflict) - 1, and
    ``l1d_bytes`` = ways x way_bytes.
    Returns those with ``sets`` (way_bytes / 64), ``l1_ns``, ``conflict_ns``,
    ``conflict_distances`` (element distances with a conflict), ``lengths``
    (the longest list measured) and ``sysfs_bytes``/``sysfs_ways`` of the
    L1d from the dataset's machine facts (else this machine). ``ways`` is
    None when no distance conflicts (the L1d then has more ways than the
    longest list).

    >>> rows = [{"element_distance": d, "working_set_bytes": 64 * n, "npad": 7,
    ...          "ns_per_element": 5.0 if d % 64 == 0 and n > 8 else 1.5}
    ...         for d in (1, 32, 63, 64, 128) for n in range(1, 17)]
    >>> found = associativity(rows)
    >>> found["ways"], found["way_bytes"], found["l1d_bytes"], found["conflict_distances"]
    (8, 4096, 32768, [64, 128])
    """
    rows = _rows(data)
    metric = metric or _time_metric(rows)
    cells: dict[int, dict[int, list[float]]] = {}
    element = None
    for row in rows:
        value = _number(row.get(metric))
        distance = row.get("element_distance")
        if not math.isfinite(value) or distance is None:
            continue
        element = _element_bytes(row)
        length = int(row["working_set_bytes"]) // element
        cells.setdefault(int(distance), {}).setdefault(length, []).append(value)
    if not cells or element is None:
        raise ValueError(f"associativity needs rows with element_distance and a finite {metric}")
    surface = {d: {n: statistics.median(v) for n, v in by_length.items()} for d, by_length in cells.items()}
    l1_ns = statistics.median(v for by_length in surface.values() for v in by_length.values())
    first_conflict: dict[int, int] = {}
    for distance, by_length in surface.items():
        first = None
        for length in sorted(by_length, reverse=True):
            if by_length[length] > threshold * l1_ns:
                first = length
            else:
                break
        if first is not None:
            first_conflict[distance] = first
    longest = max(n for by_length in surface.values() for n in by_length)
    found: dict[str, Any] = {
        "metric": metric, "l1_ns": l1_ns, "lengths": longest, "element_bytes": element,
        "conflict_distances": sorted(first_conflict), "ways": None, "way_bytes": None,
        "l1d_bytes": None, "sets": None, "conflict_ns": None,
    }
    if first_conflict:
        distance = _way_span(first_conflict, surface)
        ways = first_conflict[distance] - 1
        conflicting = [v for d, n0 in first_conflict.items() for n, v in surface[d].items() if n >= n0]
        found.update(ways=ways, way_bytes=distance * element, l1d_bytes=ways * distance * element,
                     sets=distance * element // LINE_BYTES, conflict_ns=statistics.median(conflicting))
    found.update(_sysfs_l1d(getattr(data, "metadata", None)))
    return found


def _way_span(first_conflict: Mapping[int, int], surface: Mapping[int, Mapping[int, float]]) -> int:
    """The element distance of one L1d way: the smallest conflicting distance whose every measured
    multiple conflicts too (all of them put every element in one set). A lone slow tail at some
    other distance has multiples that do not conflict. The ways are read at this distance alone: a
    multiple of it may overflow earlier for a reason of its own (a quick run on a Zen 3 read 5 ways
    at two way spans where one span read 8, docs/chase.md). Where no distance qualifies, the
    distance with the fewest elements conflicting."""
    for distance in sorted(first_conflict):
        if all(multiple in first_conflict for multiple in surface if multiple % distance == 0):
            return distance
    fewest = min(first_conflict.values())
    return min(d for d, n in first_conflict.items() if n == fewest)


def format_associativity(found: Mapping[str, Any]) -> str:
    """:func:`associativity` in two lines: what the surface says, what sysfs says.

    >>> print(format_associativity({"ways": 12, "way_bytes": 4096, "l1d_bytes": 49152, "sets": 64,
    ...     "l1_ns": 1.2, "conflict_ns": 3.9, "conflict_distances": [64, 128], "lengths": 16,
    ...     "sysfs_bytes": 49152, "sysfs_ways": 12}))
    measured: L1d 48 KiB, 12 ways of 4 KiB (64 sets); 1.2 ns per element, 3.9 ns once a set overflows (distances 64, 128)
    sysfs:    L1d 48 KiB, 12 ways
    """
    size = format_bytes
    sysfs = (f"sysfs:    L1d {size(found['sysfs_bytes']) if found.get('sysfs_bytes') else '?'}, "
             f"{found.get('sysfs_ways') or '?'} ways")
    if found.get("ways") is None:
        return (f"measured: no conflict up to lists of {found.get('lengths')} elements: "
                f"more ways than that ({found['l1_ns']:.3g} ns per element)\n{sysfs}")
    return (f"measured: L1d {size(found['l1d_bytes'])}, {found['ways']} ways of {size(found['way_bytes'])} "
            f"({found['sets']} sets); {found['l1_ns']:.3g} ns per element, {found['conflict_ns']:.3g} ns once "
            f"a set overflows (distances {', '.join(map(str, found['conflict_distances']))})\n{sysfs}")


# --------------------------------------------------------------------------
# NUMA: figs. 5.3/5.4


def hops(data: Any) -> dict[float, int]:
    """SLIT distance -> hops: 10 (local) is 0, the next larger distance 1, and so on.

    >>> hops([{"numa_distance": 10}, {"numa_distance": 21}, {"numa_distance": 16}])
    {10.0: 0, 16.0: 1, 21.0: 2}
    """
    distances = sorted({_number(r.get("numa_distance")) for r in _rows(data)
                        if math.isfinite(_number(r.get("numa_distance")))})
    return {d: i for i, d in enumerate(distances)}


# --------------------------------------------------------------------------
# hardware counters: figs. 3.16, 7.1-7.3

#: Ratios of figs. 3.16 and 7.1-7.3: name -> (numerator counter, denominator counter, scale).
COUNTER_RATIOS = {
    "cycles_per_instruction": ("cycles", "instructions", 1.0),
    "l1d_misses_per_instruction_percent": ("l1d_load_misses", "instructions", 100.0),
    "llc_misses_per_instruction_percent": ("cache_misses", "instructions", 100.0),
    "llc_load_misses_per_instruction_percent": ("llc_load_misses", "instructions", 100.0),
    "dtlb_misses_per_instruction_percent": ("dtlb_load_misses", "instructions", 100.0),
    "llc_miss_ratio_percent": ("cache_misses", "cache_references", 100.0),
}


def counter_ratios(row: Mapping[str, Any]) -> dict[str, float]:
    """The ratios of :data:`COUNTER_RATIOS` that the row's counters allow.

    >>> counter_ratios({"counter_cycles": 300.0, "counter_instructions": 100.0})
    {'cycles_per_instruction': 3.0}
    """
    ratios = {}
    for name, (top, bottom, scale) in COUNTER_RATIOS.items():
        a, b = _number(row.get(f"counter_{top}")), _number(row.get(f"counter_{bottom}"))
        if math.isfinite(a) and math.isfinite(b) and b > 0:
            ratios[name] = a / b * scale
    return ratios


def missing_counters(data: Any, names: Iterable[str]) -> dict[str, str]:
    """Counters of ``names`` that no row has, each with the reason the rows give.

    >>> missing_counters([{"counters_missing": {"cycles": "no PMU (ENOENT)"}}], ["cycles", "instructions"])
    {'cycles': 'no PMU (ENOENT)', 'instructions': 'not in the dataset'}
    """
    rows = _rows(data)
    missing = {}
    for name in names:
        if any(math.isfinite(_number(r.get(f"counter_{name}"))) for r in rows):
            continue
        reasons = [r.get("counters_missing", {}).get(name) for r in rows
                   if isinstance(r.get("counters_missing"), Mapping)]
        missing[name] = next((reason for reason in reasons if reason), "not in the dataset")
    return missing


# --------------------------------------------------------------------------
# figures


def latency_figure(data: Dataset | str, metric: str | None = None, x: str = "working_set_bytes",
                   title: str | None = None):
    """Latency per element (ns) vs working set on a log2 axis, cache sizes marked.

    One line per variant (every other parameter that varies: npad, order,
    pages ...); the vertical dashed lines are the L1d, L2 and L3 sizes of the
    machine the dataset was measured on. A right-hand axis gives cycles per
    element when the dataset has them (Drepper's figures 3.10-3.15 plot cycles).
    ``title`` defaults to the source figure's title for its sweeps.

    >>> fig = latency_figure("results/chase-quick.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    metric = metric or ds.primary_metric(("ns_per_element",))
    title = title or LATENCY_TITLES.get(sweep_base(ds))
    fig = chart.line_figure(ds, x, metric, log2_x=True, caches=True,
                            title=title or f"{chart.family_of(ds)}: {metric_label(metric)} vs working set")
    ax = fig.axes[0]
    ax.set_xlabel("working set (bytes, log2)")
    values = [r[metric] for r in ds.rows if chart.finite(r.get(metric)) and r[metric] > 0]
    if values and max(values) / min(values) > 20:
        lows = [r.get(f"{metric}_min") for r in ds.rows]
        low = min([v for v in lows if chart.finite(v) and v > 0] + values)
        ax.set_ylim(low / 1.5, None)
        ax.set_yscale("log")  # as Drepper's figure 3.15: L1 and DRAM latency on one plot
    ratios = sorted(
        r["cycles_per_element"] / r[metric]
        for r in ds.rows
        if metric == "ns_per_element" and chart.finite(r.get("cycles_per_element"))
        and chart.finite(r.get(metric)) and r[metric] > 0
    )
    if ratios:
        ghz = ratios[len(ratios) // 2]
        if ghz > 0:
            secondary = ax.secondary_yaxis("right", functions=(lambda ns: ns * ghz, lambda c: c / ghz))
            secondary.set_ylabel(f"cycles per element (at {ghz:.2f} GHz)")
    return fig


def figure(data: Dataset | str | Any):
    """The standard figure of a chase dataset, chosen by its sweep (fig6_5 -> the associativity map ...).

    Sweeps without a figure of their own get the latency curve
    (:func:`memlab.latency_figure`).

    >>> fig = figure("results/chase-fig6_5.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    draw = FIGURES.get(sweep_base(ds), latency_figure)
    return draw(ds)


def _footnote(fig, text: str) -> None:
    """A line of explanation under the axes (room is made for it)."""
    if not text:
        return
    lines = max(1, math.ceil(len(text) / 170))
    fig.get_layout_engine().set(rect=(0, 0.035 * lines + 0.01, 1, 1 - 0.035 * lines - 0.01))
    fig.text(0.01, 0.005, text, fontsize=7, color="0.3", ha="left", va="bottom", wrap=True)


def _description_notes(ds: Dataset) -> str:
    """The sentences a sweep added to its description about this machine."""
    text = str(ds.metadata.get("description") or "")
    keys = ("Not measured here", "This machine has", "Nodes with memory", "The helper runs")
    return " ".join(part.strip() + "." for part in text.split(". ") if part.strip().startswith(keys)).replace(
        "..", ".")


def _curve_axes(ax, xs: Sequence[float], ds: Dataset, log_y: bool = False) -> None:
    chart.log2_axis(ax, xs)
    sizes, source = chart.cache_sizes_of(ds)
    chart.mark_caches(ax, sizes, (min(xs), max(xs)), source)
    ax.set_xlabel("working set (bytes, log2)")
    if log_y:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)


def _cycles(row: Mapping[str, Any], metric: str = "cpu_ns_per_element") -> float:
    """Cycles per element from a time metric (default: on-CPU ns, else wall ns) and the run's core clock."""
    if not math.isfinite(_number(row.get(metric))):
        metric = "ns_per_element"
    ghz = _number(row.get("context_core_GHz"))
    value = _number(row.get(metric))
    if not math.isfinite(ghz):
        cycles, ns = _number(row.get("cycles_per_element")), _number(row.get("ns_per_element"))
        ghz = cycles / ns if ns > 0 else math.nan
    return value * ghz


def random_writes_figure(ds: Dataset):
    """Fig. 3.4: cycles per element of random writes (log) against the working set, each plateau labelled."""
    fig, ax = chart.new_figure()
    rows = sorted((r for r in ds.rows if math.isfinite(_cycles(r))), key=lambda r: r["working_set_bytes"])
    for key, members in _group(rows, ("op", "order", "npad")).items():
        xs = [r["working_set_bytes"] for r in members]
        ax.plot(xs, [_cycles(r) for r in members], marker="o", markersize=3,
                label=f"{members[0].get('op')} {members[0].get('order')}, {_element_bytes(members[0])}-byte elements")
    xs = [r["working_set_bytes"] for r in rows]
    _curve_axes(ax, xs, ds, log_y=True)
    if len({r["working_set_bytes"] for r in rows}) >= 3:
        for level in cache_levels(Dataset(rows, ds.metadata), min_points=1 if len(rows) < 9 else 2):
            if level.get("latency_cycles") is None:
                continue
            ax.annotate(f"{level['level']}: {_cycles_text(level['latency_cycles'])} cycles",
                        (level["largest_working_set_bytes"], level["latency_cycles"]), xytext=(-4, 6),
                        textcoords="offset points", ha="right", fontsize=8)
    ax.set_ylabel("cycles per element (log)")
    ax.legend(fontsize=8, loc="upper left")
    chart.set_title(fig, ds, "Fig. 3.4: access time of random writes")
    return fig


def _cycles_text(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _group(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault(tuple(repr(row.get(n)) for n in names), []).append(row)
    return groups


def _slowdown_figure(ds: Dataset, vary: str, base: Any, other: Any, label, title: str, ylabel: str,
                     by: Sequence[str] = ("order", "element_bytes", "op")):
    fig, ax = chart.new_figure()
    found = slowdown(ds, vary, base, other, by=by)
    if not found:
        raise ValueError(f"the dataset has no pairs of rows with {vary}={base!r} and {vary}={other!r}")
    for members in _group(found, by).values():
        xs = [e["working_set_bytes"] for e in members]
        ax.plot(xs, [e["slowdown_percent"] for e in members], marker="o", markersize=3, label=label(members[0]))
    _curve_axes(ax, [e["working_set_bytes"] for e in found], ds)
    ax.axhline(0, color="k", linewidth=0.8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, loc="best")
    metric = "on-CPU" if _time_metric(ds.rows) == "cpu_ns_per_element" else "wall-clock"
    _footnote(fig, f"Medians of the {metric} time per element of each point, paired by working set.")
    chart.set_title(fig, ds, title)
    return fig


def critical_word_figure(ds: Dataset):
    """Fig. 3.30: slowdown with the pointer in the last word of a 64-byte element vs in the first."""
    return _slowdown_figure(ds, "pointer_word", 0, 7, lambda e: str(e["order"]).capitalize(),
                            "Fig. 3.30: critical word at the end of the cache line",
                            "slowdown vs critical word at start (%)", by=("order",))


def spread_figure(ds: Dataset):
    """Fig. 6.2: slowdown when the two values added sit in the first and last line instead of one."""
    rows = [dict(r, pair_at="first line" if r.get("pair_word") == 2 else "last line") for r in ds.rows]
    view = Dataset(rows, ds.metadata)

    def label(e: Mapping[str, Any]) -> str:
        return f"{str(e['order']).capitalize()} {e['element_size_bytes'] // LINE_BYTES} CLs"

    return _slowdown_figure(view, "pair_at", "first line", "last line", label,
                            "Fig. 6.2: spreading over multiple cache lines",
                            "slowdown, values in first + last line vs one line (%)", by=("order", "element_bytes"))


def misalignment_figure(ds: Dataset):
    """Fig. 6.4: slowdown of inc with misaligned elements against aligned ones."""
    others = sorted({r.get("misalign_bytes") for r in ds.rows} - {0, None})
    other = others[0] if others else 4

    def label(e: Mapping[str, Any]) -> str:
        return f"{str(e['order']).capitalize()} {e['op']} ({e['element_size_bytes']}-byte elements, {other} bytes off)"

    return _slowdown_figure(ds, "misalign_bytes", 0, other, label, "Fig. 6.4: overhead of unaligned accesses",
                            "slowdown, misaligned vs aligned (%)")


def block_figure(ds: Dataset):
    """Fig. 3.17: random walks within blocks of pages, each curve labelled by its block size (inf: whole list)."""
    rows = []
    for row in ds.rows:
        blocks = "inf (whole list)" if row.get("order") == "random" else f"{row.get('block_pages')} pages"
        rows.append(dict(row, blocks=blocks))
    rows.sort(key=lambda r: (r["order"] == "random", _number(r.get("block_pages"))))
    view = Dataset(rows, {**ds.metadata, "param_names": ["blocks", "working_set_bytes"]})
    return latency_figure(view)


def threads_figure(ds: Dataset):
    """Figs. 3.19-3.21 and 3.22: cycles per element of the fastest thread by thread count; speed-up over one."""
    fig, (ax, right) = chart.new_figure(12.0, 4.8, ncols=2)
    rows = sorted((r for r in ds.rows if math.isfinite(_cycles(r))), key=lambda r: r["working_set_bytes"])
    if not rows:
        raise ValueError("no row of the dataset has a time per element")
    for key, members in _group(rows, ("threads",)).items():
        xs = [r["working_set_bytes"] for r in members]
        n = members[0].get("threads", 1)
        ax.plot(xs, [_cycles(r) for r in members], marker="o", markersize=3,
                label=f"#threads={n}")
    xs = [r["working_set_bytes"] for r in rows]
    base = sweep_base(ds)
    _curve_axes(ax, xs, ds, log_y=base in ("fig3_20", "fig3_21"))
    ax.set_ylabel("cycles per list element (fastest thread)")
    ax.legend(fontsize=8)
    speedups = thread_speedup(ds)
    for threads in sorted({s["threads"] for s in speedups}):
        mine = [s for s in speedups if s["threads"] == threads]
        right.plot([s["working_set_bytes"] for s in mine], [s["speedup"] for s in mine], marker="o",
                   markersize=3, label=f"#threads={threads}")
        right.axhline(threads, color="0.6", linestyle=":", linewidth=0.8)
    if speedups:
        _curve_axes(right, xs, ds)
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "one thread only: no speed-up to show", ha="center", va="center",
                   transform=right.transAxes, fontsize=9)
    right.set_ylim(0, max([4.5] + [s["speedup"] * 1.1 for s in speedups]))
    right.set_ylabel("speed-up over one thread (n x t1 / tn)")
    right.set_title("as fig. 3.22", fontsize=9)
    titles = {"fig3_19": "Fig. 3.19: sequential read access, multiple threads",
              "fig3_20": "Fig. 3.20: sequential increment, multiple threads",
              "fig3_21": "Fig. 3.21: random addnextlast, multiple threads"}
    _footnote(fig, _description_notes(ds))
    chart.set_title(fig, ds, titles.get(base, "walks by several threads"))
    return fig


def associativity_figure(ds: Dataset):
    """Fig. 6.5: cycles per element by element distance (x) and list length (y), as a heat map."""
    fig, ax = chart.new_figure(10.0, 5.2)
    rows = [r for r in ds.rows if math.isfinite(_cycles(r)) and r.get("element_distance") is not None]
    distances = sorted({int(r["element_distance"]) for r in rows})
    lengths = sorted({int(r["working_set_bytes"]) // _element_bytes(r) for r in rows})
    grid = [[math.nan] * len(distances) for _ in lengths]
    for row in rows:
        i = lengths.index(int(row["working_set_bytes"]) // _element_bytes(row))
        grid[i][distances.index(int(row["element_distance"]))] = _cycles(row)
    image = ax.pcolormesh(range(len(distances) + 1), range(len(lengths) + 1), grid, cmap="viridis",
                          shading="flat")
    fig.colorbar(image, ax=ax, label="cycles per list element")
    step = max(1, len(distances) // 16)
    ax.set_xticks([i + 0.5 for i in range(0, len(distances), step)])
    ax.set_xticklabels([str(d) for d in distances[::step]], fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(lengths))])
    ax.set_yticklabels([str(n) for n in lengths], fontsize=7)
    ax.set_xlabel(f"distance between elements (in {_element_bytes(rows[0]) if rows else 64}-byte elements)")
    ax.set_ylabel("list length (elements)")
    try:
        text = format_associativity(associativity(ds))
    except ValueError as error:
        text = str(error)
    _footnote(fig, text.replace("\n", "   |   "))
    chart.set_title(fig, ds, "Fig. 6.5: cache associativity effects")
    return fig


def numa_figure(ds: Dataset):
    """Figs. 5.3/5.4: cost of reads and writes by NUMA hops; slowdown against local memory per working set."""
    fig, (left, right) = chart.new_figure(12.0, 4.8, ncols=2)
    rows = [dict(r) for r in ds.rows if math.isfinite(_number(r.get("ns_per_element")))]
    if not rows:
        raise ValueError("no row of the dataset has a time per element")
    rank = hops(rows)
    for row in rows:
        row["hops"] = rank.get(_number(row.get("numa_distance")), 0)
    largest = max(r["working_set_bytes"] for r in rows)
    at_largest = [r for r in rows if r["working_set_bytes"] == largest and r.get("order") == "random"]
    hop_counts = sorted({r["hops"] for r in rows})
    for index, op in enumerate(("follow", "inc")):
        members = [r for r in at_largest if r.get("op") == op]
        values = [statistics.median([r["ns_per_element"] for r in members if r["hops"] == h] or [math.nan])
                  for h in hop_counts]
        bars = left.bar([h + (index - 0.5) * 0.38 for h in range(len(hop_counts))], values, 0.36,
                        label="read (follow)" if op == "follow" else "write (inc)")
        for bar, value in zip(bars, values):
            if math.isfinite(value) and math.isfinite(values[0]) and values[0] > 0 and bar is not bars[0]:
                left.annotate(f"{(value / values[0] - 1) * 100:+.0f}%", (bar.get_x() + bar.get_width() / 2,
                              bar.get_height()), xytext=(0, 3), textcoords="offset points", ha="center",
                              fontsize=8)
    left.set_xticks(range(len(hop_counts)))
    left.set_xticklabels([f"{h} hop{'s' if h != 1 else ''}" for h in hop_counts])
    left.set_ylabel(f"ns per element (random, {format_bytes(largest)})")
    left.legend(fontsize=8)
    left.grid(True, axis="y", alpha=0.3)
    remote = [h for h in hop_counts if h > 0]
    if remote:
        for h in remote:
            for op in ("follow", "inc"):
                for order in ("random", "sequential"):
                    members = [r for r in rows if r["hops"] in (0, h) and r.get("op") == op
                               and r.get("order") == order]
                    found = slowdown(members, "hops", 0, h, by=("op", "order"))
                    if found:
                        right.plot([e["working_set_bytes"] for e in found],
                                   [e["slowdown_percent"] for e in found], marker="o", markersize=3,
                                   label=f"{'read' if op == 'follow' else 'write'} {order}, {h} hop(s)")
        _curve_axes(right, [r["working_set_bytes"] for r in rows], ds)
        right.axhline(0, color="k", linewidth=0.8)
        right.set_ylabel("slowdown vs local memory (%)")
        right.legend(fontsize=7)
    else:
        nodes = sorted({int(_number(r.get("memory_node_checked"))) for r in rows
                        if math.isfinite(_number(r.get("memory_node_checked")))})
        right.axis("off")
        right.text(0.5, 0.5, f"One NUMA node with memory here (node {', '.join(map(str, nodes)) or 0}):\n"
                   "no remote memory to compare.\nThe bars show node-local cost only.",
                   ha="center", va="center", transform=right.transAxes, fontsize=10)
    _footnote(fig, _description_notes(ds))
    chart.set_title(fig, ds, "Figs. 5.3/5.4: memory 0, 1 and 2 hops away")
    return fig


def helper_figure(ds: Dataset):
    """Fig. 6.8: the latency curves, with where the helper thread ran said under them."""
    fig = latency_figure(ds)
    helpers = [r for r in ds.rows if r.get("helper_thread")]
    sibling = {r.get("helper_on_smt_sibling") for r in helpers}
    cpus = sorted({int(_number(r.get("measured_helper_cpu", r.get("helper_cpu")))) for r in helpers
                   if math.isfinite(_number(r.get("measured_helper_cpu", r.get("helper_cpu"))))})
    if sibling == {1.0} or sibling == {1}:
        text = f"helper thread on the walking CPU's SMT sibling (CPU {', '.join(map(str, cpus))}), as in the source"
    elif helpers:
        text = (f"no SMT sibling for the helper here: it ran on another core (CPU {', '.join(map(str, cpus))}); "
                "the source ran it on the sibling hyper-thread")
    else:
        text = ""
    _footnote(fig, text)
    return fig


def _counter_panel(ax, ds: Dataset, series: Sequence[tuple[str, Sequence[Mapping[str, Any]], str]],
                   ylabel: str, needed: Sequence[str]) -> None:
    """Plot (label, rows, ratio) series on ax; where the counters are missing, say which and why.

    With nothing to plot, the walk's cycles per element from the clock are
    drawn on a second axis (grey), so the shape is there without the PMU.
    """
    drawn = False
    every = [r for _, rows, _ in series for r in rows]
    for label, rows, name in series:
        points = sorted((r["working_set_bytes"], counter_ratios(r)[name]) for r in rows if name in counter_ratios(r))
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=label)
            drawn = True
    if every:
        _curve_axes(ax, [r["working_set_bytes"] for r in every], ds)
    ax.set_ylabel(ylabel)
    missing = missing_counters(every, needed)
    if missing:
        reasons: dict[str, list[str]] = {}
        for name, reason in missing.items():
            reasons.setdefault(reason, []).append(name)
        text = "Hardware counters missing:\n" + "\n".join(
            textwrap.fill(f"{', '.join(names)}: {reason}", 48) for reason, names in reasons.items())
        ax.text(0.02, 0.98, text, transform=ax.transAxes, ha="left", va="top", fontsize=7, color="darkred",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "darkred"}, in_layout=False)
    if drawn:
        ax.legend(fontsize=7, loc="center left")
    elif every:
        twin = ax.twinx()
        seen: list[int] = []
        for label, rows, _ in series:
            if id(rows) in seen:
                continue
            seen.append(id(rows))
            points = sorted((r["working_set_bytes"], _cycles(r)) for r in rows if math.isfinite(_cycles(r)))
            twin.plot([p[0] for p in points], [p[1] for p in points], linestyle="--", marker=".", alpha=0.7,
                      label=f"{rows[0].get('order', label) if rows else label}: cycles per element (clock)")
        twin.set_ylabel("cycles per element, from the clock", color="0.45", fontsize=8)
        twin.legend(fontsize=7, loc="lower right")


def _by_order(rows: Sequence[Mapping[str, Any]], order: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("order") == order]


def miss_ratio_figure(ds: Dataset):
    """Fig. 3.16: last-level cache misses per cache reference (%) for sequential and random walks."""
    fig, ax = chart.new_figure()
    rows = list(ds.rows)
    series = [(order.capitalize(), _by_order(rows, order), "llc_miss_ratio_percent")
              for order in ("sequential", "random") if _by_order(rows, order)]
    _counter_panel(ax, ds, series, "last-level cache misses / references (%)", ("cache_references", "cache_misses"))
    chart.set_title(fig, ds, "Fig. 3.16: L2d miss ratio (here the last-level cache: perf cache-misses / references)")
    return fig


def counters_figure(ds: Dataset):
    """Figs. 7.1-7.3: cycles per instruction (random); misses per instruction for random and sequential walks."""
    fig, axes = chart.new_figure(15.0, 4.8, ncols=3)
    rows = list(ds.rows)
    random_rows, sequential_rows = _by_order(rows, "random"), _by_order(rows, "sequential")
    _counter_panel(axes[0], ds, [("random", random_rows, "cycles_per_instruction")], "cycles per instruction",
                   ("cycles", "instructions"))
    axes[0].set_title("7.1: cycles per instruction (follow random)", fontsize=9)
    misses = (("L1d misses", "l1d_misses_per_instruction_percent"),
              ("LLC misses", "llc_misses_per_instruction_percent"),
              ("LLC load misses", "llc_load_misses_per_instruction_percent"),
              ("DTLB misses", "dtlb_misses_per_instruction_percent"))
    needed = ("instructions", "l1d_load_misses", "cache_misses", "llc_load_misses", "dtlb_load_misses")
    for ax, order, members, number in ((axes[1], "random", random_rows, "7.2"),
                                       (axes[2], "sequential", sequential_rows, "7.3")):
        _counter_panel(ax, ds, [(label, members, name) for label, name in misses], "misses per instruction (%)",
                       needed)
        ax.set_title(f"{number}: measured cache misses (follow {order})", fontsize=9)
    chart.set_title(fig, ds, "Figs. 7.1-7.3: what the performance counters say about the walk")
    return fig


#: The source's titles of the figures drawn as latency curves.
LATENCY_TITLES = {
    "fig3_10": "Fig. 3.10: sequential read access, NPAD=0",
    "fig3_11": "Fig. 3.11: sequential read for several sizes",
    "fig3_12": "Fig. 3.12: TLB influence for sequential read",
    "fig3_13": "Fig. 3.13: sequential read and write, NPAD=1",
    "fig3_15": "Fig. 3.15: sequential vs random read, NPAD=0",
    "fig3_17": "Fig. 3.17: page-wise randomization, NPAD=7",
    "fig6_7": "Fig. 6.7: average with prefetch, 128-byte elements (the source's NPAD=31)",
    "fig6_8": "Fig. 6.8: average with helper thread, 128-byte elements (the source's NPAD=31)",
    "fig7_9": "Fig. 7.9: random walk, NPAD=0, with 4 KiB, transparent and hugetlb 2 MiB pages",
}

LATENCY_CAPTION = (
    "Time per element of a walk through a linked list: flat while the list fits in a cache, a step up past "
    "each cache size (dashed lines). Random order pays the full latency of wherever the list lives; "
    "sequential order is hidden by the prefetcher (Drepper 3.3.2).")

#: sweep (without _quick) -> how to read its figure; other sweeps get LATENCY_CAPTION.
CAPTIONS = {
    "fig3_4": "Random writes (pad[0]++ on 64-byte elements), cycles per element on a log scale: each plateau "
              "is labelled with its level and cost; dirty lines must also be written back (Drepper 3.2).",
    "fig3_16": "Last-level cache misses per reference for sequential and random walks, from the hardware "
               "counters; where the PMU refused them the figure says which and why (Drepper 3.3.2).",
    "fig3_17": "Random order inside blocks of 60 ... 61440 pages, blocks walked in turn; inf is the whole list "
               "shuffled at once. Smaller blocks need fewer TLB entries at a time (Drepper 3.3.2).",
    "fig3_19": "Sequential reads by 1, 2 and 4 threads on one list (as many as there are CPUs), the fastest "
               "thread's cycles per element; right: the speed-up over one thread (Drepper 3.3.4).",
    "fig3_20": "Sequential increments by several threads on one list; writes saturate the memory bus sooner "
               "(Drepper 3.3.4, fig. 3.20); right: the speed-up over one thread.",
    "fig3_21": "Random addnextlast by several threads on one list, and (right) the speed-up over one thread: "
               "Drepper's figs. 3.21 and 3.22.",
    "fig3_30": "How much slower the walk is when the pointer sits in the last word of a 64-byte element "
               "rather than the first: the critical word arrives later (Drepper 3.5.2: about 0.7%).",
    "fig5_3": "Reads and writes to memory bound to each NUMA node, by hops from the walking CPU; right: the "
              "slowdown of remote memory per working set (Drepper 5.4). One node: local cost only.",
    "fig6_2": "Slowdown when the two values an element adds sit in its first and last cache line instead "
              "of one line (Drepper 6.2.1, fig. 6.2).",
    "fig6_4": "Slowdown of increments on elements placed off their alignment, so that some words straddle two "
              "cache lines (Drepper 6.2.1, fig. 6.4).",
    "fig6_5": "Cycles per element of short lists whose elements sit a fixed distance apart: where all of them "
              "fall into one L1d set and outnumber its ways, every lap misses L1d. Under the map: the L1d "
              "size and ways this implies, beside sysfs (Drepper 6.2.1, fig. 6.5).",
    "fig6_8": "Random walks with 160 cycles of work per element: no prefetch, software prefetch, and a helper "
              "thread reading ahead; under the figure, where the helper ran (Drepper 6.3.4).",
    "fig7_1": "Cycles per instruction and misses per instruction from the hardware counters, random and "
              "sequential walks (Drepper 7.1); where the PMU refused them the panels say which and why.",
}


def caption(data: Any) -> str:
    """How to read a chase dataset's figure, chosen by its sweep.

    >>> caption(Dataset([], {"sweep": "fig6_5_quick"})).startswith("Cycles per element of short lists")
    True
    """
    return CAPTIONS.get(sweep_base(data), LATENCY_CAPTION)


#: sweep (without _quick) -> its figure; other chase sweeps draw the latency curve.
FIGURES = {
    "fig3_4": random_writes_figure,
    "fig3_16": miss_ratio_figure,
    "fig3_17": block_figure,
    "fig3_19": threads_figure,
    "fig3_20": threads_figure,
    "fig3_21": threads_figure,
    "fig3_30": critical_word_figure,
    "fig5_3": numa_figure,
    "fig6_2": spread_figure,
    "fig6_4": misalignment_figure,
    "fig6_5": associativity_figure,
    "fig6_8": helper_figure,
    "fig7_1": counters_figure,
}
