"""Where memlab writes: no dataset silently replaced or mixed, checked before measuring;
--no-resume starts fresh; resumes of datasets older than a parameter; names inside --out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memlab.family
import memlab.runner
import memlab.sweep
from memlab import cli
from memlab.dataset import Dataset, DatasetError, DatasetWriter
from memlab.grid import Sweep
from memlab.sweep import output_path, run_sweep

QUICK = ["--repeat", "1", "--warmup", "0"]


@pytest.fixture
def measured(monkeypatch):
    """Counts the points measured (the run is real)."""
    calls = []
    real = memlab.family.measure

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(memlab.family, "measure", counting)
    return calls


def chase_sweep(name="s") -> Sweep:
    return Sweep(name, "chase", [{"working_set_bytes": 4096 << i, "laps": 1} for i in range(3)],
                 repeat=1, warmup=0, target_seconds=0.001, runs=1)


def test_run_out_refuses_a_dataset_of_another_family_before_measuring(tmp_path, measured, capsys):
    out = tmp_path / "chase-quick.csv"
    run_sweep(chase_sweep(), out, progress=False)
    before = out.read_bytes()
    measured.clear()
    assert cli.main(["run", "calibrate", *QUICK, "--out", str(out)]) == 2
    assert "holds family='chase' but this run has family='calibrate'" in capsys.readouterr().err
    assert measured == [] and out.read_bytes() == before


def test_run_out_refuses_a_sweeps_dataset_of_the_same_family(tmp_path, measured, capsys):
    out = tmp_path / "chase-quick.csv"
    run_sweep(chase_sweep(), out, progress=False)
    measured.clear()
    assert cli.main(["run", "chase", "working_set_bytes=1MiB", "laps=1", *QUICK, "--out", str(out)]) == 2
    assert "holds the sweep 's'" in capsys.readouterr().err
    assert measured == [] and len(Dataset.load(out)) == 3


def test_run_out_appends_new_points_to_its_own_dataset_and_refuses_a_repeat(tmp_path, measured, capsys):
    out = tmp_path / "runs.csv"
    assert cli.main(["run", "calibrate", "budget_ns=1000000", *QUICK, "--out", str(out)]) == 0
    assert cli.main(["run", "calibrate", "budget_ns=2000000", *QUICK, "--out", str(out)]) == 0
    assert [r["budget_ns"] for r in Dataset.load(out).rows] == [1_000_000, 2_000_000]
    measured.clear()
    capsys.readouterr()
    assert cli.main(["run", "calibrate", "budget_ns=1000000", *QUICK, "--out", str(out)]) == 2
    assert "already holds this point" in capsys.readouterr().err
    assert measured == []


def test_run_out_creates_its_directory(tmp_path):
    out = tmp_path / "new" / "dir" / "c.csv"
    assert cli.main(["run", "calibrate", "budget_ns=1000000", *QUICK, "--out", str(out)]) == 0
    assert len(Dataset.load(out)) == 1


def test_no_resume_refuses_an_existing_dataset_and_force_moves_it_aside(tmp_path, measured, capsys, monkeypatch):
    real_check = memlab.runner.check
    script = tmp_path / "s.py"
    script.write_text("from memlab.grid import Sweep\n"
                      "def sweep(quick=False):\n"
                      "    return Sweep('q', 'calibrate', [{'budget_ns': b} for b in (1000000, 2000000)],"
                      " repeat=1, warmup=0, runs=1)\n")
    out = tmp_path / "o"
    args = ["sweep", str(script), "--out", str(out), "--no-progress", "--no-resume"]
    assert cli.main(args) == 0
    target = out / "calibrate-q.csv"
    first = target.read_bytes()
    measured.clear()
    capsys.readouterr()
    checks = []
    monkeypatch.setattr(memlab.runner, "check", lambda *a, **k: checks.append(a) or real_check(*a, **k))
    assert cli.main(args) == 2  # before: appended, 4 rows of which 2 unique, "2 rows" printed
    assert "already holds a dataset" in capsys.readouterr().err and measured == []
    assert checks == []  # refused before the machine check (its warnings would precede the refusal)
    assert target.read_bytes() == first
    assert cli.main([*args, "--force"]) == 0
    assert len(Dataset.load(target)) == 2
    (aside,) = out.glob("calibrate-q.replaced-*.csv")
    assert aside.read_bytes() == first and aside.with_suffix(".json").exists()
    assert cli.main(["sweep", str(script), "--out", str(out), "--force"]) == 2  # --force needs --no-resume


def test_every_output_of_a_script_is_checked_before_the_first_point(tmp_path, measured, capsys):
    script = tmp_path / "esc.py"
    script.write_text("from memlab.grid import Sweep\n"
                      "def sweep(quick=False):\n"
                      "    point = [{'budget_ns': 1000000}]\n"
                      "    return [Sweep('ok', 'calibrate', point, repeat=1, warmup=0),\n"
                      "            Sweep('x/../../escaped/pwn', 'calibrate', point, repeat=1, warmup=0)]\n")
    (tmp_path / "sub" / "o").mkdir(parents=True)
    assert cli.main(["sweep", str(script), "--out", str(tmp_path / "sub" / "o"), "--no-progress"]) == 2
    assert "must be a plain file name" in capsys.readouterr().err
    assert measured == []
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "sub" / "escaped").exists()
    assert list((tmp_path / "sub" / "o").iterdir()) == []


def test_output_path_keeps_names_inside_the_folder(tmp_path):
    assert output_path(str(tmp_path), chase_sweep("fig3_10"), many=True) == tmp_path / "chase-fig3_10.csv"
    with pytest.raises(ValueError, match="plain file name"):
        output_path(str(tmp_path), chase_sweep("../up"), many=True)


def test_a_fifo_out_is_refused_not_opened(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.csv")
    assert cli.main(["run", "calibrate", *QUICK, "--out", str(tmp_path / "fifo.csv")]) == 2
    assert "FIFO" in capsys.readouterr().err
    assert cli.main(["sweep", "calibrate.quick", "--out", str(tmp_path / "fifo.csv"), "--no-progress"]) == 2


# ---- datasets written before a parameter existed -----------------------------------------------


def older_dataset(path: Path, drop: str) -> None:
    """Rewrite a dataset as a memlab from before parameter `drop` would have written it."""
    ds = Dataset.load(path)
    rows = [{k: v for k, v in row.items() if k != drop} for row in ds.rows]
    meta = dict(ds.metadata, param_names=[n for n in ds.metadata["param_names"] if n != drop])
    meta.pop("load_warnings", None)
    Dataset(rows, meta).save(path)


def test_a_resume_matches_old_rows_with_the_new_parameters_default(tmp_path, measured):
    out = tmp_path / "c.csv"
    run_sweep(chase_sweep(), out, progress=False)
    older_dataset(out, "chains")  # written before `chains` existed
    measured.clear()
    ds = run_sweep(chase_sweep(), out, progress=False)
    assert measured == []  # before: every point measured again and appended
    assert len(ds) == 3 and len(Dataset.load(out)) == 3
    assert [row["chains"] for row in Dataset.load(out).rows] == [1, 1, 1]  # the default, written in


def test_a_resume_refuses_a_new_parameter_without_a_default(tmp_path):
    out = tmp_path / "c.csv"
    Dataset([{"family": "f", "n": 1}], {"family": "f", "param_names": ["n"]}).save(out)
    with pytest.raises(DatasetError, match="written before parameter 'm' existed and 'm' has no default"):
        DatasetWriter(out, {"family": "f", "param_names": ["n", "m"]}, defaults={})


def test_a_resume_refuses_a_dataset_keyed_by_a_parameter_this_run_lacks(tmp_path):
    out = tmp_path / "c.csv"
    Dataset([{"family": "f", "n": 1, "gone": 2}], {"family": "f", "param_names": ["n", "gone"]}).save(out)
    with pytest.raises(DatasetError, match="keys its points by parameter\\(s\\) 'gone'"):
        DatasetWriter(out, {"family": "f", "param_names": ["n"]})


def test_the_tour_refuses_an_out_that_is_a_file_or_in_proc(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert cli.main(["tour", "--out", str(tmp_path / "file"), "--family", "calibrate", "--reduced"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert cli.main(["tour", "--out", "/proc/memlab-tour", "--family", "calibrate", "--reduced"]) == 2
    assert "/proc/memlab-tour" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["/proc/r.html", "DIR", "/proc/sys/nope/r.html"])
def test_report_targets_that_cannot_be_written_are_one_line_and_exit_2(tmp_path, capsys, target):
    Dataset([{"family": "calibrate", "budget_ns": 1, "core_GHz": 3.0, "core_GHz_samples": [3.0]}],
            {"family": "calibrate", "param_names": ["budget_ns"]}).save(tmp_path / "c.csv")
    target = str(tmp_path) if target == "DIR" else target
    assert cli.main(["report", str(tmp_path / "c.csv"), "-o", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_parse_value_refuses_huge_powers_before_computing_them():
    with pytest.raises(cli.UsageError, match="beyond 64 bits"):
        cli.parse_value("10^100000000")
    with pytest.raises(cli.UsageError, match="beyond 64 bits"):
        cli.parse_value("2^" + "9" * 30)
    assert cli.parse_value("2^63") == 1 << 63 and cli.parse_value("1^100000000000") == 1


def test_fullwidth_digits_are_refused_by_the_cli(capsys):
    assert cli.main(["run", "calibrate", "budget_ns=１０００００００"]) == 2
    assert "non-ASCII digits" in capsys.readouterr().err
    assert cli.main(["run", "calibrate", "--repeat", "３"]) == 2


def test_repeat_and_warmup_are_bounded(capsys):
    assert cli.main(["run", "calibrate", "--repeat", "100000000000"]) == 2
    assert "--repeat=100000000000 is above the maximum 10000" in capsys.readouterr().err
    assert cli.main(["run", "calibrate", "--warmup", "5000"]) == 2
    assert "--warmup=5000 is above the maximum 1000" in capsys.readouterr().err


def test_the_sidecar_of_a_run_dataset_is_valid_json(tmp_path):
    out = tmp_path / "r.csv"
    assert cli.main(["run", "calibrate", "budget_ns=1000000", *QUICK, "--out", str(out)]) == 0
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["sweep"] == "run" and sidecar["family"] == "calibrate"
