"""The core clock, measured: the foundation's first end-to-end measurement.

Timing a chain of dependent register-register adds (one cycle each) gives the
frequency the core really runs at, which may differ from what the TSC and
/proc/cpuinfo claim (turbo, a VM's host). Every family uses it to turn ns
into cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlab import chart
from memlab.dataset import Dataset
from memlab.family import Family, check_int, coerce_fields
from memlab.grid import Sweep
from memlab.measure import Measurement
from memlab.units import format_number

__all__ = ["CalibrateParams", "FAMILY", "headline", "run"]


@dataclass(frozen=True)
class CalibrateParams:
    """budget_ns: how long one calibration sample runs (ns)."""

    budget_ns: int = 100_000_000

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("budget_ns", self.budget_ns, 1_000_000, 60_000_000_000)


def run(params: CalibrateParams | dict | None = None, **options) -> Measurement:
    """Measure the core clock in GHz (metric ``core_GHz``).

    >>> m = run(budget_ns=20_000_000, repeat=2)
    >>> m.median("core_GHz") > 0.1
    True
    """
    return FAMILY.run(params, **options)


def headline(data: Dataset | str, metric: str = "core_GHz") -> str:
    """The measured core clock as one sentence (the family's result is a number, not a figure).

    >>> headline(Dataset([{"family": "calibrate", "budget_ns": 5e7, "core_GHz": 3.342,
    ...                    "core_GHz_min": 3.30, "core_GHz_max": 3.36}], {"machine": {"tsc_mhz": 2600.0}}))
    'Core clock 3.342 GHz (median; 3.300 … 3.360 GHz over the repetitions); the TSC ticks at 2.600 GHz.'
    """
    ds = chart.as_dataset(data)
    rows = chart.rows_with(ds, metric)
    medians = sorted(float(r[metric]) for r in rows)
    if len(rows) == 1:
        row = rows[0]
        text = f"Core clock {format_number(float(row[metric]))} GHz (median"
        if chart.finite(row.get(f"{metric}_min")) and chart.finite(row.get(f"{metric}_max")):
            text += (f"; {format_number(float(row[f'{metric}_min']))} … "
                     f"{format_number(float(row[f'{metric}_max']))} GHz over the repetitions")
        text += ")"
    else:
        text = (f"Core clock {format_number(medians[0])} … {format_number(medians[-1])} GHz "
                f"(medians of {len(rows)} points)")
    facts = ds.metadata.get("machine") or {}
    tsc_mhz, cpuinfo_mhz = chart.number(facts.get("tsc_mhz")), chart.number(facts.get("cpuinfo_mhz"))
    if chart.finite(tsc_mhz):
        text += f"; the TSC ticks at {format_number(tsc_mhz / 1000)} GHz"
    elif chart.finite(cpuinfo_mhz):
        text += f"; /proc/cpuinfo says {format_number(cpuinfo_mhz / 1000)} GHz"
    return text + "."


def _quick_sweep() -> Sweep:
    return Sweep(name="quick", family="calibrate", points=[{"budget_ns": 50_000_000}], repeat=3)


FAMILY = Family(
    name="calibrate",
    params_type=CalibrateParams,
    core="calibrate",
    primary_metric="core_GHz",
    sweeps={"quick": _quick_sweep},
    description="core clock from a dependent add chain",
    default_repeat=3,
    default_warmup=0,
    figure=None,
    headline=headline,
    caption="The core clock measured with a chain of dependent adds (one per cycle); memlab turns "
            "ns into cycles with it. A clock above the nominal one means turbo; below it, power "
            "saving or a busy host.",
    sample_seconds=lambda params, target: params.budget_ns / 1e9,
)
