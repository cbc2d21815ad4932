"""The run loop: the points of a sweep planned, opened, measured and closed, each row on disk at once.

Every way memlab measures into a dataset goes through one :class:`Run`
(``memlab sweep`` and :func:`memlab.sweep.run_sweep`, fleet sweeps,
``memlab run --out``, the tour, the pytest plugin, ``memlab reproduce``):

- :meth:`Run.plan` (no side effect but reading ``out``): the points (of the
  shard), the points already on disk, the estimated seconds of each point,
  the pending points. The tour, the plugin and ``memlab reproduce`` ask it for
  their estimates and progress totals;
- :meth:`Run.open`: refuses an output that must not be written (before the
  machine check says anything about the machine), gathers the machine facts
  and the machine check through the executor, writes the metadata (machine,
  version, command) and opens the :class:`memlab.dataset.DatasetWriter`;
- :meth:`Run.measure`: the executor measures the pending points; every row
  is tagged with the machine that measured it, appended to the file, counted
  on the progress bars, and its conditions warning said once;
- :meth:`Run.close`: the executor's closing facts (the end check: steal over
  the whole run; a fleet's lost points) go into the metadata, the file and
  the bars are closed.

The executor is how points are measured: :class:`LocalExecutor` in this
process, :class:`ProcessExecutor` each run in a fresh worker process
(:mod:`memlab.worker`), :class:`FleetExecutor` on the workers of a Dask
cluster (docs/fleet.md). An executor gives the run its machines at the start
(:meth:`start`), measures a list of work (:meth:`measure`, calling back for
every row) and says what to record at the end (:meth:`finish`). The work is
every run of every point, in rounds (:meth:`Plan.work`: run 0 of every
point, then run 1 ...): a run's order of work is the executor's, the
writing and the bookkeeping stay the run's. A sweep with a precision rule
(:class:`memlab.grid.Precision`) gives a point another round only while its
run-level interval is wider than the rule needs (:meth:`Run.wants`,
:func:`stop_reason`).

>>> plan = Run(Sweep("demo", "calibrate", [{"budget_ns": 5_000_000}], repeat=1, warmup=0, runs=2)).plan()
>>> len(plan.pending), len(plan.pending_runs), round(plan.seconds, 3)
(1, 2, 0.51)
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from tqdm.auto import tqdm

from memlab import fleet, worker
from memlab._version import __version__
from memlab.check import check, largest_bytes
from memlab.conditions import ConditionsWarning, MachineWarning, MemlabWarning, read_cpu_times
from memlab.conditions import warn as memlab_warn
from memlab.dataset import (
    FINGERPRINT_COLUMN,
    HOST_COLUMN,
    RUN_COLUMN,
    RUN_HALF_WIDTH_COLUMN,
    RUN_SPREAD_COLUMN,
    RUN_STOP_COLUMN,
    RUN_UNSTABLE_COLUMN,
    STOP_INTERVAL,
    STOP_MAXIMUM,
    Dataset,
    DatasetError,
    DatasetWriter,
    context_column,
    machine_key,
    paths_for,
    point_key,
    run_index,
)
from memlab.family import Family
from memlab.files import OutputError, check_output_file
from memlab.grid import Precision, Sweep, check_runs, parse_shard, shard_points
from memlab.machine import collect, fingerprint, identity, machine_id
from memlab.registry import family as get_family
from memlab.significance import is_unstable, median_of_runs_half_width, run_spread
from memlab.units import format_param

__all__ = [
    "CHECK_STEAL_WINDOW_SECONDS",
    "FLEET_MODES",
    "POINT_OVERHEAD_SECONDS",
    "PROCESS_TIMEOUT_FACTOR",
    "PROCESS_TIMEOUT_SLACK_SECONDS",
    "Executor",
    "FleetExecutor",
    "LocalExecutor",
    "Plan",
    "ProcessExecutor",
    "Run",
    "estimate_seconds",
    "eta_bar",
    "move_aside",
    "point_seconds",
    "progress_bar",
    "progress_enabled",
    "stop_reason",
    "sweep_metadata",
]

#: Seconds a point costs beyond its samples (process setup, building, first touch), for estimates.
POINT_OVERHEAD_SECONDS = 0.25

CHECK_STEAL_WINDOW_SECONDS = 0.15
"""The busy window of the machine check at a run's start; the end check
measures steal over the whole run instead."""

FLEET_MODES = ("each-host", "spread")

#: A worker process (:class:`ProcessExecutor`) is killed after this many times its run's
#: estimate plus :data:`PROCESS_TIMEOUT_SLACK_SECONDS`: far beyond a slow run on a loaded
#: machine, short of a kernel that never returns.
PROCESS_TIMEOUT_FACTOR = 20
PROCESS_TIMEOUT_SLACK_SECONDS = 60.0

Warn = Callable[[str], None]
OnPoint = Callable[[dict[str, Any], "dict[str, Any] | None"], None]


# --------------------------------------------------------------------------
# progress bars


def progress_enabled(requested: bool = True, stream=None) -> bool:
    """Whether to draw progress bars: asked for, and stderr is a terminal or this is a Jupyter kernel.

    Logs, pipes and CI output stay quiet.

    >>> progress_enabled(False)
    False
    """
    if not requested:
        return False
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) or _in_jupyter()


def progress_bar(total: int, label: str, *, enabled: bool = True, position: int = 0, leave: bool = True,
                 unit: str = "point"):
    """A tqdm bar (a widget in Jupyter, a line that fits the terminal's width elsewhere).

    Disabled bars accept the same calls and draw nothing.

    >>> bar = progress_bar(3, "demo", enabled=False); bar.update(1); bar.close()
    """
    return tqdm(total=total, desc=label, unit=unit, disable=not enabled, position=position, leave=leave,
                dynamic_ncols=True, file=None if _in_jupyter() else sys.stderr, mininterval=0.2)


def eta_bar(total_seconds: float, label: str, *, enabled: bool = True):
    """A bar over estimated seconds of work (several runs: ``memlab reproduce``), with the time left.

    Its rate is the one of the whole run (``smoothing=0``): one slow point does
    not turn the time left into hours. :meth:`update` never passes the total;
    ``extend(seconds)`` adds work found on the way (a point taking more runs than it was
    expected to), so the bar does not sit at 100% while that work is measured.
    Disabled (or with nothing to do) it accepts the same calls and draws nothing.

    >>> bar = eta_bar(10.0, "demo", enabled=False); bar.update(3.0); bar.extend(2.0); bar.close()
    """
    bar = tqdm(total=round(total_seconds, 1), unit="s", desc=label, disable=not enabled or total_seconds <= 0,
               file=None if _in_jupyter() else sys.stderr, dynamic_ncols=True, smoothing=0,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, ~{remaining} left{postfix}")
    update = bar.update

    def bounded(seconds: float = 1.0) -> None:
        step = max(0.0, min(round(seconds, 1), (bar.total or 0) - bar.n))
        if step:
            update(step)

    def extend(seconds: float) -> None:
        if seconds > 0 and not bar.disable:
            bar.total = round((bar.total or 0) + seconds, 1)
            bar.refresh()

    bar.update = bounded
    bar.extend = extend
    return bar


def _in_jupyter() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "ZMQ" in type(shell).__name__


# --------------------------------------------------------------------------
# planning


def point_seconds(family: Family, params: Any, target_seconds: float | None, samples: int) -> float:
    """About how long one point takes (seconds): ``samples`` samples (warm-up and kept), each lasting
    the target (``target_seconds``, else the family's) or what the family's ``sample_seconds``
    says (calibrate's budget, system's ``duration_s``, clear's pause), plus what the family's
    ``setup_seconds`` says a run costs beyond them (the chase: its list), else
    :data:`POINT_OVERHEAD_SECONDS`. Machines differ: an order of magnitude, not a promise.

    >>> from memlab.registry import family
    >>> calibrate = family("calibrate")
    >>> point_seconds(calibrate, calibrate.params({"budget_ns": 50_000_000}), None, 3)
    0.4
    """
    target = family.default_target_seconds if target_seconds is None else target_seconds
    sample = family.sample_seconds(params, target) if family.sample_seconds else target
    setup = family.setup_seconds(params) if family.setup_seconds else POINT_OVERHEAD_SECONDS
    return round(samples * float(sample or 0.0) + setup, 9)


def estimate_seconds(sweep: Sweep, *, maximum: bool = False) -> float:
    """About how long ``sweep`` takes to measure (seconds), before it runs: :func:`point_seconds`
    of one run, summed over its points and times its runs (a point the family refuses counts
    nothing: the run would stop there). With a precision rule: times its expected runs (its
    minimum, :attr:`memlab.grid.Sweep.expected_runs`), or its maximum with ``maximum``.

    >>> round(estimate_seconds(Sweep("s", "calibrate", [{"budget_ns": 50_000_000}], repeat=3, warmup=0, runs=1)), 2)
    0.4
    """
    family = get_family(sweep.family)
    total = 0.0
    for point in sweep.points:
        try:
            params = family.params(point)
        except (ValueError, TypeError):
            continue
        total += point_seconds(family, params, sweep.target_seconds, sweep.warmup + sweep.repeat)
    return total * (sweep.runs_per_point if maximum else sweep.expected_runs)


def stop_reason(runs: Sequence[Sequence[float]], precision: Precision) -> tuple[str, float]:
    """Whether a point measured in ``runs`` (each run's samples of the primary metric) stops under
    ``precision``, and its relative half-width
    (:func:`memlab.significance.median_of_runs_half_width`): :data:`memlab.dataset.STOP_INTERVAL`
    once it has at least the minimum runs and an interval no wider than the rule's,
    :data:`memlab.dataset.STOP_MAXIMUM` at the maximum with a wider one (or none: a half-width
    that cannot be computed never counts as narrow), else "" (it takes another run).

    >>> rule = Precision(2, 4, 0.05)
    >>> stop_reason([[10.0, 10.1]], rule)[0], stop_reason([[10.0, 10.1], [10.1, 10.0]], rule)[0]
    ('', 'interval')
    >>> stop_reason([[10.0], [20.0], [10.0], [20.0]], rule)[0]
    'maximum'
    """
    count = sum(1 for run in runs if len(run))
    width = median_of_runs_half_width(runs) if count else math.nan
    if count >= precision.min_runs and width <= precision.half_width:
        return STOP_INTERVAL, width
    if count >= precision.max_runs:
        return STOP_MAXIMUM, width
    return "", width


@dataclasses.dataclass
class Plan:
    """What a run will measure: every point of its shard (parameters complete, in order), each in
    ``runs`` runs; the ``(key, run)`` pairs already on disk, and one run's estimated seconds of
    each point.

    The work is taken in rounds (:meth:`work`): run 0 of every point, then run 1 of every point,
    and so on, so that a slow minute of the machine spreads over all points instead of landing
    on one."""

    sweep: Sweep
    family: Family
    points: list[dict[str, Any]]
    seconds_per_run: list[float]
    done: set[tuple]
    repeat: int
    warmup: int
    runs: int = 1
    precision: Precision | None = None
    """The sweep's precision rule (None: every point takes ``runs``, which is then the rule's
    maximum otherwise)."""

    def key(self, point: Mapping[str, Any]) -> tuple:
        """The identity of a point (or row) of this run (:func:`memlab.dataset.point_key`)."""
        return point_key({"family": self.family.name, **point}, self.family.param_names)

    def work(self) -> list[tuple[dict[str, Any], int]]:
        """Every ``(point, run)`` of the plan in round order (on disk or not)."""
        return [(point, index) for index in range(self.runs) for point in self.points]

    @property
    def pending_runs(self) -> list[tuple[dict[str, Any], int]]:
        """The ``(point, run)`` pairs not on disk yet, in round order."""
        return [(p, r) for p, r in self.work() if (self.key(p), r) not in self.done]

    @property
    def expected_pending_runs(self) -> list[tuple[dict[str, Any], int]]:
        """The pending ``(point, run)`` pairs among the runs a point is expected to take
        (:attr:`expected_runs`; under a precision rule a point with its minimum runs on disk has
        none): what an estimate or an ETA counts."""
        return [(p, r) for p, r in self.pending_runs if r < self.expected_runs]

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The points with a run not on disk yet, in order."""
        waiting = {self.key(p) for p, _ in self.pending_runs}
        return [point for point in self.points if self.key(point) in waiting]

    @property
    def units(self) -> int:
        """Progress units of the whole plan: one per run of each point."""
        return len(self.points) * self.runs

    @property
    def expected_runs(self) -> int:
        """The runs a point is expected to take: the precision rule's minimum, else ``runs``."""
        return self.precision.min_runs if self.precision is not None else self.runs

    @property
    def seconds(self) -> float:
        """Estimated seconds of every run of every point (with a precision rule: of its maximum
        runs; :attr:`expected_seconds` of the runs a point is expected to take)."""
        return sum(self.seconds_per_run) * self.runs

    @property
    def expected_seconds(self) -> float:
        """Estimated seconds of the runs each point is expected to take (:attr:`expected_runs`)."""
        return sum(self.seconds_per_run) * self.expected_runs

    @property
    def pending_seconds(self) -> float:
        """Estimated seconds of the runs not on disk yet."""
        per_run = {self.key(p): s for p, s in zip(self.points, self.seconds_per_run)}
        return sum(per_run[self.key(p)] for p, _ in self.pending_runs)

    @property
    def varying(self) -> list[str]:
        """The parameters whose value differs between points (what a progress line shows)."""
        return [n for n in self.family.param_names if len({repr(p[n]) for p in self.points}) > 1]

    def describe(self, point: Mapping[str, Any]) -> str:
        """A point in words by its varying parameters (``working_set_bytes=16 KiB``), "" for one point."""
        return " ".join(f"{k}={format_param(k, point[k])}" for k in self.varying if k in point)


def _existing_rows(out: str | os.PathLike, family: Family) -> list[dict[str, Any]]:
    """The rows a dataset at ``out`` holds (those its parameters' defaults fill); [] when there is
    none or it cannot be read (opening the run refuses it then, with the reason)."""
    csv_path = paths_for(out)[0]
    if not os.path.exists(csv_path):
        return []
    try:
        existing = Dataset.load(csv_path)
    except (OSError, ValueError):
        return []
    defaults = family.defaults()
    return [{**{k: v for k, v in defaults.items() if k not in row}, **row} for row in existing.rows]


def done_runs(plan: Plan, rows: Sequence[Mapping[str, Any]]) -> set[tuple]:
    """The ``(key, run)`` pairs that ``rows`` hold (a row without a run index is run 0)."""
    return {(plan.key(row), run_index(row)) for row in rows}


# --------------------------------------------------------------------------
# executors


@dataclasses.dataclass
class Machines:
    """What an executor found at the start: the facts the metadata records as ``machine``, every
    machine's entry (``metadata["machines"]``), metadata of its own, and warnings to say."""

    facts: dict[str, Any]
    entries: list[dict[str, Any]]
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    single: bool = True
    """False when the rows come from several machines: ``machine``, ``machine_id`` and
    ``machine_fingerprint`` are left out (``machines`` lists them)."""


class Executor(Protocol):
    """How a run's points are measured (:class:`LocalExecutor`, :class:`FleetExecutor`)."""

    def start(self, run: Run) -> Machines:
        """The machines that will measure, their facts and their start checks."""

    def work(self, run: Run, existing: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """Plan the work given the rows on disk: ``(total, waiting)`` progress units."""

    def measure(self, run: Run) -> None:
        """Measure the work, calling :meth:`Run.record` for each row (and :meth:`Run.skip` for a
        point found on disk, where the executor counts those one by one)."""

    def finish(self, run: Run) -> dict[str, Any]:
        """Metadata to record once every point is measured."""

    def close(self) -> None:
        """Release what :meth:`start` took (a cluster connection); called on every way out."""


class LocalExecutor:
    """Every run of every point measured in this process, in rounds (:meth:`Plan.work`); each run
    a fresh setup (``Family.run``: a new kernel, its allocation, list or buffers built, populated
    and pinned anew; a fresh sample function for families timed in Python).

    The machine check runs before the first point and after the last; the end
    check measures steal over the whole run.
    """

    label = ""

    def __init__(self) -> None:
        self.since: tuple[float, dict] | None = None
        self.tags: dict[str, str] = {}

    def start(self, run: Run) -> Machines:
        facts = collect()
        machine = identity(facts)
        self.tags = {HOST_COLUMN: machine["host"], FINGERPRINT_COLUMN: machine["fingerprint_id"]}
        start = check(planned_bytes=largest_bytes(run.plan().points),
                      steal_window_seconds=CHECK_STEAL_WINDOW_SECONDS)
        self.since = (time.monotonic(), read_cpu_times())
        warnings = []
        if start.warnings:
            found = "; ".join(f"{finding.name}: {finding.value}" for finding in start.warnings)
            warnings.append(f"memlab: warning: the machine check found {found} (memlab check for details)")
        return Machines(facts, [{**machine, "facts": facts}], {"check_start": start.to_dict()}, warnings)

    def work(self, run: Run, existing: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        units = run.plan().units
        return units, units  # runs on disk advance the bar in order, as they come

    def measure(self, run: Run) -> None:
        plan = run.plan()
        for point, index in plan.work():
            if (plan.key(point), index) in run.done:
                run.skip(point)
                continue
            if not run.wants(point, index):
                run.pass_over(point, index)
                continue
            run.bar.set_postfix_str(run.describe_run(point, index), refresh=False)
            self.measure_run(run, point, index)

    def measure_run(self, run: Run, point: dict[str, Any], index: int) -> None:
        """Run ``index`` of ``point``: measured here, recorded."""
        measurement = run.family.run(point, **run.options)
        run.record(point, {**measurement.to_row(), **self.tags}, measurement.conditions_warning,
                   run_number=index, measurement=measurement)

    def finish(self, run: Run) -> dict[str, Any]:
        return {"check_end": check(steal_since=self.since).to_dict()}

    def close(self) -> None:
        pass


class ProcessExecutor(LocalExecutor):
    """Every run of every point measured in a fresh Python worker process
    (:func:`memlab.worker.measure_run`), in rounds, one worker at a time: the way pyperf spawns
    its workers. A worker that dies (a signal, a non-zero exit, a timeout: its run's estimate
    times :data:`PROCESS_TIMEOUT_FACTOR` plus :data:`PROCESS_TIMEOUT_SLACK_SECONDS`, unless
    ``timeout_seconds``) is a failed run: said in a warning, listed in
    ``metadata["failed_runs"]``, the other runs measured; once the file is closed the first
    failure is raised (:class:`memlab.worker.WorkerFailed`). ``prelude`` and ``prelude_args``
    run in every worker before it measures (default: the family's ``prelude``, which builds and
    registers a user kernel's family there)."""

    label = " (worker processes)"

    def __init__(self, *, timeout_seconds: float | None = None, prelude: str | None = None,
                 prelude_args: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        worker.check_prelude(prelude, prelude_args)
        if timeout_seconds is not None and not (isinstance(timeout_seconds, (int, float))
                                                and not isinstance(timeout_seconds, bool) and timeout_seconds > 0):
            raise ValueError(f"timeout_seconds={timeout_seconds!r} must be a positive number of seconds (or None)")
        self.timeout_seconds = timeout_seconds
        self.prelude, self.prelude_args = prelude, dict(prelude_args or {})
        self.failures: list[worker.WorkerFailed] = []

    def measure_run(self, run: Run, point: dict[str, Any], index: int) -> None:
        plan = run.plan()
        timeout = self.timeout_seconds
        if timeout is None:
            per_run = dict(zip([plan.key(p) for p in plan.points], plan.seconds_per_run))[plan.key(point)]
            timeout = per_run * PROCESS_TIMEOUT_FACTOR + PROCESS_TIMEOUT_SLACK_SECONDS
        prelude, prelude_args = self.prelude, self.prelude_args
        if prelude is None and plan.family.prelude is not None:  # a user kernel: built and registered there
            prelude, prelude_args = plan.family.prelude
        try:
            result = worker.measure_run(plan.family.name, point, run.options, run=index, prelude=prelude,
                                        prelude_args=prelude_args, timeout_seconds=timeout)
        except worker.WorkerFailed as failure:
            self.failures.append(failure)
            run.warn(f"memlab: warning: {run.family.name} {run.describe_run(point, index)}: the worker process {failure.reason}; "
                     "run the sweep again to measure it")
            run.skip(point)
            return
        for row in result.rows:
            run.record(point, {**row, **self.tags}, result.warning, run_number=index)

    def finish(self, run: Run) -> dict[str, Any]:
        failed = [{"point": f.point, "run": f.run, "reason": f.reason} for f in self.failures]
        return {**super().finish(run), "processes": True, "failed_runs": failed}

    def after(self, run: Run) -> None:
        """Once the file is closed: the first failed run raised, with how many failed."""
        if self.failures:
            first = self.failures[0]
            if len(self.failures) > 1:
                first.args = (f"{first.args[0]} ({len(self.failures)} runs failed, "
                              "metadata['failed_runs'] lists them)",)
            raise first


class FleetExecutor:
    """The points measured by the Dask workers offering the ``memlab`` resource (docs/fleet.md):
    ``each-host`` measures the whole sweep on every host, ``spread`` splits its points over hosts
    whose fingerprints agree. This process stays the only writer. A host that leaves the cluster
    loses only the point it was measuring (``metadata["fleet"]["lost"]``)."""

    def __init__(self, client: Any, mode: str) -> None:
        if mode not in FLEET_MODES:
            raise ValueError(f"mode={mode!r} is not one of {', '.join(FLEET_MODES)}")
        self.client, self.mode = client, mode
        self.dask_client = None
        self.owned = False
        self.hosts: list[fleet.Host] = []
        self.queues: dict[str, collections.deque] = {}
        self.result: fleet.FleetResult | None = None

    @property
    def label(self) -> str:
        return f" on {len(self.hosts)} hosts ({self.mode})"

    def start(self, run: Run) -> Machines:
        self.dask_client, self.owned = fleet.connect(self.client)
        self.hosts = hosts = fleet.gather_hosts(self.dask_client, planned_bytes=largest_bytes(run.plan().points))
        fleet.check_each_host(hosts)  # one measuring worker per host, in both modes
        if self.mode == "spread":
            fleet.check_spread(hosts)
        meta = {"fleet": {"mode": self.mode, "scheduler": self.dask_client.scheduler.address,
                          "workers": [host.address for host in hosts], "lost": {}}}
        warnings = []
        for host in hosts:
            if host.check_start.get("warnings"):
                found = "; ".join(str(w) for w in host.check_start["warnings"])
                warnings.append(f"memlab: warning: the machine check of {host.host} found {found}")
        versions = {h.host: h.facts.get("memlab_version") for h in hosts}
        if any(v and v != __version__ for v in versions.values()):
            warnings.append(f"memlab: warning: the hosts run other memlab versions than this one ({__version__}): "
                            + ", ".join(f"{h}={v}" for h, v in versions.items()))
        single = not (self.mode == "each-host" and len(hosts) > 1)
        return Machines(hosts[0].facts, [host.entry() for host in hosts], meta, warnings, single)

    def work(self, run: Run, existing: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        plan = run.plan()
        # each item is one run of a point: the point with its run index (measure_point takes it off)
        items = [{**point, RUN_COLUMN: index} for point, index in plan.work()]

        def key(item: Mapping[str, Any]) -> tuple:
            return plan.key(item), run_index(item)

        if self.mode == "each-host":
            done = {h.address: [r for r in existing if machine_key(r) == h.key] for h in self.hosts}
            todo = fleet.plan_each_host([h.address for h in self.hosts], done, items, key)
            self.queues = {address: collections.deque(points) for address, points in todo.items()}
            return len(items) * len(self.hosts), sum(len(q) for q in self.queues.values())
        print_id = self.hosts[0].fingerprint_id
        measured = {key(r) for r in existing if machine_key(r)[1] == print_id}
        shared = collections.deque(item for item in items if key(item) not in measured)
        self.queues = {h.address: shared for h in self.hosts}
        return len(items), len(shared)

    def measure(self, run: Run) -> None:
        plan = run.plan()

        def record(host: fleet.Host, item: Mapping[str, Any], outcome: dict[str, Any]) -> None:
            point = {k: v for k, v in item.items() if k != RUN_COLUMN}
            row = dict(outcome["row"])
            row[HOST_COLUMN], row[FINGERPRINT_COLUMN] = host.key
            row[context_column("dask_overhead_s")] = round(outcome["overhead_s"], 4)
            run.bar.set_postfix_str(f"{host.host} {run.describe_run(point, item[RUN_COLUMN])}", refresh=False)
            run.record(point, row, outcome.get("warning") or "", where=f" on {host.host}",
                       run_number=item[RUN_COLUMN])

        addresses = [h.address for h in self.hosts]
        quieted = fleet.quiet_workers(self.dask_client, addresses, True)
        try:
            self.result = fleet.dispatch(self.dask_client, plan.family.name, self.hosts, self.queues,
                                         run.options, record, requeue=self.mode == "spread",
                                         prelude=plan.family.prelude)
        finally:
            fleet.quiet_workers(self.dask_client, [a for a, names in quieted.items()
                                                   if isinstance(names, list) and names], False)

    def finish(self, run: Run) -> dict[str, Any]:
        lost = self.result.lost if self.result is not None else {}
        return {"fleet": {**run.dataset.metadata["fleet"], "lost": lost}}

    def after(self, run: Run) -> None:
        """Once the file is closed: say which hosts left, raise the first failed measurement."""
        if self.result is None:
            return
        for host, missing in self.result.lost.items():
            run.warn(f"memlab: warning: {host} left the cluster; {missing} of its points were not measured "
                     f"(run the sweep again to measure them)")
        if self.result.errors:
            raise self.result.errors[0][1]

    def close(self) -> None:
        if self.owned and self.dask_client is not None:
            self.dask_client.close()
        self.dask_client = None


# --------------------------------------------------------------------------
# the run


class Run:
    """One run of a sweep (or of its shard) into a dataset: :meth:`plan`, :meth:`open`,
    :meth:`measure`, :meth:`close` (or all four: :meth:`execute`).

    ``out`` (a .csv path, or None for a dataset in memory) receives each row as
    soon as it is measured; with ``resume`` the points already there are
    skipped; ``resume=False`` starts a fresh dataset, refusing an existing one
    with rows unless ``force`` (which moves it aside, :func:`move_aside`).
    Every point is measured in ``runs`` runs (default the sweep's,
    :attr:`memlab.grid.Sweep.runs_per_point`), each a fresh setup, taken in
    rounds; its rows carry the ``run`` index and the point's ``run_spread``
    so far (docs/dataset.md, "Runs"). A sweep with a precision rule
    (``Sweep.precision``, and ``runs`` None) gives a point between the rule's
    minimum and maximum runs, another only while its run-level interval is
    wider than the rule's; its rows also carry ``run_half_width`` and, on its
    last, ``run_stop``. Resuming measures the runs a point lacks. ``repeat``
    and ``warmup`` (samples per run) override the sweep's,
    ``cpu`` pins the measurements; ``metadata`` is added to the dataset's.
    ``executor``: :class:`LocalExecutor` (default), :class:`ProcessExecutor`
    (``processes=True``: each run in a fresh worker process) or
    :class:`FleetExecutor`.

    >>> with Run(Sweep("demo", "calibrate", [{"budget_ns": 5_000_000}], repeat=1), runs=2) as run:
    ...     dataset = run.measure()
    >>> [row["run"] for row in dataset.rows]
    [0, 1]
    """

    def __init__(
        self,
        sweep: Sweep,
        out: str | os.PathLike | None = None,
        *,
        shard: tuple[int, int] | str | None = None,
        resume: bool = True,
        force: bool = False,
        repeat: int | None = None,
        warmup: int | None = None,
        cpu: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
        runs: int | None = None,
        processes: bool = False,
    ) -> None:
        if processes is not False and processes is not True:
            raise ValueError(f"processes={processes!r} must be True or False")
        if processes and executor is not None:
            raise ValueError("processes=True measures in worker processes on this machine; it takes no executor")
        if sweep.precision is not None and runs is None and isinstance(executor, FleetExecutor):
            raise ValueError(f"sweep {sweep.name!r} has a precision rule, which decides each round on the rounds "
                             "before it; a fleet's workers measure a fixed queue: give runs= (fixed runs)")
        self.sweep = sweep
        self.family = get_family(sweep.family)
        self.out = out
        self.shard = parse_shard(shard)
        self.resume, self.force = resume, force
        self.repeat = sweep.repeat if repeat is None else repeat
        self.warmup = sweep.warmup if warmup is None else warmup
        self.cpu = cpu
        self.extra_metadata = dict(metadata or {})
        self.runs = sweep.runs_per_point if runs is None else check_runs(runs)
        self.precision: Precision | None = sweep.precision if runs is None else None
        if executor is None:
            executor = ProcessExecutor() if processes else LocalExecutor()
        self.executor: Executor = executor
        self.options = dict(repeat=self.repeat, warmup=self.warmup, cpu=cpu, target_seconds=sweep.target_seconds,
                            **sweep.options)
        self._plan: Plan | None = None
        self.dataset: Dataset | None = None
        self.writer: DatasetWriter | None = None
        self.done: set[tuple] = set()
        self.bar = progress_bar(0, "", enabled=False)
        self.overall: Any = None
        self.on_point: OnPoint | None = None
        self.on_measurement: Callable[[Any], None] | None = None
        self.warn: Warn = memlab_warn
        self._warn_given: Warn | None = None
        self.measured = 0
        self._opened = False
        self._run_samples: dict[tuple, dict[int, list[float]]] = {}
        self.stopped: dict[tuple, str] = {}
        """Under a precision rule: each point that takes no more runs, and why
        (:data:`memlab.dataset.STOP_INTERVAL`, :data:`memlab.dataset.STOP_MAXIMUM`)."""

    # -- plan ---------------------------------------------------------------

    def plan(self) -> Plan:
        """The points of the run, those on disk (``out`` with ``resume``) and the estimates; every
        point checked by its family (a ValueError naming the parameter before anything runs)."""
        if self._plan is None:
            family = self.family
            points = [dataclasses.asdict(family.params(p)) for p in shard_points(self.sweep.points, self.shard)]
            samples = self.warmup + self.repeat
            seconds = [point_seconds(family, family.params(p), self.sweep.target_seconds, samples) for p in points]
            plan = Plan(self.sweep, family, points, seconds, set(), self.repeat, self.warmup, self.runs,
                        self.precision)
            if self.out is not None and self.resume:
                plan.done = done_runs(plan, _existing_rows(self.out, family))
            self._plan = plan
        return self._plan

    # -- open ---------------------------------------------------------------

    def check_output(self) -> None:
        """Refuse an ``out`` this run must not write (OutputError), before anything is measured."""
        if self.out is None:
            return
        csv_path = paths_for(self.out)[0]
        check_output_file(csv_path, "--out")
        if not self.resume and _has_rows(csv_path) and not self.force:
            raise OutputError(
                f"{csv_path} already holds a dataset; not resuming starts a fresh one: "
                "add --force to move the old one aside (or choose another --out)"
            )

    def open(
        self,
        *,
        progress: bool = True,
        overall: Any = None,
        warn: Warn | None = None,
        on_point: OnPoint | None = None,
        on_measurement: Callable[[Any], None] | None = None,
    ) -> Run:
        """Check the output, start the executor (machine facts, machine check), write the metadata and
        open the writer; draw the run's bar (``progress``), advance ``overall`` too (a bar over
        several runs). ``warn`` receives each warning line (default: given through Python's
        :mod:`warnings`: a :class:`memlab.conditions.ConditionsWarning` per disturbed point, a
        :class:`memlab.conditions.MachineWarning` for the machine check);
        ``on_point(point, row)`` is called after each point (``row`` None for a point found on disk)
        and ``on_measurement(measurement)`` after each one measured here."""
        plan = self.plan()  # a point its family refuses stops the run here
        self.check_output()  # refused before the machine check says anything about the machine
        self.overall, self.on_point, self.on_measurement = overall, on_point, on_measurement
        self._opened = True
        try:
            machines = self.executor.start(self)
            meta = sweep_metadata(self.sweep, self.family, self.shard, self.repeat, facts=machines.facts,
                                  runs=self.runs)
            if self.precision is not None:
                meta["precision"] = self.precision.to_dict()
            if not machines.single:
                for key in ("machine", "machine_id", "machine_fingerprint"):
                    meta.pop(key)  # several machines: metadata["machines"] lists them
            meta["machines"] = machines.entries
            meta.update(machines.metadata)
            meta.update(self.extra_metadata)
            if self.out is not None:
                if not self.resume and _has_rows(paths_for(self.out)[0]):
                    move_aside(self.out)  # check_output refused this without force
                self.writer = DatasetWriter(self.out, meta, defaults=self.family.defaults(),
                                            required=self.family.required_params())
            existing = list(self.writer.existing_rows) if self.writer is not None else []
            self.dataset = Dataset(existing, self.writer.metadata if self.writer is not None else meta)
            self.done = done_runs(plan, existing)
            for row in existing:
                self._note_run(plan.key(row), run_index(row), row)
            if self.precision is not None:
                for key in {plan.key(row) for row in existing}:
                    reason = stop_reason(list(self._run_samples[key].values()), self.precision)[0]
                    if reason:
                        self.stopped[key] = reason
            total, waiting = self.executor.work(self, existing)
            self.bar = progress_bar(total, f"{self.sweep.family}:{self.sweep.name}{self.executor.label}",
                                    enabled=progress_enabled(progress), position=1 if overall is not None else 0,
                                    leave=overall is None)
            self._warn_given = warn
            self.warn = warn or memlab_warn
            if total > waiting:
                self._advance(total - waiting, "(on disk)")
            for text in machines.warnings:
                self._say(text, MachineWarning)
        except BaseException:
            self._release()
            raise
        return self

    # -- measure ------------------------------------------------------------

    def measure(self) -> Dataset:
        """Measure the pending points with the executor (the run is opened first if it is not) and
        close the run; the dataset with every row (those found on disk first)."""
        if not self._opened:
            self.open()
        try:
            self.executor.measure(self)
            updates = self.executor.finish(self)
            self.dataset.metadata.update(updates)
            if self.writer is not None:
                self.writer.update_metadata(**updates)
        finally:
            self._release()
        after = getattr(self.executor, "after", None)
        if after is not None:
            after(self)
        return self.dataset

    def record(self, point: dict[str, Any], row: dict[str, Any], warning: str = "", *, where: str = "",
               run_number: int = 0, measurement: Any = None) -> None:
        """One measured row (run ``run_number`` of ``point``): given its run index and the point's
        run spread so far, appended to the file and the dataset, counted, its warning said."""
        key = self.plan().key(point)
        spread = self._note_run(key, run_number, row)
        row = {**row, RUN_COLUMN: run_number, RUN_SPREAD_COLUMN: round(spread, 4) if spread == spread else spread,
               RUN_UNSTABLE_COLUMN: is_unstable(spread)}
        if self.precision is not None:
            reason, width = stop_reason(list(self._run_samples[key].values()), self.precision)
            row[RUN_HALF_WIDTH_COLUMN] = round(width, 6) if width == width else width
            row[RUN_STOP_COLUMN] = reason
            if reason:
                self.stopped[key] = reason
        if self.writer is not None:
            self.writer.append(row)
        self.dataset.rows.append(row)
        self.done.add((key, run_number))
        self.measured += 1
        self._advance(1)
        if warning:
            self._say(f"memlab: warning: {self.family.name} {self.describe_run(point, run_number)}{where}: "
                      f"{warning}", ConditionsWarning)
        if measurement is not None and self.on_measurement is not None:
            self.on_measurement(measurement)
        if self.on_point is not None:
            self.on_point(point, row)

    def _say(self, text: str, category: type[MemlabWarning]) -> None:
        """One warning line: to the caller's ``warn``, else through Python's warnings as ``category``."""
        if self._warn_given is not None:
            self._warn_given(text)
        else:
            memlab_warn(text, category, stacklevel=3)

    def _note_run(self, key: tuple, index: int, row: Mapping[str, Any]) -> float:
        """Keep a run's samples of the primary metric; the run spread of the point's runs so far."""
        metric = self.dataset.metadata.get("primary_metric") if self.dataset is not None else None
        samples = row.get(f"{metric}_samples") if metric else None
        if not isinstance(samples, (list, tuple)):
            samples = [row.get(metric)] if metric and isinstance(row.get(metric), (int, float)) else []
        values = [float(v) for v in samples if isinstance(v, (int, float)) and not isinstance(v, bool)]
        runs = self._run_samples.setdefault(key, {})
        runs.setdefault(index, []).extend(values)
        return run_spread(list(runs.values()))

    def describe_run(self, point: Mapping[str, Any], index: int) -> str:
        """A run of a point in words: the point (:meth:`Plan.describe`) and, with several runs,
        which one (``run 2/3``)."""
        plan = self.plan()
        text = plan.describe(point)
        if plan.runs > 1:
            text = f"{text} run {index + 1}/{plan.runs}".strip()
        return text or "point"

    def wants(self, point: Mapping[str, Any], index: int) -> bool:
        """Whether run ``index`` of ``point`` is to be measured: always without a precision rule;
        with one, while the point has not stopped (:func:`stop_reason` on its runs so far). The
        executors ask it in round order, so every earlier round of the point is in by then."""
        if self.precision is None or index >= self.runs:
            return index < self.runs
        return self.plan().key(point) not in self.stopped

    def pass_over(self, point: dict[str, Any], index: int) -> None:
        """A run the precision rule does not need (the point stopped): counted on the bars only."""
        self._advance(1)

    def skip(self, point: dict[str, Any]) -> None:
        """A point found on disk: counted on the bars, told to ``on_point`` with no row."""
        self._advance(1)
        if self.on_point is not None:
            self.on_point(point, None)

    def _advance(self, count: int, what: str | None = None) -> None:
        if what is not None:
            self.bar.set_postfix_str(what, refresh=False)
        self.bar.update(count)
        if self.overall is not None:
            self.overall.update(count)

    # -- close --------------------------------------------------------------

    def close(self) -> None:
        """Close the file, the bar and the executor (what :meth:`measure` does on its way out)."""
        self._release()

    def _release(self) -> None:
        self.bar.close()
        if self.writer is not None:
            self.writer.close()
        self.executor.close()

    def execute(self, *, progress: bool = True, overall: Any = None, warn: Warn | None = None,
                on_point: OnPoint | None = None,
                on_measurement: Callable[[Any], None] | None = None) -> Dataset:
        """:meth:`open` (with these arguments), then :meth:`measure`: the dataset."""
        self.open(progress=progress, overall=overall, warn=warn, on_point=on_point, on_measurement=on_measurement)
        return self.measure()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._release()


# --------------------------------------------------------------------------
# files and metadata


def _has_rows(csv_path: str) -> bool:
    try:
        with open(csv_path, "rb") as handle:
            handle.readline()
            return bool(handle.readline())
    except FileNotFoundError:
        return False


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a dataset's CSV and sidecar to ``<stem>.replaced-<time>.csv/.json``; return the new CSV path.

    Used when a fresh dataset must start where one exists (``--no-resume --force``):
    the old rows are kept, under a name that says when they were replaced.
    """
    csv_path, json_path = paths_for(path)
    stem = csv_path[: -len(".csv")]
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for attempt in range(1000):
        suffix = f".replaced-{stamp}" + (f"-{attempt}" if attempt else "")
        target_csv, target_json = stem + suffix + ".csv", stem + suffix + ".json"
        if not os.path.lexists(target_csv) and not os.path.lexists(target_json):
            break
    else:
        raise DatasetError(f"{csv_path}: no free name to move the old dataset aside")
    if os.path.lexists(json_path):
        os.rename(json_path, target_json)
    os.rename(csv_path, target_csv)
    return Path(target_csv)


def sweep_metadata(
    sweep: Sweep, family: Family, shard: tuple[int, int] | None = None, repeat: int | None = None,
    facts: Mapping[str, Any] | None = None, runs: int | None = None,
) -> dict[str, Any]:
    """The metadata of a dataset of ``sweep`` (docs/dataset.md, "Sidecar"): the family,
    sweep, parameter names, primary metric, samples per run (``repeat``) and runs per point,
    machine facts (``facts``, default this machine's), memlab version and command."""
    facts = collect() if facts is None else dict(facts)
    return {
        "family": family.name,
        "sweep": sweep.name,
        "description": sweep.description,
        "param_names": list(family.param_names),
        "primary_metric": family.primary_metric or (f"ns_per_{family.unit}" if family.unit else "elapsed_ns"),
        "repeat": sweep.repeat if repeat is None else repeat,
        "runs": sweep.runs_per_point if runs is None else runs,
        "warmup": sweep.warmup,
        "shard": f"{shard[0]}/{shard[1]}" if shard else "",
        "machine": facts,
        "machine_id": machine_id(facts),
        "machine_fingerprint": fingerprint(facts),
        "memlab_version": __version__,
        "command": " ".join(sys.argv),
        **family.metadata,  # a user kernel's kernel_sha256 and build
    }


def fleet_mode(client: Any, each_host: bool, spread: bool) -> str | None:
    """``"each-host"``, ``"spread"`` or None (no ``client``); ValueError for a mode without a client,
    or a client with both modes or none."""
    if client is None:
        if each_host or spread:
            raise ValueError(f"{'each_host' if each_host else 'spread'}=True needs client= "
                             "(a distributed.Client or a scheduler address)")
        return None
    if each_host == spread:
        raise ValueError("client= needs exactly one of each_host=True (the whole sweep on every host) "
                         "and spread=True (its points split over identical hosts)")
    return "each-host" if each_host else "spread"


def executor_for(client: Any = None, each_host: bool = False, spread: bool = False,
                 processes: bool = False) -> Executor:
    """The executor a run's arguments ask for: a :class:`FleetExecutor` with ``client``, a
    :class:`ProcessExecutor` with ``processes``, else local."""
    mode = fleet_mode(client, each_host, spread)
    if mode is not None and processes:
        raise ValueError("processes=True measures in worker processes on this machine; a fleet's workers "
                         "measure on theirs (give one of client= and processes=True)")
    if processes:
        return ProcessExecutor()
    return LocalExecutor() if mode is None else FleetExecutor(client, mode)
