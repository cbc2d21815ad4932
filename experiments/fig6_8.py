"""Fig. 6.8 (seed 004): fig. 6.7 plus a helper thread walking ~100 elements ahead.

Run: python experiments/fig6_8.py [--quick] [--out results/fig6_8.csv]
"""

import memlab.sweep
from memlab import chase


def sweep(quick: bool = False) -> memlab.sweep.Sweep:
    """Fig. 6.8 (seed 004): fig. 6.7 plus a helper thread walking ~100 elements ahead."""
    return chase.fig6_8(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.sweep.main(sweep))
