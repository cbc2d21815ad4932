"""memlab's pipe rates against a minimal standalone writer | reader pair.

The control is experiments/pipe_pair/pipe_pair.c, compiled here with gcc and
run from the shell exactly as the article ran its programs:

    taskset -c W ./pipe_pair write [flags] | taskset -c R ./pipe_pair read [flags]

For every ladder rung and placement the script first lets memlab find a
transfer size whose sample lasts --seconds, then alternates standalone and
memlab samples of that same size (so both see the same machine noise) and
reports the medians, their ratio memlab / standalone and the median of the
per-pair ratios (each memlab sample over the standalone sample just before
it, which saw the same load). The target: within 5%. experiments/parity.py
puts the same rungs in its one table beside every other family; this script
builds and runs the pair through it and adds the per-pair ratios.

    python experiments/pipes_standalone.py [--quick] [--repeat 7] [--out results/pipe-standalone.csv]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from parity import compile_programs, pipe_pair_command, pipe_pair_sample

from memlab import pipe
from memlab.dataset import Dataset

SOURCE = Path(__file__).resolve().parent / "pipe_pair" / "pipe_pair.c"


def build(directory: str) -> str:
    """Compile the standalone pair (through parity.py); returns the binary's path."""
    return compile_programs(directory, ["pipe_pair"])["pipe_pair"]


pair_command = pipe_pair_command
pair_sample = pipe_pair_sample


def compare(quick: bool, repeat: int, seconds: float, buffer_bytes: int, pipe_size_bytes: int) -> Dataset:
    """Rows of (placement, rung) with both medians and their ratio."""
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        binary = build(directory)
        for placement in pipe.available_placements():
            cpus = pipe.placement_cpus(placement)
            for name, settings in pipe.RUNGS:
                if settings["busy_loop"] and cpus[0] == cpus[1]:
                    continue
                point = dict(settings, buffer_bytes=buffer_bytes, pipe_size_bytes=pipe_size_bytes,
                             writer_cpu=cpus[0], reader_cpu=cpus[1])
                sizing = pipe.run(point, repeat=1, warmup=1, target_seconds=seconds, counters=False)
                total = int(sizing.median("total_bytes"))
                command = pair_command(binary, settings, cpus, total, buffer_bytes, pipe_size_bytes)
                pair_sample(command, 120)  # warm-up
                standalone, memlab_rates = [], []
                for _ in range(repeat):
                    standalone.append(pair_sample(command, 120))
                    measured = pipe.run(point, total_bytes=total, repeat=1, warmup=0, counters=False)
                    memlab_rates.append(measured.median("GiB_per_s"))
                ratio = statistics.median(memlab_rates) / statistics.median(standalone)
                paired = statistics.median(m / a for m, a in zip(memlab_rates, standalone))
                row = {
                    "placement": placement, "rung_name": name, **point, "total_bytes": total,
                    "memlab_GiB_per_s": statistics.median(memlab_rates),
                    "memlab_GiB_per_s_min": min(memlab_rates), "memlab_GiB_per_s_max": max(memlab_rates),
                    "memlab_GiB_per_s_samples": memlab_rates,
                    "standalone_GiB_per_s": statistics.median(standalone),
                    "standalone_GiB_per_s_min": min(standalone), "standalone_GiB_per_s_max": max(standalone),
                    "standalone_GiB_per_s_samples": standalone,
                    "memlab_over_standalone": ratio,
                    "paired_ratio": paired,
                    "command": command,
                    "loadavg_1min": os.getloadavg()[0],
                }
                rows.append(row)
                print(format_row(row), flush=True)
    return Dataset(rows=rows, metadata={
        "experiment": "pipes_standalone", "repeat": repeat, "seconds": seconds, "quick": quick,
        "source": str(SOURCE),
    })


def format_row(row: dict[str, Any]) -> str:
    return (
        f"{row['placement']:9} {row['rung_name']:16} total {row['total_bytes'] / 2**30:6.2f} GiB  "
        f"memlab {row['memlab_GiB_per_s']:6.2f} [{row['memlab_GiB_per_s_min']:.2f}..{row['memlab_GiB_per_s_max']:.2f}]  "
        f"standalone {row['standalone_GiB_per_s']:6.2f} "
        f"[{row['standalone_GiB_per_s_min']:.2f}..{row['standalone_GiB_per_s_max']:.2f}]  "
        f"ratio {row['memlab_over_standalone']:.3f} (paired {row['paired_ratio']:.3f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.1 s samples, 3 repeats")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="sample length (default 0.5)")
    parser.add_argument("--buffer-bytes", type=int, default=256 << 10)
    parser.add_argument("--pipe-size-bytes", type=int, default=256 << 10)
    parser.add_argument("--out", default="results/pipe-standalone.csv")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    seconds = args.seconds or (0.1 if args.quick else 0.5)
    dataset = compare(args.quick, repeat, seconds, args.buffer_bytes, args.pipe_size_bytes)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    dataset.save(args.out)
    worst = max(abs(r["memlab_over_standalone"] - 1) for r in dataset.rows)
    print(f"{len(dataset)} rows -> {args.out}; largest difference {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
