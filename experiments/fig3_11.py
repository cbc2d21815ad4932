"""Fig. 3.11 (seed 004): sequential read, NPAD 0/7/15/31, working sets 2^10..2^28.

Run: python experiments/fig3_11.py [--quick] [--out results/fig3_11.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.11 (seed 004): sequential read, NPAD 0/7/15/31, working sets 2^10..2^28."""
    return chase.fig3_11(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
