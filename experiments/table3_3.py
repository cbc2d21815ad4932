"""Table 3.3 and fig. 3.22 (Drepper): what 2 and 4 threads gain over one, beside the source.

Runs the sweeps of figs. 3.19, 3.20 and 3.21 (or reads them with --dataset),
prints the speed-up at the largest working set with the source's numbers in
brackets (thread counts this machine cannot run say so), and the fig. 3.22
curve: speed-up per working set for random addnextlast.

Run: python experiments/table3_3.py [--quick] [--out results/]
     python experiments/table3_3.py --dataset results/chase-fig3_19.csv --dataset ...
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlab import chase, chase_analysis
from memlab.grid import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helper chase_after.py sits beside
from chase_after import run_and_load  # noqa: E402


def sweep(quick: bool = False) -> list[Sweep]:
    """Figs. 3.19, 3.20 and 3.21: the three walks of table 3.3."""
    return [chase.fig3_19(quick=quick), chase.fig3_20(quick=quick), chase.fig3_21(quick=quick)]


def main(argv: list[str] | None = None) -> int:
    """Measure (or load), then print table 3.3 and the fig. 3.22 speed-ups."""
    datasets = run_and_load(sweep, argv)
    print(chase_analysis.format_efficiency_table(chase_analysis.efficiency_table(datasets)))
    for dataset in datasets:
        if chase_analysis.sweep_base(dataset) == "fig3_21":
            print("fig. 3.22, speed-up of random addnextlast (n x t1 / tn):")
            for entry in chase_analysis.thread_speedup(dataset):
                print(f"  threads={entry['threads']}  2^{entry['working_set_bytes'].bit_length() - 1}"
                      f"  {entry['speedup']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
