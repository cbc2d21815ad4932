"""LWN, "A pair of memory-allocation improvements in 5.13" (Jonathan Corbet, 2021): bulk page
allocation, measured through its user-space analogue (the clear_fault family).
"""

from __future__ import annotations

from typing import Callable

from memlab.catalogue.claims import Direction
from memlab.catalogue.core import (
    FAULT_FULL,
    FAULT_QUICK,
    SOURCES,
    TRANSLATION,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    curve,
    largest,
)
from memlab.dataset import Dataset

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["lwn-bulk"].url)

# ---- LWN: bulk page allocation ----------------------------------------------------------

BULK_NOTE = ("User space cannot call the kernel's bulk page allocator (alloc_pages_bulk()); the "
             "nearest user-visible analogue is populating a whole range in one call (MAP_POPULATE, "
             "MADV_POPULATE_WRITE) against taking one fault per page (touch), by page kind. This "
             "figure measures that analogue, not the allocator itself.")


def _populate_ratio(mode: str, pages: str = "4k") -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        return (largest(curve(ds, "GB_per_s", "region_bytes", pages=pages, populate=mode))[1]
                / largest(curve(ds, "GB_per_s", "region_bytes", pages=pages, populate="touch"))[1])

    return measured


def _populate_over_touch(ds: Dataset) -> float:
    """The faster of MAP_POPULATE and MADV_POPULATE_WRITE over touching, 4 KiB pages, largest region."""
    small = curve(ds, "GB_per_s", "region_bytes", pages="4k", populate="touch")
    ratios = []
    for mode in ("map_populate", "madvise_populate_write"):
        try:
            other = curve(ds, "GB_per_s", "region_bytes", pages="4k", populate=mode)
        except NotMeasurable:
            continue
        common = sorted(set(small) & set(other))
        if common:
            ratios.append(other[common[-1]] / small[common[-1]])
    if not ratios:
        raise NotMeasurable("no 4 KiB region was populated both by touching and in one call")
    return max(ratios)


_populate_beats_touch = Direction(_populate_over_touch, True, "4 KiB pages, largest region: the faster of one-call "
                                  "populating / touching, GB/s", 1.13, "13% (networking) to 'close to 500%' (Sun "
                                  "RPC) for the kernel's allocator: not the same quantity")


LWN_BULK = Item(
    key="bulk-populate", source="lwn-bulk", section="Batch page allocation",
    label="Bulk allocation", title="populating a range in one call vs one fault per page",
    sweep="clear_fault.clear_fault",
    quick=FAULT_QUICK, full=FAULT_FULL,
    measured="Mel Gorman's alloc_pages_bulk() hands a caller many order-0 pages in one call: the "
             "patch set's benchmarks show 13% for high-speed networking and almost 500% for Sun RPC.",
    machine="the kernel's own benchmarks (networking, Sun RPC)",
    numbers=(
        Number("bulk over one-by-one (Sun RPC)", 6.0, "x", _populate_ratio("madvise_populate_write"),
               "'close to 500%' better, about 6x; here: MADV_POPULATE_WRITE / touch, 4 KiB pages (an analogue, "
               "not the same quantity)", compare=False, provenance=_TRANSLATED),
        Number("bulk over one-by-one (networking)", 1.13, "x", _populate_ratio("map_populate"),
               "'almost 13%'; here: MAP_POPULATE / touch, 4 KiB pages (an analogue)", compare=False,
               provenance=_TRANSLATED),
    ),
    claims=(
        Claim("Populating a region in one call is faster than faulting it in one page at a time "
              "(the user-space analogue of allocating pages in bulk).",
              "LWN, 'A pair of memory-allocation improvements in 5.13': batching amortises the per-page "
              "cost; 13% (networking) to ~500% (Sun RPC)", _populate_beats_touch),
    ),
    script="experiments/clear_fault.py", notebook="notebooks/clearing.ipynb",
    rows={"touch_offset": "first", "pause_s": 0.0},
    note=BULK_NOTE,
)


