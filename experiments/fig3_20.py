"""Fig. 3.20 (Drepper): sequential increment by 1, 2 and 4 threads on one list.

128-byte elements, op=inc; see fig3_19.py for how threads are placed and timed.

Run: python experiments/fig3_20.py [--quick] [--out results/fig3_20.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.20 (Drepper): sequential increment by 1, 2 and 4 threads on one list."""
    return chase.fig3_20(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
