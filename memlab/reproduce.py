"""``memlab reproduce``: every source item re-measured here, beside the source's numbers, with verdicts.

For each item of :mod:`memlab.catalogue` (or the ones named) it runs the
item's sweep (``quick``: its quick variant) into ``out/<family>-<sweep>.csv``
with an overall progress bar and ETA, resumes where a previous run stopped
(points on disk are skipped), then judges every claim on the dataset and
writes ``out/report.html`` (a section per item: what the source measured
and on what machine, its numbers beside this machine's with their ratio,
this machine's figure and points, a verdict per claim) and
``out/verdicts.json``. Items sharing a sweep share its dataset.

>>> result = reproduce(["pipes-touch"], quick=True, out="/tmp/r", progress=False)  # doctest: +SKIP
>>> [v.status for v in result.items[0].verdicts]                                   # doctest: +SKIP
['reproduced', 'reproduced']
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from memlab import catalogue, chart, hierarchy
from memlab.catalogue import (
    FAILS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    PASSES,
    REPRODUCED,
    SANITY_VERDICTS,
    VERDICTS,
    Item,
    NotMeasurable,
    Number,
    Verdict,
)
from memlab.conditions import WARNING_PREFIX, ConditionsWarning, MachineWarning
from memlab.conditions import warn as memlab_warn
from memlab.dataset import RUN_STOP_COLUMN, Dataset, paths_for, point_key, run_index
from memlab.files import atomic_write, check_output_directory
from memlab.grid import Precision, Sweep, as_sweeps
from memlab.hierarchy import Hierarchy
from memlab.machine import collect_meminfo
from memlab.reasons import CANDIDATE_DEFECT, Context, explain
from memlab.registry import family as get_family
from memlab.measure import cpu_seconds
from memlab.report import (CACHE_COLUMN, ReportItem, anchor, cache_levels_here, escape, forked_map, html_table,
                           reason_html, unstable_points, write_report)
from memlab.runner import Run, estimate_seconds, eta_bar, progress_bar, progress_enabled
from memlab.significance import UNSTABLE_RUN_SPREAD
from memlab.units import format_bytes, format_duration, format_number

__all__ = [
    "DIRECTION_HALF_WIDTH",
    "FULL_MAX_RUNS",
    "FULL_MIN_RUNS",
    "FULL_MIN_SAMPLE_SECONDS",
    "FULL_SAMPLE_FRACTION",
    "MAX_HALF_WIDTH",
    "ItemResult",
    "PhaseTime",
    "ReproduceResult",
    "Task",
    "claim_half_width",
    "in_full_runs",
    "judge",
    "listing",
    "mark_numbers",
    "needed_half_width",
    "number_place",
    "plan",
    "region_points",
    "reproduce",
    "write_results",
]

TIMES_FILE = "reproduce-times.json"

#: Runs of every point of a quick run (:func:`in_quick_runs`): two fresh setups a point, chosen
#: so that ``memlab reproduce --quick`` keeps within its 3 minutes (docs/reproduce.md).
QUICK_RUNS = 2
#: Runs of a point in a full run (:func:`in_full_runs`): at least two (a between-run interval),
#: at most three (the long fixed run's), more only while its interval is wider than its claims
#: need (docs/reproduce.md, "How many runs a point takes"). At most four, a full run on a Zen 3
#: guest gave 791 of the 833 points that took a third run a fourth as well: a fourth run almost
#: never brought an interval in, and cost 15% of the run's rows.
FULL_MIN_RUNS = 2
FULL_MAX_RUNS = 3
#: A full run's sample lasts this fraction of the sweep's own target (:func:`in_full_runs`): its
#: interval comes from the runs (fresh setups), whose medians move far more between setups than
#: a sample's length changes them, so the time goes into runs instead (docs/reproduce.md,
#: "How many runs a point takes"). The long fixed run keeps the sweep's own samples.
FULL_SAMPLE_FRACTION = 0.25
#: The shortest sample a full run shortens a target to (seconds); a sweep whose own target is
#: shorter keeps it.
FULL_MIN_SAMPLE_SECONDS = 0.01
#: Runs of every point in the long fixed run (``memlab reproduce --fixed``): the run loop's default,
#: each of the sweep's own samples (UnixBench's 30 s), as the full run measured before it stopped
#: by interval; the run a full run's verdicts are checked against (docs/reproduce.md).
FIXED_RUNS = 3
#: The file name's ending of a long fixed run's datasets (``fig3_10`` -> ``chase-fig3_10-fixed.csv``),
#: so that one folder never mixes its runs with an adaptive run's.
FIXED_SUFFIX = "-fixed"
#: The relative half-width a point needs for a claim without a size (a direction, steps along an
#: axis, a check of its own): two points each within +-5% give a ratio within about +-10%, so a
#: difference of 10% or more is told apart (docs/reproduce.md).
DIRECTION_HALF_WIDTH = 0.05
#: The widest a point's interval may stay whatever its claims allow: its value is also a number
#: beside the source's and a mark on the figure.
MAX_HALF_WIDTH = 0.10
VERDICTS_FILE = "verdicts.json"
REPORT_FILE = "report.html"


@dataclass
class Task:
    """One sweep to run for one or more items: where its dataset goes and what it should cost."""

    sweep: Sweep | None
    path: Path | None
    items: list[Item]
    seconds: float = 0.0
    error: str = ""
    unmeasurable: str = ""
    ran_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    shared: list[tuple[Task, list[dict[str, Any]]]] = field(default_factory=list)
    """Points an earlier task measures alike, left out of this one's sweep: ``(that task, the
    points)`` (:func:`share_points`); the item is judged on its rows there too."""
    measured_here: bool = True
    """False when every point of the sweep is shared: the task runs nothing (its sweep keeps the
    points, for judging and the listing)."""

    @property
    def name(self) -> str:
        if self.sweep is None:
            return self.items[0].sweep
        return f"{self.sweep.family}.{self.sweep.name}"


@dataclass
class ItemResult:
    """An item judged on a dataset: this machine's numbers beside the source's, a verdict per claim."""

    item: Item
    dataset: Dataset | None
    numbers: list[tuple[Number, float | None, str]]
    verdicts: list[Verdict]
    path: Path | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The claims' verdicts by status (sanity checks apart: :meth:`sanity_counts`)."""
        return {status: sum(v.status == status for c, v in self._pairs() if not c.sanity) for status in VERDICTS}

    def sanity_counts(self) -> dict[str, int]:
        """The sanity checks' verdicts by status (passes, fails, not measurable)."""
        return {status: sum(v.status == status for c, v in self._pairs() if c.sanity) for status in SANITY_VERDICTS}

    def _pairs(self) -> list[tuple[Any, Verdict]]:
        return list(zip(self.item.claims, self.verdicts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item.key,
            "source": self.item.source,
            "label": self.item.label,
            "title": self.item.title,
            "sweep": self.item.sweep,
            "dataset": str(self.path) if self.path else None,
            "error": self.error,
            "numbers": [
                {"quantity": n.quantity, "unit": n.unit, "source": n.source, "measured": value,
                 "ratio": n.ratio(value), "reason": reason,
                 "provenance": n.provenance.to_dict() if n.provenance else None}
                for n, value, reason in self.numbers
            ],
            "claims": [
                {"claim": c.text, "cite": c.cite, "sanity": c.sanity, "effect": c.effect, "status": v.status,
                 "detail": v.detail, "values": dict(v.values), "reason": v.reason}
                for c, v in zip(self.item.claims, self.verdicts)
            ],
        }

    def table(self) -> str:
        """The numbers and verdicts as plain text (what a notebook or a terminal shows)."""
        lines = [self.item.heading]
        for number, value, reason in self.numbers:
            ratio = number.ratio(value)
            here = format_number(value) if value is not None else f"- ({reason})"
            lines.append(f"  {number.quantity}: source {format_number(number.source)} {number.unit}, "
                         f"here {here}" + (f", ratio {ratio:.3g}" if ratio is not None else "")
                         + (f" [{number.provenance.kind}]" if number.provenance else ""))
        for claim, found in zip(self.item.claims, self.verdicts):
            status = f"sanity check: {found.status}" if claim.sanity else found.status
            lines.append(f"  [{status}] {claim.text}\n      {found.detail}"
                         + (f"\n      why: {found.reason}" if found.reason and found.reason != found.detail else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return _numbers_html(self) + _verdicts_html(self)


@dataclass(frozen=True)
class PhaseTime:
    """How long one phase of a run took: wall-clock seconds, and CPU seconds (user + system) of
    this process and of the child processes it waited for (UnixBench's, the pipe ladder's). On a
    busy machine the wall time includes waiting for a CPU; the CPU time does not.

    >>> PhaseTime(2.0, 1.5).to_dict()
    {'wall_s': 2.0, 'cpu_s': 1.5}
    """

    wall_s: float
    cpu_s: float

    def __add__(self, other: PhaseTime) -> PhaseTime:
        return PhaseTime(self.wall_s + other.wall_s, self.cpu_s + other.cpu_s)

    def to_dict(self) -> dict[str, float]:
        """Kept to 0.1 ms: a phase of a few ms (reporting one small item on a fast machine) still
        reads above 0."""
        return {"wall_s": round(self.wall_s, 4), "cpu_s": round(self.cpu_s, 4)}


#: The phases of a run, in order: running the sweeps; reading the datasets back, judging every
#: claim and writing report.html (its figures) and verdicts.json.
PHASES = ("measuring", "reporting")


class _Stopwatch:
    """Wall and CPU seconds since it was made (:class:`PhaseTime`)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.monotonic(), cpu_seconds()

    def elapsed(self) -> PhaseTime:
        return PhaseTime(time.monotonic() - self.wall, cpu_seconds() - self.cpu)


@dataclass
class ReproduceResult:
    """What ``reproduce`` did: the tasks run, every item judged, the report's path."""

    out: Path
    quick: bool
    tasks: list[Task] = field(default_factory=list)
    fixed: bool = False
    items: list[ItemResult] = field(default_factory=list)
    report: Path | None = None
    seconds: float = 0.0
    interrupted: bool = False
    phases: dict[str, PhaseTime] = field(default_factory=dict)
    hierarchy: Hierarchy | None = None
    hierarchy_note: str = ""
    available_bytes: int | None = None

    def timing(self) -> str:
        """The run's wall time split into its phases, with CPU time: what ``memlab reproduce``
        prints at the end (``measuring 95 s, reporting 21 s: 116 s (CPU 88 s)``)."""
        parts = [f"{name} {format_duration(self.phases[name].wall_s)}" for name in PHASES if name in self.phases]
        total = sum(self.phases.values(), PhaseTime(0.0, 0.0))
        return f"{', '.join(parts)}: {format_duration(total.wall_s)} (CPU {format_duration(total.cpu_s)})"

    @property
    def mode(self) -> str:
        """``quick``, ``full`` or ``fixed`` (the long fixed run)."""
        return "quick" if self.quick else "fixed" if self.fixed else "full"

    @property
    def failed(self) -> list[Task]:
        return [task for task in self.tasks if task.error]

    def count(self, status: str) -> int:
        """How many claims (sanity checks apart) have this verdict."""
        return sum(result.counts()[status] for result in self.items)

    def sanity_count(self, status: str) -> int:
        """How many sanity checks have this verdict (passes, fails, not measurable)."""
        return sum(result.sanity_counts()[status] for result in self.items)

    @property
    def not_reproduced(self) -> list[tuple[ItemResult, Verdict]]:
        return [(r, v) for r in self.items for v in r.verdicts if v.status == NOT_REPRODUCED]


# ---- planning ---------------------------------------------------------------------


def _named_sweep(name: str) -> Sweep:
    family_name, sweep_name = name.split(".", 1)
    sweeps = as_sweeps(get_family(family_name).sweep(sweep_name))
    if len(sweeps) != 1:
        raise ValueError(f"sweep {name} is {len(sweeps)} sweeps; a catalogue item needs one")
    return sweeps[0]


def item_sweep(item: Item, quick: bool = False, *, fixed: bool = False) -> Sweep:
    """The sweep that reproduces ``item``: its quick variant with ``quick``; with ``fixed`` the
    named sweep as it is, in :data:`FIXED_RUNS` runs a point (the long fixed run); else the named
    sweep as the full run measures it (``item.full``'s changes, such as UnixBench's shorter
    samples; its runs come from :func:`in_full_runs`). ValueError when this machine cannot build
    it (say, a placement that needs SMT), NotMeasurable when its quick variant needs facts this
    machine does not give (its cache sizes).

    >>> ub = catalogue.item("unixbench-spawn")
    >>> {p["duration_s"] for p in item_sweep(ub).points}, {p["duration_s"] for p in item_sweep(ub, fixed=True).points}
    ({1.0}, {30.0})
    """
    if quick and fixed:
        raise ValueError("quick=True and fixed=True: the long fixed run is a full run (choose one)")
    if fixed:
        sweep = _named_sweep(item.sweep)
        return sweep if sweep.runs is not None else dataclasses.replace(sweep, runs=FIXED_RUNS)
    if not quick:
        sweep = _named_sweep(item.sweep)
        return sweep if item.full is None else item.full(sweep)
    if isinstance(item.quick, str):
        return in_quick_runs(_named_sweep(item.quick))
    return in_quick_runs(item.quick(_named_sweep(item.sweep)))


def in_quick_runs(sweep: Sweep) -> Sweep:
    """A quick variant measured in :data:`QUICK_RUNS` runs, its samples split over them: the
    samples a point had (2 or 3) become ``QUICK_RUNS`` runs of ``repeat // QUICK_RUNS`` (at least
    one), so the quick run samples the variation between setups in about the time it took
    before (docs/reproduce.md, "Quick and full"). A sweep that says its runs keeps them.

    >>> in_quick_runs(Sweep("q", "calibrate", [{}], repeat=2)).runs, in_quick_runs(Sweep("q", "calibrate", [{}], repeat=2)).repeat
    (2, 1)
    """
    if sweep.runs is not None:
        return sweep
    return dataclasses.replace(sweep, runs=QUICK_RUNS, repeat=max(1, sweep.repeat // QUICK_RUNS))


def claim_half_width(claim: Any) -> float | None:
    """The relative half-width each point of a claim's sweep needs (None for a sanity check, which
    needs none). A ratio against the source's effect (``Ratio``) or about the same (``Same``) must
    clear its bound ``b``; the measured ratio lies about ``log(b)`` from it in log space when it
    matches the source (for ``Same``: when it is 1), and a ratio of two points each within a
    relative half-width ``h`` is within about ``2h``: ``h = log(b) / 2`` can still clear it. A
    direction, steps or a check of its own: :data:`DIRECTION_HALF_WIDTH`. Never above
    :data:`MAX_HALF_WIDTH`.

    >>> from memlab.catalogue import Claim
    >>> round(claim_half_width(Claim("x", "y", catalogue.Ratio(lambda ds: 1.0, effect=1.21, what="r"))), 4)
    0.0477
    """
    if claim.sanity:
        return None
    check = claim.check
    if isinstance(check, (catalogue.Ratio, catalogue.Same)):
        width = abs(math.log(check.bound)) / 2
    else:
        width = DIRECTION_HALF_WIDTH
    return min(MAX_HALF_WIDTH, width)


def needed_half_width(items: Sequence[Item]) -> float:
    """The relative half-width the points of a sweep shared by ``items`` need: the narrowest any of
    their claims needs (:func:`claim_half_width`); :data:`DIRECTION_HALF_WIDTH` when they have only
    sanity checks.

    >>> needed_half_width([])
    0.05
    """
    widths = [w for entry in items for claim in entry.claims if (w := claim_half_width(claim)) is not None]
    return min(widths, default=DIRECTION_HALF_WIDTH)


def in_full_runs(sweep: Sweep, half_width: float) -> Sweep:
    """A full sweep as the full run measures it: between :data:`FULL_MIN_RUNS` and
    :data:`FULL_MAX_RUNS` runs a point, stopping once its interval is within ``half_width``
    (:class:`memlab.grid.Precision`), each run of half its samples (at least 2: ``repeat`` 3 becomes 2, 5
    becomes 3; 1 stays 1), each sample :data:`FULL_SAMPLE_FRACTION` of the sweep's target (not
    below :data:`FULL_MIN_SAMPLE_SECONDS`; a sweep without a target keeps its samples), since the
    runs now carry the interval. A sweep that says its runs keeps them (docs/reproduce.md, "How
    many runs a point takes").

    >>> full = in_full_runs(Sweep("f", "calibrate", [{}], repeat=5, target_seconds=0.2), 0.05)
    >>> full.precision, full.repeat, full.target_seconds
    (Precision(min_runs=2, max_runs=3, half_width=0.05), 3, 0.05)
    >>> in_full_runs(Sweep("f", "calibrate", [{}], target_seconds=0.02), 0.05).target_seconds
    0.01
    """
    if sweep.runs is not None:
        return sweep
    target = sweep.target_seconds
    if target is not None:
        target = min(target, max(FULL_MIN_SAMPLE_SECONDS, round(target * FULL_SAMPLE_FRACTION, 9)))
    repeat = min(sweep.repeat, max(2, (sweep.repeat + 1) // 2))
    return dataclasses.replace(sweep, repeat=repeat, target_seconds=target,
                               precision=Precision(FULL_MIN_RUNS, FULL_MAX_RUNS, half_width))


def _task_key(sweep: Sweep) -> tuple:
    """What a sweep measures, its name left out: two named sweeps with the same points (say, one
    source figure per machine it was measured on) are run once."""
    return (sweep.family, repr(sweep.points), sweep.repeat, sweep.warmup, sweep.target_seconds,
            repr(sorted(sweep.options.items())), sweep.runs)


def _working_set_sweep(sweep: Sweep) -> bool:
    return any("working_set_bytes" in point for point in sweep.points)


def region_points(sweep: Sweep, found: Hierarchy, available_bytes: int | None = None,
                  full: Sweep | None = None) -> Sweep:
    """``sweep`` with a point in each region of the measured hierarchy (in the L1d, in the L2, in
    a last cache beyond the L2, beyond the last cache) for every series that has none there
    (:func:`memlab.hierarchy.with_region_points`). ``full``: the full sweep a quick one was cut
    from (for a full sweep, itself): the sizes come from it, and a region it stops short of gets
    none (fig. 6.5's sets end below 1 MiB, and its elements may lie 128 lines apart; the claims
    then say where the sweep stops). Without ``full``, powers of two inside each region. A size
    the family refuses is left out. A sweep without working sets is returned as it is.

    >>> found = hierarchy.from_curve([{"working_set_bytes": 1 << k, "ns_per_element": 1.0 if k < 15 else
    ...     4.0 if k < 20 else 80.0} for k in range(12, 27)], {"caches": []})
    >>> sweep = Sweep("s", "chase", [{"working_set_bytes": 8192, "order": "random"}])
    >>> [p["working_set_bytes"] >> 10 for p in region_points(sweep, found, 1 << 34).points]
    [8, 128, 2048]
    """
    if not _working_set_sweep(sweep):
        return sweep
    family = get_family(sweep.family)

    def accepted(point: dict[str, Any]) -> bool:
        try:
            family.params(point)
        except (ValueError, TypeError):
            return False
        return True

    points = hierarchy.with_region_points(sweep.points, hierarchy.regions(found, available_bytes), accept=accepted,
                                          full_points=None if full is None else full.points)
    return sweep if len(points) == len(sweep.points) else dataclasses.replace(sweep, points=points)


def plan(items: Sequence[Item], quick: bool, out: str | os.PathLike, *, measured: Hierarchy | None = None,
         available_bytes: int | None = None, fixed: bool = False) -> list[Task]:
    """One :class:`Task` per distinct sweep of ``items`` (sweeps measuring the same points are one),
    in catalogue order, with its file and its estimated seconds. A sweep this machine cannot build
    becomes a task with ``unmeasurable`` set. With this machine's ``measured`` hierarchy, every
    working-set sweep gets a point in each region it lacks (:func:`region_points`). A full run's
    task measures its points in as many runs as the narrowest claim of its items needs
    (:func:`in_full_runs`, :func:`needed_half_width`); its estimate counts the expected runs.
    ``fixed``: the long fixed run instead (:func:`item_sweep`), into files named apart
    (:data:`FIXED_SUFFIX`)."""
    out = Path(out)
    tasks: dict[tuple, Task] = {}
    names: dict[str, tuple] = {}
    for entry in items:
        try:
            sweep = item_sweep(entry, quick, fixed=fixed)
        except (ValueError, NotMeasurable) as error:  # a placement it cannot give, unknown cache sizes
            tasks[("unmeasurable", entry.key)] = Task(None, None, [entry], unmeasurable=str(error))
            continue
        if measured is not None:
            # the sizes a region's point may take: the named sweep's (a quick variant or a full run's
            # thinned one draws from it), a fixed run's own
            full = sweep if fixed else _named_sweep(entry.sweep)
            sweep = region_points(sweep, measured, available_bytes, full)
        key = _task_key(sweep)
        if key in tasks:
            tasks[key].items.append(entry)
            continue
        ending = FIXED_SUFFIX if fixed else ""
        stem = f"{sweep.family}-{sweep.name}{ending}"
        if stem in names and names[stem] != key:
            sweep = dataclasses.replace(sweep, name=f"{sweep.name}-{entry.key}")
            key, stem = _task_key(sweep), f"{sweep.family}-{sweep.name}{ending}"
        names[stem] = key
        tasks[key] = Task(sweep, out / f"{stem}.csv", [entry])
    for task in tasks.values():
        if task.sweep is not None and not quick and not fixed:
            # the runs a point takes follow the narrowest claim of the items that share it
            task.sweep = in_full_runs(task.sweep, needed_half_width(task.items))
    share_points(list(tasks.values()))
    for task in tasks.values():
        if task.sweep is not None and task.measured_here:
            task.seconds = estimate_seconds(task.sweep)
    return list(tasks.values())


def _sample_settings(sweep: Sweep) -> tuple:
    """How a sweep measures each point, its points left out: two sweeps alike here measure a
    point they share alike."""
    return (sweep.family, sweep.repeat, sweep.warmup, sweep.target_seconds, repr(sorted(sweep.options.items())),
            sweep.runs)


def _covers(owner: Precision | None, wanted: Precision | None) -> bool:
    """Whether a point measured under ``owner``'s rule is as precise as ``wanted`` asks (fixed runs:
    the same runs, which the sample settings hold)."""
    if owner is None or wanted is None:
        return owner is None and wanted is None
    return (owner.half_width <= wanted.half_width and owner.min_runs >= wanted.min_runs
            and owner.max_runs >= wanted.max_runs)


def _point_identity(family: Any, point: dict[str, Any]) -> tuple:
    """A point's key with its parameters completed as the family completes them."""
    return point_key({"family": family.name, **dataclasses.asdict(family.params(point))}, family.param_names)


def share_points(tasks: Sequence[Task]) -> None:
    """Measure a point once when several tasks measure it alike: the same family and parameters
    (complete, as the family fills them in), the same samples, runs and options, and a precision
    rule at least as narrow in the task that measures it. The first task in catalogue order keeps
    the point; a later one leaves it out of its sweep and records where it is
    (:attr:`Task.shared`), so that its items are judged on those rows too (:func:`reproduce`).
    A task left with no point of its own runs nothing. Figures 3.15, 3.16 and 7.1 walk many of
    the same lists at the same sizes, for example."""
    owners: dict[tuple, Task] = {}
    for task in tasks:
        if task.sweep is None:
            continue
        family = get_family(task.sweep.family)
        settings = _sample_settings(task.sweep)
        kept: list[dict[str, Any]] = []
        borrowed: dict[int, tuple[Task, list[dict[str, Any]]]] = {}
        for point in task.sweep.points:
            try:
                key = (settings, _point_identity(family, point))
            except (ValueError, TypeError):  # the run will refuse it and say so
                kept.append(point)
                continue
            owner = owners.get(key)
            if owner is not None and owner is not task and _covers(owner.sweep.precision, task.sweep.precision):
                borrowed.setdefault(id(owner), (owner, []))[1].append(point)
                continue
            kept.append(point)
            owners.setdefault(key, task)
        if borrowed:
            task.shared = list(borrowed.values())
            if kept:
                task.sweep = dataclasses.replace(task.sweep, points=kept)
            else:
                task.measured_here = False


def _dataset_path(task: Task) -> Path | None:
    """Where the task's rows are: its own file, or (every point shared) the first measuring task's."""
    if task.path is not None and Path(paths_for(task.path)[0]).exists():
        return task.path
    return next((owner.path for owner, _ in task.shared if owner.path is not None), task.path)


def _with_shared(task: Task, own: Dataset | None, loaded: dict[int, Dataset | None]) -> Dataset | None:
    """The task's dataset with the rows of its shared points from the tasks that measured them
    (``loaded``: dataset by ``id(task)``); its own rows of those points (from a run into the same
    folder before they were shared) are left out, so no point is counted twice. A task with no
    file of its own takes the first measuring task's metadata under its own sweep's name."""
    assert task.sweep is not None
    family = get_family(task.sweep.family)

    def key(row: dict[str, Any]) -> tuple:
        return point_key(row, family.param_names)

    rows: list[dict[str, Any]] = []
    keys: set[tuple] = set()
    metadata: dict[str, Any] | None = dict(own.metadata) if own is not None else None
    for owner, points in task.shared:
        wanted = {_point_identity(family, p) for p in points}
        keys |= wanted
        theirs = loaded.get(id(owner))
        if theirs is None:
            continue
        rows.extend(row for row in theirs.rows if key(row) in wanted)
        if metadata is None:
            metadata = {**theirs.metadata, "sweep": task.sweep.name, "description": task.sweep.description}
    if metadata is None:
        return None
    mine = [row for row in own.rows if key(row) not in keys] if own is not None else []
    return Dataset(mine + rows, metadata)


def _pending_points(task: Task) -> list[dict[str, Any]]:
    """The points of the task's sweep with an expected run not in its dataset yet (the run's plan;
    under a precision rule a point with its minimum runs on disk counts as there)."""
    assert task.sweep is not None
    plan = Run(task.sweep, task.path).plan()
    waiting = {plan.key(point) for point, _ in plan.expected_pending_runs}
    return [point for point in plan.points if plan.key(point) in waiting]


def _pending_runs(task: Task) -> int:
    """How many of the runs the task's points are expected to take are not in its dataset yet
    (under a precision rule: of its minimum runs)."""
    assert task.sweep is not None
    return len(Run(task.sweep, task.path).plan().expected_pending_runs)


def _runs(task: Task, maximum: bool = False) -> int:
    """The runs the task's points are expected to take (with ``maximum``: may take), all points."""
    assert task.sweep is not None
    return len(task.sweep.points) * (task.sweep.runs_per_point if maximum else task.sweep.expected_runs)


def _runs_text(sweep: Sweep) -> str:
    """A sweep's runs a point: ``3``, or a precision rule's ``2-3``."""
    if sweep.precision is None:
        return str(sweep.runs_per_point)
    return f"{sweep.precision.min_runs}-{sweep.precision.max_runs}"


def _times(out: Path) -> dict[str, float]:
    try:
        data = json.loads((out / TIMES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}


def _point_seconds(task: Task, times: dict[str, float]) -> float:
    """Seconds per run of a point: measured by an earlier run into this folder, else the estimate."""
    assert task.sweep is not None
    stem = task.path.stem if task.path else ""
    if stem in times:
        return times[stem]
    return task.seconds / max(1, _runs(task))


def listing(items: Sequence[Item] | None = None, *, quick: bool = False, out: str | os.PathLike | None = None,
            fixed: bool = False) -> str:
    """The catalogue as a text table: item, source figure, sweep, runs a point, estimated time of
    the runs expected and of the most runs the points may take (and, with ``out``, the points
    already there), for the quick run, the full run or (``fixed``) the long fixed run; the totals
    of all three at the end."""
    items = list(items) if items is not None else catalogue.select()
    folder = Path(out) if out is not None else Path(".memlab-reproduce-nowhere")
    times = _times(folder) if out is not None else {}
    kept = hierarchy.load(folder) if out is not None else None
    totals, most = {}, {}
    modes = {"quick": (True, False), "full": (False, False), "fixed": (False, True)}
    plans = {mode: plan(items, is_quick, folder, measured=kept, fixed=is_fixed)
             for mode, (is_quick, is_fixed) in modes.items()}
    for mode, planned in plans.items():
        runnable = [task for task in planned if task.sweep is not None and task.measured_here]
        totals[mode] = sum(_point_seconds(task, times) * _runs(task) for task in runnable)
        most[mode] = sum(_point_seconds(task, times) * _runs(task, maximum=True) for task in runnable)
    tasks = plans["quick" if quick else "fixed" if fixed else "full"]  # the table shows the mode asked for
    lines = [f"{'item':<20} {'source':<44} {'sweep':<34} {'runs':>5} {'time':>9} {'at most':>9}"
             + ("  on disk" if out is not None else "")]
    for task in tasks:
        for position, entry in enumerate(task.items):
            heading = f"{catalogue.SOURCES[entry.source].short}, {entry.label}"
            runs_text = most_text = ""
            if task.sweep is None:
                sweep_text, time_text = entry.sweep, "-"
                extra = f"  cannot run here: {task.unmeasurable}"
            else:
                sweep_text = f"{task.sweep.family}.{task.sweep.name}"
                runs_text = _runs_text(task.sweep)
                if position or not task.measured_here:
                    time_text = "(shared)"
                else:
                    time_text = format_duration(_point_seconds(task, times) * _runs(task))
                    most_text = format_duration(_point_seconds(task, times) * _runs(task, maximum=True))
                extra = ""
                if task.shared and position == 0:
                    count = sum(len(points) for _, points in task.shared)
                    where = ", ".join(owner.items[0].key for owner, _ in task.shared)
                    extra = f"  {count} point{'s' if count != 1 else ''} measured once, with {where}"
                if out is not None and position == 0 and task.measured_here:
                    pending = len(_pending_points(task))
                    extra += f"  {len(task.sweep.points) - pending}/{len(task.sweep.points)} points"
            lines.append(f"{entry.key:<20} {heading[:44]:<44} {sweep_text[:34]:<34} {runs_text:>5} {time_text:>9} "
                         f"{most_text:>9}{extra}".rstrip())
    lines.append("")
    measured = " (seconds per point measured by the runs into this folder where there were some)" if times else ""

    def both(mode: str) -> str:
        text = format_duration(totals[mode])
        return text if most[mode] <= totals[mode] else f"{text} (at most {format_duration(most[mode])})"

    lines.append(f"estimated on this machine: quick run {both('quick')}, full run {both('full')}, long fixed run "
                 f"(--fixed) {both('fixed')} ({len(items)} items){measured}")
    return "\n".join(lines)


# ---- judging ---------------------------------------------------------------------------


def judge(item: Item | str, dataset: Dataset | str | os.PathLike | None, *, reason: str = "",
          compare_with: Sequence[Dataset | str | os.PathLike | None] = (), measured: Hierarchy | None = None,
          available_bytes: int | None = None) -> ItemResult:
    """Judge ``item`` (or its key) on a dataset of its sweep: this machine's numbers and a verdict
    per claim. Without a dataset every claim is not measurable, for ``reason``. ``compare_with``:
    datasets of the items in ``item.compare_with`` (figure 3.26's one thread for figure 3.27),
    whose rows the claims read beside the item's own (the report still shows the item's own).
    ``measured``: the machine's measured hierarchy (:mod:`memlab.hierarchy`), attached to the
    dataset's metadata so that the claims' regions come from its edges (default: sysfs's sizes,
    or a hierarchy the dataset already carries); ``available_bytes``: the memory available for
    the cap of "beyond the last cache" (default: as when it was measured).

    >>> print(judge("pipes-touch", None, reason="not run").verdicts[0].detail)
    not run
    """
    entry = catalogue.item(item) if isinstance(item, str) else item
    path = None
    if dataset is not None and not isinstance(dataset, Dataset):
        path = Path(dataset)
        dataset = Dataset.load(dataset)
    if dataset is not None and measured is not None:
        dataset.metadata["hierarchy"] = hierarchy.attach(measured, available_bytes)
    if dataset is None:
        why = reason or "the sweep was not run"
        numbers = [(n, None, why) for n in entry.numbers]
        return ItemResult(entry, None, numbers, [Verdict(NOT_MEASURABLE, why, reason=why) for _ in entry.claims], path)
    shown, selected = _selected(entry, dataset, compare_with)
    values, verdicts = _assess(entry, selected)
    return ItemResult(entry, shown, [(n, *v) for n, v in zip(entry.numbers, values)], verdicts, path)


def _selected(entry: Item, dataset: Dataset,
              compare_with: Sequence[Dataset | str | os.PathLike | None] = ()) -> tuple[Dataset, Dataset]:
    """The item's rows of ``dataset`` (what the report shows) and those with the rows of the
    datasets it compares with (what its numbers and claims read)."""
    selected = entry.select_rows(dataset)
    others = [Dataset.load(d) if not isinstance(d, Dataset) else d for d in compare_with if d is not None]
    shown = selected
    if others:
        selected = Dataset(selected.rows + [row for other in others for row in other.rows], selected.metadata)
    return shown, selected


def _assess(entry: Item, selected: Dataset) -> tuple[list[tuple[float | None, str]], list[Verdict]]:
    """The item's numbers (value, note) and claims' verdicts on its rows: what judging costs (the
    claims' run-level intervals are bootstraps), kept free of the item's functions so that a
    worker process can return it (:func:`judge_all`)."""
    values: list[tuple[float | None, str]] = []
    for number in entry.numbers:
        try:
            values.append(tuple(number.measure(selected)))  # type: ignore[arg-type]
        except Exception as error:  # a check's own bug must not cost the whole report
            values.append((None, f"could not be read: {type(error).__name__}: {error}"))
    verdicts = []
    for claim in entry.claims:
        try:
            verdicts.append(_with_reason(entry, claim.text, claim.judge(selected), selected))
        except Exception as error:
            verdicts.append(Verdict(NOT_MEASURABLE, f"the check could not run: {type(error).__name__}: {error}"))
    return values, verdicts


def judge_all(jobs: Sequence[tuple[Item, Dataset, Sequence[Dataset | None], Hierarchy | None, int | None]],
              workers: int = 1, on_item: Callable[[int, int], None] | None = None) -> list[ItemResult]:
    """:func:`judge` of every ``(item, dataset, compare_with, measured, available_bytes)``, in
    order; ``workers`` above 1: the numbers and claims assessed by that many forked processes at
    once (:func:`memlab.report.forked_map`), each item's bootstraps in one of them: a full run's 85
    intervals took 93 s of one CPU. ``on_item(done, total)`` after each.

    >>> judge_all([])
    []
    """
    prepared = []
    for entry, dataset, compare_with, measured, available in jobs:
        if measured is not None:
            dataset.metadata["hierarchy"] = hierarchy.attach(measured, available)
        prepared.append((entry, *_selected(entry, dataset, compare_with)))
    assessed = forked_map(lambda job: _assess(job[0], job[2]), prepared, workers, on_item)
    return [ItemResult(entry, shown, [(n, *v) for n, v in zip(entry.numbers, values)], verdicts)
            for (entry, shown, _), (values, verdicts) in zip(prepared, assessed)]


def _with_reason(entry: Item, claim: str, found: Verdict, dataset: Dataset) -> Verdict:
    """The verdict with its reason (memlab.reasons) when it is not "reproduced"."""
    if found.status in (REPRODUCED, PASSES) or found.reason:
        return found
    context = Context(entry.key, claim, found.status, found.detail, dict(found.values), dataset, entry.machine)
    reason = explain(context)
    if found.status == INCONCLUSIVE and reason == CANDIDATE_DEFECT:
        reason = INCONCLUSIVE_REASON
    return dataclasses.replace(found, reason=reason)


#: The reason of an inconclusive verdict no rule of memlab.reasons explains: not a defect, a run
#: too noisy (or too short) for the claim's bound.
INCONCLUSIVE_REASON = ("the run-level interval straddles the claim's bound: this run cannot tell either way "
                       "(more runs, or a quieter machine, may)")


# ---- running ---------------------------------------------------------------------------


def _record_time(out: Path, task: Task, points: int, seconds: float) -> None:
    if points <= 0 or task.path is None:
        return
    times = _times(out)
    times[task.path.stem] = seconds / points
    atomic_write(out / TIMES_FILE, json.dumps(times, indent=1, sort_keys=True))


def _run_task(task: Task, out: Path, bar: Any, times: dict[str, float]) -> None:
    assert task.sweep is not None and task.path is not None
    run = Run(task.sweep, task.path, resume=True)
    pending = run.plan().expected_pending_runs  # what the ETA counts
    per_point = _point_seconds(task, times)
    precision = task.sweep.precision
    bar.set_description_str(", ".join(i.key for i in task.items)[:60], refresh=True)
    started = time.monotonic()
    measured = 0

    def on_point(point: dict[str, Any], row: dict[str, Any] | None) -> None:
        nonlocal measured
        if row is not None:
            measured += 1
            if precision is not None and row.get(RUN_STOP_COLUMN) == "" and run_index(row) + 1 >= precision.min_runs:
                bar.extend(per_point)  # the point takes a run beyond those expected: the work, and the ETA, grow
            bar.update(per_point)

    try:
        run.execute(progress=False, on_point=on_point, warn=task.warnings.append)
    finally:
        task.ran_seconds = time.monotonic() - started
        _record_time(out, task, measured, task.ran_seconds)
        bar.update(per_point * max(0, len(pending) - measured))
        if task.warnings:
            disturbed = [w for w in task.warnings if "machine check" not in w]
            points = len(disturbed)
            line = (f"reproduce: {task.name}: {len(task.warnings)} warning(s), the first"
                    f"{' disturbed point' if points else ''}: {(disturbed or task.warnings)[0].removeprefix(WARNING_PREFIX)}")
            if points:
                memlab_warn(line, ConditionsWarning, count=points)
            else:
                memlab_warn(line, MachineWarning)


def reproduce(
    items: Sequence[str] | None = None,
    *,
    quick: bool = False,
    out: str | os.PathLike = "memlab-reproduce",
    progress: bool = True,
    command: str | None = None,
    say: Callable[[str], None] | None = None,
    remeasure: bool = False,
    fixed: bool = False,
) -> ReproduceResult:
    """Run the catalogue's items (all, or those named: item keys, sources, families) into ``out``,
    judge every claim and write ``out/report.html`` and ``out/verdicts.json``.

    Resumable: points already in ``out`` are not measured again. A sweep that
    fails is recorded (its items judged on the rows it wrote) and the run goes
    on; Ctrl-C stops it, and the report still shows what was measured. ``progress``: bars
    when stderr is a terminal or in Jupyter, none in logs (:func:`memlab.sweep.progress_enabled`).

    When a chosen item's sweep has working sets, this machine's cache hierarchy comes first
    (:func:`memlab.hierarchy.obtain`: kept in ``out/hierarchy.json`` under the machine's
    fingerprint, measured when there is none for it or with ``remeasure``): every working-set
    sweep gets a point in each region it lacks and every dataset judged carries it.

    ``fixed``: the long fixed run instead of the full run (every point in :data:`FIXED_RUNS` runs
    of its sweep's own samples, into ``*-fixed.csv``): the run whose verdicts a full run is
    checked against (``experiments/full_vs_fixed.py``).

    >>> result = reproduce(["table6.1"], quick=True, out="/tmp/r", progress=False)   # doctest: +SKIP
    >>> result.report                                                                 # doctest: +SKIP
    PosixPath('/tmp/r/report.html')
    """
    chosen = catalogue.select(items)
    if quick and fixed:
        raise ValueError("quick=True and fixed=True: the long fixed run is a full run (choose one)")
    progress = progress_enabled(progress)  # the rule of every command: a terminal or Jupyter, not a log
    out = check_output_directory(out, "out")  # OutputError (a ValueError): a file, FIFO, link, /proc/x
    result = ReproduceResult(out=out, quick=quick, fixed=fixed)
    measuring = _Stopwatch()
    result.tasks = plan(chosen, quick, out, fixed=fixed)
    available = None
    if any(task.sweep is not None and _working_set_sweep(task.sweep) for task in result.tasks):
        result.hierarchy, result.hierarchy_note = _obtain_hierarchy(out, remeasure, progress)
        if say is not None:
            say(f"memlab reproduce: caches: {result.hierarchy_note}")
        if result.hierarchy is not None:
            facts: dict[str, Any] = {}
            collect_meminfo(facts)
            available = result.available_bytes = facts.get("memory_available_bytes")
            result.tasks = plan(chosen, quick, out, measured=result.hierarchy, available_bytes=available, fixed=fixed)
    times = _times(out)
    runnable = [t for t in result.tasks if t.sweep is not None and t.measured_here]
    total = sum(_point_seconds(t, times) * _pending_runs(t) for t in runnable)
    bar = eta_bar(total, "reproduce", enabled=progress)
    try:
        for task in runnable:
            try:
                _run_task(task, out, bar, times)
            except KeyboardInterrupt:
                result.interrupted = True
                task.error = "interrupted (Ctrl-C); the points measured so far are kept"
                for later in runnable[runnable.index(task) + 1:]:
                    later.error = "not run: the run was interrupted (Ctrl-C) before this sweep"
                break
            except (OSError, MemoryError, TimeoutError, ValueError, RuntimeError) as error:
                task.error = f"{type(error).__name__}: {error}"
                if say is not None:
                    say(f"memlab reproduce: {task.name} failed: {task.error}")
    finally:
        bar.close()
    result.phases["measuring"] = measuring.elapsed()
    reporting = _Stopwatch()
    datasets: dict[str, Dataset | None] = {}
    loaded: dict[int, Dataset | None] = {}
    for task in result.tasks:
        dataset = None
        if task.path is not None and Path(paths_for(task.path)[0]).exists():
            try:
                dataset = Dataset.load(task.path)
            except (OSError, ValueError) as error:
                task.error = task.error or f"the dataset cannot be read: {error}"
        loaded[id(task)] = dataset
    for task in result.tasks:
        dataset = loaded[id(task)]
        if task.shared:
            dataset = _with_shared(task, dataset, loaded)
            if task.error == "" and not task.measured_here:
                task.error = next((owner.error for owner, _ in task.shared if owner.error), "")
        for entry in task.items:
            datasets[entry.key] = dataset
    jobs, judged_on = [], []
    for task in result.tasks:
        for entry in task.items:
            dataset = datasets[entry.key]
            if dataset is None or (not len(dataset) and (task.error or task.unmeasurable)):
                why = task.unmeasurable or task.error or "the sweep was not run"
                judged = judge(entry, None, reason=why)
                judged.error = task.error
                judged.warnings = list(task.warnings)
                result.items.append(judged)
            else:
                jobs.append((entry, dataset, [datasets.get(key) for key in entry.compare_with], result.hierarchy,
                             available))
                judged_on.append(task)
    bar = progress_bar(len(jobs), "judging", enabled=progress and bool(jobs), unit="item")
    try:
        found = judge_all(jobs, figure_workers(), on_item=lambda done, total: bar.update(1))
    finally:
        bar.close()
    for judged, task in zip(found, judged_on):
        judged.path = _dataset_path(task)
        judged.error = task.error
        judged.warnings = list(task.warnings)
        result.items.append(judged)
    order = {entry.key: index for index, entry in enumerate(chosen)}
    result.items.sort(key=lambda r: order[r.item.key])
    write_results(result, command, progress=progress, reporting=reporting)
    return result


def _obtain_hierarchy(out: Path, remeasure: bool, progress: bool) -> tuple[Hierarchy | None, str]:
    """This machine's measured hierarchy (kept or measured now, with a bar over the curve's points)
    and a line saying what it is; None with the reason when it cannot be had or shows no L1d and L2
    edges (the regions then come from sysfs's sizes)."""
    bar = None

    def on_point(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total, "caches of this machine", enabled=progress)
        bar.update(1)

    try:
        found, why = hierarchy.obtain(out, remeasure=remeasure, on_point=on_point)
    except (OSError, MemoryError, TimeoutError, ValueError, RuntimeError) as error:
        return None, f"could not be measured ({type(error).__name__}: {error}); the regions come from sysfs's sizes"
    finally:
        if bar is not None:
            bar.close()
    if found.l1d_bytes is None or found.l2_bytes is None:
        return None, f"{hierarchy.summary(found)}: no L1d and L2 edges, so the regions come from sysfs's sizes"
    took = f", {format_duration(found.seconds)}" if why.startswith("measured") and found.seconds else ""
    return found, f"{hierarchy.summary(found)} ({why}{took})"


#: At most this many processes draw a report's figures at once (:func:`figure_workers`).
MAX_FIGURE_WORKERS = 4


def figure_workers() -> int:
    """How many processes draw the report's figures: the CPUs this process may use, at most
    :data:`MAX_FIGURE_WORKERS` (a quick report's 37 figures took 36 s of one CPU).

    >>> 1 <= figure_workers() <= MAX_FIGURE_WORKERS
    True
    """
    return max(1, min(MAX_FIGURE_WORKERS, len(os.sched_getaffinity(0))))


def write_results(result: ReproduceResult, command: str | None = None, *, progress: bool = False,
                  reporting: _Stopwatch | None = None) -> Path:
    """Write ``report.html`` and ``verdicts.json`` of a result into its folder; the report's path.
    ``progress``: a bar over the report's sections (drawing the figures takes a while).
    ``reporting``: when the reporting phase began (default: now); its wall and CPU time, up to the
    report written, go into ``result.phases`` and verdicts.json (written even if the report fails)."""
    reporting = reporting or _Stopwatch()
    bar = progress_bar(len(result.items), "report.html", enabled=progress_enabled(progress) and bool(result.items),
                       unit="figure")

    def drawn(done: int, total: int, title: str) -> None:
        bar.update(1)

    def figure(done: int, total: int) -> None:
        if done == 1:  # the figures first, then the sections: one bar over both
            bar.total = total + len(result.items)
            bar.refresh()
        bar.update(1)

    try:
        result.report = write_report(_report_items(result), result.out / REPORT_FILE, title="memlab reproduce",
                                     command=command, intro=_intro(result), preamble=_summary_html(result),
                                     on_section=drawn, figure_workers=figure_workers(), on_figure=figure)
    finally:
        bar.close()
        result.phases["reporting"] = reporting.elapsed()
        result.seconds = sum(phase.wall_s for phase in result.phases.values())
        _write_verdicts(result)
    return result.report


def _write_verdicts(result: ReproduceResult) -> None:
    data = {
        "quick": result.quick,
        "mode": result.mode,
        "seconds": round(result.seconds, 1),
        "phases": {name: phase.to_dict() for name, phase in result.phases.items()},
        "interrupted": result.interrupted,
        "counts": {status: result.count(status) for status in VERDICTS},
        "hierarchy": ({"note": result.hierarchy_note, **hierarchy.attach(result.hierarchy, result.available_bytes)}
                      if result.hierarchy is not None else {"note": result.hierarchy_note} if result.hierarchy_note
                      else None),
        "sanity_counts": {status: result.sanity_count(status) for status in SANITY_VERDICTS},
        "items": [r.to_dict() for r in result.items],
    }
    atomic_write(result.out / VERDICTS_FILE, json.dumps(data, indent=1, default=str))


# ---- the report --------------------------------------------------------------------------

_BADGE = {REPRODUCED: "verdict-good", NOT_REPRODUCED: "verdict-bad", INCONCLUSIVE: "verdict-open",
          NOT_MEASURABLE: "verdict-none", PASSES: "verdict-good", FAILS: "verdict-bad"}


def _badge(status: str) -> str:
    """A verdict as a coloured label: "inconclusive" (and any verdict without a colour of its own)
    gets the amber one of a verdict that is neither good nor bad."""
    return f'<span class="verdict {_BADGE.get(status, "verdict-open")}">{escape(status)}</span>'


def differs(status: str) -> bool:
    """Whether a verdict says this machine differs from the source (or could not tell): every
    verdict but "reproduced" and "not measurable" ("not reproduced", "inconclusive"), and of the
    sanity checks the one that fails.

    >>> differs("not reproduced"), differs("reproduced"), differs("not measurable")
    (True, False, False)
    >>> differs("passes"), differs("fails")
    (False, True)
    """
    return status not in (REPRODUCED, NOT_MEASURABLE, PASSES)


def _number_text(value: float | None) -> str:
    """A measured number as the report's tables write it; "-" where there is none.

    >>> _number_text(None), _number_text(float("nan")), _number_text(1.5)
    ('-', '-', '1.500')
    """
    return "-" if value is None or not math.isfinite(value) else format_number(value)


#: Where a source's number applies, read off its quantity's words: the cache regions of
#: :func:`memlab.catalogue.region` (the one definition of the regions the claims are judged in).
_REGION_WORDS = (("beyond the last cache", "beyond_llc"), ("beyond the l2", "beyond_l2"), ("l1d region", "l1"),
                 ("in the l1d", "l1"), ("l2 region", "l2"), ("in the l2", "l2"), ("l3 region", "l3"),
                 ("in the l3", "l3"))
_AT_SIZE = re.compile(r"\bat 2\^(\d+) bytes\b")
#: The cache a region's working sets fall in, as the column "cache here" names it.
_REGION_LEVEL = {"l1": "L1d", "l2": "L2", "l3": "L3", "beyond_llc": "memory"}


def number_place(number: Number) -> tuple[str, float | str] | None:
    """Where a source's number applies, read off its quantity: ``("region", where)`` (a region of
    :func:`memlab.catalogue.region`: ``l1``, ``l2``, ``l3``, ``beyond_l2``, ``beyond_llc``),
    ``("size", bytes)`` ("at 2^20 bytes"), or None (the words name no working set).

    >>> number_place(Number("cycles per element, random, beyond the L2", 240, "cycles"))
    ('region', 'beyond_l2')
    >>> number_place(Number("speed-up of huge pages at 2^20 bytes", 0.57, "fraction"))
    ('size', 1048576)
    >>> number_place(Number("naive", 0.318, "GFLOP/s")) is None
    True
    """
    words = number.quantity.lower()
    for phrase, where in _REGION_WORDS:
        if phrase in words:
            return "region", where
    found = _AT_SIZE.search(words)
    if found:
        return "size", 1 << int(found.group(1))
    return None


def _cache_here(number: Number, ds: Dataset | None) -> str:
    """The cache the working sets a number applies to fall in on this machine (the column
    :data:`memlab.report.CACHE_COLUMN`): its region's cache, or the cache its size fits in; "-"
    where it names no working set. "Beyond the L2" is the L3 and memory where the machine has an L3."""
    place = number_place(number)
    if place is None or ds is None:
        return "-"
    sizes, _ = cache_levels_here(ds)
    kind, where = place
    if kind == "size":
        return chart.cache_level(float(where), sizes)
    if where == "beyond_l2":
        return "L3 / memory" if "L3" in sizes else "memory"
    return _REGION_LEVEL.get(str(where), "-")


def _unit_key(text: str) -> str:
    """A unit or an axis label reduced to its unit, so that the two compare: the words in
    parentheses go, "per element" goes, "per" becomes "/".

    >>> _unit_key("cycles per element (at 3.00 GHz)"), _unit_key("bytes per cycle (per thread)"), _unit_key("GiB/s")
    ('cycles', 'bytes/cycle', 'gib/s')
    """
    text = re.sub(r"\([^)]*\)", " ", text.lower())
    text = re.sub(r"\bper (list )?element\b", " ", text)
    text = re.sub(r"\s*\bper\b\s*", "/", text.strip())
    return re.sub(r"\s+", " ", text).strip(" ,/")


def _axes_for(fig: Any, unit: str) -> tuple[Any, Callable[[float], float]] | None:
    """The axes of ``fig`` whose y axis is in ``unit`` and how a value in ``unit`` becomes that
    axes' data y (a secondary axis, as the chase's cycles beside its ns, converts through it)."""
    wanted = _unit_key(unit)
    if not wanted:
        return None
    for ax in fig.axes:
        if _unit_key(ax.get_ylabel()) == wanted:
            return ax, lambda y: y
    for ax in fig.axes:
        for child in getattr(ax, "child_axes", []):
            if _unit_key(child.yaxis.get_label().get_text()) == wanted:
                # The secondary axis's scale maps its values onto its parent's scaled y; the
                # parent's scale, inverted, gives the parent's value (no drawing needed).
                def convert(y: float, ax: Any = ax, child: Any = child) -> float:
                    scaled = child.yaxis.get_transform().transform([y])
                    return float(ax.yaxis.get_transform().inverted().transform(scaled)[0])

                return ax, convert
    return None


def _source_label(number: Number) -> str:
    """A marker's label: the source's value and unit, and where it applies (the quantity without
    a first part that only repeats the unit).

    >>> _source_label(Number("cycles per element, random, beyond the L2", 240, "cycles"))
    'source: 240 cycles, random, beyond the L2'
    >>> _source_label(Number("1 GiB pages, GB/s", 25.4, "GB/s"))
    'source: 25.4 GB/s, 1 GiB pages'
    """
    parts = number.quantity.split(", ")
    if len(parts) > 1:
        parts = [part for part in parts if _unit_key(part) != _unit_key(number.unit)] or parts
    return f"source: {float(number.source):.4g} {number.unit}, {', '.join(parts)}"


def _category(ax: Any, number: Number) -> tuple[float, float] | None:
    """The x of the one category (bar group) of a figure's x axis the number's quantity names (its
    first words are the category's label, or the label's last line: "+huge pages" under
    "vmsplice/splice +huge pages"), and the width of a category; None when none or several do."""
    first = number.quantity.split(", ")[0].strip().lower()
    ticks = list(ax.get_xticks())
    hits = []
    for x, text in zip(ticks, (label.get_text() for label in ax.get_xticklabels())):
        lines = [line.strip().lower() for line in text.split("\n") if line.strip()]
        if lines and first in (" ".join(lines), lines[-1]):
            hits.append(float(x))
    if len(hits) != 1:
        return None
    steps = [b - a for a, b in zip(ticks, ticks[1:]) if b > a]
    return hits[0], min(steps) if steps else 1.0


def _working_set_axis(ax: Any) -> bool:
    return "working set" in ax.get_xlabel().lower()


def mark_numbers(fig: Any, ds: Dataset | None, numbers: Sequence[Number]) -> list[str]:
    """Mark on an item's figure every source number that compares with what it plots
    (:func:`memlab.chart.mark_source`); the labels drawn. A number compares when the figure has
    a y axis in its unit and a place for it: on a working-set axis the region its quantity names
    (a line across the figure's working sets in that region, the marker at their middle) or its
    size; on any other x axis (bars by setting, by rung) a number naming no working set: over
    the bar group its quantity names (:func:`_category`), else as a line across. Numbers at one
    place share one marker, a line of its label each. The others (a ratio, a size, a region the
    figure has no point in) are left out of the figure; they stay in the numbers table.
    """
    drawn: list[str] = []
    planned: dict[tuple, tuple[Any, list[str]]] = {}
    sizes = sorted({float(row["working_set_bytes"]) for row in (ds.rows if ds is not None else [])
                    if chart.finite(row.get("working_set_bytes")) and row["working_set_bytes"] > 0})
    for number in numbers:
        if not number.compare or not chart.finite(number.source):
            continue
        found = _axes_for(fig, number.unit)
        if found is None:
            continue
        ax, convert = found
        place = number_place(number)
        label = _source_label(number)
        x: float | None = None
        span: tuple[float, float] | None = None
        if _working_set_axis(ax):
            if place is None or not sizes:
                continue
            kind, where = place
            if kind == "size":
                x = float(where)
                if not sizes[0] / 2 <= x <= sizes[-1] * 2:
                    continue
            else:
                try:
                    inside = sorted(catalogue.region(ds, {size: size for size in sizes}, str(where)))
                except (NotMeasurable, ValueError):
                    continue  # a region the figure has no point in, or one this machine lacks
                x = math.exp((math.log(inside[0]) + math.log(inside[-1])) / 2)
                span = (inside[0], inside[-1]) if len(inside) > 1 else None
        elif place is not None:
            continue  # a working set on a figure that has none
        else:
            named = _category(ax, number)
            if named is not None:  # over its bar group; else a line across every bar
                x, width = named
                span = (x - 0.4 * width, x + 0.4 * width)
        try:
            y = convert(float(number.source))
        except ValueError:
            continue
        planned.setdefault((id(ax), x, y, span), (ax, []))[1].append(label)
    for (_, x, y, span), (ax, labels) in planned.items():
        try:  # numbers at one place (write and copy both 0.5 bytes/cycle there) share a marker, a line each
            chart.mark_source(ax, x, y, "\n".join(labels), span=span)
        except ValueError:
            continue  # a value the axis cannot show (0 on a log axis)
        drawn += labels
    return drawn


def _numbers_html(result: ItemResult) -> str:
    if not result.numbers:
        return ""
    rows = []
    for number, value, reason in result.numbers:
        ratio = number.ratio(value)
        here = _number_text(value) if value is not None else f"- ({reason})"
        rows.append([escape(number.quantity), escape(number.unit), escape(_number_text(number.source)),
                     escape(here), escape("-" if ratio is None else f"{ratio:.3g}"),
                     escape(_cache_here(number, result.dataset)), escape(number.note),
                     _provenance_html(number.provenance)])
    return ("<p><b>The source's numbers beside this machine's</b></p>"
            + html_table(["quantity", "unit", "source", "this machine", "here / source", CACHE_COLUMN, "note",
                          "read in"], rows, html_cells=True, wrap=(0, 3, 6)))


def _provenance_html(provenance: Any) -> str:
    """Where a published number was read: the original (linked) or a translation of it, in one
    short word each, so that the numbers table fits a laptop's width.

    >>> _provenance_html(None)
    '-'
    """
    if provenance is None:
        return "-"
    name = "original" if provenance.kind == "original" else "translation"
    return f'<a href="{escape(provenance.url)}">{name}</a>'



def _verdicts_html(result: ItemResult) -> str:
    """The item's claims, then its sanity checks apart (they are never counted as reproduced)."""
    lines = []
    for heading, sanity in (("Claims", False), ("Sanity checks (not counted as reproduced)", True)):
        pairs = [(c, v) for c, v in zip(result.item.claims, result.verdicts) if c.sanity == sanity]
        if not pairs:
            continue
        lines += [f"<p><b>{heading}</b></p>", "<ul class=claims>"]
        for claim, found in pairs:
            why = reason_html(found.reason) if found.reason and found.reason != found.detail else "<br>"
            lines.append(f"<li>{_badge(found.status)} {escape(claim.text)}{why}<span class=meta>Source: "
                         f"{escape(claim.cite)}</span><br>{escape(found.detail)}</li>")
        lines.append("</ul>")
    return "\n".join(lines)


def _source_html(item: Item) -> str:
    source = catalogue.SOURCES[item.source]
    return (f"<p><b>Source:</b> {escape(source.author)}, <a href=\"{escape(source.url)}\">{escape(source.title)}</a> "
            f"({source.year}), {escape(item.section)}, {escape(item.label)}.<br>"
            f"<b>What it measured:</b> {escape(item.measured)}<br>"
            f"<b>On:</b> {escape(item.machine)}.<br>"
            f"<b>Here:</b> sweep <code>{escape(item.sweep)}</code>, script <code>{escape(item.script)}</code>, "
            f"notebook <code>{escape(item.notebook)}</code>.</p>")


def _as_item_sweep(item: Item, dataset: Dataset | None, first: Item) -> Dataset | None:
    """The dataset as the item's own sweep: items whose sweeps measure the same points share one
    dataset (:func:`plan`), named after the ``first`` of them; a family that draws and captions by
    sweep (the chase: figure 3.16's miss ratios, figure 3.15's latencies) must see the item's own
    sweep there. The rows are shared, only the sweep's name in the metadata differs.

    >>> shared = Dataset([], {"family": "chase", "sweep": "fig3_15_quick"})
    >>> _as_item_sweep(catalogue.item("fig3.16"), shared, catalogue.item("fig3.15")).metadata["sweep"]
    'fig3_16_quick'
    """
    if dataset is None or item.sweep == first.sweep or not dataset.metadata.get("sweep"):
        return dataset
    quick = str(dataset.metadata["sweep"]).endswith("_quick")
    own = item.sweep.split(".", 1)[-1] + ("_quick" if quick else "")
    return Dataset(dataset.rows, {**dataset.metadata, "sweep": own})


def _marks(judged: ItemResult) -> Callable[[Any], Any] | None:
    """What draws the item's source numbers on its figure (:func:`mark_numbers`); None without any."""
    if not judged.item.numbers:
        return None
    return lambda fig: mark_numbers(fig, judged.dataset, judged.item.numbers)


def _report_items(result: ReproduceResult) -> list[ReportItem]:
    sections = []
    first = {entry.key: task.items[0] for task in result.tasks for entry in task.items}
    for judged in result.items:
        lead = [_source_html(judged.item), _numbers_html(judged), _verdicts_html(judged)]
        notes = []
        if judged.item.note:
            notes.append(judged.item.note)
        if judged.warnings:
            notes.append(f"{len(judged.warnings)} warning(s) while measuring, the first: {judged.warnings[0]}")
        sections.append(ReportItem(
            title=judged.item.heading, dataset=_as_item_sweep(judged.item, judged.dataset, first.get(judged.item.key, judged.item)), source=judged.path.name if judged.path else "",
            error=judged.error, lead=lead, notes=notes,
            caption=judged.item.note or None, marks=_marks(judged),
        ))
    return sections


def _intro(result: ReproduceResult) -> str:
    mode = {"quick": "quick", "full": "full", "fixed": "full, long fixed"}[result.mode]
    measuring = result.phases.get("measuring", PhaseTime(0.0, 0.0))
    text = (f"Every source item memlab reproduces, re-measured on this machine ({mode} sweeps, "
            f"{len(result.items)} items, measured in {format_duration(measuring.wall_s)}): what the source measured and on "
            "what machine, its numbers beside this machine's, this machine's figure and points, and a "
            "verdict per claim: reproduced, not reproduced (with the values measured), inconclusive (the "
            "run-level interval straddles the claim's bound) or not measurable here (with the reason); "
            "sanity checks are shown apart and never counted as reproduced.")
    if result.interrupted:
        text += " The run was interrupted; items not reached are not measurable."
    return text


def _claim_line(index: int, judged: ItemResult, claim: Any, found: Verdict) -> str:
    """One claim in the summary: its verdict, a link to its item, the claim, and why."""
    link = f'<a href="#{anchor(index, judged.item.heading)}">{escape(judged.item.key)}</a>'
    why = found.reason or found.detail
    return (f"<li>{_badge(found.status)} {link}: {escape(claim.text)}"
            + (f"<div class=reason><b>Why here:</b> {escape(why)}</div>" if why else "") + "</li>")


def _summary_html(result: ReproduceResult) -> str:
    """What the report leads with: the counts by verdict, every claim that differs here (one line
    each, with its reason and a link to its item), the points whose runs disagree, the claims not
    measurable (folded), then every item with its verdicts."""
    counts = {status: result.count(status) for status in VERDICTS}
    head = " ".join(f"<span class=count>{_badge(status)} {counts[status]}</span>" for status in VERDICTS)
    sanity = " ".join(f"<span class=count>{_badge(status)} {result.sanity_count(status)}</span>"
                      for status in SANITY_VERDICTS)
    parts = ['<section id="summary"><h2>Summary</h2>', f"<p class=counts>Claims: {head}</p>",
             f"<p class=counts>Sanity checks (not counted as reproduced): {sanity}</p>", _hierarchy_html(result)]
    differing, unmeasured = [], []
    for index, judged in enumerate(result.items):
        for claim, found in zip(judged.item.claims, judged.verdicts):
            if differs(found.status):
                differing.append(_claim_line(index, judged, claim, found))
            elif found.status == NOT_MEASURABLE:
                unmeasured.append(_claim_line(index, judged, claim, found))
    if differing:
        parts.append(f"<p><b>What differs here</b> ({len(differing)} claim{'s' if len(differing) != 1 else ''}):</p>")
        parts.append("<ul class=claims>" + "".join(differing) + "</ul>")
    elif result.items:
        parts.append("<p><b>What differs here:</b> nothing; every claim measured here was reproduced.</p>")
    unstable = []
    for index, judged in enumerate(result.items):
        found = unstable_points(judged.dataset) if judged.dataset is not None else []
        if found:
            link = f'<a href="#{anchor(index, judged.item.heading)}">{escape(judged.item.key)}</a>'
            listed = "; ".join(f"{words} ({spread:.2f}x)" for words, spread in found[:4])
            more = f" and {len(found) - 4} more" if len(found) > 4 else ""
            unstable.append(f"<li>{link}: {len(found)} point{'s' if len(found) != 1 else ''}: "
                            f"{escape(listed)}{more}</li>")
    if unstable:
        parts.append(f"<p><b>Unstable points</b> (runs that disagree by more than {UNSTABLE_RUN_SPREAD:.2f}x; "
                     "their verdicts are weaker):</p><ul class=claims>" + "".join(unstable) + "</ul>")
    if unmeasured:
        parts.append(f"<details><summary>Not measurable here ({len(unmeasured)} "
                     f"claim{'s' if len(unmeasured) != 1 else ''})</summary><ul class=claims>"
                     + "".join(unmeasured) + "</ul></details>")
    rows = []
    for index, judged in enumerate(result.items):
        link = f'<a href="#{anchor(index, judged.item.heading)}">{escape(judged.item.key)}</a>'
        each = judged.counts()
        verdicts = " ".join(f"<span class=count>{_badge(status)} {each[status]}</span>"
                            for status in VERDICTS if each[status])
        rows.append(f"<li>{link} {verdicts}<br><span class=meta>{escape(judged.item.heading)}</span></li>")
    parts.append(f"<details><summary>Every item ({len(result.items)})</summary><ul class=items>"
                 + "".join(rows) + "</ul></details>")
    parts.append("</section>")
    return "\n".join(parts)


def _region_text(low: float, high: float) -> str:
    """A region's bounds as the report writes them.

    >>> _region_text(4096, 16384.0), _region_text(1 << 22, math.inf)
    ('4 KiB to 16 KiB', '4 MiB and more')
    """
    if high == math.inf:
        return f"{format_bytes(low)} and more"
    return f"{format_bytes(low)} to {format_bytes(high)}"


def _hierarchy_html(result: ReproduceResult) -> str:
    """The caches measured here and the regions the claims were judged in (docs/reproduce.md, "Regions")."""
    if not result.hierarchy_note:
        return ""
    text = f"<p><b>Caches:</b> {escape(result.hierarchy_note)}."
    if result.hierarchy is not None:
        bounds = hierarchy.regions(result.hierarchy, result.available_bytes)
        listed = "; ".join(f"{hierarchy.REGION_NAMES[name]} {_region_text(*bounds[name])}"
                           for name in hierarchy.REGION_NAMES if name in bounds)
        text += f"<br><b>Regions the claims are judged in:</b> {escape(listed)}."
        capped = hierarchy.cap_note(result.hierarchy, result.available_bytes)
        if capped:
            text += f" {escape(capped[0].upper() + capped[1:])}."
    return text + "</p>"
