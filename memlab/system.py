"""UnixBench's system tests: process creation, execl and file copy.

Three tests of the kernel's process and file paths, measured the way
UnixBench's ``spawn``, ``execl`` and ``fstime -c`` programs do (seed 002):

- ``spawn``: fork, the child ``_exit(0)``\\ s at once, the parent waits; loops
  per second.
- ``execl``: a program that re-executes itself, carrying its counter in its
  arguments; execs per second.
- ``file_copy``: a file of ``max_blocks`` KiB is read in ``buffer_bytes``
  chunks and written to a second file, rewinding both at the end, for the
  duration; KB per second (KB = 1024 bytes, as fstime counts).

``copies`` runs that many worker processes in parallel and sums their counts
over their mean elapsed time, as UnixBench's ``-c`` does. Each sample lasts
``duration_s`` (UnixBench uses 30 s), or exactly ``iterations`` loops per
copy. The spawn and execl loops run in ``memlab_system_helper``, a small C
program installed with the package (``memlab/_bin/``), because fork() of a
process as large as the Python interpreter costs several times more than
fork() of a small C program, which is what UnixBench measures.

Every result carries UnixBench's RESULT in its own unit, ``loops_per_s``
(spawn, execl: lps) or ``KB_per_s`` (file_copy: KBps; :func:`unixbench_metric`
names it), and ``index`` = RESULT / baseline x 10 with UnixBench's
baselines; :func:`index` gives the geometric-mean index of a run, so that
numbers compare with published UnixBench reports.
"""

from __future__ import annotations

import errno
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from memlab import chart
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_choice, check_int, check_number, coerce_fields
from memlab.grid import Sweep
from memlab.measure import Measurement
from memlab.units import format_bytes, format_number

__all__ = [
    "FAMILY",
    "FILE_COPY_PRESETS",
    "SystemParams",
    "TESTS",
    "UNIXBENCH_TESTS",
    "UnixBenchTest",
    "execl",
    "headline",
    "table",
    "file_copy",
    "helper_path",
    "index",
    "index_by_copies",
    "report",
    "run",
    "spawn",
    "unixbench_index",
    "unixbench_metric",
    "unixbench_sweep",
    "unixbench_test",
]

TESTS = ("spawn", "execl", "file_copy")
MAX_COPIES = 256
MAX_BUFFER_BYTES = 16 << 20
MAX_BLOCKS = 16 << 20
HELPER_NAME = "memlab_system_helper"


@dataclass(frozen=True)
class UnixBenchTest:
    """One test of UnixBench's index: its program, title, parameters and baseline."""

    name: str
    title: str
    test: str
    buffer_bytes: int | None
    max_blocks: int | None
    baseline: float
    unit: str


UNIXBENCH_TESTS: dict[str, UnixBenchTest] = {
    t.name: t
    for t in (
        UnixBenchTest("execl", "Execl Throughput", "execl", None, None, 43.0, "lps"),
        UnixBenchTest("fstime", "File Copy 1024 bufsize 2000 maxblocks", "file_copy", 1024, 2000, 3960.0, "KBps"),
        UnixBenchTest("fsbuffer", "File Copy 256 bufsize 500 maxblocks", "file_copy", 256, 500, 1655.0, "KBps"),
        UnixBenchTest("fsdisk", "File Copy 4096 bufsize 8000 maxblocks", "file_copy", 4096, 8000, 5800.0, "KBps"),
        UnixBenchTest("spawn", "Process Creation", "spawn", None, None, 126.0, "lps"),
    )
}

#: UnixBench's three file-copy cases by program name: buffer_bytes and max_blocks.
FILE_COPY_PRESETS: dict[str, dict[str, int]] = {
    t.name: {"buffer_bytes": t.buffer_bytes, "max_blocks": t.max_blocks}
    for t in UNIXBENCH_TESTS.values()
    if t.test == "file_copy"
}


@dataclass(frozen=True)
class SystemParams:
    """One UnixBench system test.

    ``test``: spawn, execl or file_copy. ``duration_s``: length of one sample.
    ``iterations``: > 0 runs exactly that many loops per copy instead.
    ``copies``: parallel worker processes (UnixBench's -c). ``buffer_bytes``
    (bytes) and ``max_blocks`` (KiB of the file): file_copy only.
    ``directory``: where file_copy's two files per copy live ("" = the system
    temporary directory); they are unnamed and vanish when the run ends.
    """

    test: str = "spawn"
    duration_s: float = 1.0
    copies: int = 1
    iterations: int = 0
    buffer_bytes: int = 1024
    max_blocks: int = 2000
    directory: str = ""

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_choice("test", self.test, TESTS)
        check_number("duration_s", self.duration_s, 0.0, 86400.0, exclusive_minimum=True)
        if self.duration_s < 1e-3:
            raise ValueError(f"duration_s={self.duration_s:g} is below the minimum 0.001")
        check_int("copies", self.copies, 1, MAX_COPIES)
        check_int("iterations", self.iterations, 0, 1 << 40)
        check_int("buffer_bytes", self.buffer_bytes, 1, MAX_BUFFER_BYTES)
        check_int("max_blocks", self.max_blocks, 1, MAX_BLOCKS)
        if self.buffer_bytes > self.max_blocks * 1024:
            raise ValueError(
                f"buffer_bytes={self.buffer_bytes} is above the file size "
                f"max_blocks x 1024 = {self.max_blocks * 1024} bytes"
            )
        if not isinstance(self.directory, (str, os.PathLike)):
            raise ValueError(f"directory={self.directory!r} must be a path")
        if isinstance(self.directory, os.PathLike):
            object.__setattr__(self, "directory", os.fspath(self.directory))


def helper_path() -> Path:
    """Path of the installed helper program that runs the spawn and execl loops.

    It is compiled by ``pip install`` (setup.py's build_ext) into
    ``memlab/_bin/``; FileNotFoundError says how to get it when it is missing.

    >>> helper_path().name
    'memlab_system_helper'
    """
    path = Path(__file__).resolve().parent / "_bin" / HELPER_NAME
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            errno.ENOENT,
            f"memlab's helper program is missing or not executable; it is built with the "
            f"package: reinstall memlab (pip install . or pip install -e .)",
            str(path),
        )
    return path


def _path_bytes(path: str) -> bytes:
    return os.fsencode(path) + b"\0"


def _to_core(params: SystemParams) -> dict[str, Any]:
    config = {
        "test": params.test,
        "duration_s": float(params.duration_s),
        "iterations": params.iterations,
        "copies": params.copies,
        "buffer_bytes": params.buffer_bytes,
        "max_blocks": params.max_blocks,
        "directory": b"\0",
        "helper": b"\0",
    }
    if params.test == "file_copy":
        config["directory"] = _path_bytes(os.path.abspath(params.directory or tempfile.gettempdir()))
    else:
        config["helper"] = _path_bytes(str(helper_path()))
    return config


def unixbench_test(params: SystemParams | Mapping[str, Any]) -> UnixBenchTest | None:
    """The UnixBench test these parameters reproduce (None: no UnixBench baseline).

    >>> unixbench_test({"test": "file_copy", "buffer_bytes": 256, "max_blocks": 500}).title
    'File Copy 256 bufsize 500 maxblocks'
    """
    get = params.get if isinstance(params, Mapping) else lambda key: getattr(params, key)
    for t in UNIXBENCH_TESTS.values():
        if t.test != get("test"):
            continue
        if t.test != "file_copy" or (get("buffer_bytes"), get("max_blocks")) == (t.buffer_bytes, t.max_blocks):
            return t
    return None


def unixbench_metric(test: str, per_cpu_s: bool = False) -> str:
    """The metric holding UnixBench's RESULT of a test: ``KB_per_s`` for file_copy
    (KBps), ``loops_per_s`` otherwise (lps); with ``per_cpu_s`` the same per CPU
    second of the workers (``KB_per_cpu_s``, ``loops_per_cpu_s``).

    >>> unixbench_metric("file_copy"), unixbench_metric("spawn", per_cpu_s=True)
    ('KB_per_s', 'loops_per_cpu_s')
    """
    check_choice("test", test, TESTS)
    unit = "KB" if test == "file_copy" else "loops"
    return f"{unit}_per_cpu_s" if per_cpu_s else f"{unit}_per_s"


def _derive(params: SystemParams, values: dict[str, float]) -> dict[str, float]:
    derived: dict[str, float] = {}
    if params.test == "file_copy":
        derived["KB_per_s"] = values.get("GB_per_s", 0.0) * 1e9 / 1024
        if "loops_per_cpu_s" in values:
            # per CPU second of the workers: steadier on a busy machine
            derived["KB_per_cpu_s"] = values["loops_per_cpu_s"] * params.buffer_bytes / 1024
    elif params.test == "execl":
        derived["execs_per_s"] = values.get("loops_per_s", 0.0)
    test = unixbench_test(params)
    if test is not None:
        rate = derived.get("KB_per_s", values.get("loops_per_s", 0.0))
        derived["index"] = rate / test.baseline * 10
    return derived


def run(params: SystemParams | dict | None = None, **options: Any) -> Measurement:
    """Measure one system test: ``loops_per_s`` (and ``KB_per_s`` for file_copy) and UnixBench's ``index``.

    >>> m = run(test="spawn", iterations=20, repeat=1, warmup=0)
    >>> m.median("children_reaped")
    20.0
    """
    return FAMILY.run(params, **options)


def spawn(duration_s: float = 1.0, copies: int = 1, **options: Any) -> Measurement:
    """Process creation: fork + child _exit + wait in a loop, in loops per second.

    ``loops_per_s`` (UnixBench's lps) are the loops of all copies over their
    mean elapsed time; ``index`` scores it against UnixBench's 126.0 lps.
    Counters are off unless ``counters=True``: inherited perf events are
    copied at every fork and summed at every exit, which slows the very
    loop measured (by 10-40 % here).

    >>> m = spawn(duration_s=0.2, repeat=1, warmup=0)
    >>> m.median("loops_per_s") > 0
    True
    """
    options.setdefault("counters", False)
    return FAMILY.run({"test": "spawn", "duration_s": duration_s, "copies": copies}, **options)


def execl(duration_s: float = 1.0, copies: int = 1, **options: Any) -> Measurement:
    """execl throughput: a helper that re-executes itself; execs per second.

    ``execs_per_s`` (= ``loops_per_s``, UnixBench's lps) counts the execs of all
    copies; ``index`` scores it against UnixBench's 43.0 lps. Counters are
    off unless ``counters=True``, as for :func:`spawn`.

    >>> m = execl(duration_s=0.2, repeat=1, warmup=0)
    >>> m.median("execs_per_s") > 0
    True
    """
    options.setdefault("counters", False)
    return FAMILY.run({"test": "execl", "duration_s": duration_s, "copies": copies}, **options)


def file_copy(
    buffer_bytes: int | None = None,
    max_blocks: int | None = None,
    duration_s: float = 1.0,
    copies: int = 1,
    directory: str | os.PathLike | None = None,
    *,
    preset: str | None = None,
    **options: Any,
) -> Measurement:
    """fstime's copy test: read buffer_bytes chunks of a max_blocks KiB file and
    write them to a second file for duration_s; KB per second (``KB_per_s``).

    ``preset`` picks UnixBench's cases: "fsbuffer" (256/500), "fstime"
    (1024/2000, the default) or "fsdisk" (4096/8000). The files are created
    in ``directory`` (default: the system temporary directory), unnamed, so
    none is left behind whatever happens; an unwritable directory or a full
    disk raises OSError.

    >>> m = file_copy(preset="fsbuffer", duration_s=0.2, repeat=1, warmup=0)
    >>> m.median("mismatched_bytes")
    0.0
    """
    sizes = dict(FILE_COPY_PRESETS["fstime"])
    if preset is not None:
        check_choice("preset", preset, tuple(FILE_COPY_PRESETS))
        sizes = dict(FILE_COPY_PRESETS[preset])
    if buffer_bytes is not None:
        sizes["buffer_bytes"] = buffer_bytes
    if max_blocks is not None:
        sizes["max_blocks"] = max_blocks
    point = {"test": "file_copy", "duration_s": duration_s, "copies": copies, **sizes}
    point["directory"] = "" if directory is None else os.fspath(directory)
    return FAMILY.run(point, **options)


# ---- UnixBench's index ------------------------------------------------------


def _rows(data: Any) -> list[Mapping[str, Any]]:
    if isinstance(data, Measurement):
        return [data.to_row()]
    rows = getattr(data, "rows", data)
    out = []
    for row in rows:
        out.append(row.to_row() if isinstance(row, Measurement) else row)
    return out


def _scores(data: Any) -> dict[int, dict[str, list[float]]]:
    """copies -> UnixBench test name -> index values of the rows."""
    scores: dict[int, dict[str, list[float]]] = {}
    for row in _rows(data):
        if row.get("family", "system") != "system":
            continue
        test = unixbench_test(row)
        value = row.get("index")
        if test is None or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            continue
        scores.setdefault(int(row["copies"]), {}).setdefault(test.name, []).append(float(value))
    return scores


def _geometric_mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def index_by_copies(data: Any) -> dict[int, float]:
    """UnixBench's index of a run for each number of copies in it.

    ``data``: a Dataset, rows, or Measurements of the system family. Each
    UnixBench test's index (the geometric mean when a test appears more than
    once) enters one geometric mean, as UnixBench's "System Benchmarks
    Index Score" does; tests missing from the run are left out (a partial
    index, as UnixBench prints when run on a subset).

    >>> index_by_copies([{"family": "system", "test": "spawn", "copies": 1, "index": 400.0},
    ...                  {"family": "system", "test": "execl", "copies": 1, "index": 100.0}])
    {1: 200.0}
    """
    return {
        copies: _geometric_mean(_geometric_mean(values) for values in tests.values())
        for copies, tests in sorted(_scores(data).items())
    }


def index(data: Any, copies: int | None = None) -> float:
    """The geometric-mean UnixBench index of a run (one number of copies).

    ``copies`` selects the run when the data holds several (e.g. 1 copy and
    one per CPU); ValueError when it is ambiguous or nothing has an index.

    >>> index([{"family": "system", "test": "spawn", "copies": 1, "index": 400.0},
    ...        {"family": "system", "test": "file_copy", "buffer_bytes": 256,
    ...         "max_blocks": 500, "copies": 1, "index": 900.0}])
    600.0
    """
    by_copies = index_by_copies(data)
    if not by_copies:
        raise ValueError("no row of the system family with a UnixBench index in the data")
    if copies is None:
        if len(by_copies) > 1:
            raise ValueError(
                f"the data holds runs with copies={sorted(by_copies)}: pass copies= to choose one"
            )
        return next(iter(by_copies.values()))
    if copies not in by_copies:
        raise ValueError(f"copies={copies} is not in the data (it has copies={sorted(by_copies)})")
    return by_copies[copies]


def report(data: Any) -> str:
    """UnixBench's summary table (BASELINE, RESULT, INDEX) for each run in data.

    >>> print(report([{"family": "system", "test": "spawn", "copies": 1,
    ...                "loops_per_s": 5040.0, "index": 400.0}]))  # doctest: +NORMALIZE_WHITESPACE
    1 copy
    System Benchmarks Partial Index              BASELINE       RESULT    INDEX
    Process Creation                                126.0       5040.0    400.0
                                                                        ========
    System Benchmarks Index Score (Partial Only)                          400.0
    """
    lines: list[str] = []
    rows = [r for r in _rows(data) if r.get("family", "system") == "system"]
    for copies, score in index_by_copies(rows).items():
        if lines:
            lines.append("")
        lines.append(f"{copies} cop{'y' if copies == 1 else 'ies'}")
        lines.append(f"{'System Benchmarks Partial Index':<40}{'BASELINE':>12}{'RESULT':>13}{'INDEX':>9}")
        for test in UNIXBENCH_TESTS.values():
            mine = [r for r in rows if int(r["copies"]) == copies and unixbench_test(r) == test
                    and isinstance(r.get("index"), (int, float)) and math.isfinite(r["index"])]
            if not mine:
                continue
            result = _geometric_mean(float(r[unixbench_metric(test.test)]) for r in mine)
            test_index = _geometric_mean(float(r["index"]) for r in mine)
            lines.append(f"{test.title:<40}{test.baseline:>12.1f}{result:>13.1f}{test_index:>9.1f}")
        lines.append(f"{'':<65}{'========':>9}")
        lines.append(f"{'System Benchmarks Index Score (Partial Only)':<65}{score:>9.1f}")
    return "\n".join(lines)


def unixbench_sweep(quick: bool = False) -> Sweep:
    """Every UnixBench system test with 1 copy and with one copy per CPU (UnixBench's default
    runs): 30 s per test and 3 repetitions, as UnixBench; ``quick``: 0.5 s and 2.

    ``experiments/unixbench.py`` runs it and prints UnixBench's summary table.

    >>> [p["copies"] for p in unixbench_sweep(quick=True).points][:1]
    [1]
    """
    cpus = len(os.sched_getaffinity(0))
    duration = 0.5 if quick else 30.0
    points = []
    for copies in ([1, cpus] if cpus > 1 else [1]):
        for test in UNIXBENCH_TESTS.values():
            point = {"test": test.test, "duration_s": duration, "copies": copies}
            if test.test == "file_copy":
                point.update(buffer_bytes=test.buffer_bytes, max_blocks=test.max_blocks)
            points.append(point)
    return Sweep(
        name="unixbench_quick" if quick else "unixbench",
        family="system",
        points=points,
        repeat=2 if quick else 3,  # 3: UnixBench's "short" iteration count for these tests
        warmup=0,
        description="UnixBench system tests and index, 1 copy and one copy per CPU",
        # inherited perf counters slow fork/exec, the very thing measured
        options={"counters": False},
    )


def _quick_sweep() -> Sweep:
    points = [
        {"test": t.test, "duration_s": 0.5, "copies": 1,
         **({"buffer_bytes": t.buffer_bytes, "max_blocks": t.max_blocks} if t.test == "file_copy" else {})}
        for t in UNIXBENCH_TESTS.values()
    ]
    return Sweep(name="quick", family="system", points=points, repeat=2, warmup=0,
                 options={"counters": False})


# ---- the standard figure -----------------------------------------------------


def unixbench_index(row: Mapping[str, Any]) -> tuple[float, float, str]:
    """(result, baseline, unit) of a system row, by UnixBench's rules: INDEX = result / baseline * 10.

    The result is the row's ``loops_per_s`` (spawn, execl) or ``KB_per_s``
    (file_copy); the baseline is UnixBench's for the same test, buffer size and
    file size (NaN when UnixBench has none).

    >>> unixbench_index({"test": "execl", "loops_per_s": 430.0})
    (430.0, 43.0, 'lps')
    """
    test = unixbench_test(row)
    unit = test.unit if test else ("KBps" if row.get("test") == "file_copy" else "lps")
    baseline = test.baseline if test else math.nan
    name = "KB_per_s" if unit == "KBps" else "loops_per_s"
    return chart.number(row.get(name)), baseline, unit


def _index_lines(ds: Dataset) -> tuple[list[list[str]], float]:
    """Each test's line of UnixBench's index table (name, result with its unit, baseline, index) and the score."""
    if not ds.rows:
        raise ValueError("the dataset has no rows")
    lines = []
    indexes = []
    for row in ds.rows:
        result, baseline, unit = unixbench_index(row)
        score = chart.number(row.get("index"))
        if not math.isfinite(score) and math.isfinite(result) and math.isfinite(baseline):
            score = result / baseline * 10.0
        if math.isfinite(score) and score > 0:
            indexes.append(score)
        name = str(row.get("test"))
        if row.get("test") == "file_copy":
            size = row.get("buffer_bytes")
            shown = format_bytes(size) if isinstance(size, (int, float)) and not isinstance(size, bool) else size
            name += f" ({shown} buffer, {row.get('max_blocks')} KiB file)"
        if chart.finite(row.get("copies")) and row.get("copies") != 1:
            name += f" ({row['copies']} copies)"
        low, high = (chart.number(row.get(f"{n}_{s}")) for n in [_result_name(row)] for s in ("min", "max"))
        spread = f"{format_number(low)} … {format_number(high)}" if math.isfinite(low) and math.isfinite(high) else "-"
        lines.append([name, f"{format_number(result)} {unit}", spread, f"{format_number(baseline)} {unit}",
                      format_number(score)])
    total = _geometric_mean(indexes) if indexes else math.nan
    return lines, total


def _result_name(row: Mapping[str, Any]) -> str:
    return "KB_per_s" if row.get("test") == "file_copy" else "loops_per_s"


def table(data: Dataset | str) -> tuple[list[str], list[list[str]]]:
    """UnixBench's index table, with units: each test's result (median and range), UnixBench's
    baseline for it and INDEX = result / baseline x 10; the last line is the score, their geometric mean.

    >>> header, lines = table("memlab-tour/system.csv")   # doctest: +SKIP
    """
    lines, total = _index_lines(chart.as_dataset(data))
    lines.append(["score (geometric mean of the indexes)", "", "", "", format_number(total)])
    return ["test", "result (median)", "min … max", "UnixBench baseline", "index"], lines


def headline(data: Dataset | str) -> str:
    """The UnixBench score of the dataset as one sentence.

    >>> headline("memlab-tour/system.csv")   # doctest: +SKIP
    'UnixBench index score 412.3 (geometric mean of 5 tests; UnixBench's own machine scores 10).'
    """
    lines, total = _index_lines(chart.as_dataset(data))
    return (f"UnixBench index score {format_number(total)} (geometric mean of {len(lines)} tests; "
            "UnixBench's baseline machine scores 10).")


def _sample_seconds(params: SystemParams, target_seconds: float) -> float:
    """How long one sample lasts: ``duration_s``, or a guess of 1 ms per loop with ``iterations``."""
    return params.duration_s if params.iterations == 0 else params.iterations * 1e-3


def copies_on_cpu(params: SystemParams) -> tuple[OnCpu, ...]:
    """Each copy loops on its system calls (the kernel's time counts as its CPU time); spawn's
    parent waits while its child starts and exits, so a spawn copy is counted on for half
    (``Family.on_cpu``)."""
    share = 0.5 if params.test == "spawn" else 1.0
    return tuple(OnCpu(f"copy {index} ({params.test})", share) for index in range(params.copies))


FAMILY = Family(
    name="system",
    params_type=SystemParams,
    core="system",
    to_core=_to_core,
    unit="loop",
    primary_metric="loops_per_s",
    derive=_derive,
    sweeps={
        "quick": _quick_sweep,
        "unixbench": unixbench_sweep,
        "unixbench_quick": lambda: unixbench_sweep(quick=True),
    },
    description="UnixBench's process creation, execl and file copy, with its index",
    default_repeat=3,
    default_warmup=1,
    figure=None,
    headline=headline,
    table=table,
    caption="UnixBench's process creation, execl and file copy, scored as UnixBench does: "
            "index = result / baseline x 10, the score their geometric mean.",
    report_columns=("KB_per_s", "index"),
    sample_seconds=_sample_seconds,
    on_cpu=copies_on_cpu,
)
