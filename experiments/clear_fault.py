"""clear_fault: the kernel zeroing pages on first touch (the huge-page clearing patches).

Every page kind x populate mode over 64 MiB ... 4 GiB (hugetlb kinds fall back
to 4 KiB pages when none are reserved, and every row says which pages and
which populate call it really got: pages_obtained, populate_used), the subpage
the THP touch lands on, and a pause before each sample (this VM hands freed
memory back to its host, so fault-in after a pause is slower).

User space cannot call the kernel's bulk page allocator (alloc_pages_bulk(),
LWN, "A pair of memory-allocation improvements in 5.13"); populating a range
in one call (MAP_POPULATE, MADV_POPULATE_WRITE) against one fault per page
(touch) is the nearest user-visible analogue, and this sweep measures that.

    python experiments/clear_fault.py --quick --out results/clear_fault-quick.csv

Exits non-zero when a point fails (the rows measured before it stay on disk).
"""

import sys

import memlab.cli
from memlab.clear import fault_sweep
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Fault-in GB/s, page faults and huge-page coverage per page kind and populate mode."""
    return fault_sweep(quick=quick)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
