"""Benchmark: memlab's chase against the same list walked by a bare C loop.

The target of issue 3: at every working set, memlab's ns per element agrees
within 2% with experiments/chase_bare.c (same list, same pages, a plain
`p = *p` loop timed by clock_gettime, no Python, no counters). Both are
pinned to the same CPU and measured alternately, point by point, so that a
noisy neighbour hits both alike.

Run: python experiments/chase_vs_bare.py [--quick] [--order random] [--npad 7]
                                          [--pages 4k] [--cpu 1] [--out results/chase_vs_bare.csv]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from memlab import chase
from memlab.dataset import Dataset

HERE = Path(__file__).resolve().parent


def compile_bare(directory: str) -> str:
    """Compile chase_bare.c with the flags memlab's core uses; the binary's path."""
    compiler = os.environ.get("CC") or shutil.which("gcc") or "cc"
    binary = os.path.join(directory, "chase_bare")
    subprocess.run([compiler, "-O2", "-march=native", "-Wall", "-Wextra", "-o", binary,
                    str(HERE / "chase_bare.c")], check=True)
    return binary


def bare_samples(binary: str, working_set: int, npad: int, order: str, pages: str, seed: int,
                 samples: int, target_ms: float, cpu: int | None) -> list[tuple[float, float]]:
    """(wall ns, on-CPU ns) per element of each sample of the bare walk."""
    command = [binary, str(working_set), str(npad), order, pages, str(seed), str(samples), str(target_ms)]
    preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    result = subprocess.run(command, check=True, capture_output=True, text=True, preexec_fn=preexec)
    return [(float(a), float(b)) for a, b in (line.split() for line in result.stdout.splitlines())]


def compare(sizes: list[int], npad: int, order: str, pages: str, repeat: int, target_ms: float,
            cpu: int | None, rounds: int) -> Dataset:
    """One row per working set: memlab and bare medians, their ratio and spreads."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        binary = compile_bare(tmp)
        for size in sizes:
            memlab_values: list[float] = []
            bare_values: list[float] = []
            memlab_cpu: list[float] = []
            bare_cpu: list[float] = []
            for _ in range(rounds):
                for wall, on_cpu in bare_samples(binary, size, npad, order, pages, 1, repeat, target_ms, cpu):
                    bare_values.append(wall)
                    bare_cpu.append(on_cpu)
                m = chase.run(working_set_bytes=size, npad=npad, order=order, pages=pages, seed=1,
                              repeat=repeat, warmup=1, target_seconds=target_ms / 1000, cpu=cpu,
                              counters=False)
                memlab_values += [s["ns_per_element"] for s in m.samples]
                memlab_cpu += [s["cpu_ns_per_element"] for s in m.samples]
            memlab_ns, bare_ns = statistics.median(memlab_values), statistics.median(bare_values)
            memlab_cpu_ns, bare_cpu_ns = statistics.median(memlab_cpu), statistics.median(bare_cpu)
            row = {
                "working_set_bytes": size, "npad": npad, "order": order, "pages": pages,
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
            print(f"{size:>12} B  memlab {memlab_ns:9.3f} ns [{row['memlab_min']:.3f}..{row['memlab_max']:.3f}]"
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
    parser.add_argument("--out", default="results/chase_vs_bare.csv")
    args = parser.parse_args(argv)
    if args.quick:
        sizes, target_ms = [1 << 14, 1 << 18, 1 << 22, 1 << 26], 50.0
    else:
        sizes, target_ms = [1 << k for k in range(10, args.max_log2 + 1, 2)], 100.0
    dataset = compare(sizes, args.npad, args.order, args.pages, args.repeat, target_ms, args.cpu, args.rounds)
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
