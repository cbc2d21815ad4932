"""A sweep's precision rule (memlab.grid.Precision) in the run loop: a point takes runs until its
run-level interval is as narrow as the rule needs, between the rule's minimum and maximum.

The runs are synthetic (an executor that hands the run loop made-up samples): what is tested is
the loop's decisions, not this machine's noise.
"""

from __future__ import annotations

import dataclasses

import pytest

from memlab.dataset import (
    RUN_COLUMN,
    RUN_HALF_WIDTH_COLUMN,
    RUN_STOP_COLUMN,
    STOP_INTERVAL,
    STOP_MAXIMUM,
    Dataset,
    run_index,
)
from memlab.grid import Precision, Sweep
from memlab.runner import FleetExecutor, LocalExecutor, Machines, Run, estimate_seconds, stop_reason
from memlab.significance import median_of_runs_half_width

STEADY, NOISY = 2_000_000, 3_000_000

#: Each run's samples of the primary metric (core_GHz) per point, by run index: the steady point's
#: runs agree within 0.2%; the noisy point's alternate between 1 and 3 GHz.
SAMPLES = {
    STEADY: lambda index: [2.000 + 0.002 * (index % 2), 2.001, 2.000],
    NOISY: lambda index: [1.0 if index % 2 else 3.0] * 3,
}


class Synthetic(LocalExecutor):
    """Measures nothing: every run of a point is a row with made-up samples (:data:`SAMPLES`)."""

    def __init__(self) -> None:
        super().__init__()
        self.measured: list[tuple[int, int]] = []

    def start(self, run: Run) -> Machines:
        return Machines({}, [])

    def measure_run(self, run: Run, point: dict, index: int) -> None:
        self.measured.append((point["budget_ns"], index))
        samples = SAMPLES[point["budget_ns"]](index)
        row = {"family": "calibrate", **point, "core_GHz": sorted(samples)[1], "core_GHz_samples": samples}
        run.record(point, row, run_number=index)

    def finish(self, run: Run) -> dict:
        return {}


def sweep(*budgets: int, precision: Precision | None = Precision(2, 5, 0.01), runs: int | None = None) -> Sweep:
    return Sweep("p", "calibrate", [{"budget_ns": b} for b in budgets], repeat=3, warmup=0, runs=runs,
                 precision=precision)


def rows_of(dataset: Dataset, budget: int) -> list[dict]:
    return sorted((row for row in dataset.rows if row["budget_ns"] == budget), key=run_index)


def test_a_point_whose_runs_agree_stops_at_the_minimum_and_a_noisy_one_at_the_maximum():
    executor = Synthetic()
    dataset = Run(sweep(STEADY, NOISY), executor=executor).execute(progress=False)
    # rounds: both points in runs 0 and 1, then only the noisy one
    assert executor.measured == [(STEADY, 0), (NOISY, 0), (STEADY, 1), (NOISY, 1), (NOISY, 2), (NOISY, 3),
                                 (NOISY, 4)]
    steady, noisy = rows_of(dataset, STEADY), rows_of(dataset, NOISY)
    assert [row[RUN_STOP_COLUMN] for row in steady] == ["", STOP_INTERVAL]
    assert [row[RUN_STOP_COLUMN] for row in noisy] == ["", "", "", "", STOP_MAXIMUM]
    assert steady[-1][RUN_HALF_WIDTH_COLUMN] <= 0.01 < noisy[-1][RUN_HALF_WIDTH_COLUMN]
    assert noisy[-1][RUN_HALF_WIDTH_COLUMN] == pytest.approx(
        median_of_runs_half_width([row["core_GHz_samples"] for row in noisy]), abs=1e-6)
    assert dataset.metadata["precision"] == {"min_runs": 2, "max_runs": 5, "half_width": 0.01}
    assert dataset.metadata["runs"] == 5


def test_never_fewer_than_the_minimum_runs_even_when_the_first_agree():
    executor = Synthetic()
    dataset = Run(sweep(STEADY, precision=Precision(4, 6, 0.5)), executor=executor).execute(progress=False)
    assert [index for _, index in executor.measured] == [0, 1, 2, 3]
    assert [row[RUN_STOP_COLUMN] for row in rows_of(dataset, STEADY)] == ["", "", "", STOP_INTERVAL]


def test_a_resumed_run_continues_where_the_rule_left_it(tmp_path):
    out = tmp_path / "p.csv"
    first = Synthetic()
    Run(sweep(STEADY, NOISY, precision=Precision(2, 3, 0.01)), out, executor=first).execute(progress=False)
    assert first.measured[-1] == (NOISY, 2)  # the noisy point stopped at that rule's maximum of 3
    again = Synthetic()
    Run(sweep(STEADY, NOISY, precision=Precision(2, 3, 0.01)), out, executor=again).execute(progress=False)
    assert again.measured == []  # every point has stopped: nothing to measure
    more = Synthetic()
    dataset = Run(sweep(STEADY, NOISY, precision=Precision(2, 5, 0.01)), out, executor=more).execute(progress=False)
    assert more.measured == [(NOISY, 3), (NOISY, 4)]  # a larger maximum: the noisy point goes on
    assert [row[RUN_STOP_COLUMN] for row in rows_of(dataset, NOISY)][-1] == STOP_MAXIMUM
    assert [run_index(row) for row in rows_of(Dataset.load(out), STEADY)] == [0, 1]


def test_a_run_killed_before_the_rule_decided_is_resumed_to_the_decision(tmp_path):
    out = tmp_path / "p.csv"
    half = Synthetic()
    Run(sweep(STEADY, NOISY, precision=None, runs=1), out, executor=half).execute(progress=False)
    assert len(half.measured) == 2  # run 0 of each point, as a run stopped after its first round leaves it
    rest = Synthetic()
    dataset = Run(sweep(STEADY, NOISY), out, executor=rest).execute(progress=False)
    assert rest.measured == [(STEADY, 1), (NOISY, 1), (NOISY, 2), (NOISY, 3), (NOISY, 4)]
    assert rows_of(dataset, STEADY)[-1][RUN_STOP_COLUMN] == STOP_INTERVAL


def test_a_sweep_without_the_rule_takes_its_fixed_runs_and_writes_no_precision_columns():
    executor = Synthetic()
    dataset = Run(sweep(STEADY, NOISY, precision=None, runs=3), executor=executor).execute(progress=False)
    assert executor.measured == [(b, r) for r in range(3) for b in (STEADY, NOISY)]
    assert not any(RUN_STOP_COLUMN in row or RUN_HALF_WIDTH_COLUMN in row for row in dataset.rows)
    assert "precision" not in dataset.metadata
    # runs= given to the run overrides the rule: fixed runs, as `memlab sweep --runs` asks
    fixed = Synthetic()
    Run(sweep(STEADY), executor=fixed, runs=3).execute(progress=False)
    assert [index for _, index in fixed.measured] == [0, 1, 2]


def test_the_plan_and_the_estimate_give_the_expected_and_the_maximum_runs():
    ruled = sweep(STEADY, NOISY, precision=Precision(2, 6, 0.05))
    plan = Run(ruled).plan()
    assert (plan.runs, plan.expected_runs, plan.units) == (6, 2, 12)
    assert plan.expected_seconds * 3 == pytest.approx(plan.seconds)
    fixed = dataclasses.replace(ruled, precision=None, runs=2)
    assert estimate_seconds(ruled) == pytest.approx(estimate_seconds(fixed))
    assert estimate_seconds(ruled, maximum=True) == pytest.approx(3 * estimate_seconds(fixed))
    assert estimate_seconds(fixed, maximum=True) == pytest.approx(estimate_seconds(fixed))


def test_stop_reason_never_stops_on_a_width_it_cannot_compute():
    rule = Precision(2, 3, 0.5)
    assert stop_reason([[0.0, 0.0], [0.0, 0.0]], rule)[0] == ""  # a median of 0: no relative width
    assert stop_reason([[0.0, 0.0], [0.0, 0.0], [0.0]], rule)[0] == STOP_MAXIMUM


@pytest.mark.parametrize("arguments, message", [
    ((1, 5, 0.05), "min_runs=1 is below the minimum 2"),
    ((3, 2, 0.05), "max_runs=2 is below min_runs=3"),
    ((2, 1001, 0.05), "max_runs=1001 is above the maximum 1000"),
    ((2, 5, 0.0), "half_width=0.0 must be a fraction of the median between 0 and 1"),
    ((2, 5, 1.5), "half_width=1.5 must be a fraction"),
    ((2.5, 5, 0.05), "min_runs=2.5 must be a whole number"),
])
def test_a_bad_rule_is_a_value_error_naming_it(arguments, message):
    with pytest.raises(ValueError, match=message):
        Precision(*arguments)


def test_a_sweep_takes_fixed_runs_or_a_rule_not_both_and_a_fleet_takes_no_rule():
    with pytest.raises(ValueError, match="runs=3 and a precision rule"):
        sweep(STEADY, runs=3)
    with pytest.raises(ValueError, match="must be a memlab.grid.Precision"):
        Sweep("p", "calibrate", [{}], precision=(2, 5, 0.05))
    with pytest.raises(ValueError, match="a fleet's workers measure a fixed queue"):
        Run(sweep(STEADY), executor=FleetExecutor(None, "spread"))
