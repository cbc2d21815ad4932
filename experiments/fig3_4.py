"""Fig. 3.4 (Drepper): access time of random writes, cycles per element by cache level.

Random order, inc (pad[0]++) on 64-byte elements, 2^10..2^28 bytes; the figure
labels each plateau with its cycles.

Run: python experiments/fig3_4.py [--quick] [--out results/fig3_4.csv]
"""

import memlab.cli
from memlab import chase
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.4 (Drepper): access time of random writes, cycles per element by cache level."""
    return chase.fig3_4(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
