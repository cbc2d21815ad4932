"""Fig. 6.7 (seed 004): random NPAD=31, 160 cycles of work per element, prefetch 0 vs 5.

Run: python experiments/fig6_7.py [--quick] [--out results/fig6_7.csv]
"""

import memlab.sweep
from memlab import chase


def sweep(quick: bool = False) -> memlab.sweep.Sweep:
    """Fig. 6.7 (seed 004): random NPAD=31, 160 cycles of work per element, prefetch 0 vs 5."""
    return chase.fig6_7(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.sweep.main(sweep))
