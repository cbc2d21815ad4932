"""Memory regions: map one, populate it, and see which pages the kernel gave.

The building block of the chase, pipe and clearing families, measured on its
own: the time to populate, page faults taken and huge-page coverage.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlab import chart
from memlab.dataset import Dataset
from memlab.family import Family, check_bool, check_choice, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement

__all__ = ["PAGE_KINDS", "POPULATE_MODES", "RegionParams", "FAMILY", "figure", "run"]

PAGE_KINDS = ("4k", "thp", "hugetlb-2m", "hugetlb-1g")
POPULATE_MODES = ("none", "touch", "map_populate", "madvise_populate_write")


@dataclass(frozen=True)
class RegionParams:
    """A region of ``region_bytes`` with page kind ``pages`` and populate mode ``populate``.

    What the kernel gave is in every row: ``pages_requested``/``pages_obtained``
    and ``populate_requested``/``populate_used`` (docs/dataset.md). A refused
    hugetlb request falls back to 4 KiB pages, and MAP_POPULATE asked of THP
    becomes MADV_POPULATE_WRITE; ``strict_pages=True`` raises instead (OSError
    for refused or missing huge pages, ValueError for THP with map_populate).
    """

    region_bytes: int = 64 << 20
    pages: str = "4k"
    populate: str = "touch"
    strict_pages: bool = False

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("region_bytes", self.region_bytes, 4096)
        check_choice("pages", self.pages, PAGE_KINDS)
        check_choice("populate", self.populate, POPULATE_MODES)
        check_bool("strict_pages", self.strict_pages)
        if self.strict_pages and self.pages == "thp" and self.populate == "map_populate":
            raise ValueError("populate='map_populate' cannot populate THP pages with strict_pages=True (mmap "
                             "populates before madvise(MADV_HUGEPAGE) takes effect; without strict_pages it is "
                             "replaced by madvise_populate_write, and populate_used says so)")


def run(params: RegionParams | dict | None = None, **options) -> Measurement:
    """Map and populate a region; GB_per_s made usable, faults and huge_fraction.

    >>> m = run(region_bytes=8 << 20, pages="4k", populate="touch", repeat=1)
    >>> m.median("granted_page_bytes")
    4096.0
    """
    return FAMILY.run(params, **options)


def figure(data: Dataset | str, metric: str = "GB_per_s"):
    """Mapping and populating memory: GB/s by populate call, one bar colour per page kind obtained.

    Bars group by what the kernel gave (``pages_obtained``, ``populate_used``); where that differs
    from what was asked, the label says both.

    >>> fig = figure("memlab-tour/region.csv")   # doctest: +SKIP
    """
    return chart.bars_figure(data, metric, category=["populate", "populate_used"],
                             series=["pages", "pages_obtained"], facet=["region_bytes"],
                             title="region: GB/s of memory mapped and populated")


def _quick_sweep() -> Sweep:
    return Sweep(
        name="quick",
        family="region",
        points=grid(region_bytes=[64 << 20], pages=["4k", "thp"], populate=["touch", "madvise_populate_write"]),
        repeat=3,
    )


FAMILY = Family(
    name="region",
    params_type=RegionParams,
    core="region",
    unit="page",
    primary_metric="GB_per_s",
    sweeps={"quick": _quick_sweep},
    description="map and populate memory of a page kind",
    default_repeat=3,
    figure=figure,
    caption="How fast fresh memory becomes usable: mapping and populating it with 4 KiB pages or "
            "transparent huge pages (one fault per 2 MiB instead of per 4 KiB). Bars are grouped by the pages "
            "the kernel gave and the populate call made; a label says so where they differ from the request.",
    report_columns=("huge_fraction",),
)
