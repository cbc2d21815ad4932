"""What checking every byte costs: each writer/reader pair with verify off and on.

The writer fills each chunk with a position-dependent pattern and the reader
checks every byte it receives (a splice reader splices into a memory file and
checks that), so a fast number can be trusted. Two CPUs, 0.5 s samples.

    python experiments/pipes_verify_cost.py [--quick] [--out results/pipe-verify_cost.csv]
"""

from __future__ import annotations

import argparse
import sys

import memlab.cli
import memlab.sweep
from memlab import pipe
from memlab.dataset import Dataset
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """The verify_cost sweep of the pipe family (0.1 s samples, 3 repeats with --quick)."""
    base = pipe.FAMILY.sweep("verify_cost")
    if quick:
        base.target_seconds, base.repeat, base.name = 0.1, 3, "verify_cost_quick"
    return base


def report(dataset: Dataset) -> str:
    """GiB/s unverified and verified side by side, with their ratio."""
    rates = {(r["writer"], r["reader"], r["verify"]): r for r in dataset.rows}
    lines = [f"{'writer/reader':16} {'plain GiB/s':>12} {'verified':>10} {'ratio':>6}"]
    for writer in pipe.WRITERS:
        for reader in pipe.READERS:
            plain, checked = rates.get((writer, reader, False)), rates.get((writer, reader, True))
            if plain and checked:
                lines.append(
                    f"{writer + '/' + reader:16} {plain['GiB_per_s']:12.2f} {checked['GiB_per_s']:10.2f} "
                    f"{checked['GiB_per_s'] / plain['GiB_per_s']:6.2f}"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    status = memlab.cli.script_main(sweep)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true")
    known, _ = parser.parse_known_args()
    print(report(Dataset.load(memlab.sweep.output_path(known.out, sweep(known.quick), False))))
    sys.exit(status)
