"""memlab.runner: one run loop (plan, open, measure, close) behind every command that measures.

The rows of every path (``memlab run --out``, ``run_sweep``, the tour, the
pytest plugin, ``memlab reproduce``) have the same columns and the point keys
their run planned; the fleet path is compared in tests/test_fleet.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from memlab import catalogue, cli
from memlab.dataset import FINGERPRINT_COLUMN, HOST_COLUMN, RUN_COLUMN, Dataset
from memlab.grid import Sweep
from memlab.machine import collect, identity
from memlab.pytest_plugin import RegressionGuard
from memlab.registry import family
from memlab.reproduce import reproduce
from memlab.runner import LocalExecutor, Run, estimate_seconds
from memlab.sweep import run_sweep
from memlab.tour import reduce_sweep, tour

from test_reproduce import fake_item  # noqa: F401  (the stand-in catalogue item)


def calibrate(*budgets: int, name: str = "r") -> Sweep:
    return Sweep(name, "calibrate", [{"budget_ns": b} for b in budgets], repeat=2, warmup=0)


def columns(rows) -> list[str]:
    return sorted({name for row in rows for name in row})


def keys(dataset: Dataset) -> list[tuple]:
    return sorted(dataset.key(row) for row in dataset.rows)


def planned_keys(sweep: Sweep) -> list[tuple]:
    plan = Run(sweep).plan()
    return sorted(plan.key(point) for point in plan.points)


def test_the_plan_knows_the_points_on_disk_and_what_is_left(tmp_path):
    out = tmp_path / "c.csv"
    whole = calibrate(2_000_000, 3_000_000, 4_000_000)
    run_sweep(dataclasses.replace(whole, points=whole.points[:1]), out, progress=False)
    plan = Run(whole, out).plan()
    assert len(plan.points) == 3 and len(plan.done) == 1
    assert [p["budget_ns"] for p in plan.pending] == [3_000_000, 4_000_000]
    assert plan.seconds == pytest.approx(estimate_seconds(whole))
    assert plan.pending_seconds == pytest.approx(sum(plan.seconds_per_point[1:]))
    assert Run(whole, out, resume=False).plan().done == set()  # a fresh run plans every point
    seen = []
    dataset = Run(whole, out).execute(progress=False, on_point=lambda point, row: seen.append(row is None))
    assert seen == [True, False, False]  # the point on disk is told, not measured again
    assert len(dataset) == 3 and keys(dataset) == planned_keys(whole)


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
    assert columns(reproduced.rows) == want and keys(reproduced) == planned_keys(task.sweep)


class Reversed(LocalExecutor):
    """An executor of its own: the local machine, the points measured last first (the seam where
    interleaved rounds and a process executor plug in)."""

    label = " (reversed)"

    def measure(self, run: Run) -> None:
        for point in reversed(run.plan().pending):
            measurement = run.family.run(point, **run.options)
            run.record(point, {**measurement.to_row(), **self.tags}, measurement.conditions_warning)


def test_an_executor_decides_the_order_and_the_run_writes_every_row(tmp_path):
    sweep = calibrate(2_000_000, 3_000_000)
    out = tmp_path / "reversed.csv"
    dataset = Run(sweep, out, executor=Reversed()).execute(progress=False)
    assert [row["budget_ns"] for row in dataset.rows] == [3_000_000, 2_000_000]
    on_disk = Dataset.load(out)
    assert [row["budget_ns"] for row in on_disk.rows] == [3_000_000, 2_000_000]
    assert "check_start" in on_disk.metadata and "check_end" in on_disk.metadata


def test_open_refuses_a_fresh_run_over_rows_before_the_machine_check(tmp_path, monkeypatch):
    out = tmp_path / "c.csv"
    run_sweep(calibrate(2_000_000), out, progress=False)
    started = []
    monkeypatch.setattr(LocalExecutor, "start", lambda self, run: started.append(run))
    with pytest.raises(ValueError, match="already holds a dataset"):
        Run(calibrate(2_000_000), out, resume=False).execute(progress=False)
    assert started == [] and len(Dataset.load(out)) == 1
    assert json.loads(out.with_suffix(".json").read_text())["sweep"] == "r"
