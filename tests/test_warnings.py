"""Warnings that mean something: each family says which of its threads and processes should be on a
CPU and how much, the on-CPU flag judges against that, and memlab's warnings go through Python's
warnings with memlab's own categories (filterable), the command line ending with one summary line."""

from __future__ import annotations

import warnings

import pytest

import memlab
from memlab import cli, conditions
from memlab.conditions import ConditionsWarning, MachineWarning, MemlabWarning, OnCpu, expected_on_cpu
from memlab.dataset import row_warning
from memlab.family import Family
from memlab.grid import Sweep
from memlab.pytest_plugin import MemlabRegressionWarning
from memlab.registry import all_families, family
from memlab.runner import LocalExecutor, Run


def test_memlab_warnings_have_their_own_categories_exported_at_the_top():
    assert issubclass(ConditionsWarning, MemlabWarning) and issubclass(MachineWarning, MemlabWarning)
    assert issubclass(MemlabWarning, UserWarning) and issubclass(MemlabRegressionWarning, MemlabWarning)
    assert memlab.ConditionsWarning is ConditionsWarning and memlab.MemlabWarning is MemlabWarning
    assert memlab.MachineWarning is MachineWarning


def test_the_on_cpu_flag_judges_against_what_the_family_expects():
    assert conditions.conditions_warning(0.5, 0.0) == "on CPU 50% of its wall time (below 90%)"
    assert conditions.conditions_warning(0.5, 0.0, expected_on_cpu=0.5) == ""
    assert conditions.conditions_warning(0.44, 0.0, expected_on_cpu=0.5) == (
        "on CPU 44% of its wall time (below 90% of the 50% its threads should be)")
    assert conditions.conditions_warning(1.7, 0.0, expected_on_cpu=2.0) == (
        "on CPU 170% of its wall time (below 90% of the 200% its threads should be)")
    assert conditions.conditions_warning(0.01, 0.0, expected_on_cpu=0.0) == ""  # nothing expected
    assert conditions.conditions_warning(0.01, 0.05, expected_on_cpu=0.0) == "steal time 5.0% (above 2%)"
    assert conditions.conditions_warning(0.5, None, expected_on_cpu=float("nan")).startswith("on CPU 50%")


def test_on_cpu_shares_are_checked_and_summed_up_to_the_cpus():
    with pytest.raises(ValueError, match=r"fraction=-0.1 is outside 0 \.\. 1 \(the share of the wall time "
                                         r"the writer should be on a CPU\)"):
        OnCpu("the writer", -0.1)
    parts = [OnCpu("a", 1.0), OnCpu("b", 1.0), OnCpu("c", 0.0)]
    assert expected_on_cpu(parts) == 2.0 and expected_on_cpu(parts, cpus=1) == 1.0
    assert expected_on_cpu([]) == 0.0


def test_families_say_which_threads_should_be_on_a_cpu():
    pipe = family("pipe")
    blocking = pipe.on_cpu_parts({"busy_loop": False})
    assert [p.fraction for p in blocking] == [0.25, 0.25]
    assert "blocks on a full pipe" in blocking[0].who and "waiting for data" in blocking[1].who
    assert pipe.expected_on_cpu({"busy_loop": False}) == 0.5
    if len(__import__("os").sched_getaffinity(0)) >= 2:
        assert pipe.expected_on_cpu({"busy_loop": True, "writer_cpu": None, "reader_cpu": None}) == 2.0
    assert pipe.expected_on_cpu({"busy_loop": True}, cpu=0) == 1.0  # one CPU: shared
    latency = family("pipe_latency").on_cpu_parts({})
    assert sum(p.fraction for p in latency) == 0.5
    helper = family("chase").on_cpu_parts({"threads": 1, "helper_thread": False})
    assert [p.fraction for p in helper] == [1.0]
    for name, fam in all_families().items():  # every family's default point states its threads
        parts = fam.on_cpu_parts()
        assert parts and all(isinstance(p, OnCpu) and p.who for p in parts), name


def test_a_measurement_records_what_its_family_expects_and_the_row_is_judged_by_it():
    measurement = memlab.run("calibrate", budget_ns=2_000_000, repeat=1, warmup=0)
    row = measurement.to_row()
    assert row["context_on_cpu_expected"] == 1.0 and measurement.on_cpu_expected == 1.0
    blocking = {"context_on_cpu_fraction": 0.4, "context_steal_fraction": 0.0, "context_on_cpu_expected": 0.5}
    assert row_warning(blocking) == "on CPU 40% of its wall time (below 90% of the 50% its threads should be)"
    assert row_warning({**blocking, "context_on_cpu_fraction": 0.46}) == ""
    old = {"context_on_cpu_fraction": 0.46, "context_steal_fraction": 0.0}  # written before families said
    assert row_warning(old).startswith("on CPU 46%")


class Disturbed(LocalExecutor):
    """The local executor, each point's conditions made to read as disturbed."""

    def measure(self, run: Run) -> None:
        for point in run.plan().pending:
            measurement = run.family.run(point, **run.options)
            run.record(point, {**measurement.to_row(), **self.tags}, "on CPU 10% of its wall time (below 90%)")


def _sweep(runs: int = 1) -> Sweep:
    return Sweep("disturbed", "calibrate", [{"budget_ns": 2_000_000}, {"budget_ns": 3_000_000}], repeat=1, warmup=0,
                 runs=runs)


def test_a_run_gives_each_disturbed_point_as_a_conditions_warning(tmp_path):
    with pytest.warns(ConditionsWarning) as caught:
        Run(_sweep(), tmp_path / "d.csv", executor=Disturbed()).execute(progress=False)
    texts = [str(w.message) for w in caught if w.category is ConditionsWarning]
    assert texts == ["calibrate budget_ns=2000000: on CPU 10% of its wall time (below 90%)",
                     "calibrate budget_ns=3000000: on CPU 10% of its wall time (below 90%)"]
    # a filter silences them, as in a notebook
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", MemlabWarning)
        Run(_sweep(), tmp_path / "e.csv", executor=Disturbed()).execute(progress=False)
    assert not [w for w in seen if issubclass(w.category, MemlabWarning)]
    # a caller's warn still receives the lines instead
    lines = []
    Run(_sweep(), tmp_path / "f.csv", executor=Disturbed()).execute(progress=False, warn=lines.append)
    assert sum("on CPU 10%" in line for line in lines) == 2
    assert all(line.startswith("memlab: warning: ") for line in lines)


def test_the_tally_prints_each_line_counts_them_and_restores_the_warnings_state(capsys):
    filters, shown = list(warnings.filters), warnings.showwarning
    with cli.FlagTally() as tally:
        conditions.warn("chase n=1: on CPU 40% of its wall time (below 90%)", ConditionsWarning)
        conditions.warn("memlab: warning: chase n=1: on CPU 40% of its wall time (below 90%)", ConditionsWarning)
        conditions.warn("the machine check found load: 9 on 2 CPUs", MachineWarning)
        conditions.warn("reproduce: chase.quick: 2 warning(s)", ConditionsWarning, count=5)
    err = capsys.readouterr().err
    assert err.count("memlab: warning: chase n=1: on CPU 40%") == 2  # each one, no "once" filter
    assert "memlab: warning: the machine check found load" in err
    assert tally.summary("memlab sweep") == (
        "memlab sweep: flagged 7 points measured with too little CPU time or too much steal (the rows say "
        "which); 1 machine check warning")
    assert warnings.filters == filters and warnings.showwarning is shown
    with cli.FlagTally(quiet=True) as quiet:
        conditions.warn("chase n=1: on CPU 40%", ConditionsWarning)
        conditions.warn("the machine check found load", MachineWarning)
    err = capsys.readouterr().err
    assert "on CPU 40%" not in err and "the machine check found load" in err
    assert quiet.summary("memlab run").startswith("memlab run: flagged 1 point measured with too little")
    with cli.FlagTally() as nothing:
        pass
    assert nothing.summary("memlab tour") == "memlab tour: nothing flagged"


def test_an_ignore_filter_set_outside_wins_over_the_tally(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConditionsWarning)
        with cli.FlagTally() as tally:
            conditions.warn("chase n=1: on CPU 40%", ConditionsWarning)
    assert "on CPU 40%" not in capsys.readouterr().err
    assert tally.summary("memlab sweep") == "memlab sweep: nothing flagged"


def test_run_and_sweep_end_with_one_summary_line_and_quiet_keeps_only_it(tmp_path, capsys, monkeypatch):
    original = Family.run

    def disturbed(self, *args, **kwargs):
        measurement = original(self, *args, **kwargs)
        measurement.context["on_cpu_fraction"] = 0.1  # as if a CPU hog had taken the rest
        measurement.context["steal_fraction"] = 0.0  # and no steal (a loaded guest may have some)
        return measurement

    monkeypatch.setattr(Family, "run", disturbed)
    assert cli.main(["run", "calibrate", "budget_ns=2000000", "--repeat", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "memlab: warning: calibrate: on CPU 10% of its wall time (below 90%)" in err
    assert err[-1].startswith("memlab run: flagged 1 point measured with too little CPU time")
    assert cli.main(["run", "calibrate", "budget_ns=2000000", "--repeat", "1", "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert not any("on CPU 10%" in line for line in err)
    assert err[-1].startswith("memlab run: flagged 1 point measured with too little CPU time")
    script = tmp_path / "two.py"
    script.write_text("from memlab.sweep import Sweep\n\n\ndef sweep(quick=False):\n"
                      "    return Sweep('two', 'calibrate', [{'budget_ns': 2000000}, {'budget_ns': 3000000}], "
                      "repeat=1, warmup=0, runs=1)\n")
    assert cli.main(["sweep", str(script), "--out", str(tmp_path / "two.csv"), "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sum("on CPU 10% of its wall time" in line for line in err) == 2, err
    assert err[-1].startswith("memlab sweep: flagged 2 points measured with too little CPU time"), err
    assert cli.main(["sweep", str(script), "--out", str(tmp_path / "quiet.csv"), "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert not any("on CPU 10%" in line for line in err), err
    assert err[-1].startswith("memlab sweep: flagged 2 points measured with too little CPU time"), err
