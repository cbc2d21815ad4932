"""memlab tour: the quick sweep of every registered family, reduced for CI, plus report.html."""

from __future__ import annotations

import pytest

from html_check import parse_report
from memlab import cli, tour
from memlab.conditions import ConditionsWarning, MemlabWarning
from memlab.dataset import Dataset
from memlab.registry import all_families
from memlab.sweep import Sweep

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")


def toured_families() -> list[str]:
    return [name for name, fam in all_families().items() if "quick" in fam.sweeps]


def test_reduced_tour_measures_every_family_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "tour"
    assert cli.main(["tour", "--reduced", "--out", str(out), "--no-progress"]) == 0
    names = toured_families()
    assert names, "no family has a quick sweep"
    for name in names:
        ds = Dataset.load(out / f"{name}.csv")
        assert 1 <= len(ds) <= tour.REDUCED_MAX_POINTS, name
        assert ds.metadata["family"] == all_families()[name].name
        assert all(row["repeat"] == 1 for row in ds.rows)
    text = (out / "report.html").read_text(encoding="utf-8")
    parsed = parse_report(text)
    drawn = [name for name in names if all_families()[name].has_figure]
    assert len(parsed.images) == len(drawn)
    assert "Core clock" in text and "UnixBench index score" in text  # a number and a table, as text
    assert parsed.headings[0] == "memlab tour"
    assert parsed.headings[1 : 1 + len(names)] == names
    assert f"memlab tour --reduced --out {out} --no-progress" in text
    printed = capsys.readouterr().out
    assert f"report -> {out / 'report.html'}" in printed


def test_reduce_sweep_keeps_the_ends_and_shortens_samples():
    sweep = Sweep("s", "calibrate", [{"budget_ns": 10_000_000 * k} for k in range(1, 8)], repeat=5,
                  warmup=2, target_seconds=0.5)
    small = tour.reduce_sweep(sweep)
    assert [p["budget_ns"] for p in small.points] == [10_000_000, 70_000_000]
    assert (small.repeat, small.warmup, small.target_seconds) == (1, 0, tour.REDUCED_TARGET_SECONDS)
    three = tour.reduce_sweep(sweep, max_points=3, repeat=2, target_seconds=1.0)
    assert [p["budget_ns"] for p in three.points] == [10_000_000, 40_000_000, 70_000_000]
    assert (three.repeat, three.target_seconds) == (2, 0.5)
    assert tour.reduce_sweep(sweep, max_points=1).points == [{"budget_ns": 10_000_000}]
    assert len(sweep.points) == 7 and sweep.repeat == 5  # the original is untouched
    for bad, message in (({"max_points": 0}, "max_points=0 is below the minimum 1"),
                         ({"repeat": 0}, "repeat=0 is below the minimum 1"),
                         ({"target_seconds": 0}, "target_seconds=0 must be above 0")):
        with pytest.raises(ValueError, match=message):
            tour.reduce_sweep(sweep, **bad)


def test_a_failing_family_is_reported_and_the_tour_goes_on(tmp_path, monkeypatch, capsys):
    calibrate = all_families()["calibrate"]
    # budget_ns=1 is below the family's minimum: run_sweep raises ValueError.
    monkeypatch.setitem(calibrate.sweeps, "quick", lambda: Sweep("quick", "calibrate", [{"budget_ns": 1}]))
    result = tour.tour(tmp_path, reduced=True, families=["calibrate", "region"], progress=False,
                       command="memlab tour (test)")
    assert [run.family for run in result.runs] == ["calibrate", "region"]
    assert [run.family for run in result.failed] == ["calibrate"]
    assert "budget_ns=1 is below the minimum" in result.failed[0].error
    assert "calibrate failed" in capsys.readouterr().err
    text = result.report.read_text(encoding="utf-8")
    parsed = parse_report(text)
    assert len(parsed.images) == 1
    assert "budget_ns=1 is below the minimum" in text and "(failed)" in text


def test_tour_command_exit_codes(tmp_path, monkeypatch, capsys):
    calibrate = all_families()["calibrate"]
    monkeypatch.setitem(calibrate.sweeps, "quick", lambda: Sweep("quick", "calibrate", [{"budget_ns": 1}]))
    assert cli.main(["tour", "--reduced", "--family", "calibrate", "--out", str(tmp_path),
                     "--no-progress"]) == 1
    assert "FAILED: ValueError" in capsys.readouterr().out
    assert cli.main(["tour", "--family", "nosuchfamily", "--out", str(tmp_path)]) == 2
    assert "family='nosuchfamily' is not a memlab family" in capsys.readouterr().err
    monkeypatch.delitem(calibrate.sweeps, "quick")
    assert cli.main(["tour", "--family", "calibrate", "--out", str(tmp_path)]) == 2
    assert "family='calibrate' has no quick sweep" in capsys.readouterr().err
    assert cli.main(["tour", "--repeat", "0", "--out", str(tmp_path)]) == 2
    assert "--repeat=0 is below the minimum 1" in capsys.readouterr().err
    assert cli.main(["tour", "--bogus"]) == 2


def test_ctrl_c_stops_the_tour_and_the_report_shows_what_was_measured(tmp_path, monkeypatch):
    real = tour.run_sweep
    calls = []

    def interrupted_second(sweep, out, **options):
        calls.append(sweep.family)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(sweep, out, **options)

    monkeypatch.setattr(tour, "run_sweep", interrupted_second)
    result = tour.tour(tmp_path, reduced=True, families=["calibrate", "region"], progress=False)
    assert result.interrupted
    assert calls == ["calibrate", "region"]
    assert "interrupted" in result.runs[-1].error
    text = result.report.read_text(encoding="utf-8")
    assert parse_report(text).images == []  # calibrate's result is a number, shown as text
    assert "Core clock" in text and "The tour was interrupted" in text


def test_a_loaded_machine_gives_one_warning_line_per_family_not_one_per_point(tmp_path, monkeypatch, capsys):
    """On a loaded machine every point warns; the tour says so once per family (the report flags rows)."""
    real = tour.run_sweep

    def loaded(sweep, out, *, warn, **options):
        warn("memlab: warning: the machine check found load: 9.0 on 2 CPUs (memlab check for details)")
        for point in sweep.points:
            warn(f"memlab: warning: {sweep.family} point: on CPU 40% of its wall time (below 90%)")
        return real(sweep, out, warn=lambda text: None, **options)

    monkeypatch.setattr(tour, "run_sweep", loaded)
    with pytest.warns(MemlabWarning) as caught:  # through Python's warnings, a notebook's filters apply
        result = tour.tour(tmp_path, reduced=True, families=["calibrate", "region"], progress=False)
    assert not result.failed
    mine = [w for w in caught if issubclass(w.category, MemlabWarning)]
    lines = [f"memlab: warning: {w.message}" for w in mine]
    assert [line.split(":")[2].strip() for line in lines] == ["calibrate", "region"]
    region_points = len(result.runs[1].dataset)
    assert all(w.category is ConditionsWarning for w in mine)
    assert [w.message.count for w in mine] == [len(result.runs[0].dataset), region_points]
    assert lines[1] == ("memlab: warning: region: the machine check found load: 9.0 on 2 CPUs (memlab check "
                        f"for details); {region_points} of {region_points} points measured with too little CPU "
                        "time or too much steal (first: on CPU 40% of its wall time (below 90%)); "
                        "the report flags them")


def test_tour_starts_afresh_unless_resumed(tmp_path):
    first = tour.tour(tmp_path, reduced=True, families=["calibrate"], progress=False, report=False)
    before = first.runs[0].dataset.rows[0]["core_GHz_samples"]
    again = tour.tour(tmp_path, reduced=True, families=["calibrate"], progress=False, report=False)
    assert len(again.runs[0].dataset) == 1
    assert again.runs[0].dataset.rows[0]["core_GHz_samples"] != before
    kept = tour.tour(tmp_path, reduced=True, families=["calibrate"], progress=False, report=False, resume=True)
    assert kept.runs[0].dataset.rows[0]["core_GHz_samples"] == again.runs[0].dataset.rows[0]["core_GHz_samples"]
    assert first.report is None and not (tmp_path / "report.html").exists()


def test_tour_without_matplotlib_writes_tables_and_says_what_to_install(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["tour", "--reduced", "--family", "calibrate", "--out", str(tmp_path), "--no-progress"]) == 0
    assert "pip install 'memlab[plot]'" in capsys.readouterr().err
    parsed = parse_report((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert parsed.images == [] and "core GHz (median)" in parsed.cells
