"""Fig. 3.16 / table 3.2 (Drepper): last-level cache miss ratio, sequential vs random.

NPAD=0 walks with the hardware counters attached. Where the PMU refuses them
(a VM without one) the walk is still measured and the figure says which
counters are missing and why.

Run: python experiments/fig3_16.py [--quick] [--out results/fig3_16.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.16 / table 3.2 (Drepper): last-level cache miss ratio, sequential vs random."""
    return chase.fig3_16(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
