"""Fig. 3.26 (Drepper): read, write and copy, one thread (Core 2 in Drepper's paper: reads near 16 B/cycle everywhere).

Run: python experiments/fig3_26.py [--quick] [--out results/fig3_26.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.26 (Drepper): read, write and copy, one thread (Core 2 in Drepper's paper: reads near 16 B/cycle everywhere)."""
    return bandwidth.FAMILY.sweep("fig3_26" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
