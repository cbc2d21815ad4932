"""Table 6.2 (Drepper 6.2.1): matrix multiply variants at N = 1000, time relative to naive.

Every variant (naive, transposed, tiled, tiled_simd, numpy's BLAS on one
thread) multiplies the same two N x N float64 matrices; the table reports
seconds per product, GFLOP/s and the time as a percentage of naive (the
source: naive 100%, transposed 23.4%, tiled 17.3%, tiled + SIMD 9.47%).

    python experiments/table6_2.py [--quick] [--out results/table6_2.csv]

:func:`table` does the same from Python and returns the Dataset.
"""

from __future__ import annotations

import memlab.cli
import memlab.sweep
from memlab import matrix
from memlab.dataset import Dataset
from memlab.grid import Sweep

QUICK_N = 200


def sweep(quick: bool = False) -> Sweep:
    """Every variant at N = 1000 (N = 200 and one repetition with --quick)."""
    return matrix.table_6_2_sweep(QUICK_N, 1) if quick else matrix.table_6_2_sweep()


def table(n: int = 1000, *, tile: int | None = None, repeat: int = 3, out: str | None = None,
          quick: bool = False, progress: bool = False) -> Dataset:
    """Table 6.2 as a Dataset: every variant at N=n, seconds, GFLOP/s and percent_of_naive.

    ``quick`` uses N=200 and one repetition. ``out`` saves the dataset.

    >>> sorted(table(quick=True).column("variant")) == sorted(matrix.VARIANTS)  # doctest: +SKIP
    True
    """
    if quick:
        n, repeat = QUICK_N, 1
    dataset = matrix.percent_of_naive(
        memlab.sweep.run_sweep(matrix.table_6_2_sweep(n, repeat, tile), progress=progress))
    if out is not None:
        dataset.save(out)
    return dataset


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
