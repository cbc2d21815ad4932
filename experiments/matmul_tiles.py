"""Where blocking pays: matrix multiply over tile sizes and N (Drepper 6.2.1).

Three sweeps of the ``matrix`` family:

* ``matmul_ladder``  every variant (naive, transposed, tiled, tiled_simd,
  blas) at each N, the table 6.2 ladder as a function of N;
* ``matmul_tiles``   Drepper's ``tiled`` kernel over tile sizes (elements)
  at each N: one cache line of doubles is the source's choice;
* ``matmul_simd_depth``  ``tiled_simd`` over the depth of its packed panels.

N runs 256 ... 2048 and includes 1000/1024 and 2000/2048, since power-of-two
rows are where the column walk of naive collides in the cache sets.
``--quick`` keeps N small (64, 128, 200) and finishes in well under 30 s.
Full run: about 20 minutes, dominated by naive at N = 2048.

    python experiments/matmul_tiles.py --quick --out results/

``--ratio`` instead prints tiled_simd / OpenBLAS (one thread) per vector
width and N = 256, 512, 1024, 2048: each round measures every width's
tiled_simd (its blocks as :func:`memlab.matrix.tuned_blocks` chooses them)
and right after it numpy's BLAS at the same N, so each ratio is of two
neighbouring measurements; medians over the rounds with their range, per
wall second and per CPU-second, the load average before and after, the
host, the CPU and the BLAS's core type and environment. ``--rounds R``
(default 5), ``--quick`` (N = 64, 128; two rounds); run it under
MEMLAB_HIDE_CPU_FEATURES=avx512f to see the AVX2 path where AVX-512 is
hidden (auto then picks it).

    python experiments/matmul_tiles.py --ratio
"""

from __future__ import annotations

import os
import socket
import sys

import numpy as np

import memlab.cli
from memlab import matrix
from memlab.dataset import Dataset
from memlab.grid import Sweep, grid

RATIO_SIZES = (256, 512, 1024, 2048)


def sweep(quick: bool = False) -> list[Sweep]:
    """The ladder, the tile sweep and the panel-depth sweep (quick: small N)."""
    if quick:
        sizes, tiles, depths, repeat = [64, 128, 200], [2, 8, 32], [32, 256], 2
    else:
        sizes = [256, 512, 1000, 1024, 2000, 2048]
        tiles = [2, 4, 8, 16, 32, 64, 128]
        depths = [32, 64, 128, 256, 512]
        repeat = 3
    ladder = [
        {"n": n, "variant": variant}
        for n in sizes
        for variant in ("naive", "transposed", "tiled", "tiled_simd", "blas")
    ]
    return [
        Sweep(
            name="matmul_ladder", family="matrix", points=ladder, repeat=repeat, warmup=1,
            description="every multiply variant at each N",
        ),
        Sweep(
            name="matmul_tiles", family="matrix",
            points=grid(n=sizes, variant=["tiled"], tile=tiles), repeat=repeat, warmup=1,
            description="Drepper's tiled kernel over tile sizes (elements)",
        ),
        Sweep(
            name="matmul_simd_depth", family="matrix",
            points=grid(n=sizes, variant=["tiled_simd"], tile=depths), repeat=repeat, warmup=1,
            description="tiled_simd over the depth of its packed panels (elements)",
        ),
    ]


def ratio(sizes=RATIO_SIZES, rounds: int = 5, isas=None, target_seconds: float = 0.3) -> Dataset:
    """tiled_simd and BLAS side by side: one row per round, N and ISA (``isas``: every
    vector ISA this CPU runs, by default) with both rates and their ratios."""
    isas = [i for i in matrix.supported_isas() if i != "scalar"] if isas is None else list(isas)
    options = {"repeat": 1, "warmup": 1, "target_seconds": target_seconds}
    rows = []
    for round_ in range(rounds):
        for n in sizes:
            rng = np.random.default_rng(n)
            a, b, out = rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n)), np.zeros((n, n))
            for isa in isas:
                simd = matrix.multiply(n, "tiled_simd", isa=isa, a=a, b=b, out=out, **options)
                blas = matrix.multiply(n, "blas", a=a, b=b, out=out, **options)
                row = {"round": round_, "n": n, "isa": isa, "register_block": simd.context["register_block"],
                       "block_depth": simd.median("block_depth"), "block_rows": simd.median("block_rows"),
                       "block_cols": simd.median("block_cols"), "block_choice": simd.context["block_choice"],
                       "max_abs_error": max(simd.median("max_abs_error"), blas.median("max_abs_error"))}
                for name, m in (("simd", simd), ("blas", blas)):
                    row[f"{name}_GFLOP_per_s"] = m.median("GFLOP_per_s")
                    row[f"{name}_GFLOP_per_cpu_s"] = m.median("GFLOP_per_cpu_s")
                row["ratio"] = row["simd_GFLOP_per_s"] / row["blas_GFLOP_per_s"]
                row["ratio_per_cpu_s"] = row["simd_GFLOP_per_cpu_s"] / row["blas_GFLOP_per_cpu_s"]
                rows.append(row)
    return Dataset(rows)


def _load() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def format_ratio(dataset: Dataset, load_before: str = "", load_after: str = "") -> str:
    """The ratio table: one line per ISA and N, medians [min..max] over the rounds."""
    cpu = matrix.cpu_vector_facts()
    blas = matrix.blas_facts()
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    lines = [f"host {socket.gethostname()}: {model}, {cpu['vendor']} family {cpu['family']} model {cpu['model']}, "
             f"vectors execute {matrix.vector_execution_bits(cpu)} bits wide",
             f"BLAS: {blas['blas_library']} {blas['blas_version']}, core type {blas['blas_architecture'] or '?'}, "
             f"OPENBLAS_CORETYPE={blas['openblas_coretype'] or '(unset)'} "
             f"OPENBLAS_L2_SIZE={blas['openblas_l2_size'] or '(unset)'}; "
             f"MEMLAB_HIDE_CPU_FEATURES={os.environ.get('MEMLAB_HIDE_CPU_FEATURES') or '(unset)'}",
             f"load average before {load_before}, after {load_after}; "
             f"{len({r['round'] for r in dataset.rows})} interleaved rounds",
             f"{'isa':<7}{'N':>5}  {'blocks':<22}{'tiled_simd GFLOP/s':>24}{'OpenBLAS GFLOP/s':>24}"
             f"{'ratio':>22}{'ratio per CPU-s':>22}"]

    def cell(values, width, digits=3):
        v = np.asarray(values, dtype=float)
        return f"{np.median(v):.{digits}g} [{v.min():.{digits}g}..{v.max():.{digits}g}]".rjust(width)

    keys = []
    for row in dataset.rows:
        if (row["isa"], row["n"]) not in keys:
            keys.append((row["isa"], row["n"]))
    for isa, n in keys:
        rows = [r for r in dataset.rows if r["isa"] == isa and r["n"] == n]
        last = rows[-1]
        blocks = f"{last['register_block']} kc{int(last['block_depth'])} mc{int(last['block_rows'])} nc{int(last['block_cols'])}"
        lines.append(f"{isa:<7}{n:>5}  {blocks:<22}" + cell([r["simd_GFLOP_per_s"] for r in rows], 24)
                     + cell([r["blas_GFLOP_per_s"] for r in rows], 24)
                     + cell([r["ratio"] for r in rows], 22) + cell([r["ratio_per_cpu_s"] for r in rows], 22))
    return "\n".join(lines)


def ratio_main(argv: list[str]) -> int:
    quick = "--quick" in argv
    rounds = 2 if quick else 5
    if "--rounds" in argv:
        index = argv.index("--rounds")
        try:
            rounds = int(argv[index + 1])
        except (IndexError, ValueError):
            print("--rounds needs a whole number of rounds (1 to 100)", file=sys.stderr)
            return 2
        if not 1 <= rounds <= 100:
            print(f"--rounds {rounds} is outside 1..100", file=sys.stderr)
            return 2
    before = _load()
    dataset = ratio((64, 128) if quick else RATIO_SIZES, rounds, target_seconds=0.05 if quick else 0.3)
    print(format_ratio(dataset, before, _load()))
    return 0


if __name__ == "__main__":
    if "--ratio" in sys.argv[1:]:
        raise SystemExit(ratio_main(sys.argv[1:]))
    raise SystemExit(memlab.cli.script_main(sweep))
