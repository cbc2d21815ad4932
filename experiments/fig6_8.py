"""Fig. 6.8 (seed 004): fig. 6.7 plus a helper thread walking ~100 elements ahead.

Run: python experiments/fig6_8.py [--quick] [--out results/fig6_8.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 6.8 (seed 004): fig. 6.7 plus a helper thread walking ~100 elements ahead."""
    return chase.fig6_8(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
