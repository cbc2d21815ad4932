"""Fig. 3.17 (seed 004): random order within blocks of k pages, NPAD=7.

Run: python experiments/fig3_17.py [--quick] [--out results/fig3_17.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.17 (seed 004): random order within blocks of k pages, NPAD=7."""
    return chase.fig3_17(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
