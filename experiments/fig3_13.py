"""Fig. 3.13 (seed 004): sequential follow / inc / addnext0 with NPAD=1.

Run: python experiments/fig3_13.py [--quick] [--out results/fig3_13.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.13 (seed 004): sequential follow / inc / addnext0 with NPAD=1."""
    return chase.fig3_13(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
