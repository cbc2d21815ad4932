"""The runner: a sweep measured point by point, each row on disk as soon as it exists.

:func:`run_sweep` measures the points of a :class:`memlab.grid.Sweep` in
order with a progress bar, appends every row to the dataset file at once (so
Ctrl-C loses nothing), skips points already on disk when run again (resume),
and can take only its share of the points (``shard=(i, n)``) so that n
processes or hosts split one sweep and the results merge. Given a Dask
``client`` it measures on the workers of a cluster instead (docs/fleet.md):
the whole sweep on every host (``each_host``) or its points spread over
identical hosts (``spread``), the rows written here as they arrive. It records
the metadata that makes a dataset readable a year later (machine, version,
command), and every row names the machine that measured it. :func:`resolve`
finds sweeps by name or script path.

``Sweep``, ``grid``, ``zipped`` and the shard helpers are defined in
:mod:`memlab.grid` and importable from here for scripts.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import inspect
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tqdm.auto import tqdm

from memlab import fleet
from memlab.check import check, largest_bytes, read_cpu_times
from memlab._version import __version__
from memlab.dataset import (
    FINGERPRINT_COLUMN,
    HOST_COLUMN,
    Dataset,
    DatasetError,
    DatasetWriter,
    context_column,
    machine_key,
    paths_for,
)
from memlab.family import Family
from memlab.files import OutputError, check_output_file, inside
from memlab.grid import Sweep, as_sweeps, grid, parse_shard, shard_points, zipped
from memlab.machine import collect, fingerprint, identity, machine_id
from memlab.registry import all_families
from memlab.registry import family as get_family
from memlab.units import format_param, suggest

__all__ = [
    "POINT_OVERHEAD_SECONDS",
    "ScriptError",
    "Sweep",
    "estimate_seconds",
    "grid",
    "load_script",
    "move_aside",
    "output_path",
    "parse_shard",
    "progress_bar",
    "progress_enabled",
    "resolve",
    "run_sweep",
    "script_sweeps",
    "shard_points",
    "sweep_metadata",
    "zipped",
]


#: Seconds a point costs beyond its samples (process setup, building, first touch), for estimates.
POINT_OVERHEAD_SECONDS = 0.25


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


def _in_jupyter() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "ZMQ" in type(shell).__name__


def estimate_seconds(sweep: Sweep) -> float:
    """About how long ``sweep`` takes to measure (seconds), before it runs.

    Each point costs its warm-up and kept samples, each lasting the sweep's
    (or family's) target duration or what the family's ``sample_seconds``
    says, plus :data:`POINT_OVERHEAD_SECONDS`. Machines differ: it is an
    order of magnitude, not a promise.

    >>> round(estimate_seconds(Sweep("s", "calibrate", [{"budget_ns": 50_000_000}], repeat=3, warmup=0)), 2)
    0.4
    """
    family = get_family(sweep.family)
    target = family.default_target_seconds if sweep.target_seconds is None else sweep.target_seconds
    total = 0.0
    for point in sweep.points:
        try:
            params = family.params(point)
        except (ValueError, TypeError):
            continue
        sample = family.sample_seconds(params, target) if family.sample_seconds else target
        total += (sweep.warmup + sweep.repeat) * sample + POINT_OVERHEAD_SECONDS
    return total


def _describe(point: Mapping[str, Any], varying: Sequence[str]) -> str:
    return " ".join(f"{k}={format_param(k, point[k])}" for k in varying if k in point)


def run_sweep(
    sweep: Sweep,
    out: str | os.PathLike | None = None,
    *,
    shard: tuple[int, int] | str | None = None,
    resume: bool = True,
    force: bool = False,
    progress: bool = True,
    repeat: int | None = None,
    warmup: int | None = None,
    cpu: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    overall: Any = None,
    warn: Callable[[str], None] | None = None,
    on_point: Callable[[dict[str, Any], dict[str, Any] | None], None] | None = None,
    client: Any = None,
    each_host: bool = False,
    spread: bool = False,
) -> Dataset:
    """Measure every point of ``sweep`` (or of its shard) into a Dataset.

    With ``out`` (a .csv path) each row is appended as soon as it is measured;
    with ``resume`` points already in that file are skipped. ``resume=False``
    starts a fresh dataset: an existing one with rows is refused (ValueError)
    unless ``force``, which moves it aside first (:func:`move_aside`). Every
    check of ``out`` (a file of another family, sweep or parameter set, a
    FIFO, a directory that takes no file) happens before anything is
    measured. Ctrl-C stops between samples; the rows measured so far stay on
    disk. ``progress`` draws a bar when stderr is a terminal or in Jupyter
    (never in logs); ``overall``, a bar of :func:`progress_bar` covering
    several sweeps (the tour), advances by one per point too (in each-host
    mode, by one per point and host). ``on_point(point, row)`` is called
    after each point (``row`` None for a point found on disk): a caller's own
    progress display.

    The machine check (:func:`memlab.check.check`) runs before the first
    point and after the last; the metadata keeps both as ``check_start`` and
    ``check_end``. A measurement that spent less than 90% of its wall time
    on CPU, or saw more than 2% steal, gives one warning line, passed to
    ``warn`` (default: printed to stderr).

    Every row names the machine that measured it (``context_host``,
    ``context_fingerprint_id``; docs/dataset.md).

    Fleet mode (docs/fleet.md): with ``client`` (a ``distributed.Client`` or
    a scheduler address such as ``"tcp://host:8786"``) the points are
    measured by the Dask workers that offer the ``memlab`` resource, one at
    a time per worker, and written here as they arrive. ``each_host=True``
    measures the whole sweep on every host (resume skips the points already
    on disk for that host); ``spread=True`` splits the points over hosts
    whose fingerprints agree and refuses, naming the differing facts, when
    they do not. A host that leaves the cluster loses only the point it was
    measuring: a warning says how many of its points are missing,
    ``metadata["fleet"]["lost"]`` lists them, and running the sweep again
    measures them. Needs ``pip install 'memlab[fleet]'``.

    >>> ds = run_sweep(Sweep("demo", "calibrate", [{"budget_ns": 5_000_000}], repeat=1),
    ...                progress=False)
    >>> len(ds)
    1
    """
    mode = _fleet_mode(client, each_host, spread)
    family = get_family(sweep.family)
    shard = parse_shard(shard)
    points = [dataclasses.asdict(family.params(p)) for p in shard_points(sweep.points, shard)]
    repeat = sweep.repeat if repeat is None else repeat
    warmup = sweep.warmup if warmup is None else warmup
    varying = [n for n in family.param_names if len({repr(p[n]) for p in points}) > 1]
    if out is not None:  # refused before the machine check says anything about the machine
        csv_path, json_path = paths_for(out)
        check_output_file(csv_path, "--out")
        if not resume and _has_rows(csv_path) and not force:
            raise OutputError(
                f"{csv_path} already holds a dataset; not resuming starts a fresh one: "
                "add --force to move the old one aside (or choose another --out)"
            )
    if mode is not None:
        return _run_on_fleet(sweep, family, points, out, mode=mode, client=client, shard=shard,
                             resume=resume, progress=progress, repeat=repeat, warmup=warmup, cpu=cpu,
                             metadata=metadata, overall=overall, warn=warn, varying=varying,
                             on_point=on_point)
    meta = sweep_metadata(sweep, family, shard, repeat)
    machine = identity(meta["machine"])
    tags = {HOST_COLUMN: machine["host"], FINGERPRINT_COLUMN: machine["fingerprint_id"]}
    meta["machines"] = [{**machine, "facts": meta["machine"]}]
    meta.update(metadata or {})
    bar = progress_bar(len(points), f"{sweep.family}:{sweep.name}", enabled=progress_enabled(progress),
                       position=1 if overall is not None else 0, leave=overall is None)
    warn = warn or (lambda text: bar.write(text, file=sys.stderr))
    start = check(planned_bytes=largest_bytes(points), steal_window_seconds=CHECK_STEAL_WINDOW_SECONDS)
    since = (time.monotonic(), read_cpu_times())
    meta["check_start"] = start.to_dict()
    if start.warnings:
        warn(f"memlab: warning: the machine check found {_check_words(start)} "
             f"(memlab check for details)")
    dataset = Dataset(rows=[], metadata=meta)
    writer = None
    if out is not None:
        if not resume and _has_rows(csv_path):
            move_aside(csv_path)
        writer = DatasetWriter(out, meta, defaults=family.defaults(), required=family.required_params())
    done: set[tuple] = set()
    if writer is not None:
        dataset.rows.extend(writer.existing_rows)
        done = {dataset.key(row) for row in writer.existing_rows}
    try:
        for point in points:
            key = dataset.key({"family": family.name, **point})
            if key in done:
                bar.update(1)
                if overall is not None:
                    overall.update(1)
                if on_point is not None:
                    on_point(point, None)
                continue
            bar.set_postfix_str(_describe(point, varying), refresh=False)
            measurement = family.run(
                point,
                repeat=repeat,
                warmup=warmup,
                cpu=cpu,
                target_seconds=sweep.target_seconds,
                **sweep.options,
            )
            row = {**measurement.to_row(), **tags}
            if writer is not None:
                writer.append(row)
            dataset.rows.append(row)
            done.add(key)
            bar.update(1)
            if overall is not None:
                overall.update(1)
            if measurement.conditions_warning:
                warn(f"memlab: warning: {family.name} {_describe(point, varying) or 'point'}: "
                     f"{measurement.conditions_warning}")
            if on_point is not None:
                on_point(point, row)
        end = check(steal_since=since).to_dict()  # steal over the whole sweep
        dataset.metadata["check_end"] = end
        if writer is not None:
            writer.update_metadata(check_end=end)
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    return dataset


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


CHECK_STEAL_WINDOW_SECONDS = 0.15
"""The busy window of the machine check at a sweep's start; the end check
measures steal over the whole sweep instead."""


FLEET_MODES = ("each-host", "spread")


def _fleet_mode(client: Any, each_host: bool, spread: bool) -> str | None:
    if client is None:
        if each_host or spread:
            raise ValueError(f"{'each_host' if each_host else 'spread'}=True needs client= "
                             "(a distributed.Client or a scheduler address)")
        return None
    if each_host == spread:
        raise ValueError("client= needs exactly one of each_host=True (the whole sweep on every host) "
                         "and spread=True (its points split over identical hosts)")
    return "each-host" if each_host else "spread"


def _run_on_fleet(
    sweep: Sweep,
    family: Family,
    points: list[dict[str, Any]],
    out: str | os.PathLike | None,
    *,
    mode: str,
    client: Any,
    shard: tuple[int, int] | None,
    resume: bool,
    progress: bool,
    repeat: int,
    warmup: int,
    cpu: int | None,
    metadata: Mapping[str, Any] | None,
    overall: Any,
    warn: Callable[[str], None] | None,
    varying: Sequence[str],
    on_point: Callable[[dict[str, Any], dict[str, Any] | None], None] | None,
) -> Dataset:
    """run_sweep on a Dask cluster: the hosts measure, this process writes every row."""
    dask_client, owned = fleet.connect(client)
    try:
        hosts = fleet.gather_hosts(dask_client, planned_bytes=largest_bytes(points))
        fleet.check_each_host(hosts)  # one measuring worker per host, in both modes
        if mode == "spread":
            fleet.check_spread(hosts)
        meta = sweep_metadata(sweep, family, shard, repeat, facts=hosts[0].facts)
        if mode == "each-host" and len(hosts) > 1:
            for key in ("machine", "machine_id", "machine_fingerprint"):
                meta.pop(key)  # several machines: metadata["machines"] lists them
        meta["machines"] = [host.entry() for host in hosts]
        meta["fleet"] = {"mode": mode, "scheduler": dask_client.scheduler.address,
                         "workers": [host.address for host in hosts], "lost": {}}
        meta.update(metadata or {})
        if out is not None and not resume and _has_rows(paths_for(out)[0]):
            move_aside(out)  # run_sweep refused this without force
        writer = DatasetWriter(out, meta, defaults=family.defaults(), required=family.required_params()) if out is not None else None
        existing = list(writer.existing_rows) if writer is not None else []
        dataset = Dataset(existing, writer.metadata if writer is not None else meta)

        def key(point: Mapping[str, Any]) -> tuple:
            return dataset.key({"family": family.name, **point})

        if mode == "each-host":
            done = {h.address: [r for r in existing if machine_key(r) == h.key] for h in hosts}
            plan = fleet.plan_each_host([h.address for h in hosts], done, points, key)
            queues = {address: collections.deque(todo) for address, todo in plan.items()}
            total = len(points) * len(hosts)
            waiting = sum(len(q) for q in queues.values())
        else:
            print_id = hosts[0].fingerprint_id
            measured = {key(r) for r in existing if machine_key(r)[1] == print_id}
            shared = collections.deque(p for p in points if key(p) not in measured)
            queues = {h.address: shared for h in hosts}
            total, waiting = len(points), len(shared)
        bar = progress_bar(total, f"{sweep.family}:{sweep.name} on {len(hosts)} hosts ({mode})",
                           enabled=progress_enabled(progress), position=1 if overall is not None else 0,
                           leave=overall is None)
        warn = warn or (lambda text: bar.write(text, file=sys.stderr))

        def advance(count: int, what: str) -> None:
            bar.set_postfix_str(what, refresh=False)
            bar.update(count)
            if overall is not None:
                overall.update(count)

        if total > waiting:
            advance(total - waiting, "(on disk)")
        for host in hosts:
            if host.check_start.get("warnings"):
                found = "; ".join(str(w) for w in host.check_start["warnings"])
                warn(f"memlab: warning: the machine check of {host.host} found {found}")
        versions = {h.host: h.facts.get("memlab_version") for h in hosts}
        if any(v and v != __version__ for v in versions.values()):
            warn(f"memlab: warning: the hosts run other memlab versions than this one ({__version__}): "
                 + ", ".join(f"{h}={v}" for h, v in versions.items()))
        options = dict(repeat=repeat, warmup=warmup, cpu=cpu, target_seconds=sweep.target_seconds,
                       **sweep.options)

        def record(host: fleet.Host, point: Mapping[str, Any], outcome: dict[str, Any]) -> None:
            row = dict(outcome["row"])
            row[HOST_COLUMN], row[FINGERPRINT_COLUMN] = host.key
            row[context_column("dask_overhead_s")] = round(outcome["overhead_s"], 4)
            if writer is not None:
                writer.append(row)
            dataset.rows.append(row)
            if outcome.get("warning"):
                warn(f"memlab: warning: {family.name} {_describe(point, varying) or 'point'} "
                     f"on {host.host}: {outcome['warning']}")
            advance(1, f"{host.host} {_describe(point, varying)}")
            if on_point is not None:
                on_point(dict(point), row)

        quieted = fleet.quiet_workers(dask_client, [h.address for h in hosts], True)
        try:
            result = fleet.dispatch(dask_client, family.name, hosts, queues, options, record,
                                    requeue=mode == "spread")
            dataset.metadata["fleet"] = {**dataset.metadata["fleet"], "lost": result.lost}
            if writer is not None:
                writer.update_metadata(fleet=dataset.metadata["fleet"])
        finally:
            fleet.quiet_workers(dask_client, [a for a, names in quieted.items() if isinstance(names, list)
                                              and names], False)
            bar.close()
            if writer is not None:
                writer.close()
        for host, missing in result.lost.items():
            warn(f"memlab: warning: {host} left the cluster; {missing} of its points were not measured "
                 f"(run the sweep again to measure them)")
        if result.errors:
            raise result.errors[0][1]
        return dataset
    finally:
        if owned:
            dask_client.close()


def _check_words(report) -> str:
    return "; ".join(f"{finding.name}: {finding.value}" for finding in report.warnings)


def sweep_metadata(
    sweep: Sweep, family: Family, shard: tuple[int, int] | None = None, repeat: int | None = None,
    facts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata of a dataset of ``sweep`` (docs/dataset.md, "Sidecar"): the family,
    sweep, parameter names, primary metric, machine facts (``facts``, default this
    machine's), memlab version and command."""
    facts = collect() if facts is None else dict(facts)
    return {
        "family": family.name,
        "sweep": sweep.name,
        "description": sweep.description,
        "param_names": list(family.param_names),
        "primary_metric": family.primary_metric or (f"ns_per_{family.unit}" if family.unit else "elapsed_ns"),
        "repeat": sweep.repeat if repeat is None else repeat,
        "warmup": sweep.warmup,
        "shard": f"{shard[0]}/{shard[1]}" if shard else "",
        "machine": facts,
        "machine_id": machine_id(facts),
        "machine_fingerprint": fingerprint(facts),
        "memlab_version": __version__,
        "command": " ".join(sys.argv),
    }


class ScriptError(ValueError):
    """A mistake in an experiment script, not in memlab: the message names the script and the mistake
    (exit status 2, as for any input memlab cannot use)."""


def _script_mistake(script: str, error: BaseException) -> ScriptError:
    """The error a script's code raised, as one line naming the script and the script's line."""
    line = error.lineno if isinstance(error, SyntaxError) and error.filename == script else None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == script:
            line = frame.lineno  # the deepest frame in the script: where its mistake is
    where = f"line {line}: " if line is not None else ""
    message = error.msg if isinstance(error, SyntaxError) else str(error)
    return ScriptError(f"sweep script {script}: {where}{type(error).__name__}: {message}")


def load_script(path: str | os.PathLike) -> Any:
    """Import an experiment script (a .py file defining ``sweep(quick)``); a mistake in it
    (it does not run, or defines no ``sweep``) is a :class:`ScriptError` naming the script."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"sweep script {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"memlab_experiment_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"sweep script {str(path)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the script's own code failed (a SyntaxError, an import, ...)
        raise _script_mistake(os.fspath(path), error) from None
    if not callable(getattr(module, "sweep", None)):
        raise ScriptError(f"sweep script {os.fspath(path)} defines no sweep(quick) function")
    return module


def script_sweeps(function: Callable[..., Any], quick: bool = False) -> list[Sweep]:
    """The sweeps an experiment script's ``sweep(quick)`` returns; :class:`ScriptError` naming the
    script for a function that takes no ``quick``, raises, or returns something other than sweeps.

    >>> script_sweeps(lambda quick=False: Sweep("s", "calibrate", [{}]))[0].name
    's'
    """
    code = getattr(function, "__code__", None)
    script = code.co_filename if code is not None else repr(function)
    name = getattr(function, "__name__", "sweep")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(quick=quick)
        except TypeError:
            raise ScriptError(f"sweep script {script}: {name}() takes no quick argument (it is {name}{signature}): "
                              f"define it as def {name}(quick=False): and return shorter sweeps when quick is true"
                              ) from None
    try:
        made = function(quick=quick)
    except Exception as error:
        raise _script_mistake(script, error) from None
    for item in [made] if isinstance(made, Sweep) else made if isinstance(made, (list, tuple)) else [made]:
        if not isinstance(item, Sweep):
            raise ScriptError(f"sweep script {script}: {name}(quick={quick}) returned {repr(item)[:40]} "
                              f"({type(item).__name__}), not a memlab.grid.Sweep (or a list of them)")
    return as_sweeps(made)


def resolve(name: str, quick: bool = False) -> list[Sweep]:
    """Sweeps named by a script path, 'family.sweep', or a sweep name unique to one family.

    >>> resolve("calibrate.quick")[0].family
    'calibrate'
    """
    if name.endswith(".py") or os.sep in name:
        return script_sweeps(load_script(name).sweep, quick)
    if "." in name:
        family_name, sweep_name = name.split(".", 1)
        return as_sweeps(get_family(family_name).sweep(sweep_name))
    owners = [f for f in all_families().values() if name in f.sweeps]
    if len(owners) == 1:
        return as_sweeps(owners[0].sweep(name))
    if len(owners) > 1:
        names = ", ".join(f"{f.name}.{name}" for f in owners)
        raise ValueError(f"sweep {name!r} is ambiguous: {names}")
    known = [f"{fam}.{sweep}" for fam, f in all_families().items() for sweep in f.sweeps]
    known += sorted({sweep for f in all_families().values() for sweep in f.sweeps})
    raise ValueError(f"sweep {name!r} is neither a script nor a named sweep{suggest(name, known)} "
                     "(see `memlab sweep --list`)")


def output_path(out: str | None, sweep: Sweep, many: bool) -> Path:
    """Where a sweep's CSV goes: ``out`` itself, or a folder holding one per sweep.

    The file name comes from the sweep (``<family>-<name>.csv``) and must
    stay inside the folder: a sweep named ``x/../../escaped`` is refused.

    >>> output_path("runs", Sweep("quick", "chase", [{}]), many=False)
    PosixPath('runs/chase-quick.csv')
    """
    folder = Path("results") if out is None else Path(out)
    if out is not None and not many and folder.suffix == ".csv":
        return folder
    return inside(folder, f"{sweep.family}-{sweep.name}.csv", f"sweep {sweep.name!r}: file name")
