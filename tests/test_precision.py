"""A sweep's precision rule (memlab.grid.Precision) in the run loop: a point takes runs until its
run-level interval is as narrow as the rule needs, between the rule's minimum and maximum; and
memlab reproduce's full run, whose tasks need the precision of their items' narrowest claim.

The runs are synthetic (an executor that hands the run loop made-up samples): what is tested is
the loop's decisions, not this machine's noise.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from memlab import catalogue
from memlab.catalogue import Claim, Direction, Ratio, Same, Sanity, Steps
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
from memlab.registry import family
from memlab.reproduce import (
    DIRECTION_HALF_WIDTH,
    FULL_MAX_RUNS,
    FULL_MIN_RUNS,
    MAX_HALF_WIDTH,
    claim_half_width,
    listing,
    needed_half_width,
    plan,
)
from memlab.runner import FleetExecutor, LocalExecutor, Machines, Run, estimate_seconds, stop_reason
from memlab.significance import median_of_runs_half_width

from test_reproduce import fake_item

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
        samples = SAMPLES.get(point["budget_ns"], SAMPLES[STEADY])(index)
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


# ---- reproduce: the precision a task needs ----------------------------------------------------



def _ratio(effect: float) -> Claim:
    return Claim(f"a ratio of {effect}", "nowhere", Ratio(lambda ds: 1.0, effect=effect, what="r"))


def _direction() -> Claim:
    return Claim("rises", "nowhere", Direction(lambda ds: 1.0, rising=True, what="r"))


def _sanity() -> Claim:
    return Claim("ticks", "nowhere", Sanity(lambda ds: None, "any machine"))


def test_a_claims_half_width_can_still_clear_its_bound():
    assert claim_half_width(_ratio(1.21)) == pytest.approx(math.log(1.1) / 2)
    assert claim_half_width(_ratio(1 / 1.21)) == pytest.approx(math.log(1.1) / 2)  # an effect below 1
    same = Claim("alike", "nowhere", Same(lambda ds: 1.0, effect=1.44, what="r"))
    assert claim_half_width(same) == pytest.approx(math.log(1.2) / 2)
    assert claim_half_width(_ratio(4.27)) == MAX_HALF_WIDTH  # a large effect allows more than the cap
    steps = Claim("steps", "nowhere", Steps(lambda ds: {"a": 1.0, "b": 2.0}, rising=True, what="r"))
    assert claim_half_width(_direction()) == claim_half_width(steps) == DIRECTION_HALF_WIDTH
    assert claim_half_width(_sanity()) is None
    assert needed_half_width([fake_item(claims=[_sanity()])]) == DIRECTION_HALF_WIDTH


def test_a_task_needs_the_narrowest_precision_of_its_items_claims(monkeypatch, tmp_path):
    items = (fake_item("wide", claims=[_ratio(4.0), _sanity()]),
             fake_item("narrow", claims=[_ratio(1.21), _direction()]),
             fake_item("alone", quick="calibrate.quick", claims=[_direction()]))
    items = items[:2] + (dataclasses.replace(items[2], sweep="calibrate.twin"),)
    monkeypatch.setattr(catalogue, "ITEMS", items)
    calibrate = family("calibrate")
    monkeypatch.setitem(calibrate.sweeps, "twin", lambda: dataclasses.replace(
        calibrate.sweep("quick"), name="twin", points=[{"budget_ns": 3_000_000}]))
    tasks = {task.name: task for task in plan(catalogue.select(["wide", "narrow", "alone"]), False, tmp_path)}
    shared, alone = tasks["calibrate.quick"], tasks["calibrate.twin"]
    assert [entry.key for entry in shared.items] == ["wide", "narrow"]
    assert shared.sweep.precision == Precision(FULL_MIN_RUNS, FULL_MAX_RUNS, math.log(1.1) / 2)
    assert alone.sweep.precision.half_width == DIRECTION_HALF_WIDTH
    assert shared.seconds == pytest.approx(estimate_seconds(shared.sweep))  # the expected runs' time
    quick = plan(catalogue.select(["wide", "narrow"]), True, tmp_path)
    assert all(task.sweep.precision is None for task in quick)  # --quick keeps its fixed runs
    text = listing(catalogue.select(["wide", "narrow"]))
    assert f"{FULL_MIN_RUNS}-{FULL_MAX_RUNS}" in text and "at most" in text


def test_worker_processes_follow_the_rule(tmp_path):
    ruled = Sweep("p", "calibrate", [{"budget_ns": 2_000_000}], repeat=2, warmup=0, precision=Precision(2, 2, 0.5))
    dataset = Run(ruled, tmp_path / "w.csv", processes=True).execute(progress=False)
    rows = sorted(dataset.rows, key=run_index)
    assert [row[RUN_COLUMN] for row in rows] == [0, 1]  # min = max = 2: exactly two runs, each in a worker
    assert rows[0][RUN_STOP_COLUMN] == "" and rows[1][RUN_STOP_COLUMN] in (STOP_INTERVAL, STOP_MAXIMUM)
    assert len({row["context_worker_pid"] for row in rows}) == 2
    assert Dataset.load(tmp_path / "w.csv").metadata["precision"]["max_runs"] == 2


def test_the_listing_counts_a_point_with_its_minimum_runs_on_disk_as_there(monkeypatch, tmp_path):
    monkeypatch.setattr(catalogue, "ITEMS", (fake_item("clock", claims=[_direction()]),))
    (task,) = plan(catalogue.select(["clock"]), False, tmp_path)
    points = len(task.sweep.points)
    assert f"0/{points} points" in listing(catalogue.select(["clock"]), out=tmp_path)
    Run(task.sweep, task.path, executor=Synthetic()).execute(progress=False)  # steady: two runs each
    assert all(run_index(row) < FULL_MIN_RUNS for row in Dataset.load(task.path).rows)
    assert f"{points}/{points} points" in listing(catalogue.select(["clock"]), out=tmp_path)


class RecordingBar:
    """reproduce's ETA bar as the run sees it: bounded updates, work added by ``extend``."""

    def __init__(self, total: float) -> None:
        self.total, self.n, self.full_before_the_end = total, 0.0, 0

    def update(self, seconds: float) -> None:
        self.n = min(self.total, self.n + seconds)

    def extend(self, seconds: float) -> None:
        self.total += seconds

    def set_description_str(self, *args, **kwargs) -> None:
        pass


def test_the_eta_grows_when_a_point_takes_more_runs_than_expected(monkeypatch, tmp_path):
    """The bar counted the runs a point was expected to take (its minimum): a noisy point's extra
    runs found it full, and it sat at 100% with nothing left while they were measured."""
    reproducing = __import__("importlib").import_module("memlab.reproduce")
    monkeypatch.setattr(reproducing, "Run", lambda sweep, path, **kw: Run(sweep, path, executor=Synthetic(), **kw))
    task = reproducing.Task(sweep(STEADY, NOISY), tmp_path / "p.csv", [fake_item()], seconds=4.0)
    per_run = reproducing._point_seconds(task, {})
    assert reproducing._pending_runs(task) == 4  # two points, two runs each expected
    bar = RecordingBar(per_run * 4)
    seen: list[tuple[float, float]] = []
    update = bar.update
    bar.update = lambda seconds: (update(seconds), seen.append((bar.n, bar.total)))
    reproducing._run_task(task, tmp_path, bar, {})
    assert len(Dataset.load(task.path).rows) == 7  # the noisy point ran to the maximum of 5
    assert bar.total == pytest.approx(per_run * 7)  # three runs beyond the four expected
    assert all(n < total for n, total in seen[:6]) and seen[6][0] == pytest.approx(seen[6][1])


def test_the_eta_bar_takes_added_work(monkeypatch):
    from memlab.runner import eta_bar
    bar = eta_bar(10.0, "demo", enabled=True)
    try:
        bar.update(10.0)
        bar.extend(5.0)
        bar.update(2.0)
        assert (bar.n, bar.total) == (pytest.approx(12.0), pytest.approx(15.0))
        bar.extend(-1.0)  # nothing to add: unchanged
        assert bar.total == pytest.approx(15.0)
    finally:
        bar.close()
