"""UnixBench's system tests and index: execl, process creation and the three
file copies, with 1 copy and with one copy per CPU (UnixBench's default
runs), scored against UnixBench's baselines (EXPERIMENTS.md section 5).

    python experiments/unixbench.py --quick     # 2 s per test, ~1 minute
    python experiments/unixbench.py             # 30 s per test, as UnixBench

Prints UnixBench's summary table and "System Benchmarks Index Score
(Partial Only)" for each number of copies after the sweep.
"""

from __future__ import annotations

import argparse
import os
import sys

import memlab.cli
import memlab.sweep
import memlab.system
from memlab.dataset import Dataset
from memlab.grid import Sweep


def copies_runs() -> list[int]:
    """1 copy, and one copy per CPU when there is more than one CPU."""
    cpus = len(os.sched_getaffinity(0))
    return [1, cpus] if cpus > 1 else [1]


def sweep(quick: bool = False) -> Sweep:
    """Every UnixBench system test for each number of copies."""
    duration = 2.0 if quick else 30.0
    points = []
    for copies in copies_runs():
        for test in memlab.system.UNIXBENCH_TESTS.values():
            point = {"test": test.test, "duration_s": duration, "copies": copies}
            if test.test == "file_copy":
                point.update(buffer_bytes=test.buffer_bytes, max_blocks=test.max_blocks)
            points.append(point)
    return Sweep(
        name="unixbench-quick" if quick else "unixbench",
        family="system",
        points=points,
        repeat=3,  # UnixBench's "short" iteration count for these tests
        warmup=0,
        description="UnixBench system tests and index",
        # inherited perf counters slow fork/exec, the very thing measured
        options={"counters": False},
    )


if __name__ == "__main__":
    status = memlab.cli.script_main(sweep)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args, _ = parser.parse_known_args()
    path = memlab.sweep.output_path(args.out, sweep(quick=args.quick), many=False)
    print(memlab.system.report(Dataset.load(path)))
    sys.exit(status)
