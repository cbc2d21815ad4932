"""Page clearing: how fast memory is zeroed, by the kernel and by user space.

Two experiments, after the Linux kernel's huge-page clearing patch series
(``folio_zero_user()``, ``clear_pages()``) and its cover letter, and LWN's
"A pair of memory-allocation improvements in 5.13" (Jonathan Corbet, 2021,
https://lwn.net/Articles/855226/) on bulk page allocation:

* :func:`fault` - the kernel zeroing pages on first touch. Every sample maps
  a fresh region and times making it usable (a touch per page, MAP_POPULATE
  or MADV_POPULATE_WRITE): GB/s, page faults, ns per fault and the huge-page
  coverage the kernel really gave. Populating in one call is the nearest
  user-visible analogue of the kernel's bulk page allocator, which user space
  cannot call (:data:`BULK_ALLOCATION_NOTE`).
* :func:`order` - user space re-clearing a faulted region in 4 KiB subpages
  of each 2 MiB chunk, sequentially or in the old kernel's
  ``process_huge_page()`` order (:func:`kernel_order`), with one of four store
  methods and a chosen number of bytes per clear call: GB/s.

The two are the families ``clear_fault`` and ``clear_order``; their sweeps
live here and in ``experiments/clear_*.py``.
"""

from __future__ import annotations

import array
import math
import textwrap
from dataclasses import dataclass
from typing import Any, Mapping

from memlab import chart
from memlab._core import Kernel
from memlab.dataset import Dataset
from memlab.family import Family, check_bool, check_choice, check_int, check_number, coerce_fields
from memlab.grid import Sweep, grid
from memlab.machine import collect_memory_settings, populate_write_supported
from memlab.measure import Measurement
from memlab.units import format_bytes, format_param, metric_label

__all__ = [
    "BULK_ALLOCATION_NOTE",
    "CHUNK_BYTES",
    "FAULT_FAMILY",
    "FaultParams",
    "KERNEL_TARGETS",
    "LLC_COUNTERS",
    "METHODS",
    "ORDERS",
    "ORDER_FAMILY",
    "ORDER_SETUP_SECONDS",
    "ORDER_SETUP_SECONDS_PER_BYTE",
    "OrderParams",
    "PAGE_KINDS",
    "PATCH_COMPARISONS",
    "POPULATE_MODES",
    "SUBPAGE_BYTES",
    "TOUCH_OFFSETS",
    "clear_plan",
    "fault",
    "fault_figure",
    "fault_sweep",
    "kernel_order",
    "llc_miss_ratio",
    "order",
    "order_figure",
    "order_setup_seconds",
    "order_sweep",
    "patch_figure",
    "patch_label",
    "patch_llc_miss",
    "patch_sweep",
]

SUBPAGE_BYTES = 4096
CHUNK_BYTES = 2 << 20
CHUNK_SUBPAGES = CHUNK_BYTES // SUBPAGE_BYTES
MAX_REGION_BYTES = 1 << 40
PAGE_KINDS = ("4k", "thp", "hugetlb-2m", "hugetlb-1g")
PAGE_BYTES = {"4k": SUBPAGE_BYTES, "thp": CHUNK_BYTES, "hugetlb-2m": CHUNK_BYTES, "hugetlb-1g": 1 << 30}


def hugetlb_pages_free(pages: str, root: str = "/") -> int:
    """Free pages in the hugetlb pool of a ``hugetlb-*`` page kind, as the machine facts read them
    (:func:`memlab.machine.collect_memory_settings`; 0 for another kind, or where the pool does not
    exist): a point asking for more bytes than they hold falls back to 4 KiB pages
    (``pages_obtained``).

    >>> hugetlb_pages_free("thp")
    0
    """
    if not pages.startswith("hugetlb-"):
        return 0
    facts: dict[str, Any] = {}
    collect_memory_settings(facts, root)
    pool = facts.get("hugetlb_pools", {}).get(f"hugepages-{PAGE_BYTES[pages] >> 10}kB", {})
    return int(pool.get("free_hugepages", 0))


def hugetlb_can_serve(pages: str, region_bytes: int, root: str = "/") -> bool:
    """Whether this machine's hugetlb pool of ``pages`` holds ``region_bytes`` now (True for the
    kinds that need no pool: 4k and thp)."""
    if not pages.startswith("hugetlb-"):
        return True
    return hugetlb_pages_free(pages, root) * PAGE_BYTES[pages] >= region_bytes


POPULATE_MODES = ("touch", "map_populate", "madvise_populate_write")
TOUCH_OFFSETS = ("first", "middle", "last")
ORDERS = ("sequential", "kernel", "reverse", "random")
METHODS = ("memset", "rep_stosb", "vector", "nontemporal")
MiB = 1 << 20
GiB = 1 << 30


def _check_multiple(name: str, value: int, unit: int, unit_name: str) -> None:
    if value % unit:
        raise ValueError(f"{name}={value} is not a multiple of {unit_name} ({unit} bytes)")


@dataclass(frozen=True)
class FaultParams:
    """One fault-in run: a fresh region of ``region_bytes`` per sample.

    ``pages``: 4k (MADV_NOHUGEPAGE), thp (MADV_HUGEPAGE), hugetlb-2m,
    hugetlb-1g. ``populate``: touch (one write per page of the granted size),
    map_populate, madvise_populate_write. ``touch_offset``: which subpage of
    each huge page the touch lands on (first, middle, last). ``pause_s``:
    seconds to sleep before each sample (freed memory goes back to the host
    of a VM; the first touch after a pause is slower). Every row says which
    pages and populate call it got (``pages_obtained``, ``populate_used``):
    refused hugetlb pages fall back to 4 KiB, and map_populate on THP becomes
    madvise_populate_write. ``strict_pages``: raise instead of falling back
    (OSError for refused or missing huge pages, ValueError for THP with
    map_populate).
    """

    region_bytes: int = 256 * MiB
    pages: str = "thp"
    populate: str = "touch"
    touch_offset: str = "first"
    pause_s: float = 0.0
    strict_pages: bool = False

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("region_bytes", self.region_bytes, SUBPAGE_BYTES, MAX_REGION_BYTES)
        check_choice("pages", self.pages, PAGE_KINDS)
        check_choice("populate", self.populate, POPULATE_MODES)
        check_choice("touch_offset", self.touch_offset, TOUCH_OFFSETS)
        object.__setattr__(self, "pause_s", check_number("pause_s", self.pause_s, 0.0, 3600.0))
        check_bool("strict_pages", self.strict_pages)
        if self.strict_pages and self.pages == "thp" and self.populate == "map_populate":
            raise ValueError("populate='map_populate' cannot populate THP pages with strict_pages=True (mmap "
                             "populates before madvise(MADV_HUGEPAGE) takes effect; without strict_pages it is "
                             "replaced by madvise_populate_write, and populate_used says so)")
        page = PAGE_BYTES[self.pages]
        _check_multiple("region_bytes", self.region_bytes, page, f"the {self.pages} page size")


@dataclass(frozen=True)
class OrderParams:
    """One re-clearing run over a region of ``region_bytes``, faulted once.

    ``order``: how the clear calls visit each 2 MiB chunk (sequential, kernel
    = the old process_huge_page() order converging on ``target_subpage``,
    reverse, random with ``seed``). ``method``: memset, rep_stosb, vector
    (the widest stores the CPU has), nontemporal (streaming stores, sfence
    after each call). ``extent_bytes``: bytes per clear call; below 2 MiB it
    must divide the chunk, and the order permutes the extents of a chunk; from
    2 MiB on, calls cover whole chunks in address order. ``check``: dirty the
    region before every sample and count the bytes left non-zero after it.
    ``baseline_order`` (and ``baseline_extent_bytes``, 0: the same extent):
    after the sample's passes, time as many passes of this second plan and
    report ``baseline_GB_per_s`` and ``ratio_to_baseline`` (and the same
    from CPU time and median chunk times: ``cpu_ratio_to_baseline``,
    ``median_chunk_ratio_to_baseline``), a ratio measured within the same
    fraction of a second.
    """

    region_bytes: int = 1 * GiB
    pages: str = "thp"
    order: str = "sequential"
    method: str = "memset"
    extent_bytes: int = SUBPAGE_BYTES
    target_subpage: int = 0
    seed: int = 1
    check: bool = False
    baseline_order: str = "none"
    baseline_extent_bytes: int = 0
    strict_pages: bool = False

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("region_bytes", self.region_bytes, CHUNK_BYTES, MAX_REGION_BYTES)
        check_choice("pages", self.pages, PAGE_KINDS)
        check_choice("order", self.order, ORDERS)
        check_choice("method", self.method, METHODS)
        check_int("extent_bytes", self.extent_bytes, SUBPAGE_BYTES, MAX_REGION_BYTES)
        check_int("target_subpage", self.target_subpage, 0, CHUNK_SUBPAGES - 1)
        check_int("seed", self.seed, 0, 2**63 - 1)
        check_bool("check", self.check)
        check_choice("baseline_order", self.baseline_order, ("none",) + ORDERS)
        check_int("baseline_extent_bytes", self.baseline_extent_bytes, 0, MAX_REGION_BYTES)
        check_bool("strict_pages", self.strict_pages)
        _check_plan(self.region_bytes, self.extent_bytes)
        if self.baseline_extent_bytes:
            if self.baseline_order == "none":
                raise ValueError(
                    f"baseline_extent_bytes={self.baseline_extent_bytes} needs a baseline_order"
                )
            _check_plan(self.region_bytes, self.baseline_extent_bytes, "baseline_extent_bytes")
        page = PAGE_BYTES[self.pages]
        _check_multiple("region_bytes", self.region_bytes, page, f"the {self.pages} page size")


def _check_plan(region_bytes: int, extent_bytes: int, name: str = "extent_bytes") -> None:
    _check_multiple("region_bytes", region_bytes, CHUNK_BYTES, "the 2 MiB chunk")
    _check_multiple(name, extent_bytes, SUBPAGE_BYTES, "the 4 KiB subpage")
    if extent_bytes > region_bytes:
        raise ValueError(f"{name}={extent_bytes} is larger than region_bytes={region_bytes}")
    if extent_bytes < CHUNK_BYTES and CHUNK_BYTES % extent_bytes:
        raise ValueError(
            f"{name}={extent_bytes} must divide the 2 MiB chunk "
            "(a power of two from 4096 to 2097152) or be at least 2 MiB"
        )


def fault(params: FaultParams | Mapping[str, Any] | None = None, **options: Any) -> Measurement:
    """Time the kernel making fresh memory usable; GB_per_s of region made usable.

    Each sample maps ``region_bytes`` anew and times its population. Metrics:
    ``GB_per_s`` (of the bytes resident afterwards, from mincore: a THP touch
    that got a 4 KiB page makes 4 KiB usable, not 2 MiB), ``resident_fraction``,
    ``page_faults`` (the software page-fault counter: faults
    the CPU raised), ``faults_handled`` (the thread's minor faults from
    getrusage, which also counts the faults a populate call resolves),
    ``ns_per_fault`` (per handled fault), ``huge_fraction`` (share of the
    region on huge pages, from the page tables), ``faults_per_page``
    (page_faults per page of the granted size), ``cpu_GB_per_s`` (over the
    thread's CPU time, user + kernel: leaves out preemption on a busy
    machine) and ``pause_before_s`` (time since the previous sample freed
    its region). Keywords not in
    :class:`FaultParams` go to :meth:`memlab.family.Family.run` (repeat,
    warmup: one warm-up sample by default).

    >>> m = fault(region_bytes=16 << 20, pages="4k", repeat=1)
    >>> m.median("faults_handled") >= 4096
    True
    """
    return FAULT_FAMILY.run(params, **options)


def order(params: OrderParams | Mapping[str, Any] | None = None, **options: Any) -> Measurement:
    """Time re-clearing a faulted region in a chosen order; GB_per_s cleared.

    The region is faulted and dirtied once; every sample clears all of it
    (as many passes as fill the sample's target time). Metrics:
    ``GB_per_s``, ``median_chunk_GB_per_s`` (from the median time of the
    2 MiB groups of calls: the rate undisturbed by preemption or a neighbour
    taking the memory bus, when groups are short), ``cpu_GB_per_s`` (over
    the thread's CPU time: without preemption), ``ns_per_subpage`` (per
    4 KiB), ``calls_per_pass``,
    ``store_bytes`` (width of the vector stores used; 1 for rep stosb, 0 for
    libc memset), ``huge_fraction``, ``nonzero_bytes`` (with check=True), and
    the cache counters where the PMU gives them.

    >>> m = order(region_bytes=8 << 20, order="kernel", method="rep_stosb",
    ...           check=True, repeat=1, warmup=0)
    >>> m.median("nonzero_bytes")
    0.0
    """
    return ORDER_FAMILY.run(params, **options)


def kernel_order(n_subpages: int, target: int) -> list[int]:
    """The old kernel's ``process_huge_page()`` clearing order, as subpage indices.

    For a huge page of ``n_subpages`` subpages faulted at subpage ``target``:
    the far end first, then pairs from both sides converging on the target,
    which is cleared last (computed by the C core, the order clear_order uses).

    >>> kernel_order(8, 5)
    [0, 1, 2, 7, 3, 6, 4, 5]
    """
    n_subpages = check_int("n_subpages", n_subpages, 1, 1 << 30)
    target = check_int("target", target, 0, n_subpages - 1)
    out = array.array("I", bytes(4 * n_subpages))
    config = {"n_subpages": n_subpages, "target": target, "out": out}
    with Kernel("clear_kernel_order", config) as kernel:
        kernel.measure(target_ns=0, counters=False)
    return out.tolist()


def clear_plan(
    region_bytes: int, order: str = "sequential", extent_bytes: int = SUBPAGE_BYTES,
    target_subpage: int = 0, seed: int = 1,
) -> list[int]:
    """Byte offsets of the clear calls :func:`order` makes in one pass, in order.

    >>> clear_plan(2 << 20, "kernel", extent_bytes=512 << 10, target_subpage=0)
    [1572864, 1048576, 524288, 0]
    """
    params = OrderParams(
        region_bytes=region_bytes, order=order, extent_bytes=extent_bytes,
        target_subpage=target_subpage, seed=seed,
    )
    calls = -(-region_bytes // extent_bytes)
    out = array.array("Q", bytes(8 * calls))
    config = {
        "region_bytes": params.region_bytes, "order": params.order, "extent_bytes": params.extent_bytes,
        "target_subpage": params.target_subpage, "seed": params.seed, "out": out,
    }
    with Kernel("clear_plan", config) as kernel:
        kernel.measure(target_ns=0, counters=False)
    return out.tolist()


def _fault_derive(params: FaultParams, values: dict[str, float]) -> dict[str, float]:
    page_bytes = values.get("granted_page_bytes", 0.0)
    derived: dict[str, float] = {}
    if page_bytes > 0:
        pages = params.region_bytes / page_bytes
        derived["pages_in_region"] = pages
        if values.get("page_faults", -1.0) >= 0:
            derived["faults_per_page"] = values["page_faults"] / pages
    return derived


def llc_miss_ratio(cache_misses: float, cache_references: float) -> float:
    """The LLC miss ratio the clearing patch quotes (10.96% -> 0.73%): cache misses over cache
    references (perf's ``cache-misses`` / ``cache-references``, which count last-level cache
    accesses), as a fraction; NaN when there were no references. (Counts the PMU multiplexed
    are scaled up separately, so a ratio may come out slightly above 1.)

    >>> llc_miss_ratio(1096, 10000), llc_miss_ratio(73, 10000)
    (0.1096, 0.0073)
    """
    misses = check_number("cache_misses", cache_misses, 0.0)
    references = check_number("cache_references", cache_references, 0.0)
    if references == 0:
        return math.nan
    return misses / references


def _order_derive(params: OrderParams, values: dict[str, float]) -> dict[str, float]:
    """LLC miss ratios of the plan's passes and of the baseline's, where the PMU counted both."""
    derived: dict[str, float] = {}
    sides = (("llc_miss_ratio", "counter_cache_misses", "counter_cache_references"),
             ("baseline_llc_miss_ratio", "baseline_cache_misses", "baseline_cache_references"))
    for name, misses, references in sides:
        if misses in values and references in values:
            derived[name] = llc_miss_ratio(values[misses], values[references])
    return derived


#: The counters the LLC miss ratio is computed from.
LLC_COUNTERS = ("cache_misses", "cache_references")


def patch_llc_miss(row: Mapping[str, Any]) -> dict[str, Any]:
    """The LLC miss ratio of a clear_order row's order and of its baseline's, or why there is none.

    Returns ``{"llc_miss_ratio": new, "baseline_llc_miss_ratio": old}`` where the PMU counted
    both, else ``{"not_measurable": reason}`` (the counters' own reason: no PMU in a VM, not
    permitted, not requested), the form of "not measurable here" a report shows.

    >>> patch_llc_miss({"llc_miss_ratio": 0.0073, "baseline_llc_miss_ratio": 0.1096})
    {'llc_miss_ratio': 0.0073, 'baseline_llc_miss_ratio': 0.1096}
    >>> patch_llc_miss({"counters_missing": {"cache_misses": "no such PMU (ENODEV)"}})
    {'not_measurable': 'not measurable here: cache_misses: no such PMU (ENODEV)'}
    """
    new, old = row.get("llc_miss_ratio"), row.get("baseline_llc_miss_ratio")
    if chart.finite(new) and chart.finite(old):
        return {"llc_miss_ratio": float(new), "baseline_llc_miss_ratio": float(old)}
    missing = row.get("counters_missing")
    reasons = [f"{name}: {missing[name]}" for name in LLC_COUNTERS if isinstance(missing, Mapping) and name in missing]
    if reasons:
        return {"not_measurable": "not measurable here: " + "; ".join(reasons)}
    if row.get("baseline_order") in (None, "", "none"):
        return {"not_measurable": "not measurable here: the row has no baseline order to compare with"}
    return {"not_measurable": "not measurable here: the run recorded no cache counts of one of the orders"}


# ---- named sweeps -------------------------------------------------------------

FAULT_SIZES = (64 * MiB, 256 * MiB, 1 * GiB, 4 * GiB)
ORDER_EXTENTS = (4 * 1024, 64 * 1024, 2 * MiB, 32 * MiB)


def fault_sweep(quick: bool = False, name: str | None = None) -> Sweep:
    """clear_fault: every page kind x populate mode over 64 MiB ... 4 GiB,
    the touch offset within THP pages, and the pause before each sample.
    ``name`` defaults to ``clear_fault`` (``clear_fault_quick`` with ``quick``)."""
    # MADV_POPULATE_WRITE came with Linux 5.14: older kernels measure the other modes.
    populate_modes = [mode for mode in POPULATE_MODES
                      if mode != "madvise_populate_write" or populate_write_supported()]
    if quick:
        points = grid(region_bytes=[64 * MiB], pages=["4k", "thp"], populate=populate_modes)
        points += grid(region_bytes=[64 * MiB], pages=["thp"], touch_offset=["middle", "last"])
        points += grid(region_bytes=[64 * MiB], pages=["thp"], pause_s=[1.0])
        return Sweep(name=name or "clear_fault_quick", family="clear_fault", points=points, repeat=3, warmup=1,
                     description="fault-in speed, 64 MiB, 4k/THP, every populate mode")
    points = [
        point
        for point in grid(region_bytes=list(FAULT_SIZES), pages=list(PAGE_KINDS), populate=populate_modes)
        if point["region_bytes"] % PAGE_BYTES[point["pages"]] == 0
    ]
    points += grid(region_bytes=[1 * GiB], pages=["thp"], touch_offset=["middle", "last"])
    points += grid(region_bytes=[1 * GiB], pages=["thp", "4k"], pause_s=[1.0, 5.0])
    return Sweep(name=name or "clear_fault", family="clear_fault", points=points, repeat=5, warmup=1,
                 description="kernel zeroing on first touch: page kind x populate mode x size; "
                             "touch offset; pause before each sample")


#: Subpages the old kernel order converges on: 0 (where it equals the reverse order), the middle
#: (pairs from both ends converging, the 0,1,2,7,3,6,4,5 pattern of an 8-subpage page faulted at
#: subpage 5) and the last (where it is almost sequential).
KERNEL_TARGETS = (0, CHUNK_SUBPAGES // 2, CHUNK_SUBPAGES - 1)


def order_sweep(quick: bool = False, name: str | None = None) -> Sweep:
    """clear_order: order x method x extent on THP and 4 KiB pages, 1 GiB; the kernel order at
    each of :data:`KERNEL_TARGETS`. ``name`` defaults to ``clear_order`` (``clear_order_quick``
    with ``quick``)."""
    if quick:
        points = grid(region_bytes=[64 * MiB], pages=["thp"], order=["sequential"], method=list(METHODS),
                      extent_bytes=[4096, 2 * MiB])
        points += grid(region_bytes=[64 * MiB], pages=["thp"], order=["kernel"], method=list(METHODS),
                       extent_bytes=[4096], target_subpage=list(KERNEL_TARGETS))
        return Sweep(name=name or "clear_order_quick", family="clear_order", points=points, repeat=3, warmup=1,
                     target_seconds=0.05,
                     description="re-clearing, 64 MiB THP, sequential x extent and the kernel order at three "
                                 "targets, per method")
    small = [e for e in ORDER_EXTENTS if e < CHUNK_BYTES]
    large = [e for e in ORDER_EXTENTS if e >= CHUNK_BYTES]
    others = [o for o in ORDERS if o != "kernel"]
    points = grid(region_bytes=[1 * GiB], pages=["thp", "4k"], order=others, method=list(METHODS),
                  extent_bytes=small)
    points += grid(region_bytes=[1 * GiB], pages=["thp", "4k"], order=["kernel"], method=list(METHODS),
                   extent_bytes=small, target_subpage=list(KERNEL_TARGETS))
    # Extents of whole chunks leave nothing to order.
    points += grid(region_bytes=[1 * GiB], pages=["thp", "4k"], order=["sequential"], method=list(METHODS),
                   extent_bytes=large)
    return Sweep(name=name or "clear_order", family="clear_order", points=points, repeat=5, warmup=1,
                 target_seconds=0.2, description="user-space re-clearing of a faulted region: order x method x extent")


# (label, order, extent_bytes, baseline_order, baseline_extent_bytes): the
# comparisons of the clearing patch series' cover letter, each measured as an interleaved ratio.
PATCH_COMPARISONS = (
    ("sequential 2 MiB / kernel order 4 KiB", "sequential", 2 * MiB, "kernel", 4096),
    ("sequential 4 KiB / kernel order 4 KiB", "sequential", 4096, "kernel", 4096),
    ("2 MiB / 4 KiB calls (sequential)", "sequential", 2 * MiB, "sequential", 4096),
    ("32 MiB / 2 MiB calls (1 GiB-page style)", "sequential", 32 * MiB, "sequential", 2 * MiB),
)


def patch_sweep(quick: bool = False, name: str | None = None) -> Sweep:
    """clear_patch: the clearing patch series' comparison in one table - sequential vs the old
    kernel order (converging on each of :data:`KERNEL_TARGETS`), 4 KiB vs 2 MiB
    calls, 2 MiB vs 32 MiB (1 GiB-page style) extents, per method; each point
    clears one way and its baseline the other within every sample, so both
    rates (``GB_per_s``, ``baseline_GB_per_s``) and their ratio
    (``ratio_to_baseline``) come from one interleaved run, and the LLC miss
    ratio of each where the PMU counts; ``experiments/clear_patch.py`` prints
    the table. ``name`` defaults to ``clear_patch`` (``clear_patch_quick``)."""
    region = 256 * MiB if quick else 1 * GiB
    points = []
    for method in METHODS:
        for _, order, extent, baseline, baseline_extent in PATCH_COMPARISONS:
            for target in KERNEL_TARGETS if baseline == "kernel" else [0]:
                points.append({
                    "region_bytes": region, "pages": "thp", "method": method, "order": order,
                    "extent_bytes": extent, "target_subpage": target, "baseline_order": baseline,
                    "baseline_extent_bytes": baseline_extent,
                })
    return Sweep(name=name or ("clear_patch_quick" if quick else "clear_patch"), family="clear_order",
                 points=points, repeat=3 if quick else 11, warmup=1, target_seconds=0.05 if quick else 0.2,
                 description="the clearing patches: kernel order (targets 0, 256, 511) vs sequential, 4 KiB vs 2 MiB vs "
                             "32 MiB extents, both rates and their ratio from interleaved passes")


# ---- the standard figures -----------------------------------------------------


#: Under the clear_fault figure: what the populate comparison is and is not (Jonathan Corbet, "A pair
#: of memory-allocation improvements in 5.13", LWN 2021, https://lwn.net/Articles/855226/, on
#: alloc_pages_bulk()).
BULK_ALLOCATION_NOTE = ("user space cannot call the kernel's bulk page allocator (alloc_pages_bulk()); "
                        "MAP_POPULATE / MADV_POPULATE_WRITE vs one fault per page (touch) is the nearest "
                        "user-visible analogue")


def _fault_panel(row: Mapping[str, Any]) -> tuple[str, str]:
    """(panel, setting) of a fault row: what its point varies against the plain first-touch run."""
    if row.get("pause_s"):
        return "pause first", f"{format_param('pause_s', row.get('pause_s'))} s"
    if row.get("touch_offset") not in (None, "first"):
        return "subpage touched", str(row.get("touch_offset"))
    asked, used = row.get("populate"), row.get("populate_used")
    if used not in (None, "", "none", asked):  # the kernel lacked the call asked for
        return "populate mode", f"{asked}\npopulate_used={used}"
    return "populate mode", str(asked)


def fault_figure(data: Dataset | str, metric: str = "GB_per_s"):
    """Kernel zeroing on first touch: GB/s made usable, one bar colour per page kind obtained (a
    label says what was asked where the kernel gave something else).

    One panel per question the sweep asks: the populate mode (touch,
    MAP_POPULATE, MADV_POPULATE_WRITE), which subpage of a huge page is
    touched first, and a pause before each sample. The number over a bar is
    the page faults taken per page of the region (1: one fault per page;
    0: the pages came populated). The populate calls are the nearest
    user-visible analogue of the kernel's bulk page allocator, which user
    space cannot call (:data:`BULK_ALLOCATION_NOTE`, printed under the title).

    >>> fig = fault_figure("memlab-tour/clear_fault.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = []
    for row in chart.rows_with(ds, metric):
        panel, setting = _fault_panel(row)
        rows.append({**row, "panel": panel, "setting": setting})
    names = ["panel", "setting", *[n for n in ds.param_names if n not in ("populate", "touch_offset", "pause_s")]]
    view = Dataset(rows, {**ds.metadata, "param_names": names})

    def faults(row: dict) -> str:
        value = row.get("faults_per_page")
        return f"{value:.2g}" if chart.finite(value) else ""

    fig = chart.bars_figure(view, metric, category=["setting"], series=["pages", "pages_obtained"],
                            facet=["panel", "region_bytes"], annotate=faults,
                            facet_title=lambda row: " · ".join(
                                [row["panel"]] + ([format_param("region_bytes", row["region_bytes"])]
                                                  if len({repr(r.get("region_bytes")) for r in rows}) > 1 else [])),
                            note="number over a bar: page faults taken per page of the region",
                            title="page faults: GB/s of memory made usable\n"
                                  + textwrap.fill(BULK_ALLOCATION_NOTE, 100))
    for ax in fig.axes:
        ax.set_xlabel("")
    return fig


def order_figure(data: Dataset | str, metric: str = "GB_per_s"):
    """User-space clearing: GB/s by clearing order (x) and store method (bars), one panel per extent.

    The huge-page clearing patches compare the old kernel order with
    sequential clearing; here every method (memset, rep stosb, vector,
    non-temporal) is one colour, and the kernel order is shown at each
    subpage it converged on. Rows measured against a baseline (the
    ``clear_patch`` sweep) give :func:`patch_figure` instead.

    >>> fig = order_figure("memlab-tour/clear_order.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    if any(row.get("baseline_order") not in (None, "", "none") and chart.finite(row.get("baseline_GB_per_s"))
           for row in ds.rows):
        return patch_figure(ds)
    return chart.bars_figure(ds, metric, category=["order", "target_subpage"], series=["method"],
                             facet=["extent_bytes", "pages", "pages_obtained", "region_bytes"],
                             title="clearing: GB/s by order x method" + _every_bar(ds))


def _every_bar(ds: Dataset) -> str:
    """What every bar of the order figure shares, as a line under its title: a legend or an axis
    only names what varies, so a quick sweep of one order and one method (the extent batching)
    would not say which it measured, nor the region's size.

    >>> _every_bar(Dataset([{"order": "sequential", "method": "rep_stosb", "pages": "thp",
    ...                      "region_bytes": 256 << 20, "extent_bytes": e} for e in (4096, 2 << 20)]))
    '\\nevery bar: order=sequential, method=rep_stosb,\\npages=thp, region_bytes=256 MiB'
    """
    shared = []
    for name in ("order", "method", "pages", "region_bytes"):
        values = {repr(row.get(name)) for row in ds.rows}
        if len(values) == 1 and ds.rows and ds.rows[0].get(name) is not None:
            shared.append(f"{name}={format_param(name, ds.rows[0][name])}")
    return "\n" + textwrap.fill(f"every bar: {', '.join(shared)}", 56) if shared else ""  # a 6 in figure's width


def patch_label(row: Mapping[str, Any]) -> tuple[str, str]:
    """How a clear_patch row's two plans read: (the baseline, "before"; the order, "after").

    >>> patch_label({"order": "sequential", "extent_bytes": 2 << 20, "baseline_order": "kernel",
    ...              "baseline_extent_bytes": 4096, "target_subpage": 256})
    ('kernel order -> 256, 4 KiB calls', 'sequential, 2 MiB calls')
    """
    def plan(order: str, extent: Any) -> str:
        name = f"kernel order -> {int(row.get('target_subpage') or 0)}" if order == "kernel" else str(order)
        return f"{name}, {format_bytes(int(extent))} calls"

    baseline_extent = row.get("baseline_extent_bytes") or row.get("extent_bytes")
    return plan(str(row.get("baseline_order")), baseline_extent), plan(str(row.get("order")), row.get("extent_bytes"))


def patch_figure(data: Dataset | str):
    """The clearing patch comparison: for each pair of plans measured interleaved, the GB/s of the
    old one (grey) and of the new one (coloured) side by side, the ratio new / old over them and,
    where the PMU counted, the LLC miss ratio of each; one panel per store method.

    >>> fig = patch_figure("results/clear_order-clear_patch.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = [r for r in chart.rows_with(ds, "GB_per_s") if chart.finite(r.get("baseline_GB_per_s"))]
    if not rows:
        return chart.generic_figure(ds)
    methods = [m for m in METHODS if any(r.get("method") == m for r in rows)]
    methods += sorted({str(r.get("method")) for r in rows} - set(methods))
    pairs = list(dict.fromkeys(patch_label(r) for r in rows))
    fig, axes = chart.new_figure(max(7.0, 3.2 * len(methods)), 2.0 + 0.55 * len(pairs), ncols=len(methods),
                                 sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods):
        members = {patch_label(r): r for r in rows if r.get("method") == method}
        for index, pair in enumerate(pairs):
            row = members.get(pair)
            if row is None:
                continue
            old, new = float(row["baseline_GB_per_s"]), float(row["GB_per_s"])
            ax.barh(index + 0.2, old, 0.38, color="0.6", label="before (the old plan)" if index == 0 else None)
            ax.barh(index - 0.2, new, 0.38, color="C0", label="after (the new plan)" if index == 0 else None)
            text = f"x{new / old:.2f}" if old > 0 else ""
            llc = patch_llc_miss(row)
            if "llc_miss_ratio" in llc:
                text += f"  LLC miss {llc['baseline_llc_miss_ratio']:.2%} -> {llc['llc_miss_ratio']:.2%}"
            ax.annotate(text, (max(old, new), index), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=7)
        ax.set_title(f"method: {method}", fontsize=9)
        ax.set_xlabel(metric_label("GB_per_s"))
        ax.grid(True, axis="x", alpha=0.3)
        ax.margins(x=0.35)
    axes[0][0].set_yticks(range(len(pairs)))
    axes[0][0].set_yticklabels([f"{new}\nvs {old}" for old, new in pairs], fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=7, loc="lower right")
    reasons = {patch_llc_miss(r).get("not_measurable") for r in rows} - {None}
    note = "\n" + textwrap.fill(f"LLC miss ratio {sorted(reasons)[0]}", 110) if reasons else ""
    chart.set_title(fig, ds, "clearing patch: old plan vs new plan, measured interleaved, and their ratio" + note)
    return fig


#: Seconds a clear_fault sample spends per byte of its region, for estimates: faulting in 4 KiB
#: pages one touch at a time, populating them in one call, and huge pages (THP, or a hugetlb pool
#: that holds the region). Measured on a 2-vCPU Zen 3 guest (kernel 6.18), 64 MiB-4 GiB: 4 KiB
#: touch 1.0-1.3 GB/s, populate 1.9-2.5 GB/s, THP 9-11 GB/s.
FAULT_SECONDS_PER_BYTE = {"touch": 0.85e-9, "populate": 0.47e-9, "huge": 0.105e-9}


def fault_sample_seconds(params: FaultParams | Mapping[str, Any], target: float) -> float:
    """About how long one clear_fault sample takes (seconds): at least the target, at least one
    fault of the whole region at :data:`FAULT_SECONDS_PER_BYTE`, and its pause.

    >>> round(fault_sample_seconds({"region_bytes": 1 << 30, "pages": "4k", "populate": "touch"}, 0.1), 2)
    0.91
    >>> round(fault_sample_seconds({"region_bytes": 64 << 20, "pages": "thp", "pause_s": 1.0}, 0.1), 2)
    1.1
    """
    p = FAULT_FAMILY.params(params)
    huge = p.pages == "thp" or (p.pages.startswith("hugetlb-") and hugetlb_can_serve(p.pages, p.region_bytes))
    kind = "huge" if huge else "touch" if p.populate == "touch" else "populate"
    return max(target, FAULT_SECONDS_PER_BYTE[kind] * p.region_bytes) + p.pause_s


FAULT_FAMILY = Family(
    name="clear_fault",
    params_type=FaultParams,
    core="clear_fault",
    unit="fault",
    primary_metric="GB_per_s",
    derive=_fault_derive,
    sweeps={
        "quick": lambda: fault_sweep(quick=True, name="quick"),
        "clear_fault": fault_sweep,
        "clear_fault_quick": lambda: fault_sweep(quick=True),
    },
    description="kernel zeroing on first touch: GB/s made usable, faults, huge-page coverage",
    default_repeat=5,
    default_warmup=1,
    figure=fault_figure,
    sample_seconds=fault_sample_seconds,
    caption="The kernel zeroing pages on first touch: GB/s of memory made usable and the page "
            "faults taken per page (the huge-page clearing patches). MAP_POPULATE and "
            "MADV_POPULATE_WRITE populate a range in one call: the nearest user-space analogue of the "
            "kernel's bulk page allocator, which user space cannot call.",
    report_columns=("faults_per_page", "huge_fraction"),
)

#: A clear_order run's cost beyond its samples, for estimates: a fixed part and a part per byte of
#: the region (faulting it, dirtying it, the untimed pass that sizes the samples). Measured in the
#: run loop on a 2-vCPU AMD EPYC guest (family 25 model 1), one sample of 1 ms, load 2.5-3.7:
#: 8-26 ms at 16 MiB, 236-341 ms at 256 MiB and 0.79-1.6 s at 1 GiB (THP and 4 KiB pages).
ORDER_SETUP_SECONDS = 0.01
ORDER_SETUP_SECONDS_PER_BYTE = 1.3e-9


def order_setup_seconds(params: OrderParams | Mapping[str, Any]) -> float:
    """About how long a run of a clear_order point takes beyond its samples (seconds).

    >>> round(order_setup_seconds({"region_bytes": 1 << 30}), 2)
    1.41
    """
    p = ORDER_FAMILY.params(params)
    return ORDER_SETUP_SECONDS + ORDER_SETUP_SECONDS_PER_BYTE * p.region_bytes


ORDER_FAMILY = Family(
    name="clear_order",
    params_type=OrderParams,
    core="clear_order",
    unit="subpage",
    primary_metric="GB_per_s",
    sweeps={
        "quick": lambda: order_sweep(quick=True, name="quick"),
        "clear_order": order_sweep,
        "clear_order_quick": lambda: order_sweep(quick=True),
        "clear_patch": patch_sweep,
        "clear_patch_quick": lambda: patch_sweep(quick=True),
    },
    description="user-space re-clearing of a faulted region in a chosen order, method and extent",
    default_repeat=5,
    default_warmup=1,
    derive=_order_derive,
    figure=order_figure,
    caption="User space clearing 2 MiB chunks in 4 KiB pieces in the old kernel order (converging on "
            "subpage 0, 256 or 511) or sequentially, with four store methods (the huge-page clearing "
            "patches). Rows measured against a baseline show both rates, measured interleaved, their "
            "ratio and, where the PMU counts, the LLC miss ratio of each (the patch: 10.96% -> 0.73%).",
    report_columns=("ns_per_subpage", "huge_fraction"),
    setup_seconds=lambda params: order_setup_seconds(params),
)

FAMILY = ORDER_FAMILY
FAMILIES = (FAULT_FAMILY, ORDER_FAMILY)
