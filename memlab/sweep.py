"""Parameter grids run point by point, each row on disk as soon as it exists.

A :class:`Sweep` names a family and a list of parameter points. ``run_sweep``
measures them in order with a progress bar, appends every row to the dataset
file at once (so Ctrl-C loses nothing), skips points already on disk when run
again (resume), and can take only its share of the points (``shard=(i, n)``)
so that n processes or hosts split one sweep and the results merge.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from memlab.check import check, largest_bytes, read_cpu_times
from memlab.dataset import Dataset, DatasetWriter
from memlab.families import family as get_family

__all__ = [
    "Progress",
    "Sweep",
    "grid",
    "load_script",
    "main",
    "parse_shard",
    "resolve",
    "run_sweep",
    "shard_points",
    "zipped",
]


@dataclass
class Sweep:
    """Points of one family to measure, with how to measure each."""

    name: str
    family: str
    points: list[dict[str, Any]]
    repeat: int = 5
    warmup: int = 1
    target_seconds: float | None = None
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.points, list) or not all(isinstance(p, Mapping) for p in self.points):
            raise ValueError(f"points of sweep {self.name!r} must be a list of dicts")
        if not self.points:
            raise ValueError(f"sweep {self.name!r} has no points")

    def __len__(self) -> int:
        return len(self.points)


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Cartesian product of the axes, the first axis varying slowest.

    >>> grid(npad=[0, 7], order=["sequential", "random"])[1]
    {'npad': 0, 'order': 'random'}
    """
    names = list(axes)
    values = [list(v) for v in axes.values()]
    for name, options in zip(names, values):
        if not options:
            raise ValueError(f"axis {name!r} of the grid is empty")
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def zipped(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Axes walked together (all the same length).

    >>> zipped(n=[1, 2], tile=[8, 16])
    [{'n': 1, 'tile': 8}, {'n': 2, 'tile': 16}]
    """
    lengths = {name: len(list(v)) for name, v in axes.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"zipped axes differ in length: {lengths}")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in zip(*axes.values())]


def parse_shard(text: str | Sequence[int] | None) -> tuple[int, int] | None:
    """'i/n' (1-based i) -> (i, n); None stays None."""
    if text is None:
        return None
    if isinstance(text, str):
        try:
            index_text, count_text = text.split("/")
            index, count = int(index_text), int(count_text)
        except ValueError:
            raise ValueError(f"shard={text!r} must look like i/n, e.g. 1/4") from None
    else:
        index, count = text
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard={index}/{count} needs 1 <= i <= n")
    return index, count


def shard_points(points: Sequence[Any], shard: tuple[int, int] | None) -> list[Any]:
    """The points of shard (i, n): every n-th point starting at the i-th."""
    if shard is None:
        return list(points)
    index, count = shard
    return list(points[index - 1 :: count])


class Progress:
    """A progress bar for a terminal, a Jupyter notebook, or a log file."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream=None) -> None:
        self.total = total
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self.started = time.monotonic()
        self._display = None
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if enabled and not self._tty and _in_jupyter():
            from IPython.display import display

            self._display = display(self._text(""), display_id=True)

    def _text(self, detail: str) -> str:
        width = 28
        fraction = self.done / self.total if self.total else 1.0
        filled = int(round(width * fraction))
        elapsed = time.monotonic() - self.started
        eta = ""
        if 0 < self.done < self.total:
            eta = f" eta {_seconds(elapsed / self.done * (self.total - self.done))}"
        return (
            f"{self.label} [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done}/{self.total} {_seconds(elapsed)}{eta} {detail}"
        ).rstrip()

    def advance(self, detail: str = "") -> None:
        self.done += 1
        self.show(detail)

    def show(self, detail: str = "") -> None:
        if not self.enabled:
            return
        text = self._text(detail)
        if self._display is not None:
            self._display.update(text)
        elif self._tty:
            self.stream.write("\r\x1b[K" + text[:200])
            self.stream.flush()
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        """Print one line above the bar (whether the bar is shown or not)."""
        if self._tty and self.enabled:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()
        if self._tty and self.enabled and self.done < self.total:
            self.show()

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()


def _in_jupyter() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "ZMQ" in type(shell).__name__


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value < 120 else f"{value / 60:.1f}min"


def _describe(point: Mapping[str, Any], varying: Sequence[str]) -> str:
    return " ".join(f"{k}={point[k]}" for k in varying if k in point)


def run_sweep(
    sweep: Sweep,
    out: str | os.PathLike | None = None,
    *,
    shard: tuple[int, int] | str | None = None,
    resume: bool = True,
    progress: bool = True,
    repeat: int | None = None,
    cpu: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Dataset:
    """Measure every point of ``sweep`` (or of its shard) into a Dataset.

    With ``out`` (a .csv path) each row is appended as soon as it is measured;
    with ``resume`` points already in that file are skipped. Ctrl-C stops
    between samples; the rows measured so far stay on disk.

    The machine check (:func:`memlab.check.check`) runs before the first
    point and after the last; the metadata keeps both as ``check_start`` and
    ``check_end``. A measurement that spent less than 90% of its wall time
    on CPU, or saw more than 2% steal, gives one warning line, passed to
    ``warn`` (default: printed to stderr).

    >>> ds = run_sweep(Sweep("demo", "calibrate", [{"budget_ns": 5_000_000}], repeat=1),
    ...                progress=False)
    >>> len(ds)
    1
    """
    family = get_family(sweep.family)
    shard = parse_shard(shard)
    points = [dataclasses.asdict(family.params(p)) for p in shard_points(sweep.points, shard)]
    repeat = sweep.repeat if repeat is None else repeat
    param_names = family.param_names
    varying = [n for n in param_names if len({repr(p[n]) for p in points}) > 1]
    meta = _metadata(sweep, family, param_names, shard, repeat)
    meta.update(metadata or {})
    bar = Progress(len(points), f"{sweep.family}:{sweep.name}", enabled=progress)
    warn = warn or bar.note
    start = check(planned_bytes=largest_bytes(points), steal_window_seconds=CHECK_STEAL_WINDOW_SECONDS)
    since = (time.monotonic(), read_cpu_times())
    meta["check_start"] = start.to_dict()
    if start.warnings:
        warn(f"memlab: warning: the machine check found {_check_words(start)} "
             f"(memlab check for details)")
    dataset = Dataset(rows=[], metadata=meta)
    writer = DatasetWriter(out, meta) if out is not None else None
    done: set[tuple] = set()
    if writer is not None and resume:
        dataset.rows.extend(writer.existing_rows)
        done = {dataset.key(row) for row in writer.existing_rows}
    try:
        for point in points:
            key = dataset.key({"family": family.name, **point})
            if key in done:
                bar.advance("(on disk)")
                continue
            bar.show(_describe(point, varying))
            measurement = family.run(
                point,
                repeat=repeat,
                warmup=sweep.warmup,
                cpu=cpu,
                target_seconds=sweep.target_seconds,
                **sweep.options,
            )
            row = measurement.to_row()
            if writer is not None:
                writer.append(row)
            dataset.rows.append(row)
            done.add(key)
            if measurement.conditions_warning:
                warn(f"memlab: warning: {family.name} {_describe(point, varying) or 'point'}: "
                     f"{measurement.conditions_warning}")
            bar.advance(_describe(point, varying))
        end = check(steal_since=since).to_dict()  # steal over the whole sweep
        dataset.metadata["check_end"] = end
        if writer is not None:
            writer.update_metadata(check_end=end)
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    return dataset


CHECK_STEAL_WINDOW_SECONDS = 0.15
"""The busy window of the machine check at a sweep's start; the end check
measures steal over the whole sweep instead."""


def _check_words(report) -> str:
    return "; ".join(f"{finding.name}: {finding.value}" for finding in report.warnings)


def _metadata(sweep: Sweep, family, param_names, shard, repeat) -> dict[str, Any]:
    from memlab import __version__
    from memlab.machine import collect, fingerprint, machine_id

    facts = collect()
    return {
        "family": family.name,
        "sweep": sweep.name,
        "description": sweep.description,
        "param_names": list(param_names),
        "primary_metric": family.primary_metric or (f"ns_per_{family.unit}" if family.unit else "elapsed_ns"),
        "repeat": repeat,
        "warmup": sweep.warmup,
        "shard": f"{shard[0]}/{shard[1]}" if shard else "",
        "machine": facts,
        "machine_id": machine_id(facts),
        "machine_fingerprint": fingerprint(facts),
        "memlab_version": __version__,
        "command": " ".join(sys.argv),
    }


def load_script(path: str | os.PathLike) -> Any:
    """Import an experiment script (a .py file defining ``sweep(quick)``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"sweep script {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"memlab_experiment_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"sweep script {str(path)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "sweep", None)):
        raise ValueError(f"sweep script {str(path)!r} defines no sweep(quick) function")
    return module


def resolve(name: str, quick: bool = False) -> list[Sweep]:
    """Sweeps named by a script path, 'family.sweep', or a sweep name unique to one family."""
    from memlab.families import all_families

    if name.endswith(".py") or os.sep in name:
        return _as_list(load_script(name).sweep(quick=quick))
    if "." in name:
        family_name, sweep_name = name.split(".", 1)
        return _as_list(get_family(family_name).sweep(sweep_name))
    owners = [f for f in all_families().values() if name in f.sweeps]
    if len(owners) == 1:
        return _as_list(owners[0].sweep(name))
    if len(owners) > 1:
        names = ", ".join(f"{f.name}.{name}" for f in owners)
        raise ValueError(f"sweep {name!r} is ambiguous: {names}")
    raise ValueError(f"sweep {name!r} is neither a script nor a named sweep (see `memlab sweep --list`)")


def _as_list(value: Sweep | Sequence[Sweep]) -> list[Sweep]:
    sweeps = [value] if isinstance(value, Sweep) else list(value)
    for item in sweeps:
        if not isinstance(item, Sweep):
            raise ValueError(f"expected Sweep objects, got {type(item).__name__}")
    return sweeps


def output_path(out: str | None, sweep: Sweep, many: bool) -> Path:
    """Where a sweep's CSV goes: ``out`` itself, or a folder holding one per sweep."""
    if out is None:
        return Path("results") / f"{sweep.family}-{sweep.name}.csv"
    path = Path(out)
    if many or path.suffix != ".csv":
        return path / f"{sweep.family}-{sweep.name}.csv"
    return path


def main(sweep_fn: Callable[..., Sweep | Sequence[Sweep]], argv: Sequence[str] | None = None) -> int:
    """Command line of an experiment script: --quick, --out, --shard, --repeat."""
    parser = argparse.ArgumentParser(description=(sweep_fn.__doc__ or "").strip() or None)
    parser.add_argument("--quick", action="store_true", help="the short variant")
    parser.add_argument("--out", help="CSV path (one sweep) or folder (several); default results/")
    parser.add_argument("--shard", help="run only shard i/n of the points")
    parser.add_argument("--repeat", type=int, help="repetitions per point")
    parser.add_argument("--cpu", type=int, help="pin the measuring process to this CPU")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-resume", action="store_true", help="re-measure points already on disk")
    args = parser.parse_args(argv)
    sweeps = _as_list(sweep_fn(quick=args.quick))
    for sweep in sweeps:
        path = output_path(args.out, sweep, len(sweeps) > 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        dataset = run_sweep(
            sweep, path, shard=args.shard, resume=not args.no_resume,
            progress=not args.no_progress, repeat=args.repeat, cpu=args.cpu,
        )
        print(f"{len(dataset)} rows -> {path}")
    return 0

