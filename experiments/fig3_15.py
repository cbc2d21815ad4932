"""Fig. 3.15 (seed 004): sequential vs random read, NPAD=0.

Run: python experiments/fig3_15.py [--quick] [--out results/fig3_15.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.15 (seed 004): sequential vs random read, NPAD=0."""
    return chase.fig3_15(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
