"""Fig. 3.27 (Drepper): two threads on two cores, one shared working set (Core 2: writes collapse in L1).

Run: python experiments/fig3_27.py [--quick] [--out results/fig3_27.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.27 (Drepper): two threads on two cores, one shared working set (Core 2: writes collapse in L1)."""
    return bandwidth.FAMILY.sweep("fig3_27" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
