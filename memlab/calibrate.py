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
from memlab.family import Family, check_int
from memlab.grid import Sweep
from memlab.measure import Measurement

__all__ = ["CalibrateParams", "FAMILY", "figure", "run"]


@dataclass(frozen=True)
class CalibrateParams:
    """budget_ns: how long one calibration sample runs (ns)."""

    budget_ns: int = 100_000_000

    def __post_init__(self) -> None:
        check_int("budget_ns", self.budget_ns, 1_000_000, 60_000_000_000)


def run(params: CalibrateParams | dict | None = None, **options) -> Measurement:
    """Measure the core clock in GHz (metric ``core_GHz``).

    >>> m = run(budget_ns=20_000_000, repeat=2)
    >>> m.median("core_GHz") > 0.1
    True
    """
    return FAMILY.run(params, **options)


def figure(data: Dataset | str, metric: str = "core_GHz"):
    """The core clock measured by a dependent add chain (GHz), every sample shown; TSC as a reference.

    >>> fig = figure("memlab-tour/calibrate.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    tsc_mhz = chart.number((ds.metadata.get("machine") or {}).get("tsc_mhz"))
    return chart.samples_figure(
        ds, metric, reference=(f"TSC {tsc_mhz / 1000:.3g} GHz", tsc_mhz / 1000),
        ylabel="core clock (GHz)", title="calibrate: core clock from a dependent add chain",
    )


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
    figure=figure,
    caption="The core clock measured with a chain of dependent adds (one per cycle); memlab turns "
            "ns into cycles with it. Dots are the repetitions, the bar their median.",
    sample_seconds=lambda params, target: params.budget_ns / 1e9,
)
