"""Fig. 3.24 (Drepper): read, write and copy bandwidth in bytes per cycle, one thread (Pentium 4 in Drepper's paper).

Run: python experiments/fig3_24.py [--quick] [--out results/fig3_24.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.24 (Drepper): read, write and copy bandwidth in bytes per cycle, one thread (Pentium 4 in Drepper's paper)."""
    return bandwidth.FAMILY.sweep("fig3_24" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
