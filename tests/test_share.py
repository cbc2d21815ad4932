"""memlab.share: exact counts for atomic increments, lost updates reported, errors."""

from __future__ import annotations

import os

import pytest

from memlab import _core, share

# Compiled kernels whose instructions depend on the -march level of the build.
pytestmark = pytest.mark.build

CPUS = len(os.sched_getaffinity(0))
THREADS = min(2, CPUS)


def one(**params):
    return share.run(repeat=1, warmup=0, **params).samples[0]


@pytest.mark.parametrize("disp", [0, 1, 8, 16])
def test_atomic_increments_end_with_exactly_threads_times_n(disp):
    sample = one(threads=THREADS, disp_longs=disp, atomic=True, increments=200_000)
    assert sample["final_count"] == THREADS * 200_000
    assert sample["expected_count"] == THREADS * 200_000
    assert sample["lost_updates"] == 0
    assert sample["increments_per_thread"] == 200_000


@pytest.mark.parametrize("disp", [1, 2, 8])
def test_plain_increments_of_own_counters_lose_nothing(disp):
    # distinct counters, even in one cache line: coherence keeps every update
    sample = one(threads=THREADS, disp_longs=disp, atomic=False, increments=300_000)
    assert sample["final_count"] == THREADS * 300_000
    assert sample["lost_updates"] == 0


def test_plain_increments_of_one_counter_report_lost_updates():
    sample = one(threads=THREADS, disp_longs=0, atomic=False, increments=2_000_000)
    expected = THREADS * 2_000_000
    assert sample["expected_count"] == expected
    assert 1 <= sample["final_count"] <= expected
    assert sample["lost_updates"] == expected - sample["final_count"]
    assert sample["lost_fraction"] == pytest.approx(sample["lost_updates"] / expected)


def test_units_and_per_thread_time():
    sample = one(threads=THREADS, disp_longs=8, atomic=True, increments=100_000)
    assert sample["ns_per_increment"] == pytest.approx(sample["elapsed_ns"] / (THREADS * 100_000))
    assert sample["ns_per_increment_per_thread"] == pytest.approx(sample["elapsed_ns"] / 100_000)
    assert sample["pinned"] == 1


def test_adaptive_increments_reach_the_target():
    m = share.run(threads=1, disp_longs=0, atomic=True, increments=0, repeat=2, warmup=0,
                  target_seconds=0.02)
    for sample in m.samples:
        n = sample["increments_per_thread"]
        assert n >= 1
        assert sample["final_count"] == n
        assert sample["elapsed_ns"] >= 0.02e9 / 4


def test_unpinned_threads_may_outnumber_cpus():
    sample = one(threads=CPUS + 2, disp_longs=8, atomic=True, increments=20_000, pin=False)
    assert sample["final_count"] == (CPUS + 2) * 20_000
    assert sample["pinned"] == 0


def test_pinning_more_threads_than_cpus_is_valueerror():
    with pytest.raises(ValueError, match=f"threads={CPUS + 1} is above the {CPUS} CPUs"):
        share.ShareParams(threads=CPUS + 1, pin=True)
    # the C core checks it too
    config = {"threads": CPUS + 1, "disp_longs": 8, "atomic": True, "increments": 10, "pin": True}
    with pytest.raises(ValueError, match="threads="):
        _core.Kernel("share", config)


@pytest.mark.parametrize("params, name", [
    ({"threads": 0}, "threads"),
    ({"disp_longs": -1}, "disp_longs"),
    ({"disp_longs": 1 << 21}, "disp_longs"),
    ({"increments": -5}, "increments"),
    ({"atomic": "yes"}, "atomic"),
    ({"pin": 2}, "pin"),
])
def test_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=name):
        share.ShareParams(**params)


def test_penalty_is_a_ratio_with_spread():
    a = share.run(threads=1, disp_longs=1, increments=50_000, repeat=3, warmup=0)
    b = share.run(threads=1, disp_longs=8, increments=50_000, repeat=3, warmup=0)
    p = share.penalty(a, b)
    assert p["ratio_min"] <= p["ratio"] <= p["ratio_max"]
    assert share.penalty(a, a)["ratio"] == 1.0
    with pytest.raises(ValueError, match="metric"):
        share.penalty(a, b, metric="nothing")


def test_interleaved_penalty_alternates_and_pairs_rounds():
    p = share.false_sharing_penalty(threads=1, increments=20_000, rounds=3, warmup=0,
                                    metric="cpu_ns_per_increment")
    assert p["rounds"] == 3
    assert p["ratio_min"] <= p["paired_ratio_median"] <= p["ratio_max"]
    assert p["ratio"] > 0 and p["ratio_of_fastest"] > 0
    with pytest.raises(ValueError, match="rounds"):
        share.false_sharing_penalty(rounds=0)


def test_on_cpu_time_is_reported():
    sample = one(threads=THREADS, disp_longs=8, atomic=True, increments=100_000)
    assert 0 < sample["cpu_ns_per_increment"]
    # on-CPU time of all threads cannot exceed threads x wall time (plus clock granularity)
    assert sample["cpu_ns_per_increment"] <= sample["ns_per_increment"] * THREADS * 1.05 + 1
    assert 0 < sample["mean_threads_on_cpu"] <= THREADS * 1.05


def test_quick_sweep_is_declared():
    sweep = share.FAMILY.sweep("quick")
    assert {p["disp_longs"] for p in sweep.points} == {0, 1, 8}


def test_a_thousand_unpinned_threads_start_together_and_count_exactly():
    """They wait for the start asleep (before: spinning, 15 s on two CPUs); every increment lands."""
    sample = one(threads=1024, disp_longs=1, atomic=True, increments=1000, pin=False)
    assert sample["final_count"] == 1024 * 1000 and sample["lost_updates"] == 0


def test_counters_beyond_the_available_memory_are_refused_before_allocating():
    """threads=1024 disp=2^20 zeroes 8 GiB; with less memory than that the kernel says so."""
    import subprocess
    import sys

    if "-fsanitize=address" in _core.build_info()["cflags"]:
        pytest.skip("AddressSanitizer reserves terabytes of address space: a capped one cannot start it")

    code = (
        "import resource; from memlab import _core\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "try:\n"
        "    _core.Kernel('share', {'threads': 1024, 'disp_longs': 1 << 20, 'atomic': True, 'increments': 1,"
        " 'pin': False})\n"
        "except MemoryError as error:\n"
        "    print('MemoryError:', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MemoryError:" in result.stdout, result.stderr
    assert "1024 threads" in result.stdout or "available" in result.stdout


def test_the_memory_check_refuses_what_memavailable_cannot_hold(tmp_path):
    """The check itself (not the allocation): run where /proc/meminfo says 1 GiB is available."""
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to show the kernel a smaller MemAvailable")
    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal:        2097152 kB\nMemFree:         1048576 kB\nMemAvailable:    1048576 kB\n")
    code = ("from memlab import _core\n"
            "try:\n"
            "    _core.Kernel('share', {'threads': 1024, 'disp_longs': 1 << 20, 'atomic': True, 'increments': 1,"
            " 'pin': False})\n"
            "except MemoryError as error:\n"
            "    print('MemoryError:', error)\n")
    script = f"mount --bind {fake} /proc/meminfo && exec {sys.executable} -c \"$0\""
    result = subprocess.run(["unshare", "-m", "sh", "-c", script, code], capture_output=True, text=True,
                            timeout=120)
    if "mount" in result.stderr or result.returncode not in (0, 1):
        pytest.skip(f"cannot bind-mount a fake /proc/meminfo here: {result.stderr.strip()[:200]}")
    assert "MemoryError: the counters (threads - 1) x disp longs apart needs" in result.stdout, result.stderr
    assert "of memory is available" in result.stdout


def test_ctrl_c_while_threads_are_created_stops_promptly():
    import signal
    import threading

    kernel = _core.Kernel("share", {"threads": 1024, "disp_longs": 8, "atomic": True, "increments": 1 << 40,
                                    "pin": False})
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            kernel.measure(target_ns=0, counters=False)
    finally:
        timer.cancel()
        kernel.close()
