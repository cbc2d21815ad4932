"""Table 6.1 (Drepper 6.1): initialising an N x N int matrix row-wise or column-wise,
with normal or non-temporal stores, at N = 3000.

The source: row-wise 0.048 s with normal stores and about as fast with
non-temporal ones (write combining), column-wise 0.127 s normal and 0.16 s
non-temporal; the table here reports seconds and GB/s per order and store
kind.

    python experiments/table6_1.py [--quick] [--out results/table6_1.csv]

:func:`table` does the same from Python and returns the Dataset.
"""

from __future__ import annotations

import memlab.cli
import memlab.sweep
from memlab import matrix
from memlab.dataset import Dataset
from memlab.grid import Sweep

QUICK_N = 1000


def sweep(quick: bool = False) -> Sweep:
    """Both orders x both store kinds at N = 3000 (N = 1000, two repetitions with --quick)."""
    return matrix.table_6_1_sweep(QUICK_N, 2) if quick else matrix.table_6_1_sweep()


def table(n: int = 3000, *, repeat: int = 5, out: str | None = None, quick: bool = False,
          progress: bool = False) -> Dataset:
    """Table 6.1 as a Dataset: row/column order x normal/non-temporal stores; seconds, GB/s.

    ``quick`` uses N=1000 and two repetitions. ``out`` saves the dataset.

    >>> len(table(quick=True))  # doctest: +SKIP
    4
    """
    if quick:
        n, repeat = QUICK_N, 2
    dataset = memlab.sweep.run_sweep(matrix.table_6_1_sweep(n, repeat), progress=progress)
    if out is not None:
        dataset.save(out)
    return dataset


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
