"""Fig. 3.21 (Drepper): random addnextlast by 1, 2 and 4 threads on one list.

128-byte elements; each element adds the next element's last pad word to its
pad[0]. table3_3.py runs figs. 3.19-3.21 and prints table 3.3 (fig. 3.22 is
the right panel of each figure).

Run: python experiments/fig3_21.py [--quick] [--out results/fig3_21.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.21 (Drepper): random addnextlast by 1, 2 and 4 threads on one list."""
    return chase.fig3_21(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
