"""Repetitions, warm-up, pinning and statistics around one C kernel.

A family's kernel produces *samples* (one per call of its ``measure``); this
module runs warm-up samples, then ``repeat`` kept samples, derives the
per-unit metrics (``ns_per_<unit>``, ``cycles_per_<unit>``, ``GiB_per_s`` ...)
and summarises every metric with its median and spread, keeping the raw
samples.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from memlab._core import Kernel
from memlab.conditions import conditions_warning, cpu_seconds, read_cpu_times, steal_fraction
from memlab.dataset import (
    SAMPLES,
    STATISTICS,
    context_column,
    counter_column,
    merge_facts,
    metric_column,
    statistic_column,
)
from memlab.display import table_html
from memlab.units import format_number, format_param

__all__ = [
    "MAX_REPEAT",
    "MAX_WARMUP",
    "Measurement",
    "core_ghz",
    "cpu_seconds",
    "core_ghz_detail",
    "measure",
    "pinned",
    "summarize",
]

#: Upper bounds of the kept and warm-up samples per point: beyond them a run
#: would take days and its samples a large share of memory.
MAX_REPEAT = 10_000
MAX_WARMUP = 1_000

_last_measurement_end: float | None = None
_core_ghz: float | None = None
_core_ghz_detail: dict[str, Any] | None = None


@dataclass
class Measurement:
    """One point of an experiment: parameters, samples and their summary.

    ``samples`` holds one dict per kept repetition (metric name -> value);
    ``stats`` maps each metric to its median, min, max, mean, stdev and IQR.
    """

    family: str
    params: dict[str, Any]
    samples: list[dict[str, float]]
    counters: list[dict[str, float]]
    counters_missing: dict[str, str]
    counters_scope: str
    warmup_samples: list[dict[str, float]]
    primary_metric: str
    context: dict[str, Any] = field(default_factory=dict)
    #: What the point asked of the kernel and got, in words (``pages_obtained``, ``populate_used``
    #: ...: memlab.dataset.OUTCOME_COLUMNS), over the kept samples ("mixed" where they differed).
    facts: dict[str, str] = field(default_factory=dict)

    @property
    def on_cpu_fraction(self) -> float:
        """CPU time of the kept samples over their wall time (NaN when unknown)."""
        return _float(self.context.get("on_cpu_fraction"))

    @property
    def steal_fraction(self) -> float:
        """Stolen share of the busy CPU time during the kept samples (NaN when unknown)."""
        return _float(self.context.get("steal_fraction"))

    @property
    def on_cpu_expected(self) -> float:
        """The on-CPU fraction its family expects of it (``Family.on_cpu``; 1.0 when not said)."""
        value = _float(self.context.get("on_cpu_expected", 1.0))
        return 1.0 if math.isnan(value) else value

    @property
    def conditions_warning(self) -> str:
        """Why this measurement's numbers are suspect ("" when they are not): on CPU below 90% of
        what its family expects (:attr:`on_cpu_expected`), or more than 2% steal."""
        return conditions_warning(self.on_cpu_fraction, self.steal_fraction, self.on_cpu_expected)

    @property
    def metric_names(self) -> list[str]:
        names: list[str] = []
        for sample in self.samples:
            for name in sample:
                if name not in names:
                    names.append(name)
        return names

    @property
    def stats(self) -> dict[str, dict[str, float]]:
        return {
            name: summarize([s[name] for s in self.samples if name in s])
            for name in self.metric_names
        }

    def median(self, metric: str | None = None) -> float:
        """Median of a metric over the kept samples (the primary by default)."""
        return self.stats[metric or self.primary_metric]["median"]

    def __getitem__(self, metric: str) -> float:
        return self.median(metric)

    def to_row(self) -> dict[str, Any]:
        """Flatten into one dataset row (the row schema of memlab.dataset, docs/dataset.md).

        A metric whose name the schema reserves (``core_GHz_min`` would be
        ``core_GHz``'s minimum) is a ValueError naming the family.
        """
        row: dict[str, Any] = {"family": self.family}
        row.update(self.params)
        row.update(self.facts)
        for name, stat in self.stats.items():
            try:
                column = metric_column(name, self.params)
            except ValueError as error:
                raise ValueError(f"family {self.family!r}: {error}") from None
            row[column] = stat["median"]
            for stat_name in STATISTICS:
                row[statistic_column(column, stat_name)] = stat[stat_name]
            row[statistic_column(column, SAMPLES)] = [s.get(name, math.nan) for s in self.samples]
        counter_names: list[str] = []
        for sample in self.counters:
            counter_names.extend(n for n in sample if n not in counter_names)
        for name in counter_names:
            values = [c[name] for c in self.counters if name in c]
            row[counter_column(name)] = statistics.median(values) if values else math.nan
        row["counters_missing"] = dict(self.counters_missing)
        row["counters_scope"] = self.counters_scope
        row["repeat"] = len(self.samples)
        row["warmup_samples"] = [s.get(self.primary_metric, math.nan) for s in self.warmup_samples]
        for key, value in self.context.items():
            row[context_column(key)] = value
        return row

    def _repr_html_(self) -> str:
        """What a notebook shows: the parameters, then each metric's median with its min … max
        over the kept samples (the primary first), and the conditions flag."""
        params = ", ".join(f"{n}={format_param(n, v)}" for n, v in self.params.items())
        heading = f"Measurement: {self.family}, {len(self.samples)} samples" + (f"; {params}" if params else "")
        stats = self.stats
        names = [self.primary_metric] * (self.primary_metric in stats) + [n for n in stats if n != self.primary_metric]
        rows = [[name, format_number(stats[name]["median"]),
                 f"{format_number(stats[name]['min'])} … {format_number(stats[name]['max'])}"] for name in names]
        warning = self.conditions_warning
        return table_html(heading, ["metric", "median", "min … max"], rows, flags=[warning] if warning else [],
                          flagged=[bool(warning) and index == 0 for index in range(len(rows))])

    def __repr__(self) -> str:
        stat = self.stats.get(self.primary_metric)
        if not stat:
            return f"Measurement({self.family}, no samples)"
        return (
            f"Measurement({self.family}, {self.primary_metric}={stat['median']:.4g} "
            f"[{stat['min']:.4g}..{stat['max']:.4g}], n={len(self.samples)})"
        )


def summarize(values: list[float]) -> dict[str, float]:
    """Median, min, max, mean, sample stdev and interquartile range."""
    clean = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not clean:
        return {"median": math.nan, **{name: math.nan for name in STATISTICS}}
    if len(clean) >= 2:
        quartiles = statistics.quantiles(clean, n=4, method="inclusive")
        iqr = quartiles[2] - quartiles[0]
        stdev = statistics.stdev(clean)
    else:
        iqr = 0.0
        stdev = 0.0
    return {
        "median": statistics.median(clean),
        "min": min(clean),
        "max": max(clean),
        "mean": statistics.fmean(clean),
        "stdev": stdev,
        "iqr": iqr,
    }


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Pin the calling process to one CPU for the duration (None: no change)."""
    if cpu is None:
        yield
        return
    allowed = os.sched_getaffinity(0)
    if not isinstance(cpu, numbers.Integral) or isinstance(cpu, bool):
        raise ValueError(f"cpu={cpu!r} must be an integer CPU number")
    cpu = int(cpu)
    if cpu not in allowed:
        raise ValueError(f"cpu={cpu} is not among the CPUs this process may use {sorted(allowed)}")
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def core_ghz(refresh: bool = False) -> float:
    """The core clock in GHz, measured once per process with an add chain."""
    global _core_ghz, _core_ghz_detail
    if _core_ghz is None or refresh:
        with Kernel("calibrate", {"budget_ns": 200_000_000}) as kernel:
            sample = kernel.measure(target_ns=0, counters=False)
        _core_ghz_detail = dict(sample["metrics"])
        _core_ghz = float(sample["metrics"]["core_GHz"])
    return _core_ghz


def core_ghz_detail() -> dict[str, Any]:
    """Every metric of the clock measurement behind :func:`core_ghz` (GHz and its cross-checks)."""
    core_ghz()
    return dict(_core_ghz_detail or {})


def _derive(sample: Mapping[str, Any], unit: str | None, ghz: float | None) -> dict[str, float]:
    elapsed_ns = float(sample["elapsed_ns"])
    values: dict[str, float] = {"elapsed_ns": elapsed_ns}
    units = float(sample.get("units", 0.0))
    if unit and units > 0 and elapsed_ns > 0:
        ns_per_unit = elapsed_ns / units
        values[f"ns_per_{unit}"] = ns_per_unit
        if ghz:
            values[f"cycles_per_{unit}"] = ns_per_unit * ghz
        values[f"{unit}s_per_s"] = units / elapsed_ns * 1e9
    moved = float(sample.get("bytes", 0.0))
    if moved > 0 and elapsed_ns > 0:
        values["GiB_per_s"] = moved / elapsed_ns * 1e9 / 2**30
        values["GB_per_s"] = moved / elapsed_ns
    values.update({k: float(v) for k, v in sample.get("metrics", {}).items()})
    return values


SampleFn = Callable[[], Mapping[str, Any]]


def measure(
    family: str,
    params: Mapping[str, Any],
    *,
    core: str | None = None,
    config: Mapping[str, Any] | None = None,
    python_sample: Callable[[float], Mapping[str, Any]] | None = None,
    unit: str | None = None,
    primary_metric: str | None = None,
    derive: Callable[[Mapping[str, Any], dict[str, float]], Mapping[str, float]] | None = None,
    repeat: int = 5,
    warmup: int = 1,
    cpu: int | None = None,
    target_seconds: float = 0.1,
    counters: bool = True,
    cycles: bool = True,
) -> Measurement:
    """Run warm-up and ``repeat`` samples of one kernel and summarise them.

    ``core``/``config`` name a C family and its config dict; alternatively
    ``python_sample(target_seconds)`` returns a sample dict for families timed
    in Python (e.g. numpy's BLAS). Every sample dict has ``elapsed_ns``,
    ``units``, ``bytes``, ``metrics`` and, from C, counters.
    ``derive(params, values)`` adds metrics computed from one sample's
    ``values``: its metrics, and its counters as ``counter_<name>`` (present
    only where the counter opened).

    >>> m = measure("calibrate", {}, core="calibrate", config={"budget_ns": 10**7},
    ...             primary_metric="core_GHz", repeat=2, warmup=0)
    >>> m.median() > 0.1
    True
    """
    global _last_measurement_end
    repeat, warmup, target_seconds = _check_options(repeat, warmup, target_seconds)
    counters = _check_flag("counters", counters)
    cycles = _check_flag("cycles", cycles)
    if cpu is not None and isinstance(cpu, numbers.Integral) and not isinstance(cpu, bool):
        cpu = int(cpu)
    if (core is None) == (python_sample is None):
        raise ValueError("measure() needs exactly one of core= or python_sample=")
    ghz = core_ghz() if (cycles and unit) else None
    target_ns = int(target_seconds * 1e9)
    pause_before_s = (
        None if _last_measurement_end is None else time.monotonic() - _last_measurement_end
    )
    kept: list[dict[str, float]] = []
    warm: list[dict[str, float]] = []
    counter_samples: list[dict[str, float]] = []
    fact_samples: list[dict[str, str]] = []
    missing: dict[str, str] = {}
    scope = "none"
    started = time.time()
    started_monotonic = time.monotonic()
    watch = _ConditionsWatch(cpu)
    with pinned(cpu), _kernel(core, config) as kernel:
        for index in range(warmup + repeat):
            if index == warmup:
                watch.start()
            if kernel is not None:
                raw = kernel.measure(target_ns=target_ns, counters=counters)
            else:
                raw = python_sample(target_seconds)  # type: ignore[misc]
            values = _derive(raw, unit, ghz)
            if derive is not None:
                # derive sees the sample's counters too, as their columns name them (counter_<name>)
                seen = dict(values)
                seen.update({counter_column(n): float(v) for n, v in raw.get("counters", {}).items()})
                values.update({k: float(v) for k, v in derive(params, seen).items()})
            if index < warmup:
                warm.append(values)
                continue
            kept.append(values)
            fact_samples.append(dict(raw.get("facts", {})))
            counter_samples.append(dict(raw.get("counters", {})))
            missing.update(raw.get("counters_missing", {}))
            scope = raw.get("counters_scope", scope)
        watch.stop()
    _last_measurement_end = time.monotonic()
    context: dict[str, Any] = {
        "cpu": cpu if cpu is not None else "",
        "pause_before_s": round(pause_before_s, 3) if pause_before_s is not None else "",
        "started_unix": round(started, 3),
        "ended_unix": round(time.time(), 3),
        "wall_s": round(_last_measurement_end - started_monotonic, 3),
    }
    if ghz:
        context["core_GHz"] = round(ghz, 4)
    context.update(watch.result())
    return Measurement(
        family=family,
        params=dict(params),
        samples=kept,
        counters=counter_samples,
        counters_missing=missing,
        counters_scope=scope,
        warmup_samples=warm,
        primary_metric=primary_metric or (f"ns_per_{unit}" if unit else "elapsed_ns"),
        context=context,
        facts=merge_facts(fact_samples),
    )


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class _ConditionsWatch:
    """On-CPU fraction and steal share over the kept samples of one measurement.

    on_cpu_fraction: :func:`cpu_seconds` over the wall time (above 1 when
    several threads or processes worked at once). steal_fraction: from
    /proc/stat, of the pinned CPU when there is one, else of all CPUs; NaN
    when /proc/stat cannot be read or too few busy ticks passed.
    """

    def __init__(self, cpu: int | None) -> None:
        self.line = f"cpu{cpu}" if cpu is not None else "cpu"
        self.begin: tuple[float, float, dict] | None = None
        self.end: tuple[float, float, dict] | None = None

    def start(self) -> None:
        self.begin = (time.monotonic(), cpu_seconds(), read_cpu_times())

    def stop(self) -> None:
        if self.begin is not None:
            self.end = (time.monotonic(), cpu_seconds(), read_cpu_times())

    def result(self) -> dict[str, float]:
        """Both fractions, NaN when unknown: present in every row whatever the load, so that
        the rows of one sweep have the same columns (a row written to a CSV among rows
        that have the column reads back with it)."""
        values = {"on_cpu_fraction": math.nan, "steal_fraction": math.nan}
        if self.begin is None or self.end is None:
            return values
        wall = self.end[0] - self.begin[0]
        if wall > 0:
            values["on_cpu_fraction"] = round((self.end[1] - self.begin[1]) / wall, 4)
        steal = steal_fraction(self.begin[2], self.end[2], self.line)
        if steal is not None:
            values["steal_fraction"] = steal
        return values


@contextlib.contextmanager
def _kernel(core: str | None, config: Mapping[str, Any] | None) -> Iterator[Any]:
    if core is None:
        yield None
        return
    with Kernel(core, dict(config or {})) as kernel:
        yield kernel


def _check_options(repeat: Any, warmup: Any, target_seconds: Any) -> tuple[int, int, float]:
    """The run options as plain values, or ValueError naming the bad one (numpy integers are integers)."""
    checked = []
    for name, value, minimum, maximum in (("repeat", repeat, 1, MAX_REPEAT), ("warmup", warmup, 0, MAX_WARMUP)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name}={value!r} must be an integer")
        value = int(value)
        if value < minimum:
            raise ValueError(f"{name}={value} is below the minimum {minimum}")
        if value > maximum:
            raise ValueError(f"{name}={value} is above the maximum {maximum}")
        checked.append(value)
    if isinstance(target_seconds, bool) or not isinstance(target_seconds, numbers.Real):
        raise ValueError(f"target_seconds={target_seconds!r} must be a number")
    target_seconds = float(target_seconds)
    if not 0 <= target_seconds <= 600:
        raise ValueError(f"target_seconds={target_seconds} is outside [0, 600]")
    return checked[0], checked[1], target_seconds


def _check_flag(name: str, value: Any) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise ValueError(f"{name}={value!r} must be True or False")
