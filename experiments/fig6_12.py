"""Figure 6.12 (Drepper, "What every programmer should know about memory",
section 6.4.2): ways to increment a shared counter atomically. The source's
table: one million increments by four concurrent threads took 0.23 s with
add-and-fetch (``__sync_add_and_fetch``), 0.21 s with fetch-and-add
(``__sync_fetch_and_add``) and 0.73 s with a compare-and-swap loop
(``__sync_bool_compare_and_swap``): on x86 the three compile to different
code, and CAS is about three times slower.

memlab measures every form on one shared counter with 1 thread and with as
many threads as there are CPUs (at most 4): the source's three with the
``__sync`` builtins, the same with the ``__atomic`` builtins (``add_fetch``,
``fetch_add``, ``cas``), and the bare lock-prefixed add (``lock_add``, what a
compiler emits when the returned value is not used). Every form's count is
exact and its returned values are checked (``returned_values_exact``).

    python experiments/fig6_12.py --quick
"""

from __future__ import annotations

import os

import memlab.cli
import memlab.share
from memlab.dataset import Dataset
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """Every atomic form x (1 thread, min(4, CPUs) threads) on one shared counter."""
    return memlab.share.atomic_ops_sweep(quick=quick)


def _exact(row: dict) -> bool:
    """Nothing lost, and (for the forms that return a value) the values handed back were exact."""
    returned = row.get("returned_values_exact")
    returned_ok = not isinstance(returned, (int, float)) or returned != returned or returned == 1
    return row.get("lost_updates") == 0 and returned_ok


def table(dataset: Dataset) -> str:
    """One line per form and thread count: ns per increment per thread [min..max], relative to
    sync_add_and_fetch (the source's first form) beside the source's ratio, CAS retries, and the
    exactness checks."""
    metric = "ns_per_increment_per_thread"
    source = memlab.share.SOURCE_ATOMIC_SECONDS
    lines = [f"{'form':>20} {'threads':>7}  {'ns/incr/thread [min..max]':<30}{'x sync_add':>11}"
             f"{'source x':>10}{'CAS retries':>13}{'exact':>7}"]
    rows = [r for r in dataset.rows if memlab.share.increment_form(r) != memlab.share.PLAIN]
    base = {int(r["threads"]): r[metric] for r in rows
            if memlab.share.increment_form(r) == "sync_add_and_fetch"}
    for threads in sorted({int(r["threads"]) for r in rows}):
        for op in memlab.share.ATOMIC_OPS:
            hit = [r for r in rows if int(r["threads"]) == threads and memlab.share.increment_form(r) == op]
            if not hit:
                continue
            r = hit[0]
            relative = r[metric] / base[threads] if threads in base else float("nan")
            retries = r.get("cas_failures_per_increment")
            lines.append(
                f"{op:>20} {threads:>7}  "
                + f"{r[metric]:7.2f} [{r[metric + '_min']:.2f}..{r[metric + '_max']:.2f}]".ljust(30)
                + f"{relative:>11.2f}"
                + (f"{source[op] / source['sync_add_and_fetch']:>10.2f}" if op in source else f"{'':>10}")
                + (f"{retries:>13.3f}" if isinstance(retries, float) and retries == retries else f"{'':>13}")
                + f"{'yes' if _exact(r) else 'NO':>7}")
    return "\n".join(lines)


def interleaved_table(quick: bool) -> str:
    """Every form measured in turn, round after round, at the sweep's largest thread count: the
    ratio to sync_add_and_fetch as the median of per-round ratios [their range]."""
    threads = max(memlab.share.thread_counts())
    rounds, target = (3, 0.05) if quick else (9, 0.2)
    result = memlab.share.compare_forms(threads=threads, rounds=rounds, warmup=1, target_seconds=target)
    source = memlab.share.SOURCE_ATOMIC_SECONDS
    lines = [f"interleaved, {threads} thread(s), {rounds} rounds: ns per increment per thread, and the ratio "
             "to sync_add_and_fetch (median of per-round ratios [range])",
             f"{'form':>20}  {'ns [min..max]':<26}{'ratio [range]':<24}{'source':>8}"]
    for op, r in result.items():
        lines.append(f"{op:>20}  " + f"{r['median']:7.2f} [{r['min']:.2f}..{r['max']:.2f}]".ljust(26)
                     + f"{r['ratio']:5.2f} [{r['ratio_min']:.2f}..{r['ratio_max']:.2f}]".ljust(24)
                     + (f"{source[op] / source['sync_add_and_fetch']:>8.2f}" if op in source else ""))
    cpus = len(os.sched_getaffinity(0))
    lines.append(f"(the source: 4 threads on 4 cores, 0.23 / 0.21 / 0.73 s for 1 million increments; this "
                 f"process may run on {cpus} CPU(s))")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return memlab.cli.script_main(sweep, argv, report=lambda dataset, quick: f"{table(dataset)}\n\n{interleaved_table(quick)}")


if __name__ == "__main__":
    raise SystemExit(main())
