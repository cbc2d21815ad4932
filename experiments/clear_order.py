"""clear_order: user-space re-clearing of a faulted 1 GiB region (the huge-page clearing patches).

Order (sequential, the old kernel order converging on subpage 0, 256 or 511,
reverse, random) x method (memset, rep stosb, widest vector stores,
non-temporal stores + sfence) x extent (bytes per clear call: 4 KiB, 64 KiB,
2 MiB, 32 MiB) on THP and 4 KiB pages.

    python experiments/clear_order.py --quick --out results/clear_order-quick.csv

Exits non-zero when a point fails (the rows measured before it stay on disk).
"""

import sys

import memlab.cli
from memlab.clear import order_sweep
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Re-clearing GB/s per order, method and extent (``clear_order_quick`` with --quick)."""
    return order_sweep(quick=quick)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
