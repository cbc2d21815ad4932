"""A/A on this machine: the same sweep measured twice back to back, compared point by point.

Nothing changes between the two sides, so every point whose comparison says
"regression" or "improvement" changed verdict for no reason: the count says
how far this machine's numbers survive a second run. Each side is
``--rounds`` runs of the sweep (each run one ``run_sweep`` call: every point
a fresh setup, the points taken in turn, so a slow minute of the machine
spreads over all of them), its rows numbered by ``run``; the two sides are
compared on the run level (``memlab.compare``), and also as the old way had
it, the first run of each side alone (one run a side, judged on its samples),
for contrast. Until the run loop measures runs itself, this is how runs are
taken.

``--hog`` starts one busy process per CPU (a spinning loop, nice 0) for the
whole measurement and stops them at the end: the machine under load.

    python experiments/aa.py [--sweep chase.quick] [--rounds 3] [--repeat N] [--hog]
                             [--out DIR]

Prints each point's run medians per side, its run spread and verdict, then
the counts, the host's CPU, the load average before and after.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

from memlab.compare import IMPROVEMENT, REGRESSION, compare
from memlab.dataset import RUN_COLUMN, Dataset, run_index
from memlab.machine import collect
from memlab.sweep import resolve, run_sweep

CHANGED = (REGRESSION, IMPROVEMENT)


def load_average() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def spin(stop_at: float) -> None:
    """A busy loop until ``stop_at`` (monotonic seconds): one CPU's worth of load."""
    while time.monotonic() < stop_at:
        pass


def start_hogs(seconds: float) -> list[multiprocessing.Process]:
    """One spinning process per CPU this process may use, ending by itself after ``seconds``."""
    stop_at = time.monotonic() + seconds
    hogs = [multiprocessing.Process(target=spin, args=(stop_at,), daemon=True)
            for _ in range(len(os.sched_getaffinity(0)))]
    for hog in hogs:
        hog.start()
    return hogs


def stop_hogs(hogs: list[multiprocessing.Process]) -> None:
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        hog.join()


def measure_side(sweep, rounds: int, repeat: int | None, first_run: int) -> Dataset:
    """``rounds`` runs of the sweep, its rows numbered ``first_run`` on."""
    rows, metadata = [], {}
    for round_index in range(rounds):
        dataset = run_sweep(sweep, progress=False, resume=False, repeat=repeat, warn=lambda _: None)
        metadata = metadata or dict(dataset.metadata)
        rows.extend({**row, RUN_COLUMN: first_run + round_index} for row in dataset.rows)
    return Dataset(rows, metadata)


def first_runs(dataset: Dataset) -> Dataset:
    """The side's first run alone, without a run column: a point measured the old way."""
    first = min(run_index(row) for row in dataset.rows)
    rows = [{k: v for k, v in row.items() if k != RUN_COLUMN}
            for row in dataset.rows if run_index(row) == first]
    return Dataset(rows, dataset.metadata)


def changed(comparison) -> int:
    return sum(point.verdict in CHANGED for point in comparison.points)


def report(comparison, single) -> list[str]:
    lines = [comparison.format(), ""]
    lines.append("one run a side (each side's first run alone):")
    shown = single.varying_params()
    for point in single.points:
        label = " ".join(f"{name}={point.params.get(name)}" for name in shown) or point.label
        lines.append(f"  {label}: {point.verdict}: {point.reason}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", default="chase.quick", help="a named sweep (default chase.quick)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument("--repeat", type=int, default=None, help="samples per run (default: the sweep's)")
    parser.add_argument("--hog", action="store_true", help="one busy process per CPU while measuring")
    parser.add_argument("--out", default=None, help="folder to save both sides' datasets in")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} is below the minimum 1")
    if args.repeat is not None and args.repeat < 1:
        parser.error(f"--repeat={args.repeat} is below the minimum 1")
    try:
        sweeps = resolve(args.sweep, quick=True)
    except ValueError as error:
        parser.error(str(error))
    if len(sweeps) != 1:
        parser.error(f"--sweep={args.sweep} names {len(sweeps)} sweeps; give one")
    sweep = sweeps[0]
    machine = collect(include_core=False)
    before = load_average()
    hogs = start_hogs(24 * 3600) if args.hog else []
    started = time.monotonic()
    try:
        side_a = measure_side(sweep, args.rounds, args.repeat, 0)
        side_b = measure_side(sweep, args.rounds, args.repeat, args.rounds)
    finally:
        stop_hogs(hogs)
    seconds = time.monotonic() - started
    after = load_average()
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        side_a.save(folder / "aa-first.csv")
        side_b.save(folder / "aa-second.csv")
    comparison = compare(side_a, side_b)
    single = compare(first_runs(side_a), first_runs(side_b))
    print("\n".join(report(comparison, single)))
    print()
    total = len(comparison.points)
    print(f"A/A {sweep.family}.{sweep.name}: {args.rounds} run(s) a side, back to back, "
          f"{'under one busy process per CPU' if args.hog else 'no added load'}, {seconds:.0f} s")
    print(f"points that changed verdict: {changed(comparison)} of {total} with {args.rounds} runs a side; "
          f"{changed(single)} of {len(single.points)} with one run a side")
    unstable = sum(point.unstable for point in comparison.points)
    print(f"unstable points (run spread above the bound): {unstable} of {total}")
    print(f"host: {machine.get('cpu_model', 'unknown CPU')}, family {machine.get('cpu_family', '?')} "
          f"model {machine.get('cpu_model_number', '?')}; load average {before} before, {after} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
