"""Run a chase figure's sweep(s) the way every experiment script does, then analyse what was measured.

Shared by the experiment scripts that print something beyond the dataset
(table 3.3, the associativity result, the slowdowns): ``run_and_load``
accepts the scripts' usual options (--quick, --out, --shard, --repeat, --cpu,
--no-progress, --no-resume) and also ``--dataset PATH`` (repeatable) to
analyse datasets measured before instead of measuring.
"""

from __future__ import annotations

import argparse
from typing import Callable, Sequence

import memlab.cli
from memlab.dataset import Dataset
from memlab.grid import as_sweeps
from memlab.sweep import output_path


def run_and_load(sweep_fn: Callable[..., object], argv: Sequence[str] | None = None) -> list[Dataset]:
    """Measure the sweep(s) of ``sweep_fn`` (resumable, as memlab.cli.script_main) and return their datasets."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--dataset", action="append", default=[])
    args, rest = parser.parse_known_args(argv)
    if args.dataset:
        return [Dataset.load(path) for path in args.dataset]
    forwarded = list(rest) + (["--quick"] if args.quick else []) + (["--out", args.out] if args.out else [])
    status = memlab.cli.script_main(sweep_fn, forwarded)
    if status:
        raise SystemExit(status)
    sweeps = as_sweeps(sweep_fn(quick=args.quick))
    return [Dataset.load(output_path(args.out, s, len(sweeps) > 1)) for s in sweeps]


def print_slowdowns(found: Sequence[dict], label: Callable[[dict], str]) -> None:
    """One line per curve: the slowdown (%) at each working set."""
    curves: dict[str, list[dict]] = {}
    for entry in found:
        curves.setdefault(label(entry), []).append(entry)
    for name, entries in curves.items():
        points = "  ".join(f"2^{e['working_set_bytes'].bit_length() - 1}:{e['slowdown_percent']:+.1f}%"
                           for e in entries)
        print(f"{name}: {points}")
