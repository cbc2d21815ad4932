"""clear_patch: the huge-page clearing patches' comparison in one table.

The patches replaced process_huge_page()'s order (far end first, then pairs
converging on the faulting subpage, one 4 KiB clear per call) with sequential
clearing handed to the hardware in large extents (the whole 2 MiB page, or
32 MiB batches of a 1 GiB page). Every point clears a THP region (1 GiB;
256 MiB with --quick) one way and, within the same sample, its baseline the
other way, so both rates and their ratio come from one interleaved run and
hold while the machine's load changes. The old order is measured converging
on subpage 0 (where it equals the reverse order), 256 (the middle: pairs from
both ends) and 511 (almost sequential). The cover letter (AMD Genoa, the
kernel's fault path): 2 MiB pages 11.76 -> 23.58 GB/s (2.0x), LLC miss ratio
10.96% -> 0.73%; 1 GiB pages 24.85 -> 25.40 GB/s. The LLC miss ratio (cache
misses / cache references) is computed where the PMU counts, and the table
says "not measurable here" with the reason where it does not.

    python experiments/clear_patch.py --quick --out results/clear_patch-quick.csv

Exits non-zero, before printing, when a point fails.
"""

from __future__ import annotations

import math

import memlab.cli
from memlab.clear import patch_label, patch_llc_miss, patch_sweep
from memlab.dataset import Dataset
from memlab.grid import Sweep

#: The cover letter's numbers, for the table's last column: (before, after) GB/s, and the LLC miss ratios.
SOURCE_2M = (11.76, 23.58)
SOURCE_1G = (24.85, 25.40)
SOURCE_LLC = (0.1096, 0.0073)


def sweep(quick: bool = False) -> Sweep:
    """Sequential vs kernel order (3 targets) and large vs small extents, per method, as interleaved pairs."""
    return patch_sweep(quick=quick)


def _ratio(row: dict, name: str) -> str:
    median = row[name]
    iqr = row.get(f"{name}_iqr", math.nan)
    return f"{median:5.3f} [{row[name + '_min']:5.3f}..{row[name + '_max']:5.3f}] {iqr / median:5.1%}"


def _source(row: dict) -> str:
    if row["baseline_order"] == "kernel" and row["extent_bytes"] == 2 << 20:
        return f"{SOURCE_2M[1] / SOURCE_2M[0]:.2f} (2 MiB pages)"
    if row["extent_bytes"] == 32 << 20:
        return f"{SOURCE_1G[1] / SOURCE_1G[0]:.2f} (1 GiB pages)"
    return ""


def table(dataset: Dataset) -> str:
    """One line per method and comparison: the new plan's GB/s, the old plan's, then their ratio as
    median [min..max] IQR/median from wall-clock passes, from the thread's CPU time (leaves out
    preemption) and from median 2 MiB-group times (also leaves out bursts of a neighbour's memory
    traffic), and the source's ratio; then the LLC miss ratios or why they are not measurable."""
    head = (f"{'method':12s} {'new plan':28s} {'old plan':30s} {'new GB/s':>8s} {'old GB/s':>8s}  "
            + "  ".join(f"{name:28s}" for name in ("ratio: wall clock", "ratio: CPU time", "ratio: median chunk"))
            + "  source")
    lines = [head]
    llc_lines = []
    for row in dataset.rows:
        old, new = patch_label(row)
        lines.append(
            f"{row['method']:12s} {new:28s} {old:30s} {row['GB_per_s']:8.2f} {row['baseline_GB_per_s']:8.2f}  "
            + "  ".join(_ratio(row, name) for name in
                        ("ratio_to_baseline", "cpu_ratio_to_baseline", "median_chunk_ratio_to_baseline"))
            + f"  {_source(row)}")
        llc = patch_llc_miss(row)
        if "llc_miss_ratio" in llc:
            llc_lines.append(f"{row['method']:12s} {new:28s} {old:30s} LLC miss ratio {llc['baseline_llc_miss_ratio']:.2%}"
                             f" -> {llc['llc_miss_ratio']:.2%}")
    if llc_lines:
        lines += ["", f"LLC miss ratio, old -> new (the cover letter: {SOURCE_LLC[0]:.2%} -> {SOURCE_LLC[1]:.2%})",
                  *llc_lines]
    else:
        reasons = sorted({patch_llc_miss(row).get("not_measurable", "") for row in dataset.rows} - {""})
        lines += ["", f"LLC miss ratio (the cover letter: {SOURCE_LLC[0]:.2%} -> {SOURCE_LLC[1]:.2%}): "
                  + ("; ".join(reasons) if reasons else "not measurable here")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, argv, report=lambda dataset, quick: table(dataset))


if __name__ == "__main__":
    raise SystemExit(main())
