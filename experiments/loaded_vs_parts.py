"""Benchmark: the loaded family's two ends against the families it is built from.

The targets of issue 20: with no load, the chaser's ns per element equals
the chase family's at the same working set within 2%; at zero delay, the
load's GB/s equals the bandwidth family's rate for the same threads within
5%. Each round measures the pair side by side (chase, then loaded without
load; bandwidth, then loaded at zero delay), on the same CPUs, so that the
machine's load hits both alike; the medians over rounds are compared.

Run: python experiments/loaded_vs_parts.py [--rounds 7] [--working-set-bytes N]
                                           [--out results/loaded_vs_parts.csv]
"""

from __future__ import annotations

import argparse
import os
import statistics

from memlab import bandwidth, chase, loaded
from memlab.dataset import Dataset
from memlab.placement import choose


def on_cpu_ns_per_element(m) -> float:
    """The walking thread's CPU time per element (median over samples): the latency while it ran."""
    return statistics.median(s["thread_cpu_ns"] / s["steps_per_chain"] for s in m.samples)


def compare(rounds: int, working_set: int, repeat: int, target_seconds: float) -> Dataset:
    """Two rows: the idle latency (chase vs loaded) and the unthrottled load (bandwidth vs loaded)."""
    load_threads = max(0, len(os.sched_getaffinity(0)) - 1)
    cpus = choose("cores", load_threads + 1)
    options = dict(repeat=repeat, warmup=1, target_seconds=target_seconds, counters=False)
    sides: dict[str, list[float]] = {k: [] for k in ("chase", "loaded_idle", "chase_on_cpu", "loaded_idle_on_cpu",
                                                     "bandwidth", "loaded_load",
                                                     "bandwidth_on_cpu", "loaded_load_on_cpu")}
    for index in range(rounds):
        reference = chase.run(working_set_bytes=working_set, npad=7, order="random", pages="thp", cpu=cpus[0],
                              **options)
        ours = loaded.run(working_set_bytes=working_set, load_threads=0, **options)
        sides["chase"].append(reference.median("ns_per_element"))
        sides["loaded_idle"].append(ours.median("ns_per_element"))
        sides["chase_on_cpu"].append(on_cpu_ns_per_element(reference))
        sides["loaded_idle_on_cpu"].append(on_cpu_ns_per_element(ours))
        if load_threads:
            # the same CPUs as loaded's load threads: one thread goes where loaded puts it
            where = dict(cpu=cpus[1]) if load_threads == 1 else dict(placement="cores")
            reference = bandwidth.run(working_set_bytes=working_set, op="read", threads=load_threads,
                                      shared=False, pages="thp", **where, **options)
            ours = loaded.run(working_set_bytes=working_set, load_working_set_bytes=working_set,
                              load_threads=load_threads, load_op="read", delay_ns=0, **options)
            sides["bandwidth"].append(reference.median("GB_per_s_total"))
            sides["loaded_load"].append(ours.median("load_GB_per_s"))
            # on the CPU: over the threads' CPU time (the load's CPU fraction is of its whole run)
            sides["bandwidth_on_cpu"].append(reference.median("on_cpu_GB_per_s") * load_threads)
            sides["loaded_load_on_cpu"].append(statistics.median(
                s["load_GB_per_s"] / s["load_cpu_fraction"] for s in ours.samples))
        print(f"round {index + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in sides.items() if v),
              flush=True)
    rows = []
    for what, ours, theirs, unit in (("idle latency", "loaded_idle", "chase", "ns_per_element"),
                                     ("idle latency on CPU", "loaded_idle_on_cpu", "chase_on_cpu", "ns_per_element"),
                                     ("unthrottled load", "loaded_load", "bandwidth", "GB_per_s"),
                                     ("unthrottled load on CPU", "loaded_load_on_cpu", "bandwidth_on_cpu",
                                      "GB_per_s")):
        if not sides[ours]:
            continue
        row = {"family": "loaded_vs_parts", "what": what, "unit": unit, "working_set_bytes": working_set,
               "load_threads": load_threads, "loaded": statistics.median(sides[ours]),
               "reference": statistics.median(sides[theirs]), "reference_family": theirs.split("_")[0],
               "loaded_spread": max(sides[ours]) - min(sides[ours]),
               "reference_spread": max(sides[theirs]) - min(sides[theirs])}
        row["ratio"] = row["loaded"] / row["reference"]
        rows.append(row)
        print(f"{what}: loaded {row['loaded']:.2f} (spread {row['loaded_spread']:.2f}), {theirs} "
              f"{row['reference']:.2f} (spread {row['reference_spread']:.2f}) {unit}, ratio {row['ratio']:.3f}")
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print("load average:", load)
    return Dataset(rows, {"load_average": load, "rounds": rounds})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--working-set-bytes", type=int, default=loaded.beyond_caches_bytes())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target-seconds", type=float, default=0.2)
    parser.add_argument("--out", help="write the rows here (.csv or .jsonl)")
    args = parser.parse_args(argv)
    ds = compare(args.rounds, args.working_set_bytes, args.repeat, args.target_seconds)
    if args.out:
        ds.save(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
