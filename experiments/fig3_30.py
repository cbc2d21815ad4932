"""Fig. 3.30 (Drepper): the critical word, pointer in the first vs the last word of a line.

Each point is measured with the pointer in word 0 and in word 7 of a 64-byte
element, back to back; the script prints the slowdown of word 7 per working
set (the source: about 0.7% once the working set leaves L2).

Run: python experiments/fig3_30.py [--quick] [--out results/fig3_30.csv]
     python experiments/fig3_30.py --dataset results/chase-fig3_30.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import print_slowdowns, run_and_load  # noqa: E402


def sweep(quick: bool = False) -> Sweep:
    """Fig. 3.30 (Drepper): the critical word, pointer in the first vs the last word of a line."""
    return chase.fig3_30(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Measure (or load), then print the slowdown per working set."""
    (dataset,) = run_and_load(sweep, argv)
    found = chase_analysis.slowdown(dataset, "pointer_word", 0, 7, by=("order",))
    print_slowdowns(found, lambda e: e["order"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
