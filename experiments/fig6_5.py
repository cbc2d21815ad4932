"""Fig. 6.5 (Drepper): cache associativity; the L1d size and ways read off the surface, beside sysfs.

Lists of 1..16 64-byte elements placed 1..128 elements apart (the source's
NPAD=15 on 32 bits is one 64-byte line per element); the time per element
jumps where all elements share one L1d set and outnumber its ways. The
script prints what that says about the L1d next to what sysfs reports.

Run: python experiments/fig6_5.py [--quick] [--out results/fig6_5.csv]
     python experiments/fig6_5.py --dataset results/chase-fig6_5.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import run_and_load  # noqa: E402


def sweep(quick: bool = False) -> Sweep:
    """Fig. 6.5 (Drepper): lists of 1..16 elements 1..128 elements apart."""
    return chase.fig6_5(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Measure (or load) the surface and print the L1d it implies beside sysfs."""
    (dataset,) = run_and_load(sweep, argv)
    print(chase_analysis.format_associativity(chase_analysis.associativity(dataset)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
