"""Fig. 3.31 (Drepper): one thread reads or writes while a worker on another core reads or writes its own set of half the shared cache.

Run: python experiments/fig3_31.py [--quick] [--out results/fig3_31.csv]
"""

import memlab.cli
from memlab import bandwidth
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.31 (Drepper): one thread reads or writes while a worker on another core reads or writes its own set of half the shared cache."""
    return bandwidth.FAMILY.sweep("fig3_31" + ("_quick" if quick else ""))


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
