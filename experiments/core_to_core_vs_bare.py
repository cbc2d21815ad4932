"""Benchmark: memlab's core-to-core round trip against a bare ping-pong loop (multichase style).

The target of issue 20: for every ordered pair of CPUs, memlab's
``round_trip_ns`` agrees within 5% with experiments/core_to_core_bare.c, a
separate program that pins two threads and times a fixed number of round
trips of one token as a whole (no chunks, no stop flag). The bare program's
sample is as long as one of memlab's chunks (200 round trips), and the
median over its samples is compared with memlab's median over chunks; both
run alternately, pair by pair, so that a noisy neighbour hits both alike,
and each bare run is as long as the memlab sample before it (unless
--samples fixes its count). experiments/parity.py runs the same comparison (the
first pair, or every pair) beside every other family's; this script compiles
and runs the bare program through it.
Both take turns over the same number of lines (--lines, memlab's default),
each on a page of its own: one line's round trip depends on its address by
up to 10% on the development guest, so with --lines 1 the two programs,
each with a line of its own, differ by that much whatever their method.

Run: python experiments/core_to_core_vs_bare.py [--method cas] [--rounds 5] [--lines 256]
                                                 [--out results/core_to_core_vs_bare.csv]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from parity import compile_programs, core_to_core_bare_samples

from memlab import core_to_core
from memlab.dataset import Dataset

ROUND_TRIPS_PER_SAMPLE = 200  # memlab's chunk


def compile_bare(directory: str) -> str:
    """Compile core_to_core_bare.c (parity.py's flags); the binary's path."""
    return compile_programs(directory, ["core_to_core_bare"])["core_to_core_bare"]


bare_samples = core_to_core_bare_samples


def compare(method: str, rounds: int, samples: int, target_seconds: float, lines: int) -> Dataset:
    """One row per ordered pair: memlab and bare medians, their ratio and spreads."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        binary = compile_bare(tmp)
        for cpu_a, cpu_b in core_to_core.pairs():
            ours: list[float] = []
            theirs: list[float] = []
            for _ in range(rounds):
                m = core_to_core.run(cpu_a=cpu_a, cpu_b=cpu_b, method=method, lines=lines, repeat=1, warmup=0,
                                     target_seconds=target_seconds, counters=False)
                ours.append(m.median("round_trip_ns"))
                count = samples or max(lines, round(target_seconds * 1e9 / (ours[-1] * ROUND_TRIPS_PER_SAMPLE)))
                theirs.append(statistics.median(
                    bare_samples(binary, cpu_a, cpu_b, method, ROUND_TRIPS_PER_SAMPLE, count, lines)))
            row = {"family": "core_to_core_vs_bare", "cpu_a": cpu_a, "cpu_b": cpu_b, "method": method,
                   "lines": lines,
                   "memlab_round_trip_ns": statistics.median(ours),
                   "bare_round_trip_ns": statistics.median(theirs),
                   "memlab_spread_ns": max(ours) - min(ours), "bare_spread_ns": max(theirs) - min(theirs)}
            row["ratio"] = row["memlab_round_trip_ns"] / row["bare_round_trip_ns"]
            rows.append(row)
            print(f"cpu {cpu_a} -> {cpu_b} {method}, {lines} lines: memlab {row['memlab_round_trip_ns']:.1f} ns "
                  f"(spread {row['memlab_spread_ns']:.1f}), bare {row['bare_round_trip_ns']:.1f} ns "
                  f"(spread {row['bare_spread_ns']:.1f}), ratio {row['ratio']:.3f}", flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    return Dataset(rows, {"load_average": load, "rounds": rounds})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=core_to_core.METHODS, default="cas")
    parser.add_argument("--rounds", type=int, default=5, help="alternations per pair")
    parser.add_argument("--samples", type=int, default=0,
                        help="bare samples per round (default: as long as memlab's sample)")
    parser.add_argument("--target-seconds", type=float, default=0.2, help="memlab's sample")
    parser.add_argument("--lines", type=int, default=core_to_core.DEFAULT_LINES,
                        help="lines both take turns over, one per page")
    parser.add_argument("--out", help="write the rows here (.csv or .jsonl)")
    args = parser.parse_args(argv)
    if not 1 <= args.lines <= core_to_core.MAX_LINES:
        parser.error(f"--lines={args.lines} must be 1 to {core_to_core.MAX_LINES}")
    ds = compare(args.method, args.rounds, args.samples, args.target_seconds, args.lines)
    print("load average:", " ".join(ds.metadata["load_average"]))
    if args.out:
        ds.save(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
