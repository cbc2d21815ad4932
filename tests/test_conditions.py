"""Each measurement records its on-CPU fraction and the steal share during it.

The hog tests are physics with a wide margin: a busy loop pinned to the
measuring CPU takes about half of that CPU from the measurement (the
scheduler shares a CPU fairly), far below the 90% warning line, whatever
else the machine is doing.
"""

import contextlib
import json
import math
import os
import subprocess
import sys
import time

import memlab
import memlab.measure
from memlab.dataset import Dataset
from memlab import conditions
from memlab.check import STEAL_MAX_FRACTION, judge
from memlab.measure import cpu_seconds

HOG = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def hog_on(cpu):
    """A busy loop pinned to ``cpu`` for the duration (killed and reaped afterwards)."""
    process = subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n" + HOG]
    )
    try:
        deadline = time.monotonic() + 5
        while os.sched_getaffinity(process.pid) != {cpu} and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # let it settle on its CPU
        yield process
    finally:
        process.kill()
        process.wait()


def measuring_cpu():
    return max(os.sched_getaffinity(0))


def test_a_measurement_records_on_cpu_and_steal():
    measurement = memlab.run("chase", working_set_bytes=1 << 16, repeat=3, target_seconds=0.05)
    row = measurement.to_row()
    assert row["context_on_cpu_fraction"] == measurement.on_cpu_fraction
    # at most one CPU's worth plus rounding: chase is one thread
    assert 0.0 < measurement.on_cpu_fraction <= 1.05
    steal = row["context_steal_fraction"]  # in every row, whatever the load
    if not math.isnan(steal):  # NaN where /proc/stat saw too few busy ticks
        assert 0.0 <= steal <= 1.0
        assert steal == measurement.steal_fraction
    else:
        assert math.isnan(measurement.steal_fraction)


def test_the_conditions_columns_are_in_every_row_and_survive_a_csv_round_trip(monkeypatch, tmp_path):
    """A short measurement on a quiet machine sees too few busy ticks for a steal share; its
    row still has the column (NaN), so the rows of one sweep have the same columns whatever
    the load and a dataset read back from its CSV equals the rows in memory (a row without
    the column used to read back with it, empty, beside rows that had it)."""
    known = memlab.run("calibrate", budget_ns=1_000_000, repeat=1, warmup=0).to_row()
    monkeypatch.setattr(memlab.measure, "steal_fraction", lambda *args, **kwargs: None)
    unknown = memlab.run("calibrate", budget_ns=1_000_000, repeat=1, warmup=0).to_row()
    assert set(unknown) == set(known)
    assert math.isnan(unknown["context_steal_fraction"])
    known["context_steal_fraction"] = 0.25  # as a busy machine's /proc/stat gives it
    meta = {"family": "calibrate", "param_names": ["budget_ns"]}
    Dataset([known, unknown], meta).save(tmp_path / "mixed.csv")
    loaded = Dataset.load(tmp_path / "mixed.csv").rows
    assert [set(row) for row in loaded] == [set(known), set(unknown)]
    assert loaded[0]["context_steal_fraction"] == 0.25
    assert math.isnan(loaded[1]["context_steal_fraction"])


def test_a_busy_loop_on_the_measuring_cpu_is_flagged():
    cpu = measuring_cpu()
    with hog_on(cpu):
        measurement = memlab.run("chase", working_set_bytes=1 << 16, repeat=5,
                                 target_seconds=0.05, cpu=cpu)
    assert measurement.on_cpu_fraction < 0.75, measurement.context
    assert measurement.conditions_warning.startswith("on CPU ")
    assert "below 90%" in measurement.conditions_warning


def test_cpu_seconds_counts_waited_children():
    before = cpu_seconds()
    subprocess.run([sys.executable, "-c",
                    "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end:\n    pass\n"], check=True)
    assert cpu_seconds() - before >= 0.3


def test_run_and_sweep_warn_under_a_hog_and_flag_the_rows(tmp_path, capsys):
    from memlab.cli import main
    from memlab.dataset import Dataset

    cpu = measuring_cpu()
    out = tmp_path / "hogged.csv"
    with hog_on(cpu):
        assert main(["run", "chase", "working_set_bytes=16KiB", "--repeat", "3",
                     "--cpu", str(cpu), "--out", str(tmp_path / "one.csv")]) == 0
        run_err = capsys.readouterr().err
        assert main(["sweep", str(SCRIPT), "--out", str(out), "--cpu", str(cpu),
                     "--no-progress"]) == 0
        sweep_err = capsys.readouterr().err
    assert "memlab: warning: chase: on CPU " in run_err
    dataset = Dataset.load(out)
    flagged = [row for row in dataset.rows if row["context_on_cpu_fraction"] < 0.9]
    assert len(flagged) == len(dataset.rows) == 2
    warnings = [line for line in sweep_err.splitlines() if "of its wall time" in line]
    assert len(warnings) == 2
    assert warnings[0].startswith("memlab: warning: chase working_set_bytes=16 KiB: on CPU ")
    for key in ("check_start", "check_end"):
        assert {f["name"] for f in dataset.metadata[key]["findings"]} >= {"load", "steal", "thp"}
    assert dataset.metadata["check_start"]["planned_bytes"] == 65536
    single = Dataset.load(tmp_path / "one.csv")
    assert "check_start" in single.metadata and "check_end" in single.metadata


SCRIPT = __import__("pathlib").Path(__file__).with_name("conditions_sweep.py")


def conditions_dataset(with_columns=True):
    from memlab.dataset import Dataset

    rows = []
    for size, on_cpu, steal in ((4096, 0.99, 0.0), (8192, 0.48, 0.0), (16384, 0.97, 0.05)):
        row = {"family": "chase", "working_set_bytes": size, "ns_per_element": 1.0,
               "ns_per_element_min": 0.9, "ns_per_element_max": 1.1, "repeat": 3}
        if with_columns:
            row.update(context_on_cpu_fraction=on_cpu, context_steal_fraction=steal)
        rows.append(row)
    meta = {"family": "chase", "param_names": ["working_set_bytes"], "primary_metric": "ns_per_element",
            "check_start": {"warnings": ["load", "steal"]}, "check_end": {"warnings": []}}
    return Dataset(rows, meta)


def test_the_report_badges_the_disturbed_points():
    from html_check import parse_report

    from memlab.report import build_report

    text = build_report([conditions_dataset()], command="memlab report x.csv")
    parsed = parse_report(text)
    assert parsed.errors == []
    assert text.count("<tr class=flagged>") == 2
    assert text.count('<span class=badge title="') == 2
    assert 'title="on CPU 48% of its wall time (below 90%)">⚠ on CPU 48%, steal 0.0%</span>' in text
    assert 'title="steal time 5.0% (above 2%)">⚠ on CPU 97%, steal 5.0%</span>' in text
    assert "<span class=meta>on CPU 99%, steal 0.0%</span>" in text
    assert "2 of 3 points were measured with less than 90% of the CPU time their threads should get" in text
    assert "machine check warnings at the start: load, steal" in text


def test_a_report_without_the_columns_has_no_badges():
    from memlab.report import build_report

    text = build_report([conditions_dataset(with_columns=False)], command="x")
    assert "class=flagged" not in text and "<th>conditions</th>" not in text
    assert "points were measured with less than" not in text


# --- memlab.conditions sits under measure; the machine check sits above it ---------------------

_LOADED = """
import json, pathlib, sys, types
package = types.ModuleType("memlab")  # the package without its __init__ (which imports the check)
package.__path__ = [str(pathlib.Path({init!r}).parent)]
sys.modules["memlab"] = package
import {module}
print(json.dumps(sorted(name for name in sys.modules if name.startswith("memlab."))))
"""


def _modules_loaded_by(module: str) -> list[str]:
    code = _LOADED.format(init=memlab.__file__, module=module)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_importing_measure_does_not_import_the_machine_check():
    loaded = _modules_loaded_by("memlab.measure")
    assert "memlab.conditions" in loaded and "memlab.machine" not in loaded
    assert "memlab.check" not in loaded, loaded
    assert "memlab.check" in _modules_loaded_by("memlab.check")  # the probe sees an import when there is one


def test_the_check_judges_steal_by_the_conditions_threshold():
    assert STEAL_MAX_FRACTION is conditions.STEAL_MAX_FRACTION
    above = {"steal_fraction": conditions.STEAL_MAX_FRACTION * 2, "steal_window_seconds": 1}
    below = {"steal_fraction": conditions.STEAL_MAX_FRACTION / 2, "steal_window_seconds": 1}
    verdicts = {name: {f.name: f.verdict for f in judge(facts)}["steal"] for name, facts in
                (("above", above), ("below", below))}
    assert verdicts == {"above": "warning", "below": "ok"}
    assert conditions.conditions_warning(1.0, above["steal_fraction"]).startswith("steal time")
    assert conditions.conditions_warning(1.0, below["steal_fraction"]) == ""
