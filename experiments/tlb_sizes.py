"""The TLB's own cost (issue 20): the caches' latency and the page-walk penalty against the working set.

Run: python experiments/tlb_sizes.py [--quick] [--out results/tlb.csv]
then: memlab plot results/tlb.csv (the two stacked, the THP penalty as a line)
"""

import memlab.cli
from memlab import tlb
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """4 KiB to 16 MiB of elements, doubling (--quick: to 1 MiB, shorter samples)."""
    return tlb.FAMILY.sweep("sizes_quick" if quick else "sizes")


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
