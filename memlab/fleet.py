"""Fleet sweeps: the points of a sweep measured on the workers of a Dask cluster.

Dask distributed (``pip install 'memlab[fleet]'``) carries the points to the
machines and the rows back; :func:`memlab.sweep.run_sweep` (``client=``,
``each_host=`` or ``spread=``) writes them, so the client stays the only
writer of the dataset. This module is the Dask side:

- :func:`gather_hosts` asks every worker that offers the ``memlab`` resource
  for its machine facts and its machine check (``client.run``), giving one
  :class:`Host` per worker;
- :func:`check_each_host` refuses two workers on one host (their
  measurements would disturb each other; both modes), :func:`check_spread` refuses to
  spread a sweep over machines that differ on the facts that change results;
- :func:`dispatch` keeps one measurement in flight per host: each point is a
  task pinned to its worker (``workers=[address]``,
  ``allow_other_workers=False``, ``resources={"memlab": 1}``,
  ``pure=False``), results stream back with ``as_completed``, and a worker
  that leaves the cluster loses only the point it was measuring.

Nothing here imports ``distributed`` until fleet mode is asked for
(:func:`require_distributed`); without it that call raises an ImportError
naming the extra. docs/fleet.md tells how to start the workers.

>>> plan_each_host(["a", "b"], {"a": [{"n": 1}], "b": []}, [{"n": 1}, {"n": 2}], lambda p: p["n"])
{'a': [{'n': 2}], 'b': [{'n': 1}, {'n': 2}]}
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from memlab.check import check
from memlab.dataset import RUN_COLUMN
from memlab.machine import FINGERPRINT_FACTS, collect, identity
from memlab.registry import family as get_family

__all__ = [
    "INSTALL_HINT",
    "RESOURCE",
    "FleetResult",
    "Host",
    "all_workers",
    "check_each_host",
    "check_spread",
    "connect",
    "dispatch",
    "gather_hosts",
    "measure_point",
    "plan_each_host",
    "quiet_workers",
    "require_distributed",
    "worker_report",
]

INSTALL_HINT = "pip install 'memlab[fleet]'"

RESOURCE = "memlab"
"""The worker resource a measuring worker offers (``dask worker ... --resources memlab=1``);
each task asks for one, so a worker measures one point at a time."""

LIVENESS_SECONDS = 0.5
"""How often the dispatcher asks the scheduler which workers are still there."""

CHECK_STEAL_WINDOW_SECONDS = 0.15
"""The busy window of the machine check each host runs before its first point."""


def require_distributed():
    """Import Dask distributed and return the module; ImportError naming the extra without it.

    >>> distributed = require_distributed()   # doctest: +SKIP
    """
    try:
        import distributed
    except ImportError as error:
        raise ImportError(
            f"memlab's fleet mode needs Dask distributed, which is not installed; install it with: {INSTALL_HINT}"
        ) from error
    return distributed


def connect(scheduler: Any, timeout_seconds: float = 20.0):
    """A ``distributed.Client`` for ``scheduler``: a Client as given, or an address to connect to.

    Returns ``(client, owned)``: ``owned`` is True when the client was made
    here (the caller closes it). An address no scheduler answers at is an
    OSError naming it.

    >>> client, owned = connect("tcp://127.0.0.1:8786")   # doctest: +SKIP
    """
    distributed = require_distributed()
    if isinstance(scheduler, distributed.Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler:
        raise ValueError(f"scheduler={scheduler!r} must be a distributed.Client or an address "
                         "such as tcp://HOST:8786")
    try:
        return distributed.Client(scheduler, timeout=timeout_seconds, set_as_default=False), True
    except (OSError, TimeoutError) as error:
        raise OSError(f"no Dask scheduler answered at {scheduler} within {timeout_seconds:g} s "
                      f"({type(error).__name__}: {error})") from None


# --------------------------------------------------------------------------
# the hosts


@dataclasses.dataclass
class Host:
    """One measuring worker: its address, its machine's facts, its identity and machine check."""

    address: str
    facts: dict[str, Any]
    check_start: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def host(self) -> str:
        """The host's name (``hostname`` of its facts, else the worker's address)."""
        return str(self.facts.get("hostname") or self.address)

    @property
    def fingerprint(self) -> dict[str, Any]:
        return identity(self.facts)["fingerprint"]

    @property
    def fingerprint_id(self) -> str:
        return identity(self.facts)["fingerprint_id"]

    @property
    def key(self) -> tuple[str, str]:
        """``(host, fingerprint id)``: the machine key its rows carry (memlab.dataset.machine_key)."""
        return self.host, self.fingerprint_id

    def entry(self) -> dict[str, Any]:
        """This host as ``metadata["machines"]`` lists it."""
        return {"host": self.host, "fingerprint_id": self.fingerprint_id, "fingerprint": self.fingerprint,
                "address": self.address, "facts": self.facts, "check_start": self.check_start}


def worker_report(planned_bytes: int | None = None) -> dict[str, Any]:
    """What a worker tells about itself before measuring: its machine facts and machine check.

    Runs on each worker (``client.run``); reads the test hook
    ``MEMLAB_FAKE_FINGERPRINT`` of the worker's process like any
    ``memlab.machine.collect``.

    >>> sorted(worker_report())   # doctest: +SKIP
    ['check', 'facts']
    """
    facts = collect()
    report = check(planned_bytes=planned_bytes, steal_window_seconds=CHECK_STEAL_WINDOW_SECONDS)
    return {"facts": facts, "check": report.to_dict()}


QUIET_CALLBACKS = ("profile", "profile-cycle", "tick", "ticks")
"""The worker's periodic callbacks :func:`quiet_workers` stops during a fleet sweep: Dask's
statistical profiler (it wakes the worker every 10 ms to sample the stacks of the measuring
thread) and its event-loop health check (every 20 ms). Each wake-up takes a CPU from the
measurement or the next task's start; neither is needed to measure."""


def quiet_worker(quiet: bool, dask_worker=None) -> list[str]:
    """Stop (``quiet``) or start again the worker's :data:`QUIET_CALLBACKS`; return the names
    changed. Runs on a worker (``client.run``, which passes ``dask_worker``)."""
    changed = []
    for name in QUIET_CALLBACKS:
        callback = dask_worker.periodic_callbacks.get(name)
        if callback is None or callback.is_running() != quiet:
            continue
        if quiet:
            callback.stop()
        else:
            callback.start()
        changed.append(name)
    return changed


def quiet_workers(client, addresses: Sequence[str], quiet: bool) -> dict[str, list[str]]:
    """:func:`quiet_worker` on the workers at ``addresses``: ``{address: names changed}``.

    A worker that is gone (or a release whose workers lack the callbacks) is
    left out, not an error: quieting is a courtesy to the measurements.
    """
    try:
        return dict(client.run(quiet_worker, quiet, workers=list(addresses), on_error="return"))
    except Exception:  # the scheduler went away, or a release without on_error
        return {}


def gather_hosts(client, planned_bytes: int | None = None) -> list[Host]:
    """The workers offering the ``memlab`` resource, each with its facts (gathered on it).

    ValueError when no worker offers the resource (they would never run a
    point), naming the option that gives it.
    """
    workers = all_workers(client)
    measuring = sorted(address for address, info in workers.items()
                       if (info.get("resources") or {}).get(RESOURCE, 0) >= 1)
    if not measuring:
        seen = ", ".join(sorted(workers)) or "none"
        raise ValueError(
            f"no Dask worker offers the resource {RESOURCE!r} (workers: {seen}); start one worker per "
            f"host with: dask worker SCHEDULER --nworkers 1 --nthreads 1 --resources {RESOURCE}=1"
        )
    reports = client.run(worker_report, planned_bytes, workers=measuring)
    return [Host(address, reports[address]["facts"], reports[address]["check"])
            for address in measuring if address in reports]


def all_workers(client) -> dict[str, dict[str, Any]]:
    """``{address: worker info}`` of every worker the scheduler knows.

    ``Client.scheduler_info()`` lists only five workers by default in the
    distributed releases of mid-2025 to mid-2026 (``n_workers=-1`` asks for
    all); earlier releases list every worker (should one refuse the
    argument with a TypeError, it is asked without).
    """
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # a release without n_workers: it lists every worker
        info = client.scheduler_info()
    return dict(info.get("workers", {}))


def check_each_host(hosts: Sequence[Host]) -> None:
    """ValueError when two workers run on one host (same name and fingerprint): their
    measurements would run at the same time and disturb each other.

    >>> check_each_host([Host("tcp://a:1", {"hostname": "a"}), Host("tcp://b:1", {"hostname": "b"})])
    """
    seen: dict[tuple[str, str], str] = {}
    for host in hosts:
        if host.key in seen:
            raise ValueError(
                f"workers {seen[host.key]} and {host.address} run on one host ({host.host}); "
                f"fleet mode needs one measuring worker per host "
                f"(dask worker SCHEDULER --nworkers 1 --nthreads 1 --resources {RESOURCE}=1)"
            )
        seen[host.key] = host.address


def differing_facts(hosts: Sequence[Host]) -> dict[str, dict[str, Any]]:
    """The fingerprint facts that differ between hosts: ``{fact: {host: value}}``.

    >>> differing_facts([Host("tcp://a:1", {"hostname": "a", "cpu_model": "X", "cpu_count": 2}),
    ...                  Host("tcp://b:1", {"hostname": "b", "cpu_model": "Y", "cpu_count": 2})])
    {'cpu_model': {'a': 'X', 'b': 'Y'}}
    """
    differing = {}
    for fact in FINGERPRINT_FACTS:
        values = {host.host: host.fingerprint.get(fact, "unknown") for host in hosts}
        if len({repr(value) for value in values.values()}) > 1:
            differing[fact] = values
    return differing


def check_spread(hosts: Sequence[Host]) -> None:
    """ValueError listing the differing facts when the hosts are not machines of one kind.

    Spreading one sweep's points over hosts makes one curve out of their
    rows, which only means something when the facts that change results
    (CPU model, CPU count, kernel, memory) agree.
    """
    differing = differing_facts(hosts)
    if differing:
        words = "; ".join(
            f"{fact}: " + ", ".join(f"{host}={value}" for host, value in values.items())
            for fact, values in differing.items()
        )
        raise ValueError(
            f"spread mode needs machines that agree on {', '.join(FINGERPRINT_FACTS)}; "
            f"these differ: {words}. Use each-host mode to measure every machine, "
            f"or keep only identical workers"
        )


def plan_each_host(
    names: Iterable[Any],
    done: Mapping[Any, Iterable[Any]],
    points: Sequence[Mapping[str, Any]],
    key: Callable[[Mapping[str, Any]], Any],
) -> dict[Any, list[Mapping[str, Any]]]:
    """Each host's points not on disk yet: ``{host: [point, ...]}`` (``done[host]`` holds the
    points on disk for that host, as rows; ``key`` gives a point's identity)."""
    plan = {}
    for name in names:
        finished = {key(row) for row in done.get(name, ())}
        plan[name] = [point for point in points if key(point) not in finished]
    return plan


# --------------------------------------------------------------------------
# running


def measure_point(family_name: str, point: Mapping[str, Any], options: Mapping[str, Any],
                  prelude: tuple[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The task each point is on a worker: measure it, return its row and the task's own time.

    ``options`` go to ``Family.run`` (repeat, warmup, cpu, target_seconds
    and the sweep's options); a ``run`` entry of ``point`` is the run's
    index, given to the row. ``prelude`` (``"module:function"`` and its
    keyword arguments: ``Family.prelude``) runs first: a kernel file's
    family is built and registered on the worker from the source it carries. ``task_s`` is the wall time of the whole task
    on the worker (monotonic clock), against which the client measures what
    Dask added.

    >>> result = measure_point("calibrate", {"budget_ns": 5_000_000}, {"repeat": 1, "warmup": 0})
    ``began_unix`` and ``ended_unix`` (wall clock) bound the task on the
    worker: beside the row's ``context_started_unix``/``context_ended_unix``
    they tell memlab's own time around a measurement from Dask's between two
    tasks (experiments/fleet_overhead.py).

    >>> result = measure_point("calibrate", {"budget_ns": 5_000_000}, {"repeat": 1, "warmup": 0})
    >>> sorted(result)
    ['began_unix', 'ended_unix', 'row', 'task_s', 'warning']
    """
    began_unix, begin = time.time(), time.monotonic()
    if prelude is not None:  # a kernel file's family: its source travels here and is built (memlab.userkernel)
        module_name, _, function_name = prelude[0].partition(":")
        getattr(importlib.import_module(module_name), function_name)(**dict(prelude[1]))
    point = dict(point)
    run = point.pop(RUN_COLUMN, None)  # which run of the point this task is (the run loop's rounds)
    measurement = get_family(family_name).run(point, **dict(options))
    row = measurement.to_row()
    if run is not None:
        row[RUN_COLUMN] = run
    return {"row": row, "task_s": time.monotonic() - begin, "warning": measurement.conditions_warning,
            "began_unix": began_unix, "ended_unix": time.time()}


@dataclasses.dataclass
class FleetResult:
    """What :func:`dispatch` did: the rows it recorded, the hosts lost and the errors."""

    rows: int = 0
    lost: dict[str, int] = dataclasses.field(default_factory=dict)
    """Hosts that left the cluster: host name -> how many of their points were not measured."""
    errors: list[tuple[str, BaseException]] = dataclasses.field(default_factory=list)
    """(host name, exception) of each host stopped by a failed measurement."""


@dataclasses.dataclass
class _Job:
    host: Host
    point: Mapping[str, Any]
    submitted: float


WINDOW = 2
"""Tasks a host holds at once: the one it measures and the next, so that it starts
the next point as soon as one ends instead of waiting for a round trip through
the scheduler (the resource still lets it run only one at a time)."""


def dispatch(
    client,
    family_name: str,
    hosts: Sequence[Host],
    queues: Mapping[str, collections.deque],
    options: Mapping[str, Any],
    record: Callable[[Host, Mapping[str, Any], dict[str, Any]], None],
    *,
    requeue: bool = False,
    prelude: tuple[str, Mapping[str, Any]] | None = None,
    window: int = WINDOW,
    liveness_seconds: float = LIVENESS_SECONDS,
) -> FleetResult:
    """Measure the queued points, one at a time per host, calling ``record`` for each result.

    ``queues`` maps each host's address to a deque of its points; hosts may
    share one deque (spread mode: a host takes the next point when it has
    room). Each point becomes one task pinned to its host's worker
    (``workers=[address]``, ``allow_other_workers=False``,
    ``resources={"memlab": 1}``, ``pure=False``); a host holds ``window``
    tasks and measures one at a time. ``record(host, point, result)`` runs
    in this thread as results arrive (``as_completed``), with ``result`` as
    :func:`measure_point` returns it plus ``overhead_s``: the time the point
    added to its host's share of the sweep (from its submission, or the
    arrival of the host's previous result if later, to the arrival of its
    own) minus the task's own time, i.e. what Dask cost this point.

    A worker that leaves the cluster loses only the point it was measuring:
    with ``requeue`` (spread mode) its points go back to the queue for the
    other hosts, else they are counted in ``FleetResult.lost``. A failed
    measurement stops its host (``FleetResult.errors``); the other hosts go
    on. Ctrl-C cancels every task in flight and re-raises.
    """
    distributed = require_distributed()
    if window < 1:
        raise ValueError(f"window={window} is below the minimum 1")
    result = FleetResult()
    in_flight: dict[Any, _Job] = {}
    holding = {host.address: 0 for host in hosts}
    last_received: dict[str, float] = {}
    lock = threading.Lock()
    gone: set[str] = set()  # left the cluster
    stopped: set[str] = set()  # left, or stopped by a failed measurement
    stop = threading.Event()

    def fill(host: Host) -> list:
        futures = []
        queue = queues[host.address]
        while queue and holding[host.address] < window and host.address not in stopped:
            point = queue.popleft()
            future = client.submit(
                measure_point, family_name, dict(point), dict(options), prelude,
                workers=[host.address], allow_other_workers=False, resources={RESOURCE: 1}, pure=False,
            )
            holding[host.address] += 1
            with lock:
                in_flight[future] = _Job(host, point, time.monotonic())
            futures.append(future)
        return futures

    def watch() -> None:
        # A worker that left never finishes its pinned tasks: cancel them so as_completed yields them.
        while not stop.wait(liveness_seconds):
            try:
                alive = set(client.nthreads())
            except Exception:  # the scheduler is busy or gone: the main loop will hear of it
                continue
            with lock:
                # Not done: pending, or "lost" (it had finished, but its result died with the
                # worker before it reached this client: Dask would wait for a recomputation
                # that the pinned task can never get).
                stranded = [f for f, job in in_flight.items()
                            if job.host.address not in alive and not f.done()]
                gone.update(in_flight[f].host.address for f in stranded)
            if stranded:
                client.cancel(stranded)

    first = [future for host in hosts for future in fill(host)]
    if not first:
        return result
    watcher = threading.Thread(target=watch, name="memlab-fleet-liveness", daemon=True)
    watcher.start()
    # the client's own loop: it is not the default client (set_as_default=False), which
    # as_completed would otherwise look for ("No clients found")
    finished = distributed.as_completed(first, loop=client.loop, with_results=True, raise_errors=False)
    try:
        for future, outcome in finished:
            received = time.monotonic()
            with lock:
                job = in_flight.pop(future)
            host = job.host
            holding[host.address] -= 1
            if future.status == "error":  # the measurement failed on the host: stop the host
                error = future.exception()
                error.add_note(f"(measured on {host.host}, worker {host.address})")
                result.errors.append((host.host, error))
                stopped.add(host.address)
                with lock:
                    others = [f for f, j in in_flight.items() if j.host.address == host.address]
                client.cancel(others)
                continue
            if future.status != "finished":  # cancelled: the worker left, or its host was stopped
                if host.address in gone:
                    stopped.add(host.address)
                    if requeue:
                        queues[host.address].appendleft(job.point)
                    else:
                        result.lost[host.host] = result.lost.get(host.host, 0) + 1
                for other in hosts:
                    for following in fill(other) if requeue else ():
                        finished.add(following)
                continue
            outcome = dict(outcome)
            began = max(job.submitted, last_received.get(host.address, job.submitted))
            last_received[host.address] = received
            outcome["overhead_s"] = (received - began) - float(outcome["task_s"])
            record(host, job.point, outcome)
            result.rows += 1
            for following in fill(host):
                finished.add(following)
    except BaseException:
        with lock:
            pending = list(in_flight)
        client.cancel(pending)
        raise
    finally:
        stop.set()
        watcher.join(timeout=5 * liveness_seconds)
    if not requeue:
        for host in hosts:
            if host.address in gone and queues[host.address]:
                result.lost[host.host] = result.lost.get(host.host, 0) + len(queues[host.address])
    else:
        shared = {id(queue): queue for queue in queues.values()}
        left = sum(len(queue) for queue in shared.values())
        if left and all(host.address in stopped for host in hosts):
            result.lost["every host"] = left
    return result
