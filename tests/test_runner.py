"""memlab.runner: one run loop (plan, open, measure, close) behind every command that measures.

The rows of every path (``memlab run --out``, ``run_sweep``, the tour, the
pytest plugin, ``memlab reproduce``) have the same columns and the point keys
their run planned; the fleet path is compared in tests/test_fleet.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from memlab import catalogue, cli
from memlab import measure as measure_module
from memlab.dataset import (
    FINGERPRINT_COLUMN,
    HOST_COLUMN,
    RUN_COLUMN,
    RUN_SPREAD_COLUMN,
    RUN_UNSTABLE_COLUMN,
    Dataset,
    context_column,
    point_runs,
    run_index,
)
from memlab.grid import Sweep
from memlab.machine import collect, identity
from memlab.pytest_plugin import RegressionGuard
from memlab.registry import family
from memlab.reproduce import reproduce
from memlab.runner import LocalExecutor, ProcessExecutor, Run, estimate_seconds
from memlab.significance import is_unstable, run_spread
from memlab.sweep import run_sweep
from memlab.tour import reduce_sweep, tour
from memlab.worker import WorkerFailed

from test_reproduce import fake_item  # noqa: F401  (the stand-in catalogue item)


def calibrate(*budgets: int, name: str = "r", runs: int | None = None) -> Sweep:
    return Sweep(name, "calibrate", [{"budget_ns": b} for b in budgets], repeat=2, warmup=0, runs=runs)


def columns(rows) -> list[str]:
    return sorted({name for row in rows for name in row})


def keys(dataset: Dataset) -> list[tuple]:
    return sorted(dataset.key(row) for row in dataset.rows)


def planned_keys(sweep: Sweep) -> list[tuple]:
    plan = Run(sweep).plan()
    return sorted(plan.key(point) for point in plan.points)


def test_the_plan_knows_the_runs_on_disk_and_what_is_left(tmp_path):
    out = tmp_path / "c.csv"
    whole = calibrate(2_000_000, 3_000_000, 4_000_000, runs=2)
    run_sweep(dataclasses.replace(whole, points=whole.points[:1]), out, progress=False)
    plan = Run(whole, out).plan()
    assert len(plan.points) == 3 and plan.runs == 2 and plan.units == 6
    assert plan.done == {(("calibrate", 2_000_000), 0), (("calibrate", 2_000_000), 1)}
    assert [p["budget_ns"] for p in plan.pending] == [3_000_000, 4_000_000]
    assert [(p["budget_ns"], r) for p, r in plan.pending_runs] == [(3_000_000, 0), (4_000_000, 0),
                                                                  (3_000_000, 1), (4_000_000, 1)]
    assert plan.seconds == pytest.approx(estimate_seconds(whole)) == pytest.approx(2 * sum(plan.seconds_per_run))
    assert plan.pending_seconds == pytest.approx(2 * sum(plan.seconds_per_run[1:]))
    assert Run(whole, out, resume=False).plan().done == set()  # a fresh run plans every point
    seen = []
    dataset = Run(whole, out).execute(progress=False, on_point=lambda point, row: seen.append(row is None))
    assert seen == [True, False, False, True, False, False]  # the runs on disk are told, not measured again
    assert len(dataset) == 6 and sorted(set(keys(dataset))) == planned_keys(whole)


def test_runs_are_taken_in_rounds_each_a_fresh_setup(monkeypatch):
    built = []
    real_kernel = measure_module.Kernel

    def counting_kernel(name, config):
        built.append(name)
        return real_kernel(name, config)

    monkeypatch.setattr(measure_module, "Kernel", counting_kernel)
    order = []
    dataset = Run(calibrate(2_000_000, 3_000_000, 4_000_000), runs=3).execute(
        progress=False, on_point=lambda point, row: order.append((point["budget_ns"], row[RUN_COLUMN])))
    assert order == [(b, r) for r in range(3) for b in (2_000_000, 3_000_000, 4_000_000)]
    assert [(row["budget_ns"], row[RUN_COLUMN]) for row in dataset.rows] == order
    assert len(built) == 9  # every run of every point built its own kernel (allocation, pinning)
    assert dataset.metadata["runs"] == 3 and dataset.metadata["repeat"] == 2


def test_each_row_carries_its_points_run_spread_so_far():
    dataset = Run(calibrate(2_000_000, 3_000_000), runs=3).execute(progress=False)
    for key, runs in point_runs(dataset.rows, ["budget_ns"]).items():
        samples = []
        for index, (row,) in runs.items():
            samples.append(row["core_GHz_samples"])
            assert row[RUN_SPREAD_COLUMN] == pytest.approx(run_spread(samples), abs=1e-4)
            assert row[RUN_UNSTABLE_COLUMN] is is_unstable(row[RUN_SPREAD_COLUMN])
        assert runs[0][0][RUN_SPREAD_COLUMN] == 1.0


def test_resume_finishes_the_runs_a_point_lacks(tmp_path):
    out = tmp_path / "c.csv"
    sweep = calibrate(2_000_000, 3_000_000, runs=1)
    run_sweep(sweep, out, progress=False)
    # a dataset written before runs existed: its rows have no run column, each is run 0
    old = Dataset.load(out)
    Dataset([{k: v for k, v in row.items() if k not in (RUN_COLUMN, RUN_SPREAD_COLUMN, RUN_UNSTABLE_COLUMN)}
             for row in old.rows], old.metadata).save(out)
    order = []
    dataset = run_sweep(sweep, out, progress=False, runs=3,
                        on_point=lambda point, row: order.append(None if row is None else row[RUN_COLUMN]))
    assert order == [None, None, 1, 1, 2, 2]
    assert sorted((row["budget_ns"], run_index(row)) for row in Dataset.load(out).rows) == [
        (b, r) for b in (2_000_000, 3_000_000) for r in range(3)]
    assert run_sweep(sweep, out, progress=False, runs=3, on_point=lambda p, row: order.append(row)) is not None
    assert order[6:] == [None] * 6  # a third call finds every run on disk


def test_the_runs_of_a_sweep_are_checked():
    with pytest.raises(ValueError, match="runs=0 is below the minimum 1"):
        calibrate(2_000_000, runs=0)
    with pytest.raises(ValueError, match="runs=1001 is above the maximum 1000"):
        Run(calibrate(2_000_000), runs=1001)
    with pytest.raises(ValueError, match="processes='yes' must be True or False"):
        Run(calibrate(2_000_000), processes="yes")
    with pytest.raises(ValueError, match="takes no executor"):
        Run(calibrate(2_000_000), processes=True, executor=LocalExecutor())


def test_processes_measure_each_run_in_a_fresh_worker(tmp_path):
    out = tmp_path / "p.csv"
    dataset = run_sweep(calibrate(2_000_000, 3_000_000, runs=2), out, progress=False, processes=True)
    pids = [row[context_column("worker_pid")] for row in dataset.rows]
    assert len(set(pids)) == 4 and os.getpid() not in pids
    assert [(row["budget_ns"], row[RUN_COLUMN]) for row in Dataset.load(out).rows] == [
        (2_000_000, 0), (3_000_000, 0), (2_000_000, 1), (3_000_000, 1)]
    assert dataset.metadata["processes"] is True and dataset.metadata["failed_runs"] == []


def test_a_worker_killed_by_a_signal_is_a_failed_run_and_the_others_measure(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))
    counter, out, warnings = tmp_path / "calls", tmp_path / "p.csv", []
    executor = ProcessExecutor(prelude="worker_preludes:crash_on_call",
                               prelude_args={"path": str(counter), "call": 2})
    run = Run(calibrate(2_000_000, 3_000_000, runs=2), out, executor=executor)
    with pytest.raises(WorkerFailed, match="budget_ns=3000000 run 0: the worker process was killed by SIGSEGV"):
        run.execute(progress=False, warn=warnings.append)
    assert any("run 1/2: the worker process was killed by SIGSEGV" in text for text in warnings)
    on_disk = Dataset.load(out)
    assert [(row["budget_ns"], row[RUN_COLUMN]) for row in on_disk.rows] == [
        (2_000_000, 0), (2_000_000, 1), (3_000_000, 1)]
    assert on_disk.metadata["failed_runs"] == [
        {"point": {"budget_ns": 3_000_000}, "run": 0, "reason": "was killed by SIGSEGV"}]
    # running it again measures the failed run only
    again = run_sweep(calibrate(2_000_000, 3_000_000, runs=2), out, progress=False, processes=True)
    assert sorted((row["budget_ns"], row[RUN_COLUMN]) for row in again.rows) == [
        (b, r) for b in (2_000_000, 3_000_000) for r in range(2)]


def test_a_point_the_family_refuses_stops_the_run_before_anything_is_written(tmp_path):
    run = Run(calibrate(1), tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="budget_ns=1 is below"):
        run.execute(progress=False)
    assert not (tmp_path / "bad.csv").exists()
    assert estimate_seconds(calibrate(1)) == 0  # an estimate counts nothing for it


def test_every_path_gives_the_same_columns_and_the_points_it_planned(tmp_path, monkeypatch):
    reference_sweep = reduce_sweep(family("calibrate").sweep("quick"))
    reference = run_sweep(reference_sweep, tmp_path / "sweep.csv", progress=False)
    want = columns(reference.rows)
    assert HOST_COLUMN in want and FINGERPRINT_COLUMN in want
    assert keys(reference) == planned_keys(reference_sweep)

    assert cli.main(["run", "calibrate", "budget_ns=5000000", "--repeat", "2", "--warmup", "0",
                     "--out", str(tmp_path / "run.csv"), "--json"]) == 0
    one = Dataset.load(tmp_path / "run.csv")
    assert columns(one.rows) == want and keys(one) == [("calibrate", 5_000_000)]
    assert one.rows[0][HOST_COLUMN] == identity(collect(include_core=False))["host"]
    assert [m["host"] for m in one.metadata["machines"]] == [one.rows[0][HOST_COLUMN]]

    toured = tour(tmp_path / "tour", reduced=True, families=["calibrate"], progress=False, report=False)
    assert columns(toured.runs[0].dataset.rows) == want
    assert keys(toured.runs[0].dataset) == planned_keys(reference_sweep)

    guard = RegressionGuard(test_id="t", baseline_dir=tmp_path, save_baseline=True, fail_above=0.05,
                            alpha=0.05, repeat=None, record=lambda kind, text: None)
    guarded = guard._measure(reference_sweep)
    # the guard measures its points in runs: the same columns, and each row's run index
    assert columns(guarded.rows) == sorted(set(want) | {RUN_COLUMN})
    assert sorted(set(keys(guarded))) == sorted(planned_keys(reference_sweep))

    monkeypatch.setattr(catalogue, "ITEMS", (fake_item(),))
    result = reproduce(["clock"], quick=True, out=tmp_path / "reproduce", progress=False)
    (task,) = result.tasks
    reproduced = Dataset.load(task.path)
    assert columns(reproduced.rows) == want and sorted(set(keys(reproduced))) == planned_keys(task.sweep)
    runs = task.sweep.runs_per_point
    assert sorted(run_index(row) for row in reproduced.rows) == sorted(list(range(runs)) * len(task.sweep.points))


class Reversed(LocalExecutor):
    """An executor of its own: the local machine, the points measured last first (the seam where
    interleaved rounds and a process executor plug in)."""

    label = " (reversed)"

    def measure(self, run: Run) -> None:
        for point, index in reversed(run.plan().pending_runs):
            measurement = run.family.run(point, **run.options)
            run.record(point, {**measurement.to_row(), **self.tags}, measurement.conditions_warning,
                       run_number=index)


def test_an_executor_decides_the_order_and_the_run_writes_every_row(tmp_path):
    sweep = calibrate(2_000_000, 3_000_000, runs=1)
    out = tmp_path / "reversed.csv"
    dataset = Run(sweep, out, executor=Reversed()).execute(progress=False)
    assert [row["budget_ns"] for row in dataset.rows] == [3_000_000, 2_000_000]
    on_disk = Dataset.load(out)
    assert [row["budget_ns"] for row in on_disk.rows] == [3_000_000, 2_000_000]
    assert "check_start" in on_disk.metadata and "check_end" in on_disk.metadata


def test_open_refuses_a_fresh_run_over_rows_before_the_machine_check(tmp_path, monkeypatch):
    out = tmp_path / "c.csv"
    run_sweep(calibrate(2_000_000, runs=1), out, progress=False)
    started = []
    monkeypatch.setattr(LocalExecutor, "start", lambda self, run: started.append(run))
    with pytest.raises(ValueError, match="already holds a dataset"):
        Run(calibrate(2_000_000), out, resume=False).execute(progress=False)
    assert started == [] and len(Dataset.load(out)) == 1
    assert json.loads(out.with_suffix(".json").read_text())["sweep"] == "r"


def test_memlab_run_measures_the_runs_asked_for(tmp_path, capsys):
    assert cli.main(["run", "calibrate", "budget_ns=2000000", "--repeat", "1", "--warmup", "0"]) == 0
    assert "run 1/" not in capsys.readouterr().out  # one run unless asked
    out = tmp_path / "two.csv"
    assert cli.main(["run", "calibrate", "budget_ns=2000000", "--repeat", "1", "--warmup", "0", "--runs", "2",
                     "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "run 1/2:" in text and "run 2/2:" in text and "run spread" in text and "2 rows ->" in text
    assert [run_index(row) for row in Dataset.load(out).rows] == [0, 1]


def test_memlab_sweep_takes_runs_and_processes(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert cli.main(["sweep", "calibrate.quick", "--runs", "2", "--repeat", "1", "--processes",
                     "--out", str(out), "--no-progress"]) == 0
    rows = Dataset.load(out).rows
    assert [run_index(row) for row in rows] == [0, 1]
    assert len({row[context_column("worker_pid")] for row in rows}) == 2
    assert Dataset.load(out).metadata["runs"] == 2
    assert cli.main(["sweep", "calibrate.quick", "--runs", "0"]) == 2
    assert "--runs" in capsys.readouterr().err


def test_a_family_says_what_a_run_costs_beyond_its_samples():
    """The chase's runs cost 3 ms to a quarter of a second beyond their samples (its list): the flat
    0.25 s a run made figure 6.5's 2048 small points read 19.8 minutes where they take about 5."""
    from memlab import chase
    from memlab.runner import POINT_OVERHEAD_SECONDS, point_seconds
    walk = family("chase")
    small, large = walk.params({"working_set_bytes": 1024}), walk.params({"working_set_bytes": 1 << 27})
    assert point_seconds(walk, small, 0.01, 4) == pytest.approx(
        0.04 + chase.SETUP_SECONDS + chase.SETUP_SECONDS_PER_BYTE * 1024)
    assert point_seconds(walk, large, 0.01, 4) == pytest.approx(
        0.04 + chase.SETUP_SECONDS + chase.SETUP_SECONDS_PER_BYTE * (1 << 27))
    own = walk.params({"working_set_bytes": 1 << 20, "threads": 2, "thread_lists": "own"})
    shared = walk.params({"working_set_bytes": 1 << 20, "threads": 2, "thread_lists": "shared"})
    assert chase.setup_seconds(own) - chase.SETUP_SECONDS == pytest.approx(
        2 * (chase.setup_seconds(shared) - chase.SETUP_SECONDS))  # each thread builds its own list
    from memlab import bandwidth, clear
    copy = family("bandwidth")
    one = bandwidth.setup_seconds({"working_set_bytes": 1 << 26}) - bandwidth.SETUP_SECONDS
    assert one == pytest.approx(bandwidth.SETUP_SECONDS_PER_BYTE * (1 << 26))
    assert point_seconds(copy, copy.params({"working_set_bytes": 1 << 26}), 0.01, 4) == pytest.approx(
        0.04 + bandwidth.SETUP_SECONDS + one)
    separate = bandwidth.setup_seconds({"working_set_bytes": 1 << 26, "threads": 2, "shared": False})
    assert separate - bandwidth.SETUP_SECONDS == pytest.approx(2 * one)  # each thread writes a set of its own
    beside = bandwidth.setup_seconds({"working_set_bytes": 1 << 26, "background_op": "read",
                                      "background_working_set_bytes": 1 << 26, "placement": "cores"})
    assert beside - bandwidth.SETUP_SECONDS == pytest.approx(2 * one)  # and the background worker its own
    region = family("clear_order")
    assert point_seconds(region, region.params({"region_bytes": 1 << 30}), 0.0, 3) == pytest.approx(
        clear.ORDER_SETUP_SECONDS + clear.ORDER_SETUP_SECONDS_PER_BYTE * (1 << 30))
    clock = family("calibrate")  # no hook: the flat overhead
    assert clock.setup_seconds is None
    assert point_seconds(clock, clock.params({"budget_ns": 10**7}), None, 1) == pytest.approx(0.01 + POINT_OVERHEAD_SECONDS)
