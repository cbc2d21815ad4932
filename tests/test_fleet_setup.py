"""Fleet mode without a cluster: the missing extra, the test hook, the machine rules, the
per-machine views on made-up datasets, and a Slurm job array run in a fake environment.

The Dask side runs in tests/test_fleet.py (skipped without the fleet extra);
everything here holds whether or not ``distributed`` is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlab import chart, cli, fleet
from memlab.compare import compare_machines
from memlab.dataset import FINGERPRINT_COLUMN, HOST_COLUMN, Dataset, key_value, machine_series
from memlab.grid import Sweep, grid
from memlab.machine import FAKE_FINGERPRINT_ENV, collect, fake_facts, identity
from memlab.report import build_report
from memlab.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def same_rows(rows) -> list[str]:
    """Rows as comparable text: columns sorted, values normalised as a point key normalises them."""
    return sorted(json.dumps({k: key_value(v) for k, v in row.items()}, sort_keys=True, default=str)
                  for row in rows)


def tiny_sweep(points: int = 1) -> Sweep:
    return Sweep("tiny", "calibrate", grid(budget_ns=[5_000_000 + i for i in range(points)]), repeat=1, warmup=0)


# --------------------------------------------------------------------------
# the extra


def test_a_missing_extra_is_one_line_naming_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an absent package looks like to import
    with pytest.raises(ImportError, match=r"pip install 'memlab\[fleet\]'"):
        fleet.require_distributed()
    status = cli.main(["sweep", "calibrate.quick", "--scheduler", "tcp://127.0.0.1:9", "--each-host",
                       "--out", "unused.csv"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("\n") == 1 and "pip install 'memlab[fleet]'" in err


def test_without_the_extra_the_dask_tests_are_skipped_with_the_reason(tmp_path):
    """tests/test_fleet.py run where ``distributed`` cannot be imported: every test skipped,
    the reason naming the extra (CI installs it, so there they run)."""
    code = ("import sys, pytest\n"
            "sys.modules['distributed'] = None  # what an absent package looks like to import\n"
            f"sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', {str(ROOT / 'tests' / 'test_fleet.py')!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    # a module skipped whole collects no test: pytest exits 5 (NO_TESTS_COLLECTED), not 1
    assert result.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), \
        result.stdout[-2000:] + result.stderr[-2000:]
    assert " skipped" in result.stdout and not any(word in result.stdout for word in ("passed", "failed", "error"))
    assert "SKIPPED" in result.stdout
    assert "pip install 'memlab[fleet]'" in result.stdout and "is not installed" in result.stdout


def test_nothing_imports_dask_unless_fleet_mode_is_asked_for(tmp_path):
    code = ("import sys, memlab, memlab.cli, memlab.report\n"
            "from memlab.grid import Sweep\n"
            "memlab.run_sweep(Sweep('t', 'calibrate', [{'budget_ns': 5_000_000}], repeat=1, warmup=0), "
            f"{str(tmp_path / 't.csv')!r}, progress=False)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('distributed', 'dask')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_fleet_options_are_checked_before_anything_runs(capsys, tmp_path):
    assert cli.main(["sweep", "calibrate.quick", "--each-host", "--out", str(tmp_path)]) == 2
    assert "--each-host needs --scheduler" in capsys.readouterr().err
    assert cli.main(["sweep", "calibrate.quick", "--scheduler", "tcp://h:8786", "--out", str(tmp_path)]) == 2
    assert "--scheduler needs --each-host" in capsys.readouterr().err
    assert cli.main(["sweep", "calibrate.quick", "--scheduler", "tcp://h:8786", "--each-host", "--spread"]) == 2
    with pytest.raises(ValueError, match="each_host=True needs client="):
        run_sweep(tiny_sweep(), each_host=True)
    with pytest.raises(ValueError, match="exactly one of each_host=True"):
        run_sweep(tiny_sweep(), client="tcp://h:8786", each_host=True, spread=True)
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------
# the test hook and the machine a row names


def test_the_fake_fingerprint_hook_replaces_facts(monkeypatch, tmp_path):
    monkeypatch.setenv(FAKE_FINGERPRINT_ENV, json.dumps({"hostname": "fake-a", "cpu_model": "Fake CPU"}))
    facts = collect(include_core=False)
    assert facts["hostname"] == "fake-a" and facts["cpu_model"] == "Fake CPU"
    assert "cpu_model" not in collect(include_core=False, root=str(tmp_path))  # fake trees stay as they are
    monkeypatch.setenv(FAKE_FINGERPRINT_ENV, "[1, 2]")
    with pytest.raises(ValueError, match=f"{FAKE_FINGERPRINT_ENV}=.* must be a JSON object"):
        collect(include_core=False)
    with pytest.raises(ValueError, match=f"{FAKE_FINGERPRINT_ENV}=.* is not JSON"):
        fake_facts({FAKE_FINGERPRINT_ENV: "{cpu"})
    assert fake_facts({}) == {}


def test_a_local_sweep_names_its_machine_in_every_row(monkeypatch, tmp_path):
    monkeypatch.setenv(FAKE_FINGERPRINT_ENV, json.dumps({"hostname": "here", "cpu_model": "Fake CPU"}))
    ds = run_sweep(tiny_sweep(2), tmp_path / "t.csv", progress=False)
    me = identity(collect(include_core=False))
    assert {(r[HOST_COLUMN], r[FINGERPRINT_COLUMN]) for r in ds.rows} == {("here", me["fingerprint_id"])}
    for row in ds.rows:
        assert row["context_started_unix"] <= row["context_ended_unix"]
    saved = Dataset.load(tmp_path / "t.csv").metadata["machines"]
    assert [(m["host"], m["fingerprint_id"]) for m in saved] == [("here", me["fingerprint_id"])]


def rows_of(machines: list[tuple[str, str, list[int]]]) -> list[dict]:
    """Rows of a made-up family: (host, fingerprint id, the n it measured) per machine."""
    rows = []
    for host, print_id, ns in machines:
        for n in ns:
            value = float(n) * (2 if host == "b" else 1)
            rows.append({"family": "made-up", "n": n, "k": "x", "t_ns": value, "t_ns_min": value * 0.9,
                         "t_ns_max": value * 1.1, "t_ns_samples": [value * (1 + i / 100) for i in range(6)],
                         HOST_COLUMN: host, FINGERPRINT_COLUMN: print_id})
    return rows


def test_machines_are_told_apart_by_fingerprint_and_by_host_when_they_measured_the_same_points():
    names = ["n", "k"]
    each_host_twins = rows_of([("a", "111111111111", [1, 2]), ("b", "111111111111", [1, 2])])
    assert machine_series(each_host_twins, names) == ["a", "a", "b", "b"]
    spread_twins = rows_of([("a", "111111111111", [1, 3]), ("b", "111111111111", [2, 4])])
    assert machine_series(spread_twins, names) == [""] * 4
    three_twins_and_one = spread_twins + rows_of([("c", "222222222222", [1, 2, 3, 4])])
    assert set(machine_series(three_twins_and_one, names)) == {"111111111111 (2 hosts)", "c"}
    upgraded = rows_of([("a", "111111111111", [1]), ("a", "333333333333", [1])])
    assert machine_series(upgraded, names) == ["a (111111)", "a (333333)"]
    old_and_new = [{k: v for k, v in row.items() if k not in (HOST_COLUMN, FINGERPRINT_COLUMN)}
                   for row in rows_of([("a", "111111111111", [1])])] + rows_of([("a", "111111111111", [2])])
    assert machine_series(old_and_new, names, default=("a", "111111111111")) == ["", ""]


def made_up(machines) -> Dataset:
    return Dataset(rows_of(machines), {"family": "made-up", "param_names": ["n", "k"], "primary_metric": "t_ns",
                                       "machines": [{"host": h, "fingerprint_id": p,
                                                     "fingerprint": {"cpu_model": f"CPU {h}"},
                                                     "facts": {"hostname": h, "cpu_model": f"CPU {h}"}}
                                                    for h, p, _ in machines]})


def test_every_figure_kind_draws_one_series_per_machine():
    pytest.importorskip("matplotlib", reason="matplotlib (the plot extra) is not installed")
    from memlab import plot

    ds = made_up([("a", "111111111111", [1, 2, 4]), ("b", "222222222222", [1, 2, 4])])
    fig = plot.figure(ds)  # an unknown family: the generic figure, lines over n
    labels = sorted(line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_"))
    assert labels == ["machine=a", "machine=b"]
    view = chart.by_machine(ds)
    bars = chart.bars_figure(view, "t_ns", category=["n"])
    legend = [text.get_text() for text in bars.legends[0].get_texts()]  # one legend under the axes
    assert legend == ["machine=a", "machine=b"]
    colors = {patch.get_facecolor() for patch in bars.axes[0].patches}
    assert len(bars.axes[0].patches) == 2 * 3 and len(colors) == 2  # a bar per machine and n, a colour per machine
    assert "2 machines" in fig._suptitle.get_text()


def test_compare_by_machine(tmp_path, capsys):
    ds = made_up([("a", "111111111111", [1, 2]), ("b", "222222222222", [1, 2, 3])])
    result = compare_machines(ds)
    assert list(result) == ["b"]
    assert [round(p.ratio, 3) for p in result["b"].points] == [2.0, 2.0]
    assert result["b"].only_in_candidate == [{"family": "made-up", "n": 3, "k": "x"}]
    assert result["b"].machine_differences == [("cpu_model", "CPU a", "CPU b")]
    assert list(compare_machines(ds, baseline="b")) == ["a"]
    with pytest.raises(ValueError, match="baseline machine 'c' is not in the dataset .machines: a, b."):
        compare_machines(ds, baseline="c")
    with pytest.raises(ValueError, match="rows of one machine"):
        compare_machines(made_up([("a", "111111111111", [1])]))
    ds.save(tmp_path / "two.csv")
    assert cli.main(["compare", "--by-machine", str(tmp_path / "two.csv")]) == 0
    assert "== b" in capsys.readouterr().out
    assert cli.main(["compare", "--by-machine", str(tmp_path / "two.csv"), "--fail-above", "10%"]) == 1
    assert "worse by at least 10.0%" in capsys.readouterr().err
    assert cli.main(["compare", str(tmp_path / "two.csv")]) == 2
    assert cli.main(["compare", "a.csv", "b.csv", "--baseline-machine", "a"]) == 2


def test_two_fleet_datasets_are_compared_machine_by_machine():
    from memlab.compare import compare

    base = made_up([("a", "111111111111", [1, 2]), ("b", "222222222222", [1, 2])])
    cand = made_up([("a", "111111111111", [1, 2]), ("b", "333333333333", [1, 2])])
    cand.metadata["machines"][1]["fingerprint"] = {"cpu_model": "CPU b", "kernel_release": "6.9"}
    for row in cand.rows:
        if row[HOST_COLUMN] == "b":  # b got slower; pooled with a, its samples would blur it
            row["t_ns"] *= 1.5
            row["t_ns_samples"] = [v * 1.5 for v in row["t_ns_samples"]]
    result = compare(base, cand)
    verdicts = {(p.params["machine"], p.params["n"]): p.verdict for p in result.points}
    assert verdicts == {("a", 1): "unchanged", ("a", 2): "unchanged", ("b", 1): "regression", ("b", 2): "regression"}
    assert not any("more than once" in w for w in result.warnings)
    assert result.machine_differences == [("b: kernel_release", "unknown", "6.9")]
    one = Dataset([r for r in base.rows if r[HOST_COLUMN] == "a"], {**base.metadata, "machines": base.metadata["machines"][:1]})
    against_one = compare(one, cand)  # one machine against the fleet: it meets its own host
    assert [(p.params["machine"], p.verdict) for p in against_one.points] == [("a", "unchanged")] * 2
    assert [p["machine"] for p in against_one.only_in_candidate] == ["b", "b"]


def test_the_report_has_a_machine_table_and_a_heading_per_machine():
    ds = made_up([("a", "111111111111", [1, 2]), ("b", "222222222222", [1, 2, 3])])
    html = build_report([ds], command="test")
    assert "<td>a</td><td>CPU a</td>" in html and "<td>111111111111</td><td>2</td>" in html
    assert "<td>b</td><td>CPU b</td>" in html and "<td>222222222222</td><td>3</td>" in html
    assert "<tr class=series><td colspan=4>machine=a</td></tr>" in html  # a heading per machine, as the legend
    assert "<tr class=series><td colspan=4>machine=b</td></tr>" in html
    assert "The datasets come from 2 different machines" in html


def test_merge_keeps_the_same_point_of_two_machines_and_refuses_it_twice_from_one():
    a = made_up([("a", "111111111111", [1, 2])])
    b = made_up([("b", "111111111111", [1, 2])])
    merged = Dataset.merge(a, b)
    assert len(merged) == 4
    assert [m["host"] for m in merged.metadata["machines"]] == ["a", "b"]
    with pytest.raises(ValueError, match=r"duplicate point \('made-up', 1, 'x'\) measured by a"):
        Dataset.merge(a, a)


# --------------------------------------------------------------------------
# the hosts (a made-up client: no cluster needed)


class FakeClient:
    """A client of the distributed releases of mid-2025 to mid-2026: ``scheduler_info()`` lists
    five workers unless asked for all (``n_workers=-1``)."""

    def __init__(self, workers: dict[str, dict]) -> None:
        self.workers = workers

    def scheduler_info(self, n_workers: int = 5):
        listed = sorted(self.workers) if n_workers == -1 else sorted(self.workers)[:n_workers]
        return {"workers": {address: {"resources": self.workers[address].get("resources", {})}
                            for address in listed}}

    def run(self, function, *args, workers):
        return {address: {"facts": self.workers[address]["facts"], "check": {}} for address in workers}


def test_only_workers_with_the_resource_measure():
    client = FakeClient({"tcp://a:1": {"resources": {"memlab": 1}, "facts": {"hostname": "a"}},
                         "tcp://b:1": {"resources": {}, "facts": {"hostname": "b"}}})
    assert [h.host for h in fleet.gather_hosts(client)] == ["a"]
    with pytest.raises(ValueError, match="no Dask worker offers the resource 'memlab'.*--resources memlab=1"):
        fleet.gather_hosts(FakeClient({"tcp://b:1": {"resources": {}, "facts": {}}}))


class OlderFakeClient(FakeClient):
    """A client of a release before ``n_workers``: every worker listed, the argument refused."""

    def scheduler_info(self):
        return super().scheduler_info(n_workers=-1)


def test_every_worker_measures_not_only_the_five_a_client_lists_by_default():
    workers = {f"tcp://h{i}:1": {"resources": {"memlab": 1}, "facts": {"hostname": f"h{i}"}} for i in range(8)}
    for client in (FakeClient(workers), OlderFakeClient(workers)):
        assert sorted(h.host for h in fleet.gather_hosts(client)) == [f"h{i}" for i in range(8)]


def test_spread_names_every_differing_fact():
    hosts = [fleet.Host("tcp://a:1", {"hostname": "a", "cpu_model": "X", "cpu_count": 2, "kernel_release": "6.1"}),
             fleet.Host("tcp://b:1", {"hostname": "b", "cpu_model": "X", "cpu_count": 4, "kernel_release": "6.8"})]
    with pytest.raises(ValueError, match="these differ: cpu_count: a=2, b=4; kernel_release: a=6.1, b=6.8"):
        fleet.check_spread(hosts)
    fleet.check_spread([hosts[0], fleet.Host("tcp://c:1", {**hosts[0].facts, "hostname": "c"})])


# --------------------------------------------------------------------------
# Slurm: a job array of shards, then a merge, in a fake environment


def test_a_slurm_job_array_then_a_merge(tmp_path):
    script = tmp_path / "array_sweep.py"
    script.write_text("from memlab.grid import Sweep, grid\n\n"
                      "def sweep(quick=False):\n"
                      "    return Sweep('array', 'calibrate', grid(budget_ns=[5000000, 5000001, 5000002, "
                      "5000003, 5000004]), repeat=1, warmup=0, runs=1)\n")
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["MEMLAB"] = f"{sys.executable} -m memlab"
    count = 3
    for task in range(1, count + 1):  # what sbatch --array=1-3 runs, one node each
        task_env = {**env, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count),
                    "SLURM_ARRAY_TASK_MIN": "1",
                    FAKE_FINGERPRINT_ENV: json.dumps({"hostname": f"node{task}", "cpu_model": "Fake CPU"})}
        result = subprocess.run(["bash", str(ROOT / "examples/slurm/memlab-array.sbatch"), str(script), str(out)],
                                env=task_env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    zero_based = {**env, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0"}
    refused = subprocess.run(["bash", str(ROOT / "examples/slurm/memlab-array.sbatch"), str(script), str(out)],
                             env=zero_based, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "numbered from 1 (--array=1-N)" in refused.stderr
    merge = subprocess.run(["bash", str(ROOT / "examples/slurm/memlab-merge.sbatch"), str(out)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert merge.returncode == 0, merge.stderr
    assert "3 datasets, 5 rows from 3 machines" in merge.stdout
    merged = Dataset.load(out / "merged.csv")
    shards = [Dataset.load(path) for path in sorted((out / "shards").glob("shard-*.csv"))]
    assert [len(s) for s in shards] == [2, 2, 1]
    assert sorted(r["budget_ns"] for r in merged.rows) == [5000000 + i for i in range(5)]
    assert same_rows(merged.rows) == same_rows(r for s in shards for r in s.rows)
    assert {r[HOST_COLUMN] for r in merged.rows} == {"node1", "node2", "node3"}
    assert chart.machine_labels(merged) == [""] * 5  # identical nodes, disjoint points: one machine
