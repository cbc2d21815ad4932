"""clear_patch: seed 001's comparison in one table, as ratios.

The patches replaced process_huge_page()'s order (far end first, then pairs
converging on the faulting subpage, one 4 KiB clear per call) with sequential
clearing handed to the hardware in large extents (the whole 2 MiB page, or
32 MiB batches of a 1 GiB page). Every point clears a 1 GiB THP region one
way and, within the same sample, its baseline the other way, so the ratio
holds while the machine's load changes. Seed 001 (AMD Genoa, kernel fault
path): 2 MiB pages 11.76 -> 23.58 GB/s (2.0x), 1 GiB pages 24.85 -> 25.40.

    python experiments/clear_patch.py --quick --out results/clear_patch-quick.csv
"""

import argparse
import math
import sys

import memlab.cli
import memlab.sweep
from memlab.clear import PATCH_COMPARISONS, patch_sweep
from memlab.dataset import Dataset
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Sequential vs kernel order and large vs small extents, per method, as ratios."""
    return patch_sweep(quick=quick)


def _label(row: dict) -> str:
    for label, order, extent, baseline, baseline_extent in PATCH_COMPARISONS:
        if (row["order"], row["extent_bytes"], row["baseline_order"], row["baseline_extent_bytes"]) == (
            order, extent, baseline, baseline_extent,
        ):
            return label + (f" (target {row['target_subpage']})" if baseline == "kernel" else "")
    return f"{row['order']} {row['extent_bytes']} / {row['baseline_order']} {row['baseline_extent_bytes']}"


def _ratio(row: dict, name: str) -> str:
    median = row[name]
    iqr = row.get(f"{name}_iqr", math.nan)
    return f"{median:5.3f} [{row[name + '_min']:5.3f}..{row[name + '_max']:5.3f}] {iqr / median:5.1%}"


def table(dataset: Dataset) -> str:
    """One line per method and comparison: GB/s both ways, then the ratio as
    median [min..max] IQR/median from wall-clock passes, from the thread's CPU
    time (leaves out preemption) and from median 2 MiB-group times (also
    leaves out bursts of a neighbour's memory traffic)."""
    head = f"{'method':12s} {'comparison':52s} {'GB/s':>6s} {'base':>6s}  "
    head += "  ".join(f"{name:28s}" for name in ("ratio: wall clock", "ratio: CPU time", "ratio: median chunk"))
    lines = [head]
    for row in dataset.rows:
        lines.append(
            f"{row['method']:12s} {_label(row):52s} {row['GB_per_s']:6.2f} {row['baseline_GB_per_s']:6.2f}  "
            + "  ".join(_ratio(row, name) for name in
                        ("ratio_to_baseline", "cpu_ratio_to_baseline", "median_chunk_ratio_to_baseline"))
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    memlab.cli.script_main(sweep, argv)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args, _ = parser.parse_known_args(argv)
    path = memlab.sweep.output_path(args.out, sweep(quick=args.quick), False)
    print(table(Dataset.load(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
