"""Benchmark: memlab.system against the same loops as standalone C programs.

The programs in experiments/standalone/ (spawn.c, execl.c, fstime.c) are the
UnixBench loops written as plain C programs, stopped by alarm() like
UnixBench's own, and run from the shell (``copies`` of them in parallel with
``&`` and ``wait``, their rates summed). This script compiles them ($CC, else gcc),
then alternates them with memlab.system's measurement of the same test for
several rounds (memlab without counters: inherited perf events slow
fork and exit), and prints for each the median rate, their ratio with its
spread over rounds, and whether memlab agrees within 5 %. Two rates are
compared: per wall-clock second (UnixBench's) and per CPU second of the loop
(user + system time, reaped children included), which on a machine shared
with other work varies much less than the wall-clock rate. experiments/parity.py
holds the compiling and the standalone runs, and puts spawn and execl in its
one table beside every other family; this script adds the file copies and
several copies.

    python experiments/unixbench_vs_c.py --quick          # 1 s runs, 3 rounds
    python experiments/unixbench_vs_c.py --duration 5 --rounds 7 --copies 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from parity import compile_programs, standalone_rates

import memlab.system as system
from memlab.dataset import Dataset

SOURCES = ("spawn", "execl", "fstime")
TOLERANCE = 0.05


def build(directory: Path) -> dict[str, Path]:
    """Compile the standalone programs into directory (through parity.py)."""
    return {name: Path(path) for name, path in compile_programs(directory, list(SOURCES)).items()}


def cases(duration: float, scratch: str) -> dict[str, tuple[dict, list[str]]]:
    """UnixBench test name -> (memlab parameters, standalone arguments)."""
    out = {}
    for test in system.UNIXBENCH_TESTS.values():
        if test.test == "file_copy":
            params = {"test": "file_copy", "buffer_bytes": test.buffer_bytes,
                      "max_blocks": test.max_blocks, "directory": scratch}
            args = ["fstime", str(duration), str(test.buffer_bytes), str(test.max_blocks), scratch]
        else:
            params = {"test": test.test}
            args = [test.test, str(duration)]
        out[test.name] = (params, args)
    return out


def compare(duration: float, rounds: int, copies: int, tests: list[str], scratch: str) -> list[dict]:
    """Alternate memlab and the standalone program; one row per run."""
    rows = []
    with tempfile.TemporaryDirectory() as build_dir:
        programs = build(Path(build_dir))
        for round_index in range(rounds):
            for name, (params, args) in cases(duration, scratch).items():
                if name not in tests:
                    continue
                command = [str(programs[args[0]])] + args[1:]
                order = ("memlab", "standalone") if round_index % 2 == 0 else ("standalone", "memlab")
                for runner in order:
                    if runner == "memlab":
                        m = system.run(dict(params, duration_s=duration, copies=copies), repeat=1, warmup=0,
                                       counters=False)
                        test = params["test"]
                        rate = m.median(system.unixbench_metric(test))
                        per_cpu = m.median(system.unixbench_metric(test, per_cpu_s=True))
                    else:
                        rate, per_cpu = standalone_rates(command, copies)
                    rows.append({"test": name, "round": round_index, "runner": runner, "copies": copies,
                                 "duration_s": duration, "rate": rate, "rate_per_cpu_s": per_cpu})
                    print(f"round {round_index} {name:<9} {runner:<10} {rate:14.1f} /s "
                          f"{per_cpu:14.1f} /CPU s", flush=True)
    return rows


def summarize(rows: list[dict], column: str = "rate") -> list[dict]:
    """Per test: median rates, their ratio, the spread of per-round ratios."""
    summary = []
    for name in dict.fromkeys(r["test"] for r in rows):
        mine = {r["round"]: r[column] for r in rows if r["test"] == name and r["runner"] == "memlab"}
        theirs = {r["round"]: r[column] for r in rows if r["test"] == name and r["runner"] == "standalone"}
        ratios = [mine[k] / theirs[k] for k in mine if k in theirs]
        ratio = statistics.median(mine.values()) / statistics.median(theirs.values())
        summary.append({
            "test": name, "rate": column, "memlab": statistics.median(mine.values()),
            "memlab_min": min(mine.values()), "memlab_max": max(mine.values()),
            "standalone": statistics.median(theirs.values()),
            "standalone_min": min(theirs.values()), "standalone_max": max(theirs.values()),
            "ratio": ratio, "ratio_min": min(ratios), "ratio_max": max(ratios),
            "within_5_percent": abs(ratio - 1) <= TOLERANCE,
        })
    return summary


def print_summary(summary: list[dict]) -> None:
    print(f"\nper {'wall-clock' if summary[0]['rate'] == 'rate' else 'CPU'} second")
    print(f"{'test':<10}{'memlab [min..max]':>34}{'standalone C [min..max]':>34}"
          f"{'ratio [per-round range]':>28}  within 5%")
    for s in summary:
        print(f"{s['test']:<10}"
              f"{s['memlab']:>12.1f} [{s['memlab_min']:.1f}..{s['memlab_max']:.1f}]".ljust(44)
              + f"{s['standalone']:>12.1f} [{s['standalone_min']:.1f}..{s['standalone_max']:.1f}]".ljust(34)
              + f"{s['ratio']:>8.3f} [{s['ratio_min']:.3f}..{s['ratio_max']:.3f}]".ljust(28)
              + f"  {'yes' if s['within_5_percent'] else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s runs, 3 rounds")
    parser.add_argument("--duration", type=float, help="seconds per run (default 5, quick 1)")
    parser.add_argument("--rounds", type=int, help="alternations per test (default 5, quick 3)")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--tests", default=",".join(system.UNIXBENCH_TESTS),
                        help="comma-separated UnixBench test names")
    parser.add_argument("--directory", default=tempfile.gettempdir(), help="where the file copies go")
    parser.add_argument("--out", default="results/unixbench_vs_c.csv")
    args = parser.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 5.0)
    rounds = args.rounds or (3 if args.quick else 5)
    tests = args.tests.split(",")
    rows = compare(duration, rounds, args.copies, tests, args.directory)
    summary = summarize(rows, "rate") + summarize(rows, "rate_per_cpu_s")
    print_summary(summary[: len(summary) // 2])
    print_summary(summary[len(summary) // 2 :])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Dataset(rows, {"benchmark": "unixbench_vs_c", "summary": summary}).save(out)
    print(f"{len(rows)} rows -> {out}")
    return 0 if all(s["within_5_percent"] for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
