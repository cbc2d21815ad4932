"""clear_fault: the kernel zeroing pages on first touch (the huge-page clearing patches).

Every page kind x populate mode over 64 MiB ... 4 GiB (hugetlb kinds fall back
to 4 KiB pages, and say so, when none are reserved), the subpage the THP touch
lands on, and a pause before each sample (this VM hands freed memory back to
its host, so fault-in after a pause is slower).

    python experiments/clear_fault.py --quick --out results/clear_fault-quick.csv
"""

import memlab.cli
from memlab.clear import fault_sweep
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fault-in GB/s, page faults and huge-page coverage per page kind and populate mode."""
    return fault_sweep(quick=quick)


if __name__ == "__main__":
    memlab.cli.script_main(sweep)
