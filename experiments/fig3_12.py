"""Fig. 3.12 (seed 004): TLB influence, NPAD=7 packed vs one element per 4 KiB page.

Run: python experiments/fig3_12.py [--quick] [--out results/fig3_12.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.12 (seed 004): TLB influence, NPAD=7 packed vs one element per 4 KiB page."""
    return chase.fig3_12(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
