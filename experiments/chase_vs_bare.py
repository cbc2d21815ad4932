"""Benchmark: memlab's chase against the same list walked by a bare C loop.

The target: at every working set, memlab's ns per element agrees within 2%
with experiments/chase_bare.c (same list, same pages, same layout, a plain
`p = *p` loop timed by clock_gettime, no Python, no counters). Both are
pinned to the same CPU (or, with threads, place their threads the same way)
and measured alternately, point by point, so that a noisy neighbour hits
both alike. The one-table comparison of every family is experiments/parity.py
(whose compiling and running of chase_bare this script uses); this one goes
further for the chase: sweeps of working sets and layout variants.

Variants (--variant, repeatable): plain; threads (2 threads on one list,
128-byte elements, fastest thread); misaligned (every next pointer straddles
two lines: 60 bytes off); critical_word (pointer in the last word);
distance (elements 2 slots apart). --levels measures one working set in
L1d, one in L2 and one in main memory (sizes from sysfs) instead of a sweep.

Run: python experiments/chase_vs_bare.py [--quick] [--order random] [--npad 7]
                                          [--pages 4k] [--cpu 1] [--out results/chase_vs_bare.csv]
     python experiments/chase_vs_bare.py --levels --variant threads --variant misaligned ...
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from parity import chase_bare_samples, compile_programs

from memlab import chase
from memlab.dataset import Dataset
from memlab.machine import cache_sizes

#: variant -> chase parameters beyond working_set_bytes, npad, order, pages, seed.
VARIANTS: dict[str, dict[str, int]] = {
    "plain": {},
    "threads": {"threads": 2, "npad": 15},
    "misaligned": {"misalign_bytes": 60},
    "critical_word": {"pointer_word": 7},
    "distance": {"element_distance": 2},
}


def compile_bare(directory: str) -> str:
    """Compile chase_bare.c (parity.py's flags: those memlab's core uses); the binary's path."""
    return compile_programs(directory, ["chase_bare"])["chase_bare"]


bare_samples = chase_bare_samples


def level_sizes(dram_bytes: int) -> list[tuple[str, int]]:
    """One working set per level: half the L1d, half the L2, and dram_bytes (main memory)."""
    sizes = cache_sizes()
    return [("L1", sizes.get("L1d", 32 << 10) // 2), ("L2", sizes.get("L2", 1 << 20) // 2), ("DRAM", dram_bytes)]


def compare(sizes: list[int], npad: int, order: str, pages: str, repeat: int, target_ms: float,
            cpu: int | None, rounds: int, variant: str = "plain", labels: list[str] | None = None) -> Dataset:
    """One row per working set: memlab and bare medians, their ratio and spreads."""
    rows = []
    layout = dict(VARIANTS[variant])
    npad = layout.pop("npad", npad)
    threads = layout.get("threads", 1)
    with tempfile.TemporaryDirectory() as tmp:
        binary = compile_bare(tmp)
        for index, size in enumerate(sizes):
            memlab_values: list[float] = []
            bare_values: list[float] = []
            memlab_cpu: list[float] = []
            bare_cpu: list[float] = []
            for _ in range(rounds):
                for wall, on_cpu in bare_samples(binary, size, npad, order, pages, 1, repeat, target_ms, cpu,
                                                 layout):
                    bare_values.append(wall)
                    bare_cpu.append(on_cpu)
                placement = {"cpu": cpu} if threads == 1 else {"walk_cpu": -1 if cpu is None else cpu}
                m = chase.run(working_set_bytes=size, npad=npad, order=order, pages=pages, seed=1,
                              repeat=repeat, warmup=1, target_seconds=target_ms / 1000, counters=False,
                              **placement, **layout)
                memlab_values += [s["ns_per_element"] for s in m.samples]
                memlab_cpu += [s["cpu_ns_per_element"] for s in m.samples]
            memlab_ns, bare_ns = statistics.median(memlab_values), statistics.median(bare_values)
            memlab_cpu_ns, bare_cpu_ns = statistics.median(memlab_cpu), statistics.median(bare_cpu)
            row = {
                "variant": variant, "level": labels[index] if labels else "",
                "working_set_bytes": size, "npad": npad, "order": order, "pages": pages, **layout,
                "memlab_ns_per_element": memlab_ns, "bare_ns_per_element": bare_ns,
                "memlab_over_bare": memlab_ns / bare_ns,
                "memlab_over_bare_of_minima": min(memlab_values) / min(bare_values),
                "memlab_min": min(memlab_values), "memlab_max": max(memlab_values),
                "bare_min": min(bare_values), "bare_max": max(bare_values),
                "memlab_cpu_ns_per_element": memlab_cpu_ns, "bare_cpu_ns_per_element": bare_cpu_ns,
                "memlab_over_bare_on_cpu": memlab_cpu_ns / bare_cpu_ns,
                "samples_each": len(memlab_values),
            }
            rows.append(row)
            print(f"{variant:>13} {row['level']:>4} {size:>12} B  memlab {memlab_ns:9.3f} ns [{row['memlab_min']:.3f}..{row['memlab_max']:.3f}]"
                  f"  bare {bare_ns:9.3f} ns [{row['bare_min']:.3f}..{row['bare_max']:.3f}]"
                  f"  memlab/bare {row['memlab_over_bare']:.4f} (minima {row['memlab_over_bare_of_minima']:.4f},"
                  f" on-CPU {memlab_cpu_ns:.3f}/{bare_cpu_ns:.3f} = {row['memlab_over_bare_on_cpu']:.4f})",
                  flush=True)
    return Dataset(rows, metadata={"experiment": "chase_vs_bare"})


def main(argv: list[str] | None = None) -> int:
    """Command line; prints one line per working set and writes the dataset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four working sets, short samples")
    parser.add_argument("--order", default="random", choices=["sequential", "random"])
    parser.add_argument("--npad", type=int, default=7)
    parser.add_argument("--pages", default="4k", choices=["4k", "thp"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of bare and memlab per size")
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--max-log2", type=int, default=28)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS),
                        help="layout or thread variant (repeatable; default plain)")
    parser.add_argument("--levels", action="store_true", help="one working set in L1d, L2 and main memory")
    parser.add_argument("--dram-bytes", type=int, default=256 << 20, help="the main-memory working set of --levels")
    parser.add_argument("--out", default="results/chase_vs_bare.csv")
    args = parser.parse_args(argv)
    labels = None
    if args.levels:
        labels, sizes = map(list, zip(*level_sizes(args.dram_bytes)))
        target_ms = 50.0 if args.quick else 100.0
    elif args.quick:
        sizes, target_ms = [1 << 14, 1 << 18, 1 << 22, 1 << 26], 50.0
    else:
        sizes, target_ms = [1 << k for k in range(10, args.max_log2 + 1, 2)], 100.0
    rows = []
    for variant in args.variant or ["plain"]:
        rows += compare(sizes, args.npad, args.order, args.pages, args.repeat, target_ms, args.cpu, args.rounds,
                        variant, labels).rows
    dataset = Dataset(rows, metadata={"experiment": "chase_vs_bare"})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    dataset.save(args.out)
    worst = max(abs(row["memlab_over_bare"] - 1) for row in dataset)
    worst_minima = max(abs(row["memlab_over_bare_of_minima"] - 1) for row in dataset)
    worst_cpu = max(abs(row["memlab_over_bare_on_cpu"] - 1) for row in dataset)
    print(f"largest |memlab/bare - 1|: wall medians {worst:.2%}, wall minima {worst_minima:.2%}, "
          f"on-CPU medians {worst_cpu:.2%} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
