"""Fig. 3.28 (Drepper): read, write and copy, one thread (AMD Family 10h in Drepper's paper: two loads per cycle in L1).

Run: python experiments/fig3_28.py [--quick] [--out results/fig3_28.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.28 (Drepper): read, write and copy, one thread (AMD Family 10h in Drepper's paper: two loads per cycle in L1)."""
    return bandwidth.FAMILY.sweep("fig3_28" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
