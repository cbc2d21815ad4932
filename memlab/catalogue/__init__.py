"""The catalogue of source items: every figure and table memlab reproduces, as data.

One :class:`Item` per figure or table of the sources (Drepper's "What every
programmer should know about memory", "Making Linux pipes fast", the
kernel's huge-page clearing patches, LWN on bulk page allocation,
UnixBench). An item names the source and section, the sweep that
reproduces it (and how to make it quick), what the source measured and on
which machine, the source's published numbers (:class:`Number`, each with a
function reading the same quantity from a dataset of this machine) and one
or more claims (:class:`Claim`): the source's own statement, cited, judged
on a dataset by a rule of the claim vocabulary (:mod:`memlab.catalogue.claims`)
against the source's effect. A claim's verdict (:class:`Verdict`) is

- ``reproduced``: the run-level interval of the measured ratio clears the
  bound (the square root of the source's effect) on the source's side;
- ``not reproduced``: it clears it the other way, with the measured values;
- ``inconclusive``: the interval straddles the bound, with the interval;
- ``not measurable``: this dataset or this machine cannot tell (no PMU, one
  NUMA node, no SMT, no hugetlb pages, too few CPUs, a sweep that stops
  short of the region the claim is about), with the reason.

A *sanity check* (an index above UnixBench's baseline, copy no faster than
its slower half) passes or fails; it is shown apart and never counted as
reproduced (:attr:`Claim.sanity`).

The package: :mod:`~memlab.catalogue.core` (the types, the dataset readers,
the quick variants), :mod:`~memlab.catalogue.claims` (the rules), and one
module per source: :mod:`~memlab.catalogue.drepper_chase`,
:mod:`~memlab.catalogue.drepper_bandwidth`, :mod:`~memlab.catalogue.drepper_programs`,
:mod:`~memlab.catalogue.pipes`, :mod:`~memlab.catalogue.clearing`,
:mod:`~memlab.catalogue.lwn`, :mod:`~memlab.catalogue.unixbench`. A family
adds its items to its source's module and lists them in :data:`ITEMS`.
``tests/test_catalogue.py`` checks that every named sweep of every
registered family belongs to an item (or is listed in :data:`OTHER_SWEEPS`
with the reason it reproduces no source item) and that every item's sweep
exists. ``memlab reproduce`` (:mod:`memlab.reproduce`) runs the items and
writes the report.

>>> item("fig3.15").sweep
'chase.fig3_15'
>>> verdict = item("fig3.15").claims[0].judge(Dataset([], {}))
>>> verdict.status, verdict.detail
('not measurable', 'the dataset has no rows with order=random')
"""

from __future__ import annotations

from typing import Sequence

from memlab.catalogue import claims
from memlab.catalogue.claims import Direction, Ratio, Same, Sanity, Steps, bound_of, run_level_interval
from memlab.catalogue.clearing import CLEAR_EXTENT, CLEAR_FAULT, CLEAR_ORDER, CLEAR_PATCH
from memlab.catalogue.core import (
    FAILS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    ORIGINAL,
    PASSES,
    PROVENANCES,
    REGION_NAMES,
    REPRODUCED,
    SANITY_VERDICTS,
    SOURCES,
    TOGETHER,
    TRANSLATION,
    VERDICTS,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    Source,
    Verdict,
    at_largest_common,
    at_working_sets,
    caches,
    curve,
    cycles_in,
    largest,
    machine_fact,
    need_cpus,
    only,
    region,
    region_median,
    rows_where,
    shorter,
    value_of,
    verdict,
)
from memlab.catalogue.drepper_bandwidth import (
    FIG3_24,
    FIG3_25,
    FIG3_26,
    FIG3_27,
    FIG3_28,
    FIG3_29,
    FIG3_31,
    bw_rate,
)
from memlab.catalogue.drepper_chase import (
    FIG3_4,
    FIG3_10,
    FIG3_11,
    FIG3_12,
    FIG3_13,
    FIG3_15,
    FIG3_16,
    FIG3_17,
    FIG3_19,
    FIG3_20,
    FIG3_21,
    FIG3_30,
    FIG5_3,
    FIG6_2,
    FIG6_2_SERIES,
    FIG6_4,
    FIG6_5,
    FIG6_5_DISTANCES,
    FIG6_7,
    FIG6_8,
    FIG7_1,
    FIG7_9,
)
from memlab.catalogue.drepper_programs import FIG6_10, FIG6_12, TABLE6_1, TABLE6_2
from memlab.catalogue.lwn import BULK_NOTE, LWN_BULK
from memlab.catalogue.pipes import PIPES_LADDER, PIPES_TOUCH, SOURCE_RUNG_GIB_PER_S
from memlab.catalogue.unixbench import UNIXBENCH_EXECL, UNIXBENCH_FILE_COPY, UNIXBENCH_INDEX, UNIXBENCH_SPAWN
from memlab.dataset import Dataset

__all__ = [
    "BULK_NOTE",
    "FAILS",
    "INCONCLUSIVE",
    "ITEMS",
    "NOT_MEASURABLE",
    "NOT_REPRODUCED",
    "ORIGINAL",
    "OTHER_SWEEPS",
    "PASSES",
    "PENDING_ITEMS",
    "PROVENANCES",
    "REGION_NAMES",
    "REPRODUCED",
    "SANITY_VERDICTS",
    "SOURCES",
    "SOURCE_RUNG_GIB_PER_S",
    "TOGETHER",
    "TRANSLATION",
    "VERDICTS",
    "Claim",
    "Direction",
    "Item",
    "NotMeasurable",
    "Number",
    "Provenance",
    "Ratio",
    "Same",
    "Sanity",
    "Source",
    "Steps",
    "Verdict",
    "at_largest_common",
    "at_working_sets",
    "bound_of",
    "bw_rate",
    "caches",
    "claims",
    "curve",
    "cycles_in",
    "item",
    "items",
    "largest",
    "machine_fact",
    "need_cpus",
    "only",
    "region",
    "region_median",
    "rows_where",
    "run_level_interval",
    "select",
    "shorter",
    "sweep_names",
    "value_of",
    "verdict",
]

# ---- the catalogue ------------------------------------------------------------------------

#: Every source item memlab reproduces, in the order of the report.
ITEMS: tuple[Item, ...] = (
    FIG3_10, FIG3_11, FIG3_12, FIG3_13, FIG3_15, FIG3_17,
    FIG3_4, FIG3_16, FIG3_19, FIG3_20, FIG3_21, FIG3_30,
    FIG3_24, FIG3_25, FIG3_26, FIG3_27, FIG3_28, FIG3_29, FIG3_31,
    FIG6_7, FIG6_8, FIG7_9,
    FIG5_3, FIG6_2, FIG6_4, FIG6_5, FIG7_1,
    TABLE6_1, TABLE6_2, FIG6_10,
    FIG6_12,
    PIPES_LADDER, PIPES_TOUCH,
    CLEAR_FAULT, CLEAR_ORDER, CLEAR_EXTENT, CLEAR_PATCH, LWN_BULK,
    UNIXBENCH_EXECL, UNIXBENCH_SPAWN, UNIXBENCH_FILE_COPY, UNIXBENCH_INDEX,
)

#: Named sweeps that reproduce no source item, with the reason (besides each family's
#: ``quick`` tour sweep and the ``<name>_quick`` variants of other sweeps).
OTHER_SWEEPS: dict[str, str] = {
    "pipe.verify_cost": "memlab's own check: what verifying every byte costs each writer/reader pair",
    "pipe_latency.latency": "lmbench's lat_pipe round trip, a companion to the article, not one of its figures",
    "bandwidth.nontemporal": "memlab's own: write and copy with normal and non-temporal stores (what memset "
                             "and memcpy switch to for large sizes), beside figures 3.24-3.28",
    "bandwidth.widths": "memlab's own: the read at every vector width this CPU runs, the L1d plateau against "
                        "the load ports; the source measured 16-byte SSE only",
    "core_to_core.matrix": "memlab's own (MLC-style) measurement: a cache line's round trip between every pair "
                           "of CPUs; not a source figure",
    "loaded.curve": "memlab's own (MLC-style) measurement: the chase's latency against the bandwidth other "
                    "threads load memory with (Intel MLC's loaded latency); not a source figure",
    "tlb.sizes": "memlab's own (MLC-style) measurement: the page-walk penalty of a random walk by working set, "
                 "4 KiB pages against THP; not a source figure",
}


#: Named sweeps of source figures that arrived (with the chase's remaining list experiments) after
#: the catalogue was written and have no item yet: they run with ``memlab sweep`` and in the chase
#: notebook, but ``memlab reproduce`` does not judge them. Each needs an Item (the source's numbers
#: and claims) and then leaves this list. Empty today: every source figure's sweep has an item.
PENDING_ITEMS: dict[str, str] = {}


def items() -> tuple[Item, ...]:
    """Every catalogue item, in report order."""
    return ITEMS


def item(key: str) -> Item:
    """The item called ``key`` (ValueError listing the keys if there is none).

    >>> item("pipes-ladder").source
    'pipes'
    """
    for entry in ITEMS:
        if entry.key == key:
            return entry
    raise ValueError(f"item={key!r} is not in the catalogue (known: {', '.join(i.key for i in ITEMS)})")


def select(names: Sequence[str] | None = None) -> list[Item]:
    """The items named: item keys, source keys (``drepper``, ``pipes``, ...) or family names
    (``chase``), with the items their claims compare with (``fig3.27`` brings ``fig3.26``); all
    items when ``names`` is empty. ValueError for a name that matches nothing.

    >>> [i.key for i in select(["fig3.27"])]
    ['fig3.26', 'fig3.27']

    >>> [i.key for i in select(["pipes"])]
    ['pipes-ladder', 'pipes-touch']
    """
    if not names:
        return list(ITEMS)
    chosen: list[Item] = []
    for name in names:
        found = [i for i in ITEMS if name in (i.key, i.source, i.family)]
        if not found:
            raise ValueError(
                f"item={name!r} is not an item, a source or a family of the catalogue (items: "
                f"{', '.join(i.key for i in ITEMS)}; sources: {', '.join(SOURCES)})"
            )
        chosen += [i for i in found if i not in chosen]
    chosen += [item(key) for i in list(chosen) for key in i.compare_with if item(key) not in chosen]
    return [i for i in ITEMS if i in chosen]


def sweep_names() -> set[str]:
    """The named sweeps (``family.sweep``) the catalogue's items run, quick variants included."""
    names = {i.sweep for i in ITEMS}
    names |= {i.quick for i in ITEMS if isinstance(i.quick, str)}
    return names
