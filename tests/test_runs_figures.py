"""A dataset of several runs a point draws one mark per point, and its unstable points ringed
(memlab.chart.fold_runs, fold_dataset, mark_unstable)."""

from __future__ import annotations

import pytest

from memlab import chart
from memlab.dataset import RUN_SPREAD_COLUMN, RUN_UNSTABLE_COLUMN, Dataset


def runs_dataset() -> Dataset:
    """Two points of three runs: n=1 steady (runs 10, 10.5, 10.2), n=2 unstable (20, 40, 30)."""
    rows = []
    for run, (steady, shaky) in enumerate(((10.0, 20.0), (10.5, 40.0), (10.2, 30.0))):
        for n, level in ((1, steady), (2, shaky)):
            samples = [level * 0.99, level, level * 1.01]
            rows.append({"family": "demo", "n": n, "run": run, "t": level, "t_min": min(samples),
                         "t_max": max(samples), "t_samples": samples, "u": 2 * level, "u_samples": [2 * level]})
    return Dataset(rows, {"family": "demo", "param_names": ["n"], "primary_metric": "t"})


def test_a_points_runs_fold_into_one_row_with_their_spread():
    folded = chart.fold_dataset(runs_dataset()).rows
    assert [row["n"] for row in folded] == [1, 2]
    steady, shaky = folded
    assert steady["t"] == pytest.approx(10.2) and shaky["t"] == pytest.approx(30.0)
    assert shaky["t_min"] == pytest.approx(20.0 * 0.99) and shaky["t_max"] == pytest.approx(40.0 * 1.01)
    assert len(shaky["t_samples"]) == 9 and shaky["runs"] == 3
    assert shaky["u"] == pytest.approx(60.0)  # every metric folds, not only the drawn one
    assert steady[RUN_SPREAD_COLUMN] == pytest.approx(1.05) and steady[RUN_UNSTABLE_COLUMN] is False
    assert shaky[RUN_SPREAD_COLUMN] == pytest.approx(2.0) and shaky[RUN_UNSTABLE_COLUMN] is True


def test_one_run_a_point_is_left_as_it_is():
    one = Dataset([{"family": "demo", "n": 1, "t": 1.0}], {"param_names": ["n"]})
    assert chart.fold_dataset(one) is one


@pytest.mark.parametrize("kind", ["line", "bars", "samples"])
def test_every_figure_kind_rings_the_unstable_point_once(kind):
    pytest.importorskip("matplotlib")
    ds = runs_dataset()
    if kind == "line":
        fig = chart.line_figure(ds, "n", "t")
    elif kind == "bars":
        fig = chart.bars_figure(ds, "t")
    else:
        fig = chart.samples_figure(ds, "t")
    ax = fig.axes[0]
    rings = [c for c in ax.collections if str(c.get_label()).startswith("unstable")]
    assert len(rings) == 1 and len(rings[0].get_offsets()) == 1
    assert rings[0].get_offsets()[0][1] == pytest.approx(30.0)  # at the folded value of n=2
    steady = Dataset([r for r in ds.rows if r["n"] == 1], ds.metadata)
    plain = chart.line_figure(Dataset(steady.rows + [{**steady.rows[0], "n": 3, "run": 0}], ds.metadata), "n", "t")
    assert not [c for c in plain.axes[0].collections if str(c.get_label()).startswith("unstable")]
