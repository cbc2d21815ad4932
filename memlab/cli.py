"""The `memlab` command: info, check, run, sweep, and the commands other modules add.

Bad arguments exit with status 2 and one line naming the argument.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "parse_assignment", "parse_value"]

# Commands implemented in other modules as `<function>(argv) -> int`; a
# command appears once its module exists.
PLUGGED_COMMANDS = {
    "compare": ("memlab.compare", "compare_main", "compare two datasets"),
    "plot": ("memlab.plot", "plot_main", "draw a dataset's standard figure"),
    "report": ("memlab.report", "report_main", "write one self-contained HTML report"),
    "tour": ("memlab.tour", "tour_main", "quick sweep of every family + report"),
}

_SIZE_SUFFIXES = {
    "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
}


class UsageError(Exception):
    """A command-line mistake: exit 2 with this message."""


def parse_value(text: str) -> Any:
    """'42' -> 42, '1.5' -> 1.5, '64MiB' -> 67108864, '2^20' -> 1048576, 'true' -> True."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    power = re.fullmatch(r"(\d+)\^(\d+)", lowered)
    if power:
        return int(power.group(1)) ** int(power.group(2))
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


def parse_assignment(text: str) -> tuple[str, Any]:
    """'key=value' -> (key, parsed value); UsageError otherwise."""
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlab", description="memory and kernel experiments")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="machine facts, counters and core clock")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--no-calibrate", action="store_true", help="skip the clock measurement")

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
    check.add_argument("--steal-window", type=float, default=0.25, metavar="SECONDS",
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

    run = sub.add_parser("run", help="measure one point: memlab run FAMILY key=value ...")
    run.add_argument("family")
    run.add_argument("assignments", nargs="*", metavar="key=value")
    _measure_options(run)
    run.add_argument("--json", action="store_true", help="print the row as JSON")

    sweep = sub.add_parser("sweep", help="run a named sweep or an experiment script")
    sweep.add_argument("name", nargs="?", help="family.sweep, a sweep name, or a script path")
    sweep.add_argument("--quick", action="store_true", help="the script's short variant")
    sweep.add_argument("--list", action="store_true", help="list the named sweeps")
    sweep.add_argument("--shard", help="run only shard i/n of the points")
    sweep.add_argument("--no-resume", action="store_true")
    sweep.add_argument("--no-progress", action="store_true")
    _measure_options(sweep)

    for name, (module, _, help_text) in PLUGGED_COMMANDS.items():
        if importlib.util.find_spec(module) is not None:
            plugged = sub.add_parser(name, help=help_text, add_help=False)
            plugged.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help="write the dataset here (.csv)")
    parser.add_argument("--repeat", type=int, help="repetitions kept per point")
    parser.add_argument("--cpu", type=int, help="pin the measuring process to this CPU")


def cmd_info(args: argparse.Namespace) -> int:
    from memlab import machine, measure

    facts = machine.collect()
    if not args.no_calibrate:
        facts["core_clock"] = measure.core_ghz_detail()
    if args.json:
        print(json.dumps(facts, indent=2, sort_keys=True, default=str))
    else:
        print(machine.format_facts(facts))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from memlab import check as _  # noqa: F401  (the module, not the function)
    check_module = sys.modules["memlab.check"]

    if args.tune_setting and not args.tune:
        raise UsageError("--tune-setting needs --tune")
    if args.tune or args.reset:
        try:
            if args.tune:
                changes = check_module.tune(
                    settings=args.tune_setting or check_module.TUNABLE_SETTINGS, state_path=args.state)
            else:
                changes = check_module.reset(state_path=args.state)
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
    report = check_module.check(planned_bytes=planned, steal_window_seconds=args.steal_window)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        print(report.format())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from memlab.dataset import Dataset
    from memlab.families import family

    from memlab.check import check, largest_bytes, read_cpu_times

    fam = family(args.family)
    assignments = typed_assignments(fam.params_type, args.assignments)
    params = dataclasses.asdict(fam.params(assignments))
    start = check(planned_bytes=largest_bytes([params]), steal_window_seconds=0.15) if args.out else None
    since = (time.monotonic(), read_cpu_times())
    measurement = fam.run(assignments, repeat=args.repeat, cpu=args.cpu)
    row = measurement.to_row()
    if args.out:
        from memlab.sweep import _metadata, Sweep

        meta = _metadata(Sweep("run", fam.name, [params]), fam, fam.param_names, None,
                         len(measurement.samples))
        meta["check_start"] = start.to_dict()
        meta["check_end"] = check(steal_since=since).to_dict()
        Dataset([row], meta).save(args.out)
    if args.json:
        print(json.dumps(row, default=str))
    else:
        print(_summary(measurement))
        if args.out:
            print(f"1 row -> {args.out}")
    if measurement.conditions_warning:
        print(f"memlab: warning: {measurement.family}: {measurement.conditions_warning}",
              file=sys.stderr)
    return 0


def _summary(measurement) -> str:
    lines = [f"{measurement.family}: " + " ".join(f"{k}={v}" for k, v in measurement.params.items())]
    for name, stat in measurement.stats.items():
        if name == "elapsed_ns" and name != measurement.primary_metric:
            continue
        lines.append(
            f"  {name:<24} median {stat['median']:<12.6g} min {stat['min']:<12.6g} "
            f"max {stat['max']:<12.6g} (n={len(measurement.samples)})"
        )
    if measurement.counters:
        counters = measurement.to_row()
        present = {k[8:]: v for k, v in counters.items() if k.startswith("counter_")}
        if present:
            lines.append("  counters: " + ", ".join(f"{k}={v:.6g}" for k, v in present.items()))
    if measurement.counters_missing:
        lines.append(f"  missing counters: {', '.join(sorted(measurement.counters_missing))}")
    return "\n".join(lines)


def cmd_sweep(args: argparse.Namespace) -> int:
    from memlab.families import all_families
    from memlab.sweep import output_path, resolve, run_sweep

    if args.list or not args.name:
        for fam in all_families().values():
            for sweep_name in fam.sweeps:
                print(f"{fam.name}.{sweep_name}")
        return 0 if args.list else 2
    sweeps = resolve(args.name, quick=args.quick)
    for sweep in sweeps:
        path = output_path(args.out, sweep, len(sweeps) > 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        dataset = run_sweep(sweep, path, shard=args.shard, resume=not args.no_resume,
                            progress=not args.no_progress, repeat=args.repeat, cpu=args.cpu)
        print(f"{sweep.family}.{sweep.name}: {len(dataset)} rows -> {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `memlab` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PLUGGED_COMMANDS and importlib.util.find_spec(PLUGGED_COMMANDS[argv[0]][0]):
        module, function, _ = PLUGGED_COMMANDS[argv[0]]
        return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "repeat", None) is not None and args.repeat < 1:
        return _usage(f"--repeat={args.repeat} is below the minimum 1")
    handlers = {"check": cmd_check, "info": cmd_info, "run": cmd_run, "sweep": cmd_sweep}
    try:
        return handlers[args.command](args)
    except UsageError as error:
        return _usage(str(error))
    except ValueError as error:
        return _usage(str(error))
    except (OSError, MemoryError, TimeoutError) as error:
        print(f"memlab: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (memlab info | head)
        return 0
    except KeyboardInterrupt:
        print("memlab: interrupted; rows measured so far are on disk", file=sys.stderr)
        return 130


def _usage(message: str) -> int:
    print(f"memlab: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
