"""Benchmark: what an unthrottled load thread loses at its chunk boundaries, and to what beside it.

Each round measures, on the load thread's CPU, one after the other:
- the bandwidth family reading alone (the reference of issue 20's 5% target);
- the same with a busy loop on the chaser's CPU (a CPU busy beside it, no
  memory traffic);
- ``loaded`` at zero delay for each chunk size given, with the chaser's list
  in L1 (16 KiB: a neighbour that misses nothing) and beyond the caches.
The medians over rounds are printed as ratios to the bandwidth family alone,
so that the cost of the chunk boundaries (bookkeeping, and the stream
stopping and starting), of a busy neighbour and of the chaser's misses can
be told apart. docs/loaded.md quotes a run.

Run: python experiments/loaded_chunk_cost.py [--rounds 7] [--chunks 65536,1048576]
                                             [--working-set-bytes N] [--out F]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from memlab import bandwidth, loaded
from memlab.dataset import Dataset
from memlab.placement import choose

SMALL_CHASER_BYTES = 16 << 10


def busy_neighbour(cpu: int) -> subprocess.Popen:
    """A Python busy loop pinned to ``cpu`` (register work, no memory traffic to speak of)."""
    child = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    time.sleep(0.3)  # started and spinning before the measurement
    return child


def measure(rounds: int, working_set: int, chunks: list[int], options: dict) -> Dataset:
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two CPUs: the chaser's and a load thread's")
    chaser_cpu, load_cpu = choose("cores", 2)
    sides: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        sides.setdefault(name, []).append(value)

    def reference() -> float:
        return bandwidth.run(working_set_bytes=working_set, op="read", threads=1, shared=False, pages="thp",
                             cpu=load_cpu, **options).median("GB_per_s_total")

    for index in range(rounds):
        note("bandwidth alone", reference())
        child = busy_neighbour(chaser_cpu)
        try:
            note("bandwidth beside a busy CPU", reference())
        finally:
            child.kill()
            child.wait()
        for chunk in chunks:
            for chaser, size in (("in L1", SMALL_CHASER_BYTES), ("beyond the caches", working_set)):
                m = loaded.run(working_set_bytes=size, load_working_set_bytes=working_set, load_threads=1,
                               load_op="read", delay_ns=0, load_chunk_bytes=chunk, **options)
                note(f"loaded, {chunk >> 10} KiB chunks, chaser {chaser}", m.median("load_GB_per_s"))
        print(f"round {index + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in sides.items()),
              flush=True)
    alone = statistics.median(sides["bandwidth alone"])
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    rows = []
    for what, values in sides.items():
        median = statistics.median(values)
        rows.append({"family": "loaded_chunk_cost", "what": what, "GB_per_s": median,
                     "spread": max(values) - min(values), "ratio": median / alone,
                     "working_set_bytes": working_set})
        print(f"{what:45s} {median:6.2f} GB/s (spread {max(values) - min(values):.2f})  ratio {median / alone:.3f}")
    print("load average:", load)
    return Dataset(rows, {"load_average": load, "rounds": rounds})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--chunks", default=f"{loaded.CHUNK_BYTES},{loaded.UNTHROTTLED_CHUNK_BYTES}",
                        help="comma-separated chunk sizes in bytes (multiples of 64)")
    parser.add_argument("--working-set-bytes", type=int, default=256 << 20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target-seconds", type=float, default=0.2)
    parser.add_argument("--out", help="write the rows here (.csv or .jsonl)")
    args = parser.parse_args(argv)
    try:
        chunks = [int(c) for c in args.chunks.split(",")]
    except ValueError:
        parser.error(f"--chunks={args.chunks!r}: comma-separated whole numbers of bytes")
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} must be at least 1")
    options = dict(repeat=args.repeat, warmup=1, target_seconds=args.target_seconds, counters=False)
    ds = measure(args.rounds, args.working_set_bytes, chunks, options)
    if args.out:
        ds.save(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
