"""experiments/aa.py: the A/A of a sweep through the run loop's runs, and of two reproduce runs."""

from __future__ import annotations

import json

from conftest import experiment

aa = experiment("aa")


def test_an_a_a_of_a_sweep_counts_the_points_that_changed_verdict(capsys):
    assert aa.main(["--sweep", "calibrate.quick", "--runs", "2", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "A/A calibrate.quick: 2 run(s) a side" in out
    assert "points that changed verdict: " in out and "of 1 with 2 runs a side" in out
    assert "host: " in out and "load average" in out


def test_each_side_is_numbered_apart():
    sweep = aa.resolve("calibrate.quick", quick=True)[0]
    side = aa.measure_side(sweep, 2, 1, 2)
    assert sorted(aa.run_index(row) for row in side.rows) == [2, 3]


def test_the_claims_of_two_reproduce_runs_are_read_by_item_and_claim(tmp_path):
    for side, status in (("first", "reproduced"), ("second", "not reproduced")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "verdicts.json").write_text(json.dumps(
            {"items": [{"item": "fig3.10", "claims": [{"claim": "flat", "status": status},
                                                      {"claim": "low", "status": "reproduced"}]}]}))
    first, second = (aa.reproduce_verdicts(tmp_path / side) for side in ("first", "second"))
    assert first[("fig3.10", "flat")] == "reproduced" and second[("fig3.10", "flat")] == "not reproduced"
    assert [key for key in first if first[key] != second[key]] == [("fig3.10", "flat")]
