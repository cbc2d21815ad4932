"""Fig. 6.2 (Drepper): two values of one element, in one cache line vs first and last line.

op=addpair adds pad[0] and a second word: word 2 (same line) or the first word of
the element's last line, for sequential 4-line and random 2- and 4-line
elements. The script prints the slowdown per working set.

Run: python experiments/fig6_2.py [--quick] [--out results/fig6_2.csv]
     python experiments/fig6_2.py --dataset results/chase-fig6_2.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import print_slowdowns, run_and_load  # noqa: E402


def sweep(quick: bool = False) -> Sweep:
    """Fig. 6.2 (Drepper): two values of one element, in one cache line vs first and last line."""
    return chase.fig6_2(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Measure (or load), then print the slowdown per working set."""
    (dataset,) = run_and_load(sweep, argv)
    rows = [dict(r, pair_at="first line" if r["pair_word"] == 2 else "last line") for r in dataset.rows]
    found = chase_analysis.slowdown(rows, "pair_at", "first line", "last line", by=("order", "element_bytes"))
    print_slowdowns(found, lambda e: f"{e['order']} {e['element_size_bytes'] // 64} CLs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
