"""A/A on this machine: the same sweep measured twice back to back, compared point by point.

Nothing changes between the two sides, so every point whose comparison says
"regression" or "improvement" changed verdict for no reason: the count says
how far this machine's numbers survive a second run. Each side is one run of
the run loop (``memlab.runner.Run``) with ``--runs`` runs a point (each run a
fresh setup, the runs taken in rounds, so a slow minute of the machine
spreads over all points), ``--repeat`` samples a run; the two sides are
compared on the run level (``memlab.compare``), and also as the old way had
it, the first run of each side alone (one run a side, judged on its
samples), for contrast. ``--processes`` measures every run in a fresh worker
process.

``--reproduce`` runs ``memlab reproduce --quick`` twice back to back instead
(into ``--out``/first and ``--out``/second, default a temporary folder) and
counts the claims whose verdict differs between the two.

``--hog`` starts one busy process per CPU (a spinning loop, nice 0) for the
whole measurement and stops them at the end: the machine under load.

    python experiments/aa.py [--sweep chase.quick] [--runs 3] [--repeat N] [--processes] [--hog]
                             [--out DIR]
    python experiments/aa.py --reproduce [--hog] [--out DIR]

Prints each point's run medians per side, its run spread and verdict (or each
claim that changed), then the counts, the host's CPU, the load average before
and after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memlab.compare import IMPROVEMENT, REGRESSION, compare
from memlab.dataset import RUN_COLUMN, Dataset, run_index
from memlab.machine import collect
from memlab.runner import Run
from memlab.sweep import resolve

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


def measure_side(sweep, runs: int, repeat: int | None, first_run: int, processes: bool = False) -> Dataset:
    """One side: the sweep in ``runs`` runs a point (the run loop's rounds), its run indices
    numbered from ``first_run`` on (so the two sides' runs stay apart when merged)."""
    dataset = Run(sweep, repeat=repeat, runs=runs, processes=processes).execute(progress=False, warn=lambda _: None)
    rows = [{**row, RUN_COLUMN: first_run + run_index(row)} for row in dataset.rows]
    return Dataset(rows, dict(dataset.metadata))


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


def reproduce_verdicts(folder: Path) -> dict[tuple[str, str], str]:
    """{(item, claim): status} of a ``memlab reproduce`` run's verdicts.json."""
    data = json.loads((folder / "verdicts.json").read_text())
    return {(item["item"], claim["claim"]): claim["status"] for item in data["items"] for claim in item["claims"]}


def reproduce_twice(out: Path) -> tuple[dict, dict, list[float]]:
    """``memlab reproduce --quick`` into out/first, then out/second; both verdicts and the seconds."""
    verdicts, seconds = [], []
    for side in ("first", "second"):
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "memlab", "reproduce", "--quick", "--no-progress",
                        "--out", str(out / side)], check=False, stdout=subprocess.DEVNULL)
        seconds.append(time.monotonic() - started)
        verdicts.append(reproduce_verdicts(out / side))
    return verdicts[0], verdicts[1], seconds


def main_reproduce(args, machine: dict, hog: bool) -> int:
    before = load_average()
    hogs = start_hogs(24 * 3600) if hog else []
    try:
        with tempfile.TemporaryDirectory(prefix="memlab-aa-") as scratch:
            first, second, seconds = reproduce_twice(Path(args.out or scratch))
    finally:
        stop_hogs(hogs)
    after = load_average()
    changed_claims = sorted(key for key in first if key in second and first[key] != second[key])
    for item, claim in changed_claims:
        print(f"  {item}: {first[(item, claim)]} -> {second[(item, claim)]}: {claim}")
    counts = [{status: list(side.values()).count(status) for status in sorted(set(side.values()))}
              for side in (first, second)]
    print(f"A/A memlab reproduce --quick twice, back to back, "
          f"{'under one busy process per CPU' if hog else 'no added load'}, "
          f"{seconds[0]:.0f} s and {seconds[1]:.0f} s")
    print(f"claims that changed verdict: {len(changed_claims)} of {len(set(first) & set(second))}; "
          f"first {counts[0]}, second {counts[1]}")
    print(f"host: {machine.get('cpu_model', 'unknown CPU')}, family {machine.get('cpu_family', '?')} "
          f"model {machine.get('cpu_model_number', '?')}; load average {before} before, {after} after")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", default="chase.quick", help="a named sweep (default chase.quick)")
    parser.add_argument("--runs", "--rounds", dest="rounds", type=int, default=3,
                        help="runs a point per side (default 3)")
    parser.add_argument("--repeat", type=int, default=None, help="samples per run (default: the sweep's)")
    parser.add_argument("--hog", action="store_true", help="one busy process per CPU while measuring")
    parser.add_argument("--out", default=None, help="folder to save both sides' datasets in")
    parser.add_argument("--processes", action="store_true", help="each run in a fresh worker process")
    parser.add_argument("--reproduce", action="store_true", help="memlab reproduce --quick twice instead")
    args = parser.parse_args(argv)
    if args.reproduce:
        return main_reproduce(args, collect(include_core=False), args.hog)
    if args.rounds < 1:
        parser.error(f"--runs={args.rounds} is below the minimum 1")
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
        side_a = measure_side(sweep, args.rounds, args.repeat, 0, args.processes)
        side_b = measure_side(sweep, args.rounds, args.repeat, args.rounds, args.processes)
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
