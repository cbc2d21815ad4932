"""Drepper's program figures: section 6.1 (table 6.1), 6.2.1 (table 6.2), 6.4.1 (figures 6.10-6.11)
and 6.4.2 (figure 6.12): the matrix_init, matrix and share families' items.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from memlab import share
from memlab.catalogue.claims import Ratio, Same, Steps
from memlab.catalogue.core import (
    ORIGINAL,
    SOURCES,
    TOGETHER,
    TRANSLATION,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    finite,
    need_cpus,
    only,
    rows_where,
    value_of,
)
from memlab.dataset import Dataset

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["drepper"].url)
#: Table 6.2's percentages and figure 6.12's times, checked against the original's text.
_ORIGINAL = Provenance(ORIGINAL, SOURCES["drepper"].url)

# ---- Drepper 6.1, 6.2.1: matrices ----------------------------------------------------


def _init_seconds(order: str, stores: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        rows = rows_where(ds, "seconds", order=order, stores=stores)
        if all(row.get("n") != 3000 for row in rows):
            raise NotMeasurable(f"the source's N=3000 was not measured (N={rows[0].get('n')})")
        return value_of(ds, "seconds", order=order, stores=stores, n=3000)

    return measured


def _time_ratio(match_a: Mapping[str, Any], match_b: Mapping[str, Any],
                metric: str = "seconds") -> Callable[[Dataset], float]:
    """ds -> time(b) / time(a) (a lower-is-better metric): how many times faster ``a`` is."""
    return lambda ds: value_of(ds, metric, **match_b) / value_of(ds, metric, **match_a)


def _faster(name_a: str, match_a: Mapping[str, Any], name_b: str, match_b: Mapping[str, Any], effect: float,
            note: str, metric: str = "seconds") -> Ratio:
    """``a`` faster than ``b`` by the source's ``effect`` (time(b) / time(a))."""
    return Ratio(_time_ratio(match_a, match_b, metric), effect, f"{name_b} / {name_a}, {metric}", note)


TABLE6_1 = Item(
    key="table6.1", source="drepper", section="6.1", label="Table 6.1", title="matrix initialisation",
    sweep="matrix_init.table_6_1", quick=only(repeat=2, target_seconds=None),
    measured="Writing every int of a 3000 x 3000 matrix, row by row (sequential) or column by column, "
             "with normal stores and with non-temporal stores (movnti).",
    machine="an Intel Core 2 era machine (the text: 0.048 s is about 750 MB/s)",
    numbers=(
        Number("row-wise, normal stores", 0.048, "s", _init_seconds("row", "normal"), provenance=_TRANSLATED),
        Number("column-wise, normal stores", 0.127, "s", _init_seconds("column", "normal"), provenance=_TRANSLATED),
        Number("column-wise, non-temporal stores", 0.160, "s", _init_seconds("column", "nontemporal"),
               provenance=_TRANSLATED),
    ),
    claims=(
        Claim("With normal stores, row-wise (sequential) initialisation is faster than column-wise.",
              "Drepper 6.1, table 6.1: 0.048 s row-wise against 0.127 s column-wise",
              _faster("row", {"order": "row", "stores": "normal"}, "column", {"order": "column", "stores": "normal"},
                      0.127 / 0.048, "0.048 s against 0.127 s")),
        Claim("Row-wise, non-temporal stores are about as fast as normal stores (write combining).",
              "Drepper 6.1, table 6.1: sequential non-temporal writes are as fast as cached ones",
              Same(_time_ratio({"order": "row", "stores": "nontemporal"}, {"order": "row", "stores": "normal"}),
                   0.160 / 0.127, "row-wise, normal / non-temporal, seconds",
                   "non-temporal stores cost 25% column-wise, where they do differ")),
        Claim("Column-wise, non-temporal stores are slower than normal stores (nothing to combine).",
              "Drepper 6.1, table 6.1: 0.16 s against 0.127 s, 25% worse",
              _faster("normal", {"order": "column", "stores": "normal"}, "non-temporal",
                      {"order": "column", "stores": "nontemporal"}, 0.160 / 0.127, "0.16 s against 0.127 s")),
    ),
    script="experiments/table6_1.py", notebook="notebooks/matrix.ipynb",
)


def _percent_of_naive(variant: str | Callable[[str], bool]) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        naive = value_of(ds, "seconds", variant="naive")
        names = sorted({str(r.get("variant")) for r in ds.rows})
        wanted = [v for v in names if (variant(v) if callable(variant) else v == variant)]
        if not wanted:
            raise NotMeasurable(f"no variant {getattr(variant, 'label', variant)} in the dataset "
                                f"(it has {', '.join(names) or 'none'})")
        return 100.0 * value_of(ds, "seconds", variant=wanted[0]) / naive

    measured.label = getattr(variant, "label", variant)  # type: ignore[attr-defined]
    return measured


def _is_sse2_variant(name: str) -> bool:
    return "sse2" in name


_is_sse2_variant.label = "with the source's SSE2 sub-matrix code"  # type: ignore[attr-defined]


def _sse2_over_tiled(ds: Dataset) -> float:
    names = sorted({str(r.get("variant")) for r in ds.rows if _is_sse2_variant(str(r.get("variant")))})
    if not names:
        raise NotMeasurable("the source's vectorised variant (its SSE2 listing, section 9.1) is not in "
                            "this dataset; memlab's tiled_simd goes beyond it and is not compared")
    return _time_ratio({"variant": names[0]}, {"variant": "tiled"})(ds)


_sse2_faster = Ratio(_sse2_over_tiled, 17.3 / 9.47, "tiled / SSE2 tiled, seconds", "17.3% against 9.47% of the "
                     "naive time")


TABLE6_2 = Item(
    key="table6.2", source="drepper", section="6.2.1", label="Table 6.2", title="matrix multiplication timing",
    sweep="matrix.table_6_2", quick=only(repeat=1, target_seconds=None, warmup=0),
    measured="Multiplying two 1000 x 1000 double matrices: the naive loop, with the second matrix "
             "transposed first, tiled in sub-matrices of a cache line, and tiled with SSE2 vectors; "
             "time as a percentage of the naive loop.",
    machine="an Intel Core 2 at 2.66 GHz (naive 318 MFLOP/s, the vectorised version 3.35 GFLOP/s)",
    numbers=(
        Number("transposed, % of naive time", 23.4, "%", _percent_of_naive("transposed"), provenance=_ORIGINAL),
        Number("sub-matrix (tiled), % of naive time", 17.3, "%", _percent_of_naive("tiled"), provenance=_ORIGINAL),
        Number("vectorised sub-matrix, % of naive time", 9.47, "%", _percent_of_naive(_is_sse2_variant),
               "the source's SSE2 code (section 9.1)", provenance=_ORIGINAL),
        Number("naive", 0.318, "GFLOP/s", lambda ds: value_of(ds, "GFLOP_per_s", variant="naive"),
               provenance=_TRANSLATED),
    ),
    claims=(
        Claim("Transposing the second matrix first makes the multiply faster than the naive loop.",
              "Drepper 6.2.1, table 6.2: 23.4% of the naive time",
              _faster("transposed", {"variant": "transposed"}, "naive", {"variant": "naive"}, 100 / 23.4,
                      "23.4% of the naive time")),
        Claim("Tiling in sub-matrices of a cache line is faster than transposing.",
              "Drepper 6.2.1, table 6.2: 17.3% against 23.4% of the naive time",
              _faster("tiled", {"variant": "tiled"}, "transposed", {"variant": "transposed"}, 23.4 / 17.3,
                      "17.3% against 23.4% of the naive time")),
        Claim("Vectorising the tiled loops (SSE2) makes them faster still.",
              "Drepper 6.2.1, table 6.2: 9.47% of the naive time", _sse2_faster),
    ),
    script="experiments/table6_2.py", notebook="notebooks/matrix.ipynb",
    note="memlab's tiled_simd (the widest vectors and packed panels) goes beyond the source; the "
         "source's own SSE2 sub-matrix variant is compared where memlab has it.",
)


# ---- Drepper 6.4.1: false sharing -----------------------------------------------------


def _sharing_ratio(ds: Dataset, threads: int) -> float:
    """One cache line over a line each, plain increments (the source's figures: its program's
    non-atomic loop of 500 million increments per thread)."""
    metric = "ns_per_increment_per_thread"
    shared = value_of(ds, metric, threads=threads, disp_longs=1, atomic=False)
    own = value_of(ds, metric, threads=threads, disp_longs=8, atomic=False)
    return shared / own


def _two_thread_sharing(ds: Dataset) -> float:
    need_cpus(ds, 2)
    return _sharing_ratio(ds, 2)


_false_sharing_slower = Ratio(_two_thread_sharing, 3.90, "2 threads, plain increments: one cache line / a line "
                              "each, per thread", "390% with two processors")


def _sharing_by_threads(ds: Dataset) -> dict[str, float]:
    need_cpus(ds, 3)
    counts = sorted({int(r["threads"]) for r in rows_where(ds, "ns_per_increment_per_thread", atomic=False)
                     if int(r["threads"]) >= 2})
    if len(counts) < 2:
        raise NotMeasurable(f"needs runs with two different thread counts of 2 or more (measured: "
                            f"{', '.join(map(str, counts)) or 'none'})")
    return {f"{n} threads": _sharing_ratio(ds, n) for n in counts}


_penalty_grows = Steps(_sharing_by_threads, True, "one line / a line each by threads", 11.47 / 3.90,
                       "390%, 734%, 1147%")


FIG6_10 = Item(
    key="fig6.10", source="drepper", section="6.4.1", label="Figures 6.10-6.11",
    title="concurrent cache line access overhead (false sharing)",
    sweep="share.false_sharing", quick="share.false_sharing_quick",
    measured="Threads pinned one per processor each increment their own counter 500 million times "
             "(plain increments); "
             "the counters share one cache line or each has its own; time until the last thread ends.",
    machine="figure 6.10: four Pentium 4 processors (separate caches); figure 6.11: one Core 2 QX6700 "
            "(four cores, two L2 caches)",
    numbers=(
        Number("one line / own lines, 2 threads", 3.90, "x", lambda ds: _sharing_ratio(ds, 2),
               "figure 6.10 (four P4s): 390%", provenance=_TRANSLATED),
        Number("one line / own lines, 3 threads", 7.34, "x", lambda ds: _sharing_ratio(ds, 3), "734%",
               provenance=_TRANSLATED),
        Number("one line / own lines, 4 threads", 11.47, "x", lambda ds: _sharing_ratio(ds, 4), "1147%",
               provenance=_TRANSLATED),
    ),
    claims=(
        Claim("With two threads on two CPUs, counters sharing one cache line make each thread slower "
              "than counters on their own lines.",
              "Drepper 6.4.1, fig. 6.10: 390% with two processors (fig. 6.11: a small overhead on a "
              "multi-core processor)", _false_sharing_slower),
        Claim("The penalty grows with the number of threads.",
              "Drepper 6.4.1, fig. 6.10: 390%, 734%, 1147% for 2, 3, 4 processors", _penalty_grows),
    ),
    script="experiments/false_sharing.py", notebook="notebooks/system.ipynb",
    note="The verdicts use plain increments, as the source's figures (its program's atomic loop runs "
         "10 million, not 500 million, increments); memlab measures the atomic lock add beside them.",
)


# ---- Drepper 6.4.2: atomic increments ---------------------------------------------------

#: Figure 6.12: the compare-and-swap loop against add-and-fetch (0.73 s / 0.23 s), the smaller of the
#: two ratios the source's times give (against fetch-and-add: 0.73 / 0.21).
CAS_EFFECT = share.SOURCE_ATOMIC_SECONDS["sync_cas"] / share.SOURCE_ATOMIC_SECONDS["sync_add_and_fetch"]
_ATOMIC_METRIC = "ns_per_increment_per_thread"


def _contended(ds: Dataset) -> tuple[Dataset, int]:
    """The rows of one shared counter at the most threads measured (at least 2), and that count."""
    need_cpus(ds, 2)
    rows = [r for r in rows_where(ds, _ATOMIC_METRIC, disp_longs=0) if finite(r.get("threads"))]
    most = max(int(r["threads"]) for r in rows)
    if most < 2:
        raise NotMeasurable("only one thread incremented the counter: the source's forms compete for it from "
                            "four threads")
    return Dataset([r for r in rows if int(r["threads"]) == most], ds.metadata), most


def _share_overlap(row, threads: int) -> float:
    """The share of a share row's time in which all its threads were on their CPUs at once:
    ``overlap_fraction``, or, in rows written before the thread team reported it, the same from
    ``mean_threads_on_cpu`` (threads - (1 - overlap): docs/dataset.md); NaN when neither is there."""
    if finite(row.get("overlap_fraction")):
        return float(row["overlap_fraction"])
    if finite(row.get("mean_threads_on_cpu")):
        return max(0.0, 1.0 - (threads - float(row["mean_threads_on_cpu"])))
    return math.nan


def _form_ns(ds: Dataset, form: str) -> float:
    """ns per increment per thread of ``form`` at the most threads: on the CPU where the rows have it
    (``cpu_ns_per_increment``, the threads' CPU time over all increments: a thread's own time per
    increment, without the time other processes took the CPU), else wall time."""
    rows, threads = _contended(ds)
    mine = Dataset(rows_where(rows, None, atomic_op=form), ds.metadata)
    # below TOGETHER the threads mostly took turns and did not contend
    together = [_share_overlap(r, threads) for r in mine.rows]
    together = [value for value in together if finite(value)]
    if together and max(together) < TOGETHER:
        raise NotMeasurable(f"the {threads} threads of {form} were all on their CPUs at once at least "
                            f"{max(together):.0%} of the time: they ran together less than {TOGETHER:.0%} of the time "
                            "(the CPUs were busy with other work), so they hardly competed for the counter")
    on_cpu_time = all(finite(r.get("cpu_ns_per_increment")) for r in mine.rows)
    return value_of(mine, "cpu_ns_per_increment" if on_cpu_time else _ATOMIC_METRIC)


def _form_seconds(form: str) -> Callable[[Dataset], float]:
    """Seconds for one million increments by each thread (on the CPU) at this machine's thread count."""
    return lambda ds: _form_ns(ds, form) * 1e6 / 1e9


def _form_ratio(form: str, base: str = "sync_add_and_fetch") -> Callable[[Dataset], float]:
    return lambda ds: _form_ns(ds, form) / _form_ns(ds, base)


def _threads_text(threads: int) -> str:
    return f"{threads} threads on one counter" + ("" if threads == share.SOURCE_THREADS else
                                                  f" (the source: {share.SOURCE_THREADS})")


def _cas_ratios(ds: Dataset) -> dict[str, float]:
    _, threads = _contended(ds)
    cas = _form_ns(ds, "sync_cas")
    return {f"{_threads_text(threads)}, cas / {form}": cas / _form_ns(ds, form)
            for form in ("sync_add_and_fetch", "sync_fetch_and_add")}


_cas_slower = Ratio(_cas_ratios, CAS_EFFECT, "ns per increment per thread", "0.73 s against 0.23 s")


def _fetch_over_add(ds: Dataset) -> dict[str, float]:
    _, threads = _contended(ds)
    return {_threads_text(threads): _form_ns(ds, "sync_fetch_and_add") / _form_ns(ds, "sync_add_and_fetch")}


_fetch_adds_close = Same(_fetch_over_add, CAS_EFFECT, "sync_fetch_and_add / sync_add_and_fetch, ns per increment "
                         "per thread", "compare-and-swap, the form that does differ: 0.73 s against 0.23 s")


_SECONDS_NOTE = ("here: this machine's ns per increment per thread (on the CPU) x 1 million (the million "
                 "read as per thread), at its thread count")

FIG6_12 = Item(
    key="fig6.12", source="drepper", section="6.4.2", label="Figure 6.12", title="atomic increment in a loop",
    sweep="share.atomic_ops", quick="share.atomic_ops_quick",
    measured="Threads pinned one per CPU increment one shared counter in a loop with gcc's __sync builtins: "
             "add and return the result (__sync_add_and_fetch), add and return the old value "
             "(__sync_fetch_and_add), and a compare-and-swap loop (__sync_bool_compare_and_swap); the "
             "execution time of 1 million increments by four concurrent threads.",
    machine="x86-64, four threads (the text names no machine; an atomic operation costs about 200 cycles there)",
    numbers=(
        Number("__sync_add_and_fetch, 1 million increments", share.SOURCE_ATOMIC_SECONDS["sync_add_and_fetch"], "s",
               _form_seconds("sync_add_and_fetch"), _SECONDS_NOTE, compare=False, provenance=_ORIGINAL),
        Number("__sync_fetch_and_add, 1 million increments", share.SOURCE_ATOMIC_SECONDS["sync_fetch_and_add"], "s",
               _form_seconds("sync_fetch_and_add"), _SECONDS_NOTE, compare=False, provenance=_ORIGINAL),
        Number("compare-and-swap loop, 1 million increments", share.SOURCE_ATOMIC_SECONDS["sync_cas"], "s",
               _form_seconds("sync_cas"), _SECONDS_NOTE, compare=False, provenance=_ORIGINAL),
        Number("fetch_and_add / add_and_fetch",
               share.SOURCE_ATOMIC_SECONDS["sync_fetch_and_add"] / share.SOURCE_ATOMIC_SECONDS["sync_add_and_fetch"],
               "x", _form_ratio("sync_fetch_and_add"), "0.21 s / 0.23 s: returning the old value is a little faster",
               provenance=_ORIGINAL),
        Number("compare-and-swap loop / add_and_fetch",
               share.SOURCE_ATOMIC_SECONDS["sync_cas"] / share.SOURCE_ATOMIC_SECONDS["sync_add_and_fetch"],
               "x", _form_ratio("sync_cas"), "0.73 s / 0.23 s", provenance=_ORIGINAL),
    ),
    claims=(
        Claim("The compare-and-swap loop is clearly slower than both fetch-add forms.",
              "Drepper 6.4.2, fig. 6.12: 0.73 s against 0.23 s and 0.21 s; CAS is a lot more expensive: two "
              "memory operations, a more complicated operation, and a loop that retries when another thread "
              "got there first", _cas_slower),
        Claim("The two fetch-add forms cost about the same.",
              "Drepper 6.4.2, fig. 6.12: 0.23 s and 0.21 s are similar (9.5% apart); returning the old value "
              "is a little faster", _fetch_adds_close),
    ),
    script="experiments/fig6_12.py", notebook="notebooks/system.ipynb",
    note="The source ran four threads; memlab runs one pinned thread per CPU it may use, up to four (and one "
         "thread alone), so a two-CPU machine compares the forms with two threads. The source's 'execution "
         "time for 1 million increments by four concurrent threads' is compared as ratios between the forms; "
         "the seconds shown here read the million as per thread (each thread's time on the CPU for a million "
         "increments while all increment; time other processes took the CPU is left out). The claims use "
         "the source's __sync builtins; memlab measures the __atomic forms (add_fetch, fetch_add, cas) and "
         "the bare lock add beside them. A form whose threads ran together less than half of the time (on a "
         "busy machine they take turns on the CPUs and hardly compete) is not judged, and the claim says so.",
)


