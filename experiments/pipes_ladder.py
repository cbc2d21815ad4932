"""The ladder of "Making Linux pipes fast" (seed 000) on two CPUs and on one.

Five rungs, each one change on top of the one before: write/read,
vmsplice/read, vmsplice/splice, + huge pages, + busy loop (two CPUs only:
memlab refuses busy looping with both ends on one CPU). Same buffer and pipe
size (256 KiB) on every rung; each rung's transfer adapts until a sample
lasts 0.5 s (0.1 s with --quick, which runs in well under 30 s).

    python experiments/pipes_ladder.py [--quick] [--out results/pipe-ladder.csv]

prints each rung's GiB/s (median [min..max]) and its ratio to the first rung.
:func:`ladder` does the same from Python (tests and notebooks load this
script with ``memlab.sweep.load_script``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import memlab.cli
import memlab.sweep
from memlab import chart, pipe
from memlab.dataset import Dataset
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Every rung of the ladder on every placement this machine allows."""
    return pipe.ladder_sweep(quick=quick)


def ladder(
    quick: bool = False,
    *,
    placements: Sequence[str] | None = None,
    total_bytes: int | None = None,
    buffer_bytes: int = 256 << 10,
    pipe_size_bytes: int | None = 256 << 10,
    verify: bool = False,
    repeat: int | None = None,
    target_seconds: float | None = None,
    out: str | None = None,
    progress: bool = True,
) -> Dataset:
    """Climb the article's ladder on each placement; one Dataset, GiB/s and ratios per rung.

    ``placements`` defaults to every placement this process can use
    ('two_cpus' and 'one_cpu' on a machine with two CPUs or more). Rungs:
    write/read, vmsplice/read, vmsplice/splice, + huge pages, + busy loop
    (two CPUs only), all with the same buffer and pipe size. Every row has
    ``rung_name``, ``placement``, ``GiB_per_s`` (median and spread) and
    ``ratio_to_first``.

    >>> ds = ladder(placements=["two_cpus"], total_bytes=4 << 20, repeat=1, progress=False)  # doctest: +SKIP
    >>> [round(r["ratio_to_first"], 3) for r in ds.rows][0]                                   # doctest: +SKIP
    1.0
    """
    ladder_sweep = pipe.ladder_sweep(
        quick, placements=placements, total_bytes=total_bytes, buffer_bytes=buffer_bytes,
        pipe_size_bytes=pipe_size_bytes, verify=verify, repeat=repeat, target_seconds=target_seconds,
    )
    return pipe.add_ratios(memlab.sweep.run_sweep(ladder_sweep, out, progress=progress))


def report(dataset: Dataset) -> str:
    """One line per rung: placement, rung, GiB/s (the median of its runs' medians) [min..max over
    every run], how many runs, its ratio to the first rung (taken within each run, then the median)."""
    ratios = pipe.add_ratios(dataset)
    folded = chart.fold_runs(ratios.rows, ratios.param_names, ["GiB_per_s", "ratio_to_first"])
    rows = sorted(folded, key=lambda r: (r["placement"], r["rung"]))
    lines = [f"{'placement':9} {'rung':16} {'GiB/s':>8} {'[min .. max]':>18} {'runs':>4} {'x first':>8}"]
    for row in rows:
        lines.append(
            f"{row['placement']:9} {row['rung_name']:16} {row['GiB_per_s']:8.2f} "
            f"[{row['GiB_per_s_min']:7.2f} .. {row['GiB_per_s_max']:6.2f}] {row.get('runs', 1):4d} "
            f"{row['ratio_to_first']:8.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    status = memlab.cli.script_main(sweep)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true")
    known, _ = parser.parse_known_args()
    path = memlab.sweep.output_path(known.out, sweep(known.quick), False)
    print(report(Dataset.load(path)))
    sys.exit(status)
