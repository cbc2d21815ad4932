"""Core-to-core latency: how long a cache line takes to go from one CPU to another and back.

Two threads, pinned to ``cpu_a`` and ``cpu_b``, bounce one cache line: A
turns the counter in the line from 2k to 2k + 1, B from 2k + 1 to 2k + 2, so
each round trip moves the line A -> B -> A (the method of multichase's
``pingpong`` and of the public core-to-core latency tools). ``method="cas"``
takes each step with a locked compare-and-swap retried until it succeeds;
``method="store"`` spins reading the line until it holds the expected value,
then stores.

The chunks take turns over ``lines`` lines (256 by default), each on a page
of its own: a line's round trip depends on its address (on a mesh of cache
slices, where its home slice sits), and one line per run would draw the
result from that spread.

Metrics: ``round_trip_ns`` (median over chunks of 200 round trips, so that
a chunk in which the scheduler took a CPU away does not set the result),
``one_way_ns`` (half of it), ``fastest_chunk_round_trip_ns``,
``fastest_line_round_trip_ns`` and ``slowest_line_round_trip_ns`` (the
lines' own medians, the spread the address makes), the runner's
``ns_per_round_trip`` (the whole window over all round trips), where the
threads ran (``ran_on_cpu_a``, ``ran_on_cpu_b``), their CPU fractions, and
what sysfs says the two CPUs share: ``smt_siblings`` (1: one core),
``same_package``, ``shared_cache_level`` (the lowest cache level both use,
0 for none).

The matrix is a sweep over every ordered pair of the CPUs this process may
use (``matrix`` and ``matrix_quick``); :func:`figure` draws it as a heat map
with the values printed and the topology marked, :func:`matrix` gives it as
numbers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from memlab import chart, placement
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_choice, check_int, coerce_fields
from memlab.grid import Sweep
from memlab.measure import Measurement
from memlab.units import metric_label

__all__ = ["FAMILY", "CoreToCoreParams", "METHODS", "figure", "matrix", "pairs", "relation", "run"]

METHODS = ("cas", "store")
MAX_CPU = 4095
#: The lines a sample's chunks take turns over (one page each), and the most the C core takes.
DEFAULT_LINES = 256
MAX_LINES = 1024


@dataclass(frozen=True)
class CoreToCoreParams:
    """A line bounced between a thread on ``cpu_a`` (which starts each round trip) and one on ``cpu_b``.

    ``method``: ``cas`` (locked compare-and-swap) or ``store`` (spin on
    loads, then a plain store). ``lines``: how many lines the chunks take
    turns over, each on a page of its own (a line's round trip depends on
    its address: the cache slice that is its home). The two CPUs must differ
    and be CPUs this process may use (checked when the run starts, with the
    allowed list).
    """

    cpu_a: int = 0
    cpu_b: int = 1
    method: str = "cas"
    lines: int = DEFAULT_LINES

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("cpu_a", self.cpu_a, 0, MAX_CPU)
        check_int("cpu_b", self.cpu_b, 0, MAX_CPU)
        check_choice("method", self.method, METHODS)
        check_int("lines", self.lines, 1, MAX_LINES)
        if self.cpu_a == self.cpu_b:
            raise ValueError(
                f"cpu_a={self.cpu_a} and cpu_b={self.cpu_b} are one CPU: bouncing a line needs two "
                "CPUs (two threads sharing one CPU would measure the scheduler's switches)")


def relation(cpu_a: int, cpu_b: int, root: str = "/") -> dict[str, float]:
    """What sysfs says two CPUs share: ``smt_siblings``, ``same_package`` (1 or 0) and
    ``shared_cache_level`` (the lowest data or unified cache level both use; 0: none).

    >>> sorted(relation(0, 0))
    ['same_package', 'shared_cache_level', 'smt_siblings']
    """
    return placement.facts([cpu_a, cpu_b], root)


def _derive(params: CoreToCoreParams, values: dict[str, float]) -> dict[str, float]:
    return relation(params.cpu_a, params.cpu_b)


def run(params: CoreToCoreParams | dict | None = None, **options: Any) -> Measurement:
    """Measure the round trip (ns) of a cache line between ``cpu_a`` and ``cpu_b``.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    target_seconds, counters) are parameters of :class:`CoreToCoreParams`.

    >>> m = run(cpu_a=0, cpu_b=1, repeat=1, warmup=0, target_seconds=0.02)  # doctest: +SKIP
    >>> m.median("round_trip_ns") > 0                                       # doctest: +SKIP
    True
    """
    return FAMILY.run(params, **options)


def pairs(cpus: list[int] | None = None) -> list[tuple[int, int]]:
    """Every ordered pair of distinct CPUs among ``cpus`` (default: those this process may use).

    >>> pairs([0, 1, 2])
    [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    """
    cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    return [(a, b) for a in cpus for b in cpus if a != b]


def matrix(data: Dataset | str | os.PathLike, metric: str = "round_trip_ns",
           method: str | None = None) -> tuple[list[int], list[list[float]]]:
    """The CPUs and the matrix ``values[i][j]`` of ``metric`` from ``cpus[i]`` (A) to ``cpus[j]`` (B).

    The diagonal and pairs the dataset lacks are NaN; with several methods
    in the data, ``method`` picks one (default: the first seen).

    >>> matrix(Dataset([{"family": "core_to_core", "cpu_a": 0, "cpu_b": 1, "method": "cas",
    ...                  "round_trip_ns": 80.0}]))
    ([0, 1], [[nan, 80.0], [nan, nan]])
    """
    ds = chart.as_dataset(data)
    rows = chart.rows_with(ds, metric)
    methods = list(dict.fromkeys(r.get("method") for r in rows))
    chosen = method if method is not None else methods[0]
    if chosen not in methods:
        raise ValueError(f"method={chosen!r} is not in the dataset (it has {', '.join(map(str, methods))})")
    rows = [r for r in rows if r.get("method") == chosen]
    cpus = sorted({int(r["cpu_a"]) for r in rows} | {int(r["cpu_b"]) for r in rows})
    index = {cpu: i for i, cpu in enumerate(cpus)}
    values = [[math.nan] * len(cpus) for _ in cpus]
    for r in rows:
        values[index[int(r["cpu_a"])]][index[int(r["cpu_b"])]] = float(r[metric])
    return cpus, values


def _mark(row: dict[str, Any]) -> str:
    if chart.number(row.get("smt_siblings")) == 1:
        return "SMT"
    level = chart.number(row.get("shared_cache_level"))
    if math.isfinite(level) and level > 0:
        return f"L{int(level)}"
    if chart.number(row.get("same_package")) == 1:
        return "pkg"
    if chart.finite(row.get("same_package")):
        return "x-pkg"
    return ""


def figure(data: Dataset | str | os.PathLike, metric: str = "round_trip_ns"):
    """Heat map of ``metric`` (ns) from every CPU (rows: A, which starts) to every other (columns: B).

    One panel per method; each cell prints the value and what the two CPUs
    share (SMT siblings, the lowest shared cache level L1/L2/L3, one package,
    or x-pkg for two packages); pairs not measured stay blank.

    >>> fig = figure("results/core_to_core.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = chart.rows_with(ds, metric)
    methods = list(dict.fromkeys(r.get("method") for r in rows))
    fig, axes = chart.new_figure(width=max(5.0, 4.2 * len(methods)), height=4.6, ncols=len(methods),
                                 squeeze=False)
    finite_values = [float(r[metric]) for r in rows]
    low, high = min(finite_values), max(finite_values)
    image = None
    for ax, method in zip(axes[0], methods):
        cpus, values = matrix(ds, metric, method)
        marks = {(int(r["cpu_a"]), int(r["cpu_b"])): _mark(r) for r in rows if r.get("method") == method}
        image = ax.imshow(values, cmap="viridis", vmin=low, vmax=high if high > low else low + 1)
        ax.set_xticks(range(len(cpus)), [str(c) for c in cpus])
        ax.set_yticks(range(len(cpus)), [str(c) for c in cpus])
        ax.set_xlabel("CPU of thread B (answers)")
        ax.set_ylabel("CPU of thread A (starts)")
        ax.set_title(f"method={method}")
        middle = (low + high) / 2
        small = len(cpus) > 12
        for i, a in enumerate(cpus):
            for j, b in enumerate(cpus):
                value = values[i][j]
                if not math.isfinite(value):
                    continue
                text = f"{value:.0f}" if small else f"{value:.0f}\n{marks.get((a, b), '')}".rstrip()
                ax.text(j, i, text, ha="center", va="center", fontsize=6 if small else 8,
                        color="black" if value > middle else "white")
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), label=metric_label(metric))
    chart.set_title(fig, ds, "core_to_core: round trip of a cache line between two CPUs")
    return fig


def _pair_sweep(name: str, methods: tuple[str, ...], cpus: list[int] | None, repeat: int,
                target_seconds: float, description: str) -> Sweep:
    points = [{"cpu_a": a, "cpu_b": b, "method": m} for m in methods for a, b in pairs(cpus)]
    if not points:
        raise ValueError(f"sweep {name!r} needs two CPUs: this process may use only "
                         f"{sorted(os.sched_getaffinity(0))}")
    return Sweep(name, "core_to_core", points, repeat=repeat, warmup=1, target_seconds=target_seconds,
                 description=description)


def _matrix_sweep() -> Sweep:
    return _pair_sweep("matrix", METHODS, None, 7, 0.1,
                       "every ordered pair of the CPUs this process may use, cas and store")


def _matrix_quick_sweep() -> Sweep:
    return _pair_sweep("matrix_quick", ("cas",), None, 3, 0.05,
                       "every ordered pair of the CPUs this process may use, cas only, short samples")


def _quick_sweep() -> Sweep:
    cpus = sorted(os.sched_getaffinity(0))[:2]
    return _pair_sweep("quick", ("cas",), cpus, 3, 0.05, "the first two CPUs, both directions")


def bouncers_on_cpu(params: CoreToCoreParams) -> tuple[OnCpu, OnCpu]:
    """Both threads spin on the line throughout (``Family.on_cpu``)."""
    return (OnCpu(f"thread A on CPU {params.cpu_a} (spins)", 1.0), OnCpu(f"thread B on CPU {params.cpu_b} (spins)", 1.0))


FAMILY = Family(
    name="core_to_core",
    params_type=CoreToCoreParams,
    core="core_to_core",
    unit="round_trip",
    primary_metric="round_trip_ns",
    derive=_derive,
    sweeps={"quick": _quick_sweep, "matrix": _matrix_sweep, "matrix_quick": _matrix_quick_sweep},
    description="round trip of one cache line bounced between two pinned threads",
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.1,
    figure=figure,
    caption="Round trip (ns, median over chunks of 200) of one cache line bounced between a thread on "
            "the row's CPU and one on the column's; a cell also says what the two CPUs share (SMT: one "
            "core, Ln: the lowest shared cache level, pkg: one package, x-pkg: two).",
    report_columns=("one_way_ns", "fastest_chunk_round_trip_ns", "shared_cache_level"),
    one_cpu="refused",
    one_cpu_refusal="cpu_a and cpu_b place its two threads (the calling thread only waits)",
    on_cpu=bouncers_on_cpu,
)
