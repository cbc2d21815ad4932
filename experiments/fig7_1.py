"""Figs. 7.1-7.3 (Drepper): cycles and misses per instruction of random and sequential walks.

NPAD=0 walks with the hardware counters attached; without a PMU the figure says
which counters are missing and why, and shows the clock's cycles per element.

Run: python experiments/fig7_1.py [--quick] [--out results/fig7_1.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Figs. 7.1-7.3 (Drepper): cycles and misses per instruction of random and sequential walks."""
    return chase.fig7_1(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
