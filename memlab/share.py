"""Cache-line sharing: what it costs threads to write near each other.

Drepper's test ("What every programmer should know about memory", 2007,
section 6.4.1, program of section 9.3): ``threads``
threads, pinned one per CPU, each add 1 to a counter ``increments`` times;
thread i's counter is ``disp_longs`` longs after thread i-1's (the source's DISP,
counted in 8-byte longs as its program does).

- ``disp_longs=0``: one counter shared by every thread (true sharing);
- ``disp_longs`` 1..7: distinct counters in one 64-byte cache line (false sharing);
- ``disp_longs >= 8``: each counter on its own line.

``atomic=True`` increments atomically, in the form ``atomic_op`` names
(Drepper's figure 6.12 compares them):

- ``lock_add`` (the default): the lock-prefixed add, what a compiler emits for
  an atomic increment whose value is not used;
- ``add_fetch`` / ``fetch_add``: ``__atomic_add_fetch`` / ``__atomic_fetch_add``
  with the value they return used (x86: ``lock xadd``, plus an ``add`` for
  add-and-fetch);
- ``cas``: a compare-and-swap loop (read, add one, swap if unchanged, else retry);
- ``sync_add_and_fetch``, ``sync_fetch_and_add``, ``sync_cas``: the same with the
  legacy ``__sync`` builtins the source wrote them with.

``atomic=False`` (``atomic_op="plain"``) is a plain load-add-store, which loses
updates when threads share one counter: ``lost_updates`` (the expected count
threads x increments minus the final count) reports them. The forms that
return a value are checked: ``returned_values_exact`` is 1 when the values
handed back were exactly the ones an atomic counter hands out (on one shared
counter, every value from 0 on exactly once); the compare-and-swap forms report
``cas_failures_per_increment`` (swaps retried because another thread got there
first).

Metrics: ``ns_per_increment`` is wall time over all increments of all
threads (the machine's cost per increment); ``ns_per_increment_per_thread``
is wall time over one thread's increments (what Drepper's figures plot);
``cpu_ns_per_increment`` is the threads' on-CPU time over all increments,
which leaves out time preempted by other processes.
"""

from __future__ import annotations

import array
import dataclasses
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memlab import chart, placement
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_bool, check_choice, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement
from memlab.units import metric_label

__all__ = [
    "ATOMIC_OPS",
    "PLACEMENTS",
    "PLAIN",
    "FAMILY",
    "ShareParams",
    "atomic_ops_figure",
    "atomic_ops_sweep",
    "compare_forms",
    "false_sharing_penalty",
    "false_sharing_sweep",
    "figure",
    "increment_form",
    "penalty",
    "counter_position",
    "run",
    "sharing_ratios",
    "thread_counts",
    "thread_cpus",
    "threads_figure",
]

MAX_THREADS = 1024
MAX_DISP = 1 << 20
#: The atomic increment forms (``atomic_op``), the lock-prefixed add first (the default).
ATOMIC_OPS = ("lock_add", "add_fetch", "fetch_add", "cas", "sync_add_and_fetch", "sync_fetch_and_add", "sync_cas")
#: How ``atomic_op`` reads for a plain (non-atomic) increment.
PLAIN = "plain"
#: Where the threads run (``placement``): memlab.placement's placements but one_cpu (the C core
#: refuses two threads on one CPU: they would take turns and share nothing at once).
PLACEMENTS = ("spread", "cores", "smt", "sockets", "unpinned")
#: The old ``pin``'s values, as a row or a command line spells them.
_OLD_PIN = {"true": True, "True": True, "1": True, "false": False, "False": False, "0": False}


@dataclass(frozen=True)
class ShareParams:
    """``threads`` threads incrementing counters ``disp_longs`` longs apart.

    ``threads`` defaults to 2, or 1 on a one-CPU machine.
    ``atomic_op``: the form of an atomic increment (:data:`ATOMIC_OPS`;
    None: ``lock_add`` when ``atomic``, ``plain`` when not).
    ``increments``: per thread; 0 adapts the count so that a sample lasts
    about the run's target_seconds. ``placement`` (:data:`PLACEMENTS`, see
    :func:`memlab.placement.choose`): ``spread`` (the default: one thread per
    CPU, one per core first, then SMT siblings; ValueError when there are
    more threads than CPUs), ``cores``, ``smt``, ``sockets``, or
    ``unpinned``. The C family receives the list (:func:`thread_cpus`) and
    only pins the threads to it. The old ``pin=True``/``False``
    (:data:`memlab.dataset.COLUMN_ALIASES`) reads as ``spread``/``unpinned``.
    """

    threads: int = field(default_factory=lambda: min(2, len(os.sched_getaffinity(0))))
    disp_longs: int = 8
    atomic: bool = True
    atomic_op: str | None = None
    increments: int = 0
    placement: str = "spread"

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("threads", self.threads, 1, MAX_THREADS)
        check_int("disp_longs", self.disp_longs, 0, MAX_DISP)
        object.__setattr__(self, "atomic", check_bool("atomic", self.atomic))
        if self.atomic_op is None:
            object.__setattr__(self, "atomic_op", ATOMIC_OPS[0] if self.atomic else PLAIN)
        check_choice("atomic_op", self.atomic_op, ATOMIC_OPS + (PLAIN,))
        if self.atomic and self.atomic_op == PLAIN:
            raise ValueError("atomic_op='plain' needs atomic=False")
        if not self.atomic and self.atomic_op != PLAIN:
            raise ValueError(f"atomic_op={self.atomic_op!r} needs atomic=True (plain increments: "
                             f"atomic_op='plain' or None)")
        check_int("increments", self.increments, 0, 1 << 40)
        old_pin = self.placement if isinstance(self.placement, bool) else (
            _OLD_PIN.get(self.placement) if isinstance(self.placement, str) else None)
        if old_pin is not None:  # a value of pin=, the old name: True pinned one thread per CPU
            object.__setattr__(self, "placement", "spread" if old_pin else "unpinned")
        check_choice("placement", self.placement, PLACEMENTS)
        allowed = len(os.sched_getaffinity(0))
        if self.placement == "spread" and self.threads > allowed:
            raise ValueError(f"threads={self.threads} is above the {allowed} CPUs this process may "
                             f"run on (placement='spread' pins one thread per CPU)")
        if self.placement not in ("spread", "unpinned"):
            placement.choose(self.placement, self.threads)  # ValueError if the machine cannot


def thread_cpus(params: ShareParams | Mapping[str, Any], cpu: int | None = None) -> list[int]:
    """The threads' CPUs as the C family receives them (-1: unpinned); ``cpu`` (``run(cpu=...)``)
    is the one thread's.

    >>> thread_cpus({"threads": 3, "placement": "unpinned"})
    [-1, -1, -1]
    """
    p = FAMILY.params(params)
    if cpu is not None:
        if p.threads > 1:
            raise placement.cpu_not_applicable("share", cpu, f"its {p.threads} threads need a CPU each (on one CPU "
                                               "they take turns and share nothing at once)")
        return [cpu]
    return placement.choose(p.placement, p.threads)


def _to_core(params: ShareParams, cpu: int | None = None) -> dict[str, Any]:
    """The C config: the parameters, with the CPUs (:func:`thread_cpus`) for ``placement``."""
    config = dataclasses.asdict(params)
    del config["placement"]
    config["cpus"] = array.array("i", thread_cpus(params, cpu))
    return config


def run(params: ShareParams | dict | None = None, **options: Any) -> Measurement:
    """Measure ns per increment for one (threads, disp_longs, atomic) point.

    >>> m = run(threads=1, disp_longs=0, atomic=True, increments=100_000, repeat=1, warmup=0)
    >>> m.median("final_count")
    100000.0
    """
    return FAMILY.run(params, **options)


def _samples(point: Measurement | Mapping[str, Any], metric: str) -> list[float]:
    if isinstance(point, Measurement):
        return [s[metric] for s in point.samples if metric in s]
    values = point.get(f"{metric}_samples") or []
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def penalty(
    shared: Measurement | Mapping[str, Any],
    own: Measurement | Mapping[str, Any],
    metric: str = "ns_per_increment",
) -> dict[str, float]:
    """How many times slower ``shared`` is than ``own``: the ratio of medians,
    its spread (the extreme ratios of their samples) and the ratio of the
    fastest samples (the least disturbed by other processes). Each argument is a
    Measurement or a dataset row (which keeps ``<metric>_samples``).

    >>> a = run(threads=1, disp_longs=1, increments=100_000, repeat=3, warmup=0)
    >>> sorted(penalty(a, a))
    ['ratio', 'ratio_max', 'ratio_min', 'ratio_of_fastest']
    """
    shared_values = _samples(shared, metric)
    own_values = _samples(own, metric)
    if not shared_values or not own_values:
        raise ValueError(f"metric={metric!r} is missing from the samples")
    return {
        "ratio": statistics.median(shared_values) / statistics.median(own_values),
        "ratio_min": min(shared_values) / max(own_values),
        "ratio_max": max(shared_values) / min(own_values),
        # the fastest samples are the least disturbed by other processes
        "ratio_of_fastest": min(shared_values) / min(own_values),
    }


def false_sharing_penalty(
    threads: int | None = None,
    atomic: bool = True,
    false_disp_longs: int = 1,
    own_disp_longs: int = 8,
    rounds: int = 7,
    metric: str = "ns_per_increment",
    **options: Any,
) -> dict[str, float]:
    """The false-sharing penalty: ``metric`` at disp_longs=false_disp_longs (one cache
    line) over disp_longs=own_disp_longs (a line each), measured alternately for
    ``rounds`` rounds so that both see the same load. Returns the ratio of
    medians, the median and extremes of the per-round ratios, and the ratio
    of the fastest samples.

    >>> p = false_sharing_penalty(threads=1, increments=100_000, rounds=2, warmup=0)
    >>> p["ratio"] > 0 and p["rounds"] == 2
    True
    """
    check_int("rounds", rounds, 1)
    point = {} if threads is None else {"threads": threads}
    options = {"repeat": 1, **options}
    shared: list[float] = []
    own: list[float] = []
    for index in range(rounds):
        order = (false_disp_longs, own_disp_longs) if index % 2 == 0 else (own_disp_longs, false_disp_longs)
        for disp in order:
            m = run(dict(point, disp_longs=disp, atomic=atomic), **options)
            (shared if disp == false_disp_longs else own).append(statistics.median(_samples(m, metric)))
    paired = [a / b for a, b in zip(shared, own)]
    return {
        "ratio": statistics.median(shared) / statistics.median(own),
        "ratio_min": min(paired),
        "ratio_max": max(paired),
        "paired_ratio_median": statistics.median(paired),
        "ratio_of_fastest": min(shared) / min(own),
        "rounds": rounds,
    }


def compare_forms(
    threads: int | None = None,
    forms: Sequence[str] = ATOMIC_OPS,
    base: str = "sync_add_and_fetch",
    rounds: int = 5,
    metric: str = "ns_per_increment_per_thread",
    disp_longs: int = 0,
    **options: Any,
) -> dict[str, dict[str, float]]:
    """Atomic increment forms measured in turn, round after round (the order rotating each round),
    so that all see the same load from other processes: for each form the median of ``metric``
    over the rounds, its extremes, and its ratio to ``base`` (median of the per-round ratios,
    with their extremes). The source's figure 6.12 compares them on one shared counter
    (``disp_longs=0``).

    >>> r = compare_forms(threads=1, forms=("add_fetch", "cas"), base="add_fetch", rounds=2,
    ...                   increments=20_000, warmup=0)
    >>> r["add_fetch"]["ratio"]
    1.0
    """
    check_int("rounds", rounds, 1)
    forms = list(forms)
    for form in (*forms, base):
        check_choice("atomic_op", form, ATOMIC_OPS)
    if base not in forms:
        forms.append(base)
    point = {} if threads is None else {"threads": threads}
    options = {"repeat": 1, **options}
    values: dict[str, list[float]] = {form: [] for form in forms}
    for index in range(rounds):
        shift = index % len(forms)
        for form in forms[shift:] + forms[:shift]:
            m = run(dict(point, disp_longs=disp_longs, atomic=True, atomic_op=form), **options)
            values[form].append(statistics.median(_samples(m, metric)))
    result = {}
    for form, series in values.items():
        paired = [a / b for a, b in zip(series, values[base])]
        result[form] = {
            "median": statistics.median(series), "min": min(series), "max": max(series),
            "ratio": statistics.median(paired), "ratio_min": min(paired), "ratio_max": max(paired),
            "rounds": rounds,
        }
    return result


def _derive(params: ShareParams, values: dict[str, float]) -> dict[str, float]:
    expected = values.get("expected_count", math.nan)
    lost = values.get("lost_updates", math.nan)
    return {"lost_fraction": lost / expected if expected else math.nan}


#: Increments per thread in the source's figures 6.10/6.11 (its program of section 9.3).
SOURCE_INCREMENTS = 500_000_000
#: Drepper's figures 6.10/6.11 ran 1 to 4 threads, one per processor.
SOURCE_THREADS = 4
#: Figure 6.12's table: 1 million increments by 4 threads (x86 at the time), in seconds.
SOURCE_ATOMIC_SECONDS = {"sync_add_and_fetch": 0.23, "sync_fetch_and_add": 0.21, "sync_cas": 0.73}


def thread_counts(limit: int = SOURCE_THREADS) -> list[int]:
    """1, 2, ... up to the CPUs this process may run on (at most ``limit``): one pinned thread per CPU.

    >>> thread_counts(1)
    [1]
    """
    check_int("limit", limit, 1, MAX_THREADS)
    return list(range(1, min(limit, len(os.sched_getaffinity(0))) + 1))


def false_sharing_sweep(quick: bool = False) -> Sweep:
    """Drepper's figures 6.10/6.11: time per thread against the number of threads (1 up to 4, as many
    as there are CPUs), one curve per placement of the counters (one counter, one cache line, a line
    each), plain increments as the source's figures and atomic ones (``lock_add``).

    Each point is a pinned run of about 0.2 s (``quick``: 0.05 s, fewer repetitions).
    ``experiments/false_sharing.py`` runs it and prints the penalty by thread count.

    >>> sorted({p["disp_longs"] for p in false_sharing_sweep(quick=True).points})
    [0, 1, 8]
    """
    disps = [0, 1, 8] if quick else [0, 1, 8, 16]
    return Sweep(
        name="false_sharing_quick" if quick else "false_sharing",
        family="share",
        points=grid(threads=thread_counts(), disp_longs=disps, atomic=[False, True]),
        repeat=5 if quick else 9,
        warmup=1,
        target_seconds=0.05 if quick else 0.2,
        description="false sharing: time per thread by thread count, per counter placement (Drepper 6.4.1, "
                    "figures 6.10/6.11)",
    )


def atomic_ops_sweep(quick: bool = False) -> Sweep:
    """Drepper's figure 6.12: every atomic increment form (:data:`ATOMIC_OPS`) on one shared counter,
    with 1 thread and with up to 4 (the source: 4 threads), pinned one per CPU.

    >>> len(atomic_ops_sweep(quick=True).points) == len(ATOMIC_OPS) * len({1, min(4, len(os.sched_getaffinity(0)))})
    True
    """
    threads = sorted({1, max(thread_counts())})
    return Sweep(
        name="atomic_ops_quick" if quick else "atomic_ops",
        family="share",
        points=grid(threads=threads, disp_longs=[0], atomic=[True], atomic_op=list(ATOMIC_OPS)),
        repeat=3 if quick else 9,
        warmup=1,
        target_seconds=0.05 if quick else 0.2,
        description="atomic increment forms on one shared counter (Drepper 6.4.2, figure 6.12)",
    )


def _quick_sweep() -> Sweep:
    return Sweep(
        name="quick",
        family="share",
        points=grid(threads=thread_counts(2), disp_longs=[0, 1, 8], atomic=[True, False]),
        repeat=3,
        warmup=1,
        target_seconds=0.1,
    )


def counter_position(disp_longs: int) -> str:
    """Where ``disp_longs`` puts the threads' counters, in words (64-byte cache lines).

    >>> counter_position(0), counter_position(1), counter_position(8)
    ('one counter', 'one cache line (false sharing)', 'a cache line each')
    """
    disp_longs = check_int("disp_longs", disp_longs, 0, MAX_DISP)
    if disp_longs == 0:
        return "one counter"
    if disp_longs < 8:
        return "one cache line (false sharing)" if disp_longs == 1 else f"one cache line, {disp_longs} longs apart"
    return "a cache line each" if disp_longs == 8 else f"a line each, {disp_longs} longs apart"


def sharing_ratios(data: Dataset | str, metric: str = "ns_per_increment_per_thread",
                   shared_disp_longs: int = 1, own_disp_longs: int = 8) -> dict[tuple, float]:
    """The false-sharing penalty by thread count, as the source states it (390%, 734%, 1147%):
    ``metric`` with the counters in one cache line over the same with a line each, for every
    (atomic_op, threads) the data holds both for.

    >>> rows = [{"family": "share", "threads": 2, "disp_longs": d, "atomic": False, "atomic_op": "plain",
    ...          "ns_per_increment_per_thread": t} for d, t in ((1, 6.0), (8, 2.0))]
    >>> sharing_ratios(Dataset(rows))
    {('plain', 2): 3.0}
    """
    ds = chart.as_dataset(data)
    cells: dict[tuple, dict[int, float]] = {}
    for row in ds.rows:
        if chart.finite(row.get(metric)) and row.get("disp_longs") in (shared_disp_longs, own_disp_longs):
            key = (increment_form(row), int(row["threads"]))
            cells.setdefault(key, {})[int(row["disp_longs"])] = float(row[metric])
    return {key: pair[shared_disp_longs] / pair[own_disp_longs] for key, pair in sorted(cells.items())
            if len(pair) == 2 and pair[own_disp_longs] > 0}


def increment_form(row: Mapping[str, Any]) -> str:
    """A row's increment form (datasets from before ``atomic_op`` have only ``atomic``)."""
    op = row.get("atomic_op")
    if isinstance(op, str) and op:
        return op
    return ATOMIC_OPS[0] if row.get("atomic") in (True, "True", "true", 1) else PLAIN


def figure(data: Dataset | str, metric: str | None = None):
    """The share family's standard figure, as the source draws it.

    Rows comparing atomic increment forms (``atomic_op`` varies among atomic rows) give
    :func:`atomic_ops_figure` (figure 6.12); otherwise :func:`threads_figure` (figures 6.10/6.11):
    time per thread against the number of threads, one curve per counter placement.

    >>> fig = figure("memlab-tour/share.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    ops = {increment_form(r) for r in ds.rows if increment_form(r) != PLAIN}
    if len(ops) > 1:
        return atomic_ops_figure(ds, metric)
    return threads_figure(ds, metric)


def threads_figure(data: Dataset | str, metric: str | None = None):
    """Figures 6.10/6.11: ns per increment per thread (each thread's share of the wall time, as the
    source's "time" for a fixed count per thread) against the number of threads, one curve per
    counter placement, one panel per increment form. The right axis reads the same as seconds for
    the source's 500 million increments per thread; the percentage over each thread count is the
    one-line time over the own-line time, the source's 390% / 734% / 1147%.

    >>> fig = threads_figure("results/share-false_sharing.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    metric = metric or ds.primary_metric(("ns_per_increment_per_thread",))
    rows = [r for r in chart.rows_with(ds, metric)
            if chart.finite(r.get("threads")) and chart.finite(r.get("disp_longs"))]
    if not rows:
        return chart.generic_figure(ds)
    panels: dict[str, list[dict]] = {}
    for row in rows:
        panels.setdefault(increment_form(row), []).append(row)
    order = [op for op in (PLAIN, *ATOMIC_OPS) if op in panels]
    fig, axes = chart.new_figure(max(6.0, 4.5 * len(order)), 4.8, ncols=len(order), sharey=True, squeeze=False)
    threads_seen = sorted({int(r["threads"]) for r in rows})
    ratios = sharing_ratios(ds, metric) if metric.endswith("per_thread") else {}
    for ax, op in zip(axes[0], order):
        members = panels[op]
        others = [n for n in chart.varying(members, ds.param_names)
                  if n not in ("threads", "disp_longs", "atomic", "atomic_op")]
        for curve in chart.groups(members, ["disp_longs", *others]).values():
            curve = sorted(curve, key=lambda r: r["threads"])
            extra = chart.label(curve[0], others) if others else ""
            ax.errorbar([r["threads"] for r in curve], [r[metric] for r in curve],
                        yerr=chart.spread(curve, metric), marker="o", markersize=4, capsize=2,
                        label=counter_position(int(curve[0]["disp_longs"])) + (f", {extra}" if extra else ""))
        for threads in threads_seen:
            ratio = ratios.get((op, threads))
            if ratio is not None and threads > 1:
                ax.annotate(f"{ratio:.0%}", (threads, 1.0), xycoords=("data", "axes fraction"),
                            xytext=(0, -12), textcoords="offset points", ha="center", fontsize=8)
        ax.set_xticks(threads_seen)
        ax.set_xlim(min(threads_seen) - 0.5, max(threads_seen) + 0.5)
        ax.set_xlabel("threads (one per CPU)")
        ax.set_title("plain increments (the source's figures)" if op == PLAIN else f"atomic: {op}", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
        if metric == "ns_per_increment_per_thread" and ax is axes[0][-1]:
            scale = SOURCE_INCREMENTS / 1e9
            second = ax.secondary_yaxis("right", functions=(lambda ns: ns * scale, lambda s: s / scale))
            second.set_ylabel("s for 500 million increments per thread", fontsize=8)
    axes[0][0].set_ylabel(metric_label(metric))
    cpus = len(os.sched_getaffinity(0))
    note = (f"this machine: {max(threads_seen)} thread(s) measured"
            + (f" ({cpus} CPUs here; the source ran 1-4)" if max(threads_seen) < SOURCE_THREADS else ""))
    chart.set_title(fig, ds, f"share: time per thread by number of threads; % = one line / own lines; {note}")
    return fig


def atomic_ops_figure(data: Dataset | str, metric: str | None = None):
    """Figure 6.12: ns per increment per thread of each atomic increment form on one shared counter,
    one bar colour per thread count; the number over a bar is its time relative to
    ``sync_add_and_fetch``, the source's first form (the source: add-and-fetch 0.23 s,
    fetch-and-add 0.21 s = 0.91x, compare-and-swap 0.73 s = 3.17x).

    >>> fig = atomic_ops_figure("results/share-atomic_ops.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    metric = metric or ds.primary_metric(("ns_per_increment_per_thread",))
    rows = [r for r in chart.rows_with(ds, metric) if increment_form(r) != PLAIN]
    base = {(r.get("threads"), r.get("disp_longs")): r[metric] for r in rows
            if increment_form(r) == "sync_add_and_fetch"}

    def relative(row: dict) -> str:
        ref = base.get((row.get("threads"), row.get("disp_longs")))
        return f"{row[metric] / ref:.2f}x" if ref else ""

    subset = Dataset(rows=rows, metadata=ds.metadata)
    return chart.bars_figure(subset, metric, category=["atomic_op"], series=["threads"], facet=["disp_longs"],
                             annotate=relative,
                             title="share: atomic increment forms on one counter (x sync_add_and_fetch; "
                                   "the source: 1, 0.91, 3.17 for its three)")


def threads_on_cpu(params: ShareParams) -> tuple[OnCpu, ...]:
    """Every thread works on its lines throughout (``Family.on_cpu``)."""
    return tuple(OnCpu(f"thread {index}", 1.0) for index in range(params.threads))


FAMILY = Family(
    name="share",
    params_type=ShareParams,
    core="share",
    to_core=_to_core,
    unit="increment",
    primary_metric="ns_per_increment",
    derive=_derive,
    sweeps={
        "quick": _quick_sweep,
        "false_sharing": false_sharing_sweep,
        "false_sharing_quick": lambda: false_sharing_sweep(quick=True),
        "atomic_ops": atomic_ops_sweep,
        "atomic_ops_quick": lambda: atomic_ops_sweep(quick=True),
    },
    description="threads incrementing counters disp_longs longs apart: false sharing and atomics",
    figure=figure,
    caption="Threads pinned one per CPU, each incrementing its counter a fixed number of times: time per "
            "thread against the number of threads, one curve per placement of the counters (one counter, "
            "one cache line = false sharing, a line each), as in Drepper's figures 6.10/6.11; the "
            "percentages are one line over own lines. Rows comparing atomic forms show figure 6.12 "
            "instead (lock add, add-and-fetch, fetch-and-add, compare-and-swap, the __sync builtins).",
    report_columns=("lost_updates", "cas_failures_per_increment"),
    one_cpu="workers",
    on_cpu=threads_on_cpu,
)
