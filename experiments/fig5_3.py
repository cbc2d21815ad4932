"""Figs. 5.3/5.4 (Drepper): reads and writes to memory 0, 1 and 2 NUMA hops away.

Each node with usable CPUs walks lists bound (mbind, MPOL_BIND) to each node
with memory; hops are ranked from the SLIT distances. On a machine with one
node the sweep says so and measures node 0 only. The script prints the
slowdown against local memory per working set (the source: 1 hop about 9%
slower for reads, 2 hops 30%; 20% for the bandwidth test of fig. 5.4).

Run: python experiments/fig5_3.py [--quick] [--out results/fig5_3.csv]
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import print_slowdowns, run_and_load  # noqa: E402


def sweep(quick: bool = False) -> Sweep:
    """Figs. 5.3/5.4 (Drepper): reads and writes to memory 0, 1 and 2 NUMA hops away."""
    return chase.fig5_3(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Measure (or load), then print the slowdown of remote memory, or say there is none."""
    (dataset,) = run_and_load(sweep, argv)
    rank = chase_analysis.hops(dataset)
    rows = [dict(r, hops=rank.get(r.get("numa_distance"), 0)) for r in dataset.rows]
    remote = sorted({r["hops"] for r in rows} - {0})
    if not remote:
        print(dataset.metadata.get("description", ""))
        for row in rows:
            print(f"  node {row.get('memory_node')}  {row['op']:6} {row['order']:10}"
                  f" 2^{row['working_set_bytes'].bit_length() - 1}  {row['ns_per_element']:.2f} ns per element")
        return 0
    for hop in remote:
        found = chase_analysis.slowdown([r for r in rows if r["hops"] in (0, hop)], "hops", 0, hop, by=("op", "order"))
        print_slowdowns(found, lambda e, h=hop: f"{e['op']} {e['order']}, {h} hop(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
