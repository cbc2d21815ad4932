"""Benchmark: memlab's bandwidth loops against bare C loops and other tools' loops.

Three parts, each measured alternately (memlab, then the bare program, then
memlab ...) pinned to one CPU, so that a noisy neighbour hits both alike:

1. ``levels``: read, write and copy at an L1, an L2, a last-level-cache and a
   main-memory working set, memlab against the same kind of loop in
   experiments/bandwidth_bare.c run from the shell (issue 14's target: within
   2%).
2. ``tools``: at the main-memory working set, memlab's best read, write and
   copy (the widest width and SSE2, or every width with ``--all-widths``;
   normal and non-temporal stores) against loops in the
   style of STREAM (copy, triad), tinymembench (SSE2 non-temporal fill and
   copy) and glibc's memset and memcpy, all in bandwidth_bare.c. Compared as
   traffic (bytes read plus bytes written per second, STREAM's count).
3. ``l1``: the read plateau in L1 at every width, in bytes per cycle of the
   calibrated clock, against this core's L1d load limit for that width from
   the machine model (``memlab.machine_model``: ports x width, capped by the
   core's bytes per cycle; "unknown" for a CPU the model does not list).

experiments/parity.py runs the first part's comparison beside every other
family's in one table (and a copy between two separate mappings); this
script compiles and runs bandwidth_bare through it and adds the other tools'
loops and the L1 plateau at every width.

Rates are medians of samples; "on-CPU" rates divide by the thread's CPU time
instead of wall time, which leaves out time other processes took the CPU.
The load average is printed with each part. In main memory both sides take
samples of about a second (``--dram-target-ms``): the bare program times
whole passes, and samples of equal length see the same mix of bursts of
other processes' memory traffic (short samples of a bursty rate have a lower
median than long ones).

Run: python experiments/bandwidth_vs_bare.py [--quick] [--cpu 1] [--rounds 3] [--repeat 5]
                                             [--parts levels,tools,l1] [--out results/bandwidth_vs_bare.csv]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from parity import bandwidth_bare_samples, compile_programs

from memlab import bandwidth as bw
from memlab import machine, machine_model
from memlab.dataset import Dataset
from memlab.measure import core_ghz

TOOLS = ("stream_copy", "stream_triad", "tmb_fill_nt", "tmb_copy_nt", "memset", "memcpy")


def compile_bare(directory: str) -> str:
    """Compile bandwidth_bare.c (parity.py's flags: -O3 -march=native, loops kept as loops); the binary's path."""
    return compile_programs(directory, ["bandwidth_bare"])["bandwidth_bare"]


def load_average() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def bare(binary: str, mode: str, width: str, size: int, samples: int, target_ms: float,
         cpu: int) -> tuple[list[float], list[float]]:
    """Traffic GB/s per sample of the bare program: (wall, on-CPU)."""
    return bandwidth_bare_samples(binary, mode, width, size, samples, target_ms, cpu)


def memlab(op: str, width: str, stores: str, size: int, repeat: int, target_ms: float,
           cpu: int) -> tuple[list[float], list[float]]:
    """Traffic GB/s per sample of memlab.bandwidth: (wall, on-CPU)."""
    m = bw.run(working_set_bytes=size, op=op, width=width, stores=stores, cpu=cpu, repeat=repeat,
               warmup=1, target_seconds=target_ms / 1000, counters=False)
    scale = 2.0 if op == "copy" else 1.0  # memlab counts bytes copied; traffic is read + written
    return ([s["GB_per_s"] * scale for s in m.samples], [s["on_cpu_GB_per_s"] * scale for s in m.samples])


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def level_sizes(quick: bool) -> list[tuple[str, int]]:
    """An L1, L2, last-level and main-memory working set (half of each cache, 4x the last)."""
    caches = machine.cache_sizes()
    data = sorted((size, name) for name, size in caches.items() if not name.endswith("i"))
    levels = [(name, size // 2) for size, name in data]
    largest = data[-1][0] if data else 32 << 20
    memory = max(256 << 20, 4 * largest)
    if quick:
        memory = max(64 << 20, 2 * largest)
    names = ["L1", "L2", "LLC"] if len(levels) >= 3 else [n for n, _ in levels]
    picked = [(label, levels[i][1] if label != "LLC" else levels[-1][1]) for i, label in enumerate(names)]
    picked.append(("DRAM", memory))
    return [(label, max(1024, size // 1024 * 1024)) for label, size in picked]


def part_levels(binary, args, width) -> list[dict]:
    rows = []
    print(f"== levels: memlab vs bare at each cache level (width {width}, CPU {args.cpu}, "
          f"load average {load_average()})", flush=True)
    for level, size in level_sizes(args.quick):
        target_ms = args.dram_target_ms if level == "DRAM" else args.target_ms
        for op in ("read", "write", "copy"):
            mw, mc, bwall, bcpu = [], [], [], []
            for round_index in range(args.rounds):
                order = (0, 1) if round_index % 2 == 0 else (1, 0)
                for which in order:
                    if which == 0:
                        w, c = memlab(op, width, "normal", size, args.repeat, target_ms, args.cpu)
                        mw += w
                        mc += c
                    else:
                        w, c = bare(binary, op, width, size, args.repeat, target_ms, args.cpu)
                        bwall += w
                        bcpu += c
            row = {"part": "levels", "level": level, "working_set_bytes": size, "op": op, "width": width,
                   "memlab_GB_per_s": statistics.median(mw), "bare_GB_per_s": statistics.median(bwall),
                   "memlab_on_cpu_GB_per_s": statistics.median(mc), "bare_on_cpu_GB_per_s": statistics.median(bcpu),
                   "memlab_min": min(mw), "memlab_max": max(mw), "bare_min": min(bwall), "bare_max": max(bwall),
                   "samples_each": len(mw), "load_average": load_average()}
            row["ratio_wall"] = row["memlab_GB_per_s"] / row["bare_GB_per_s"]
            row["ratio_on_cpu"] = row["memlab_on_cpu_GB_per_s"] / row["bare_on_cpu_GB_per_s"]
            row["ratio_of_maxima"] = max(mw) / max(bwall)
            row["ratio_of_means_on_cpu"] = statistics.fmean(mc) / statistics.fmean(bcpu)
            rows.append(row)
            print(f"{level:>5} {size:>12} B {op:>5}: memlab {row['memlab_GB_per_s']:8.2f} "
                  f"[{min(mw):.2f}..{max(mw):.2f}]  bare {row['bare_GB_per_s']:8.2f} [{min(bwall):.2f}..{max(bwall):.2f}] "
                  f"GB/s  memlab/bare wall {row['ratio_wall']:.4f}, on-CPU {row['ratio_on_cpu']:.4f} "
                  f"({row['memlab_on_cpu_GB_per_s']:.2f}/{row['bare_on_cpu_GB_per_s']:.2f}), "
                  f"best samples {row['ratio_of_maxima']:.4f}, means on-CPU {row['ratio_of_means_on_cpu']:.4f}",
                  flush=True)
    return rows


def part_tools(binary, args, widths) -> list[dict]:
    size = level_sizes(args.quick)[-1][1]
    print(f"== tools: traffic GB/s at {size} B (main memory), CPU {args.cpu}, load average {load_average()}",
          flush=True)
    candidates = [("memlab", "read", w, "normal") for w in widths]
    candidates += [("memlab", op, w, stores) for op in ("write", "copy") for stores in bw.STORES for w in widths]
    candidates += [("bare", tool, "-", "-") for tool in TOOLS]
    results: dict[tuple, tuple[list, list]] = {c: ([], []) for c in candidates}
    for round_index in range(args.rounds):
        ordered = candidates if round_index % 2 == 0 else candidates[::-1]
        for who, op, width, stores in ordered:
            if who == "memlab":
                w, c = memlab(op, width, stores, size, args.repeat, args.dram_target_ms, args.cpu)
            else:
                w, c = bare(binary, op, "sse2", size, args.repeat, args.dram_target_ms, args.cpu)
            results[(who, op, width, stores)][0].extend(w)
            results[(who, op, width, stores)][1].extend(c)
    rows = []
    for (who, op, width, stores), (wall, on_cpu) in results.items():
        name = f"memlab {op} {width} {stores}" if who == "memlab" else op
        row = {"part": "tools", "who": who, "loop": name, "op": op, "width": width, "stores": stores,
               "working_set_bytes": size, "traffic_GB_per_s": statistics.median(wall),
               "traffic_min": min(wall), "traffic_max": max(wall),
               "on_cpu_traffic_GB_per_s": statistics.median(on_cpu), "samples": len(wall),
               "load_average": load_average()}
        rows.append(row)
        print(f"{name:>32}: {row['traffic_GB_per_s']:7.2f} GB/s [{min(wall):.2f}..{max(wall):.2f}]  "
              f"on-CPU {row['on_cpu_traffic_GB_per_s']:7.2f}", flush=True)

    def best(predicate, key="on_cpu_traffic_GB_per_s"):
        chosen = [r for r in rows if predicate(r)]
        return max(chosen, key=lambda r: r[key])

    for title, mine, theirs in (
        ("read", lambda r: r["who"] == "memlab" and r["op"] == "read", None),
        ("write", lambda r: r["who"] == "memlab" and r["op"] == "write",
         lambda r: r["loop"] in ("tmb_fill_nt", "memset")),
        ("copy", lambda r: r["who"] == "memlab" and r["op"] == "copy",
         lambda r: r["loop"] in ("stream_copy", "tmb_copy_nt", "memcpy", "stream_triad")),
    ):
        m = best(mine)
        line = f"best memlab {title}: {m['loop']} {m['on_cpu_traffic_GB_per_s']:.2f} GB/s on-CPU " \
               f"({m['traffic_GB_per_s']:.2f} wall)"
        if theirs is not None:
            t = best(theirs)
            line += (f"; best other: {t['loop']} {t['on_cpu_traffic_GB_per_s']:.2f} on-CPU "
                     f"({t['traffic_GB_per_s']:.2f} wall); memlab/other on-CPU "
                     f"{m['on_cpu_traffic_GB_per_s'] / t['on_cpu_traffic_GB_per_s']:.3f}, wall "
                     f"{m['traffic_GB_per_s'] / t['traffic_GB_per_s']:.3f}")
        print(line, flush=True)
    return rows


def part_l1(binary, args, widths) -> list[dict]:
    size = level_sizes(args.quick)[0][1]
    ghz = core_ghz()
    model = machine_model.core_model(machine.collect(include_core=False))
    print(f"== l1: read plateau at {size} B against this core's L1d load limit ({model.name}; "
          f"core clock {ghz:.3f} GHz, CPU {args.cpu}, load average {load_average()})", flush=True)
    rows = []
    for width in widths:
        mc, bc = [], []
        for _ in range(args.rounds):
            mc += memlab("read", width, "normal", size, args.repeat, args.target_ms, args.cpu)[1]
            bc += bare(binary, "read", width, size, args.repeat, args.target_ms, args.cpu)[1]
        limit = model.l1d_bytes_per_cycle("read", bw.VECTOR_BYTES[width])
        memlab_bpc, bare_bpc = statistics.median(mc) / ghz, statistics.median(bc) / ghz
        row = {"part": "l1", "width": width, "working_set_bytes": size, "memlab_bytes_per_cycle": memlab_bpc,
               "memlab_best_bytes_per_cycle": max(mc) / ghz, "bare_bytes_per_cycle": bare_bpc,
               "microarchitecture": model.name,
               "load_limit_bytes_per_cycle": limit if limit is not None else float("nan"),
               "fraction_of_load_limit": memlab_bpc / limit if limit else float("nan"),
               "core_GHz": ghz, "load_average": load_average()}
        rows.append(row)
        against = (f"load limit {limit} B/cycle ({row['fraction_of_load_limit']:.0%})" if limit
                   else "load limit unknown for this CPU")
        print(f"{width:>7}: memlab {memlab_bpc:6.1f} B/cycle on-CPU (best sample {max(mc) / ghz:6.1f}), "
              f"bare {bare_bpc:6.1f}; {against}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line: prints one line per point and writes the dataset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller main-memory set, the widest width only")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3, help="alternations of memlab and bare per point")
    parser.add_argument("--repeat", type=int, default=5, help="samples per run")
    parser.add_argument("--target-ms", type=float, default=100.0, help="duration of one sample in the caches")
    parser.add_argument("--dram-target-ms", type=float, default=1000.0,
                        help="duration of one sample in main memory: the bare loop times whole passes, "
                             "so both sides get samples of a few passes and see the same mix of "
                             "other processes' memory traffic")
    parser.add_argument("--parts", default="levels,tools,l1")
    parser.add_argument("--all-widths", action="store_true",
                        help="tools: memlab at every width (default: the widest and SSE2)")
    parser.add_argument("--out", default="results/bandwidth_vs_bare.csv")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    unknown = set(parts) - {"levels", "tools", "l1"}
    if unknown:
        parser.error(f"--parts: unknown part(s) {', '.join(sorted(unknown))}")
    widest = bw.widest_width()
    widths = [widest] if args.quick else bw.supported_widths()
    tool_widths = widths if args.all_widths else sorted({widest, "sse2"} & set(widths), key=widths.index)
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            binary = compile_bare(tmp)
            if "levels" in parts:
                rows += part_levels(binary, args, widest)
            if "tools" in parts:
                rows += part_tools(binary, args, tool_widths)
            if "l1" in parts:
                rows += part_l1(binary, args, widths)
    finally:  # the parts finished before a Ctrl-C or a failure are kept
        if rows:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Dataset(rows, metadata={"experiment": "bandwidth_vs_bare", "cpu": args.cpu,
                                    "machine": machine.collect(include_core=False)}).save(args.out)
    levels = [r for r in rows if r["part"] == "levels"]
    if levels:
        worst = max(levels, key=lambda r: abs(r["ratio_on_cpu"] - 1))
        worst_wall = max(levels, key=lambda r: abs(r["ratio_wall"] - 1))
        print(f"largest |memlab/bare - 1|: on-CPU {abs(worst['ratio_on_cpu'] - 1):.2%} "
              f"({worst['level']} {worst['op']}), wall {abs(worst_wall['ratio_wall'] - 1):.2%} "
              f"({worst_wall['level']} {worst_wall['op']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
