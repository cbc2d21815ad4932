"""The C core's generic binding, counters, regions and clock."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from memlab import _core, chase, machine
from conftest import (
    interrupt_measure,
    memlab_thread_count,
    python_with_hidden_features,
    hardware_counters_available,
    hugetlb_free_pages,
    require_populate_write,
    skip_if_thp_refused,
    thp_fallbacks_during,
    thp_mode,
)

MiB = 1 << 20


def region_sample(**config):
    full = {"region_bytes": 8 * MiB, "pages": "4k", "populate": "touch", "strict_pages": False}
    full.update(config)
    with _core.Kernel("region", full) as kernel:
        return kernel.measure(counters=True)


# ---- the binding -----------------------------------------------------------

def test_families_lists_the_foundation_families_with_their_parameters():
    families = _core.families()
    assert {"calibrate", "region"} <= set(families)
    params = {p["name"]: p for p in families["region"]["params"]}
    assert params["pages"]["choices"] == ["4k", "thp", "hugetlb-2m", "hugetlb-1g"]
    assert params["region_bytes"]["kind"] == "int" and params["region_bytes"]["min"] == 4096


@pytest.mark.parametrize(
    "config, message",
    [
        ({"budget_ns": 10}, "budget_ns=10 is below the minimum 1000000"),
        ({"budget_ns": 10**30}, "budget_ns=.* is above the maximum"),
        ({"budget_ns": "many"}, "budget_ns='many' must be an integer"),
        ({"budget_ns": True}, "budget_ns=True must be an integer"),
        ({"budget_ns": 10**7, "extra": 1}, "unknown parameter 'extra'"),
    ],
)
def test_bad_configs_raise_value_error_naming_the_parameter(config, message):
    with pytest.raises(ValueError, match=message):
        _core.Kernel("calibrate", config)


def test_an_absent_parameter_takes_its_default_and_one_without_a_default_is_missing():
    defaults = {p["name"]: p.get("default") for p in _core.families()["calibrate"]["params"]}
    assert defaults == {"budget_ns": 100_000_000}
    _core.Kernel("calibrate", {}).close()  # budget_ns from the table
    with pytest.raises(ValueError, match="missing parameter 'times' for team_metrics"):
        _core.Kernel("team_metrics", {})  # a buffer has no default


def test_bad_choice_lists_the_choices():
    with pytest.raises(ValueError, match=r"pages='huge' is not one of \['4k', 'thp'"):
        _core.Kernel("region", {"region_bytes": MiB, "pages": "huge", "populate": "touch",
                                "strict_pages": False})


def test_unknown_family_is_a_value_error():
    with pytest.raises(ValueError, match="family='nosuch' is not a family"):
        _core.Kernel("nosuch", {})


def test_config_must_be_a_dict():
    with pytest.raises(TypeError):
        _core.Kernel("calibrate", [("budget_ns", 10**7)])


def test_closed_kernel_refuses_to_measure():
    kernel = _core.Kernel("calibrate", {"budget_ns": 10**7})
    assert not kernel.closed
    kernel.close()
    assert kernel.closed
    with pytest.raises(ValueError, match="closed"):
        kernel.measure()
    kernel.close()  # twice is harmless


@pytest.mark.build
def test_build_info_records_the_flags():
    info = _core.build_info()
    assert "-Wall" in info["cflags"] and "-O2" in info["cflags"]


# ---- clock -------------------------------------------------------------------

def cpuinfo_flags() -> set[str]:
    with open("/proc/cpuinfo") as handle:
        return next((set(line.split(":", 1)[1].split()) for line in handle if line.startswith("flags")), set())


@pytest.mark.build
def test_cpu_features_are_what_cpuinfo_says():
    if os.environ.get("MEMLAB_HIDE_CPU_FEATURES"):
        pytest.skip("MEMLAB_HIDE_CPU_FEATURES hides some features in this run")
    flags = cpuinfo_flags()
    assert _core.cpu_features() == {
        "sse2": "sse2" in flags,
        "avx2": {"avx2", "fma"} <= flags,
        "avx512f": "avx512f" in flags,
    }


@pytest.mark.parametrize("hidden, gone", [
    ("avx512f", {"avx512f"}),
    ("avx2", {"avx2", "avx512f"}),
    ("sse2", {"sse2", "avx2", "avx512f"}),
    ("avx2, avx512f", {"avx2", "avx512f"}),
])
def test_hiding_a_cpu_feature_hides_it_and_every_wider_one(hidden, gone):
    out = python_with_hidden_features("from memlab import _core; print(sorted(_core.cpu_features().items()))",
                                      hidden)
    seen = dict(eval(out))
    assert not any(seen[name] for name in gone)
    expected_rest = {name: value for name, value in _core.cpu_features().items() if name not in gone}
    if not os.environ.get("MEMLAB_HIDE_CPU_FEATURES"):
        assert {name: seen[name] for name in expected_rest} == expected_rest


def test_hidden_cpu_features_are_checked_and_recorded():
    assert machine.hidden_cpu_features({"MEMLAB_HIDE_CPU_FEATURES": "avx2,avx512f"}) == ["avx2", "avx512f"]
    assert machine.hidden_cpu_features({}) == []
    with pytest.raises(ValueError, match="MEMLAB_HIDE_CPU_FEATURES names avx512; it may hide sse2, avx2, avx512f"):
        machine.hidden_cpu_features({"MEMLAB_HIDE_CPU_FEATURES": "avx512"})
    out = python_with_hidden_features(
        "from memlab import machine; f = machine.collect(); print(f['cpu_features_hidden'], f['cpu_features_used']['avx512f'])",
        "avx512f")
    assert out.split() == ["['avx512f']", "False"]


@pytest.mark.build
def test_calibration_reports_a_frequency_and_agrees_with_imul_chain():
    with _core.Kernel("calibrate", {"budget_ns": 50_000_000}) as kernel:
        sample = kernel.measure(counters=False)
    metrics = sample["metrics"]
    assert 0.2 < metrics["core_GHz"] < 10
    assert metrics["core_GHz_lowest"] <= metrics["core_GHz"] <= metrics["core_GHz_highest"]
    # imul_GHz assumes a 3-cycle 64-bit imul. Measured in cycles of the add chain,
    # imul's latency is 3 on Intel Core and AMD Zen, 4 on K8/K10, 5 on Silvermont,
    # 6 on Bulldozer: any x86-64 core lies in [3, 6]. Outside [2, 8] one of the two
    # chains did not run at one dependent operation per cycle (an add folded, or a
    # clock counted wrong).
    imul_cycles = 3 * metrics["core_GHz"] / metrics["imul_GHz"]
    assert 2 <= imul_cycles <= 8, f"imul latency {imul_cycles:.2f} add-chain cycles"
    assert sample["counters_scope"] == "none"
    assert set(sample["counters_missing"].values()) == {"not requested"}


@pytest.mark.ctrl_c
def test_ctrl_c_stops_a_long_kernel_promptly():
    # a 60 s budget; the KeyboardInterrupt must come before the sample's 30 s deadline
    interrupt_measure(_core.Kernel("calibrate", {"budget_ns": 60 * 10**9}))


def test_a_sample_past_its_deadline_stops_with_timeout_error_and_the_kernel_measures_again():
    # a walk of 2^40 laps has no end of its own: only the deadline stops it
    kernel = _core.Kernel("chase", dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 16, laps=1 << 40))))
    try:
        with pytest.raises(TimeoutError, match=r"chase sample was stopped at its deadline of 0\.050 s"):
            kernel.measure(target_ns=60 * 10**9, counters=False, deadline_ns=50 * 10**6)
    finally:
        kernel.close()
    kernel = _core.Kernel("chase", dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 16))))
    with kernel:
        kernel.measure(target_ns=10**6, counters=False, deadline_ns=50 * 10**6)
        sample = kernel.measure(target_ns=10**6, counters=False, deadline_ns=0)  # 0: no deadline
        assert sample["elapsed_ns"] > 0


def test_the_core_names_every_thread_it_starts():
    # A thread the core starts carries THREAD_NAME (how the tests count memlab's own threads):
    # while a two-thread walk measures in another Python thread, its walkers are seen by name.
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs for a two-thread walk")
    kernel = _core.Kernel("chase", dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 16, threads=2))))
    seen = []
    measuring = threading.Thread(target=kernel.measure,
                                 kwargs=dict(target_ns=3 * 10**9, counters=False, deadline_ns=10 * 10**9))
    before = memlab_thread_count()
    measuring.start()
    try:
        while measuring.is_alive() and not seen:
            now = memlab_thread_count(settle=False)
            if now > before:
                seen.append(now - before)
            time.sleep(0.001)
    finally:
        measuring.join()
        kernel.close()
    assert seen and seen[0] >= 1
    assert memlab_thread_count() == before


# ---- counters ----------------------------------------------------------------

@pytest.mark.build
def test_software_counters_count_page_faults_of_touched_pages():
    sample = region_sample(region_bytes=16 * MiB, pages="4k", populate="touch")
    pages = 16 * MiB // 4096
    assert sample["counters"]["page_faults"] >= pages * 0.9
    assert sample["counters"]["minor_faults"] >= pages * 0.9
    assert sample["counters"]["task_clock_ns"] > 0
    untouched = region_sample(region_bytes=16 * MiB, pages="4k", populate="none")
    assert untouched["counters"]["page_faults"] < pages * 0.1


def test_every_counter_is_either_present_or_missing_with_a_reason(counters_probe):
    sample = region_sample()
    names = set(counters_probe)
    assert set(sample["counters"]) | set(sample["counters_missing"]) == names
    assert not set(sample["counters"]) & set(sample["counters_missing"])
    for name, reason in sample["counters_missing"].items():
        assert reason and reason != "not requested", name
    assert sample["counters_scope"] in ("user", "user+kernel")


def test_missing_hardware_counters_are_reported_not_zero(counters_probe):
    if hardware_counters_available():
        pytest.skip("this machine's PMU gives hardware counters; the missing path cannot occur")
    sample = region_sample()
    assert "cycles" not in sample["counters"]
    reason = sample["counters_missing"]["cycles"]
    assert reason and reason != "not requested"
    assert reason == counters_probe["cycles"]["reason"]
    assert counters_probe["cycles"]["available"] is False
    assert counters_probe["cycles"]["reason"]


def test_hardware_counters_count_when_the_pmu_allows():
    if not hardware_counters_available():
        pytest.skip("hardware perf events do not open on this machine (PMU unavailable)")
    with _core.Kernel("calibrate", {"budget_ns": 20_000_000}) as kernel:
        sample = kernel.measure(counters=True)
    assert sample["counters"]["cycles"] > 1e6
    assert sample["counters"]["instructions"] > 1e6


# ---- regions -----------------------------------------------------------------

@pytest.mark.build
@pytest.mark.parametrize("populate", ["none", "touch", "map_populate", "madvise_populate_write"])
def test_4k_region_populates_in_every_mode(populate):
    if populate == "madvise_populate_write":
        require_populate_write()
    sample = region_sample(pages="4k", populate=populate)
    assert sample["metrics"]["granted_page_bytes"] == 4096
    assert sample["metrics"]["huge_bytes"] == 0
    if populate != "none":
        assert sample["metrics"]["populate_ns"] > 0
    assert sample["facts"] == {"pages_requested": "4k", "pages_obtained": "4k" if populate != "none" else "none",
                               "populate_requested": populate, "populate_used": populate}


@pytest.mark.build
def test_thp_region_is_backed_by_huge_pages():
    if thp_mode() == "never" or thp_mode() == "unavailable":
        pytest.skip(f"transparent huge pages are {thp_mode()} on this machine")
    with thp_fallbacks_during() as refused:
        sample = region_sample(region_bytes=32 * MiB, pages="thp", populate="touch")
    assert sample["metrics"]["granted_page_bytes"] == 2 * MiB
    fraction = sample["metrics"]["huge_fraction"]
    skip_if_thp_refused(fraction, refused())
    assert fraction == 1.0
    assert sample["metrics"]["huge_bytes"] == 32 * MiB
    assert sample["counters"]["page_faults"] < (32 * MiB // 4096) * 0.5
    assert sample["facts"]["pages_obtained"] == "thp"


# A process may switch THP off for itself (prctl PR_SET_THP_DISABLE, Linux 3.15+): then a
# THP request gets 4 KiB pages on every host, the fallback the labels must tell.
THP_DISABLED_RUN = """
import ctypes, json, sys
import memlab
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(41, 1, 0, 0, 0) != 0:  # PR_SET_THP_DISABLE
    print(json.dumps({"skip": "prctl(PR_SET_THP_DISABLE) failed: errno %d" % ctypes.get_errno()}))
    sys.exit(0)
family, params = sys.argv[1], json.loads(sys.argv[2])
m = memlab.run(family, pages="thp", repeat=1, warmup=0, **params)
try:
    memlab.run(family, pages="thp", strict_pages=True, repeat=1, warmup=0, **params)
    refusal = None
except OSError as error:
    refusal = str(error)
print(json.dumps({"facts": m.facts, "refusal": refusal}))
"""

#: Every family that maps memory of a chosen page kind, with a small point.
THP_FAMILIES = {
    "region": {"region_bytes": 8 * MiB, "populate": "touch"},
    "clear_fault": {"region_bytes": 8 * MiB, "populate": "touch"},
    "clear_order": {"region_bytes": 8 * MiB},
    "chase": {"working_set_bytes": 8 * MiB, "target_seconds": 0.005},
    "bandwidth": {"working_set_bytes": 8 * MiB, "target_seconds": 0.01},
}


@pytest.mark.parametrize("family", sorted(THP_FAMILIES))
def test_a_thp_request_served_with_4k_pages_says_so_and_strict_refuses_it(family):
    result = subprocess.run([sys.executable, "-c", THP_DISABLED_RUN, family, json.dumps(THP_FAMILIES[family])],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    if "skip" in answer:
        pytest.skip(answer["skip"])
    assert answer["facts"]["pages_requested"] == "thp"
    assert answer["facts"]["pages_obtained"] == "4k"
    assert answer["facts"]["populate_used"] == "touch"
    assert answer["refusal"] is not None
    assert "pages=thp asked, but the kernel gave 4k pages" in answer["refusal"]


def test_map_populate_of_thp_is_replaced_and_says_so_or_refused_when_strict():
    with pytest.raises(ValueError, match="map_populate cannot populate THP pages"):
        region_sample(pages="thp", populate="map_populate", strict_pages=True)
    sample = region_sample(pages="thp", populate="map_populate")
    used = "madvise_populate_write" if machine.populate_write_supported() else "touch"
    assert sample["facts"]["populate_requested"] == "map_populate"
    assert sample["facts"]["populate_used"] == used
    assert sample["metrics"]["populate_ns"] > 0
    # What the row says it got is what smaps says backs it.
    huge = sample["metrics"]["huge_bytes"] >= 4 * MiB
    assert sample["facts"]["pages_obtained"] == ("thp" if huge else "4k")


def test_populate_write_lack_is_reported_with_the_kernel_it_needs(tmp_path):
    # A kernel before 5.14 answers MADV_POPULATE_WRITE with EINVAL: play that kernel
    # with a preloaded madvise() and check what the user is told.
    shim = tmp_path / "old_kernel_madvise.so"
    source = tmp_path / "old_kernel_madvise.c"
    source.write_text(OLD_KERNEL_MADVISE)
    compiler = os.environ.get("CC", "cc")
    built = subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(shim), "-ldl"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"cannot build the madvise shim: {built.stderr.strip()[:200]}")
    preload = " ".join(filter(None, [os.environ.get("LD_PRELOAD"), str(shim)]))

    def on_the_old_kernel(pages: str, populate: str) -> str:
        script = (
            "from memlab import _core\n"
            f"config = {{'region_bytes': 4 << 20, 'pages': {pages!r}, 'populate': {populate!r},"
            " 'strict_pages': False}\n"
            "try:\n"
            "    with _core.Kernel('region', config) as k:\n"
            "        print(k.measure(counters=False)['facts']['populate_used'])\n"
            "except OSError as error:\n"
            "    print('OSError', error.errno, error)\n"
        )
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env={**os.environ, "LD_PRELOAD": preload}, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    said = on_the_old_kernel("4k", "madvise_populate_write")
    assert said.startswith(f"OSError {errno.EINVAL} "), said
    assert "MADV_POPULATE_WRITE" in said and "needs Linux 5.14+" in said
    # Before 5.14, map_populate asked of THP is done by touching, and the facts say so.
    assert on_the_old_kernel("thp", "map_populate") == "touch"


OLD_KERNEL_MADVISE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

int madvise(void *address, size_t length, int advice)
{
    static int (*real)(void *, size_t, int);
    if (advice == 23) {  /* MADV_POPULATE_WRITE */
        errno = EINVAL;
        return -1;
    }
    if (!real)
        real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    return real(address, length, advice);
}
"""


@pytest.mark.parametrize("kind, page_kib", [("hugetlb-2m", 2048), ("hugetlb-1g", 1048576)])
def test_hugetlb_region_when_pages_are_reserved(kind, page_kib):
    if hugetlb_free_pages(page_kib) < 1:
        pytest.skip(f"no {kind} pages reserved (/sys/kernel/mm/hugepages/hugepages-{page_kib}kB)")
    sample = region_sample(region_bytes=page_kib * 1024, pages=kind, populate="touch")
    assert sample["metrics"]["huge_bytes"] == page_kib * 1024


@pytest.mark.parametrize("kind, page_kib", [("hugetlb-2m", 2048), ("hugetlb-1g", 1048576)])
def test_refused_hugetlb_is_an_os_error_when_strict_else_a_fallback_labelled_as_such(kind, page_kib):
    if hugetlb_free_pages(page_kib) > 0:
        pytest.skip(f"{kind} pages are reserved here; the refusal path cannot occur")
    with pytest.raises(OSError, match="pages refused") as info:
        region_sample(region_bytes=page_kib * 1024, pages=kind, strict_pages=True)
    assert info.value.errno is not None
    sample = region_sample(region_bytes=page_kib * 1024, pages=kind)
    assert sample["metrics"]["fell_back"] == 1
    assert sample["metrics"]["granted_page_bytes"] == 4096
    assert sample["facts"] == {"pages_requested": kind, "pages_obtained": "4k",
                               "populate_requested": "touch", "populate_used": "touch"}


def test_too_large_region_is_a_memory_error_before_anything_is_mapped():
    with open("/proc/meminfo") as handle:
        total_kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    with pytest.raises(MemoryError, match="available"):
        _core.Kernel("region", {"region_bytes": total_kib * 1024 * 2, "pages": "4k",
                                "populate": "touch", "strict_pages": False})


def test_hugetlb_2m_region_with_pages_reserved_for_the_test(reserved_hugetlb_2m):
    sample = region_sample(region_bytes=4 * MiB, pages="hugetlb-2m", populate="touch")
    assert sample["metrics"]["fell_back"] == 0
    assert sample["metrics"]["granted_page_bytes"] == 2 * MiB
    assert sample["metrics"]["huge_bytes"] == 4 * MiB
    # Far fewer faults than 4 KiB pages would take (1024); sanitizers add a few of their own.
    assert sample["counters"]["page_faults"] < (4 * MiB // 4096) / 4
    assert sample["facts"]["pages_obtained"] == "hugetlb-2m"


def test_reserving_hugetlb_pages_restores_the_pool():
    from conftest import hugetlb_2m_reserved, read_pool

    before = read_pool()
    with hugetlb_2m_reserved(2) as free:
        assert free >= 2
    assert read_pool() == before


def test_family_given_by_keyword_is_found_or_rejected():
    with _core.Kernel(family="calibrate", config={"budget_ns": 10**6}) as kernel:
        assert kernel.family == "calibrate"
    with pytest.raises(ValueError, match="family='nope'"):
        _core.Kernel(family="nope", config={})
