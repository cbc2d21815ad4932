"""Fig. 3.25 (Drepper): the same with two threads on the SMT siblings of one core (needs SMT).

Run: python experiments/fig3_25.py [--quick] [--out results/fig3_25.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.25 (Drepper): the same with two threads on the SMT siblings of one core (needs SMT)."""
    return bandwidth.FAMILY.sweep("fig3_25" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
