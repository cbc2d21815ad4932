"""Loaded latency: the pointer chase's latency while other cores generate a throttled memory load.

One thread walks the chase family's random list (one element per line,
beyond the last cache, huge pages when THP gives them) while ``load_threads``
other threads run a bandwidth kernel (``load_op``, the load mix: ``read``;
``write``; ``copy``, one read per write like Intel MLC's 1:1 mix; ``add``,
dst += src, two reads per write like MLC's 2:1 mix) over working sets of
their own, each resting ``delay_ns`` after every 64 KiB chunk: the knob,
from 0 (as fast as they can, in 1 MiB chunks with no rest) to idle. A point reports the chaser's
``ns_per_element`` and the load's ``load_GB_per_s`` (bytes passed over, as
the bandwidth family counts them), ``load_read_GB_per_s`` and
``load_write_GB_per_s`` (bytes read and written, :data:`memlab.bandwidth.BYTES_READ_WRITTEN`
per byte passed) and ``load_traffic_GB_per_s`` (their sum: copy counts
twice, add three times), each load thread measured between its first and
last chunk inside the chaser's timed window, so that every thread is
measured over the same interval. Sweeping the delay draws the curve of
latency against achieved bandwidth: flat at low load, a knee, then queueing;
:func:`knees` names each mix's knee (:data:`KNEE_TOLERANCE`).

The threads are placed on distinct cores (``memlab.placement.choose``,
the chaser first): on a 2-CPU machine that is one load thread, which the
rows say (``load_threads``).

>>> m = run(working_set_bytes=1 << 20, load_working_set_bytes=1 << 20, load_threads=0,
...         repeat=1, warmup=0, target_seconds=0.01)
>>> m.median("ns_per_element") > 0
True
"""

from __future__ import annotations

import array
import dataclasses
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from memlab import chart, machine
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_choice, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement
from memlab.placement import choose

__all__ = ["FAMILY", "KNEE_MIN_POINTS", "KNEE_TOLERANCE", "Knee", "LOAD_MIXES", "LoadedParams", "LOAD_OPS",
           "beyond_caches_bytes", "figure", "find_knee", "knee_table", "knees", "run"]

#: The load mixes (``load_op``): what each load thread's kernel reads and writes.
LOAD_MIXES = {"read": "reads only", "write": "writes only", "copy": "1 read : 1 write",
              "add": "2 reads : 1 write"}
LOAD_OPS = tuple(LOAD_MIXES)
PAGE_KINDS = ("4k", "thp", "hugetlb-2m")
MAX_DELAY_NS = 10_000_000
#: A throttled load thread's chunk: each is followed by ``delay_ns`` of rest (the C core's LOADED_CHUNK_BYTES).
CHUNK_BYTES = 64 << 10
#: An unthrottled one's (``delay_ns=0``): each chunk boundary costs about one memory round trip, which
#: 64 KiB chunks paid 5-6% of the bandwidth family's rate for (LOADED_UNTHROTTLED_CHUNK_BYTES).
UNTHROTTLED_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 1 << 30
#: The delay knob of the named sweeps (ns of rest after every 64 KiB chunk of a load thread).
DELAYS_NS = (0, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 400000)
QUICK_DELAYS_NS = (0, 8000, 64000, 400000)


def _allowed() -> int:
    return len(os.sched_getaffinity(0))


def beyond_caches_bytes() -> int:
    """A working set past the last cache: twice the largest data cache as a power of two,
    at least 64 MiB and at most an eighth of the memory available.

    >>> beyond_caches_bytes() >= 64 << 20
    True
    """
    sizes = machine.cache_sizes()
    largest = max([size for name, size in sizes.items() if not name.endswith("i")] or [32 << 20])
    facts: dict[str, Any] = {}
    machine.collect_meminfo(facts)
    available = facts.get("memory_available_bytes") or (4 << 30)
    top = max(26, math.ceil(math.log2(2 * largest)))
    return 1 << max(20, min(top, int(math.log2(max(available // 8, 1 << 20)))))


@dataclass(frozen=True)
class LoadedParams:
    """The chaser's list, and the load beside it.

    - ``working_set_bytes``, ``pages``: the chaser's random list (chase with
      npad=7: one element per 64-byte line).
    - ``load_threads``: threads generating load, each on a core of its own
      (default: every allowed CPU but the chaser's); 0 measures the idle
      latency.
    - ``load_op``: the load mix, ``read``, ``write``, ``copy`` (1 read : 1 write)
      or ``add`` (dst += src: 2 reads : 1 write).
    - ``load_working_set_bytes``: each load thread's own set (a multiple of 64).
    - ``delay_ns``: busy rest after every 64 KiB chunk of a load thread
      (0: unthrottled, 1 MiB chunks with no rest; 400 000: nearly idle).
    - ``load_chunk_bytes``: the chunk instead (a multiple of 64, at most
      1 GiB); 0, the default, chooses as ``delay_ns`` says.
    """

    working_set_bytes: int = field(default_factory=beyond_caches_bytes)
    pages: str = "thp"
    load_threads: int = field(default_factory=lambda: max(0, _allowed() - 1))
    load_op: str = "read"
    load_working_set_bytes: int = field(default_factory=beyond_caches_bytes)
    delay_ns: int = 0
    load_chunk_bytes: int = 0

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("working_set_bytes", self.working_set_bytes, 1024, 1 << 46)
        check_choice("pages", self.pages, PAGE_KINDS)
        check_int("load_threads", self.load_threads, 0, 1023)
        check_choice("load_op", self.load_op, LOAD_OPS)
        check_int("load_working_set_bytes", self.load_working_set_bytes, 64 << 10, 1 << 46)
        check_int("delay_ns", self.delay_ns, 0, MAX_DELAY_NS)
        check_int("load_chunk_bytes", self.load_chunk_bytes, 0, MAX_CHUNK_BYTES)
        for name in ("load_working_set_bytes", "load_chunk_bytes"):  # the kernels move whole lines
            if getattr(self, name) % 64:
                raise ValueError(f"{name}={getattr(self, name)} is not a multiple of 64")
        allowed = _allowed()
        if self.load_threads + 1 > allowed:
            raise ValueError(
                f"load_threads={self.load_threads} needs {self.load_threads + 1} CPUs with the chaser's: "
                f"this process may use {allowed} (a load thread sharing a CPU would take turns with it)")


def _to_core(params: LoadedParams) -> dict[str, Any]:
    config = dataclasses.asdict(params)
    cpus = choose("cores", params.load_threads + 1)
    config["cpus"] = array.array("i", cpus)
    return config


def _derive(params: LoadedParams, values: dict[str, float]) -> dict[str, float]:
    """The chaser's latency over its CPU time (what it was while the walk ran); the lines the chaser
    read per second and the traffic of all the threads together over the window."""
    derived = {}
    ns, elapsed, cpu = values.get("ns_per_element"), values.get("elapsed_ns"), values.get("thread_cpu_ns")
    if ns and elapsed and cpu:
        derived["on_cpu_ns_per_element"] = cpu / (elapsed / ns)
    line = values.get("element_bytes")
    if ns and line and "load_traffic_GB_per_s" in values:
        derived["chaser_GB_per_s"] = line / ns  # one element per line: a line read per step, bytes per ns
        derived["total_traffic_GB_per_s"] = values["load_traffic_GB_per_s"] + derived["chaser_GB_per_s"]
    return derived


def run(params: LoadedParams | dict | None = None, **options: Any) -> Measurement:
    """Measure the chaser's ns per element and the load's GB/s over the same window.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    target_seconds, counters) are parameters of :class:`LoadedParams`.

    >>> m = run(working_set_bytes=1 << 20, load_working_set_bytes=1 << 20, load_threads=0,
    ...         repeat=1, warmup=0, target_seconds=0.01)
    >>> m.median("load_GB_per_s")
    0.0
    """
    return FAMILY.run(params, **options)


#: The knee's band: the knee is the highest load up to which the latency stays within this
#: fraction above the unloaded (idle) latency (0.10: within 10%).
KNEE_TOLERANCE = 0.10
#: Loaded points a curve needs before a knee is looked for.
KNEE_MIN_POINTS = 3


@dataclass(frozen=True)
class Knee:
    """The knee of one latency-against-bandwidth curve (see :func:`find_knee`).

    ``status``: ``knee`` (the curve leaves the band after a flat part;
    ``GB_per_s`` and ``ns_per_element`` are the last point inside it),
    ``flat`` (never leaves it), ``rising`` (already outside at the lightest
    load measured), ``too few points``, ``no idle point``. ``reason`` says it
    in a sentence with the numbers.
    """

    status: str
    reason: str
    GB_per_s: float | None = None
    ns_per_element: float | None = None
    idle_ns_per_element: float | None = None
    tolerance: float = KNEE_TOLERANCE
    points: int = 0
    load_op: str = ""


def find_knee(points: Sequence[tuple[float, float]], idle_ns: float | None,
              tolerance: float = KNEE_TOLERANCE, min_points: int = KNEE_MIN_POINTS) -> Knee:
    """The knee of a curve of (GB/s, ns) points: the last point, in order of bandwidth, before the
    latency first rises more than ``tolerance`` above ``idle_ns``.

    The band is ``idle_ns * (1 + tolerance)``; the points (loaded ones only, the idle
    latency apart) are taken in order of increasing GB/s. A point back inside the band after the
    curve has left it does not move the knee (the first exit marks it).

    >>> find_knee([(1, 100), (5, 104), (9, 108), (10, 150), (11, 300)], 100).GB_per_s
    9.0
    >>> find_knee([(1, 100), (5, 101)], 100).status
    'too few points'
    """
    check_int("min_points", min_points, 1)
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance={tolerance!r} must be a finite number >= 0 (0.1: within 10%)")
    curve = sorted((float(x), float(y)) for x, y in points if math.isfinite(x) and math.isfinite(y))
    percent = f"{tolerance:.0%}"
    if idle_ns is None or not math.isfinite(idle_ns) or idle_ns <= 0:
        return Knee("no idle point", "no unloaded latency to compare with (a point with load_threads=0)",
                    tolerance=tolerance, points=len(curve))
    if len(curve) < min_points:
        return Knee("too few points", f"{len(curve)} loaded point{'s' if len(curve) != 1 else ''}: "
                    f"a knee needs at least {min_points}", idle_ns_per_element=idle_ns,
                    tolerance=tolerance, points=len(curve))
    band = idle_ns * (1 + tolerance)
    inside = 0
    while inside < len(curve) and curve[inside][1] <= band:
        inside += 1
    if inside == 0:
        x, y = curve[0]
        return Knee("rising", f"already {y / idle_ns - 1:.0%} above the idle {idle_ns:.4g} ns at the lightest "
                    f"load measured ({x:.3g} GB/s): no flat part (measure lighter loads)",
                    idle_ns_per_element=idle_ns, tolerance=tolerance, points=len(curve))
    x, y = curve[inside - 1]
    if inside == len(curve):
        return Knee("flat", f"within {percent} of the idle {idle_ns:.4g} ns up to {x:.3g} GB/s, the most this "
                    "load reached: no knee", idle_ns_per_element=idle_ns, tolerance=tolerance,
                    points=len(curve))
    after_x, after_y = curve[inside]
    return Knee("knee", f"within {percent} of the idle {idle_ns:.4g} ns up to {x:.3g} GB/s ({y:.4g} ns); "
                f"{after_y / idle_ns - 1:.0%} above it at {after_x:.3g} GB/s", GB_per_s=x, ns_per_element=y,
                idle_ns_per_element=idle_ns, tolerance=tolerance, points=len(curve))


def _curves(ds: Dataset, metric: str) -> tuple[list[dict], dict[str, list[dict]]]:
    """The idle rows and each mix's loaded rows (those with a finite metric and traffic)."""
    rows = [r for r in chart.rows_with(ds, metric) if chart.finite(r.get("load_traffic_GB_per_s"))]
    if not rows:
        raise ValueError("no row of the dataset has a finite load_traffic_GB_per_s")
    idle = [r for r in rows if chart.number(r.get("load_threads")) == 0]
    curves: dict[str, list[dict]] = {}
    for r in rows:
        if chart.number(r.get("load_threads")) != 0:
            curves.setdefault(str(r.get("load_op")), []).append(r)
    return idle, curves


def knees(data: Dataset | str | os.PathLike, metric: str = "ns_per_element",
          tolerance: float = KNEE_TOLERANCE) -> list[Knee]:
    """Each load mix's knee (:func:`find_knee`): latency ``metric`` against ``load_traffic_GB_per_s``,
    the idle latency the median of the rows with no load thread.

    >>> [k.load_op for k in knees("results/loaded.csv")]   # doctest: +SKIP
    ['read', 'write', 'copy', 'add']
    """
    idle, curves = _curves(chart.as_dataset(data), metric)
    idle_ns = statistics.median(float(r[metric]) for r in idle) if idle else None
    return [dataclasses.replace(find_knee([(float(r["load_traffic_GB_per_s"]), float(r[metric])) for r in rows],
                                          idle_ns, tolerance), load_op=op)
            for op, rows in curves.items()]


def knee_table(data: Dataset | str | os.PathLike, metric: str = "ns_per_element",
               tolerance: float = KNEE_TOLERANCE) -> str:
    """A text table: per load mix, the knee's GB/s and latency (or why there is none).

    >>> print(knee_table("results/loaded.csv"))   # doctest: +SKIP
    """
    lines = [f"knee of {metric} against load_traffic_GB_per_s: the last point within "
             f"{tolerance:.0%} of the idle latency",
             f"{'load_op':<8} {'mix':<18} {'status':<15} {'knee_GB_per_s':>13} {'knee_' + metric:>20}  reason"]
    width = max(20, len("knee_" + metric))
    for k in knees(data, metric, tolerance):
        gbs = f"{k.GB_per_s:.3g}" if k.GB_per_s is not None else "-"
        ns = f"{k.ns_per_element:.4g}" if k.ns_per_element is not None else "-"
        lines.append(f"{k.load_op:<8} {LOAD_MIXES.get(k.load_op, '?'):<18} {k.status:<15} {gbs:>13} "
                     f"{ns:>{width}}  {k.reason}")
    return "\n".join(lines)


def figure(data: Dataset | str | os.PathLike, metric: str = "ns_per_element"):
    """The chaser's latency (y, ns per element) against the load's traffic (x, GB/s), one curve per load mix.

    Points with no load thread (the idle latency) start every curve at 0 GB/s;
    vertical bars are the latency's min..max over the repetitions. The dotted
    line is the knee's band (idle latency + :data:`KNEE_TOLERANCE`); a hollow
    diamond marks each mix's knee (:func:`knees`), which its legend entry names.

    >>> fig = figure("results/loaded.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    idle, curves = _curves(ds, metric)
    found = {k.load_op: k for k in knees(ds, metric)}
    fig, ax = chart.new_figure()
    for op, loaded_rows in (curves or {"read": []}).items():
        members = sorted(idle + loaded_rows, key=lambda r: float(r["load_traffic_GB_per_s"]))
        xs = [float(r["load_traffic_GB_per_s"]) for r in members]
        ys = [float(r[metric]) for r in members]
        threads = sorted({int(chart.number(r["load_threads"])) for r in members if chart.number(r["load_threads"])})
        detail = [LOAD_MIXES[op]] if op in LOAD_MIXES else []
        if threads:
            detail.append(f"{', '.join(map(str, threads))} load thread{'s' if threads != [1] else ''}")
        knee = found.get(op)
        if knee:
            detail.append(f"knee {knee.GB_per_s:.3g} GB/s, {knee.ns_per_element:.4g} ns" if knee.status == "knee"
                          else f"no knee: {knee.status}")
        label = f"load_op={op}" + (f" ({', '.join(detail)})" if detail else "")
        bars = chart.spread(members, metric)
        line = ax.errorbar(xs, ys, yerr=bars, marker="o", capsize=2, label=label)[0]
        if knee and knee.status == "knee":
            ax.plot([knee.GB_per_s], [knee.ns_per_element], marker="D", markersize=11, fillstyle="none",
                    color=line.get_color(), linestyle="none")
    if idle:
        band = statistics.median(float(r[metric]) for r in idle) * (1 + KNEE_TOLERANCE)
        ax.axhline(band, color="grey", linestyle=":", linewidth=1,
                   label=f"idle + {KNEE_TOLERANCE:.0%} (the knee's band)")
    ax.set_xlabel("load traffic (GB/s, read + written, over the chaser's window)")
    ax.set_ylabel(metric.replace("_per_", " per ").replace("_", " "))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    chart.set_title(fig, ds, "loaded: chase latency against the bandwidth other cores draw")
    return fig


def _curve(name: str, ops: tuple[str, ...], delays: tuple[int, ...], repeat: int, target: float,
           working_set: int | None = None) -> Sweep:
    threads = max(0, _allowed() - 1)
    if threads == 0:
        raise ValueError(f"sweep {name!r} needs two CPUs (the chaser and a load thread): this process "
                         f"may use {_allowed()}")
    sizes = {} if working_set is None else {"working_set_bytes": working_set,
                                            "load_working_set_bytes": working_set}
    base = {"load_threads": threads, **sizes}
    points = [{"load_op": "read", "delay_ns": 0, **base, "load_threads": 0}]
    points += [{**base, **p} for p in grid(load_op=list(ops), delay_ns=list(delays))]
    return Sweep(name, "loaded", points, repeat=repeat, warmup=1, target_seconds=target,
                 description=f"latency against load: {', '.join(ops)} x delays {delays[0]}..{delays[-1]} ns, "
                             f"{threads} load thread{'s' if threads > 1 else ''}")


def _curve_sweep() -> Sweep:
    return _curve("curve", LOAD_OPS, DELAYS_NS, 5, 0.2)


def _curve_quick_sweep() -> Sweep:
    return _curve("curve_quick", ("read", "copy", "add"), QUICK_DELAYS_NS, 3, 0.1)


def _quick_sweep() -> Sweep:
    return _curve("quick", ("read",), (0, 400000), 2, 0.05, working_set=64 << 20)


def chaser_on_cpu(params: LoadedParams) -> tuple[OnCpu, ...]:
    """The chasing thread walks throughout; a load thread rests ``delay_ns`` after each chunk (a
    throttled one is nearly idle), so only an unthrottled one (``delay_ns=0``) is counted on
    (``Family.on_cpu``)."""
    if params.delay_ns == 0:
        load = tuple(OnCpu(f"load thread {index} (unthrottled)", 1.0) for index in range(params.load_threads))
    else:
        load = tuple(OnCpu(f"load thread {index} (rests between chunks)", 0.0) for index in range(params.load_threads))
    return (OnCpu("the chasing thread", 1.0), *load)


FAMILY = Family(
    name="loaded",
    params_type=LoadedParams,
    core="loaded",
    to_core=_to_core,
    derive=_derive,
    unit="element",
    primary_metric="ns_per_element",
    sweeps={"quick": _quick_sweep, "curve": _curve_sweep, "curve_quick": _curve_quick_sweep},
    description="chase latency while other cores load memory with a throttled bandwidth kernel",
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.2,
    figure=figure,
    caption="Latency of a random pointer chase beyond the caches (ns per element) against the memory "
            "traffic the load threads achieved in the same window (GB/s, bytes read plus written), one "
            "curve per load mix (read, write, copy 1:1, add 2:1); each point is one delay of the "
            "throttle, the leftmost the idle latency; a hollow diamond marks a knee, the last point "
            f"within {KNEE_TOLERANCE:.0%} of the idle latency (the dotted line).",
    report_columns=("load_traffic_GB_per_s", "on_cpu_ns_per_element", "load_cpu_fraction"),
    one_cpu="refused",
    one_cpu_refusal="the chaser and each load thread are placed on a core of their own",
    on_cpu=chaser_on_cpu,
)
