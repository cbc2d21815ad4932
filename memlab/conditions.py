"""The conditions of a measurement: how much of its wall time it was on CPU, how much was stolen.

Every measurement (:mod:`memlab.measure`) records ``context_on_cpu_fraction``
(:func:`cpu_seconds` over the wall time of its kept samples: every thread of
the process and the child processes it waited for, so above 1 when several
ran at once), ``context_on_cpu_expected`` (what its family says its threads
and processes should reach: the sum of its :class:`OnCpu` shares, see
:func:`expected_on_cpu`) and ``context_steal_fraction``
(:func:`steal_fraction` between two :func:`read_cpu_times`), and
:func:`conditions_warning` says in words when either crosses its threshold:
on CPU below :data:`ON_CPU_MIN_FRACTION` of what was expected, steal above
:data:`STEAL_MAX_FRACTION`. That is the one warning a run gives per disturbed
measurement (a :class:`ConditionsWarning`) and the badge the report gives its
row. The machine check (:mod:`memlab.check`) judges a machine's steal time by
the same threshold and warns with a :class:`MachineWarning`.

The warnings memlab gives go through Python's :mod:`warnings` with its own
categories (:class:`MemlabWarning` and its subclasses), so a notebook, pytest
(``-W error::memlab.ConditionsWarning``) and ``python -W`` filter them.

This module imports nothing of memlab: every layer above reads it.

>>> conditions_warning(0.55, 0.0)
'on CPU 55% of its wall time (below 90%)'
>>> conditions_warning(0.55, 0.0, expected_on_cpu=2.0)
'on CPU 55% of its wall time (below 90% of the 200% its threads should be)'
"""

from __future__ import annotations

import math
import os
import resource
import time
import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = [
    "ConditionsWarning",
    "MachineWarning",
    "MemlabWarning",
    "ONE_BUSY_THREAD",
    "ON_CPU_MIN_FRACTION",
    "OnCpu",
    "STAT_FIELDS",
    "STEAL_MAX_FRACTION",
    "STEAL_MIN_BUSY_TICKS",
    "busy_and_steal",
    "conditions_warning",
    "cpu_seconds",
    "expected_on_cpu",
    "read_cpu_times",
    "steal_fraction",
    "warn",
    "WARNING_PREFIX",
]

ON_CPU_MIN_FRACTION = 0.90
"""A measurement whose threads and processes spent less than this share of
the CPU time their family expects (:func:`expected_on_cpu`; one busy thread:
its whole wall time) waited for a CPU (another task, the hypervisor) or for
something else: its numbers include time it was not running."""

STEAL_MAX_FRACTION = 0.02
"""Steal time above this fraction means the hypervisor ran something else on
this guest's CPUs for a noticeable share of the measurement."""

STEAL_MIN_BUSY_TICKS = 10
"""Busy clock ticks (1/100 s each) a window needs before its steal share is
given: /proc/stat is read in whole ticks, so a shorter window would turn one
tick of rounding into a large fraction."""

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The columns of a ``cpu`` line of /proc/stat that :func:`read_cpu_times` keeps, in order."""


class MemlabWarning(UserWarning):
    """The base of every warning memlab gives (``warnings.simplefilter("ignore", MemlabWarning)``
    silences them all). ``count``: how many things it reports (a sweep's one line for its 5
    disturbed points counts 5), which the command line's summary adds up."""

    def __init__(self, message: str = "", count: int = 1) -> None:
        super().__init__(message)
        self.count = count


class ConditionsWarning(MemlabWarning):
    """A point measured under disturbed conditions: too little on CPU, or too much steal
    (:func:`conditions_warning` says which); the report flags its row."""


class MachineWarning(MemlabWarning):
    """The machine check found something that makes measurements less trustworthy (load, steal,
    a governor, a BLAS setting: ``memlab check`` says what and how to change it)."""


#: How a memlab warning line begins on a terminal (the command line prints ``WARNING_PREFIX + message``).
WARNING_PREFIX = "memlab: warning: "


def warn(text: str, category: type[MemlabWarning] = MemlabWarning, stacklevel: int = 2, count: int = 1) -> None:
    """Give one memlab warning through Python's :mod:`warnings` as ``category`` (its text without
    :data:`WARNING_PREFIX`), so that a notebook, pytest and ``-W`` filter it; ``count``: how many
    points (or findings) it stands for.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("memlab: warning: chase n=1: on CPU 55%", ConditionsWarning)
    >>> caught[0].category.__name__, str(caught[0].message)
    ('ConditionsWarning', 'chase n=1: on CPU 55%')
    """
    warnings.warn(category(text.removeprefix(WARNING_PREFIX), count), stacklevel=stacklevel + 1)


@dataclass(frozen=True)
class OnCpu:
    """One thread or process of a family's measurement and the share of the measurement's wall time
    it should at least spend on a CPU: 1.0 for a thread that computes or spins throughout, less for
    one that blocks by design (a pipe's writer waiting for room), 0.0 for one that sleeps (a
    throttled load thread, a helper) or whose waiting depends on the other side. ``who`` names it
    in words (``"the pipe's writer (blocks on a full pipe)"``).

    >>> OnCpu("the walking thread", 1.0).fraction
    1.0
    >>> OnCpu("a helper", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: fraction=1.5 is outside 0 .. 1 (the share of the wall time a helper should be on a CPU)
    """

    who: str
    fraction: float

    def __post_init__(self) -> None:
        if not (isinstance(self.fraction, (int, float)) and 0.0 <= self.fraction <= 1.0):
            raise ValueError(f"fraction={self.fraction!r} is outside 0 .. 1 (the share of the wall time "
                             f"{self.who} should be on a CPU)")


#: What a family without its own statement measures with: one thread, on CPU throughout.
ONE_BUSY_THREAD = (OnCpu("the measuring thread", 1.0),)


def expected_on_cpu(parts: Sequence[OnCpu], cpus: int | None = None) -> float:
    """The on-CPU fraction a measurement should reach: the sum of its threads' and processes'
    shares, at most ``cpus`` (the CPUs they may run on: two busy threads on one CPU share it).
    0.0 means nothing is expected (every part may wait): its on-CPU time is not judged.

    >>> expected_on_cpu([OnCpu("writer", 0.25), OnCpu("reader", 0.25)])
    0.5
    >>> expected_on_cpu([OnCpu("a", 1.0), OnCpu("b", 1.0)], cpus=1)
    1.0
    """
    total = float(sum(part.fraction for part in parts))
    if cpus is not None and cpus >= 1:
        total = min(total, float(cpus))
    return round(total, 4)


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


def conditions_warning(on_cpu_fraction: float | None, steal: float | None,
                       expected_on_cpu: float | None = 1.0) -> str:
    """Why a single measurement's numbers are suspect, in words; "" when they are not.

    ``on_cpu_fraction``: CPU time of the measuring process (and its waited
    children) over the wall time; ``expected_on_cpu``: what its family says
    its threads and processes should reach (:func:`expected_on_cpu`; 1.0, one
    busy thread, when not known; 0.0: not judged); ``steal``: the stolen share
    of the CPU time meanwhile. Warns when ``on_cpu_fraction`` is below
    :data:`ON_CPU_MIN_FRACTION` x ``expected_on_cpu`` and when ``steal`` is
    above :data:`STEAL_MAX_FRACTION`; a missing number (None, NaN) is not judged.

    >>> conditions_warning(0.55, 0.0)
    'on CPU 55% of its wall time (below 90%)'
    >>> conditions_warning(0.99, 0.01)
    ''
    >>> conditions_warning(0.30, 0.0, expected_on_cpu=0.0)
    ''
    """
    reasons = []
    expected = 1.0 if expected_on_cpu is None or not math.isfinite(expected_on_cpu) else float(expected_on_cpu)
    if on_cpu_fraction is not None and on_cpu_fraction == on_cpu_fraction and expected > 0:
        if on_cpu_fraction < ON_CPU_MIN_FRACTION * expected:
            bound = (f"below {ON_CPU_MIN_FRACTION:.0%}" if expected == 1.0 else
                     f"below {ON_CPU_MIN_FRACTION:.0%} of the {expected:.0%} its threads should be")
            reasons.append(f"on CPU {on_cpu_fraction:.0%} of its wall time ({bound})")
    if steal is not None and steal == steal and steal > STEAL_MAX_FRACTION:
        reasons.append(f"steal time {steal:.1%} (above {STEAL_MAX_FRACTION:.0%})")
    return "; ".join(reasons)
