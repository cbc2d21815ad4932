"""How much memory and time ``Dataset.load`` takes on a large dataset.

Writes a chase dataset of about ``--megabytes`` MB (real measured rows,
repeated with other parameter values and scaled values), then loads it in a
fresh Python process per interpreter given (``--python``, default this one;
give an older memlab's interpreter to compare) and prints, per run, the
peak resident memory the load added (VmHWM after minus before), the
wall and CPU time of the load, and the same after reading every row's
samples. On a loaded machine the CPU time is the figure to compare.

    python experiments/dataset_load_memory.py [--megabytes 130] [--python /old/venv/bin/python ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from memlab import chase
from memlab.dataset import Dataset, DatasetWriter

CHILD = r"""
import json, resource, sys, time
from memlab.dataset import Dataset

def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def peak_kib():  # this process's own high-water mark (ru_maxrss would count its parent's before exec)
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))

before = peak_kib()
started, cpu_started = time.perf_counter(), cpu_s()
ds = Dataset.load(sys.argv[1])
loaded, load_cpu = time.perf_counter() - started, cpu_s() - cpu_started
peak_load = peak_kib()
total = 0.0
for row in ds.rows:
    total += sum(row["ns_per_element_samples"]) + row["ns_per_element"]
walked = time.perf_counter() - started
peak_walk = peak_kib()
print(json.dumps({"rows": len(ds), "load_s": loaded, "load_cpu_s": load_cpu,
                  "load_MiB": (peak_load - before) / 1024,
                  "walk_s": walked, "walk_MiB": (peak_walk - before) / 1024}))
"""


def write_dataset(path: Path, megabytes: float) -> int:
    """A dataset of about ``megabytes`` MB from eight real chase measurements; returns its rows."""
    seeds = [chase.run(working_set_bytes=4096 << i, order=order, repeat=5, warmup=0, target_seconds=0.002)
             for i in range(4) for order in ("random", "sequential")]
    rows = [m.to_row() for m in seeds]
    meta = {"family": "chase", "sweep": "memory", "param_names": list(chase.FAMILY.param_names)}
    with DatasetWriter(path, meta) as writer:
        writer.append(rows[0])
        size = path.stat().st_size
        count = 1
        while size < megabytes * 1e6:
            template = dict(rows[count % len(rows)])
            template["seed"] = count
            scale = 1 + (count % 997) / 1e4
            for name, value in list(template.items()):
                if name.endswith("_samples") and isinstance(value, list):
                    template[name] = [v * scale for v in value]
                elif isinstance(value, float) and name not in meta["param_names"]:
                    template[name] = value * scale
            writer.append(template)
            count += 1
            if count % 2000 == 0:
                size = path.stat().st_size
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=130.0)
    parser.add_argument("--python", action="append", help="interpreter to load with (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="loads per interpreter")
    parser.add_argument("--keep", help="write the CSV here and keep it")
    args = parser.parse_args(argv)
    folder = Path(args.keep).parent if args.keep else Path(tempfile.mkdtemp(prefix="memlab-load-"))
    path = Path(args.keep) if args.keep else folder / "big.csv"
    if not path.exists():
        rows = write_dataset(path, args.megabytes)
    else:
        rows = sum(1 for _ in open(path)) - 1
    size_mb = path.stat().st_size / 1e6
    print(f"{path}: {size_mb:.1f} MB, {rows} rows; load average {open('/proc/loadavg').read().split()[:3]}")
    for python in args.python or [sys.executable]:
        results = []
        for _ in range(args.repeat):
            out = subprocess.run([python, "-c", CHILD, str(path.resolve())], capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": ""}, cwd=tempfile.gettempdir())
            if out.returncode:
                print(f"{python}: failed: {out.stderr.strip()[-300:]}")
                break
            results.append(json.loads(out.stdout))
        for result in results:
            print(f"{python}: load {result['load_s']:.1f} s ({result['load_cpu_s']:.1f} s of CPU), "
                  f"+{result['load_MiB']:.0f} MiB "
                  f"({result['load_MiB'] * 1.048576 / size_mb:.2f}x the file); with every row's samples read: "
                  f"{result['walk_s']:.1f} s, +{result['walk_MiB']:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
