"""UnixBench's system tests and index: execl, process creation and the three
file copies, with 1 copy and with one copy per CPU (UnixBench's default
runs), scored against UnixBench's baselines.

    python experiments/unixbench.py --quick     # 0.5 s per test, ~15 s
    python experiments/unixbench.py             # 30 s per test, as UnixBench

Prints UnixBench's summary table and "System Benchmarks Index Score
(Partial Only)" for each number of copies after the sweep.
"""

from __future__ import annotations

import argparse
import sys

import memlab.cli
import memlab.sweep
import memlab.system
from memlab.dataset import Dataset
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Every UnixBench system test for 1 copy and one copy per CPU (the system family's
    unixbench sweep)."""
    return memlab.system.unixbench_sweep(quick=quick)


if __name__ == "__main__":
    status = memlab.cli.script_main(sweep)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args, _ = parser.parse_known_args()
    path = memlab.sweep.output_path(args.out, sweep(quick=args.quick), many=False)
    print(memlab.system.report(Dataset.load(path)))
    sys.exit(status)
