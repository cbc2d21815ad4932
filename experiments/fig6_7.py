"""Fig. 6.7 (seed 004): random NPAD=31, 160 cycles of work per element, prefetch 0 vs 5.

Run: python experiments/fig6_7.py [--quick] [--out results/fig6_7.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 6.7 (seed 004): random NPAD=31, 160 cycles of work per element, prefetch 0 vs 5."""
    return chase.fig6_7(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
