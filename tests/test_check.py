"""memlab.check: collectors on fake /proc and /sys trees, verdicts, tune and reset.

Every collector takes the file-system root, so these tests build the files
a machine would have under tmp_path and hold on any host. The tests of
tune/reset on this machine's real settings skip, with the reason, where
the machine lacks a setting or the test does not run as root, and write
back whatever they changed even when they fail.
"""

import importlib
import json
import os
import sys

import pytest

import memlab
from memlab.check import (
    ON_CPU_MIN_FRACTION,
    STEAL_MAX_FRACTION,
    TUNABLE_SETTINGS,
    CheckReport,
    check,
    collect_aslr,
    collect_blas,
    collect_boost,
    collect_cpufreq,
    collect_isolation,
    collect_load,
    collect_perf,
    collect_smt,
    collect_steal,
    collect_thp,
    conditions_warning,
    judge,
    missing_settings,
    read_cpu_times,
    reset,
    steal_fraction,
    tune,
)

# memlab.check is the function; the module is reached through importlib
check_module = importlib.import_module("memlab.check")

CPU = "sys/devices/system/cpu"
THP = "sys/kernel/mm/transparent_hugepage"


def make_tree(base, files):
    """Write {relative path: text} under base; return base as a string root."""
    for relative, text in files.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(base)


def stat_text(*lines):
    return "\n".join(lines) + "\nintr 0\nctxt 0\n"


TUNED_MACHINE = {
    f"{CPU}/online": "0-3\n",
    **{f"{CPU}/cpu{i}/cpufreq/scaling_governor": "performance\n" for i in range(4)},
    f"{CPU}/cpu0/cpufreq/scaling_driver": "intel_pstate\n",
    f"{CPU}/cpu0/cpufreq/scaling_available_governors": "performance powersave\n",
    f"{CPU}/intel_pstate/no_turbo": "1\n",
    f"{CPU}/smt/control": "off\n",
    f"{CPU}/smt/active": "0\n",
    f"{CPU}/isolated": "3\n",
    f"{CPU}/nohz_full": "3\n",
    "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=3 nohz_full=3 rcu_nocbs=3 quiet\n",
    "proc/loadavg": "0.20 0.15 0.10 1/250 4242\n",
    "proc/stat": stat_text("cpu  1000 0 500 8000 10 0 5 0 0 0", "cpu0 250 0 125 2000 2 0 1 0 0 0"),
    f"{THP}/enabled": "always [madvise] never\n",
    f"{THP}/defrag": "always defer defer+madvise [madvise] never\n",
    f"{THP}/khugepaged/defrag": "0\n",
    f"{THP}/khugepaged/pages_to_scan": "4096\n",
    f"{THP}/khugepaged/scan_sleep_millisecs": "10000\n",
    "proc/sys/kernel/randomize_va_space": "0\n",
    "proc/sys/kernel/perf_event_paranoid": "1\n",
    "proc/sys/kernel/perf_event_max_sample_rate": "1\n",
    "proc/sys/kernel/perf_cpu_time_max_percent": "25\n",
    "proc/sys/kernel/nmi_watchdog": "0\n",
    "proc/meminfo": "MemTotal:       16384000 kB\nMemAvailable:   12000000 kB\n",
    "proc/cpuinfo": "processor\t: 0\nmodel name\t: Fake CPU 9000\nflags\t\t: fpu sse2 avx2\n\n",
    "proc/sys/kernel/osrelease": "6.1.0-fake\n",
}


@pytest.fixture
def tuned(tmp_path):
    return make_tree(tmp_path / "tuned", TUNED_MACHINE)


@pytest.fixture
def empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return str(tmp_path / "empty")


# --- collectors: a fake tree gives the keys, an empty one none ---------------


@pytest.mark.parametrize("collector", [
    collect_cpufreq, collect_boost, collect_smt, collect_isolation, collect_load,
    collect_thp, collect_aslr, collect_perf,
])
def test_a_missing_file_is_an_absent_key(collector, empty):
    facts = {}
    collector(facts, root=empty)
    assert facts == {}


def test_collectors_read_a_tuned_machine(tuned):
    facts = {}
    for collector in (collect_cpufreq, collect_boost, collect_smt, collect_isolation,
                      collect_load, collect_thp, collect_aslr, collect_perf):
        collector(facts, root=tuned)
    assert facts["cpufreq_governors"] == {f"cpu{i}": "performance" for i in range(4)}
    assert facts["cpufreq_driver"] == "intel_pstate"
    assert facts["cpufreq_available_governors"] == ["performance", "powersave"]
    assert facts["boost_enabled"] is False
    assert facts["boost_control"].endswith("intel_pstate/no_turbo")
    assert facts["smt_control"] == "off" and facts["smt_active"] is False
    assert facts["isolated_cpus"] == "3" and facts["nohz_full_cpus"] == "3"
    assert facts["cmdline_isolcpus"] == "3" and facts["cmdline_rcu_nocbs"] == "3"
    assert (facts["load_1min"], facts["load_5min"], facts["load_15min"]) == (0.2, 0.15, 0.1)
    assert (facts["runnable_tasks"], facts["total_tasks"], facts["cpus_online"]) == (1, 250, 4)
    assert facts["thp_enabled"] == "madvise" and facts["thp_defrag"] == "madvise"
    assert facts["khugepaged_defrag"] == 0 and facts["khugepaged_pages_to_scan"] == 4096
    assert facts["aslr"] == 0
    assert facts["perf_event_paranoid"] == 1 and facts["perf_event_max_sample_rate"] == 1
    assert facts["nmi_watchdog"] == 0


def test_a_tuned_machine_has_no_warning(tuned):
    report = check(tuned, planned_bytes=1 << 30, steal_window_seconds=0)
    assert report.warnings == []
    verdicts = {f.name: f.verdict for f in report.findings}
    for name in ("cpu_governor", "boost", "smt", "isolated_cpus", "load", "thp", "khugepaged",
                 "aslr", "perf_sample_rate", "memory"):
        assert verdicts[name] == "ok", report[name]
    assert verdicts["steal"] == "info"  # no window measured


def test_an_empty_tree_gives_info_for_everything(empty):
    report = check(empty, steal_window_seconds=0)
    assert {f.verdict for f in report.findings} == {"info"}
    assert report["cpu_governor"].value == "not exposed"
    assert all(f.detail for f in report.findings)


def test_cmdline_options_after_the_init_separator_are_ignored(tmp_path):
    root = make_tree(tmp_path, {"proc/cmdline": "quiet nohz_full=1 -- isolcpus=1\n"})
    facts = {}
    collect_isolation(facts, root=root)
    assert facts == {"cmdline_nohz_full": "1"}


# --- one subject at a time ---------------------------------------------------


def test_governor_other_than_performance_warns_with_the_fix(tmp_path):
    root = make_tree(tmp_path, {
        f"{CPU}/cpu0/cpufreq/scaling_governor": "powersave\n",
        f"{CPU}/cpu1/cpufreq/scaling_governor": "performance\n",
    })
    finding = check(root, steal_window_seconds=0)["cpu_governor"]
    assert finding.verdict == "warning"
    assert finding.value == "performance (1 CPUs), powersave (1 CPUs)"
    assert "memlab check --tune" in finding.fix and "scaling_governor" in finding.fix


@pytest.mark.parametrize("path,text,enabled,off_command", [
    (f"{CPU}/intel_pstate/no_turbo", "0", True, "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"),
    (f"{CPU}/intel_pstate/no_turbo", "1", False, None),
    (f"{CPU}/cpufreq/boost", "1", True, "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"),
    (f"{CPU}/cpufreq/boost", "0", False, None),
])
def test_boost(tmp_path, path, text, enabled, off_command):
    root = make_tree(tmp_path, {path: text + "\n"})
    facts = {}
    collect_boost(facts, root=root)
    assert facts["boost_enabled"] is enabled
    finding = judge(facts)[1]
    assert finding.name == "boost"
    assert finding.verdict == ("warning" if enabled else "ok")
    if off_command:
        assert off_command in finding.fix


def test_smt_active_is_reported_with_the_switch(tmp_path):
    root = make_tree(tmp_path, {f"{CPU}/smt/control": "on\n", f"{CPU}/smt/active": "1\n"})
    finding = check(root, steal_window_seconds=0)["smt"]
    assert finding.verdict == "info" and finding.value == "on, active"
    assert finding.fix == "echo off | sudo tee /sys/devices/system/cpu/smt/control"
    root = make_tree(tmp_path / "vm", {f"{CPU}/smt/control": "notsupported\n", f"{CPU}/smt/active": "0\n"})
    finding = check(root, steal_window_seconds=0)["smt"]
    assert finding.verdict == "ok"
    assert finding.value == "not supported by the CPU (or not exposed by the hypervisor), inactive"
    assert "notsupported" not in check(root, steal_window_seconds=0).format()


def test_no_isolated_cpu_suggests_the_kernel_options(tmp_path):
    root = make_tree(tmp_path, {f"{CPU}/online": "0-7\n", f"{CPU}/isolated": "\n",
                                "proc/cmdline": "quiet\n"})
    finding = check(root, steal_window_seconds=0)["isolated_cpus"]
    assert finding.verdict == "info" and finding.value == "none"
    assert finding.fix.startswith("add isolcpus=7 nohz_full=7 rcu_nocbs=7")


@pytest.mark.parametrize("loadavg,verdict", [
    ("1.70 1.50 1.00 3/200 99", "warning"),   # the loaded 2-CPU VM
    ("0.40 0.50 0.60 1/200 99", "ok"),
    ("0.10 0.10 0.10 4/200 99", "warning"),   # 3 others runnable right now on 2 CPUs
])
def test_load(tmp_path, loadavg, verdict):
    root = make_tree(tmp_path, {"proc/loadavg": loadavg + "\n", f"{CPU}/online": "0-1\n"})
    finding = check(root, steal_window_seconds=0)["load"]
    assert finding.verdict == verdict, finding
    assert "on 2 CPUs" in finding.value


def test_read_cpu_times_and_steal_fraction(tmp_path):
    root = make_tree(tmp_path, {"proc/stat": stat_text("cpu  1 2 3 4 5 6 7 8 9 10",
                                                       "cpu0 1 2 3 4 5 6 7 8 0 0",
                                                       "cpu1 1 2 3 4")})
    times = read_cpu_times(root)
    assert times["cpu"] == (1, 2, 3, 4, 5, 6, 7, 8)
    assert times["cpu1"] == (1, 2, 3, 4, 0, 0, 0, 0)  # an old kernel without steal
    after = {"cpu": (21, 2, 3, 84, 5, 6, 7, 18)}  # 20 user ticks, 10 stolen, 80 idle
    assert steal_fraction(times, after) == pytest.approx(10 / 30)
    assert steal_fraction(times, after, min_busy_ticks=31) is None  # too short a window
    assert steal_fraction(times, after, cpu="cpu7") is None
    assert steal_fraction(times, times) is None
    assert read_cpu_times(str(tmp_path / "nowhere")) == {}


@pytest.mark.parametrize("stolen_ticks,verdict", [(10, "warning"), (1, "ok")])
def test_steal_is_measured_over_a_busy_window(tmp_path, stolen_ticks, verdict):
    root = make_tree(tmp_path, {"proc/stat": stat_text("cpu  1000 0 0 1000 0 0 0 20")})

    def fake_wait(seconds):  # 100 ticks of work pass, and some ticks stolen on top
        assert seconds == 0.5
        (tmp_path / "proc/stat").write_text(
            stat_text(f"cpu  1100 0 0 1100 0 0 0 {20 + stolen_ticks}"))

    facts = {}
    collect_steal(facts, root, window_seconds=0.5, wait=fake_wait)
    assert facts["steal_fraction"] == pytest.approx(stolen_ticks / (100 + stolen_ticks), abs=1e-6)
    assert facts["steal_window_seconds"] == 0.5
    assert facts["steal_total_fraction"] == pytest.approx(20 / 1020, abs=1e-6)
    finding = judge(facts)[5]
    assert finding.name == "steal" and finding.verdict == verdict
    if verdict == "warning":
        assert "for 9.1% of the time" in finding.detail and finding.fix == ""


def test_an_idle_window_gives_no_steal_figure(tmp_path):
    root = make_tree(tmp_path, {"proc/stat": stat_text("cpu  1000 0 0 1000 0 0 0 20")})

    def idle_wait(seconds):  # 3 busy ticks: too few to give a share
        (tmp_path / "proc/stat").write_text(stat_text("cpu  1002 0 0 1100 0 0 0 21"))

    facts = {}
    collect_steal(facts, root, window_seconds=0.1, wait=idle_wait)
    assert "steal_fraction" not in facts and "steal_total_fraction" in facts
    assert judge(facts)[5].verdict == "info"


@pytest.mark.parametrize("enabled,verdict", [
    ("always [madvise] never", "ok"),
    ("[always] madvise never", "warning"),
    ("always madvise [never]", "warning"),
])
def test_thp(tmp_path, enabled, verdict):
    root = make_tree(tmp_path, {f"{THP}/enabled": enabled + "\n", f"{THP}/khugepaged/defrag": "1\n"})
    report = check(root, steal_window_seconds=0)
    assert report["thp"].verdict == verdict
    if verdict == "warning":
        assert report["thp"].fix == "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled"
    khugepaged = report["khugepaged"]
    if "never" in enabled and "[never]" in enabled:
        assert khugepaged.verdict == "ok"
    else:
        assert khugepaged.verdict == "info" and "khugepaged/defrag" in khugepaged.fix


def test_aslr(tmp_path):
    root = make_tree(tmp_path, {"proc/sys/kernel/randomize_va_space": "2\n"})
    finding = check(root, steal_window_seconds=0)["aslr"]
    assert finding.verdict == "info" and finding.value == "on (2)"
    assert "setarch -R" in finding.fix


def test_counters_verdicts():
    def counters(**reasons):
        return {name: {"available": not reason, "reason": reason} for name, reason in reasons.items()}

    all_open = judge({"perf_event_paranoid": 1, "counters": counters(cycles="", page_faults="")})[9]
    assert all_open.name == "counters" and all_open.verdict == "ok"
    assert all_open.value == "paranoid=1; open: cycles page_faults"
    vm = judge({"perf_event_paranoid": 2,
                "counters": counters(cycles="event not supported (ENOENT)", page_faults="")})[9]
    assert vm.verdict == "info" and "missing cycles: event not supported (ENOENT)" in vm.detail
    denied = judge({"perf_event_paranoid": 3,
                    "counters": counters(cycles="permission denied (EACCES)", page_faults="")})[9]
    assert denied.verdict == "warning"
    assert denied.fix == "echo 1 | sudo tee /proc/sys/kernel/perf_event_paranoid"
    unprobed = judge({"perf_event_paranoid": 3, "euid": 1000})[9]
    assert unprobed.verdict == "warning" and "forbids counting" in unprobed.detail


def test_counters_on_this_machine_are_reported():
    report = check(steal_window_seconds=0, blas=False)
    counters = report.facts["counters"]
    assert "page_faults" in counters and all("available" in info for info in counters.values())
    assert report["counters"].verdict in ("ok", "info", "warning")
    missing = [name for name, info in counters.items() if not info["available"]]
    for name in missing:
        assert name in report["counters"].detail


def test_sample_rate(tmp_path):
    root = make_tree(tmp_path, {"proc/sys/kernel/perf_event_max_sample_rate": "100000\n",
                                "proc/sys/kernel/nmi_watchdog": "1\n"})
    finding = check(root, steal_window_seconds=0)["perf_sample_rate"]
    assert finding.verdict == "info" and finding.value == "100000 samples/s max, NMI watchdog on"
    assert "memlab check --tune" in finding.fix


@pytest.mark.parametrize("planned_bytes,verdict", [(None, "info"), (1 << 30, "ok"), (11 << 30, "warning")])
def test_memory_against_the_planned_working_set(tuned, planned_bytes, verdict):
    # the tuned tree has 12000000 kB (11.4 GiB) available
    finding = check(tuned, planned_bytes=planned_bytes, steal_window_seconds=0)["memory"]
    assert finding.verdict == verdict
    assert finding.value.startswith("11.4 GiB available of 15.6 GiB")


def test_blas_override_is_recorded_and_warned_never_changed():
    environ = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1", "PATH": "/bin"}
    before = dict(os.environ)
    facts = {}
    collect_blas(facts, environ)
    assert facts["blas_environment"] == {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}
    finding = judge(facts)[12]
    assert finding.name == "blas" and finding.verdict == "warning"
    assert "OPENBLAS_CORETYPE=Haswell overrides the kernel" in finding.detail
    assert finding.fix.startswith("env -u OPENBLAS_CORETYPE memlab")
    assert dict(os.environ) == before


def test_blas_libraries_through_threadpoolctl():
    pytest.importorskip("threadpoolctl", reason="threadpoolctl is in the test extra")
    facts = {}
    collect_blas(facts, {})
    assert isinstance(facts["blas_libraries"], list)
    for library in facts["blas_libraries"]:
        assert library["internal_api"] and "num_threads" in library
    finding = judge(facts)[12]
    assert finding.verdict in ("ok", "info") and finding.fix == ""


def test_missing_threadpoolctl_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import now raises ImportError
    facts = {}
    collect_blas(facts, {"OPENBLAS_CORETYPE": "Haswell"})
    assert facts["blas_error"] == "threadpoolctl is not installed"
    assert "blas_libraries" not in facts
    finding = judge(facts)[12]
    assert finding.verdict == "warning"  # the override is still known and still matters
    assert "pip install threadpoolctl" in finding.fix
    facts = {}
    collect_blas(facts, {})
    assert judge(facts)[12].verdict == "info"


# --- the report ----------------------------------------------------------------


def test_report_text_and_data(tmp_path):
    root = make_tree(tmp_path, dict(TUNED_MACHINE, **{f"{THP}/enabled": "[always] madvise never\n"}))
    report = check(root, steal_window_seconds=0)
    assert isinstance(report, CheckReport)
    text = report.format()
    assert text.splitlines()[0] == "memlab check: Fake CPU 9000, 4 CPUs, kernel 6.1.0-fake"
    assert text.splitlines()[1].startswith("1 warning (thp), ")
    assert "WARNING  transparent huge pages" in text
    assert "fix: echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["warnings"] == ["thp"]
    assert data["facts"]["thp_enabled"] == "always"
    assert {f["name"] for f in data["findings"]} >= {"cpu_governor", "steal", "blas"}
    with pytest.raises(KeyError, match="no finding named 'nope'"):
        report["nope"]


def test_check_on_this_machine_runs_and_measures_steal():
    report = check(steal_window_seconds=0.2)  # at least 20 busy ticks: this CPU spins
    assert report.facts["steal_window_seconds"] == 0.2
    assert 0.0 <= report.facts["steal_fraction"] <= 1.0
    assert report["steal"].verdict in ("ok", "warning")


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"planned_bytes=-1 must be a non-negative"):
        check(planned_bytes=-1)
    with pytest.raises(ValueError, match=r"steal_window_seconds=99 is outside \[0, 60\]"):
        check(steal_window_seconds=99)


def test_conditions_warning():
    assert conditions_warning(0.95, 0.0) == ""
    assert conditions_warning(None, None) == ""
    assert conditions_warning(float("nan"), float("nan")) == ""
    assert conditions_warning(0.5, 0.03) == "on CPU 50% of its wall time (below 90%); steal time 3.0% (above 2%)"
    assert conditions_warning(ON_CPU_MIN_FRACTION, STEAL_MAX_FRACTION) == ""


# --- tune and reset on fake trees ---------------------------------------------


def untuned_tree(base):
    return make_tree(base, {
        f"{CPU}/cpu0/cpufreq/scaling_governor": "powersave\n",
        f"{CPU}/cpu1/cpufreq/scaling_governor": "schedutil\n",
        f"{CPU}/cpufreq/boost": "1\n",
        "proc/sys/kernel/perf_event_max_sample_rate": "100000\n",
    })


def read(root, relative):
    with open(os.path.join(root, relative)) as handle:
        return handle.read().strip()


def test_tune_saves_then_reset_restores(tmp_path):
    root = untuned_tree(tmp_path / "machine")
    state = str(tmp_path / "state" / "tuned.json")
    changes = tune(root, state_path=state)
    assert [(c.setting, c.before, c.after) for c in changes] == [
        ("governor", "powersave", "performance"), ("governor", "schedutil", "performance"),
        ("boost", "1", "0"), ("perf_sample_rate", "100000", "1"),
    ]
    assert read(root, f"{CPU}/cpu1/cpufreq/scaling_governor") == "performance"
    assert read(root, f"{CPU}/cpufreq/boost") == "0"
    assert read(root, "proc/sys/kernel/perf_event_max_sample_rate") == "1"
    saved = json.loads(open(state).read())["saved"]
    assert saved["/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"] == "powersave"
    # a second tune keeps the machine's own values, not the tuned ones
    tune(root, state_path=state)
    assert json.loads(open(state).read())["saved"] == saved
    restored = reset(root, state_path=state)
    assert {(c.path, c.after) for c in restored} == set(saved.items())
    assert read(root, f"{CPU}/cpu0/cpufreq/scaling_governor") == "powersave"
    assert read(root, f"{CPU}/cpu1/cpufreq/scaling_governor") == "schedutil"
    assert read(root, f"{CPU}/cpufreq/boost") == "1"
    assert read(root, "proc/sys/kernel/perf_event_max_sample_rate") == "100000"
    assert not os.path.exists(state)
    assert reset(root, state_path=state) == []  # nothing tuned: nothing to do


@pytest.mark.parametrize("saved, error", [
    ({"/etc/passwd": "root::0:0::/root:/bin/sh"}, r"names '/etc/passwd', which is not a setting memlab tunes"),
    ({"/sys/devices/system/cpu/cpufreq/boost": "1\nroot"}, r"holds \"1\\nroot\" for .*boost, not a setting's value"),
    ({"/sys/devices/system/cpu/cpufreq/boost": 1}, r"holds 1 for .*boost, not a setting's value"),
])
def test_reset_writes_only_what_tune_would_write(tmp_path, saved, error):
    """reset runs as root and writes what the state file says: a state file someone else changed
    (a --state in a shared directory) must not make it write another file, or another value."""
    root = untuned_tree(tmp_path / "machine")
    state = tmp_path / "tuned.json"
    state.write_text(json.dumps({"saved": saved}))
    before = read(root, f"{CPU}/cpufreq/boost")
    with pytest.raises(ValueError, match=error):
        reset(root, state_path=str(state))
    with pytest.raises(ValueError, match=error):
        tune(root, state_path=str(state))
    assert read(root, f"{CPU}/cpufreq/boost") == before and state.exists()


@pytest.mark.parametrize("saved, error", [
    ({"/sys/devices/system/cpu/cpufreq/boost": "7"}, r"holds \"7\" for .*boost, which tune never reads there"),
    ({"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "userspace"},
     r"holds \"userspace\" for .*cpu0/cpufreq/scaling_governor, which tune never reads there"),
    ({"/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "1"}, r"holds \"1\" for .*scaling_governor"),
    ({"/proc/sys/kernel/perf_event_max_sample_rate": "0"}, r"holds \"0\" for .*perf_event_max_sample_rate"),
    ({"/proc/sys/kernel/perf_event_max_sample_rate": "-1"}, r"holds \"-1\" for .*perf_event_max_sample_rate"),
    ({"/proc/sys/kernel/perf_event_max_sample_rate": "99999999999"}, r"holds \"99999999999\" for"),
])
def test_reset_writes_only_a_value_tune_could_have_read_there(tmp_path, saved, error):
    """The value pattern let reset write any short word or number into a tunable: only the values
    the setting itself takes (cpu0 offers performance and powersave here; boost is 0 or 1; a
    sample rate a positive int) could have been read there by tune (issue 27)."""
    root = untuned_tree(tmp_path / "machine")
    make_tree(tmp_path / "machine", {f"{CPU}/cpu0/cpufreq/scaling_available_governors": "performance powersave\n"})
    state = tmp_path / "tuned.json"
    state.write_text(json.dumps({"saved": saved}))
    before = {relative: read(root, relative) for relative in (f"{CPU}/cpufreq/boost",
                                                              f"{CPU}/cpu0/cpufreq/scaling_governor",
                                                              f"{CPU}/cpu1/cpufreq/scaling_governor",
                                                              "proc/sys/kernel/perf_event_max_sample_rate")}
    with pytest.raises(ValueError, match=error):
        reset(root, state_path=str(state))
    assert {relative: read(root, relative) for relative in before} == before and state.exists()


@pytest.mark.parametrize("kind", ["fifo", "zero", "directory", "large"])
def test_a_state_file_that_is_not_a_small_regular_file_is_refused_at_once(tmp_path, kind):
    """A FIFO blocked reset forever, /dev/zero was read without end (issue 27)."""
    root = untuned_tree(tmp_path / "machine")
    state = tmp_path / "tuned.json"
    if kind == "fifo":
        os.mkfifo(state)  # nobody writes to it: opening it for reading would block
        expected = "is a FIFO"
    elif kind == "zero":
        state = "/dev/zero"
        expected = "is a device"
    elif kind == "directory":
        state.mkdir()
        expected = "is a directory"
    else:
        state.write_text(json.dumps({"saved": {}, "padding": "x" * (2 << 20)}))
        expected = r"is 2\.0 MiB; a tune state is at most 1 MiB"
    for action in (reset, tune):
        with pytest.raises(ValueError, match=rf"tune state file {state} {expected}"):
            action(root, state_path=str(state))
    assert read(root, f"{CPU}/cpufreq/boost") == "1"


def test_the_state_file_is_written_without_following_a_planted_link(tmp_path):
    """The old temporary name was the state file's name plus the PID, opened following links."""
    root = untuned_tree(tmp_path / "machine")
    victim = tmp_path / "victim"
    victim.write_text("secret")
    state = tmp_path / "run" / "tuned.json"
    state.parent.mkdir()
    for pid in range(os.getpid() - 5, os.getpid() + 50):
        os.symlink(victim, f"{state}.tmp{pid}")
    tune(root, settings=["boost"], state_path=str(state))
    assert victim.read_text() == "secret"
    assert json.loads(state.read_text())["saved"] == {"/sys/devices/system/cpu/cpufreq/boost": "1"}
    assert oct(os.stat(state).st_mode & 0o777) == oct(0o600)
    state.unlink()
    victim.write_text('{"saved": {}}')
    os.symlink(victim, state)  # the state file itself a link: refused, not written through
    with pytest.raises(ValueError, match="symbolic link"):
        tune(root, settings=["boost"], state_path=str(state))
    assert victim.read_text() == '{"saved": {}}' and os.path.islink(state)


def test_tune_skips_a_value_reset_could_not_restore(tmp_path):
    root = make_tree(tmp_path / "machine", {f"{CPU}/cpufreq/boost": "on; off\n"})
    (change,) = tune(root, settings=["boost"], state_path=str(tmp_path / "tuned.json"))
    assert "is not one reset could restore" in change.skipped
    assert read(root, f"{CPU}/cpufreq/boost") == "on; off" and not (tmp_path / "tuned.json").exists()


def test_tune_uses_the_default_state_file_under_root(tmp_path):
    root = untuned_tree(tmp_path)
    tune(root, settings=["boost"])
    assert os.path.exists(os.path.join(root, "run/memlab/tuned.json"))
    reset(root)
    assert read(root, f"{CPU}/cpufreq/boost") == "1"


def test_tune_skips_what_the_machine_lacks(tmp_path, empty):
    changes = tune(empty, state_path=str(tmp_path / "s.json"))
    assert [c.setting for c in changes] == list(TUNABLE_SETTINGS)
    assert all(c.skipped for c in changes)
    assert "no cpufreq scaling_governor" in str(changes[0])
    assert not os.path.exists(tmp_path / "s.json")  # nothing changed, nothing saved


def test_tune_bad_input(tmp_path):
    root = untuned_tree(tmp_path / "m")
    with pytest.raises(ValueError, match="setting='turbo' is not one of governor, boost, perf_sample_rate"):
        tune(root, settings=["turbo"], state_path=str(tmp_path / "s.json"))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    with pytest.raises(ValueError, match="cannot be read"):
        tune(root, state_path=str(corrupt))
    with pytest.raises(ValueError, match="cannot be read"):
        reset(root, state_path=str(corrupt))


def test_tune_and_reset_need_root(monkeypatch):
    monkeypatch.setattr(check_module.os, "geteuid", lambda: 1000)
    with pytest.raises(PermissionError, match="--tune needs root"):
        tune()
    with pytest.raises(PermissionError, match="--reset needs root"):
        reset()


def test_a_refused_write_keeps_the_saved_values(tmp_path, monkeypatch):
    root = untuned_tree(tmp_path / "m")
    state = str(tmp_path / "s.json")
    write = check_module._write_setting

    def refusing(root_, path, value):  # the kernel refuses a sysctl as EINVAL
        if path.endswith("perf_event_max_sample_rate"):
            raise OSError(22, "Invalid argument")
        write(root_, path, value)

    monkeypatch.setattr(check_module, "_write_setting", refusing)
    with pytest.raises(OSError, match="writing 1 to /proc/sys/kernel/perf_event_max_sample_rate "
                                      "failed: Invalid argument; the values replaced so far are in"):
        tune(root, state_path=state)
    monkeypatch.setattr(check_module, "_write_setting", write)
    assert "/proc/sys/kernel/perf_event_max_sample_rate" in json.loads(open(state).read())["saved"]
    reset(root, state_path=state)
    assert read(root, "proc/sys/kernel/perf_event_max_sample_rate") == "100000"
    assert read(root, f"{CPU}/cpu0/cpufreq/scaling_governor") == "powersave"


# --- tune and reset on this machine's own settings ------------------------------


REAL_FILES = {
    "governor": lambda: [p for p, _ in check_module._targets("governor", "/")],
    "boost": lambda: [p for p, _ in check_module._targets("boost", "/")],
    "perf_sample_rate": lambda: [p for p, _ in check_module._targets("perf_sample_rate", "/")],
}


@pytest.mark.parametrize("setting", TUNABLE_SETTINGS)
def test_tune_and_reset_this_machine(setting, tmp_path):
    missing = missing_settings("/")
    if setting in missing:
        pytest.skip(f"this machine does not expose {setting}: {missing[setting]}")
    if os.geteuid() != 0:
        pytest.skip("tuning the real machine needs root")
    if setting == "perf_sample_rate":
        percent = int(open("/proc/sys/kernel/perf_cpu_time_max_percent").read())
        if percent in (0, 100):
            pytest.skip(f"perf_cpu_time_max_percent={percent}: the kernel refuses sample-rate writes")
    files = REAL_FILES[setting]()
    originals = {path: open(path).read().strip() for path in files}
    state = str(tmp_path / "tuned.json")
    try:
        changes = tune(settings=[setting], state_path=state)
        targets = dict(check_module._targets(setting, "/"))
        for change in changes:
            assert not change.skipped
            assert open(change.path).read().strip() == targets[change.path]
        reset(state_path=state)
        for path, value in originals.items():
            assert open(path).read().strip() == value
        assert not os.path.exists(state)
    finally:
        for path, value in originals.items():  # whatever happened above
            if open(path).read().strip() != value:
                with open(path, "w") as handle:
                    handle.write(value + "\n")


def test_memlab_check_is_the_public_function():
    assert memlab.check is check
    report = memlab.check(steal_window_seconds=0, counters=False, blas=False)
    assert report["load"].name == "load"


# --- the command line -----------------------------------------------------------


def test_cli_check_prints_the_report(capsys):
    from memlab.cli import main

    assert main(["check", "--steal-window", "0", "--working-set", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("memlab check: ")
    assert "free memory" in out and "largest planned working set 1 GiB" in out


def test_cli_check_json(capsys):
    from memlab.cli import main

    assert main(["check", "--steal-window", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"checked", "facts", "findings", "warnings"} <= set(data)
    assert any(f["name"] == "load" for f in data["findings"])


@pytest.mark.parametrize("argv,message", [
    (["check", "--tune-setting", "boost"], "--tune-setting needs --tune"),
    (["check", "--working-set", "lots"], "--working-set='lots' must be a size such as 8GiB"),
    (["check", "--steal-window", "99"], "steal_window_seconds=99.0 is outside [0, 60]"),
    (["check", "--tune", "--tune-setting", "turbo"], "setting='turbo' is not one of"),
])
def test_cli_check_bad_arguments(argv, message, capsys):
    from memlab.cli import main

    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_tune_without_root_exits_one(monkeypatch, capsys):
    from memlab.cli import main

    monkeypatch.setattr(check_module.os, "geteuid", lambda: 1000)
    assert main(["check", "--tune"]) == 1
    assert "needs root: run it with sudo" in capsys.readouterr().err


def test_cli_tune_and_reset_the_perf_sample_rate(tmp_path, capsys):
    from memlab.cli import main

    if "perf_sample_rate" in missing_settings("/"):
        pytest.skip(missing_settings("/")["perf_sample_rate"])
    if os.geteuid() != 0:
        pytest.skip("tuning the real machine needs root")
    path = "/proc/sys/kernel/perf_event_max_sample_rate"
    if int(open("/proc/sys/kernel/perf_cpu_time_max_percent").read()) in (0, 100):
        pytest.skip("perf_cpu_time_max_percent is 0 or 100: the kernel refuses sample-rate writes")
    original = open(path).read().strip()
    state = str(tmp_path / "tuned.json")
    try:
        assert main(["check", "--tune", "--tune-setting", "perf_sample_rate", "--state", state]) == 0
        out = capsys.readouterr().out
        assert f"{path}: {original} -> 1" in out
        assert f"undo with: sudo memlab check --reset --state {state}" in out
        assert open(path).read().strip() == "1"
        assert main(["check", "--reset", "--state", state]) == 0
        assert f"{path}: 1 -> {original}" in capsys.readouterr().out
        assert open(path).read().strip() == original
        assert main(["check", "--reset", "--state", state]) == 0
        assert "nothing to reset" in capsys.readouterr().out
    finally:
        if open(path).read().strip() != original:
            with open(path, "w") as handle:
                handle.write(original + "\n")


def test_steal_since_an_earlier_reading(tmp_path):
    root = make_tree(tmp_path, {"proc/stat": stat_text("cpu  1000 0 0 1000 0 0 0 20")})
    since = (check_module.time.monotonic() - 2.0, read_cpu_times(root))
    (tmp_path / "proc/stat").write_text(stat_text("cpu  1190 0 0 1100 0 0 0 30"))

    def no_wait(seconds):
        raise AssertionError("a window since an earlier reading must not wait")

    report = check(root, steal_since=since, wait=no_wait)
    assert report.facts["steal_fraction"] == pytest.approx(10 / 200)
    assert report.facts["steal_window_seconds"] >= 2.0
    assert report["steal"].verdict == "warning"


# --- one object per setting: what it reads, its verdict, its tuning ------------------------------


def test_each_setting_gives_the_finding_of_its_name_in_the_printed_order():
    facts = check_module.collect(steal_window_seconds=0, counters=False, blas=False)
    assert [f.name for f in judge(facts)] == [s.name for s in check_module.SETTINGS]
    assert TUNABLE_SETTINGS == tuple(s.tune_name for s in check_module.SETTINGS if s.tunable)
    assert all(s.targets and s.missing and s.values for s in check_module.SETTINGS if s.tunable)


def test_a_settings_collectors_read_the_facts_its_judge_needs(tmp_path):
    root = make_tree(tmp_path, {
        f"{CPU}/cpu0/cpufreq/scaling_governor": "powersave\n",
        f"{CPU}/cpufreq/boost": "1\n",
        f"{THP}/enabled": "always [madvise] never\n",
        "proc/sys/kernel/randomize_va_space": "0\n",
    })
    by_name = {s.name: s for s in check_module.SETTINGS}
    for name, verdict in (("cpu_governor", "warning"), ("boost", "warning"), ("thp", "ok"), ("aslr", "ok")):
        facts: dict = {}
        by_name[name].collect(facts, root)
        assert by_name[name].judge(facts, None).verdict == verdict, (name, facts)
    assert {s.tune_name: s.targets(root) for s in check_module.SETTINGS if s.tunable} == {
        "governor": [(f"/{CPU}/cpu0/cpufreq/scaling_governor", "performance")],
        "boost": [(f"/{CPU}/cpufreq/boost", "0")],
        "perf_sample_rate": [],
    }
    assert by_name["boost"].values(root, f"/{CPU}/cpufreq/boost") == ("0", "1")
