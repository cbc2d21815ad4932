"""Fig. 6.4 (Drepper): inc on aligned vs misaligned elements, slowdown per working set.

16-byte elements 4 bytes off their alignment: a quarter of the pad[0] words
straddle two cache lines. The script prints the slowdown per working set.

Run: python experiments/fig6_4.py [--quick] [--out results/fig6_4.csv]
     python experiments/fig6_4.py --dataset results/chase-fig6_4.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import print_slowdowns, run_and_load  # noqa: E402


def sweep(quick: bool = False) -> Sweep:
    """Fig. 6.4 (Drepper): inc on aligned vs misaligned elements, slowdown per working set."""
    return chase.fig6_4(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Measure (or load), then print the slowdown per working set."""
    (dataset,) = run_and_load(sweep, argv)
    found = chase_analysis.slowdown(dataset, "misalign_bytes", 0, 4, by=("order",))
    print_slowdowns(found, lambda e: e["order"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
