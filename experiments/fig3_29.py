"""Fig. 3.29 (Drepper): two threads on two cores, one shared working set (Family 10h: shared writes go through L3).

Run: python experiments/fig3_29.py [--quick] [--out results/fig3_29.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.29 (Drepper): two threads on two cores, one shared working set (Family 10h: shared writes go through L3)."""
    return bandwidth.FAMILY.sweep("fig3_29" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
