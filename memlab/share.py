"""Cache-line sharing: what it costs threads to write near each other.

Drepper's test (seed 004, section 6.4.1, program of section 9.3): ``threads``
threads, pinned one per CPU, each add 1 to a counter ``increments`` times;
thread i's counter is ``disp_longs`` longs after thread i-1's (the seed's DISP,
counted in 8-byte longs as its program does).

- ``disp_longs=0``: one counter shared by every thread (true sharing);
- ``disp_longs`` 1..7: distinct counters in one 64-byte cache line (false sharing);
- ``disp_longs >= 8``: each counter on its own line.

``atomic=True`` uses a locked add; ``atomic=False`` a plain load-add-store,
which loses updates when threads share one counter: ``lost_updates`` (the
expected count threads x increments minus the final count) reports them.

Metrics: ``ns_per_increment`` is wall time over all increments of all
threads (the machine's cost per increment); ``ns_per_increment_per_thread``
is wall time over one thread's increments (what Drepper's figures plot);
``cpu_ns_per_increment`` is the threads' on-CPU time over all increments,
which leaves out time preempted by other processes.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

from memlab import chart
from memlab.dataset import Dataset
from memlab.family import Family, check_bool, check_int
from memlab.grid import Sweep, grid
from memlab.measure import Measurement
from memlab.units import metric_label

__all__ = ["FAMILY", "ShareParams", "false_sharing_penalty", "figure", "penalty", "run"]

MAX_THREADS = 1024
MAX_DISP = 1 << 20


@dataclass(frozen=True)
class ShareParams:
    """``threads`` threads incrementing counters ``disp_longs`` longs apart.

    ``threads`` defaults to 2, or 1 on a one-CPU machine.
    ``increments``: per thread; 0 adapts the count so that a sample lasts
    about the run's target_seconds. ``pin``: one thread per allowed CPU
    (ValueError when there are more threads than CPUs).
    """

    threads: int = field(default_factory=lambda: min(2, len(os.sched_getaffinity(0))))
    disp_longs: int = 8
    atomic: bool = True
    increments: int = 0
    pin: bool = True

    def __post_init__(self) -> None:
        check_int("threads", self.threads, 1, MAX_THREADS)
        check_int("disp_longs", self.disp_longs, 0, MAX_DISP)
        object.__setattr__(self, "atomic", check_bool("atomic", self.atomic))
        check_int("increments", self.increments, 0, 1 << 40)
        object.__setattr__(self, "pin", check_bool("pin", self.pin))
        if self.pin:
            allowed = len(os.sched_getaffinity(0))
            if self.threads > allowed:
                raise ValueError(
                    f"threads={self.threads} is above the {allowed} CPUs this process may "
                    f"run on (pin=True pins one thread per CPU)"
                )


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


def _derive(params: ShareParams, values: dict[str, float]) -> dict[str, float]:
    expected = values.get("expected_count", math.nan)
    lost = values.get("lost_updates", math.nan)
    return {"lost_fraction": lost / expected if expected else math.nan}


def _quick_sweep() -> Sweep:
    threads = min(2, len(os.sched_getaffinity(0)))
    return Sweep(
        name="quick",
        family="share",
        points=grid(threads=[threads], disp_longs=[0, 1, 8], atomic=[True, False]),
        repeat=3,
        warmup=1,
        target_seconds=0.1,
    )


def figure(data: Dataset | str, metric: str | None = None):
    """Cache-line sharing: ns per increment by ``disp_longs`` (longs between the threads' counters).

    0 shares one counter, 1..7 one cache line (false sharing), 8
    and more a line per thread. One line per other varying parameter
    (atomic, threads).

    >>> fig = figure("memlab-tour/share.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    metric = metric or ds.primary_metric(("ns_per_increment",))
    rows = [r for r in chart.rows_with(ds, metric) if chart.finite(r.get("disp_longs"))]
    if not rows:
        return chart.generic_figure(ds)
    disps = sorted({r["disp_longs"] for r in rows})
    others = [n for n in chart.varying(rows, ds.param_names) if n != "disp_longs"]
    fig, ax = chart.new_figure()
    for members in chart.groups(rows, others).values():
        members = sorted(members, key=lambda r: r["disp_longs"])
        xs = [disps.index(r["disp_longs"]) for r in members]
        ax.errorbar(xs, [r[metric] for r in members], yerr=chart.spread(members, metric), marker="o",
                    markersize=4, capsize=2, label=chart.label(members[0], others))
    ax.set_xticks(range(len(disps)))
    ax.set_xticklabels([str(int(d)) for d in disps])
    ax.set_xlabel("disp_longs (longs between counters; 8 longs = one 64-byte line)")
    ax.set_ylabel(metric_label(metric))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if others:
        ax.legend(fontsize=8)
    chart.set_title(fig, ds, "share: ns per increment by counter spacing")
    return fig


FAMILY = Family(
    name="share",
    params_type=ShareParams,
    core="share",
    unit="increment",
    primary_metric="ns_per_increment",
    derive=_derive,
    sweeps={"quick": _quick_sweep},
    description="threads incrementing counters disp_longs longs apart: false sharing and atomics",
    figure=figure,
    caption="Two threads incrementing counters disp_longs longs apart: one counter (0), one cache line "
            "(1-7, false sharing) or a line each (8 and more).",
    report_columns=("lost_updates",),
)
