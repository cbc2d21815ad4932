"""Does clear-order's ratio depend on the region it clears? Both regions side by side.

clear-order's claim reads sequential over the old kernel order (converging on
subpage 0), rep stosb in 4 KiB calls over THP. The full run clears a smaller
region than the long fixed run (``clearing.full_region_bytes()``: 256 MiB to
1 GiB, against the named sweep's 1 GiB). This script measures the ratio for
each region in interleaved rounds (the order of the regions alternates from
round to round; every measurement faults a fresh region: a run), and prints
each round and, per region, the median ratio and its range, with the load.

    python experiments/clear_order_region_ab.py [--rounds 10] [--regions 256,1024] [--cpu N]

Measured: docs/reproduce.md, "Against the long fixed run".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from memlab import clear

MiB = 1 << 20


def rates(region_bytes: int, cpu: int | None, repeat: int = 3, target_seconds: float = 0.2) -> tuple[float, float]:
    """GB/s of the sequential order and of the kernel order converging on subpage 0, each a fresh region."""
    common = dict(region_bytes=region_bytes, pages="thp", method="rep_stosb", extent_bytes=4096, cpu=cpu,
                  repeat=repeat, warmup=1, target_seconds=target_seconds, counters=False)
    sequential = clear.order(order="sequential", **common).median("GB_per_s")
    kernel = clear.order(order="kernel", target_subpage=0, **common).median("GB_per_s")
    return sequential, kernel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--regions", default="256,1024", help="comma-separated region sizes in MiB (whole 2 MiB)")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--target-seconds", type=float, default=0.2, help="one sample's length")
    args = parser.parse_args(argv)
    try:
        regions = [int(text) * MiB for text in args.regions.split(",")]
    except ValueError:
        parser.error(f"--regions={args.regions!r}: sizes in MiB, comma-separated")
    if not regions or any(r <= 0 or r % (2 * MiB) for r in regions):
        parser.error(f"--regions={args.regions!r}: every region a positive multiple of 2 MiB")
    if not 1 <= args.rounds <= 1000:
        parser.error(f"--rounds={args.rounds} is outside 1 to 1000")
    if not args.target_seconds > 0:
        parser.error(f"--target-seconds={args.target_seconds} is not a positive number of seconds")
    if args.cpu not in os.sched_getaffinity(0):
        parser.error(f"--cpu={args.cpu} is not among the CPUs this process may use")
    ratios: dict[int, list[float]] = {r: [] for r in regions}
    for index in range(args.rounds):
        for region in (regions if index % 2 == 0 else regions[::-1]):
            sequential, kernel = rates(region, args.cpu, target_seconds=args.target_seconds)
            ratios[region].append(sequential / kernel)
            print(f"round {index + 1}/{args.rounds} {region >> 20} MiB: sequential {sequential:.2f} GB/s, "
                  f"kernel order {kernel:.2f} GB/s, ratio {sequential / kernel:.3f}, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    for region in regions:
        values = ratios[region]
        print(f"{region >> 20} MiB: ratio median {statistics.median(values):.3f}, "
              f"range {min(values):.3f}-{max(values):.3f} ({len(values)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
