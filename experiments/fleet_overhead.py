"""What Dask costs a fleet sweep per point, on two local workers (docs/fleet.md, "Overhead").

Starts a ``distributed.LocalCluster`` of two worker processes (one thread
and the ``memlab`` resource each, a distinct fake fingerprint each through
the test hook ``MEMLAB_FAKE_FINGERPRINT``), runs a sweep (default: the chase
family's quick sweep) in each-host mode ``--rounds`` times, and prints:

- the scheduling cost per point, ``context_dask_overhead_s`` of every row:
  the wall time the point added to its host's share of the sweep through
  Dask minus the task's own time (median, quartiles, extremes);
- the same per host as a whole: (arrival of the host's last result - first
  submission - the sum of its tasks' own times) / points;
- the idle gap a worker sees between two measurements (from the rows'
  ``context_started_unix``/``context_ended_unix``, 1 ms resolution), and
  whether two measurements ever overlapped on one worker;
- where the time goes, per point on its worker: memlab's own time before the
  measurement starts and after it ends inside the task (parameters, core
  clock, the row), and Dask's hop from one task's end to the next task's
  start on the same worker (the next task is already there: a host holds two);
- rounds alternate between quiet workers (Dask's profiler and tick stopped
  while measuring, the default: memlab.fleet.quiet_workers) and loud ones
  (``--no-loud`` runs quiet rounds only), so the two are compared side by side
  at the same load;
- for scale, the round trip of an empty task through the same cluster (submit to
  result, one at a time): Dask's own floor at this moment's load;
- the load average before and after, and the CPU.

Needs ``pip install 'memlab[fleet]'``. Run: ``python experiments/fleet_overhead.py --rounds 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from memlab import fleet
from memlab.dataset import FINGERPRINT_COLUMN, HOST_COLUMN
from memlab.fleet import require_distributed
from memlab.machine import FAKE_FINGERPRINT_ENV
from memlab.sweep import resolve, run_sweep


def _set_env(name: str, value: str) -> None:
    os.environ[name] = value


def _empty() -> None:
    return None


def _empty_round_trips(client, distributed, count: int = 30) -> list[float]:
    address = sorted(client.nthreads())[0]
    times = []
    for _ in range(count):
        began = time.monotonic()
        future = client.submit(_empty, workers=[address], allow_other_workers=False,
                               resources={"memlab": 1}, pure=False)
        list(distributed.as_completed([future], with_results=True))
        times.append(time.monotonic() - began)
    return times


def _quantiles(values: list[float]) -> str:
    if not values:
        return "no values"
    ordered = sorted(values)
    q1, median, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (ordered[0],) * 3
    return (f"median {median * 1e3:.1f} ms, quartiles {q1 * 1e3:.1f}..{q3 * 1e3:.1f} ms, "
            f"min {ordered[0] * 1e3:.1f} ms, max {ordered[-1] * 1e3:.1f} ms (n={len(ordered)})")


class _Recorder:
    """Wraps fleet.dispatch to keep every task's outcome (its wall-clock bounds on the worker)."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, dict]] = []
        self.dispatch = fleet.dispatch

    def __call__(self, client, family_name, hosts, queues, options, record, **kwargs):
        def keep(host, point, outcome):
            self.outcomes.append((host.host, outcome))
            record(host, point, outcome)
        return self.dispatch(client, family_name, hosts, queues, options, keep, **kwargs)


def _breakdown(outcomes: list[tuple[str, dict]]) -> dict[str, list[float]]:
    before, after, hop = [], [], []
    for host in {h for h, _ in outcomes}:
        mine = sorted((o for h, o in outcomes if h == host), key=lambda o: o["began_unix"])
        for outcome in mine:
            before.append(outcome["row"]["context_started_unix"] - outcome["began_unix"])
            after.append(outcome["ended_unix"] - outcome["row"]["context_ended_unix"])
        hop += [b["began_unix"] - a["ended_unix"] for a, b in zip(mine, mine[1:])]
    return {"memlab before the measurement": before, "memlab after it": after,
            "Dask between two tasks on a worker": hop}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default="chase.quick", help="the sweep to run (default chase.quick)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each kind (default 3)")
    parser.add_argument("--no-loud", action="store_true", help="quiet rounds only")
    args = parser.parse_args()
    distributed = require_distributed()
    (sweep,) = resolve(args.sweep)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    kinds = ["quiet"] if args.no_loud else ["quiet", "loud"]
    recorder = _Recorder()
    fleet.dispatch = recorder  # memlab.runner calls fleet.dispatch through the module
    quiet_workers = fleet.quiet_workers
    results = {kind: {"rows": [], "round_rows": [], "per_host": [], "seconds": [], "outcomes": []}
               for kind in kinds}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  resources={"memlab": 1}, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for index, address in enumerate(sorted(client.nthreads())):
            fake = {"hostname": f"worker-{index}", "cpu_model": f"Fake CPU {index}"}
            client.run(_set_env, FAKE_FINGERPRINT_ENV, json.dumps(fake), workers=[address])
        empty = _empty_round_trips(client, distributed)
        with tempfile.TemporaryDirectory() as folder:
            for round_index in range(args.rounds):
                for kind in kinds:
                    fleet.quiet_workers = quiet_workers if kind == "quiet" else (lambda *a, **k: {})
                    result = results[kind]
                    out = Path(folder) / f"{kind}{round_index}.csv"
                    recorder.outcomes = []
                    began = time.monotonic()
                    dataset = run_sweep(sweep, out, client=client, each_host=True, progress=False,
                                        warn=lambda text: None)
                    result["seconds"].append(time.monotonic() - began)
                    result["rows"].extend(dataset.rows)
                    result["round_rows"].append(list(dataset.rows))
                    result["outcomes"].append(recorder.outcomes)
                    for host in {r[HOST_COLUMN] for r in dataset.rows}:
                        mine = [r for r in dataset.rows if r[HOST_COLUMN] == host]
                        result["per_host"].append(sum(r["context_dask_overhead_s"] for r in mine) / len(mine))
    fleet.quiet_workers = quiet_workers
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    print(f"host: {cpu}; {os.cpu_count()} CPUs; load average before {' '.join(load_before)}, "
          f"after {' '.join(load_after)}")
    print(f"sweep {sweep.family}.{sweep.name}: {len(sweep.points)} points x 2 workers x {args.rounds} rounds "
          f"of each kind ({', '.join(kinds)}, alternating)")
    for kind in kinds:
        result = results[kind]
        rows = result["rows"]
        gaps, overlaps = [], 0
        for round_rows in result["round_rows"]:  # within a round: a new round starts afresh
            for key in {(r[HOST_COLUMN], r[FINGERPRINT_COLUMN]) for r in round_rows}:
                mine = sorted((r for r in round_rows if (r[HOST_COLUMN], r[FINGERPRINT_COLUMN]) == key),
                              key=lambda r: r["context_started_unix"])
                for before, after in zip(mine, mine[1:]):
                    gap = after["context_started_unix"] - before["context_ended_unix"]
                    overlaps += gap < 0
                    gaps.append(gap)
        print(f"== {kind} workers: {statistics.median(result['seconds']):.1f} s per round (median)")
        print(f"  scheduling cost per point, per host and round (mean of context_dask_overhead_s "
              f"over its points): {_quantiles(result['per_host'])}")
        print(f"  single rows' context_dask_overhead_s: {_quantiles([r['context_dask_overhead_s'] for r in rows])}")
        parts: dict[str, list[float]] = {}
        for outcomes in result["outcomes"]:  # per round, like the gaps
            for name, values in _breakdown(outcomes).items():
                parts.setdefault(name, []).extend(values)
        for name, values in parts.items():
            print(f"  {name}: {_quantiles(values)}")
        print(f"  idle gap between two measurements on one worker (rows' timestamps): {_quantiles(gaps)}; "
              f"overlaps: {overlaps}")
        print(f"  points on CPU less than 90% of their wall time: "
              f"{sum(1 for r in rows if not r.get('context_on_cpu_fraction', 1) >= 0.9)} of {len(rows)}")
    print(f"for scale, an empty task's round trip through the cluster: {_quantiles(empty)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
