"""Fig. 7.9 (seed 004): random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB.

Run: python experiments/fig7_9.py [--quick] [--out results/fig7_9.csv]
"""

import memlab.sweep
from memlab import chase


def sweep(quick: bool = False) -> memlab.sweep.Sweep:
    """Fig. 7.9 (seed 004): random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB."""
    return chase.fig7_9(quick=quick)


if __name__ == "__main__":
    raise SystemExit(memlab.sweep.main(sweep))
