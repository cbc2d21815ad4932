"""The conditions of a measurement: how much of its wall time it was on CPU, how much was stolen.

Every measurement (:mod:`memlab.measure`) records ``context_on_cpu_fraction``
(:func:`cpu_seconds` over the wall time of its kept samples) and
``context_steal_fraction`` (:func:`steal_fraction` between two
:func:`read_cpu_times`), and :func:`conditions_warning` says in words when
either crosses its threshold (:data:`ON_CPU_MIN_FRACTION`,
:data:`STEAL_MAX_FRACTION`): the one warning line a run prints per disturbed
measurement, the badge the report gives its row. The machine check
(:mod:`memlab.check`) judges a machine's steal time by the same threshold.

This module imports nothing of memlab: the measurement's own layer reads
it without the machine check above it.

>>> conditions_warning(0.55, 0.0)
'on CPU 55% of its wall time (below 90%)'
"""

from __future__ import annotations

import os
import resource
import time
from typing import Mapping, Sequence

__all__ = [
    "ON_CPU_MIN_FRACTION",
    "STAT_FIELDS",
    "STEAL_MAX_FRACTION",
    "STEAL_MIN_BUSY_TICKS",
    "busy_and_steal",
    "conditions_warning",
    "cpu_seconds",
    "read_cpu_times",
    "steal_fraction",
]

ON_CPU_MIN_FRACTION = 0.90
"""A measurement that spent less of its wall time on CPU than this waited for
a CPU (another task, the hypervisor) or for something else: its numbers
include time it was not running."""

STEAL_MAX_FRACTION = 0.02
"""Steal time above this fraction means the hypervisor ran something else on
this guest's CPUs for a noticeable share of the measurement."""

STEAL_MIN_BUSY_TICKS = 10
"""Busy clock ticks (1/100 s each) a window needs before its steal share is
given: /proc/stat is read in whole ticks, so a shorter window would turn one
tick of rounding into a large fraction."""

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The columns of a ``cpu`` line of /proc/stat that :func:`read_cpu_times` keeps, in order."""


def cpu_seconds() -> float:
    """CPU time (user + system) of this process's threads and of its waited-for children, in s.

    Children count because some families measure in child processes (pipe,
    system); a kernel waits for them before its sample returns.

    >>> cpu_seconds() > 0
    True
    """
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def read_cpu_times(root: str = "/") -> dict[str, tuple[int, ...]]:
    """The ``cpu`` lines of /proc/stat (under ``root``): {"cpu": (user, nice, system, idle, iowait,
    irq, softirq, steal), "cpu0": ...} in clock ticks; {} when unreadable.

    Kernels before 2.6.11 had no steal column; it reads as 0 there.

    >>> "cpu" in read_cpu_times()
    True
    """
    try:
        with open(os.path.join(root, "proc/stat"), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return {}
    times: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        parts = line.split()
        try:
            values = [int(v) for v in parts[1 : 1 + len(STAT_FIELDS)]]
        except ValueError:
            continue
        values += [0] * (len(STAT_FIELDS) - len(values))
        times[parts[0]] = tuple(values)
    return times


def busy_and_steal(before: Sequence[int], after: Sequence[int]) -> tuple[int, int]:
    """Busy ticks (all but idle and iowait, steal included) and stolen ticks between two ``cpu``
    lines of :func:`read_cpu_times`.

    >>> busy_and_steal((100, 0, 50, 800, 0, 0, 0, 50), (160, 0, 70, 900, 0, 0, 0, 70))
    (100, 20)
    """
    deltas = [max(0, b - a) for a, b in zip(before, after)]
    idle = deltas[STAT_FIELDS.index("idle")] + deltas[STAT_FIELDS.index("iowait")]
    return sum(deltas) - idle, deltas[STAT_FIELDS.index("steal")]


def steal_fraction(
    before: Mapping[str, Sequence[int]],
    after: Mapping[str, Sequence[int]],
    cpu: str = "cpu",
    *,
    min_busy_ticks: int = STEAL_MIN_BUSY_TICKS,
) -> float | None:
    """Stolen share of the time the CPUs wanted to run, between two :func:`read_cpu_times`.

    Steal time accrues only while a virtual CPU has work and the hypervisor
    runs something else instead, so it is divided by the busy time (all
    but idle and iowait, steal included), not by the wall time: an idle
    second CPU does not dilute it. ``cpu`` is ``"cpu"`` (all CPUs
    together) or ``"cpuN"``. None when the line is missing or fewer than
    ``min_busy_ticks`` busy ticks passed.

    >>> steal_fraction({"cpu": (100, 0, 50, 800, 0, 0, 0, 50)},
    ...                {"cpu": (160, 0, 70, 900, 0, 0, 0, 70)})
    0.2
    """
    if cpu not in before or cpu not in after:
        return None
    busy, steal = busy_and_steal(before[cpu], after[cpu])
    if busy < max(1, min_busy_ticks):
        return None
    return round(steal / busy, 6)


def conditions_warning(on_cpu_fraction: float | None, steal: float | None) -> str:
    """Why a single measurement's numbers are suspect, in words; "" when they are not.

    ``on_cpu_fraction``: CPU time of the measuring process (and its waited
    children) over the wall time; ``steal``: the stolen share of the CPU
    time meanwhile. Warns below :data:`ON_CPU_MIN_FRACTION` and above
    :data:`STEAL_MAX_FRACTION`; a missing number (None, NaN) is not judged.

    >>> conditions_warning(0.55, 0.0)
    'on CPU 55% of its wall time (below 90%)'
    >>> conditions_warning(0.99, 0.01)
    ''
    """
    reasons = []
    if on_cpu_fraction is not None and on_cpu_fraction == on_cpu_fraction:
        if on_cpu_fraction < ON_CPU_MIN_FRACTION:
            reasons.append(f"on CPU {on_cpu_fraction:.0%} of its wall time "
                           f"(below {ON_CPU_MIN_FRACTION:.0%})")
    if steal is not None and steal == steal and steal > STEAL_MAX_FRACTION:
        reasons.append(f"steal time {steal:.1%} (above {STEAL_MAX_FRACTION:.0%})")
    return "; ".join(reasons)
