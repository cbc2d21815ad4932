"""How long ``memlab reproduce --quick`` takes on this machine, split into measuring and reporting.

Runs ``python -m memlab reproduce --quick --out <fresh folder> --no-progress``
(every item, or the ones given) ``--runs`` times, each into a new folder, and
prints per run: the wall time seen from outside (Python's start included), the
CPU time (user + system, the child processes of UnixBench and the pipe ladder
included), the run's own split into measuring and reporting (its
``verdicts.json`` "phases", wall and CPU), and the load average before and
after; then, for the last run, each sweep's estimated seconds (what
``memlab reproduce --list --quick`` says on a machine that has not run it) beside
the seconds it took. On a machine shared with other jobs the wall time
includes waiting for a CPU: compare CPU times, and quote the load average.

``--report-only DIR`` times the reporting phase alone: it copies a folder of a
finished run and runs reproduce into the copy (every point is on disk, so only
the judging and report.html are redone). ``--figures DIR`` prints what each
figure of the report costs to draw (CPU seconds: the figure, its wide PNG and
its narrow PNG) and the PNGs' sizes.

    python experiments/quick_run_time.py [--runs 3] [--keep DIR] [ITEM ...]
    python experiments/quick_run_time.py --report-only memlab-reproduce [--runs 3]
    python experiments/quick_run_time.py --figures memlab-reproduce
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memlab import catalogue, chart, plot
from memlab.dataset import Dataset
from memlab.reproduce import PHASES, TIMES_FILE, VERDICTS_FILE, plan
from memlab.units import format_duration


def children_cpu_s() -> float:
    """CPU seconds (user + system) of the child processes this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load_average() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def run_once(out: Path, items: list[str]) -> dict:
    """One ``memlab reproduce --quick`` into ``out``: wall and CPU seen from here, and its own phases."""
    command = [sys.executable, "-m", "memlab", "reproduce", *items, "--quick", "--out", str(out), "--no-progress"]
    load_before = load_average()
    cpu_before, started = children_cpu_s(), time.monotonic()
    finished = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.monotonic() - started, children_cpu_s() - cpu_before
    if finished.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {finished.returncode}:\n{finished.stderr[-2000:]}")
    verdicts = json.loads((out / VERDICTS_FILE).read_text())
    return {"wall_s": wall, "cpu_s": cpu, "phases": verdicts.get("phases", {}), "load_before": load_before,
            "load_after": load_average(), "items": len(verdicts["items"]), "exit": finished.returncode,
            "summary": finished.stdout.strip().splitlines()[-2:]}


def print_run(index: int, run: dict) -> None:
    phases = ", ".join(f"{name} {run['phases'][name]['wall_s']:.1f} s wall / {run['phases'][name]['cpu_s']:.1f} s CPU"
                       for name in PHASES if name in run["phases"])
    print(f"run {index}: {run['items']} items, {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s CPU "
          f"(exit {run['exit']}); {phases}; load {run['load_before']} -> {run['load_after']}")


def print_medians(runs: list[dict]) -> None:
    if len(runs) < 2:
        return

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} s ({min(values):.1f}..{max(values):.1f})"

    print(f"median of {len(runs)}: wall {spread([r['wall_s'] for r in runs])}, CPU {spread([r['cpu_s'] for r in runs])}")
    for name in PHASES:
        if all(name in r["phases"] for r in runs):
            print(f"  {name}: wall {spread([r['phases'][name]['wall_s'] for r in runs])}, "
                  f"CPU {spread([r['phases'][name]['cpu_s'] for r in runs])}")


def print_sweeps(out: Path, items: list[str]) -> None:
    """Each sweep's estimate (no earlier run) beside the seconds it took in ``out``."""
    try:
        taken = json.loads((out / TIMES_FILE).read_text())
    except (OSError, ValueError):
        return
    print(f"\n{'sweep':<40} {'points':>6} {'estimate':>9} {'took':>9}")
    estimated = measured = 0.0
    for task in plan(catalogue.select(items or None), True, Path(tempfile.gettempdir()) / "nowhere"):
        if task.sweep is None or task.path is None:
            continue
        points = len(task.sweep.points)
        took = taken.get(task.path.stem)
        estimated += task.seconds
        measured += took * points if took is not None else 0.0
        took_text = f"{took * points:8.1f}s" if took is not None else "        -"
        print(f"{task.path.stem:<40} {points:>6} {task.seconds:8.1f}s {took_text}")
    print(f"{'total':<40} {'':>6} {estimated:8.1f}s {measured:8.1f}s")


def time_figures(folder: Path) -> None:
    """What each dataset's figure costs to draw (CPU seconds), as the report draws it."""
    print(f"{'dataset':<40} {'rows':>5} {'figure':>7} {'wide':>6} {'narrow':>7} {'PNG KiB':>9}")
    totals = [0.0, 0.0, 0.0]
    for path in sorted(folder.glob("*.csv")):
        ds = Dataset.load(path)
        started = own_cpu_s()
        try:
            fig = plot.figure(ds)
        except (ValueError, TypeError, KeyError) as error:
            print(f"{path.stem:<40} {len(ds):>5}  no figure: {str(error)[:60]}")
            continue
        made = own_cpu_s()
        wide = chart.to_png(fig)
        drawn = own_cpu_s()
        narrow = chart.to_png(chart.narrow(fig))
        done = own_cpu_s()
        costs = (made - started, drawn - made, done - drawn)
        totals = [t + c for t, c in zip(totals, costs)]
        print(f"{path.stem:<40} {len(ds):>5} {costs[0]:6.2f}s {costs[1]:5.2f}s {costs[2]:6.2f}s "
              f"{len(wide) // 1024:>4} {len(narrow) // 1024:>4}")
    print(f"{'total':<40} {'':>5} {totals[0]:6.2f}s {totals[1]:5.2f}s {totals[2]:6.2f}s   "
          f"(CPU; all: {sum(totals):.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("items", nargs="*", help="catalogue items (default: all)")
    parser.add_argument("--runs", type=int, default=1, help="runs, each into a fresh folder (default 1)")
    parser.add_argument("--keep", type=Path, help="run into this folder (one run) and keep it")
    parser.add_argument("--report-only", type=Path, metavar="DIR",
                        help="time only the reporting phase on a copy of a finished run's folder")
    parser.add_argument("--figures", type=Path, metavar="DIR", help="the drawing cost of each figure in DIR")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs={args.runs} must be at least 1")
    if args.figures:
        time_figures(args.figures)
        return 0
    print(f"memlab reproduce --quick, {args.runs} run(s); load average now {load_average()}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="memlab-quick-") as scratch:
        for index in range(args.runs):
            out = args.keep if args.keep and args.runs == 1 else Path(scratch) / f"run{index}"
            if args.report_only:
                shutil.copytree(args.report_only, out, dirs_exist_ok=True)
            runs.append(run_once(out, args.items))
            print_run(index + 1, runs[-1])
        print_medians(runs)
        if not args.report_only:
            print_sweeps(out, args.items)
    print(f"(the run's own phases leave out Python's start; the outside wall time includes it: "
          f"{format_duration(statistics.median(r['wall_s'] for r in runs))} median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
