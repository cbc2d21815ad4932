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
"""

from __future__ import annotations

import memlab.cli
from memlab.grid import Sweep, grid


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


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
