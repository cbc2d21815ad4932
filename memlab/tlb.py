"""The TLB's own cost: the page-walk penalty of a random walk, separated from the caches' latency.

Each sample walks the chase family's random list (``npad=7``: one 64-byte
element per line, ``working_set_bytes`` of elements) four ways, through the
chase C family itself:

- ``packed`` on 4 KiB pages: the elements fill few pages (64 per page), so
  nearly every step hits the TLB: the caches' (or memory's) latency;
- ``page_per_element`` on 4 KiB pages: each element on a page of its own (at
  line ``i mod 64`` of it, so the cache sets are used as when packed): the
  same lines, but a TLB entry per element, so beyond the TLB's reach every
  step also walks the page tables;
- the same two on THP (2 MiB pages, when ``madvise`` grants them), where the
  spread list needs 512 times fewer TLB entries.

Each walk's ns per element is the walking thread's CPU time
(``CLOCK_THREAD_CPUTIME_ID``) over its steps, so that time other processes
took the CPU (a loaded machine) is left out; on an idle machine it is the
wall time. Derived columns: ``cache_ns_per_element`` (packed, 4 KiB),
``page_walk_4k_ns`` (page_per_element minus packed on 4 KiB pages: the
primary metric) and ``page_walk_thp_ns`` (the same on THP), each walk's own
``*_ns_per_element`` and ``thp_huge_page_fraction`` (how much of the spread
list THP really put on huge pages; below 1 the THP column is partly 4 KiB).

>>> m = run(working_set_bytes=64 << 10, repeat=1, warmup=0, target_seconds=0.04)
>>> m.median("cache_ns_per_element") > 0
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from memlab import chart
from memlab._core import Kernel
from memlab.dataset import Dataset
from memlab.family import Family, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement

__all__ = ["FAMILY", "TlbParams", "WALKS", "chase_config", "figure", "run"]

ELEMENT_BYTES = 64
PAGE_BYTES = 4096
#: The four walks of a sample: (layout, pages).
WALKS = (("packed", "4k"), ("page_per_element", "4k"), ("packed", "thp"), ("page_per_element", "thp"))
_NAMES = {("packed", "4k"): "packed_4k", ("page_per_element", "4k"): "spread_4k",
          ("packed", "thp"): "packed_thp", ("page_per_element", "thp"): "spread_thp"}
#: Most elements a point may have: the spread list maps a 4 KiB page per element (4 GiB here).
MAX_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class TlbParams:
    """``working_set_bytes``: bytes of list elements (64 each); the spread walks map a 4 KiB page
    per element on top (so 64 times the memory). ``seed``: the list's shuffle."""

    working_set_bytes: int = 1 << 20
    seed: int = 1

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("working_set_bytes", self.working_set_bytes, 4 * ELEMENT_BYTES, MAX_ELEMENTS * ELEMENT_BYTES)
        if self.working_set_bytes % ELEMENT_BYTES:
            raise ValueError(f"working_set_bytes={self.working_set_bytes} is not a multiple of the "
                             f"{ELEMENT_BYTES}-byte element")
        check_int("seed", self.seed, 0, (1 << 63) - 1)


def chase_config(params: TlbParams, layout: str, pages: str) -> dict[str, Any]:
    """The chase family's config for one of the four walks: what differs from the chase's
    defaults (the C parameter table's, which are ChaseParams'); the core fills in the rest.

    >>> sorted(chase_config(TlbParams(), "packed", "4k"))
    ['layout', 'pages', 'seed', 'working_set_bytes']
    """
    return {"working_set_bytes": params.working_set_bytes, "layout": layout, "pages": pages, "seed": params.seed}


def _sample(params: TlbParams, target_seconds: float) -> Mapping[str, Any]:
    """One sample: the four walks, each for a quarter of the target time."""
    metrics: dict[str, float] = {}
    elapsed = units = 0.0
    for layout, pages in WALKS:
        with Kernel("chase", chase_config(params, layout, pages)) as kernel:
            kernel.measure(target_ns=max(1_000_000, int(target_seconds * 1e9 / 8)), counters=False)  # warm
            raw = kernel.measure(target_ns=max(1_000_000, int(target_seconds * 1e9 / 4)), counters=False)
        name = _NAMES[(layout, pages)]
        # the walking thread's CPU time: time it was preempted is not the TLB's
        metrics[f"{name}_ns_per_element"] = raw["metrics"]["thread_cpu_ns"] / raw["units"]
        if (layout, pages) == ("page_per_element", "thp"):
            metrics["thp_huge_page_fraction"] = raw["metrics"].get("huge_page_fraction", 0.0)
        elapsed += raw["elapsed_ns"]
        units += raw["units"]
    metrics["cache_ns_per_element"] = metrics["packed_4k_ns_per_element"]
    metrics["page_walk_4k_ns"] = metrics["spread_4k_ns_per_element"] - metrics["packed_4k_ns_per_element"]
    metrics["page_walk_thp_ns"] = metrics["spread_thp_ns_per_element"] - metrics["packed_thp_ns_per_element"]
    metrics["spread_memory_bytes"] = params.working_set_bytes // ELEMENT_BYTES * PAGE_BYTES
    return {"elapsed_ns": elapsed, "units": units, "bytes": 0.0, "metrics": metrics}


def run(params: TlbParams | dict | None = None, **options: Any) -> Measurement:
    """Measure the caches' latency and the page-walk penalty (ns per element) at one working set.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    cpu, target_seconds, counters) are parameters of :class:`TlbParams`.

    >>> m = run(working_set_bytes=64 << 10, repeat=1, warmup=0, target_seconds=0.04)
    >>> "page_walk_4k_ns" in m.metric_names
    True
    """
    return FAMILY.run(params, **options)


def figure(data: Dataset | str | os.PathLike, metric: str = "page_walk_4k_ns"):
    """Stacked against the working set (log2): the caches' latency (packed, 4 KiB pages) and on top
    the page-walk penalty with 4 KiB pages; the THP penalty as a line; cache sizes marked.

    >>> fig = figure("results/tlb.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = sorted(chart.rows_with(ds, metric), key=lambda r: float(r["working_set_bytes"]))
    xs = [float(r["working_set_bytes"]) for r in rows]
    cache = [float(r["cache_ns_per_element"]) for r in rows]
    walk_4k = [max(0.0, float(r["page_walk_4k_ns"])) for r in rows]
    fig, ax = chart.new_figure()
    ax.set_xscale("log", base=2)
    ax.fill_between(xs, 0, cache, step=None, alpha=0.6, label="caches' latency (packed, 4 KiB pages)")
    ax.fill_between(xs, cache, [c + w for c, w in zip(cache, walk_4k)], alpha=0.6,
                    label="page-walk penalty, 4 KiB pages (one element per page)")
    if all(chart.finite(r.get("page_walk_thp_ns")) for r in rows):
        ax.plot(xs, [c + max(0.0, float(r["page_walk_thp_ns"])) for c, r in zip(cache, rows)], "k--", marker=".",
                label="caches + page-walk penalty with THP")
    sizes, _ = chart.cache_sizes_of(ds)
    for name, size in sizes.items():
        if not name.endswith("i") and xs[0] <= size <= xs[-1]:
            ax.axvline(size, color="grey", linewidth=0.8, linestyle=":")
            ax.annotate(name, (size, 0), textcoords="offset points", xytext=(2, 2), fontsize=8)
    ax.set_xlabel("working set (bytes of 64-byte elements; the spread walk maps a 4 KiB page per element)")
    ax.set_ylabel("ns per element")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    chart.set_title(fig, ds, "tlb: the caches' latency and the page-walk penalty of a random walk")
    return fig


def _sizes_sweep(name: str, top_log2: int, repeat: int, target: float) -> Sweep:
    points = grid(working_set_bytes=[1 << k for k in range(12, top_log2 + 1)])
    return Sweep(name, "tlb", points, repeat=repeat, warmup=1, target_seconds=target,
                 description=f"4 KiB to {1 << (top_log2 - 10)} KiB of elements, four walks each")


def _sizes_sweep_full() -> Sweep:
    return _sizes_sweep("sizes", 24, 5, 0.4)


def _sizes_sweep_quick() -> Sweep:
    return _sizes_sweep("sizes_quick", 20, 3, 0.2)


def _quick_sweep() -> Sweep:
    return Sweep("quick", "tlb", grid(working_set_bytes=[16 << 10, 1 << 20]), repeat=2, warmup=0,
                 target_seconds=0.1, description="two working sets: within and beyond the TLB's reach")


FAMILY = Family(
    name="tlb",
    params_type=TlbParams,
    python_sample=_sample,
    primary_metric="page_walk_4k_ns",
    sweeps={"quick": _quick_sweep, "sizes": _sizes_sweep_full, "sizes_quick": _sizes_sweep_quick},
    description="page-walk penalty of a random walk: one element per page against packed, 4 KiB and THP",
    default_repeat=3,
    default_warmup=1,
    default_target_seconds=0.2,
    figure=figure,
    caption="A random walk over 64-byte elements: the lower band is the latency with the elements packed "
            "(few pages, TLB hits), the upper one what spreading them one per 4 KiB page adds (page "
            "walks); the dashed line is the same with THP.",
    report_columns=("cache_ns_per_element", "page_walk_thp_ns", "thp_huge_page_fraction"),
)
