"""Pointer chase: Drepper's list-walking experiments (seed 004, 3.3.2, 6.3, 7.5).

A working set of ``working_set_bytes`` holds elements
``struct { next; uint64_t pad[npad]; }`` (8 * (npad + 1) bytes) linked into a
circular list (one per chain) and walked by a C loop that does nothing but
follow the pointers. The result is the time per element visited:
``ns_per_element`` and ``cycles_per_element``.

Orders: ``sequential`` (element i -> i + 1), ``random`` (one cycle through
all elements, Sattolo's shuffle seeded with ``seed``), ``random_blocks``
(each block of ``block_pages`` 4 KiB pages shuffled on its own, blocks
walked in turn: fig. 3.17). Layouts: ``packed`` or ``page_per_element``
(each element on its own 4 KiB page, the TLB test of fig. 3.12; elements sit
at different cache-line offsets of their pages so that the cache sets stay
spread as in the packed layout and only the TLB differs).

>>> m = run(working_set_bytes=16 << 10, npad=0, order="sequential", repeat=1, warmup=0,
...         target_seconds=0.01)
>>> m.median("ns_per_element") > 0
True
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy

from memlab import chart, twins
from memlab._core import Kernel
from memlab.dataset import Dataset
from memlab.family import Family, check_bool, check_choice, check_int
from memlab.grid import Sweep, grid
from memlab.machine import cache_sizes, collect_caches
from memlab.measure import Measurement
from memlab.units import format_bytes, metric_label

__all__ = [
    "ORDERS",
    "LAYOUTS",
    "OPS",
    "PAGE_KINDS",
    "ChaseParams",
    "FAMILY",
    "run",
    "element_bytes",
    "element_count",
    "trace",
    "reference_successors",
    "reference_pad0",
    "cache_levels",
    "figure",
    "format_cache_levels",
    "SWEEPS",
    "fig3_10",
    "fig3_11",
    "fig3_12",
    "fig3_13",
    "fig3_15",
    "fig3_17",
    "fig6_7",
    "fig6_8",
    "fig7_9",
]

ORDERS = ("sequential", "random", "random_blocks")
LAYOUTS = ("packed", "page_per_element")
OPS = ("follow", "inc", "addnext0")
PAGE_KINDS = ("4k", "thp", "hugetlb-2m")
MAX_CHAINS = 16
PAGE_BYTES = 4096
LINE_BYTES = 64


@dataclass(frozen=True)
class ChaseParams:
    """Parameters of one chase; every combination is allowed.

    - ``working_set_bytes``: bytes of elements (the page_per_element layout
      maps one 4 KiB page per element on top and does not count the rest).
    - ``npad``: pad words per element (0, 7, 15, 31 give 8, 64, 128, 256 B).
    - ``order``, ``block_pages`` (random_blocks only), ``layout``.
    - ``op``: ``follow``; ``inc`` (pad[0]++); ``addnext0``
      (pad[0] += next->pad[0]); the last two need npad >= 1.
    - ``work_cycles``: dependent one-cycle adds per element before moving on.
    - ``prefetch_distance``: software prefetch of every line of the element
      this many elements ahead (0: off).
    - ``helper_thread``: a second thread, pinned to ``helper_cpu`` (-1: any
      other CPU), walks up to ``helper_distance`` elements ahead reading every
      line of each element.
    - ``pages``: ``4k``, ``thp`` or ``hugetlb-2m``; ``strict_pages`` makes a
      refused hugetlb request an error instead of a fallback to 4 KiB pages.
    - ``chains``: independent lists (the working set split between them)
      walked interleaved in one loop: memory-level parallelism.
    - ``seed``: the shuffle's seed. ``laps``: fixed laps per sample (0:
      adapt the step count to the sample's target duration).
    - ``check``: after each sample, count visits on two laps and report
      ``check_*`` metrics and a ``checksum`` of the list's memory.
    """

    working_set_bytes: int = 1 << 20
    npad: int = 7
    order: str = "random"
    block_pages: int = 1
    layout: str = "packed"
    op: str = "follow"
    work_cycles: int = 0
    prefetch_distance: int = 0
    helper_thread: bool = False
    helper_distance: int = 100
    helper_cpu: int = -1
    pages: str = "4k"
    strict_pages: bool = False
    chains: int = 1
    seed: int = 1
    laps: int = 0
    check: bool = False

    def __post_init__(self) -> None:
        check_int("working_set_bytes", self.working_set_bytes, 1024, 1 << 46)
        check_int("npad", self.npad, 0, 65535)
        check_choice("order", self.order, ORDERS)
        check_int("block_pages", self.block_pages, 1, 1 << 40)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("op", self.op, OPS)
        check_int("work_cycles", self.work_cycles, 0, 1_000_000)
        check_int("prefetch_distance", self.prefetch_distance, 0, 1 << 20)
        check_bool("helper_thread", self.helper_thread)
        check_int("helper_distance", self.helper_distance, 1, 1 << 24)
        check_int("helper_cpu", self.helper_cpu, -1, 1023)
        check_choice("pages", self.pages, PAGE_KINDS)
        check_bool("strict_pages", self.strict_pages)
        check_int("chains", self.chains, 1, MAX_CHAINS)
        check_int("seed", self.seed, 0, (1 << 63) - 1)
        check_int("laps", self.laps, 0, 1 << 40)
        check_bool("check", self.check)
        size = element_bytes(self.npad)
        if self.working_set_bytes < size:
            raise ValueError(
                f"working_set_bytes={self.working_set_bytes} is smaller than one element "
                f"of {size} bytes (npad={self.npad})"
            )
        if self.working_set_bytes // size < self.chains:
            raise ValueError(
                f"working_set_bytes={self.working_set_bytes} holds "
                f"{self.working_set_bytes // size} elements of {size} bytes, "
                f"fewer than chains={self.chains}"
            )
        if self.op != "follow" and self.npad < 1:
            raise ValueError(f"op={self.op} needs npad >= 1 (it writes pad[0]); npad={self.npad}")


def element_bytes(npad: int) -> int:
    """Bytes of one element: the next pointer and npad 8-byte pad words.

    >>> element_bytes(7)
    64
    """
    return 8 * (npad + 1)


def element_count(params: ChaseParams | Mapping[str, Any]) -> int:
    """Elements in the list(s): the working set's worth, equal per chain.

    >>> element_count({"working_set_bytes": 1000 * 64, "npad": 7, "chains": 3})
    999
    """
    p = FAMILY.params(params)
    per_chain = p.working_set_bytes // element_bytes(p.npad) // p.chains
    return per_chain * p.chains


def _to_core(params: ChaseParams) -> dict[str, Any]:
    return dataclasses.asdict(params)


def _derive(params: ChaseParams, values: dict[str, float]) -> dict[str, float]:
    """Per element on the CPU: the walk's time while it really ran.

    ``ns_per_element`` is wall-clock; on a shared machine the walking thread
    may be descheduled, so ``on_cpu_fraction`` (thread CPU time / elapsed)
    says how much to trust it, and ``cpu_ns_per_element`` excludes the gaps.
    """
    derived: dict[str, float] = {}
    cpu_ns, elapsed = values.get("thread_cpu_ns"), values.get("elapsed_ns")
    units = values.get("elements_per_s", 0.0) * (elapsed or 0.0) / 1e9
    if cpu_ns and elapsed and units > 0:
        derived["on_cpu_fraction"] = cpu_ns / elapsed
        derived["cpu_ns_per_element"] = cpu_ns / units
    if "build_ns" in values:
        derived["build_seconds"] = values["build_ns"] / 1e9
    return derived


def run(params: ChaseParams | dict | None = None, **options: Any) -> Measurement:
    """Walk the list; ``ns_per_element`` and ``cycles_per_element`` per sample.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    cpu, target_seconds, counters) are parameters of :class:`ChaseParams`.
    Metrics besides the per-element times: ``elements``, ``laps``,
    ``build_ns`` (time to build the list), ``huge_page_fraction`` and, with
    ``check=True``, ``check_visits_fewest``/``most`` and ``checksum``.

    >>> m = run(working_set_bytes=64 << 10, order="random", check=True, laps=2,
    ...         repeat=1, warmup=0)
    >>> m.median("check_visits_fewest") == m.median("check_visits_most") == 2
    True
    """
    return FAMILY.run(params, **options)


# ---- the list itself: trace from C, reference in Python ----------------------


def trace(params: ChaseParams | dict | None = None, **overrides: Any) -> dict[str, Any]:
    """Build the list in C, walk ``laps`` laps with the measured loops, return it.

    Returns ``successors`` (numpy uint64: the index each element links to),
    ``pad0`` (each element's pad[0] after the walk; it starts at index + 1),
    ``chain_starts`` and ``positions`` (where each chain stopped).

    >>> t = trace(working_set_bytes=4096, npad=7, order="sequential", laps=1)
    >>> t["successors"][:3].tolist()
    [1, 2, 3]
    """
    p = FAMILY.params(params, **overrides)
    n = element_count(p)
    out = numpy.zeros(2 * n, dtype=numpy.uint64)
    config = dict(_to_core(p), out=out)
    with Kernel("chase_trace", config) as kernel:
        sample = kernel.measure(target_ns=0, counters=False)
    chain = n // p.chains
    return {
        "successors": out[:n].copy(),
        "pad0": out[n:].copy(),
        "chain_starts": [c * chain for c in range(p.chains)],
        "positions": [int(sample["metrics"][f"position_{c}"]) for c in range(p.chains)],
        "steps_per_chain": int(sample["metrics"]["steps_per_chain"]),
    }


def reference_successors(params: ChaseParams | dict | None = None, **overrides: Any) -> list[int]:
    """The list the C kernel builds, computed in Python (the oracle for tests).

    Element i links to ``result[i]``. Chains own equal consecutive ranges of
    elements; random_blocks shuffles each block into a path from its first
    element to the next block's first element (:func:`memlab.twins.chase_successors`).

    >>> reference_successors(working_set_bytes=1024, npad=31, order="sequential")
    [1, 2, 3, 0]
    """
    p = FAMILY.params(params, **overrides)
    stride = element_bytes(p.npad)
    if p.layout == "page_per_element":
        stride = -(-stride // PAGE_BYTES) * PAGE_BYTES
    block = max(1, p.block_pages * PAGE_BYTES // stride)
    return twins.chase_successors(element_count(p), p.chains, p.order, block, p.seed)


def reference_pad0(params: ChaseParams | dict | None, successors: Sequence[int], laps: int) -> list[int]:
    """pad[0] of every element after ``laps`` laps of ``op``, computed in Python.

    pad[0] starts at index + 1; ``inc`` adds 1 per visit, ``addnext0`` adds
    the next element's pad[0] (modulo 2**64), ``follow`` changes nothing
    (:func:`memlab.twins.chase_pad0`).

    >>> reference_pad0({"working_set_bytes": 1024, "npad": 63, "op": "inc",
    ...                 "order": "sequential"}, [1, 0], laps=3)
    [4, 5]
    """
    p = FAMILY.params(params)
    return twins.chase_pad0(successors, p.chains, p.op, laps)


# ---- cache levels from a latency curve ---------------------------------------


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


# ---- the seed's figures as named sweeps ---------------------------------------


def _sizes(low_log2: int, high_log2: int, per_octave: int = 1) -> list[int]:
    """Working sets 2**low .. 2**high with per_octave points per doubling."""
    sizes = []
    for k in range(low_log2 * per_octave, high_log2 * per_octave + 1):
        sizes.append(int(round(2 ** (k / per_octave) / 64)) * 64)
    return sorted(set(sizes))


def _sweep(name: str, points: list[dict[str, Any]], quick: bool, description: str, repeat: int = 5) -> Sweep:
    return Sweep(
        name=name + ("_quick" if quick else ""),
        family="chase",
        points=points,
        repeat=2 if quick else repeat,
        warmup=1,
        target_seconds=0.03 if quick else 0.1,
        description=description,
    )


def fig3_10(quick: bool = False):
    """Fig. 3.10: sequential read, NPAD=0: flat at the L1 latency, low everywhere.

    >>> fig3_10(quick=True).name
    'fig3_10_quick'
    """
    sizes = _sizes(10, 20, 1)[::2] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_10", grid(working_set_bytes=sizes, npad=[0], order=["sequential"]), quick,
                  fig3_10.__doc__)


def fig3_11(quick: bool = False):
    """Fig. 3.11: sequential read for element sizes 8, 64, 128, 256 bytes.

    >>> fig3_11(quick=True).name
    'fig3_11_quick'
    """
    sizes = [1 << 12, 1 << 18, 1 << 24] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_11", grid(npad=[0, 7, 15, 31], working_set_bytes=sizes, order=["sequential"]),
                  quick, fig3_11.__doc__)


def fig3_12(quick: bool = False):
    """Fig. 3.12: TLB influence, sequential NPAD=7 packed vs one element per page.

    >>> fig3_12(quick=True).name
    'fig3_12_quick'
    """
    sizes = [1 << 10, 1 << 13, 1 << 16] if quick else _sizes(10, 24, 2)
    return _sweep("fig3_12", grid(layout=["packed", "page_per_element"], working_set_bytes=sizes,
                                  npad=[7], order=["sequential"]), quick, fig3_12.__doc__)


def fig3_13(quick: bool = False):
    """Fig. 3.13: sequential follow / inc / addnext0 with 16-byte elements (NPAD=1).

    >>> fig3_13(quick=True).name
    'fig3_13_quick'
    """
    sizes = [1 << 12, 1 << 18, 1 << 24] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_13", grid(op=list(OPS), working_set_bytes=sizes, npad=[1], order=["sequential"]),
                  quick, fig3_13.__doc__)


def fig3_15(quick: bool = False):
    """Fig. 3.15: sequential vs random read, NPAD=0: random keeps climbing.

    >>> fig3_15(quick=True).name
    'fig3_15_quick'
    """
    sizes = [1 << 12, 1 << 18, 1 << 24] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_15", grid(order=["sequential", "random"], working_set_bytes=sizes, npad=[0]),
                  quick, fig3_15.__doc__)


def fig3_17(quick: bool = False):
    """Fig. 3.17: random within blocks of k pages, NPAD=7 (k = 1 .. 2**16, and the whole list).

    >>> fig3_17(quick=True).name
    'fig3_17_quick'
    """
    if quick:
        blocks = grid(order=["random_blocks"], block_pages=[1, 64], working_set_bytes=[1 << 16, 1 << 22])
        whole = grid(order=["random"], working_set_bytes=[1 << 16, 1 << 22])
    else:
        sizes = _sizes(10, 28, 1)
        blocks = grid(order=["random_blocks"], block_pages=[2**k for k in range(0, 17, 2)] + [60],
                      working_set_bytes=sizes)
        whole = grid(order=["random"], working_set_bytes=sizes)
    points = [dict(p, npad=7) for p in blocks + whole]
    return _sweep("fig3_17", points, quick, fig3_17.__doc__)


def fig6_7(quick: bool = False):
    """Fig. 6.7: random NPAD=31 with 160 cycles of work per element, software prefetch 0 vs 5.

    >>> fig6_7(quick=True).name
    'fig6_7_quick'
    """
    sizes = [1 << 14, 1 << 22] if quick else _sizes(10, 28, 1)
    return _sweep("fig6_7", grid(prefetch_distance=[0, 5], working_set_bytes=sizes, npad=[31],
                                 order=["random"], work_cycles=[160]), quick, fig6_7.__doc__)


def fig6_8(quick: bool = False):
    """Fig. 6.8: fig. 6.7 plus a helper thread ~100 elements ahead reading every line.

    >>> fig6_8(quick=True).name
    'fig6_8_quick'
    """
    sizes = [1 << 14, 1 << 22] if quick else _sizes(10, 28, 1)
    plain = grid(prefetch_distance=[0, 5], working_set_bytes=sizes)
    helper = grid(helper_thread=[True], working_set_bytes=sizes)
    points = [dict(p, npad=31, order="random", work_cycles=160) for p in plain + helper]
    return _sweep("fig6_8", points, quick, fig6_8.__doc__)


def fig7_9(quick: bool = False):
    """Fig. 7.9: random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB (falls back if none reserved).

    >>> fig7_9(quick=True).name
    'fig7_9_quick'
    """
    sizes = [1 << 16, 1 << 20, 1 << 24] if quick else _sizes(10, 28, 1)
    return _sweep("fig7_9", grid(pages=list(PAGE_KINDS), working_set_bytes=sizes, npad=[0],
                                 order=["random"]), quick, fig7_9.__doc__)


def _quick():
    """Quick tour: random and sequential NPAD=7 from L1 to main memory (the family's "quick")."""
    return Sweep(
        name="quick",
        family="chase",
        points=grid(order=["sequential", "random"], working_set_bytes=[1 << 14, 1 << 18, 1 << 22, 1 << 26],
                    npad=[7]),
        repeat=3,
        warmup=1,
        target_seconds=0.05,
        description=_quick.__doc__,
    )


SWEEPS = {
    "fig3_10": fig3_10,
    "fig3_11": fig3_11,
    "fig3_12": fig3_12,
    "fig3_13": fig3_13,
    "fig3_15": fig3_15,
    "fig3_17": fig3_17,
    "fig6_7": fig6_7,
    "fig6_8": fig6_8,
    "fig7_9": fig7_9,
}


def _named(fn, quick: bool):
    def factory():
        return fn(quick=quick)

    factory.__doc__ = fn.__doc__
    return factory


# ---- the standard figure --------------------------------------------------------


def figure(data: Dataset | str, metric: str | None = None, x: str = "working_set_bytes"):
    """Latency per element (ns) vs working set on a log2 axis, cache sizes marked.

    One line per variant (every other parameter that varies: npad, order,
    pages ...); the vertical dashed lines are the L1d, L2 and L3 sizes of the
    machine the dataset was measured on. A right-hand axis gives cycles per
    element when the dataset has them (Drepper's figures 3.10-3.15 plot cycles).

    >>> fig = figure("results/chase-quick.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    metric = metric or ds.primary_metric(("ns_per_element",))
    fig = chart.line_figure(ds, x, metric, log2_x=True, caches=True,
                            title=f"{chart.family_of(ds)}: {metric_label(metric)} vs working set")
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


FAMILY = Family(
    name="chase",
    params_type=ChaseParams,
    core="chase",
    to_core=_to_core,
    unit="element",
    primary_metric="ns_per_element",
    derive=_derive,
    sweeps={
        "quick": _quick,
        **{name: _named(fn, False) for name, fn in SWEEPS.items()},
        **{f"{name}_quick": _named(fn, True) for name, fn in SWEEPS.items()},
    },
    description="pointer chase through a circular list (Drepper 3.3.2, 6.3, 7.5)",
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.1,
    figure=figure,
    caption="Time per element of a walk through a linked list: flat while the list fits in a cache, "
            "a step up past each cache size (dashed lines). Random order pays the full latency of "
            "wherever the list lives; sequential order is hidden by the prefetcher (Drepper 3.3.2).",
    report_columns=("cycles_per_element",),
)
