"""experiments/aa.py: the A/A of a sweep through the run loop's runs, and of two reproduce runs."""

from __future__ import annotations

import importlib.util
import json

from conftest import EXPERIMENTS


def _load_aa():
    spec = importlib.util.spec_from_file_location("memlab_experiment_aa", EXPERIMENTS / "aa.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


aa = _load_aa()


def test_an_a_a_of_a_sweep_counts_the_points_that_changed_verdict(capsys):
    assert aa.main(["--sweep", "tlb.quick", "--runs", "2", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "A/A tlb.quick: 2 run(s) a side" in out
    assert "points that changed verdict: " in out and "of 2 with 2 runs a side" in out
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
