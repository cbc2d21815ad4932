"""Sweeps: grids, rows on disk as they come, Ctrl-C, resume and shards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import memlab
import memlab.family as family_module
from memlab.dataset import Dataset
from memlab.sweep import Sweep, grid, parse_shard, run_sweep, shard_points, zipped

MiB = 1 << 20


def region_sweep(n_points: int = 4) -> Sweep:
    sizes = [(i + 1) * MiB for i in range(n_points)]
    return Sweep("test", "region", grid(region_bytes=sizes, populate=["touch"]), repeat=1, warmup=0, runs=1)


def test_grid_is_a_cartesian_product_in_fixed_order():
    points = grid(a=[1, 2], b=["x", "y", "z"])
    assert len(points) == 6
    assert points[0] == {"a": 1, "b": "x"} and points[-1] == {"a": 2, "b": "z"}
    with pytest.raises(ValueError, match="axis 'b'"):
        grid(a=[1], b=[])


def test_zipped_walks_axes_together_and_rejects_unequal_lengths():
    assert zipped(a=[1, 2], b=[3, 4]) == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    with pytest.raises(ValueError, match="differ in length"):
        zipped(a=[1, 2], b=[3])


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "1", "1/0"])
def test_bad_shards_are_rejected(text):
    with pytest.raises(ValueError, match="shard"):
        parse_shard(text)


def test_shards_partition_the_points():
    points = list(range(10))
    parts = [shard_points(points, (i, 3)) for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == points


def test_sweep_writes_rows_with_metadata(tmp_path):
    out = tmp_path / "region.csv"
    dataset = run_sweep(region_sweep(2), out, progress=False)
    assert len(dataset) == 2
    loaded = Dataset.load(out)
    assert [r["region_bytes"] for r in loaded.rows] == [MiB, 2 * MiB]
    assert loaded.metadata["param_names"] == ["region_bytes", "pages", "populate", "strict_pages"]
    assert loaded.metadata["machine"]["cpu_count"] >= 1
    row = loaded.rows[0]
    assert row["GB_per_s"] > 0 and len(row["GB_per_s_samples"]) == 1
    assert row["counter_page_faults"] >= MiB // 4096 * 0.9


def test_bad_point_is_rejected_before_anything_runs(tmp_path):
    sweep = Sweep("bad", "region", [{"region_bytes": MiB}, {"region_bytes": 12}], repeat=1)
    with pytest.raises(ValueError, match="region_bytes=12 is below the minimum 4096"):
        run_sweep(sweep, tmp_path / "x.csv", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_interrupt_keeps_finished_rows_and_resume_completes_without_duplicates(tmp_path, monkeypatch):
    out = tmp_path / "region.csv"
    calls = {"n": 0}
    original = family_module.Family.run

    def flaky_run(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(family_module.Family, "run", flaky_run)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(region_sweep(4), out, progress=False)
    assert len(Dataset.load(out)) == 2
    monkeypatch.setattr(family_module.Family, "run", original)
    measured = []
    monkeypatch.setattr(
        family_module.Family, "run",
        lambda self, params, **kw: measured.append(params) or original(self, params, **kw),
    )
    dataset = run_sweep(region_sweep(4), out, progress=False)
    assert len(measured) == 2  # only the two missing points
    rows = Dataset.load(out).rows
    assert sorted(r["region_bytes"] for r in rows) == [MiB, 2 * MiB, 3 * MiB, 4 * MiB]
    assert len(dataset) == 4


def test_shards_merge_to_the_unsharded_result(tmp_path):
    sweep = region_sweep(5)
    parts = [run_sweep(sweep, tmp_path / f"s{i}.csv", shard=f"{i}/2", progress=False) for i in (1, 2)]
    merged = Dataset.merge(Dataset.load(tmp_path / "s1.csv"), Dataset.load(tmp_path / "s2.csv"))
    whole = run_sweep(sweep, tmp_path / "whole.csv", progress=False)
    assert sorted(merged.key(r) for r in merged.rows) == sorted(whole.key(r) for r in whole.rows)
    assert sum(len(p) for p in parts) == len(whole) == 5


def test_progress_is_quiet_when_stderr_is_not_a_terminal(capsys):
    run_sweep(region_sweep(2), progress=True)
    err = capsys.readouterr().err
    assert "region:test" not in err and "2/2" not in err  # warnings about the machine may be there


def test_real_sigint_leaves_rows_on_disk_and_resume_finishes(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(
        """
        from memlab.cli import script_main
        from memlab.grid import Sweep

        def sweep(quick=False):
            return Sweep("slow", "calibrate",
                         [{"budget_ns": 300_000_000 + i} for i in range(6)], repeat=1, warmup=0, runs=1)

        if __name__ == "__main__":
            raise SystemExit(script_main(sweep))
        """
    ))
    out = tmp_path / "slow.csv"
    command = [sys.executable, str(script), "--out", str(out), "--no-progress"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and len(out.read_text().splitlines()) >= 2:  # header + one row
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    assert process.returncode != 0
    kept = len(Dataset.load(out))
    assert 1 <= kept < 6
    subprocess.run(command, check=True, timeout=120)
    rows = Dataset.load(out).rows
    assert sorted(r["budget_ns"] for r in rows) == [300_000_000 + i for i in range(6)]


def test_named_sweeps_resolve(tmp_path):
    from memlab.sweep import resolve

    assert resolve("calibrate.quick")[0].family == "calibrate"
    with pytest.raises(ValueError, match="not a sweep of calibrate"):
        resolve("calibrate.nosuch")
    with pytest.raises(ValueError, match="neither a script"):
        resolve("nosuch")
    with pytest.raises(ValueError, match="does not exist"):
        resolve(str(tmp_path / "missing.py"))


def test_measurement_statistics_keep_raw_samples():
    m = memlab.run("calibrate", budget_ns=5_000_000, repeat=3, warmup=1)
    assert len(m.samples) == 3 and len(m.warmup_samples) == 1
    stats = m.stats["core_GHz"]
    assert stats["min"] <= stats["median"] <= stats["max"]
    row = m.to_row()
    assert len(row["core_GHz_samples"]) == 3
    assert row["core_GHz"] == stats["median"]


@pytest.mark.parametrize(
    "options, message",
    [({"repeat": 0}, "repeat=0 is below the minimum 1"),
     ({"warmup": -1}, "warmup=-1 is below the minimum 0"),
     ({"target_seconds": -1}, "target_seconds=-1"),
     ({"cpu": 999}, "cpu=999 is not among"),
     ({"nosuch": 1}, "unknown parameter 'nosuch'")],
)
def test_measure_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        memlab.run("calibrate", budget_ns=5_000_000, **options)


def test_params_of_wrong_type_are_rejected():
    with pytest.raises(ValueError, match="params=.* must be a CalibrateParams, a dict or None"):
        memlab.run("calibrate", 42)
    with pytest.raises(ValueError, match="budget_ns='x' must be an integer"):
        memlab.run("calibrate", budget_ns="x")


def test_pinning_runs_on_the_requested_cpu():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    before = os.sched_getaffinity(0)
    m = memlab.run("calibrate", budget_ns=5_000_000, repeat=1, cpu=cpu)
    assert m.context["cpu"] == cpu
    assert os.sched_getaffinity(0) == before


def test_metric_named_like_a_parameter_does_not_overwrite_it(tmp_path):
    from memlab.measure import Measurement

    m = Measurement(family="calibrate", params={"budget_ns": 5, "laps": 3},
                    samples=[{"laps": 4.0}, {"laps": 6.0}], counters=[{}, {}],
                    counters_missing={}, counters_scope="none", warmup_samples=[],
                    primary_metric="laps")
    row = m.to_row()
    assert row["laps"] == 3
    assert row["measured_laps"] == 5.0 and row["measured_laps_samples"] == [4.0, 6.0]


def test_resume_matches_points_whose_family_reports_a_same_named_metric(tmp_path):
    # chase reports the laps it walked while `laps` is also a parameter.
    from memlab.sweep import Sweep

    sweep = Sweep("one", "chase", [{"working_set_bytes": 1 << 14}], repeat=1, warmup=0,
                  target_seconds=0.01, runs=1)
    run_sweep(sweep, tmp_path / "c.csv", progress=False)
    run_sweep(sweep, tmp_path / "c.csv", progress=False)
    assert len(Dataset.load(tmp_path / "c.csv")) == 1


def test_resume_refuses_a_row_whose_parameter_cell_is_empty(tmp_path, capsys):
    """An empty cell in an int parameter column loaded as None: resume kept the row, keyed a point no
    sweep has, and measured the point again (9 rows for 8 points; issue 27)."""
    from memlab.cli import main

    sweep = Sweep("eight", "calibrate", grid(budget_ns=[1_000_000 + i for i in range(8)]), repeat=1, warmup=0,
                  runs=1)
    out = tmp_path / "eight.csv"
    run_sweep(sweep, out, progress=False)
    lines = out.read_text().split("\n")
    cells = lines[3].split(",")
    column = lines[0].split(",").index("budget_ns")
    cells[column] = ""
    lines[3] = ",".join(cells)
    out.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"eight\.csv: record 4 \(line 4\), column 'budget_ns': empty, but "
                                         r"calibrate's parameter budget_ns always has a value"):
        run_sweep(sweep, out, progress=False)
    assert len(out.read_text().strip().split("\n")) == 9  # nothing measured again
    script = tmp_path / "eight.py"
    script.write_text("from memlab.grid import Sweep, grid\n"
                      "def sweep(quick=False):\n"
                      "    return Sweep('eight', 'calibrate', grid(budget_ns=[1_000_000 + i for i in range(8)]),"
                      " repeat=1, warmup=0, runs=1)\n")
    capsys.readouterr()
    assert main(["sweep", str(script), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("memlab: warning:")]  # the machine check's
    assert len(errors) == 1 and "column 'budget_ns': empty" in errors[0], err


def test_resume_keeps_a_parameter_that_may_be_none(tmp_path):
    """pipe's total_bytes is None by default: an empty cell there is a value, not damage."""
    from memlab.registry import family

    assert "total_bytes" not in family("pipe").required_params()
    assert "working_set_bytes" in family("chase").required_params()
