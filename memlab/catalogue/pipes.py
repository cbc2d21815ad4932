"""Mazzoli, "Making Linux pipes fast" (2022): the pipe family's items.

The ladder's rungs are :data:`memlab.pipe.RUNGS` (the family's own); the
article's rate per rung sits beside them here.
"""

from __future__ import annotations

from typing import Callable

from memlab import pipe
from memlab.catalogue.claims import Ratio, Same, Steps
from memlab.catalogue.core import (
    ORIGINAL,
    SOURCES,
    TRANSLATION,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    finite,
    need_cpus,
    only,
    value_of,
)
from memlab.dataset import Dataset

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["pipes"].url)
#: The ladder's per-rung rates, checked against the original article.
_ORIGINAL = Provenance(ORIGINAL, SOURCES["pipes"].url)

# ---- "Making Linux pipes fast" --------------------------------------------------------

#: The article's rate of each rung of :data:`memlab.pipe.RUNGS` on two CPUs, GiB/s, in rung order.
SOURCE_RUNG_GIB_PER_S = (3.5, 12.7, 32.8, 51.0, 62.5)


def _two_cpu_rows(ds: Dataset) -> Dataset:
    rows = [r for r in ds.rows if finite(r.get("writer_cpu")) and finite(r.get("reader_cpu"))
            and r["writer_cpu"] != r["reader_cpu"]]
    if not rows:
        need_cpus(ds, 2)
        raise NotMeasurable("the dataset has no run with the writer and the reader on two CPUs")
    return Dataset(rows, ds.metadata)


def _rung_rate(index: int) -> Callable[[Dataset], float]:
    return lambda ds: value_of(_two_cpu_rows(ds), "GiB_per_s", **pipe.RUNGS[index][1])


def _rung_rates(ds: Dataset) -> dict[str, float]:
    two = _two_cpu_rows(ds)
    return {name: value_of(two, "GiB_per_s", **match) for name, match in pipe.RUNGS}


_ladder_climbs = Steps(_rung_rates, True, "GiB/s on two CPUs by rung",
                       SOURCE_RUNG_GIB_PER_S[-1] / SOURCE_RUNG_GIB_PER_S[0], "3.5, 12.7, 32.8, 51.0, 62.5 GiB/s")


def _top_over_first(ds: Dataset) -> float:
    rates = _rung_rates(ds)
    return rates[pipe.RUNGS[-1][0]] / rates[pipe.RUNGS[0][0]]


_ladder_top = Ratio(_top_over_first, SOURCE_RUNG_GIB_PER_S[-1] / SOURCE_RUNG_GIB_PER_S[0],
                    "the top rung / write/read, GiB/s on two CPUs", "62.5 against 3.5 GiB/s")


PIPES_LADDER = Item(
    key="pipes-ladder", source="pipes", section="the whole article", label="The ladder",
    title="five rungs from write/read to vmsplice + splice + huge pages + busy loop",
    sweep="pipe.ladder", quick="pipe.quick",
    measured="A writer process piping 10 GiB to a reader in 256 KiB buffers, each rung one change on "
             "the one before: write/read, vmsplice/read, vmsplice/splice, + huge pages, + busy loop; "
             "the two processes pinned to two cores (taskset).",
    machine="Intel Core i7-8550U (Skylake), Linux 5.17",
    numbers=tuple(Number(f"{name}, two CPUs", rate, "GiB/s", _rung_rate(i), provenance=_ORIGINAL)
                  for i, ((name, _), rate) in enumerate(zip(pipe.RUNGS, SOURCE_RUNG_GIB_PER_S))),
    claims=(
        Claim("On two CPUs each rung is faster than the one before.",
              "Mazzoli: 3.5, 12.7, 32.8, 51.0, 62.5 GiB/s", _ladder_climbs),
        Claim("The top rung moves many times the bytes per second of write/read (the source: 17.9x).",
              "Mazzoli: 62.5 against 3.5 GiB/s, 17.9x", _ladder_top),
    ),
    script="experiments/pipes_ladder.py", notebook="notebooks/pipes.ipynb",
)


def _touch_ratio(huge: bool) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        base = {"writer": "vmsplice", "reader": "splice", "huge_pages": huge}
        return value_of(ds, "GiB_per_s", touch_pages=False, **base) / value_of(ds, "GiB_per_s", touch_pages=True,
                                                                                 **base)

    return measured


_untouched_slower = Ratio(_touch_ratio(False), 25.0 / 30.0, "4 KiB pages: never touched / touched, GiB/s",
                          "25 GiB/s instead of 30")


_huge_untouched_same = Same(_touch_ratio(True), 30.0 / 25.0, "huge pages: never touched / touched, GiB/s",
                            "the 4 KiB pages' 25 GiB/s instead of 30")


PIPES_TOUCH = Item(
    key="pipes-touch", source="pipes", section="footnote 19", label="Footnote 19",
    title="vmsplice of pages never touched",
    sweep="pipe.touch", quick=only(repeat=3, target_seconds=0.1),
    measured="vmsplice + splice with a buffer whose pages were never written (get_user_pages_fast "
             "takes its slow path every time), with 4 KiB pages and with huge pages.",
    machine="Intel Core i7-8550U (Skylake), Linux 5.17",
    numbers=(
        Number("never touched / touched, 4 KiB pages", 25.0 / 30.0, "x", _touch_ratio(False),
               "25 GiB/s instead of 30", provenance=_TRANSLATED),
    ),
    claims=(
        Claim("Splicing never-touched 4 KiB pages is slower than splicing touched pages.",
              "Mazzoli, footnote 19: 25 GiB/s instead of 30", _untouched_slower),
        Claim("With huge pages the slowdown does not show (never touched is about as fast).",
              "Mazzoli, footnote 19: with huge pages get_user_pages_fast fills the whole range",
              _huge_untouched_same),
    ),
    script="experiments/pipes_touch.py", notebook="notebooks/pipes.ipynb",
)


