"""Cache-line sharing (Drepper section 6.4.1, figures 6.10/6.11, program of
section 9.3): threads pinned one per CPU increment counters disp longs apart,
atomically and with plain increments. disp 0 shares one counter, disp 1..7
share one cache line (false sharing), disp >= 8 gives each thread its line.

    python experiments/false_sharing.py --quick

After the sweep, prints the false-sharing penalty read from the sweep (ns
per increment at disp 1 over disp 8, ratio of medians with its spread) and
the lost updates of plain increments of one shared counter; then measures
the penalty again with disp 1 and disp 8 alternating round by round, so
that both see the same load from other processes, by wall time and by the
threads' on-CPU time. One thread (where disp changes nothing) is the
control: its ratio shows how much of a ratio the noise alone makes.
"""

from __future__ import annotations

import argparse
import os
import sys

import memlab.cli
import memlab.share
import memlab.sweep
from memlab.dataset import Dataset
from memlab.grid import Sweep, grid


def sweep(quick: bool = False) -> Sweep:
    """threads x disp x atomic, each point a pinned run of ~target_seconds."""
    cpus = len(os.sched_getaffinity(0))
    threads = sorted({1, min(2, cpus), min(4, cpus)})
    disps = [0, 1, 8] if quick else [0, 1, 2, 4, 8, 16, 64]
    return Sweep(
        name="false-sharing-quick" if quick else "false-sharing",
        family="share",
        points=grid(threads=threads, disp_longs=disps, atomic=[True, False]),
        repeat=5 if quick else 9,
        warmup=1,
        target_seconds=0.05 if quick else 0.2,
    )


def penalty_table(dataset: Dataset) -> str:
    """The disp 1 / disp 8 ratio for each (threads, atomic), and lost updates."""
    lines = [f"{'threads':>7} {'atomic':>6}  {'disp1/disp8 ns per increment [spread]':<40}"
             f"{'fastest/fastest':>16}{'lost updates at disp 0':>24}{'threads on CPU':>16}"]
    for threads in sorted(set(dataset.column("threads"))):
        for atomic in (True, False):
            rows = {r["disp_longs"]: r for r in dataset.filter(threads=threads, atomic=atomic)}
            if 1 not in rows or 8 not in rows:
                continue
            p = memlab.share.penalty(rows[1], rows[8])
            lost = rows.get(0, {}).get("lost_fraction", float("nan"))
            lines.append(f"{threads:>7} {str(atomic):>6}  "
                         f"{p['ratio']:>6.2f} [{p['ratio_min']:.2f}..{p['ratio_max']:.2f}]".ljust(57)
                         + f"{p['ratio_of_fastest']:>6.2f}" + f"{lost * 100:>22.1f} %"
                         + f"{rows[1].get('mean_threads_on_cpu', float('nan')):>16.2f}")
    return "\n".join(lines)


def interleaved_table(quick: bool) -> str:
    """The penalty measured with disp 1 and disp 8 alternating."""
    cpus = len(os.sched_getaffinity(0))
    rounds, target = (5, 0.05) if quick else (11, 0.2)
    lines = [f"interleaved, {rounds} rounds: disp 1 / disp 8 "
             "(ratio of medians [per-round range], fastest/fastest)",
             f"{'threads':>7} {'atomic':>6}  {'wall ns per increment':<40}{'on-CPU ns per increment':<40}"]
    for threads in sorted({1, min(2, cpus)}):
        for atomic in (True, False):
            cells = []
            for metric in ("ns_per_increment", "cpu_ns_per_increment"):
                p = memlab.share.false_sharing_penalty(threads=threads, atomic=atomic, rounds=rounds,
                                                       metric=metric, warmup=1, target_seconds=target)
                cells.append(f"{p['ratio']:5.2f} [{p['ratio_min']:.2f}..{p['ratio_max']:.2f}], "
                             f"{p['ratio_of_fastest']:.2f}".ljust(40))
            lines.append(f"{threads:>7} {str(atomic):>6}  " + "".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    status = memlab.cli.script_main(sweep)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args, _ = parser.parse_known_args()
    path = memlab.sweep.output_path(args.out, sweep(quick=args.quick), many=False)
    print(penalty_table(Dataset.load(path)))
    print()
    print(interleaved_table(args.quick))
    sys.exit(status)
