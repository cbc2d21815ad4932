"""experiments/parity.py: the one bare-C parity command runs every case and gives one table.

No timing threshold: the tiny mode measures nothing worth comparing; what is checked is the
table's shape, that every case of every family ran on both sides, the host columns, the
ratio's orientation on synthetic samples, and the refusals of bad input."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import pytest

import importlib.util

from conftest import EXPERIMENTS
from memlab.dataset import Dataset


def _load_parity():
    """experiments/parity.py as a module (registered: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location("experiment_parity", EXPERIMENTS / "parity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


parity = _load_parity()


def needs_compiler() -> None:
    if not shutil.which(parity.compiler().split()[0]):
        pytest.skip(f"no C compiler ({parity.compiler()}) to build the bare programs")
    if not shutil.which("taskset"):
        pytest.skip("no taskset (util-linux) for the pipe pipelines")


def run_script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXPERIMENTS / "parity.py"), *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    needs_compiler()
    out = tmp_path_factory.mktemp("parity") / "parity.csv"
    done = run_script("--tiny", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return done.stdout, Dataset.load(out)


def expected_cases() -> list[tuple[str, str]]:
    """Every (family, case) the script builds on this machine, from its own case list."""
    settings = parity.settings_for("tiny")
    bins = {name: "/nonexistent" for name in parity.PROGRAMS}  # building cases runs nothing
    cpu = max(os.sched_getaffinity(0))
    return [(c.family, c.name) for c in parity.build_cases(bins, settings, list(parity.FAMILIES), cpu)]


def test_tiny_run_gives_one_row_per_case_with_both_sides_measured(tiny):
    _, ds = tiny
    cases = expected_cases()
    assert [(row["family"], row["case"]) for row in ds.rows] == cases
    assert {family for family, _ in cases} >= {"chase", "bandwidth", "pipe", "clear", "system"}
    if len(os.sched_getaffinity(0)) >= 2:
        assert "core_to_core" in {family for family, _ in cases}
    for row in ds.rows:
        assert row["memlab_samples"] >= 1 and row["bare_samples"] >= 1, row["case"]
        assert row["memlab_median"] > 0 and row["bare_median"] > 0, row["case"]
        assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"], row["case"]
        assert row["load_average_min"] <= row["load_average_max"]


def test_every_family_and_level_is_covered(tiny):
    _, ds = tiny
    names = [row["case"] for row in ds.rows]
    for op in ("read", "write", "copy"):
        for level in ("L1d/2", "L2/2", "beyond LLC"):
            assert sum(op in n and level in n for n in names if n.startswith(op)) >= 1, (op, level)
    assert sum("vs one region in halves" in n for n in names) == 3
    rungs = [name for name, _ in parity.pipe.RUNGS]
    assert all(any(n.startswith(rung + ",") for n in names) for rung in rungs)
    assert any(n.startswith("spawn") for n in names) and any(n.startswith("execl") for n in names)
    cached = len(parity.clear.METHODS) if parity.sizes_from_sysfs().cached_clear_bytes else 0
    assert sum(row["family"] == "clear" for row in ds.rows) == 2 * len(parity.clear.METHODS) + cached
    assert sum(n.endswith("in the caches") for n in names) == cached


def test_on_cpu_ratio_is_present_exactly_where_both_sides_report_cpu_time(tiny):
    _, ds = tiny
    for row in ds.rows:
        has_cpu = row["family"] not in ("pipe", "core_to_core")
        assert math.isfinite(row["on_cpu_ratio"]) == has_cpu, row["case"]


def test_bandwidth_rows_inside_the_l1d_carry_the_port_limit_and_both_sides_fraction(tiny):
    stdout, ds = tiny
    facts = parity.bandwidth.host_facts()
    model = parity.machine_model.core_model(facts)
    l1d = parity.machine.cache_sizes(facts).get("L1d")
    width = parity.bandwidth.widest_width()
    for row in ds.rows:
        limited = row["family"] == "bandwidth" and "L1d/2" in row["case"] and model.known and l1d is not None
        assert math.isnan(row["port_limit_bytes_per_cycle"]) != limited, row["case"]
        if not limited:
            assert math.isnan(row["memlab_fraction_of_port_limit"]), row["case"]
            assert math.isnan(row["bare_fraction_of_port_limit"]), row["case"]
            continue
        op = row["case"].split()[0]
        assert row["port_limit_bytes_per_cycle"] == model.l1d_bytes_per_cycle(op, parity.bandwidth.VECTOR_BYTES[width])
        assert row["core_GHz"] > 0
        assert row["memlab_fraction_of_port_limit"] > 0 and row["bare_fraction_of_port_limit"] > 0
    line = [text for text in stdout.splitlines() if text.startswith("L1d port limit")]
    assert len(line) == 1
    share = ds.metadata["core_share"]
    if model.known and l1d is not None:
        assert model.name in line[0] and "memlab / bare" in line[0]
        # the thread's share of its core, measured once a round beside the cases
        assert f"of the {model.entry.integer_alus} integer ALUs" in line[0]
        assert share["chunks"] == parity.settings_for("tiny").core_share_chunks
        assert 0 < share["adds_per_cycle_median"] <= share["adds_per_cycle_p90"]
        assert share["integer_alus"] == model.entry.integer_alus
    else:
        assert "not given" in line[0] and share is None


def test_core_share_refuses_a_bad_chunk_count_and_prints_one_line_a_chunk(tmp_path):
    needs_compiler()
    binary = parity.compile_programs(tmp_path, ["core_share"])["core_share"]
    for bad in ([], ["0"], ["x"], ["1", "2"]):
        done = subprocess.run([binary, *bad], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith("usage:"), bad
    shares = parity.core_share_chunks(binary, 3, None)
    assert len(shares) == 3 and all(share > 0 for share in shares)


def test_core_share_text_names_the_alu_count_or_its_absence():
    assert "of the 6 integer ALUs" in parity.CoreShare([3.0], 0, 6).text()
    assert "gives no ALU count" in parity.CoreShare([3.0], 0, None).text()
    summary = parity.CoreShare([1.0, 2.0, 3.0, 4.0], 0, 4).summary()
    assert summary["adds_per_cycle_median"] == 2.5 and summary["adds_per_cycle_p90"] == 3.0


def test_port_limit_line_says_why_there_is_none():
    row = {"family": "bandwidth", "case": "read avx2, L1d/2 (16 KiB, 4k)", "port_limit_bytes_per_cycle": math.nan}
    unknown = {"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 1}
    assert "does not know this CPU (GenuineIntel family 6 model 1)" in parity.port_limit_line([row], unknown)
    zen3 = {"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 1}
    assert parity.port_limit_line([row], zen3) == "L1d port limit: not given: sysfs gives no L1d size."
    with_l1d = dict(zen3, caches=[{"level": 1, "type": "Data", "size_bytes": 32 << 10}])
    assert "no bandwidth case is inside the L1d" in parity.port_limit_line([row], with_l1d)
    assert parity.port_limit_line([dict(row, family="chase")], zen3) == ""


def test_rows_and_table_name_the_host(tiny):
    stdout, ds = tiny
    facts: dict = {}
    parity.machine.collect_cpu(facts)
    for row in ds.rows:
        assert row["cpu_vendor"] == facts.get("cpu_vendor")
        assert row["cpu_family"] == facts.get("cpu_family")
        assert row["cpu_model_number"] == facts.get("cpu_model_number")
    lines = stdout.splitlines()
    assert lines[0].startswith("Host: ") and f"family {facts.get('cpu_family')}" in lines[0]
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == len(ds) + 2
    assert {line.count("|") for line in table} == {10}
    assert ds.metadata["experiment"] == "parity" and ds.metadata["mode"] == "tiny"


def test_speed_ratio_is_memlab_over_bare_for_rates_and_inverted_for_times():
    assert parity.speed_ratio([9.0, 9.0, 9.0], [10.0, 10.0, 10.0], lower_is_better=False)[0] == pytest.approx(0.9)
    # 11 ns against 10 ns: memlab is slower, its speed 10/11 of the bare program's
    ratio, low, high = parity.speed_ratio([11.0, 11.0, 11.0], [10.0, 10.0, 10.0], lower_is_better=True)
    assert ratio == pytest.approx(10 / 11) and low == pytest.approx(10 / 11) and high == pytest.approx(10 / 11)
    ratio, low, high = parity.speed_ratio([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 3.0, 3.0, 4.0], False)
    assert ratio == pytest.approx(1.0) and low < 1.0 < high
    assert all(math.isnan(v) for v in parity.speed_ratio([], [1.0], False))


def test_case_texts_keep_only_the_cases_whose_name_contains_one():
    settings = parity.settings_for("tiny")
    bins = {name: "/nonexistent" for name in parity.PROGRAMS}
    every = parity.build_cases(bins, settings, ["clear", "system"], max(os.sched_getaffinity(0)))
    kept = parity.select_cases(every, ["vector, 2 MiB", "execl"])
    assert [c.name for c in kept] == [c.name for c in every if "vector, 2 MiB" in c.name or "execl" in c.name]
    assert len(kept) == 2
    assert parity.select_cases(every, []) == every


def test_bare_programs_compile_without_warnings(tmp_path):
    needs_compiler()
    for name in parity.PROGRAMS:
        done = subprocess.run(parity.compile_command(name, tmp_path), capture_output=True, text=True)
        assert done.returncode == 0 and "warning" not in done.stderr, (name, done.stderr)


@pytest.mark.parametrize("args, message", [
    (["--rounds", "0"], "--rounds=0 is outside 1 to 100"),
    (["--families", "chase,disk"], "disk not among"),
    (["--cpu", "4096"], "--cpu=4096 is not among the CPUs"),
    (["--quick", "--tiny"], "not allowed with argument"),
    (["--sysfs", "--hierarchy", "somewhere"], "not allowed with argument"),
    (["--families", "clear", "--case", "spawn"], "--case='spawn' is in no case name of clear"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    done = run_script(*args, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr and done.stdout == ""


def test_bandwidth_bare_copies_between_two_mappings_and_offset_halves(tmp_path):
    """The new layouts of bandwidth_bare: every one runs and reports positive rates."""
    needs_compiler()
    binary = parity.compile_programs(tmp_path, ["bandwidth_bare"])["bandwidth_bare"]
    for layout in ("halves", "apart", "offset=4160"):
        wall, on_cpu = parity.bandwidth_bare_samples(binary, "copy", "scalar", 1 << 16, 2, 1.0, None, "4k", layout)
        assert len(wall) == 2 and all(v > 0 for v in wall + on_cpu), layout
    refused = subprocess.run([binary, "copy", "scalar", "65536", "1", "1", "4k", "offset=3"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "offset" in refused.stderr


DRIVERS = ("chase_vs_bare", "bandwidth_vs_bare", "core_to_core_vs_bare", "pipes_standalone", "unixbench_vs_c")


@pytest.mark.parametrize("name", DRIVERS)
def test_each_older_driver_runs_its_programs_through_parity(name, monkeypatch):
    """The drivers import their compiling and running from parity.py (as `python experiments/<name>.py`
    does, with experiments/ on the path) and compile only what parity.py's table lists."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    had_parity = "parity" in sys.modules
    try:
        spec = importlib.util.spec_from_file_location(f"experiment_{name}", EXPERIMENTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        shared = sys.modules["parity"]
        assert callable(module.main)
        assert shared.compile_programs in vars(module).values()
    finally:
        if not had_parity:
            sys.modules.pop("parity", None)


def _synthetic_hierarchy(last_edge: int):
    L = parity.hierarchy.Level
    return parity.hierarchy.Hierarchy(
        (L("L1d", 26000, 32768, 1.2, None, "L1d", 32768), L("L2", 330000, 409600, 4.0, None, "L2", 524288),
         L("L3", last_edge, 2 * last_edge, 12.0, None, "L3", 32 << 20)),
        95.0, ((4096, 1.2), (1 << 27, 95.0)), sysfs={"L1d": 32768, "L2": 524288, "L3": 32 << 20})


def test_sizes_inside_the_caches_come_from_the_measured_edges_not_sysfs():
    """A guest whose sysfs says 32 MiB of L3 but whose curve ends the last cache at 1.6 MiB has no
    clear "in the caches" (the clear family's smallest region is 2 MiB) and says why; a 40 MiB
    last cache gives 20 MiB."""
    small = parity.sizes_from_hierarchy(_synthetic_hierarchy(1666000), "kept")
    assert (small.l1d_half, small.cached_clear_bytes) == (12288, None)
    assert "smallest region (2 MiB)" in small.note
    assert 2 * 26000 <= small.l2_half <= 330000
    assert "L3 1 MiB" in small.source and "kept" in small.source
    large = parity.sizes_from_hierarchy(_synthetic_hierarchy(40 << 20))
    assert large.cached_clear_bytes == 20 << 20 and large.note == ""
    sysfs = parity.sizes_from_sysfs({"L1d": 48 << 10, "L2": 1 << 20, "L3": 32 << 20, "L1i": 32 << 10})
    assert (sysfs.l1d_half, sysfs.l2_half, sysfs.cached_clear_bytes) == (24 << 10, 512 << 10, 16 << 20)
    # an L2 edge measured barely above the L1d's: the L2 case stays at twice the L1d, inside the L2
    L = parity.hierarchy.Level
    squeezed = parity.hierarchy.Hierarchy((L("L1d", 32768, 40960, 1.0, None, "L1d", 32768),
                                           L("L2", 81920, 102400, 4.0, None, "L2", 524288)), 90.0, ())
    assert parity.sizes_from_hierarchy(squeezed).l2_half == 65536
    # no level measured: sysfs's sizes stand in
    bare = parity.hierarchy.Hierarchy((), 90.0, (), sysfs={"L1d": 32768, "L2": 524288, "L3": 8 << 20})
    assert parity.sizes_from_hierarchy(bare).cached_clear_bytes == 4 << 20


def _keep(folder, found) -> None:
    current = parity.hierarchy.identity(parity.hierarchy.collect(include_core=False))["fingerprint_id"]
    (folder / parity.hierarchy.CACHE_FILE).write_text(parity.hierarchy.json.dumps(
        {"format": parity.hierarchy.FORMAT, "fingerprint_id": current, "hierarchy": found.to_dict()}))


def test_a_kept_hierarchy_sizes_the_run_and_the_table_says_so(tmp_path):
    """--hierarchy DIR with a hierarchy.json of this machine: no measurement, its edges size the
    cases inside the caches, and the table's second line names them."""
    needs_compiler()
    _keep(tmp_path, _synthetic_hierarchy(6 << 20))
    out = tmp_path / "parity.csv"
    done = run_script("--tiny", "--families", "clear,chase", "--case", "in the caches", "--case", "L1d",
                      "--hierarchy", str(tmp_path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    ds = Dataset.load(out)
    names = [row["case"] for row in ds.rows]
    assert sum("over 2 MiB THP, in the caches" in name for name in names) == len(parity.clear.METHODS), names
    assert "random, L1d/2 (12 KiB)" in names
    assert "Sizes inside the caches: this machine's measured caches (L1d 25 KiB" in done.stdout
    assert ds.metadata["sizes"]["cached_clear_bytes"] == 2 << 20


def test_a_case_text_naming_a_size_is_checked_against_the_measured_sizes(tmp_path):
    """A text naming a size the measured caches give and sysfs does not is kept (the kept
    hierarchy's L1d/2 is 12 KiB); one naming a size neither gives exits 2, naming the sizes."""
    needs_compiler()
    _keep(tmp_path, _synthetic_hierarchy(6 << 20))
    kept = run_script("--tiny", "--families", "chase", "--case", "L1d/2 (12 KiB)", "--hierarchy", str(tmp_path))
    assert kept.returncode == 0, kept.stderr
    assert [line for line in kept.stdout.splitlines() if line.startswith("| chase")][0].startswith(
        "| chase | random, L1d/2 (12 KiB)")
    refused = run_script("--tiny", "--families", "chase", "--case", "L1d/2 (12 KiB)", "--case", "(13 KiB)",
                         "--hierarchy", str(tmp_path))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--case='(13 KiB)' is in no case name of chase at the sizes of this machine's measured caches" \
        in refused.stderr


def test_a_last_cache_too_small_for_the_clear_family_is_said(tmp_path):
    """Half a 1.6 MiB last cache is below the clear family's 2 MiB: the table says the clear in the
    caches is not measured, and asking for only that case exits 2 saying why."""
    needs_compiler()
    _keep(tmp_path, _synthetic_hierarchy(1666000))
    done = run_script("--tiny", "--families", "clear", "--case", "memset, 2 MiB", "--hierarchy", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Clear in the caches: not measured" in done.stdout and "in the caches |" not in done.stdout
    refused = run_script("--tiny", "--families", "clear", "--case", "in the caches", "--hierarchy", str(tmp_path))
    assert refused.returncode == 2 and "smallest region (2 MiB)" in refused.stderr and refused.stdout == ""


def test_docstring_examples():
    import doctest
    result = doctest.testmod(parity)
    assert result.attempted >= 5 and result.failed == 0


def test_a_hierarchy_folder_that_is_a_file_exits_2_with_one_line(tmp_path):
    """--hierarchy naming a file, not a folder: refused before anything is measured or compiled."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file")
    done = run_script("--quick", "--families", "chase", "--hierarchy", str(blocked), timeout=60)
    assert done.returncode == 2 and "--hierarchy:" in done.stderr and done.stdout == ""
