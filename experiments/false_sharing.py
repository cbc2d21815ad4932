"""False sharing (Drepper, "What every programmer should know about memory",
section 6.4.1, figures 6.10/6.11, the program of section 9.3): threads pinned
one per CPU each increment their own counter a fixed number of times; the
counters share one cache line (false sharing), or each has its own, or all
threads share one counter. The source plots the time per thread against the
number of threads (1 to 4) and states the penalty as one line / own lines:
390%, 734%, 1147% for 2, 3, 4 processors (four Pentium 4s, figure 6.10), and
only a small, flat overhead on one multi-core Core 2 (figure 6.11).

    python experiments/false_sharing.py --quick

The sweep is the share family's ``false_sharing`` sweep: 1 up to 4 threads,
as many as this machine has CPUs (on a 2-CPU machine: 1 and 2, and the table
says so). After it, prints the penalty by thread count beside the source's,
and the lost updates of plain increments of one shared counter; then measures
the 2-thread penalty again with one line and own lines alternating round by
round, so that both see the same load from other processes, by wall time and
by the threads' on-CPU time. One thread (where the placement changes nothing)
is the control: its ratio shows how much of a ratio the noise alone makes.
"""

from __future__ import annotations

import os

import memlab.cli
import memlab.share
from memlab.dataset import Dataset
from memlab.grid import Sweep

#: The source's penalties (figure 6.10, four P4 processors): threads -> one line / own lines.
SOURCE_PENALTY = {2: 3.90, 3: 7.34, 4: 11.47}


def sweep(quick: bool = False) -> Sweep:
    """Threads 1..min(4, CPUs) x placement (disp_longs 0, 1, 8[, 16]) x plain/atomic."""
    return memlab.share.false_sharing_sweep(quick=quick)


def penalty_table(dataset: Dataset) -> str:
    """One line per (increment form, threads): time per thread with one line and with own lines,
    their ratio [spread], the source's ratio, and the lost updates on one shared counter."""
    ratios = memlab.share.sharing_ratios(dataset)
    lines = [f"{'form':>10} {'threads':>7}  {'one line':>10} {'own lines':>10}  "
             f"{'ratio [spread]':<22}{'source':>8}{'lost at disp 0':>16}{'threads on CPU':>16}"]
    for (op, threads), ratio in ratios.items():
        rows = {int(r["disp_longs"]): r for r in dataset.rows
                if memlab.share.increment_form(r) == op and int(r["threads"]) == threads}
        spread = memlab.share.penalty(rows[1], rows[8], metric="ns_per_increment_per_thread")
        lost = rows.get(0, {}).get("lost_fraction", float("nan"))
        source = SOURCE_PENALTY.get(threads)
        lines.append(
            f"{op:>10} {threads:>7}  {rows[1]['ns_per_increment_per_thread']:>8.2f}ns "
            f"{rows[8]['ns_per_increment_per_thread']:>8.2f}ns  "
            + f"{ratio:6.2f} [{spread['ratio_min']:.2f}..{spread['ratio_max']:.2f}]".ljust(22)
            + (f"{source:>8.2f}" if source and op == "plain" else f"{'':>8}")
            + f"{lost * 100:>14.1f} %"
            + f"{rows[1].get('mean_threads_on_cpu', float('nan')):>16.2f}")
    cpus = len(os.sched_getaffinity(0))
    if cpus < memlab.share.SOURCE_THREADS:
        lines.append(f"(this process may run on {cpus} CPU(s): threads 1..{cpus} measured; the source ran 1..4, "
                     "one per processor; its ratios are for plain increments)")
    return "\n".join(lines)


def interleaved_table(quick: bool) -> str:
    """The penalty measured with one line (disp 1) and own lines (disp 8) alternating."""
    cpus = len(os.sched_getaffinity(0))
    rounds, target = (5, 0.05) if quick else (11, 0.2)
    lines = [f"interleaved, {rounds} rounds: one line / own lines "
             "(ratio of medians [per-round range], fastest/fastest)",
             f"{'threads':>7} {'atomic':>6}  {'wall time per thread':<40}{'on-CPU ns per increment':<40}"]
    for threads in sorted({1, min(2, cpus)}):
        for atomic in (False, True):
            cells = []
            for metric in ("ns_per_increment_per_thread", "cpu_ns_per_increment"):
                p = memlab.share.false_sharing_penalty(threads=threads, atomic=atomic, rounds=rounds,
                                                       metric=metric, warmup=1, target_seconds=target)
                cells.append(f"{p['ratio']:5.2f} [{p['ratio_min']:.2f}..{p['ratio_max']:.2f}], "
                             f"{p['ratio_of_fastest']:.2f}".ljust(40))
            lines.append(f"{threads:>7} {str(atomic):>6}  " + "".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, argv, report=lambda dataset, quick: f"{penalty_table(dataset)}\n\n{interleaved_table(quick)}")


if __name__ == "__main__":
    raise SystemExit(main())
