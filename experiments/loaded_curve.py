"""Loaded latency (issue 20): chase latency against the bandwidth the other cores draw, per load mix.

Run: python experiments/loaded_curve.py [--quick] [--out results/loaded.csv]
then: memlab plot results/loaded.csv (latency against GB/s, one curve per load_op)
"""

import memlab.cli
from memlab import loaded
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """The idle point, then read, write and copy load at every delay (--quick: read and copy, 4 delays)."""
    return loaded.FAMILY.sweep("curve_quick" if quick else "curve")


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
