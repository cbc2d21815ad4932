"""Fig. 7.9 (seed 004): random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB.

Run: python experiments/fig7_9.py [--quick] [--out results/fig7_9.csv]

Run as root, the script reserves the 2 MiB hugetlb pages the largest point
needs (writing /proc/sys/vm/nr_hugepages) and puts the old value back when
it ends; otherwise, or if the kernel cannot find the pages, the hugetlb
points fall back to 4 KiB pages and say so (``pages_granted_hugetlb`` = 0).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

import memlab.cli
from memlab import chase
from memlab.grid import Sweep

NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
FREE_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"


def sweep(quick: bool = False) -> Sweep:
    """Fig. 7.9 (seed 004): random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB."""
    return chase.fig7_9(quick=quick)


def _read_int(path: str) -> int:
    with open(path) as handle:
        return int(handle.read())


@contextlib.contextmanager
def hugetlb_reserved(pages: int) -> Iterator[int]:
    """Make `pages` 2 MiB pages free for the duration (root only); yields the free count."""
    try:
        free = _read_int(FREE_2M)
    except OSError:
        yield 0
        return
    if free >= pages or os.geteuid() != 0:
        yield free
        return
    previous = _read_int(NR_HUGEPAGES)
    try:
        with open(NR_HUGEPAGES, "w") as handle:
            handle.write(str(previous + pages - free))
        yield _read_int(FREE_2M)
    finally:
        with open(NR_HUGEPAGES, "w") as handle:
            handle.write(str(previous))


def main(argv: list[str] | None = None) -> int:
    """Reserve the hugetlb pages the largest point needs, run the sweep, give them back."""
    quick = "--quick" in (sys.argv[1:] if argv is None else argv)
    largest = max(p["working_set_bytes"] for p in sweep(quick).points)
    with hugetlb_reserved(largest // (2 << 20) + 2) as free:
        print(f"2 MiB hugetlb pages free for the sweep: {free}", file=sys.stderr)
        return memlab.cli.script_main(sweep, argv)


if __name__ == "__main__":
    raise SystemExit(main())
