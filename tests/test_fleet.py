"""Fleet sweeps on a local Dask cluster: each-host, spread, a lost worker, per-machine views.

Two worker processes of one ``distributed.LocalCluster`` (one thread and the
``memlab`` resource each) stand for two hosts: each gets its own fake
machine fingerprint through the test hook ``MEMLAB_FAKE_FINGERPRINT``, set
in the worker and in its nanny (so a restarted worker keeps it). Skipped
when the fleet extra is not installed (``pip install 'memlab[fleet]'``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import multiprocessing.resource_tracker
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip(
    "distributed", reason="Dask distributed (the fleet extra: pip install 'memlab[fleet]') is not installed")

from memlab import chart, cli, fleet, plot, registry  # noqa: E402
from memlab import runner as run_module  # noqa: E402
from memlab.compare import compare_machines  # noqa: E402
from memlab.dataset import FINGERPRINT_COLUMN, HOST_COLUMN, Dataset, key_value, machine_key, point_key  # noqa: E402
from memlab.grid import Sweep, grid  # noqa: E402
from memlab.machine import FAKE_FINGERPRINT_ENV, fingerprint_id  # noqa: E402
from memlab.report import build_report  # noqa: E402
from memlab.sweep import run_sweep  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    # Dask's client keeps a pool of connections to the module's clusters, and its event loop,
    # for the life of the process: a test may leave those sockets and pipes (tests/process_guard.py)
    pytest.mark.process_guard_allows("descriptor", r"^(socket|pipe|anon_inode):",
                                     "Dask's client keeps its connection pool and event loop for the process"),
    pytest.mark.process_guard_allows("descriptor", r"^/proc/\d+/statm?$",
                                     "psutil, in the module's in-process Dask workers, keeps a process's stat "
                                     "file open between its samples, and reads its statm (memory) file from "
                                     "the nanny's memory monitor thread, which a test's end can catch open"),
]

FAKE_A = {"hostname": "fake-a", "cpu_model": "Fake CPU A", "cpu_count": 2, "kernel_release": "6.1.0",
          "memory_total_bytes": 8 << 30}
FAKE_B = {**FAKE_A, "hostname": "fake-b", "cpu_model": "Fake CPU B"}


def _set_env(name: str, value: str) -> None:
    os.environ[name] = value


def _unset_env(name: str) -> None:
    os.environ.pop(name, None)


def _set_nanny_env(name: str, value: str, dask_worker=None) -> None:
    # The nannies of a LocalCluster share one process: each keeps the environment of the
    # worker it (re)starts in its own ``env``.
    dask_worker.env[name] = value


def _fake_id(facts: dict) -> str:
    return fingerprint_id({"cpu_model": facts["cpu_model"], "cpu_count": facts["cpu_count"],
                           "kernel_release": facts["kernel_release"],
                           "memory_total_GiB": facts["memory_total_bytes"] >> 30})


def same_rows(rows) -> list[str]:
    """Rows as comparable text: columns sorted, values normalised as a point key normalises them
    (a CSV round trip keeps values but not the order of a row's keys)."""
    return sorted(json.dumps({k: key_value(v) for k, v in row.items()}, sort_keys=True, default=str)
                  for row in rows)


def workers(client) -> list[str]:
    return sorted(client.nthreads())


def fake(client, *facts: dict) -> dict[str, dict]:
    """Give the workers (sorted by address) these fake facts, in the worker and in its nanny."""
    addresses = workers(client)
    assert len(addresses) == len(facts)
    for address, one in zip(addresses, facts):
        client.run(_set_env, FAKE_FINGERPRINT_ENV, json.dumps(one), workers=[address])
        client.run(_set_nanny_env, FAKE_FINGERPRINT_ENV, json.dumps(one), workers=[address], nanny=True)
    return dict(zip(addresses, facts))


@contextlib.contextmanager
def local_cluster():
    """Two worker processes (one thread and the memlab resource each) and a client of them."""
    tracker = multiprocessing.resource_tracker._resource_tracker
    running_before = tracker._pid is not None
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  resources={"memlab": 1}, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as dask_client:
        yield dask_client
    # The worker processes are spawned, which starts multiprocessing's resource tracker, a child
    # process that would outlive the cluster (other tests check that they leave no child behind).
    if not running_before and hasattr(tracker, "_stop"):
        tracker._stop()


@pytest.fixture(scope="module")
def client():
    with local_cluster() as dask_client:
        yield dask_client


@pytest.fixture
def own_client():
    """A cluster of this test alone: one whose worker it kills (the nanny's restart of that
    worker is never waited for, and no other test meets the restarted worker)."""
    with local_cluster() as dask_client:
        yield dask_client


def kill_after_first_row(pid: int, out: Path, host: str) -> threading.Thread:
    """A thread that SIGKILLs worker process ``pid`` once ``out`` holds a row measured by ``host``."""
    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and host in out.read_text():
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=watch)
    killer.start()
    return killer


def small_chase() -> Sweep:
    return Sweep("fleet", "chase", grid(working_set_bytes=[16384, 65536, 262144], order=["random"]),
                 repeat=2, warmup=0, target_seconds=0.01, runs=1)


def key_of(row: dict) -> tuple:
    return point_key(row, ["working_set_bytes", "order", "npad"])


@pytest.fixture(scope="module")
def each_host(client, tmp_path_factory):
    fake(client, FAKE_A, FAKE_B)
    out = tmp_path_factory.mktemp("each_host") / "chase.csv"
    notes: list[str] = []
    dataset = run_sweep(small_chase(), out, client=client, each_host=True, progress=False, warn=notes.append)
    return dataset, out


def test_each_host_measures_the_sweep_once_per_worker(each_host):
    dataset, out = each_host
    chase = registry.family("chase")
    points = {key_of({"family": "chase", **dataclasses.asdict(chase.params(p))}) for p in small_chase().points}
    assert len(dataset) == 2 * len(points)
    for facts in (FAKE_A, FAKE_B):
        mine = [row for row in dataset.rows if row[HOST_COLUMN] == facts["hostname"]]
        assert {key_of(row) for row in mine} == points
        assert {row[FINGERPRINT_COLUMN] for row in mine} == {_fake_id(facts)}
        assert all(row["context_dask_overhead_s"] == row["context_dask_overhead_s"] for row in mine)
    # one set of columns in every row, whatever the load (a steal share too short to know is NaN,
    # not absent): a CSV round trip gives back exactly these rows
    assert len({frozenset(row) for row in dataset.rows}) == 1
    on_disk = Dataset.load(out)
    assert same_rows(on_disk.rows) == same_rows(dataset.rows)
    hosts = {(entry["host"], entry["fingerprint_id"]) for entry in on_disk.metadata["machines"]}
    assert hosts == {(f["hostname"], _fake_id(f)) for f in (FAKE_A, FAKE_B)}
    assert on_disk.metadata["fleet"]["mode"] == "each-host" and on_disk.metadata["fleet"]["lost"] == {}
    assert "machine" not in on_disk.metadata  # two machines: metadata["machines"] says which


def test_no_two_measurements_overlap_on_one_worker(each_host):
    dataset, _ = each_host
    for host in ("fake-a", "fake-b"):
        mine = sorted((r for r in dataset.rows if r[HOST_COLUMN] == host), key=lambda r: r["context_started_unix"])
        assert len(mine) == 3
        for before, after in zip(mine, mine[1:]):
            assert before["context_started_unix"] <= before["context_ended_unix"] <= after["context_started_unix"]


def _running(names, dask_worker=None):
    return {name: dask_worker.periodic_callbacks[name].is_running()
            for name in names if name in dask_worker.periodic_callbacks}


def test_the_workers_profiler_and_tick_are_stopped_while_measuring_and_restarted(client, tmp_path):
    fake(client, FAKE_A, FAKE_B)
    during = []
    tiny = Sweep("quiet", "chase", grid(working_set_bytes=[16384], order=["random"]),
                 repeat=1, warmup=0, target_seconds=0.01, runs=1)
    run_sweep(tiny, tmp_path / "quiet.csv", client=client, each_host=True, progress=False,
              on_point=lambda point, row: during.append(client.run(_running, fleet.QUIET_CALLBACKS)))
    after = client.run(_running, fleet.QUIET_CALLBACKS)
    assert len(during) == 2
    assert {value for seen in during for worker in seen.values() for value in worker.values()} == {False}
    assert all(worker and all(worker.values()) for worker in after.values()), after


def test_a_rerun_measures_nothing_already_on_disk(client, each_host):
    dataset, out = each_host
    fake(client, FAKE_A, FAKE_B)
    again = run_sweep(small_chase(), out, client=client, each_host=True, progress=False)
    assert same_rows(again.rows) == same_rows(dataset.rows)
    assert len(Dataset.load(out)) == len(dataset)


def test_the_per_machine_figure_has_one_curve_per_host(each_host):
    pytest.importorskip("matplotlib", reason="matplotlib (the plot extra) is not installed")
    dataset, _ = each_host
    fig = plot.figure(dataset)
    labels = [line.get_label() for ax in fig.axes for line in ax.get_lines()
              if not line.get_label().startswith("_")]
    assert sorted(labels) == ["machine=fake-a", "machine=fake-b"]


def test_the_merged_dataset_equals_the_union(each_host, tmp_path, capsys):
    dataset, _ = each_host
    parts = []
    for host in ("fake-a", "fake-b"):
        part = Dataset([r for r in dataset.rows if r[HOST_COLUMN] == host], dataset.metadata)
        part.save(tmp_path / f"{host}.csv")
        parts.append(str(tmp_path / f"{host}.csv"))
    assert cli.main(["merge", str(tmp_path / "all.csv"), *parts]) == 0
    assert "6 rows from 2 machines" in capsys.readouterr().out
    merged = Dataset.load(tmp_path / "all.csv")
    assert same_rows(merged.rows) == same_rows(dataset.rows)
    assert cli.main(["merge", str(tmp_path / "twice.csv"), parts[0], parts[0]]) == 2
    assert "duplicate point" in capsys.readouterr().err


def test_compare_by_machine_and_the_report_machine_table(each_host, capsys):
    dataset, out = each_host
    result = compare_machines(dataset)
    assert list(result) == ["fake-b"] and len(result["fake-b"].points) == 3
    assert [fact for fact, _, _ in result["fake-b"].machine_differences] == ["cpu_model"]
    assert cli.main(["compare", "--by-machine", str(out)]) == 0
    text = capsys.readouterr().out
    assert "== fake-b" in text and "cpu_model" in text
    html = build_report([dataset], command="test")
    for facts in (FAKE_A, FAKE_B):
        assert f"<td>{facts['hostname']}</td><td>{facts['cpu_model']}</td>" in html
        assert f"<td>{_fake_id(facts)}</td><td>3</td>" in html


def test_spread_refuses_machines_that_differ(client, tmp_path):
    fake(client, FAKE_A, FAKE_B)
    with pytest.raises(ValueError, match="cpu_model: fake-a=Fake CPU A, fake-b=Fake CPU B"):
        run_sweep(small_chase(), tmp_path / "spread.csv", client=client, spread=True, progress=False)
    assert not (tmp_path / "spread.csv").exists()


def test_each_host_refuses_two_workers_on_one_host(client, tmp_path):
    fake(client, FAKE_A, FAKE_A)
    for mode in ("each_host", "spread"):
        with pytest.raises(ValueError, match="run on one host .fake-a.; fleet mode needs one measuring worker"):
            run_sweep(small_chase(), tmp_path / "twice.csv", client=client, progress=False, **{mode: True})
    assert not (tmp_path / "twice.csv").exists()


def test_a_scheduler_that_does_not_answer_is_named():
    with pytest.raises(OSError, match="no Dask scheduler answered at tcp://127.0.0.1:9 within 1 s"):
        fleet.connect("tcp://127.0.0.1:9", timeout_seconds=1)
    with pytest.raises(ValueError, match="scheduler=42 must be a distributed.Client or an address"):
        fleet.connect(42)


def calibrate_sweep(points: int, budget_ns: int) -> Sweep:
    return Sweep("fleet", "calibrate", grid(budget_ns=[budget_ns + i for i in range(points)]),
                 repeat=1, warmup=0, runs=1)


def test_fleet_rows_have_the_columns_of_local_rows_and_the_points_planned(client, tmp_path):
    """The fleet path of the run loop (memlab.runner.FleetExecutor) writes rows of the same
    meaning as the local one: the same columns plus what Dask added, every planned point per host."""
    fake(client, FAKE_A, FAKE_B)
    sweep = calibrate_sweep(2, 5_000_000)
    local = run_sweep(sweep, tmp_path / "local.csv", progress=False)
    run_sweep(sweep, tmp_path / "fleet.csv", client=client, each_host=True, progress=False)
    fleet_rows = Dataset.load(tmp_path / "fleet.csv").rows
    want = sorted({c for r in local.rows for c in r} | {"context_dask_overhead_s"})
    assert sorted({c for r in fleet_rows for c in r}) == want
    planned = sorted(point_key({"family": "calibrate", **p}, ["budget_ns"]) for p in sweep.points)
    for host in ("fake-a", "fake-b"):
        assert sorted(point_key(r, ["budget_ns"]) for r in fleet_rows if r[HOST_COLUMN] == host) == planned


def test_each_host_measures_every_run_of_every_point_and_a_rerun_finishes_the_runs(client, tmp_path):
    fake(client, FAKE_A, FAKE_B)
    out = tmp_path / "runs.csv"
    sweep = dataclasses.replace(calibrate_sweep(2, 5_000_000), runs=2)
    run_sweep(dataclasses.replace(sweep, runs=1), out, client=client, each_host=True, progress=False)
    dataset = run_sweep(sweep, out, client=client, each_host=True, progress=False)
    planned = sorted((point_key({"family": "calibrate", **p}, ["budget_ns"]), run)
                     for p in sweep.points for run in range(2))
    for host in ("fake-a", "fake-b"):
        mine = [r for r in Dataset.load(out).rows if r[HOST_COLUMN] == host]
        assert sorted((point_key(r, ["budget_ns"]), r["run"]) for r in mine) == planned
    assert len(dataset) == 2 * len(planned)


def test_spread_splits_the_points_of_identical_machines(client, tmp_path):
    same = {**FAKE_A, "hostname": "twin-b"}
    fake(client, FAKE_A, same)
    sweep = calibrate_sweep(8, 5_000_000)
    dataset = run_sweep(sweep, tmp_path / "spread.csv", client=client, spread=True, progress=False)
    keys = [point_key(row, ["budget_ns"]) for row in dataset.rows]
    assert sorted(keys) == sorted(point_key({"family": "calibrate", **p}, ["budget_ns"]) for p in sweep.points)
    assert {row[HOST_COLUMN] for row in dataset.rows} == {"fake-a", "twin-b"}
    assert {row[FINGERPRINT_COLUMN] for row in dataset.rows} == {_fake_id(FAKE_A)}
    assert chart.machine_labels(dataset) == [""] * len(dataset)  # one machine: one curve
    again = run_sweep(sweep, tmp_path / "spread.csv", client=client, spread=True, progress=False)
    assert len(again) == len(sweep.points)


def test_a_killed_worker_loses_only_its_point_and_a_rerun_completes(own_client, tmp_path, capsys):
    victim, survivor = fake(own_client, FAKE_A, FAKE_B)
    pids = own_client.run(os.getpid)
    sweep = calibrate_sweep(5, 100_000_000)
    out = tmp_path / "calibrate.csv"
    script = tmp_path / "fleet_sweep.py"
    script.write_text("from memlab.grid import Sweep, grid\n\n"
                      "def sweep(quick=False):\n"
                      f"    return Sweep('fleet', 'calibrate', grid(budget_ns={[p['budget_ns'] for p in sweep.points]}),"
                      " repeat=1, warmup=0, runs=1)\n")
    killer = kill_after_first_row(pids[victim], out, "fake-a")
    notes: list[str] = []
    try:
        first = run_sweep(sweep, out, client=own_client, each_host=True, progress=False, warn=notes.append)
    finally:
        killer.join()
    measured_a = [r for r in first.rows if r[HOST_COLUMN] == "fake-a"]
    assert 1 <= len(measured_a) < 5
    assert [r for r in first.rows if r[HOST_COLUMN] == "fake-b"].__len__() == 5
    assert first.metadata["fleet"]["lost"] == {"fake-a": 5 - len(measured_a)}
    assert any("fake-a left the cluster" in note for note in notes)
    # The host comes back (here: a new cluster whose workers have the same fake facts); the same
    # command measures what is missing.
    with local_cluster() as again:
        fake(again, FAKE_A, FAKE_B)
        command = ["sweep", str(script), "--out", str(out), "--scheduler", again.scheduler.address,
                   "--each-host", "--no-progress"]
        assert cli.main(command) == 0
    assert "10 rows from 2 hosts" in capsys.readouterr().out
    final = Dataset.load(out)
    for host in ("fake-a", "fake-b"):
        keys = [point_key(r, ["budget_ns"]) for r in final.rows if r[HOST_COLUMN] == host]
        assert sorted(keys) == sorted(point_key({"family": "calibrate", **p}, ["budget_ns"]) for p in sweep.points)
    kept = {r["context_started_unix"] for r in final.rows}
    assert {r["context_started_unix"] for r in measured_a} <= kept  # the rows before the kill stay
    assert sorted(machine_key(r) for r in final.rows).count(("fake-a", _fake_id(FAKE_A))) == 5


class CountingDeque(collections.deque):
    """A queue of points that counts the points put back at its front (fleet.dispatch's requeue)."""

    requeued = 0

    def appendleft(self, item) -> None:
        self.requeued += 1
        super().appendleft(item)


def test_spread_gives_the_points_of_a_killed_worker_to_the_others(own_client, tmp_path, monkeypatch):
    victim, _ = fake(own_client, FAKE_A, {**FAKE_A, "hostname": "twin-b"})
    pids = own_client.run(os.getpid)
    sweep = calibrate_sweep(8, 200_000_000)
    out = tmp_path / "spread.csv"
    real_dispatch = fleet.dispatch
    shared: list[CountingDeque] = []

    def counting_dispatch(client, family_name, hosts, queues, *args, **kwargs):
        assert kwargs["requeue"] is True
        shared.append(CountingDeque(next(iter(queues.values()))))  # spread: one queue for every host
        return real_dispatch(client, family_name, hosts, {address: shared[0] for address in queues},
                             *args, **kwargs)

    monkeypatch.setattr(fleet, "dispatch", counting_dispatch)
    killer = kill_after_first_row(pids[victim], out, "fake-a")
    notes: list[str] = []
    try:
        dataset = run_sweep(sweep, out, client=own_client, spread=True, progress=False, warn=notes.append)
    finally:
        killer.join()
    # fake-a held two points (one measuring, one waiting) when it was killed: they went back to the queue.
    assert shared[0].requeued >= 1
    keys = sorted(point_key(r, ["budget_ns"]) for r in Dataset.load(out).rows)
    assert keys == sorted(point_key({"family": "calibrate", **p}, ["budget_ns"]) for p in sweep.points)
    assert dataset.metadata["fleet"]["lost"] == {}
    assert not [note for note in notes if "left the cluster" in note]
    hosts = collections.Counter(r[HOST_COLUMN] for r in dataset.rows)
    assert set(hosts) == {"fake-a", "twin-b"} and sum(hosts.values()) == len(sweep.points)


def test_ctrl_c_keeps_the_rows_measured_cancels_the_rest_and_a_rerun_completes(client, tmp_path, monkeypatch):
    fake(client, FAKE_A, FAKE_B)
    sweep = calibrate_sweep(4, 20_000_000)
    out = tmp_path / "interrupted.csv"
    real_bar = run_module.progress_bar

    def interrupting_bar(*args, **kwargs):  # Ctrl-C right after the first row is on disk
        bar = real_bar(*args, **kwargs)
        update = bar.update

        def update_then_interrupt(count=1):
            update(count)
            raise KeyboardInterrupt

        bar.update = update_then_interrupt
        return bar

    monkeypatch.setattr(run_module, "progress_bar", interrupting_bar)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, out, client=client, each_host=True, progress=False)
    monkeypatch.undo()
    kept = Dataset.load(out)
    assert len(kept) == 1
    deadline = time.monotonic() + 120  # the cancellations reach the workers
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values())
    final = run_sweep(sweep, out, client=client, each_host=True, progress=False)
    expected = sorted(point_key({"family": "calibrate", **p}, ["budget_ns"]) for p in sweep.points)
    for host in ("fake-a", "fake-b"):
        keys = [point_key(r, ["budget_ns"]) for r in final.rows if r[HOST_COLUMN] == host]
        assert sorted(keys) == expected
    assert set(same_rows(kept.rows)) <= set(same_rows(Dataset.load(out).rows))  # the row before Ctrl-C stays



# --- the README's command against a scheduler and a worker started as README says ------------


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _process_group(argv: list[str], log: Path):
    """``argv`` started in a session of its own, its output in ``log``; on the way out, every
    process of the session (the worker's nanny starts the worker) is killed and the child reaped."""
    with open(log, "wb") as output:
        process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, close_fds=True)
    try:
        yield process
    finally:
        for signal_number in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal_number)
            try:
                process.wait(timeout=20)
                break
            except subprocess.TimeoutExpired:
                continue
        process.wait()
        deadline = time.monotonic() + 30  # the worker (a grandchild) is reaped by init once killed
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.05)


def _wait_for(log: Path, text: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, f"{process.args[:2]} ended: {log.read_text(errors='replace')[-2000:]}"
        assert time.monotonic() < deadline, f"no {text!r} in {log}: {log.read_text(errors='replace')[-2000:]}"
        time.sleep(0.1)


def test_the_readme_command_measures_on_a_dask_scheduler_and_worker_started_as_readme_says(tmp_path):
    """README: ``dask scheduler``, ``dask worker ... --nworkers 1 --nthreads 1 --resources memlab=1`` and
    ``memlab sweep chase.quick --scheduler tcp://HOST:8786 --each-host --out results/``, all as processes
    (on loopback, a free port, no dashboard). It used to exit 2 with "No clients found": the client
    memlab makes is not the default one, and ``as_completed`` looked for the default."""
    dask = Path(sys.executable).with_name("dask")
    if not dask.exists():
        pytest.skip(f"no dask command beside {sys.executable}")
    port = _free_loopback_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler_log, worker_log = tmp_path / "scheduler.log", tmp_path / "worker.log"
    with _process_group([str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                         "--no-dashboard"], scheduler_log) as scheduler:
        _wait_for(scheduler_log, "Scheduler at:", scheduler)
        with _process_group([str(dask), "worker", address, "--nworkers", "1", "--nthreads", "1",
                             "--resources", "memlab=1", "--host", "127.0.0.1", "--no-dashboard"],
                            worker_log) as worker:
            _wait_for(scheduler_log, "Register worker", worker)
            result = subprocess.run(
                [sys.executable, "-m", "memlab", "sweep", "chase.quick", "--scheduler", address,
                 "--each-host", "--out", "results/"],
                cwd=tmp_path, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    dataset = Dataset.load(tmp_path / "results" / "chase-quick.csv")
    quick = registry.family("chase").sweep("quick")
    assert len(dataset) == len(quick.points) * quick.runs_per_point  # every run of every point
    assert sorted({row["run"] for row in dataset.rows}) == list(range(quick.runs_per_point))
    assert {row[HOST_COLUMN] for row in dataset.rows} == {os.uname().nodename}
    assert dataset.metadata["fleet"]["mode"] == "each-host"
    assert dataset.metadata["fleet"]["scheduler"] == address


KERNEL = r'''
#include "memlab_kernel.h"
typedef struct { int64_t n; } cfg;
static const mlk_param params[] = {MLK_INT(cfg, n, 1, 1000, 10, "", "additions per iteration"), {0}};
static int measure(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host)
{
    (void)host;
    const cfg *c = state;
    uint64_t x = 0;
    for (uint64_t i = 0; i < iterations * (uint64_t)c->n; i++) {
        x += i;
        mlk_keep(x);
    }
    sample->units = (double)iterations * (double)c->n;
    return 0;
}
MEMLAB_KERNEL = {.name = "fleet_adds", .description = "adds", .config_size = sizeof(cfg), .params = params,
                 .unit = "addition", .measure = measure};
'''


def test_a_kernel_files_source_travels_to_each_worker_and_is_built_there(client, each_host, tmp_path, monkeypatch):
    from memlab import userkernel  # each_host: the two workers pass for two hosts

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    source = tmp_path / "adds.c"
    source.write_text(KERNEL)
    family = userkernel.kernel_family(source)
    source.unlink()  # the workers build what the parent built, not what is on disk now
    client.run(_set_env, "MEMLAB_CACHE_DIR", str(tmp_path / "worker-cache"))
    try:
        sweep = Sweep("adds", family.name, grid(n=[5, 50]), repeat=1, warmup=0, target_seconds=0.002, runs=1)
        data = run_sweep(sweep, tmp_path / "adds.csv", client=client, each_host=True, progress=False)
    finally:
        client.run(_unset_env, "MEMLAB_CACHE_DIR")
    assert len(data.rows) == 2 * len(workers(client))
    assert sorted(row["n"] for row in data.rows) == [5] * len(workers(client)) + [50] * len(workers(client))
    assert data.metadata["kernel_sha256"] == family.metadata["kernel_sha256"]
    assert list((tmp_path / "worker-cache" / "kernels").glob("adds-*.so"))  # built there, from the source sent
