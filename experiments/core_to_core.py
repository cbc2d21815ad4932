"""Core-to-core latency matrix (issue 20): every ordered pair of the CPUs this process may use.

Run: python experiments/core_to_core.py [--quick] [--out results/core_to_core.csv]
then: memlab plot results/core_to_core.csv (the heat map with the topology marks)
"""

import memlab.cli
from memlab import core_to_core
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Every ordered pair of allowed CPUs, cas and store (--quick: cas only, shorter samples)."""
    return core_to_core.FAMILY.sweep("matrix_quick" if quick else "matrix")


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
