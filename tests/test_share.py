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
