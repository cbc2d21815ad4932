"""Loaded latency (issue 20): chase latency against the bandwidth the other cores draw, per load mix.

Run: python experiments/loaded_curve.py [--quick] [--out results/loaded.csv]
then: memlab plot results/loaded.csv (latency against GB/s, one curve per load_op, knees marked)
Prints, once every point is measured, each mix's knee (loaded.knee_table).
"""

import memlab.cli
from memlab import loaded
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """The idle point, then read, write, copy (1:1) and add (2:1) load at every delay
    (--quick: read, copy and add at 4 delays)."""
    return loaded.FAMILY.sweep("curve_quick" if quick else "curve")


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep, report=lambda dataset, quick: loaded.knee_table(dataset)))
