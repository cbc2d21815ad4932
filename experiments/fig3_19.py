"""Fig. 3.19 (Drepper): sequential read by 1, 2 and 4 threads on one list.

128-byte elements (the source's NPAD=15 on 64 bits); the time per element is
the fastest thread's, as in the source. Thread counts beyond this machine's
usable CPUs are left out and named in the sweep's description.

Run: python experiments/fig3_19.py [--quick] [--out results/fig3_19.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.19 (Drepper): sequential read by 1, 2 and 4 threads on one list."""
    return chase.fig3_19(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
