"""``memlab tour``: the quick sweep of every family, then one HTML report.

The tour is memlab's first command for a newcomer: it measures the "quick"
sweep of every registered family (whatever :func:`memlab.registry.all_families`
holds when it runs), writes one dataset per family into a folder and ends
with ``report.html`` showing each family's standard figure. A family that
fails (a kernel refusal, a missing feature) is reported in the HTML and the
tour goes on. ``reduced=True`` keeps at most two points per family, one
repetition and short samples: a smoke test of the whole pipeline in seconds.

Example::

    >>> result = tour("memlab-tour", reduced=True, progress=False)   # doctest: +SKIP
    >>> result.report                                                  # doctest: +SKIP
    PosixPath('memlab-tour/report.html')
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from memlab.dataset import Dataset, paths_for
from memlab.family import Family
from memlab.files import check_output_directory, inside
from memlab.grid import Sweep, as_sweeps, check_runs
from memlab.registry import all_families
from memlab.registry import family as get_family
from memlab.report import ReportItem, write_report
from memlab.runner import Run, progress_bar, progress_enabled
from memlab.sweep import run_sweep

__all__ = ["REDUCED_MAX_POINTS", "REDUCED_TARGET_SECONDS", "FamilyRun", "TourResult", "reduce_sweep", "tour"]

#: Points per family kept by the reduced tour.
REDUCED_MAX_POINTS = 2
#: Upper bound on one sample's duration in the reduced tour (seconds).
REDUCED_TARGET_SECONDS = 0.02


@dataclass
class FamilyRun:
    """What the tour did for one family: the dataset file, or the error."""

    family: str
    sweep: str
    path: Path | None
    dataset: Dataset | None
    seconds: float
    error: str = ""


@dataclass
class TourResult:
    """The tour's outputs: one :class:`FamilyRun` per family and the report's path."""

    out: Path
    runs: list[FamilyRun] = field(default_factory=list)
    report: Path | None = None
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def failed(self) -> list[FamilyRun]:
        return [run for run in self.runs if run.error]


def _spread_indices(count: int, keep: int) -> list[int]:
    if keep >= count:
        return list(range(count))
    if keep == 1:
        return [0]
    return sorted({round(i * (count - 1) / (keep - 1)) for i in range(keep)})


def reduce_sweep(sweep: Sweep, max_points: int = REDUCED_MAX_POINTS, repeat: int = 1,
                 target_seconds: float = REDUCED_TARGET_SECONDS, runs: int = 1) -> Sweep:
    """A small copy of ``sweep``: at most ``max_points`` points spread over it (first and last
    first), each in ``runs`` runs (one: a look at the shape, not numbers to compare) of
    ``repeat`` repetitions, no warm-up, samples of at most ``target_seconds``.

    Used by ``memlab tour --reduced`` and by CI runs of the notebooks.

    >>> small = reduce_sweep(Sweep("s", "calibrate", [{"budget_ns": b} for b in (10**7, 2 * 10**7, 3 * 10**7)]))
    >>> [p["budget_ns"] for p in small.points], small.repeat, small.runs
    ([10000000, 30000000], 1, 1)
    """
    if max_points < 1:
        raise ValueError(f"max_points={max_points} is below the minimum 1")
    if repeat < 1:
        raise ValueError(f"repeat={repeat} is below the minimum 1")
    if not target_seconds > 0:
        raise ValueError(f"target_seconds={target_seconds} must be above 0")
    points = [sweep.points[i] for i in _spread_indices(len(sweep.points), max_points)]
    target = target_seconds if sweep.target_seconds is None else min(sweep.target_seconds, target_seconds)
    return dataclasses.replace(sweep, points=points, repeat=repeat, warmup=0, target_seconds=target,
                               runs=check_runs(runs))


def _quick_sweeps(family: Family) -> list[Sweep]:
    try:
        return as_sweeps(family.sweep("quick"))
    except ValueError as error:
        raise ValueError(f"{family.name}'s quick sweep: {error}") from None


def _planned_points(sweep: Sweep) -> int:
    """The points the run of ``sweep`` plans (memlab.runner.Run.plan), for the overall bar; a sweep
    whose points its family refuses counts them all: its run fails, recorded like any other failure."""
    try:
        return Run(sweep).plan().units  # one unit per run of a point
    except (ValueError, TypeError):
        return len(sweep.points) * sweep.runs_per_point


def _remove_dataset(path: Path) -> None:
    for name in paths_for(path):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def tour(
    out: str | os.PathLike = "memlab-tour",
    *,
    reduced: bool = False,
    families: Sequence[str] | None = None,
    repeat: int | None = None,
    cpu: int | None = None,
    progress: bool = True,
    resume: bool = False,
    report: bool = True,
    command: str | None = None,
) -> TourResult:
    """Run the quick sweep of every registered family into ``out``, then write ``out/report.html``.

    Each family's rows go to ``out/<family>.csv`` (+ its JSON sidecar) as
    they are measured. ``families`` limits the tour to some families;
    ``reduced`` keeps two points per family with one short repetition;
    ``resume`` keeps rows already in ``out`` instead of measuring afresh.
    Ctrl-C stops the tour, and the report still shows what was measured.

    >>> result = tour("/tmp/memlab-tour", reduced=True, families=["calibrate"], progress=False)  # doctest: +SKIP
    >>> [run.family for run in result.runs]                                                     # doctest: +SKIP
    ['calibrate']
    """
    if repeat is not None and repeat < 1:
        raise ValueError(f"repeat={repeat} is below the minimum 1")
    if families:
        selected = {name: get_family(name) for name in families}
        lacking = [name for name, fam in selected.items() if "quick" not in fam.sweeps]
        if lacking:
            raise ValueError(f"family={lacking[0]!r} has no quick sweep (its sweeps: "
                             f"{', '.join(sorted(selected[lacking[0]].sweeps)) or 'none'})")
    else:
        selected = all_families()
    out = check_output_directory(out, "out")
    result = TourResult(out=out)
    started = time.monotonic()
    names = [name for name, fam in selected.items() if "quick" in fam.sweeps]
    planned: dict[str, list[Sweep] | str] = {}
    for name in names:
        try:
            sweeps = _quick_sweeps(selected[name])
            planned[name] = [reduce_sweep(s, repeat=repeat or 1) if reduced else s for s in sweeps]
        except Exception as error:  # a family's own bug must not stop the tour
            planned[name] = f"{type(error).__name__}: {error}"
    total = sum(_planned_points(s) for sweeps in planned.values() if not isinstance(sweeps, str) for s in sweeps)
    overall = progress_bar(total, "tour", enabled=progress_enabled(progress), position=0)
    try:
        for name in names:
            sweeps = planned[name]
            if isinstance(sweeps, str):
                result.runs.append(FamilyRun(name, "quick", None, None, 0.0, sweeps))
                continue
            for sweep in sweeps:
                overall.set_description_str(f"tour: {name}", refresh=True)
                stem = name if len(sweeps) == 1 else f"{name}-{sweep.name}"
                try:
                    path = inside(out, f"{stem}.csv", f"{name}'s sweep {sweep.name!r}: file name")
                except ValueError as error:
                    result.runs.append(FamilyRun(name, sweep.name, None, None, 0.0, f"ValueError: {error}"))
                    continue
                if not resume:
                    _remove_dataset(path)
                began = time.monotonic()
                warnings: list[str] = []
                try:
                    dataset = run_sweep(sweep, path, resume=resume, progress=progress, repeat=repeat, cpu=cpu,
                                        overall=overall, warn=warnings.append)
                except KeyboardInterrupt:
                    result.interrupted = True
                    partial = Dataset.load(path) if Path(paths_for(path)[0]).exists() else None
                    result.runs.append(FamilyRun(name, sweep.name, path, partial, time.monotonic() - began,
                                                 "interrupted (Ctrl-C); the rows measured so far are kept"))
                    break
                except Exception as error:  # recorded in the report; the tour goes on
                    partial = Dataset.load(path) if Path(paths_for(path)[0]).exists() else None
                    message = f"{type(error).__name__}: {error}"
                    overall.write(f"    {name} failed: {message}", file=sys.stderr)
                    result.runs.append(FamilyRun(name, sweep.name, path, partial, time.monotonic() - began,
                                                 message))
                    continue
                finally:
                    if warnings:
                        overall.write(summarise_warnings(name, warnings, len(sweep.points)), file=sys.stderr)
                result.runs.append(FamilyRun(name, sweep.name, path, dataset, time.monotonic() - began))
            if result.interrupted:
                break
    finally:
        overall.close()
    result.seconds = time.monotonic() - started
    if report:
        result.report = _write_tour_report(result, reduced, command)
    return result


_CHECK_PREFIX = "memlab: warning: the machine check found "
_WARNING_PREFIX = "memlab: warning: "


def summarise_warnings(family: str, warnings: Sequence[str], points: int) -> str:
    """One line for the warnings of one family's sweep in the tour (a sweep prints one per point).

    The machine check's findings stay as they are; the points measured with
    too little CPU time or too much steal are counted, with the first one's
    reason as the example. The report flags each of those rows.

    >>> print(summarise_warnings("chase", [
    ...     "memlab: warning: the machine check found load: 9.1 on 2 CPUs (memlab check for details)",
    ...     "memlab: warning: chase working_set_bytes=16 KiB: on CPU 39% of its wall time (below 90%)",
    ...     "memlab: warning: chase working_set_bytes=4 MiB: on CPU 44% of its wall time (below 90%)"], 8))
    memlab: warning: chase: the machine check found load: 9.1 on 2 CPUs (memlab check for details); 2 of 8 points measured with too little CPU time or too much steal (first: on CPU 39% of its wall time (below 90%)); the report flags them
    """
    checks = [w[len(_CHECK_PREFIX) - len("the machine check found "):] for w in warnings
              if w.startswith(_CHECK_PREFIX)]
    others = [w for w in warnings if not w.startswith(_CHECK_PREFIX)]
    parts = list(checks)
    if others:
        first = others[0][len(_WARNING_PREFIX):] if others[0].startswith(_WARNING_PREFIX) else others[0]
        reason = first.split(": ", 1)[1] if ": " in first else first
        parts.append(f"{len(others)} of {points} points measured with too little CPU time or too much steal "
                     f"(first: {reason}); the report flags them")
    return f"{_WARNING_PREFIX}{family}: " + "; ".join(parts)


def _write_tour_report(result: TourResult, reduced: bool, command: str | None) -> Path:
    items = []
    for run in result.runs:
        title = run.family if run.path is None or run.path.stem == run.family else run.path.stem
        notes = [f"measured in {run.seconds:.1f} s"]
        items.append(ReportItem(title=title, dataset=run.dataset, error=run.error, notes=notes,
                                source=run.path.name if run.path else ""))
    mode = "reduced (two points per family, one repetition)" if reduced else "quick"
    intro = (f"The {mode} sweep of every memlab family on this machine, "
             f"{len(result.runs)} datasets in {result.seconds:.0f} s. Each section shows the family's "
             "standard figure and its points (median with the min … max of the repetitions).")
    if result.interrupted:
        intro += " The tour was interrupted; later families were not measured."
    return write_report(items, result.out / "report.html", title="memlab tour", command=command,
                        intro=intro)
