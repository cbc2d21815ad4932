"""The `memlab` command: one argparse tree with every subcommand.

``memlab info | check | run | sweep | merge | export | compare | plot | report | tour | reproduce`` (and
``python -m memlab ...``); an experiment script's command line
(:func:`script_main`) is ``memlab sweep`` applied to the script's sweeps.

Exit status, one rule for every subcommand (:data:`EXIT_STATUS`):

- 0: done;
- 2: a bad argument or an input that cannot be read (a missing or corrupt
  dataset, an output path memlab will not write), said in one line, before
  anything is measured;
- 1: the kernel refused, a measurement failed or a write failed once the
  work was done (a full disk) (and, for ``compare``, a
  significant regression exists; for ``tour``, a family failed; for
  ``reproduce --check``, a claim not reproduced);
- 130: interrupted by Ctrl-C (the rows measured so far are on disk).

No subcommand prints a traceback for these; an unexpected error (a bug) is
one line too, with ``MEMLAB_DEBUG=1`` showing its traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import re
import shlex
import shutil
import signal
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from memlab import catalogue, export, machine, machine_model, measure, plot, registry, userkernel
from memlab._core import build_info
from memlab._version import __version__
from memlab.chart import outcome_note, require_matplotlib
from memlab.check import TUNABLE_SETTINGS, reset, tune
from memlab.check import check as machine_check
from memlab.compare import compare, compare_machines, load_dataset, parse_fraction
from memlab.conditions import WARNING_PREFIX, ConditionsWarning, MachineWarning, MemlabWarning
from memlab.conditions import warn as memlab_warn
from memlab.dataset import Dataset, DuplicatePointError, check_compatible, machine_key, paths_for
from memlab.family import Family, ParamSpec
from memlab.files import atomic_write, check_output_directory, check_output_file, check_output_file_in_new_directory
from memlab.grid import DEFAULT_RUNS, MAX_RUNS, Sweep, as_sweeps, parse_shard, shard_points
from memlab.measure import MAX_REPEAT, MAX_WARMUP, Measurement
from memlab.report import as_items, write_report
from memlab.reproduce import listing, reproduce
from memlab.runner import Run
from memlab.sweep import (
    estimate_seconds,
    output_path,
    progress_bar,
    progress_enabled,
    resolve,
    run_sweep,
    script_sweeps,
    sweep_metadata,
)
from memlab.stability import stability
from memlab.tour import REDUCED_MAX_POINTS, tour
from memlab.units import format_duration, suggest

__all__ = [
    "EXIT_STATUS",
    "UsageError",
    "build_parser",
    "main",
    "parse_assignment",
    "parse_value",
    "script_main",
]

#: The exit statuses of every subcommand (see the module's docstring).
EXIT_STATUS = {"ok": 0, "failed": 1, "usage": 2, "interrupted": 130, "terminated": 143}
#: Largest exponent b of ``a^b`` with a >= 2 worth computing: 2^64 is beyond every parameter.
MAX_POWER_BITS = 64
#: The resolution bounds of ``memlab plot --dpi`` (1200 dpi is print quality; 10000 made a 12 GB image).
DPI_RANGE = (10, 1200)

_SIZE_SUFFIXES = {
    "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
}

SweepFactory = Callable[..., "Sweep | Sequence[Sweep]"]


class UsageError(Exception):
    """A command-line mistake: exit 2 with this message."""


# --------------------------------------------------------------------------
# key=value arguments


def parse_value(text: str) -> Any:
    """'42' -> 42, '1.5' -> 1.5, '64MiB' -> 67108864, '2^20' -> 1048576, 'true' -> True.

    Numbers are written with ASCII digits ('１０' is a UsageError, not 10),
    and ``a^b`` is refused before it is computed when the result would
    exceed 64 bits (``10^100000000`` would take minutes).

    >>> parse_value("64MiB"), parse_value("2^10"), parse_value("random")
    (67108864, 1024, 'random')
    """
    if any(c.isdigit() and not c.isascii() for c in text):
        raise UsageError(f"{text!r} holds non-ASCII digits: write numbers with the digits 0-9")
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    power = re.fullmatch(r"(\d+)\^(\d+)", lowered)
    if power:
        return _power(power.group(1), power.group(2))
    sized = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b?)", lowered)
    if sized and sized.group(2) in _SIZE_SUFFIXES:
        value = float(sized.group(1)) * _SIZE_SUFFIXES[sized.group(2)]
        return int(value) if value.is_integer() else value
    for convert in (int, float):
        try:
            value = convert(text)
        except ValueError:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            break
        return value
    return text


def _power(base_text: str, exponent_text: str) -> int:
    """a^b, refused (UsageError) before computing when it exceeds 64 bits."""
    if len(base_text) > 20 or len(exponent_text) > 20:
        raise UsageError(f"{base_text}^{exponent_text} is beyond 64 bits")
    base, exponent = int(base_text), int(exponent_text)
    if base >= 2 and exponent * math.log2(base) > MAX_POWER_BITS:
        raise UsageError(f"{base}^{exponent} is beyond 64 bits (at most 2^{MAX_POWER_BITS}); "
                         "no parameter takes a value that large")
    return base**exponent


def _bounded_int(name: str, minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: an ASCII decimal integer in [minimum, maximum]."""

    def convert(text: str) -> int:
        if not re.fullmatch(r"[-+]?[0-9]+", text.strip(), re.ASCII):
            raise argparse.ArgumentTypeError(f"{name}={text!r} must be an integer (digits 0-9)")
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name}={value} is below the minimum {minimum}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{name}={value} is above the maximum {maximum}")
        return value

    convert.__name__ = name
    return convert


def parse_assignment(text: str) -> tuple[str, Any]:
    """'key=value' -> (key, parsed value); UsageError otherwise.

    >>> parse_assignment("working_set_bytes=1MiB")
    ('working_set_bytes', 1048576)
    """
    key, sep, value = text.partition("=")
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise UsageError(f"bad argument {text!r}: expected key=value")
    if value == "":
        raise UsageError(f"bad argument {text!r}: {key} has no value")
    return key, parse_value(value)


def typed_assignments(params_type: type, texts: Sequence[str]) -> dict[str, Any]:
    """Parse key=value words; values of str-typed parameters stay text ('4k' is a page kind)."""
    field_types = {f.name: str(f.type) for f in dataclasses.fields(params_type)}
    result: dict[str, Any] = {}
    for text in texts:
        key, value = parse_assignment(text)
        if field_types.get(key) == "str":
            value = text.partition("=")[2]
        result[key] = value
    return result


# --------------------------------------------------------------------------
# the tree


class _Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped subcommand or family name."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            if action.dest == "family":
                try:
                    registry.family(value)
                except ValueError as error:
                    raise argparse.ArgumentError(None, str(error)) from None
            choices = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{suggest(value, action.choices)} (choose from {choices})")


class _PrintInclude(argparse.Action):
    """``memlab --include``: the directory of memlab_kernel.h (as ``python -c 'import numpy; print(numpy.get_include())'``)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(userkernel.include_dir())
        parser.exit(0)


def _load_kernel_file(argv: list[str]) -> list[str]:
    """``memlab run ./probe.c ...``: build and register the kernel file, so that the parser knows its family;
    argv with the file replaced by the family's name (and --isolate unless --in-process is given)."""
    if len(argv) < 2 or argv[0] != "run" or not userkernel.is_kernel_path(argv[1]):
        return argv
    fam = userkernel.kernel_family(argv[1])
    return ["run", fam.name, *argv[2:]]


def version_text() -> str:
    """``memlab --version``: the version, the Python and how the C core was built.

    >>> version_text().startswith("memlab ")
    True
    """
    info = build_info()
    return (f"memlab {__version__} (Python {sys.version.split()[0]}; core built by "
            f"{machine.compiler_name(info)} with {info.get('cflags', '?')})")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``memlab`` and its subcommands, each handler in ``handler``."""
    parser = _Parser(prog="memlab", description="memory and kernel experiments")
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print memlab's version and how its C core was built")
    parser.add_argument("--include", action=_PrintInclude,
                        help="print the directory of memlab_kernel.h, for a compiler's -I (docs/own-kernel.md)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    info = sub.add_parser("info", help="machine facts, counters and core clock",
                          description="print the machine's facts, the counters it gives and the core clock")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--no-calibrate", action="store_true", help="skip the clock measurement")
    info.set_defaults(handler=cmd_info)

    check = sub.add_parser(
        "check", help="is this machine fit to measure? (governor, boost, load, steal, THP, ...)",
        description="Report what makes numbers move on this machine, each with a verdict and "
        "the command that fixes it; --tune/--reset apply and undo the settings memlab can "
        "restore exactly (root). Exit status: 0, or 1 when --tune/--reset fails.",
    )
    check.add_argument("--json", action="store_true", help="print facts and findings as JSON")
    check.add_argument("--working-set", metavar="BYTES",
                       help="largest working set you plan to measure, e.g. 8GiB "
                       "(judged against the available memory)")
    check.add_argument("--steal-window", type=_ascii_float, default=0.25, metavar="SECONDS",
                       help="how long to keep a CPU busy while watching steal time (default 0.25)")
    action = check.add_mutually_exclusive_group()
    action.add_argument("--tune", action="store_true",
                        help="set the performance governor, boost off, perf sample rate 1 "
                        "(root; saves the previous values)")
    action.add_argument("--reset", action="store_true", help="restore what --tune replaced (root)")
    check.add_argument("--tune-setting", action="append", metavar="NAME",
                       help="tune only this setting: governor, boost or perf_sample_rate (repeatable)")
    check.add_argument("--state", metavar="FILE",
                       help="where --tune keeps the replaced values (default /run/memlab/tuned.json)")
    check.add_argument("--stability", action="store_true",
                       help="also a short A/A (a few seconds): two chase points measured twice in runs, "
                       "how many flipped verdict and how far their runs disagree")
    check.add_argument("--stability-runs", type=_bounded_int("--stability-runs", 2, 50), default=3,
                       metavar="R", help="runs a side of the A/A (2..50, default 3)")
    check.set_defaults(handler=cmd_check)

    _run_parser(sub)

    sweep = sub.add_parser(
        "sweep", help="run a named sweep or an experiment script",
        description="run a named sweep (memlab sweep --list shows them) or an experiment script's sweeps; "
                    "each row is written as soon as it is measured, and a re-run resumes",
    )
    sweep.add_argument("name", nargs="?", help="family.sweep, a sweep name, or a script path")
    sweep.add_argument("--quick", action="store_true", help="the script's short variant")
    sweep.add_argument("--list", action="store_true",
                       help="list the named sweeps: points, estimated duration, description")
    sweep.add_argument("--shard", help="run only shard i/n of the points")
    sweep.add_argument("--no-resume", action="store_true",
                       help="start a fresh dataset (an existing one is refused unless --force)")
    sweep.add_argument("--force", action="store_true",
                       help="with --no-resume: move an existing dataset aside (NAME.replaced-TIME.csv)")
    _progress_options(sweep)
    _measure_options(sweep, "CSV path (one sweep) or folder (several); default results/")
    _runs_options(sweep, f"runs per point, each a fresh setup, taken in rounds (1..{MAX_RUNS}; "
                         f"default the sweep's, else {DEFAULT_RUNS})", processes=True)
    fleet_options = sweep.add_argument_group(
        "fleet (docs/fleet.md; needs pip install 'memlab[fleet]')",
        "measure on the workers of a Dask cluster that offer the resource memlab=1")
    fleet_options.add_argument("--scheduler", metavar="ADDRESS",
                               help="the Dask scheduler, e.g. tcp://HOST:8786")
    fleet_mode = fleet_options.add_mutually_exclusive_group()
    fleet_mode.add_argument("--each-host", action="store_true",
                            help="measure the whole sweep on every host (rows name their host)")
    fleet_mode.add_argument("--spread", action="store_true",
                            help="split the points over hosts whose machines agree on CPU model, "
                            "CPU count, kernel and memory (refused otherwise)")
    sweep.set_defaults(handler=cmd_sweep)

    merge = sub.add_parser(
        "merge", help="merge datasets (shards, hosts) into one",
        description="Merge datasets of one sweep (shards of a Slurm job array, the hosts of a fleet) "
        "into one. The same point measured twice by the same machine is an error unless --dedupe.")
    merge.add_argument("out", help="the merged dataset (.csv)")
    merge.add_argument("datasets", nargs="+", metavar="DATASET", help="datasets (.csv, .json or stem)")
    merge.add_argument("--dedupe", action="store_true", help="keep the first row of a point measured twice")
    merge.set_defaults(handler=cmd_merge)

    export_cmd = sub.add_parser(
        "export", help="write a dataset as Parquet, long-form CSV or JSON",
        description="Write a dataset in a format other tools read: parquet (the rows with native types "
        "and samples as lists; needs pip install 'memlab[parquet]'), csv-long (one row per sample, "
        "a dataset of its own) or json (one strict JSON document). Every export carries the metadata "
        "and the columns as a Frictionless Table Schema (docs/dataset.md, \"Exports\").")
    export_cmd.add_argument("dataset", help="a dataset (.csv, .json or stem)")
    export_cmd.add_argument("--format", required=True, choices=tuple(export.FORMATS),
                            help="parquet, csv-long or json")
    export_cmd.add_argument("--out", help="the file to write (default: beside the dataset, "
                            "DATASET.parquet, DATASET-long.csv, DATASET-export.json)")
    export_cmd.add_argument("--long", action="store_true",
                            help="parquet and json: one row per sample, as csv-long")
    export_cmd.set_defaults(handler=cmd_export)

    _compare_parser(sub)

    plot_cmd = sub.add_parser("plot", help="draw a dataset's standard figure",
                              description="draw a dataset's standard figure")
    plot_cmd.add_argument("dataset", help="a dataset (.csv, .json or stem)")
    plot_cmd.add_argument("-o", "--out", help="image file (.png, .svg, .pdf); default: DATASET.png")
    plot_cmd.add_argument("--dpi", type=_bounded_int("--dpi", *DPI_RANGE), default=120,
                          help=f"resolution of raster images ({DPI_RANGE[0]}..{DPI_RANGE[1]})")
    plot_cmd.set_defaults(handler=cmd_plot)

    report = sub.add_parser("report", help="write one self-contained HTML report",
                            description="write one self-contained HTML report of datasets")
    report.add_argument("datasets", nargs="+", metavar="DATASET", help="datasets (.csv, .json or stem)")
    report.add_argument("-o", "--out", default="report.html", help="the HTML file (default report.html)")
    report.add_argument("--title", default="memlab report", help="the report's heading")
    report.set_defaults(handler=cmd_report)

    tour_cmd = sub.add_parser(
        "tour", help="quick sweep of every family + report",
        description="run the quick sweep of every family and write one dataset per family plus report.html",
    )
    tour_cmd.add_argument("--out", default="memlab-tour", help="folder for the datasets and report.html")
    tour_cmd.add_argument("--reduced", action="store_true",
                          help=f"at most {REDUCED_MAX_POINTS} points per family, one repetition (for CI)")
    tour_cmd.add_argument("--family", action="append", metavar="NAME", help="only this family (repeatable)")
    tour_cmd.add_argument("--repeat", type=_bounded_int("--repeat", 1, MAX_REPEAT), help="repetitions per point")
    tour_cmd.add_argument("--cpu", type=_bounded_int("--cpu", 0, 1 << 20),
                          help="pin the measuring process to this CPU")
    tour_cmd.add_argument("--resume", action="store_true", help="keep rows already in --out")
    _progress_options(tour_cmd)
    tour_cmd.set_defaults(handler=cmd_tour)

    repro = sub.add_parser(
        "reproduce", help="re-measure every source figure here, beside the source's numbers, with verdicts",
        description="Run the catalogue of source items (Drepper's figures and tables, the pipe ladder, the "
                    "clearing patches, LWN's bulk allocation, UnixBench) on this machine: one dataset per "
                    "sweep in --out, and report.html with the source's numbers beside this machine's and a "
                    "verdict per claim (reproduced / not reproduced / not measurable here). Resumable. Exit "
                    "status 0 when it ran, whatever the verdicts; 1 when a sweep failed or, with --check, a "
                    "claim was not reproduced; 2 for a bad argument.",
    )
    repro.add_argument("items", nargs="*", metavar="ITEM",
                       help="items (fig3.15, pipes-ladder ...), sources (drepper, pipes, clearing, lwn-bulk, "
                            "unixbench) or families; default: all")
    repro.add_argument("--quick", action="store_true", help="the quick variant of every sweep (minutes)")
    repro.add_argument("--fixed", action="store_true",
                       help="the long fixed run: every point of the full sweeps in 3 runs of the sweep's own samples "
                            "(UnixBench's 30 s), the run a full run's verdicts are checked against (hours); its "
                            "datasets are named *-fixed.csv")
    repro.add_argument("--out", help="folder for the datasets, report.html and verdicts.json")
    repro.add_argument("--list", action="store_true", help="list the items with their estimated time")
    repro.add_argument("--check", action="store_true", help="exit 1 when a claim is not reproduced")
    repro.add_argument("--remeasure", action="store_true",
                       help="measure this machine's caches again instead of using the ones kept in --out "
                            "(hierarchy.json; measured anyway when the machine's fingerprint changed)")
    _progress_options(repro)
    repro.set_defaults(handler=cmd_reproduce)
    return parser


def _run_parser(sub) -> None:
    """``memlab run FAMILY key=value ...``: one sub-command per family, whose --help lists its parameters."""
    run = sub.add_parser(
        "run", help="measure one point: memlab run FAMILY key=value ... (or a kernel file: memlab run ./probe.c ...)",
        description="measure one point of a family, or of a C kernel file (FILE.c, docs/own-kernel.md); "
                    "`memlab run FAMILY --help` lists its parameters",
    )
    run.set_defaults(handler=cmd_run, family=None)
    families = run.add_subparsers(dest="family", metavar="FAMILY", parser_class=_Parser)
    for fam in registry.all_families().values():
        parser = families.add_parser(
            fam.name, help=fam.description, formatter_class=argparse.RawDescriptionHelpFormatter,
            description=textwrap.fill(f"memlab run {fam.name}: {fam.description}",
                                      max(60, min(110, shutil.get_terminal_size((100, 24)).columns)))
            if fam.description else None,
            epilog=params_help(fam),
        )
        parser.add_argument("assignments", nargs="*", metavar="key=value",
                            help="parameters (listed below); the others keep their defaults")
        _measure_options(parser, "write the dataset here (.csv)")
        _runs_options(parser, f"runs of the point, each a fresh setup (1..{MAX_RUNS}; default 1)")
        parser.add_argument("--json", action="store_true", help="print the row as JSON")
        _quiet_option(parser)
        if fam.prelude is not None:  # a kernel file's family
            parser.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                                help="measure in a worker process, where a crash of the kernel (SIGSEGV, "
                                     "abort) is a failed point and exit 1 (default: --isolate)")
        parser.set_defaults(handler=cmd_run)


def params_help(fam: Family, width: int | None = None) -> str:
    """The parameter table of ``memlab run FAMILY --help``: name, type, default, unit, allowed values
    and what the parameter does, all read from the family's params dataclass.

    >>> "budget_ns" in params_help(registry.family("calibrate"))
    True
    """
    specs: list[ParamSpec] = fam.describe_params()
    width = width or max(60, min(110, shutil.get_terminal_size((100, 24)).columns))
    header = ("name", "type", "default", "unit", "allowed")
    rows = [(s.name, s.type, s.default_text, s.unit or "-", s.allowed or "-") for s in specs]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    indent = sum(widths) + 2 * 5
    lines = [f"parameters of {fam.name} (key=value; sizes as 64MiB or 2^20, booleans as true/false):"]

    def line(cells) -> list[str]:
        head = "  " + "  ".join(c.ljust(w) for c, w in zip(cells[:4], widths)) + "  "
        wrapped = textwrap.wrap(cells[4], max(20, width - indent), break_on_hyphens=False) or [""]
        return [head + wrapped[0]] + [" " * indent + more for more in wrapped[1:]]

    lines += line(header)
    for spec, cells in zip(specs, rows):
        lines += line(cells)
        if spec.help:
            lines += textwrap.wrap(spec.help, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    unit = f"ns_per_{fam.unit}" if fam.unit else ""
    metric = fam.primary_metric or unit or "elapsed_ns"
    lines += ["", f"primary metric: {metric}.  Example: memlab run {fam.name} "
                  + " ".join(f"{s.name}={s.default_text}" for s in specs[:2] if s.default is not None)]
    return "\n".join(line.rstrip() for line in lines)


def _progress_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", dest="no_progress", action="store_true",
                        help="no progress bar (it is also off when stderr is not a terminal or notebook)")
    _quiet_option(parser)


def _quiet_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress bar and no warning line per disturbed point; the summary line of "
                             "what was flagged stays")


def _measure_options(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument("--out", help=out_help)
    parser.add_argument("--repeat", type=_bounded_int("--repeat", 1, MAX_REPEAT),
                        help=f"samples kept per run of a point (1..{MAX_REPEAT})")
    parser.add_argument("--warmup", type=_bounded_int("--warmup", 0, MAX_WARMUP),
                        help=f"warm-up repetitions per point, not kept (0..{MAX_WARMUP})")
    parser.add_argument("--cpu", type=_bounded_int("--cpu", 0, 1 << 20),
                        help="pin the measuring process to this CPU")


def _runs_options(parser: argparse.ArgumentParser, runs_help: str, processes: bool = False) -> None:
    parser.add_argument("--runs", type=_bounded_int("--runs", 1, MAX_RUNS), help=runs_help)
    if processes:
        parser.add_argument("--processes", action="store_true",
                            help="measure each run in a fresh Python worker process (memlab.worker)")


def _compare_parser(sub) -> None:
    parser = sub.add_parser(
        "compare", help="compare two datasets",
        description=(
            "Compare two memlab datasets point by point: ratio of medians with a "
            "confidence interval, Mann-Whitney U test on the raw samples, minimum "
            "effect size. Exit status: 0 no significant regression beyond --fail-above, "
            "1 at least one, 2 the datasets cannot be compared."
        ),
    )
    parser.add_argument("baseline", help="baseline dataset file")
    parser.add_argument("candidate", nargs="?",
                        help="candidate dataset file (with --by-machine: optional, merged with the first)")
    parser.add_argument("--by-machine", action="store_true",
                        help="compare the machines of the dataset(s) point by point, each against the "
                        "first by name (or --baseline-machine)")
    parser.add_argument("--baseline-machine", metavar="NAME",
                        help="with --by-machine: the machine the others are compared with")
    parser.add_argument("--metric", help="metric to compare (default: the baseline's primary metric)")
    parser.add_argument("--better", choices=("lower", "higher"),
                        help="whether lower or higher values are better (default: from the metric's name)")
    parser.add_argument("--threshold", default=None,
                        help="minimum effect size that counts as a change, e.g. 5%% "
                             "(default: --fail-above, else 5%%)")
    parser.add_argument("--fail-above", default=None,
                        help="exit 1 when a significant regression of at least this much exists "
                             "(default: the threshold)")
    parser.add_argument("--alpha", type=_ascii_float, default=0.05, help="significance level (default 0.05)")
    parser.add_argument("--confidence", type=_ascii_float, default=0.95,
                        help="confidence of the ratio interval (default 0.95)")
    parser.add_argument("--fail-on-noise", action="store_true",
                        help="also exit 1 when a point gets no verdict (inconclusive)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=cmd_compare)


# --------------------------------------------------------------------------
# measuring: info, run, sweep


def cmd_info(args: argparse.Namespace) -> int:
    """``memlab info``: the machine's facts, counters and measured core clock."""
    facts = machine.collect()
    if not args.no_calibrate:
        facts["core_clock"] = measure.core_ghz_detail()
    model = machine_model.core_model(facts)
    if args.json:
        print(json.dumps({**facts, "core_model": model.fields()}, indent=2, sort_keys=True, default=str))
    else:
        print(machine.format_facts(facts))
        print(machine_model.format_model(model))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``memlab check``: the machine's fitness report, or --tune / --reset (docs/check.md)."""
    if args.tune_setting and not args.tune:
        raise UsageError("--tune-setting needs --tune")
    if args.tune or args.reset:
        try:
            if args.tune:
                changes = tune(settings=args.tune_setting or TUNABLE_SETTINGS, state_path=args.state)
            else:
                changes = reset(state_path=args.state)
        except PermissionError as error:
            print(f"memlab check: {error}", file=sys.stderr)
            return 1
        if not changes:
            print("memlab check: nothing to reset (no saved values)")
        for change in changes:
            print(change)
        if args.tune and any(not c.skipped for c in changes):
            print(f"previous values saved; undo with: sudo memlab check --reset"
                  + (f" --state {args.state}" if args.state else ""))
        return 0
    planned = None
    if args.working_set is not None:
        planned = parse_value(args.working_set)
        if not isinstance(planned, int) or isinstance(planned, bool) or planned <= 0:
            raise UsageError(f"--working-set={args.working_set!r} must be a size such as 8GiB")
    report = machine_check(planned_bytes=planned, steal_window_seconds=args.steal_window)
    aa = stability(runs=args.stability_runs) if args.stability else None
    if args.json:
        facts = report.to_dict()
        if aa is not None:
            facts["stability"] = aa.to_dict()
        print(json.dumps(facts, indent=2, sort_keys=True, default=str))
    else:
        print(report.format())
        if aa is not None:
            print()
            print(aa.format())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """``memlab run FAMILY key=value ...``: one point, printed (and saved with --out).

    ``--out`` is checked before anything is measured: a new file, or a
    dataset of single runs of the same family and parameters that does not
    hold this point yet (the row is appended); anything else is exit 2.
    """
    if args.family is None:
        raise UsageError("memlab run needs a FAMILY (one of "
                         f"{', '.join(registry.all_families())}); `memlab run FAMILY --help` lists its parameters")
    fam = registry.family(args.family)
    assignments = typed_assignments(fam.params_type, args.assignments)
    params = dataclasses.asdict(fam.params(assignments))
    runs = args.runs or 1
    isolate = getattr(args, "isolate", False)  # a kernel file's family: in a worker process
    if not args.out and runs == 1:
        if isolate:
            measurements = [userkernel.run_isolated(fam, assignments, repeat=args.repeat, warmup=args.warmup,
                                                    cpu=args.cpu)]
        else:
            measurements = [fam.run(assignments, repeat=args.repeat, warmup=args.warmup, cpu=args.cpu)]
        rows = [measurements[0].to_row()]
    else:  # a one-point run (memlab.runner.Run): metadata, machine check, the rows tagged with their machine
        sweep = Sweep("run", fam.name, [params], repeat=args.repeat or fam.default_repeat,
                      warmup=fam.default_warmup if args.warmup is None else args.warmup, runs=runs)
        one = Run(sweep, args.out or None, cpu=args.cpu, processes=isolate)
        if args.out:
            _check_run_output(args.out, one, fam)
        measurements = []
        dataset = one.execute(progress=False, warn=lambda text: None, on_measurement=measurements.append)
        rows = dataset.rows[-(len(measurements) or runs):]
        if isolate:  # the worker processes handed back rows
            measurements = [userkernel.measurement_from_row(fam, row) for row in rows]
    for index, (measurement, row) in enumerate(zip(measurements, rows)):
        if args.json:
            print(json.dumps(row, default=str))
            continue
        if runs > 1:
            print(f"run {index + 1}/{runs}:")
        print(_summary(measurement))
    if not args.json and runs > 1:
        print(f"run spread (largest / smallest run median of {measurements[0].primary_metric}): "
              f"{rows[-1]['run_spread']:.3f}" + (" unstable" if rows[-1]["run_unstable"] else ""))
    if not args.json and args.out:
        print(f"{len(rows)} row{'' if len(rows) == 1 else 's'} -> {paths_for(args.out)[0]}")
    for measurement in measurements:
        if measurement.conditions_warning:
            memlab_warn(f"{measurement.family}: {measurement.conditions_warning}", ConditionsWarning)
    return 0


def _check_run_output(out: str, one: Run, fam: Any) -> None:
    """Refuse (ValueError) an --out that ``memlab run`` must not write, before measuring."""
    csv_path, json_path = paths_for(out)
    check_output_file_in_new_directory(csv_path, "--out", "--out's directory")
    check_output_file(json_path, "--out")
    if not os.path.lexists(csv_path):
        return
    existing = Dataset.load(csv_path)
    meta = sweep_metadata(one.sweep, fam, None, one.repeat, facts={})
    check_compatible(existing, {**meta, "sweep": existing.metadata.get("sweep", "run")}, csv_path, fam.defaults())
    if existing.metadata.get("sweep", "run") != "run":
        raise UsageError(
            f"{csv_path} holds the sweep {existing.metadata['sweep']!r}; memlab run adds points only to "
            "datasets of single runs: choose another --out"
        )
    if not one.plan().pending:
        raise UsageError(f"{csv_path} already holds this point; choose another --out")


def _summary(measurement: Measurement, width: int | None = None) -> str:
    """``memlab run``'s text: the parameters, one line per metric that varied over the samples
    (median, min, max), and the values every sample shared on one line of their own: a size
    the kernel granted or a count of elements is a fact of the point, not a measurement's spread.
    With one sample nothing tells the two apart, and every metric has its line.

    >>> m = Measurement("f", {"n": 1}, [{"ns_per_element": 1.0, "elements": 8.0},
    ...                  {"ns_per_element": 2.0, "elements": 8.0}], [], {}, "user", [], "ns_per_element")
    >>> print(_summary(m, width=80))
    f: n=1
      ns_per_element           median 1.5          min 1            max 2            (n=2)
      same in every sample: elements=8
    """
    width = width or max(60, min(110, shutil.get_terminal_size((100, 24)).columns))
    lines = [f"{measurement.family}: " + " ".join(f"{k}={v}" for k, v in measurement.params.items())]
    count = len(measurement.samples)
    constant = []
    for name, stat in measurement.stats.items():
        if name == "elapsed_ns" and name != measurement.primary_metric:
            continue
        if count > 1 and name != measurement.primary_metric and _same_in_every_sample(measurement, name):
            constant.append(f"{name}={stat['median']:.6g}")
            continue
        lines.append(
            f"  {name:<24} median {stat['median']:<12.6g} min {stat['min']:<12.6g} "
            f"max {stat['max']:<12.6g} (n={count})"
        )
    if constant:
        lines += textwrap.wrap("same in every sample: " + " ".join(constant), width, initial_indent="  ", subsequent_indent="    ",
                               break_on_hyphens=False)
    if measurement.counters:
        counters = measurement.to_row()
        present = {k[8:]: v for k, v in counters.items() if k.startswith("counter_")}
        if present:
            lines.append("  counters: " + ", ".join(f"{k}={v:.6g}" for k, v in present.items()))
    if measurement.counters_missing:
        lines.append(f"  missing counters: {', '.join(sorted(measurement.counters_missing))}")
    if measurement.facts:
        note = outcome_note(measurement.facts)
        lines.append("  asked and obtained: " + " ".join(f"{k}={v}" for k, v in measurement.facts.items())
                     + (f" ({note})" if note else ""))
    return "\n".join(lines)


def _same_in_every_sample(measurement: Measurement, name: str) -> bool:
    values = {sample[name] for sample in measurement.samples if name in sample}
    return len(values) == 1 and all(name in sample for sample in measurement.samples)


def cmd_sweep(args: argparse.Namespace) -> int:
    """``memlab sweep NAME``: run named sweeps or a script's sweeps into CSV files (resumable)."""
    script = getattr(args, "script", None)
    if args.list or (not args.name and script is None):
        print(sweep_listing())
        if args.list:
            return 0
        return _error("sweep", "name a sweep (listed above), family.sweep or a script path", 2)
    if script is not None:
        if args.name:
            raise UsageError(f"unexpected argument {args.name!r}: an experiment script names its own sweeps")
        sweeps = script_sweeps(script, args.quick)
    else:
        sweeps = resolve(args.name, quick=args.quick)
    if args.scheduler is None and (args.each_host or args.spread):
        raise UsageError(f"--{'each-host' if args.each_host else 'spread'} needs --scheduler ADDRESS")
    if args.scheduler is not None and args.processes:
        raise UsageError("--processes measures in worker processes on this machine; --scheduler's workers "
                         "measure on theirs (give one of them)")
    if args.scheduler is not None and not (args.each_host or args.spread):
        raise UsageError("--scheduler needs --each-host (the whole sweep on every host) "
                         "or --spread (its points split over identical hosts)")
    incomplete = False
    if args.force and not args.no_resume:
        raise UsageError("--force goes with --no-resume (it moves an existing dataset aside)")
    paths = [output_path(args.out, sweep, len(sweeps) > 1) for sweep in sweeps]
    for path in paths:  # every output checked before the first point is measured
        check_output_file_in_new_directory(path, "--out")
    overall = None
    if len(sweeps) > 1 and not args.each_host:  # each-host: points times hosts, unknown before connecting
        total = sum(len(shard_points(s.points, parse_shard(args.shard))) * (args.runs or s.runs_per_point)
                    for s in sweeps)
        overall = progress_bar(total, f"{len(sweeps)} sweeps", enabled=progress_enabled(not args.no_progress))
    try:
        for sweep, path in zip(sweeps, paths):
            dataset = run_sweep(sweep, path, shard=args.shard, resume=not args.no_resume, force=args.force,
                                progress=not args.no_progress, repeat=args.repeat, warmup=args.warmup,
                                cpu=args.cpu, overall=overall, client=args.scheduler,
                                each_host=args.each_host, spread=args.spread, runs=args.runs,
                                processes=args.processes)
            hosts = ""
            if args.scheduler is not None:
                count = len({machine_key(row) for row in dataset.rows})
                hosts = f" from {count} host{'' if count == 1 else 's'}"
                incomplete |= bool(dataset.metadata.get("fleet", {}).get("lost"))
            message = f"{sweep.family}.{sweep.name}: {len(dataset)} rows{hosts} -> {path}"
            if overall is not None:
                overall.write(message, file=sys.stdout)
            else:
                print(message)
    finally:
        if overall is not None:
            overall.close()
    if incomplete:
        print("memlab sweep: error: hosts left the cluster before their points were measured; "
              "run the same command again to measure them", file=sys.stderr)
        return 1
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """``memlab merge OUT DATASET...``: one dataset of several (shards, hosts).

    0: merged; 2: a dataset that is missing or unreadable, or the same point
    measured twice by one machine without ``--dedupe``; 1: the merged file
    cannot be written.
    """
    out = Path(args.out)
    check_output_file_in_new_directory(out, "OUT")
    datasets = []
    for path in args.datasets:
        try:
            datasets.append(Dataset.load(path))
        except (OSError, ValueError) as error:  # a missing or unreadable dataset is a bad argument
            return _error("merge", error if isinstance(error, OSError) else f"{path}: {error}", 2)
    try:
        merged = Dataset.merge(*datasets, dedupe=args.dedupe)
    except DuplicatePointError as error:
        return _error("merge", error.remedy("--dedupe"), 2)
    except ValueError as error:
        return _error("merge", error, 2)
    merged.save(out)
    machines = len({machine_key(row) for row in merged.rows})
    print(f"{len(datasets)} datasets, {len(merged)} rows from {machines} "
          f"machine{'' if machines == 1 else 's'} -> {out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``memlab export DATASET --format parquet|csv-long|json [--out PATH] [--long]``.

    0: written; 2: a dataset that cannot be read, an --out memlab will not
    write (the dataset's own files among them), Parquet without pyarrow (the
    message names the extra); 1: the write failed.
    """
    if args.format == "parquet":
        try:
            export.require_pyarrow()
        except ImportError as error:
            return _error("export", error, 2)
    out = args.out or export.default_path(args.dataset, args.format)
    own = {os.path.realpath(p) for p in paths_for(args.dataset)}
    written = [out, *(paths_for(out) if args.format == "csv-long" else ())]
    if own & {os.path.realpath(p) for p in written}:
        return _error("export", f"--out={out!r} would overwrite the dataset {args.dataset} itself", 2)
    for path in written:
        check_output_file_in_new_directory(path, "--out", "--out's directory")
    try:
        dataset = Dataset.load(args.dataset)
    except (OSError, ValueError) as error:  # a missing or unreadable dataset is a bad argument
        return _error("export", error if isinstance(error, OSError) else f"{args.dataset}: {error}", 2)
    try:
        path = export.export(dataset, out, args.format, long=args.long)
    except OSError as error:
        return _error("export", f"cannot write {out}: {error}", 1)
    long = args.format == "csv-long" or args.long
    print(f"{args.dataset} -> {path} ({args.format}{', one row per sample' if long else ''})")
    return 0


def sweep_listing(width: int | None = None) -> str:
    """``memlab sweep --list``: every named sweep with its points, estimated duration and description.

    >>> "calibrate.quick" in sweep_listing()
    True
    """
    width = width or max(60, min(120, shutil.get_terminal_size((100, 24)).columns))
    rows = []
    for fam in registry.all_families().values():
        for sweep_name in fam.sweeps:
            try:
                sweeps = as_sweeps(fam.sweep(sweep_name))
            except Exception as error:  # e.g. a sweep needing SMT: listed with the reason, not fatal
                doc = (fam.sweeps[sweep_name].__doc__ or "").strip().split("\n")[0]
                rows.append((f"{fam.name}.{sweep_name}", "-", "-",
                             f"{doc} (not on this machine: {error})".strip()))
                continue
            points = sum(len(s.points) for s in sweeps)
            seconds = sum(estimate_seconds(s) for s in sweeps)
            text = next((s.description for s in sweeps if s.description), "") or fam.description
            text = " ".join(text.split())
            rows.append((f"{fam.name}.{sweep_name}", str(points), f"~{format_duration(seconds)}", text))
    header = ("sweep", "points", "time", "what it measures")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    indent = widths[0] + widths[1] + widths[2] + 6
    lines = []
    for cells in [header, *rows]:
        head = f"{cells[0]:<{widths[0]}}  {cells[1]:>{widths[1]}}  {cells[2]:>{widths[2]}}  "
        wrapped = textwrap.wrap(cells[3], max(24, width - indent)) or [""]
        lines.append(head + wrapped[0])
        lines += [" " * indent + more for more in wrapped[1:]]
    lines.append("time: an estimate from the points, repetitions and sample length (it varies by machine); "
                 "run one with `memlab sweep NAME`.")
    return "\n".join(line.rstrip() for line in lines)


# --------------------------------------------------------------------------
# views: compare, plot, report, tour


def cmd_compare(args: argparse.Namespace) -> int:
    """``memlab compare BASELINE CANDIDATE``: print the comparison, return the exit status.

    0: no significant regression of at least ``--fail-above``; 1: at least
    one (or, with ``--fail-on-noise``, a point without a verdict); 2: bad
    arguments or datasets that cannot be compared (missing or corrupt file,
    unknown metric direction, no point in common).
    """
    if args.baseline_machine and not args.by_machine:
        return _error("compare", "--baseline-machine needs --by-machine", 2)
    if args.candidate is None and not args.by_machine:
        return _error("compare", "a candidate dataset is needed (or --by-machine to compare the "
                      "machines of one dataset)", 2)
    try:
        fail_above = parse_fraction("fail_above", args.fail_above) if args.fail_above else None
        if args.threshold:
            threshold = parse_fraction("threshold", args.threshold)
        else:
            threshold = fail_above if fail_above is not None and fail_above < 1 else 0.05
        if args.by_machine:
            return _compare_machines(args, threshold, fail_above)
        comparison = compare(
            args.baseline, args.candidate, metric=args.metric, better=args.better,
            threshold=threshold, alpha=args.alpha, confidence=args.confidence,
        )
    except ValueError as error:
        return _error("compare", error, 2)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2, default=str))
    else:
        print(comparison.format())
    if not comparison.points:
        return _error("compare", "the datasets have no point in common", 2)
    failing = comparison.failing(fail_above)
    if failing:
        limit = comparison.threshold if fail_above is None else fail_above
        print(f"memlab compare: {len(failing)} significant regression(s) of at least {limit:.1%}",
              file=sys.stderr)
        return 1
    if args.fail_on_noise and comparison.unjudged:
        print(f"memlab compare: {len(comparison.unjudged)} point(s) without a verdict "
              f"(inconclusive) and --fail-on-noise", file=sys.stderr)
        return 1
    return 0


def _compare_machines(args: argparse.Namespace, threshold: float, fail_above: float | None) -> int:
    """``memlab compare --by-machine``: every machine against the first (exit 0; 1 with
    --fail-above when a machine is significantly worse by at least that much)."""
    paths = [args.baseline] + ([args.candidate] if args.candidate else [])
    datasets = [load_dataset(path, "dataset") for path in paths]
    data = datasets[0] if len(datasets) == 1 else Dataset.merge(*datasets)
    comparisons = compare_machines(data, baseline=args.baseline_machine, metric=args.metric,
                                   better=args.better, threshold=threshold, alpha=args.alpha,
                                   confidence=args.confidence)
    if args.json:
        print(json.dumps({name: c.to_dict() for name, c in comparisons.items()}, indent=2, default=str))
    else:
        print("\n\n".join(f"== {name}\n{c.format()}" for name, c in comparisons.items()))
    if not any(c.points for c in comparisons.values()):
        return _error("compare", "the machines have no point in common", 2)
    if fail_above is not None:
        failing = sum(len(c.failing(fail_above)) for c in comparisons.values())
        if failing:
            print(f"memlab compare: {failing} point(s) significantly worse by at least {fail_above:.1%} "
                  f"than on the baseline machine", file=sys.stderr)
            return 1
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``memlab plot DATASET [-o fig.png]``: draw the dataset's standard figure to a file."""
    out = Path(args.out) if args.out else Path(os.path.splitext(args.dataset)[0] + ".png")
    check_output_file(out, "--out")
    try:
        dataset = Dataset.load(args.dataset)
    except (OSError, ValueError) as error:  # a missing or unreadable dataset is a bad argument
        return _error("plot", error if isinstance(error, OSError) else f"{args.dataset}: {error}", 2)
    try:
        require_matplotlib()
        fig = plot.figure(dataset)
    except ImportError as error:
        print(f"memlab plot: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # e.g. a family whose result is a number, not a figure
        return _error("plot", f"{args.dataset}: {error}", 2)
    image = io.BytesIO()
    try:
        fig.savefig(image, dpi=args.dpi, format=out.suffix.lstrip(".").lower() or "png")
    except ValueError as error:  # an image format matplotlib does not write
        return _error("plot", error, 2)
    try:
        atomic_write(out, image.getvalue())
    except OSError as error:
        return _error("plot", f"cannot write {out}: {error}", 1)
    print(f"{args.dataset} -> {out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``memlab report DATASET... -o report.html``: one self-contained HTML file."""
    out = Path(args.out)
    check_output_file_in_new_directory(out, "--out", "--out's directory")
    items = []
    for path in args.datasets:
        try:
            items.extend(as_items([path]))
        except FileNotFoundError as error:
            return _error("report", f"{path}: no such dataset ({error.filename or path})", 2)
        except (OSError, ValueError) as error:  # a missing or unreadable dataset is a bad argument
            return _error("report", f"{path}: {error}", 2)
    out = write_report(items, out, title=args.title, command=_command_line(args))
    print(f"{len(items)} datasets -> {out}")
    return 0


def cmd_tour(args: argparse.Namespace) -> int:
    """``memlab tour [--out DIR] [--reduced]``: quick sweep of every family + report.html."""
    try:
        for name in args.family or ():  # a misspelt family creates no --out folder
            registry.family(name)
        check_output_directory(args.out, "--out")
        result = tour(args.out, reduced=args.reduced, families=args.family, repeat=args.repeat,
                      cpu=args.cpu, progress=not args.no_progress, resume=args.resume,
                      command=_command_line(args))
    except ValueError as error:
        return _error("tour", error, 2)
    for run in result.runs:
        status = f"FAILED: {run.error}" if run.error else f"{len(run.dataset)} rows -> {run.path}"
        print(f"{run.family:<14} {run.seconds:6.1f} s  {status}")
    print(f"tour: {result.seconds:.0f} s; report -> {result.report}")
    _say_if_no_figures("tour")
    if result.interrupted:
        return 130
    return 1 if result.failed else 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``memlab reproduce [ITEM ...] [--quick | --fixed] --out DIR [--list] [--check] [--remeasure]``."""
    chosen = catalogue.select(args.items)
    if args.quick and args.fixed:
        raise UsageError("reproduce takes --quick or --fixed, not both (the long fixed run is a full run)")
    if args.list:
        print(listing(chosen, quick=args.quick, out=args.out, fixed=args.fixed))
        return 0
    if not args.out:
        raise UsageError("reproduce needs --out DIR (the folder for the datasets and report.html)")
    check_output_directory(args.out, "--out")
    result = reproduce(
        [i.key for i in chosen], quick=args.quick, out=args.out, progress=not args.no_progress,
        command=_command_line(args), say=lambda text: print(text, file=sys.stderr), remeasure=args.remeasure,
        fixed=args.fixed,
    )
    for judged in result.items:
        counts = judged.counts()
        summary = ", ".join(f"{counts[s]} {s}" for s in catalogue.VERDICTS if counts[s])
        print(f"{judged.item.key:<20} {summary}" + (f"  [{judged.error}]" if judged.error else ""))
    totals = ", ".join(f"{result.count(s)} {s}" for s in catalogue.VERDICTS)
    sanity = ", ".join(f"{result.sanity_count(s)} {s}" for s in catalogue.SANITY_VERDICTS)
    print(f"reproduce: {len(result.items)} items: {totals}; sanity checks: {sanity}; report -> {result.report}")
    print(f"reproduce: time: {result.timing()}")
    _say_if_no_figures("reproduce")
    if result.interrupted:
        return 130
    if result.failed:
        return 1
    if args.check and result.not_reproduced:
        print(f"memlab reproduce: {len(result.not_reproduced)} claim(s) not reproduced and --check",
              file=sys.stderr)
        return 1
    return 0


def _say_if_no_figures(command: str) -> None:
    try:
        require_matplotlib()
    except ImportError as error:
        print(f"memlab {command}: the report has no figures: {error}", file=sys.stderr)


def _command_line(args: argparse.Namespace) -> str:
    return " ".join(shlex.quote(a) for a in ["memlab", *args.argv])


# --------------------------------------------------------------------------
# entry points


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `memlab` console script and of ``python -m memlab``.

    >>> main(["sweep", "--list"]) == 0   # doctest: +SKIP
    True
    """
    return _run(list(sys.argv[1:] if argv is None else argv))


def script_main(sweep_fn: SweepFactory, argv: Sequence[str] | None = None,
                report: Callable[[Dataset, bool], str] | None = None) -> int:
    """The command line of an experiment script: ``memlab sweep`` on the sweeps ``sweep_fn(quick)`` makes.

    Options: --quick, --out (a CSV for one sweep, a folder for several;
    default results/), --shard i/n, --repeat, --cpu, --no-progress,
    --no-resume. Use it as ``raise SystemExit(script_main(sweep))``.
    ``report(dataset, quick)``, for a script of one sweep: the text printed
    once every point is measured (the script's table beside the source's).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    status = _run(["sweep", *argv], script=sweep_fn)
    if status != 0 or report is None or {"-h", "--help"} & set(argv):
        return status
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args, _ = parser.parse_known_args(argv)
    print(report(Dataset.load(output_path(args.out, sweep_fn(args.quick), False)), args.quick))
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a service manager) while a command runs: it stops the way
    Ctrl-C does (the rows measured so far stay on disk, children are reaped, one line, exit 143).
    A KeyboardInterrupt, so that every path that ends a run on Ctrl-C ends it on SIGTERM too."""


class _sigterm_stops:
    """Turn SIGTERM into :class:`Terminated` for the duration, in the main thread, unless the
    process was told to ignore it or someone else handles it; the handler before is put back.
    Ctrl-C alone is not enough: a command a script starts in the background inherits SIGINT
    ignored (POSIX), and SIGTERM is then how it is stopped."""

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self.previous = signal.signal(signal.SIGTERM, self._stop)

    @staticmethod
    def _stop(signum: int, frame: Any) -> None:
        raise Terminated()

    def __exit__(self, *exc_info: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _run(argv: list[str], script: SweepFactory | None = None) -> int:
    try:
        with _sigterm_stops():
            return _dispatch(argv, script)
    except Terminated:  # a second signal while the first was reported
        return EXIT_STATUS["terminated"]
    except KeyboardInterrupt:  # a Ctrl-C outside the handler (while it reported the first one)
        return EXIT_STATUS["interrupted"]


def _dispatch(argv: list[str], script: SweepFactory | None) -> int:
    try:
        argv = _load_kernel_file(argv)
    except (ValueError, FileNotFoundError) as error:  # it does not compile, or it is no kernel: a bad argument
        return _usage(str(error))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return _usage("name a command (listed above); `memlab COMMAND --help` says what it takes")
    args.argv = argv
    args.script = script
    if getattr(args, "quiet", False):
        args.no_progress = True
    try:
        if args.command not in FLAGGING_COMMANDS:
            return args.handler(args)
        with FlagTally(quiet=getattr(args, "quiet", False)) as tally:
            status = args.handler(args)
        if status != EXIT_STATUS["usage"]:  # a refused argument measured nothing: its error line stays last
            print(tally.summary(f"memlab {args.command}"), file=sys.stderr)
        return status
    except (UsageError, ValueError) as error:
        return _usage(str(error))
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (memlab info | head)
        return 0
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        with _sigint_ignored():  # a second Ctrl-C while this is printed changes nothing
            print(f"memlab: {'terminated (SIGTERM)' if terminated else 'interrupted'}; rows measured so far are on "
                  "disk", file=sys.stderr)
        return EXIT_STATUS["terminated" if terminated else "interrupted"]
    except ImportError as error:  # an optional dependency (matplotlib, the fleet extra) is missing
        print(f"memlab {args.command}: {error}", file=sys.stderr)
        return EXIT_STATUS["failed"]
    except (OSError, MemoryError, TimeoutError, RuntimeError) as error:
        print(f"memlab: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_STATUS["failed"]
    except Exception as error:
        if os.environ.get("MEMLAB_DEBUG"):
            raise
        print(f"memlab {args.command}: internal error, a bug in memlab: {type(error).__name__}: {error} "
              "(MEMLAB_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_STATUS["failed"]


#: The commands that end with one line of what was flagged (:class:`FlagTally`).
FLAGGING_COMMANDS = ("run", "sweep", "tour", "reproduce")


class FlagTally:
    """What a command's measurements flagged: memlab's warnings (:class:`memlab.conditions.MemlabWarning`)
    printed one line each as they come (above the progress bars; ``quiet``: the per-point
    :class:`~memlab.conditions.ConditionsWarning` lines left out), counted by category, and
    :meth:`summary`, the command's last line. Other warnings are shown as Python shows them; a
    ``-W`` filter or ``PYTHONWARNINGS`` still applies to memlab's. The warning filters and the
    display function are restored on exit.

    >>> with FlagTally(quiet=True) as tally:
    ...     memlab_warn("chase n=1: on CPU 40% of its wall time (below 90%)", ConditionsWarning)
    >>> tally.summary("memlab sweep")
    'memlab sweep: flagged 1 point measured with too little CPU time or too much steal (the rows say which)'
    """

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.counts: dict[type, int] = {}
        self._context = warnings.catch_warnings()

    def __enter__(self) -> "FlagTally":
        self._context.__enter__()
        warnings.filterwarnings("always", category=MemlabWarning, append=True)  # after -W's: theirs win
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, MemlabWarning):
                return shown(message, category, filename, lineno, file, line)
            key = next(c for c in (ConditionsWarning, MachineWarning, MemlabWarning) if issubclass(category, c))
            self.counts[key] = self.counts.get(key, 0) + int(getattr(message, "count", 1))
            if not (self.quiet and key is ConditionsWarning):
                tqdm.write(f"{WARNING_PREFIX}{message}", file=sys.stderr)

        warnings.showwarning = show
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._context.__exit__(*exc_info)

    def summary(self, command: str) -> str:
        """One line: how many points were measured under disturbed conditions, how many machine
        check findings and other warnings there were; "nothing flagged" when none."""
        def counted(n: int, one: str, many: str) -> str:
            return f"{n} {one if n == 1 else many}"

        parts = []
        if self.counts.get(ConditionsWarning):
            parts.append(counted(self.counts[ConditionsWarning], "point", "points")
                         + " measured with too little CPU time or too much steal (the rows say which)")
        if self.counts.get(MachineWarning):
            parts.append(counted(self.counts[MachineWarning], "machine check warning", "machine check warnings"))
        if self.counts.get(MemlabWarning):
            parts.append(counted(self.counts[MemlabWarning], "other warning", "other warnings"))
        return f"{command}: " + (("flagged " + "; ".join(parts)) if parts else "nothing flagged")


class _sigint_ignored:
    """Ignore SIGINT for the duration (main thread only; elsewhere it changes nothing)."""

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc_info: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _ascii_float(text: str) -> float:
    """An argparse type: a float written with ASCII digits."""
    if any(c.isdigit() and not c.isascii() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} holds non-ASCII digits: write numbers with the digits 0-9")
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _error(command: str, message: object, status: int) -> int:
    print(f"memlab {command}: error: {message}", file=sys.stderr)
    return status


def _usage(message: str) -> int:
    print(f"memlab: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
