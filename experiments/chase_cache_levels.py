"""Beyond the seeds: the cache levels read off a random-chase latency curve.

Measures random NPAD=7 from 1 KiB to 256 MiB (4 points per doubling; --quick:
1 per doubling up to 64 MiB), or reads a dataset given with --dataset, and
prints each plateau's size and latency beside the cache sizes sysfs reports.

Run: python experiments/chase_cache_levels.py [--quick] [--out results/chase_cache_levels.csv]
     python experiments/chase_cache_levels.py --dataset results/chase_cache_levels.csv
"""

from __future__ import annotations

import argparse
import sys

import memlab.sweep
from memlab import chase
from memlab.dataset import Dataset
from memlab.grid import Sweep, grid


def sweep(quick: bool = False) -> Sweep:
    """Random NPAD=7 over working sets from 1 KiB to beyond the last cache."""
    sizes = chase._sizes(10, 26, 1) if quick else chase._sizes(10, 28, 4)
    return Sweep(
        name="chase_cache_levels" + ("_quick" if quick else ""),
        family="chase",
        points=grid(working_set_bytes=sizes, npad=[7], order=["random"]),
        repeat=2 if quick else 5,
        warmup=1,
        target_seconds=0.03 if quick else 0.1,
        description=sweep.__doc__,
    )


def main(argv: list[str] | None = None) -> int:
    """Measure (or load) the curve and print the levels table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dataset", help="use this dataset instead of measuring")
    parser.add_argument("--out", default="results/chase_cache_levels.csv")
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--min-ratio", type=float, default=1.4)
    args = parser.parse_args(argv)
    if args.dataset:
        dataset = Dataset.load(args.dataset)
    else:
        dataset = memlab.sweep.run_sweep(sweep(args.quick), args.out, cpu=args.cpu)
    curve = dataset.filter(order="random", npad=7)
    print(chase.format_cache_levels(chase.cache_levels(curve, min_ratio=args.min_ratio)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
