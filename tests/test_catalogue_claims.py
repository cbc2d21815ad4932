"""The claim vocabulary (memlab.catalogue.claims): each rule written once, tested here once.

The rules judge run-level intervals: a synthetic point here is one or more
runs (rows with a ``run`` index), each with its kept samples, so the tests
control both the value and the spread.
"""

from __future__ import annotations

import math

import pytest

from memlab.catalogue import (
    FAILS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    PASSES,
    REPRODUCED,
    Claim,
    Direction,
    NotMeasurable,
    Ratio,
    Same,
    Sanity,
    Steps,
    Verdict,
    bound_of,
    run_level_interval,
    value_of,
    verdict,
)
from memlab.catalogue.claims import Interval, judge_interval
from memlab.dataset import Dataset


def point(name: str, value: float, spread: float = 1.0, runs: int = 1) -> list[dict]:
    """Rows of one point: ``runs`` runs of five samples from value / spread to value * spread."""
    samples = [value * spread ** k for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    return [{"family": "demo", "name": name, "run": run, "t": value, "t_samples": samples} for run in range(runs)]


def dataset(*rows: list[dict]) -> Dataset:
    return Dataset([row for part in rows for row in part], {"param_names": ["name"]})


def ratio_of(top: str, bottom: str):
    return lambda ds: value_of(ds, "t", name=top) / value_of(ds, "t", name=bottom)


def test_the_bound_is_the_effect_halved_in_log_space():
    assert bound_of(4.0) == 2.0
    assert bound_of(0.25) == pytest.approx(0.5)
    assert bound_of(23.58 / 11.76) == pytest.approx(1.416, abs=1e-3)
    for bad in (1.0, 0.0, -2.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="effect="):
            bound_of(bad)
    with pytest.raises(ValueError, match="effect=1"):
        Ratio(lambda ds: 1.0, 1.0, "x")


def test_an_interval_is_judged_against_the_bound_on_the_source_side():
    assert judge_interval(Interval(3.0, 2.5, 3.5), 2.0, above=True) == REPRODUCED
    assert judge_interval(Interval(1.5, 1.2, 1.8), 2.0, above=True) == NOT_REPRODUCED
    assert judge_interval(Interval(2.1, 1.8, 2.4), 2.0, above=True) == INCONCLUSIVE
    assert judge_interval(Interval(0.3, 0.2, 0.4), 0.5, above=False) == REPRODUCED
    assert judge_interval(Interval(0.7, 0.6, 0.8), 0.5, above=False) == NOT_REPRODUCED


def test_one_run_without_samples_is_its_own_interval():
    ds = Dataset([{"name": "a", "t": 2.0}, {"name": "b", "t": 6.0}], {"param_names": ["name"]})
    found = run_level_interval(ds, ratio_of("b", "a"))[""]
    assert (found.value, found.low, found.high) == (3.0, 3.0, 3.0)
    assert "no interval" in found.text()


def test_the_interval_spans_the_runs_and_is_seeded():
    runs = [{"name": "a", "run": r, "t": v, "t_samples": [v, v]} for r, v in enumerate((9.0, 10.0, 11.0))]
    ds = Dataset(runs + [{"name": "b", "run": 0, "t": 20.0, "t_samples": [20.0, 20.0]}], {"param_names": ["name"]})
    first = run_level_interval(ds, ratio_of("b", "a"))[""]
    assert first.value == 2.0
    assert 20 / 11 <= first.low < 2.0 < first.high <= 20 / 9
    assert run_level_interval(ds, ratio_of("b", "a"))[""] == first


def test_named_statistics_get_an_interval_each_and_not_measurable_propagates():
    ds = dataset(point("a", 1.0, 1.01), point("b", 2.0, 1.01), point("c", 4.0, 1.5))
    found = run_level_interval(ds, lambda d: {"b": value_of(d, "t", name="b"), "c": value_of(d, "t", name="c")})
    assert set(found) == {"b", "c"}
    assert found["c"].high - found["c"].low > found["b"].high - found["b"].low
    with pytest.raises(NotMeasurable, match="no rows"):
        run_level_interval(ds, lambda d: value_of(d, "t", name="nosuch"))


@pytest.mark.parametrize("top, spread, status", [(3.0, 1.01, REPRODUCED), (1.2, 1.01, NOT_REPRODUCED),
                                                 (2.2, 1.5, INCONCLUSIVE)])
def test_a_ratio_against_the_source_effect(top, spread, status):
    rule = Ratio(ratio_of("b", "a"), 4.0, "b / a", "the source's 4x")
    found = rule(dataset(point("a", 1.0, spread, runs=3), point("b", top, spread, runs=3)))
    assert found.status == status, found.detail
    assert "interval" in found.detail and "above 2" in found.detail and "the source's 4x" in found.detail
    assert found.values["ratio"] == pytest.approx(top)


def test_a_ratio_the_source_found_below_one_wants_the_interval_below_its_bound():
    rule = Ratio(ratio_of("b", "a"), 0.25, "b / a", "a quarter")
    assert rule(dataset(point("a", 1.0), point("b", 0.3))).status == REPRODUCED
    assert rule(dataset(point("a", 1.0), point("b", 0.8))).status == NOT_REPRODUCED
    every = Ratio(lambda ds: {"x": 0.3, "y": 0.8}, 0.25, "each", "a quarter")
    assert every(dataset(point("a", 1.0))).status == NOT_REPRODUCED


@pytest.mark.parametrize("top, spread, status", [(1.05, 1.01, REPRODUCED), (3.0, 1.01, NOT_REPRODUCED),
                                                 (0.3, 1.01, NOT_REPRODUCED), (1.35, 1.3, INCONCLUSIVE)])
def test_about_the_same_within_the_square_root_of_the_contrast(top, spread, status):
    rule = Same(ratio_of("b", "a"), 2.0, "b / a", "the contrast")
    found = rule(dataset(point("a", 1.0, spread, runs=3), point("b", top, spread, runs=3)))
    assert found.status == status, found.detail
    assert "between 0.707 and 1.41" in found.detail


@pytest.mark.parametrize("top, spread, status", [(1.1, 1.01, REPRODUCED), (0.9, 1.01, NOT_REPRODUCED),
                                                 (1.05, 1.3, INCONCLUSIVE)])
def test_a_direction_excludes_one(top, spread, status):
    rule = Direction(ratio_of("b", "a"), True, "b / a")
    assert rule(dataset(point("a", 1.0, spread, runs=3), point("b", top, spread, runs=3))).status == status
    falling = Direction(ratio_of("b", "a"), False, "b / a")
    flipped = {REPRODUCED: NOT_REPRODUCED, NOT_REPRODUCED: REPRODUCED, INCONCLUSIVE: INCONCLUSIVE}[status]
    assert falling(dataset(point("a", 1.0, spread, runs=3), point("b", top, spread, runs=3))).status == flipped


def test_steps_along_an_axis_each_exclude_one():
    def series(ds):
        return {name: value_of(ds, "t", name=name) for name in ("a", "b", "c")}

    rule = Steps(series, True, "t by name", 3.0, "1, 2, 3")
    assert rule(dataset(point("a", 1.0), point("b", 2.0), point("c", 3.0))).status == REPRODUCED
    swapped = rule(dataset(point("a", 1.0), point("b", 3.0), point("c", 2.0)))
    assert swapped.status == NOT_REPRODUCED and "c / b" in swapped.detail
    assert rule(dataset(point("a", 1.0), point("b", 2.0, 1.4, runs=3), point("c", 2.1, 1.4, runs=3))).status \
        == INCONCLUSIVE
    with pytest.raises(NotMeasurable, match="fewer than two"):
        Steps(lambda ds: {"a": 1.0}, True, "t")(dataset(point("a", 1.0)))


def test_a_sanity_check_passes_or_fails_and_is_no_claim_of_effect():
    holds = Sanity(lambda ds: verdict(True, "index 1466"), "any machine beats the baseline")
    fails = Sanity(lambda ds: verdict(False, "index 4"), "any machine beats the baseline")
    assert holds(Dataset()).status == PASSES and "a sanity check" in holds(Dataset()).detail
    assert fails(Dataset()).status == FAILS
    unknown = Sanity(lambda ds: Verdict(NOT_MEASURABLE, "no rows"), "why")
    assert unknown(Dataset()).status == NOT_MEASURABLE
    claim = Claim("index above 10", "UnixBench", holds)
    assert claim.sanity and claim.effect is None
    ratio = Claim("b twice a", "source", Ratio(ratio_of("b", "a"), 2.0, "b / a", "2x"))
    assert not ratio.sanity and ratio.effect == 2.0


def test_verdicts_know_inconclusive_and_the_sanity_statuses():
    for status in (INCONCLUSIVE, PASSES, FAILS):
        assert Verdict(status, "x").status == status
    with pytest.raises(ValueError, match="inconclusive"):
        Verdict("maybe", "x")


def _two_curves() -> Dataset:
    rows = [{"family": "f", "op": op, "n": n, "run": run, "t": base * n * (1 + 0.01 * run),
             "t_samples": [base * n * (1 + 0.01 * run + d) for d in (-0.01, 0.0, 0.01)]}
            for op, base in (("read", 1.0), ("write", 3.0)) for n in (1, 2, 4) for run in range(3)]
    return Dataset(rows, {"family": "f", "param_names": ["op", "n"]})


def test_an_interval_resamples_only_the_points_its_statistic_reads():
    from memlab.catalogue.claims import run_level_interval
    from memlab.catalogue.core import curve
    ds, sizes = _two_curves(), []

    def read_ratio(d: Dataset) -> float:
        sizes.append(len(d.rows))
        found = curve(d, "t", "n", op="read")
        return found[4] / found[1]

    found = run_level_interval(ds, read_ratio)[""]
    assert found.low <= found.value <= found.high and found.value == pytest.approx(4.0)
    assert sizes[0] == len(ds.rows) == 18  # the value: on the whole dataset
    assert set(sizes[1:]) == {9}  # the check on the read points alone, then every resample: the read curve only


def test_a_statistic_that_reads_rows_another_way_is_resampled_on_them_all():
    from memlab.catalogue.claims import run_level_interval
    from memlab.catalogue.core import curve
    ds, sizes = _two_curves(), []

    def with_writes(d: Dataset) -> float:  # reads the write rows without rows_where
        sizes.append(len(d.rows))
        writes = sorted(r["t"] for r in d.rows if r["op"] == "write")
        return curve(d, "t", "n", op="read")[4] / writes[len(writes) // 2]

    run_level_interval(ds, with_writes)
    assert sizes[1] == 9 and set(sizes[2:]) == {18}  # its value on the read points differs: all points
