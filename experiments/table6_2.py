"""Table 6.2 (Drepper 6.2.1): matrix multiply variants at N = 1000, time relative to naive.

Every variant (naive, transposed, tiled, tiled_sse2 - the source's own SSE2
listing of section 9.1 -, tiled_simd - memlab's packed panels with the widest
vectors, beyond the source -, numpy's BLAS on one thread) multiplies the same
two N x N float64 matrices; the table reports seconds per product, GFLOP/s
and the time as a percentage of naive beside the source's (naive 100%,
transposed 23.4%, tiled 17.3%, vectorised sub-matrix 9.47%).

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
    return matrix.table_6_2_sweep(QUICK_N, 1, name="table_6_2_quick") if quick else matrix.table_6_2_sweep()


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


def format_table(dataset: Dataset) -> str:
    """Table 6.2 as the source prints it, this machine's numbers beside the source's."""
    rows = matrix.percent_of_naive(dataset).rows
    lines = [f"{'variant':<12} {'N':>5} {'s per product [min..max]':<28}{'GFLOP/s':>9}{'% of naive':>12}"
             f"{'source %':>10}"]
    for row in rows:
        source = matrix.SOURCE_PERCENT_OF_NAIVE.get(row["variant"])
        note = {"tiled_simd": "  (memlab, beyond the source)", "blas": "  (numpy, one thread)"}.get(row["variant"], "")
        lines.append(f"{row['variant']:<12} {row['n']:>5} "
                     + f"{row['seconds']:.4g} [{row['seconds_min']:.4g}..{row['seconds_max']:.4g}]".ljust(28)
                     + f"{row['GFLOP_per_s']:>9.3g}{row['percent_of_naive']:>11.3g}%"
                     + (f"{source:>9.3g}%" if source is not None else f"{'':>10}") + note)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, argv, report=lambda dataset, quick: format_table(dataset))


if __name__ == "__main__":
    raise SystemExit(main())
