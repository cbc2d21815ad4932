"""clear_harness: does the harness cost anything? memlab vs a bare C loop.

For every method and for 4 KiB and 2 MiB calls, clear a faulted THP region
(1 GiB; 256 MiB with --quick) with memlab's clear_order and with
experiments/clear_bare.c, a standalone program with its own loops and no
memlab code, compiled here with gcc -O2 -march=native. The two alternate
round by round so that both see the same machine; each pass is one sample.
The target: memlab within 5% of the bare loop for every method.

    python experiments/clear_harness.py --quick --out results/clear_harness-quick.csv
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from memlab import clear
from memlab.dataset import Dataset
from memlab.grid import Sweep, grid

HERE = Path(__file__).resolve().parent
EXTENTS = (4096, 2 << 20)


def sweep(quick: bool = False) -> Sweep:
    """memlab's side of the comparison alone: sequential clears per method and extent."""
    region = (256 if quick else 1024) << 20
    points = grid(region_bytes=[region], pages=["thp"], order=["sequential"],
                               method=list(clear.METHODS), extent_bytes=list(EXTENTS))
    return Sweep(name="clear_harness_quick" if quick else "clear_harness", family="clear_order",
                              points=points, repeat=5, warmup=1, target_seconds=0.0)


def build_bare(directory: Path) -> Path:
    """Compile clear_bare.c; return the executable."""
    binary = directory / "clear_bare"
    subprocess.run(["gcc", "-O2", "-march=native", "-Wall", "-Wextra", "-o", str(binary),
                    str(HERE / "clear_bare.c")], check=True)
    return binary


def bare_rates(binary: Path, region_bytes: int, method: str, extent_bytes: int, passes: int) -> list[tuple]:
    """(wall-clock GB/s, CPU-time GB/s) of each timed pass of the bare loop."""
    result = subprocess.run([str(binary), str(region_bytes), "thp", method, str(extent_bytes), str(passes)],
                            check=True, capture_output=True, text=True)
    rates = []
    for line in result.stdout.splitlines():
        words = line.split()
        if words and words[0] == "pass":
            rates.append((float(words[words.index("GB_per_s") + 1]), float(words[words.index("cpu_GB_per_s") + 1])))
    return rates


def memlab_rates(region_bytes: int, method: str, extent_bytes: int, passes: int) -> list[tuple]:
    """(wall-clock GB/s, CPU-time GB/s) of each sample (one pass each) of memlab's clear_order."""
    m = clear.order(region_bytes=region_bytes, pages="thp", order="sequential", method=method,
                    extent_bytes=extent_bytes, repeat=passes, warmup=1, target_seconds=0.0)
    return [(s["GB_per_s"], s["cpu_GB_per_s"]) for s in m.samples]


def _summary(prefix: str, values: list[float]) -> dict:
    return {prefix: statistics.median(values), f"{prefix}_min": min(values), f"{prefix}_max": max(values),
            f"{prefix}_samples": values}


def compare(quick: bool = False, rounds: int | None = None, passes: int | None = None) -> Dataset:
    """One row per method and extent: bare and memlab GB/s (median, min, max) and their ratio,
    by wall clock and by thread CPU time (which leaves out preemption on a busy machine)."""
    region = (256 if quick else 1024) << 20
    rounds = rounds or (2 if quick else 3)
    passes = passes or (5 if quick else 7)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_bare(Path(tmp))
        for method in clear.METHODS:
            for extent in EXTENTS:
                bare: list[tuple] = []
                harness: list[tuple] = []
                for _ in range(rounds):
                    bare += bare_rates(binary, region, method, extent, passes)
                    harness += memlab_rates(region, method, extent, passes)
                row = {"region_bytes": region, "method": method, "extent_bytes": extent}
                row.update(_summary("bare_GB_per_s", [wall for wall, _ in bare]))
                row.update(_summary("memlab_GB_per_s", [wall for wall, _ in harness]))
                row.update(_summary("bare_cpu_GB_per_s", [cpu for _, cpu in bare]))
                row.update(_summary("memlab_cpu_GB_per_s", [cpu for _, cpu in harness]))
                row["memlab_to_bare"] = row["memlab_GB_per_s"] / row["bare_GB_per_s"]
                row["memlab_to_bare_cpu"] = row["memlab_cpu_GB_per_s"] / row["bare_cpu_GB_per_s"]
                rows.append(row)
                print(f"{method:12s} {extent:8d}  wall: bare {row['bare_GB_per_s']:6.2f} "
                      f"[{row['bare_GB_per_s_min']:.2f}..{row['bare_GB_per_s_max']:.2f}] memlab "
                      f"{row['memlab_GB_per_s']:6.2f} [{row['memlab_GB_per_s_min']:.2f}..{row['memlab_GB_per_s_max']:.2f}]"
                      f" ratio {row['memlab_to_bare']:.3f}   cpu: bare {row['bare_cpu_GB_per_s']:6.2f} "
                      f"[{row['bare_cpu_GB_per_s_min']:.2f}..{row['bare_cpu_GB_per_s_max']:.2f}] memlab "
                      f"{row['memlab_cpu_GB_per_s']:6.2f} [{row['memlab_cpu_GB_per_s_min']:.2f}.."
                      f"{row['memlab_cpu_GB_per_s_max']:.2f}] ratio {row['memlab_to_bare_cpu']:.3f}", flush=True)
    return Dataset(rows=rows, metadata={"experiment": "clear_harness", "quick": quick, "rounds": rounds,
                                        "passes": passes, "command": " ".join(sys.argv)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB, fewer rounds (under 30 s)")
    parser.add_argument("--out", help="CSV path for the comparison")
    parser.add_argument("--rounds", type=int, help="alternations of bare and memlab per point")
    parser.add_argument("--passes", type=int, help="timed passes per round")
    args = parser.parse_args(argv)
    dataset = compare(quick=args.quick, rounds=args.rounds, passes=args.passes)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        dataset.save(args.out)
        print(f"{len(dataset)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
