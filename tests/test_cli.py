"""The memlab command: exit codes and messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from memlab.cli import main, parse_value
from memlab.dataset import Dataset


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlab", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(
    "text, value",
    [("42", 42), ("1.5", 1.5), ("64MiB", 64 << 20), ("4k", 4096), ("2^20", 1 << 20),
     ("true", True), ("off", False), ("random", "random")],
)
def test_values_parse(text, value):
    assert parse_value(text) == value


def test_info_prints_machine_and_counter_facts():
    result = run_cli("info")
    assert result.returncode == 0, result.stderr
    assert "counters" in result.stdout and "core clock" in result.stdout
    assert "page_faults" in result.stdout


def test_info_json_is_machine_readable():
    result = run_cli("info", "--json", "--no-calibrate")
    facts = json.loads(result.stdout)
    assert facts["counters"]["page_faults"]["available"] is True


def test_run_calibrate_end_to_end_writes_a_dataset(tmp_path):
    out = tmp_path / "clock.csv"
    result = run_cli("run", "calibrate", "budget_ns=20000000", "--repeat", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "core_GHz" in result.stdout
    dataset = Dataset.load(out)
    assert len(dataset) == 1 and dataset.rows[0]["core_GHz"] > 0.1
    assert dataset.metadata["family"] == "calibrate"


def test_run_keeps_choice_values_as_text():
    assert main(["run", "region", "region_bytes=1MiB", "pages=4k", "--repeat", "1"]) == 0


@pytest.mark.parametrize(
    "args, message",
    [(["run", "nosuch"], "family='nosuch' is not a memlab family"),
     (["run", "region", "region_bytes"], "bad argument 'region_bytes': expected key=value"),
     (["run", "region", "region_bytes="], "region_bytes has no value"),
     (["run", "region", "region_bytes=12"], "region_bytes=12 is below the minimum 4096"),
     (["run", "region", "pages=huge"], "pages='huge' is not one of"),
     (["run", "region", "colour=red"], "unknown parameter 'colour'"),
     (["run", "calibrate", "--repeat", "0"], "--repeat=0 is below the minimum 1"),
     (["sweep", "nosuch"], "neither a script nor a named sweep"),
     (["sweep", "calibrate.quick", "--shard", "5/2"], "shard=5/2"),
     (["nosuchcommand"], "invalid choice")],
)
def test_bad_arguments_exit_2_with_one_line(args, message):
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_kernel_refusal_exits_1_with_the_reason():
    free = open("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages").read().strip()
    if free != "0":
        pytest.skip("1 GiB hugetlb pages are reserved here; the refusal cannot occur")
    result = run_cli("run", "region", "region_bytes=1GiB", "pages=hugetlb-1g", "strict_pages=true")
    assert result.returncode == 1
    assert "OSError" in result.stderr and "pages refused" in result.stderr


def test_run_says_which_pages_the_kernel_gave():
    result = run_cli("run", "region", "region_bytes=2MiB", "pages=4k", "populate=map_populate", "--repeat", "1")
    assert result.returncode == 0, result.stderr
    assert ("  asked and obtained: pages_requested=4k pages_obtained=4k populate_requested=map_populate "
            "populate_used=map_populate\n") in result.stdout


def test_sweep_list_and_named_sweep(tmp_path):
    listed = run_cli("sweep", "--list")
    assert "calibrate.quick" in listed.stdout and "region.quick" in listed.stdout
    out = tmp_path / "q.csv"
    result = run_cli("sweep", "calibrate.quick", "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert [row["run"] for row in Dataset.load(out).rows] == [0, 1, 2]  # one point, the default 3 runs


def test_script_main_prints_the_report_of_the_measured_dataset_and_only_after_success(tmp_path, capsys):
    from memlab.cli import script_main
    from memlab.grid import Sweep

    def sweep(quick=False):
        size = 1 << 20 if quick else 2 << 20
        return Sweep("tiny", "region", [{"region_bytes": size}], repeat=1, warmup=0, runs=1)

    def report(dataset, quick):
        return f"REPORT quick={quick} rows={len(dataset)} region_bytes={dataset.rows[0]['region_bytes']}"

    out = tmp_path / "tiny.csv"
    assert script_main(sweep, ["--quick", "--out", str(out), "--no-progress"], report=report) == 0
    assert f"REPORT quick=True rows=1 region_bytes={1 << 20}" in capsys.readouterr().out
    assert script_main(sweep, ["--help"], report=report) == 0
    assert "REPORT" not in capsys.readouterr().out
    assert script_main(sweep, ["--repeat", "0", "--out", str(tmp_path / "x.csv")], report=report) == 2
    assert "REPORT" not in capsys.readouterr().out


SCRIPT_MISTAKES = {
    "no_quick": ("from memlab.grid import Sweep\n"
                 "def sweep():\n"
                 "    return Sweep('s', 'calibrate', [{'budget_ns': 1_000_000}])\n",
                 r"sweep\(\) takes no quick argument \(it is sweep\(\)\): define it as def sweep\(quick=False\)"),
    "raises": ("from memlab.grid import Sweep\n"
               "def sweep(quick=False):\n"
               "    return Sweep('s', 'calibrate', [{'budget_ns': undefined_name}])\n",
               r"line 3: NameError: name 'undefined_name' is not defined"),
    "not_a_sweep": ("def sweep(quick=False):\n"
                    "    return [42]\n",
                    r"sweep\(quick=True\) returned 42 \(int\), not a memlab.grid.Sweep"),
    "syntax": ("def sweep(quick=False:\n"
               "    pass\n",
               r"line 1: SyntaxError: "),
    "import": ("import memlab_no_such_module\n",
               r"line 1: ModuleNotFoundError: No module named 'memlab_no_such_module'"),
}


@pytest.mark.parametrize("kind", sorted(SCRIPT_MISTAKES))
def test_a_mistake_in_an_experiment_script_names_the_script_and_the_mistake(kind, tmp_path, capsys):
    """It was "internal error, a bug in memlab" (issue 27): the mistake is the script's, exit 2."""
    from memlab.cli import main

    text, message = SCRIPT_MISTAKES[kind]
    script = tmp_path / "my_experiment.py"
    script.write_text(text)
    assert main(["sweep", str(script), "--quick", "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"memlab: error: sweep script {script}: ") and re.search(message, err), err
    assert "a bug in memlab" not in err and not (tmp_path / "out").exists()


def test_script_main_of_a_sweep_without_quick_names_the_script(tmp_path):
    script = tmp_path / "standalone.py"
    script.write_text(SCRIPT_MISTAKES["no_quick"][0]
                      + "if __name__ == '__main__':\n"
                        "    from memlab.cli import script_main\n"
                        "    raise SystemExit(script_main(sweep))\n")
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "out"), "--no-progress"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"memlab: error: sweep script {script}: sweep() takes no quick argument")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# ---- the words a user reads (issue 38, item 4) ------------------------------------------------


def test_version_names_the_compiler_in_words():
    from memlab import _core

    result = run_cli("--version")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # argparse wraps the line at the terminal's width
    family = _core.build_info()["compiler_family"]
    assert re.search(rf"core built by .*{family}.* with -", text, re.IGNORECASE), text
    assert "gcc-compatible" not in text and "compiler_family" not in text


def test_merge_names_the_command_line_flag_for_duplicates(tmp_path, capsys):
    rows = [{"family": "f", "n": 1, "t": 1.0, "t_samples": [1.0]}]
    for name in ("a", "b"):
        Dataset(rows, {"param_names": ["n"]}).save(tmp_path / f"{name}.csv")
    args = ["merge", str(tmp_path / "m.csv"), str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert "duplicate point" in error and "pass --dedupe to keep the first" in error
    assert "dedupe=True" not in error
    assert main([*args, "--dedupe"]) == 0
    assert len(Dataset.load(tmp_path / "m.csv")) == 1


def test_unknown_parameter_names_the_family_not_the_class():
    result = run_cli("run", "chase", "working_set=1MiB")
    assert result.returncode == 2
    assert "unknown parameter 'working_set' of family 'chase'; did you mean 'working_set_bytes'?" in result.stderr
    assert "ChaseParams" not in result.stderr


def test_run_lists_values_shared_by_every_sample_apart_from_the_metrics():
    from memlab.cli import _summary
    from memlab.measure import Measurement

    samples = [{"ns_per_page": t, "GB_per_s": 4.0 / t, "granted_page_bytes": 4096.0, "huge_fraction": 0.0}
               for t in (1.0, 2.0, 4.0)]
    text = _summary(Measurement("region", {"region_bytes": 1 << 20}, samples, [], {}, "user", [], "ns_per_page"),
                    width=100)
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["ns_per_page", "GB_per_s"]
    assert lines[3] == "  same in every sample: granted_page_bytes=4096 huge_fraction=0"
    assert not any(line.split()[0] in ("granted_page_bytes", "huge_fraction") for line in lines)
    # one sample tells nothing about what varies: every metric keeps its line
    one = _summary(Measurement("region", {}, samples[:1], [], {}, "user", [], "ns_per_page"), width=100)
    assert "same in every sample" not in one and "granted_page_bytes       median 4096" in one


def test_run_prints_a_constant_primary_metric_on_its_line():
    from memlab.cli import _summary
    from memlab.measure import Measurement

    samples = [{"ns_per_page": 3.0, "elements": 8.0}] * 2
    lines = _summary(Measurement("f", {}, samples, [], {}, "user", [], "ns_per_page")).splitlines()
    assert lines[1].split()[:3] == ["ns_per_page", "median", "3"]
    assert lines[2] == "  same in every sample: elements=8"
