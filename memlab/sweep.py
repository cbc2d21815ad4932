"""The runner's front: a sweep measured point by point, each row on disk as soon as it exists.

:func:`run_sweep` is the one-call form of :class:`memlab.runner.Run` (the run
loop, which this module re-exports with its progress bars and estimates): it measures the points of a :class:`memlab.grid.Sweep` in
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

import importlib.util
import inspect
import os
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

from memlab.dataset import Dataset
from memlab.files import inside
from memlab.grid import Sweep, as_sweeps, grid, parse_shard, shard_points, zipped
from memlab.registry import all_families
from memlab.registry import family as get_family
from memlab.runner import (
    POINT_OVERHEAD_SECONDS,
    Run,
    estimate_seconds,
    executor_for,
    move_aside,
    progress_bar,
    progress_enabled,
    sweep_metadata,
)
from memlab.units import suggest

__all__ = [
    "POINT_OVERHEAD_SECONDS",
    "Run",
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
    runs: int | None = None,
    processes: bool = False,
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

    Every point is measured in ``runs`` runs (default the sweep's ``runs``,
    else :data:`memlab.grid.DEFAULT_RUNS`), each a fresh setup, in rounds:
    run 0 of every point, then run 1 of every point ...; each row is one run,
    with its ``run`` index and the point's ``run_spread`` so far
    (docs/dataset.md, "Runs"). ``repeat`` is the samples of each run.
    Resuming measures the runs a point lacks. ``processes=True`` measures
    each run in a fresh Python worker process (:mod:`memlab.worker`); a
    worker that dies is a failed run, warned about, and raised once the
    others are measured.

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
    ...                progress=False, runs=2)
    >>> len(ds)
    2
    """
    run = Run(sweep, out, shard=shard, resume=resume, force=force, repeat=repeat, warmup=warmup, cpu=cpu,
              metadata=metadata, executor=executor_for(client, each_host, spread, processes), runs=runs)
    return run.execute(progress=progress, overall=overall, warn=warn, on_point=on_point)


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
