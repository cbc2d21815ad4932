"""``memlab tour``: the quick sweep of every family, then one HTML report.

The tour is memlab's first command for a newcomer: it measures the "quick"
sweep of every registered family (whatever :func:`memlab.families.all_families`
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

import argparse
import dataclasses
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from memlab.dataset import Dataset, paths_for
from memlab.sweep import Sweep

__all__ = ["REDUCED_MAX_POINTS", "REDUCED_TARGET_SECONDS", "TourResult", "reduce_sweep", "tour", "tour_main"]

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
                 target_seconds: float = REDUCED_TARGET_SECONDS) -> Sweep:
    """A small copy of ``sweep``: at most ``max_points`` points spread over it (first and last
    first), ``repeat`` repetitions, no warm-up, samples of at most ``target_seconds``.

    Used by ``memlab tour --reduced`` and by CI runs of the notebooks.

    >>> small = reduce_sweep(Sweep("s", "calibrate", [{"budget_ns": b} for b in (10**7, 2 * 10**7, 3 * 10**7)]))
    >>> [p["budget_ns"] for p in small.points], small.repeat
    ([10000000, 30000000], 1)
    """
    if max_points < 1:
        raise ValueError(f"max_points={max_points} is below the minimum 1")
    if repeat < 1:
        raise ValueError(f"repeat={repeat} is below the minimum 1")
    if not target_seconds > 0:
        raise ValueError(f"target_seconds={target_seconds} must be above 0")
    points = [sweep.points[i] for i in _spread_indices(len(sweep.points), max_points)]
    target = target_seconds if sweep.target_seconds is None else min(sweep.target_seconds, target_seconds)
    return dataclasses.replace(sweep, points=points, repeat=repeat, warmup=0, target_seconds=target)


def _quick_sweeps(family) -> list[Sweep]:
    made = family.sweep("quick")
    sweeps = [made] if isinstance(made, Sweep) else list(made)
    for sweep in sweeps:
        if not isinstance(sweep, Sweep):
            raise ValueError(f"{family.name}'s quick sweep returned {type(sweep).__name__}, not a Sweep")
    return sweeps


def _remove_dataset(path: Path) -> None:
    for name in paths_for(path):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def _say(text: str, enabled: bool) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)


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
    from memlab.families import all_families, family as get_family
    from memlab.sweep import run_sweep

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
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = TourResult(out=out)
    started = time.monotonic()
    names = [name for name, fam in selected.items() if "quick" in fam.sweeps]
    for index, name in enumerate(names, start=1):
        fam = selected[name]
        began = time.monotonic()
        try:
            sweeps = _quick_sweeps(fam)
        except Exception as error:  # a family's own bug must not stop the tour
            result.runs.append(FamilyRun(name, "quick", None, None, 0.0, f"{type(error).__name__}: {error}"))
            continue
        for sweep in sweeps:
            if reduced:
                sweep = reduce_sweep(sweep, repeat=repeat or 1)
            stem = name if len(sweeps) == 1 else f"{name}-{sweep.name}"
            path = out / f"{stem}.csv"
            if not resume:
                _remove_dataset(path)
            _say(f"[{index}/{len(names)}] {name}: {len(sweep.points)} points "
                 f"(tour {time.monotonic() - started:.0f}s so far)", progress)
            began = time.monotonic()
            try:
                dataset = run_sweep(sweep, path, resume=resume, progress=progress, repeat=repeat, cpu=cpu)
            except KeyboardInterrupt:
                result.interrupted = True
                partial = Dataset.load(path) if Path(paths_for(path)[0]).exists() else None
                result.runs.append(FamilyRun(name, sweep.name, path, partial, time.monotonic() - began,
                                             "interrupted (Ctrl-C); the rows measured so far are kept"))
                break
            except Exception as error:  # recorded in the report; the tour goes on
                partial = Dataset.load(path) if Path(paths_for(path)[0]).exists() else None
                message = f"{type(error).__name__}: {error}"
                _say(f"    {name} failed: {message}", True)
                result.runs.append(FamilyRun(name, sweep.name, path, partial, time.monotonic() - began, message))
                continue
            result.runs.append(FamilyRun(name, sweep.name, path, dataset, time.monotonic() - began))
        if result.interrupted:
            break
    result.seconds = time.monotonic() - started
    if report:
        result.report = _write_tour_report(result, reduced, command)
    return result


def _write_tour_report(result: TourResult, reduced: bool, command: str | None) -> Path:
    from memlab.report import ReportItem, write_report

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


def tour_main(argv: Sequence[str] | None = None) -> int:
    """``memlab tour [--out DIR] [--reduced]``: quick sweep of every family + report.html."""
    parser = argparse.ArgumentParser(
        prog="memlab tour",
        description="run the quick sweep of every family and write one dataset per family plus report.html",
    )
    parser.add_argument("--out", default="memlab-tour", help="folder for the datasets and report.html")
    parser.add_argument("--reduced", action="store_true",
                        help=f"at most {REDUCED_MAX_POINTS} points per family, one repetition (for CI)")
    parser.add_argument("--family", action="append", metavar="NAME",
                        help="only this family (repeatable)")
    parser.add_argument("--repeat", type=int, help="repetitions per point")
    parser.add_argument("--cpu", type=int, help="pin the measuring process to this CPU")
    parser.add_argument("--resume", action="store_true", help="keep rows already in --out")
    parser.add_argument("--no-progress", action="store_true")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.repeat is not None and args.repeat < 1:
        print(f"memlab tour: error: --repeat={args.repeat} is below the minimum 1", file=sys.stderr)
        return 2
    command = " ".join(shlex.quote(a) for a in ["memlab", "tour", *argv])
    try:
        result = tour(args.out, reduced=args.reduced, families=args.family, repeat=args.repeat,
                      cpu=args.cpu, progress=not args.no_progress, resume=args.resume, command=command)
    except ValueError as error:
        print(f"memlab tour: error: {error}", file=sys.stderr)
        return 2
    for run in result.runs:
        status = f"FAILED: {run.error}" if run.error else f"{len(run.dataset)} rows -> {run.path}"
        print(f"{run.family:<14} {run.seconds:6.1f} s  {status}")
    print(f"tour: {result.seconds:.0f} s; report -> {result.report}")
    try:
        from memlab.plot import require_matplotlib

        require_matplotlib()
    except ImportError as error:
        print(f"memlab tour: the report has no figures: {error}", file=sys.stderr)
    if result.interrupted:
        return 130
    return 1 if result.failed else 0
