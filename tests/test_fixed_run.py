"""The long fixed run (``memlab reproduce --fixed``) beside the full run, and
``experiments/full_vs_fixed.py``, which compares their verdicts.

The full run takes 2-3 runs a point under a precision rule and UnixBench's 1 s samples; the long
fixed run takes 3 runs of each sweep's own samples (UnixBench's 30 s) into files named apart. The
runs here use the stand-in calibrate item of ``test_reproduce``; nothing is timed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys

import pytest

from conftest import EXPERIMENTS
from memlab import catalogue, cli
from memlab.catalogue import INCONCLUSIVE, NOT_MEASURABLE, NOT_REPRODUCED, PASSES, FAILS, REPRODUCED
from memlab.dataset import Dataset, run_index
from memlab.catalogue.unixbench import FULL_SAMPLE_SECONDS

from test_reproduce import fake_catalogue, fake_item  # noqa: F401  (the fixture)

reproducing = importlib.import_module("memlab.reproduce")


def test_unixbench_takes_short_samples_in_the_full_run_and_its_own_in_the_fixed_one():
    spawn = catalogue.item("unixbench-spawn")
    full = reproducing.item_sweep(spawn)
    fixed = reproducing.item_sweep(spawn, fixed=True)
    assert {p["duration_s"] for p in full.points} == {FULL_SAMPLE_SECONDS} and FULL_SAMPLE_SECONDS < 30
    assert {p["duration_s"] for p in fixed.points} == {30.0}  # UnixBench's own
    assert fixed.runs == reproducing.FIXED_RUNS and fixed.precision is None and fixed.repeat == full.repeat
    assert [{k: v for k, v in p.items() if k != "duration_s"} for p in full.points] == \
        [{k: v for k, v in p.items() if k != "duration_s"} for p in fixed.points]  # the same tests and copies
    quick = reproducing.item_sweep(spawn, quick=True)
    assert {p["duration_s"] for p in quick.points} == {0.5}  # --quick keeps its own
    with pytest.raises(ValueError, match="quick=True and fixed=True"):
        reproducing.item_sweep(spawn, quick=True, fixed=True)


def test_an_item_without_a_full_variant_measures_the_named_sweep_in_both():
    entry = catalogue.item("table6.1")
    assert entry.full is None
    assert reproducing.item_sweep(entry).points == reproducing.item_sweep(entry, fixed=True).points


def test_the_fixed_plan_takes_three_runs_of_every_sweep_into_files_named_apart(tmp_path):
    chosen = catalogue.select(["unixbench", "table6.1", "fig3.10"])
    full = reproducing.plan(chosen, False, tmp_path)
    fixed = reproducing.plan(chosen, False, tmp_path, fixed=True)
    assert [t.name for t in full] == [t.name for t in fixed]  # the same tasks, UnixBench's four items in one
    assert [len(t.items) for t in fixed] == [len(t.items) for t in full]
    for adaptive, long in zip(full, fixed):
        assert adaptive.sweep.precision is not None and adaptive.sweep.runs is None
        assert long.sweep.precision is None and long.sweep.runs == reproducing.FIXED_RUNS
        assert long.path.name == adaptive.path.stem + reproducing.FIXED_SUFFIX + ".csv"
        assert long.seconds >= adaptive.seconds  # three runs of all the samples against two of half
    unixbench = next(t for t in fixed if t.items[0].source == "unixbench")
    assert {p["duration_s"] for p in unixbench.sweep.points} == {30.0}


def test_the_listing_shows_the_fixed_run(tmp_path):
    chosen = catalogue.select(["table6.1"])
    text = reproducing.listing(chosen, fixed=True)
    row = next(line for line in text.splitlines() if line.startswith("table6.1"))
    words = row.split()
    assert words[words.index("matrix_init.table_6_1") + 1] == str(reproducing.FIXED_RUNS)  # the runs column: a fixed 3, not 2-3
    assert "long fixed run (--fixed)" in text.splitlines()[-1]
    assert "long fixed run (--fixed)" in reproducing.listing(chosen)  # every listing gives all three totals


def test_a_fixed_run_measures_three_runs_a_point_and_says_so(fake_catalogue, tmp_path):  # noqa: F811
    result = reproducing.reproduce(["clock"], out=tmp_path, progress=False, fixed=True)
    (task,) = result.tasks
    assert task.path.name.endswith(reproducing.FIXED_SUFFIX + ".csv")
    rows = Dataset.load(task.path).rows
    assert sorted({run_index(row) for row in rows}) == list(range(reproducing.FIXED_RUNS))
    assert result.mode == "fixed"
    data = json.loads((tmp_path / reproducing.VERDICTS_FILE).read_text())
    assert data["mode"] == "fixed" and data["quick"] is False
    assert "full, long fixed sweeps" in (tmp_path / reproducing.REPORT_FILE).read_text()
    with pytest.raises(ValueError, match="quick=True and fixed=True"):
        reproducing.reproduce(["clock"], quick=True, fixed=True, out=tmp_path, progress=False)


def test_the_command_refuses_quick_and_fixed_together(fake_catalogue, tmp_path, capsys):  # noqa: F811
    assert cli.main(["reproduce", "clock", "--quick", "--fixed", "--out", str(tmp_path)]) == 2
    assert "--quick or --fixed, not both" in capsys.readouterr().err
    assert cli.main(["reproduce", "clock", "--fixed", "--list"]) == 0
    assert "long fixed run (--fixed)" in capsys.readouterr().out


# ---- experiments/full_vs_fixed.py ------------------------------------------------------------

def _load(name: str):
    """The script as a module, registered under its name (its dataclasses look themselves up there)."""
    spec = importlib.util.spec_from_file_location(f"memlab_experiment_{name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module


compare_script = _load("full_vs_fixed")


def write_verdicts(folder, mode: str, claims: dict[tuple[str, str], str], sanity=()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    items: dict[str, list] = {}
    for (item, text), status in claims.items():
        items.setdefault(item, []).append({"claim": text, "status": status, "sanity": (item, text) in sanity})
    (folder / "verdicts.json").write_text(json.dumps({
        "mode": mode, "quick": False, "seconds": 600.0,
        "items": [{"item": item, "claims": found} for item, found in items.items()]}))


FULL = {("fig3.10", "flat"): REPRODUCED, ("fig3.10", "low"): NOT_REPRODUCED, ("fig3.11", "order"): INCONCLUSIVE,
        ("fig3.12", "rise"): REPRODUCED, ("smt", "siblings"): NOT_MEASURABLE, ("ub", "index"): PASSES}
FIXED = {("fig3.10", "flat"): REPRODUCED, ("fig3.10", "low"): REPRODUCED, ("fig3.11", "order"): NOT_REPRODUCED,
         ("fig3.12", "rise"): REPRODUCED, ("smt", "siblings"): NOT_MEASURABLE, ("ub", "index"): FAILS,
         ("new", "claim"): REPRODUCED}


def test_claims_inconclusive_or_not_measurable_in_either_run_are_left_apart(tmp_path):
    write_verdicts(tmp_path / "a", "full", FULL, sanity={("ub", "index")})
    write_verdicts(tmp_path / "b", "fixed", FIXED, sanity={("ub", "index")})
    a, b = compare_script.read_side(tmp_path / "a"), compare_script.read_side(tmp_path / "b")
    assert (a.mode, b.mode) == ("full", "fixed")
    found = compare_script.compare_sides(a, b)
    assert found.differ == [(("fig3.10", "low"), NOT_REPRODUCED, REPRODUCED)]
    assert (found.agree, found.undecided, found.only_one, found.compared) == (2, 2, 1, 3)
    checks = compare_script.compare_sides(a, b, sanity=True)
    assert checks.differ == [(("ub", "index"), PASSES, FAILS)] and checks.compared == 1
    assert a.counts() == {INCONCLUSIVE: 1, NOT_MEASURABLE: 1, NOT_REPRODUCED: 1, REPRODUCED: 2}
    assert a.counts(sanity=True) == {PASSES: 1}


def test_the_comparison_exits_1_on_a_difference_and_0_without(tmp_path, capsys):
    write_verdicts(tmp_path / "a", "full", FULL)
    write_verdicts(tmp_path / "b", "fixed", FIXED)
    assert compare_script.main(["--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "claim differs: fig3.10: not reproduced -> reproduced: low" in out
    assert "claims compared: 4, differing: 2" in out  # ub's index is a claim here (no sanity flag)
    assert "host: " in out
    write_verdicts(tmp_path / "c", "fixed", FULL)
    assert compare_script.main(["--compare", str(tmp_path / "a"), str(tmp_path / "c")]) == 0
    assert "differing: 0" in capsys.readouterr().out


def test_bad_folders_and_arguments_exit_2_with_one_line(tmp_path, capsys):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "verdicts.json").write_text("{not json")
    for argv, words in ((["--compare", str(tmp_path / "none"), str(tmp_path / "none")], "is it a memlab reproduce"),
                        (["--compare", str(tmp_path / "broken"), str(tmp_path / "broken")], "not JSON"),
                        ([], "give --out DIR"),
                        (["--compare", str(tmp_path), str(tmp_path), "--out", str(tmp_path)], "nothing else")):
        with pytest.raises(SystemExit) as stop:
            compare_script.main(argv)
        assert stop.value.code == 2 and words in capsys.readouterr().err


def test_both_runs_go_into_their_folders_in_the_order_asked(tmp_path, monkeypatch, capsys):
    ran = []

    def fake_run(folder, fixed, items):
        ran.append((folder.name, fixed, items))
        write_verdicts(folder, "fixed" if fixed else "full", FULL)
        return 1.0

    monkeypatch.setattr(compare_script, "run_side", fake_run)
    assert compare_script.main(["--out", str(tmp_path), "--fixed-first", "table6.1"]) == 0
    assert ran == [("fixed", True, ["table6.1"]), ("full", False, ["table6.1"])]
    out = capsys.readouterr().out
    assert "(fixed then full)" in out and "load average" in out


# ---- experiments/clear_order_region_ab.py ----------------------------------------------------

def test_the_region_ab_alternates_regions_and_prints_each_regions_median(capsys):
    """Two small regions, two rounds: a line a region a round (the order alternating) and a median
    line a region; no timing is asserted."""
    script = _load("clear_order_region_ab")
    assert script.main(["--rounds", "2", "--regions", "4,8", "--target-seconds", "0.005"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rounds = [line for line in lines if line.startswith("round ")]
    assert [line.split()[2] for line in rounds] == ["4", "8", "8", "4"]
    assert all("ratio" in line and "kernel order" in line for line in rounds)
    assert [line.split()[0] for line in lines[-2:]] == ["4", "8"]
    assert all("(2 rounds)" in line for line in lines[-2:])


@pytest.mark.parametrize("args, message", [
    (["--regions", "3"], "positive multiple of 2 MiB"),
    (["--regions", "a,b"], "sizes in MiB"),
    (["--rounds", "0"], "--rounds=0 is outside 1 to 1000"),
    (["--cpu", "4096"], "--cpu=4096 is not among"),
    (["--target-seconds", "0"], "--target-seconds=0.0 is not a positive number"),
])
def test_the_region_ab_refuses_bad_input_with_status_2(args, message, capsys):
    script = _load("clear_order_region_ab")
    with pytest.raises(SystemExit) as exit_info:
        script.main(args)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
