"""memlab check --stability (memlab/stability.py): the short A/A of two chase points."""

from __future__ import annotations

import json

import pytest

from memlab import cli
from memlab.compare import IMPROVEMENT, REGRESSION
from memlab.stability import STABILITY_L1_BYTES, stability, stability_sweep


@pytest.fixture(scope="module")
def measured():
    return stability(runs=2, repeat=1)


def test_the_sweep_is_a_chase_in_the_l1d_and_one_past_the_last_cache():
    sweep = stability_sweep(runs=4, repeat=2)
    sizes = [p["working_set_bytes"] for p in sweep.points]
    assert sweep.family == "chase" and sweep.runs == 4 and sweep.repeat == 2
    assert sizes[0] == STABILITY_L1_BYTES and sizes[1] > sizes[0]
    with pytest.raises(ValueError, match="runs=0 is below the minimum 1"):
        stability_sweep(runs=0)


def test_the_a_a_compares_two_sides_of_runs_and_counts_the_flips(measured):
    points = measured.comparison.points
    assert len(points) == 2 and measured.runs == 2
    assert all(p.baseline_runs == p.candidate_runs == 2 for p in points)
    assert measured.flips == sum(p.verdict in (REGRESSION, IMPROVEMENT) for p in points)
    assert measured.unstable == sum(p.unstable for p in points)
    text = measured.format()
    assert f"{measured.flips} of 2 points flipped, {measured.unstable} of 2 unstable" in text
    assert "random chase of 16 KiB" in text
    facts = measured.to_dict()
    assert facts["runs"] == 2 and facts["flips"] == measured.flips and len(facts["points"]) == 2


def test_memlab_check_stability_prints_it(measured, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(cli, "stability", lambda runs: asked.append(runs) or measured)
    assert cli.main(["check", "--stability", "--stability-runs", "2", "--steal-window", "0.01"]) == 0
    assert "points flipped" in capsys.readouterr().out
    assert cli.main(["check", "--stability", "--json", "--steal-window", "0.01"]) == 0
    assert json.loads(capsys.readouterr().out)["stability"]["flips"] == measured.flips
    assert asked == [2, 3]


def test_stability_runs_out_of_range_is_exit_2(capsys):
    assert cli.main(["check", "--stability", "--stability-runs", "1"]) == 2
    assert "--stability-runs" in capsys.readouterr().err
