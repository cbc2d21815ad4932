"""The pointer chase: the list is what it claims, the walk visits it, bad input fails clearly."""

from __future__ import annotations

import array
import importlib.util
import os
import signal
import threading
from pathlib import Path

import pytest

from memlab import _core, chase
from memlab.dataset import Dataset
from memlab.machine import cache_sizes
from memlab.sweep import Sweep

from conftest import (CTRL_C_DEADLINE_S, hugetlb_free_pages, interrupt_measure, memlab_thread_count,
                      skip_if_thp_refused, thp_fallbacks_during, thp_mode)

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
FIGURES = tuple(chase.SWEEPS)


def one_sample(**params):
    """One kept sample, no warm-up, short: for correctness, not timing."""
    return chase.run(repeat=1, warmup=0, target_seconds=0.005, **params)


def metrics_of(measurement):
    return measurement.samples[0]


def core_config(**overrides):
    return dict(chase._to_core(chase.ChaseParams()), **overrides)


# ---- the list ----------------------------------------------------------------

LIST_CASES = [
    dict(order="sequential"),
    dict(order="random"),
    dict(order="random_blocks", block_pages=1),
    dict(order="random_blocks", block_pages=3),
    dict(order="random", chains=3),
    dict(order="random_blocks", block_pages=2, chains=5),
    dict(order="sequential", layout="page_per_element"),
    dict(order="random", layout="page_per_element", chains=2),
    dict(order="random_blocks", block_pages=4, layout="page_per_element"),
]


@pytest.mark.build
@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("npad", [0, 7])
def test_c_list_equals_the_python_reference(case, npad):
    # 40000 bytes: element counts that are not multiples of the unroll or of the chains.
    params = dict(case, npad=npad, working_set_bytes=40_000, seed=11)
    traced = chase.trace(params, laps=0)
    assert traced["successors"].tolist() == chase.reference_successors(params)


@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_every_chain_is_one_cycle_through_its_own_elements(case):
    params = dict(case, npad=7, working_set_bytes=48_000, seed=3)
    traced = chase.trace(params, laps=0)
    successors = traced["successors"].tolist()
    per_chain = len(successors) // params.get("chains", 1)
    for start in traced["chain_starts"]:
        seen, index = set(), start
        for _ in range(per_chain):
            assert index not in seen, "a short loop inside the chain"
            assert start <= index < start + per_chain, "the chain left its own elements"
            seen.add(index)
            index = successors[index]
        assert index == start and len(seen) == per_chain


def test_random_blocks_stay_inside_their_block_until_it_is_done():
    params = dict(order="random_blocks", block_pages=2, npad=7, working_set_bytes=64 << 10)
    successors = chase.reference_successors(params)
    block = 2 * 4096 // 64
    index, order = 0, []
    for _ in range(len(successors)):
        order.append(index)
        index = successors[index]
    blocks_in_visit_order = [i // block for i in order]
    assert blocks_in_visit_order == sorted(blocks_in_visit_order)
    assert order[:block] != list(range(block)), "a block was not shuffled"


def test_the_same_seed_gives_the_same_order_and_another_seed_another():
    base = dict(order="random", npad=0, working_set_bytes=32 << 10)
    first = chase.trace(base, seed=5, laps=0)["successors"].tolist()
    assert chase.trace(base, seed=5, laps=0)["successors"].tolist() == first
    assert chase.trace(base, seed=6, laps=0)["successors"].tolist() != first
    hashes = {metrics_of(one_sample(**base, seed=s, check=True, laps=1))["check_order_hash"] for s in (5, 5, 6)}
    assert len(hashes) == 2


# ---- the walk -----------------------------------------------------------------

@pytest.mark.build
@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_the_walk_visits_every_element_once_per_lap(case):
    values = metrics_of(one_sample(**case, npad=7, working_set_bytes=40_000, check=True, laps=3))
    elements = chase.element_count(dict(case, npad=7, working_set_bytes=40_000))
    assert values["elements"] == elements
    assert values["check_visits_fewest"] == values["check_visits_most"] == values["check_laps"] == 2
    assert values["check_elements_visited"] == elements
    assert values["check_back_at_start"] == 1
    assert values["check_bad_pointers"] == 0 and values["check_outside_chain"] == 0
    # The timed walk itself: exactly 3 laps, and back where each chain started.
    assert values["laps"] == 3 and values["end_at_start"] == 1


def test_adaptive_samples_walk_whole_laps_when_a_lap_is_short():
    m = chase.run(working_set_bytes=16 << 10, npad=7, repeat=2, warmup=0, target_seconds=0.01)
    for values in m.samples:
        assert values["laps"] >= 1 and values["laps"] == int(values["laps"])
        assert values["end_at_start"] == 1
        assert values["ns_per_element"] > 0 and values["cycles_per_element"] > 0


@pytest.mark.build
@pytest.mark.parametrize("op", ["inc", "addnext0"])
@pytest.mark.parametrize("order", ["sequential", "random"])
def test_inc_and_addnext0_change_memory_as_defined(op, order):
    params = dict(op=op, order=order, npad=1, working_set_bytes=8 << 10, chains=2)
    traced = chase.trace(params, laps=3)
    successors = traced["successors"].tolist()
    assert traced["pad0"].tolist() == chase.reference_pad0(params, successors, laps=3)
    assert traced["positions"] == traced["chain_starts"]


def test_follow_leaves_memory_alone():
    params = dict(op="follow", npad=3, working_set_bytes=8 << 10)
    traced = chase.trace(params, laps=4)
    assert traced["pad0"].tolist() == list(range(1, chase.element_count(params) + 1))


VARIANTS = [
    dict(),
    dict(prefetch_distance=5),
    dict(helper_thread=True),
    dict(helper_thread=True, prefetch_distance=3, helper_distance=7),
    dict(work_cycles=20),
    dict(work_cycles=20, prefetch_distance=2, helper_thread=True),
]


@pytest.mark.build
@pytest.mark.parametrize("op", ["follow", "inc", "addnext0"])
def test_prefetch_helper_and_work_give_the_same_checksum_as_the_plain_walk(op):
    base = dict(op=op, order="random", npad=31, working_set_bytes=64 << 10, chains=2, laps=3, check=True)
    checksums = set()
    for variant in VARIANTS:
        values = metrics_of(one_sample(**base, **variant))
        assert values["check_visits_fewest"] == values["check_visits_most"] == 2
        checksums.add((values["checksum"], values["check_order_hash"]))
    assert len(checksums) == 1
    params = dict(base, helper_thread=True, prefetch_distance=4)
    traced = chase.trace(params)
    assert traced["pad0"].tolist() == chase.reference_pad0(params, traced["successors"].tolist(), laps=3)


@pytest.mark.build
def test_every_chain_count_runs_and_counts_all_elements():
    for chains in range(1, chase.MAX_CHAINS + 1):
        values = metrics_of(one_sample(order="random", npad=0, working_set_bytes=8 << 10, chains=chains,
                                       laps=1, check=True))
        assert values["check_elements_visited"] == values["elements"]
        assert values["check_visits_fewest"] == 2 and values["end_at_start"] == 1


def test_counters_and_per_element_units_are_attached():
    m = one_sample(working_set_bytes=64 << 10)
    values = metrics_of(m)
    assert {"ns_per_element", "cycles_per_element", "elements_per_s", "build_ns"} <= set(values)
    assert 0 < values["on_cpu_fraction"] <= 1.05
    assert 0 < values["cpu_ns_per_element"] <= values["ns_per_element"] * 1.05
    counters = set(m.counters[0]) | set(m.counters_missing)
    assert {"page_faults", "context_switches", "cache_misses", "dtlb_load_misses"} <= counters
    for name, reason in m.counters_missing.items():
        assert reason, f"counter {name} missing without a reason"


def test_page_per_element_maps_one_page_per_element():
    values = metrics_of(one_sample(layout="page_per_element", npad=7, working_set_bytes=64 << 10, laps=1))
    assert values["elements"] == 1024
    assert values["stride_bytes"] == 4096 and values["memory_bytes"] == 1024 * 4096


def available_bytes() -> int:
    with open("/proc/meminfo") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable"))


# A VM may report the host's whole last cache (480 MiB has been seen): lists
# "beyond the last cache" are capped here, so that building them costs seconds,
# not minutes. A capped list may still fit in such a cache; the tests below
# hold either way and say which level they expect from sysfs.
LARGE_LIST_CAP = 192 << 20


def large_working_sets(*multiples):
    """Multiples of the largest sysfs cache, capped at LARGE_LIST_CAP (same ratios)."""
    largest = max(cache_sizes().values(), default=32 << 20)
    scale = min(1.0, LARGE_LIST_CAP / (max(multiples) * largest))
    return [int(m * largest * scale) // 4096 * 4096 for m in multiples]


def test_random_is_slower_than_sequential_in_a_large_list():
    working_set, = large_working_sets(2)
    if working_set > available_bytes() // 4:
        pytest.skip(f"{working_set} bytes (twice the last cache) is too much of the {available_bytes()} available")
    # Medians of thread-CPU time over several samples, interleaved: a loaded machine
    # slows both alike. Beyond the last cache a random walk waits for DRAM at every
    # element (~100 ns) while the prefetcher streams the sequential one (a few ns);
    # in a large last cache (the capped case) it waits for that cache and for a
    # page walk at nearly every element (4 KiB pages), still tens of ns: a factor
    # of 2 is far inside either on any machine.
    per_element = {"sequential": [], "random": []}
    for _ in range(3):
        for order in per_element:
            m = chase.run(order=order, npad=7, working_set_bytes=working_set, repeat=3, warmup=1,
                          target_seconds=0.02)
            per_element[order].append(m.median("cpu_ns_per_element"))
    sequential = sorted(per_element["sequential"])[1]
    random_order = sorted(per_element["random"])[1]
    assert random_order > 2 * sequential, per_element


# ---- pages --------------------------------------------------------------------

@pytest.mark.parametrize("pages", ["4k", "thp"])
def test_huge_page_coverage_is_reported(pages):
    values = metrics_of(one_sample(pages=pages, working_set_bytes=8 << 20, npad=7, laps=1))
    # coverage is whole 2 MiB pages of the list's memory, and the fraction says the same
    assert values["huge_page_bytes"] % (2 << 20) == 0
    assert values["huge_page_fraction"] == pytest.approx(values["huge_page_bytes"] / values["memory_bytes"])
    if pages == "4k":
        assert values["huge_page_bytes"] == 0


def test_a_small_thp_list_gets_a_whole_huge_page():
    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages are {thp_mode()!r} here")
    with thp_fallbacks_during() as refused:
        values = metrics_of(one_sample(pages="thp", working_set_bytes=64 << 10, npad=7, laps=1, check=True))
    skip_if_thp_refused(values["huge_page_fraction"], refused(), wanted=1e-9)
    assert values["huge_page_bytes"] == 2 << 20, "THP enabled but the 2 MiB region got no huge page"
    assert values["memory_bytes"] == 64 << 10 and values["check_visits_fewest"] == 2


def test_hugetlb_without_reserved_pages_falls_back_or_fails_when_strict():
    if hugetlb_free_pages(2048) > 0:
        pytest.skip("2 MiB hugetlb pages are reserved here: the refusal path cannot be shown")
    m = one_sample(pages="hugetlb-2m", working_set_bytes=4 << 20, laps=1)
    assert metrics_of(m)["pages_granted_hugetlb"] == 0
    assert m.facts["pages_requested"] == "hugetlb-2m" and m.facts["pages_obtained"] == "4k"
    with pytest.raises(OSError, match="hugetlb"):
        one_sample(pages="hugetlb-2m", strict_pages=True, working_set_bytes=4 << 20, laps=1)


def test_hugetlb_pages_are_used_when_reserved(reserved_hugetlb_2m):
    values = metrics_of(one_sample(pages="hugetlb-2m", strict_pages=True, working_set_bytes=4 << 20,
                                   laps=1, check=True))
    assert values["pages_granted_hugetlb"] == 1
    assert values["huge_page_fraction"] > 0.9
    assert values["check_visits_fewest"] == 2


# ---- errors -------------------------------------------------------------------

BAD = [
    (dict(working_set_bytes=0), "working_set_bytes=0"),
    (dict(working_set_bytes=-4096), "working_set_bytes=-4096"),
    (dict(working_set_bytes=4), "working_set_bytes=4 is below the minimum 8"),
    (dict(npad=-1), "npad=-1"),
    (dict(order="zigzag"), "order='zigzag'"),
    (dict(op="double"), "op='double'"),
    (dict(pages="1g"), "pages='1g'"),
    (dict(layout="sparse"), "layout='sparse'"),
    (dict(block_pages=0, order="random_blocks"), "block_pages=0"),
    (dict(chains=0), "chains=0"),
    (dict(chains=17), "chains=17"),
    (dict(npad=255, working_set_bytes=1024), "smaller than one element of 2048 bytes"),
    (dict(npad=63, working_set_bytes=1024, chains=3), "fewer than chains=3"),
    (dict(op="inc", npad=0), "op=inc needs npad >= 1"),
    (dict(work_cycles=-1), "work_cycles=-1"),
    (dict(prefetch_distance=-5), "prefetch_distance=-5"),
    (dict(helper_distance=0), "helper_distance=0"),
    (dict(seed=-1), "seed=-1"),
    (dict(working_set_bytes=4096.5), "working_set_bytes=4096.5"),
]


@pytest.mark.parametrize("params,message", BAD, ids=[m for _, m in BAD])
def test_bad_parameters_raise_value_error_naming_them(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        chase.ChaseParams(**params)


C_BAD = [
    (dict(working_set_bytes=4), "working_set_bytes"),
    (dict(npad=-1), "npad"),
    (dict(order="zigzag"), "order"),
    (dict(npad=255, working_set_bytes=1024), "smaller than one element"),
    (dict(npad=63, working_set_bytes=1024, chains=3), "fewer than chains=3"),
    (dict(op="addnext0", npad=0), "op=addnext0 needs npad >= 1"),
    (dict(block_pages=0), "block_pages"),
    (dict(laps=1 << 40, working_set_bytes=1 << 30), "more steps than a sample can count"),
]


@pytest.mark.parametrize("params,message", C_BAD, ids=[m for _, m in C_BAD])
def test_the_c_boundary_checks_again(params, message):
    with pytest.raises(ValueError, match=message):
        _core.Kernel("chase", core_config(**params))


def test_trace_buffer_too_small_or_of_the_wrong_type():
    import numpy

    config = core_config(working_set_bytes=4096, npad=7)
    with pytest.raises(ValueError, match="needs 1536"):
        _core.Kernel("chase_trace", dict(config, out=numpy.zeros(10, dtype=numpy.uint64)))
    with pytest.raises(ValueError, match="uint64"):
        _core.Kernel("chase_trace", dict(config, out=numpy.zeros(1024, dtype=numpy.uint8)))


def test_a_list_larger_than_memory_is_a_memory_error_naming_the_size():
    with pytest.raises(MemoryError, match=r"working_set_bytes=35184372088832.*needs \d+ bytes"):
        one_sample(working_set_bytes=1 << 45, npad=7)
    # page_per_element needs a page per element: 2**34 bytes of 64-byte elements is 1 TiB of pages.
    with pytest.raises(MemoryError, match=r"layout=page_per_element.*needs 1099511627776 bytes"):
        one_sample(working_set_bytes=1 << 34, npad=7, layout="page_per_element")


def test_helper_cpu_must_be_another_usable_cpu():
    allowed = sorted(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="helper_cpu=1023 is not among the CPUs this process may run on"):
        one_sample(helper_thread=True, helper_cpu=1023)
    # the kernel itself still refuses a CPU this process may not use, and one CPU for two threads
    config = core_config(helper_thread=True, laps=1, cpus=array.array("i", [allowed[0], 1023]))
    with pytest.raises(ValueError, match=r"cpus\[1\]=1023 is not a CPU this process may use"):
        _core.Kernel("chase", config)
    config["cpus"] = array.array("i", [allowed[0], allowed[0]])
    with pytest.raises(ValueError, match=rf"cpus\[1\]={allowed[0]} is also cpus\[0\]"):
        _core.Kernel("chase", config)
    with pytest.raises(ValueError, match=f"helper_cpu={allowed[0]} is the CPU of the walking thread"):
        chase.run(helper_thread=True, helper_cpu=allowed[0], cpu=allowed[0], repeat=1, warmup=0,
                  target_seconds=0.005)


def test_helper_thread_runs_on_another_cpu():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU only: the helper thread needs a second")
    cpu = min(os.sched_getaffinity(0))
    m = chase.run(helper_thread=True, cpu=cpu, repeat=1, warmup=0, target_seconds=0.005, laps=1)
    assert metrics_of(m)["helper_cpu"] != cpu


CTRL_C_CASES = {
    "plain": dict(),
    "helper": dict(helper_thread=True),
    "threads-shared": dict(threads=2),
    "threads-own": dict(threads=2, thread_lists="own"),
    "threads-fixed-laps": dict(threads=2, laps=1 << 30),
}


@pytest.mark.ctrl_c
@pytest.mark.parametrize("extra", CTRL_C_CASES.values(), ids=CTRL_C_CASES.keys())
def test_ctrl_c_stops_a_long_walk_promptly_and_joins_every_thread(extra):
    if extra.get("threads", 1) > len(os.sched_getaffinity(0)):
        pytest.skip(f"needs {extra['threads']} usable CPUs; this process may use {len(os.sched_getaffinity(0))}")
    threads_before = memlab_thread_count()
    kernel = _core.Kernel("chase", dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 20, **extra))))
    interrupt_measure(kernel)  # KeyboardInterrupt well before the sample's 30 s deadline
    assert memlab_thread_count() == threads_before, "a walking thread outlived the interrupted sample"


def test_a_list_build_checks_for_interrupts_and_stops_at_its_deadline():
    # 256 MiB of 8-byte elements: 32 Mi shuffle steps, far more than the 1 ms deadline on any
    # machine (over a second here): the build stops at one of its interrupt checks instead of
    # finishing, which is the path Ctrl-C takes too.
    with pytest.raises(TimeoutError, match="chase setup was stopped at its deadline"):
        _core.Kernel("chase", core_config(working_set_bytes=256 << 20, npad=0), deadline_ns=10**6)


@pytest.mark.ctrl_c
def test_ctrl_c_stops_building_a_large_list():
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                kernel = _core.Kernel("chase", core_config(working_set_bytes=256 << 20, npad=0),
                                      deadline_ns=CTRL_C_DEADLINE_S * 10**9)
            except TimeoutError:
                pytest.fail(f"waited {CTRL_C_DEADLINE_S} s for the SIGINT sent 0.2 s into the build to stop it",
                            pytrace=False)
            kernel.close()
            timer.join()  # the build finished before the signal: it lands here
    finally:
        timer.cancel()
        timer.join()


# ---- cache levels -----------------------------------------------------------------

def synthetic_curve(levels, noise=0.03):
    """Rows of a latency curve with plateaus [(up_to_log2, ns)], a little noise."""
    rows = []
    for k in range(10, 29):
        ns = next(value for limit, value in levels if k <= limit)
        wobble = 1 + noise * ((k * 7919) % 5 - 2) / 2
        rows.append({"working_set_bytes": 2**k, "ns_per_element": ns * wobble, "cycles_per_element": ns * 3.3})
    return rows


def test_cache_levels_finds_the_plateaus_and_sizes():
    machine = {"caches": [
        {"level": 1, "type": "Data", "size_bytes": 32 << 10},
        {"level": 1, "type": "Instruction", "size_bytes": 32 << 10},
        {"level": 2, "type": "Unified", "size_bytes": 512 << 10},
        {"level": 3, "type": "Unified", "size_bytes": 32 << 20},
    ]}
    rows = synthetic_curve([(15, 1.3), (19, 4.0), (25, 15.0), (99, 120.0)])
    levels = chase.cache_levels(Dataset(rows, metadata={"machine": machine}))
    assert [lv["level"] for lv in levels] == ["L1d", "L2", "L3", "memory"]
    assert [lv["largest_working_set_bytes"] for lv in levels] == [2**15, 2**19, 2**25, 2**28]
    assert [lv["sysfs_bytes"] for lv in levels] == [32 << 10, 512 << 10, 32 << 20, None]
    assert [lv["latency_ns"] for lv in levels] == pytest.approx([1.3, 4.0, 15.0, 120.0], rel=0.05)
    assert levels[0]["latency_cycles"] == pytest.approx(1.3 * 3.3)
    table = chase.format_cache_levels(levels)
    assert "L2" in table and "512 KiB" in table and "memory" in table


def test_cache_levels_of_a_flat_curve_is_one_level_and_needs_points():
    rows = [{"working_set_bytes": 2**k, "ns_per_element": 1.0} for k in range(10, 14)]
    assert len(chase.cache_levels(rows, min_points=2)) == 1
    with pytest.raises(ValueError, match="at least 3 working-set sizes"):
        chase.cache_levels(rows[:1])


def test_cache_levels_of_a_real_measurement():
    # Two groups of points that no machine can confuse: inside half the L1d, and beyond
    # twice the last cache. cache_levels must find exactly these two plateaus, the
    # first within L1d and the last in memory, and say where the step is.
    sizes_by_level = cache_sizes()
    l1d = sizes_by_level.get("L1d", 32 << 10)
    inside = [max(1024, l1d >> shift) for shift in (4, 3, 2, 1)]
    beyond = large_working_sets(2, 3)
    if beyond[-1] > available_bytes() // 4:
        pytest.skip(f"{beyond[-1]} bytes (3x the last cache) is too much of the {available_bytes()} available")
    sizes = sorted(set(inside)) + beyond
    measurements = [chase.run(working_set_bytes=s, order="random", npad=7, repeat=3, warmup=1,
                              target_seconds=0.01) for s in sizes]
    levels = chase.cache_levels(measurements, min_points=2)
    assert [lv["largest_working_set_bytes"] for lv in levels] == [max(inside), beyond[-1]], levels
    assert levels[0]["next_working_set_bytes"] == beyond[0]
    assert levels[0]["points"] == len(set(inside)) and levels[1]["points"] == len(beyond)
    if "L1d" in sizes_by_level:
        assert levels[0]["level"] == "L1d" and levels[0]["sysfs_bytes"] == l1d
    # the level named is the smallest sysfs cache holding the group, else memory
    holding = sorted((size, name) for name, size in sizes_by_level.items()
               if size >= beyond[-1] and not name.endswith("i"))
    expected_size, expected_name = holding[0] if holding else (None, "memory")
    assert levels[1]["level"] == expected_name and levels[1]["sysfs_bytes"] == expected_size


# ---- sweeps and experiment scripts ----------------------------------------------

def load_experiment(name):
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_has_a_script_and_a_quick_sweep_of_valid_points(name):
    for quick in (False, True):
        sweep = load_experiment(name).sweep(quick=quick)
        assert isinstance(sweep, Sweep) and sweep.family == "chase"
        assert sweep.name == name + ("_quick" if quick else "")
        for point in sweep.points:
            chase.FAMILY.params(point)
        if quick:
            assert len(sweep.points) * (sweep.repeat + sweep.warmup) * sweep.target_seconds < 10
    assert chase.FAMILY.sweep(name).name == name
    assert chase.FAMILY.sweep(f"{name}_quick").name == f"{name}_quick"


def test_the_quick_sweep_runs(tmp_path):
    from memlab.sweep import run_sweep

    sweep = chase.FAMILY.sweep("fig3_12_quick")
    dataset = run_sweep(sweep, tmp_path / "fig3_12.csv", progress=False, repeat=1, runs=1)
    assert len(dataset) == len(sweep.points)
    assert all(row["ns_per_element"] > 0 for row in dataset)


def test_the_helper_stays_within_the_callers_affinity():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU only")
    os.sched_setaffinity(0, {allowed[0]})
    try:
        with pytest.raises(ValueError, match=rf"helper_cpu={allowed[1]} is not among the CPUs"):
            chase.ChaseParams(helper_thread=True, helper_cpu=allowed[1])
        with pytest.raises(ValueError, match="helper_thread=True needs a second CPU"):
            chase.ChaseParams(helper_thread=True)
        assert chase.ChaseParams(helper_cpu=allowed[1]).helper_thread is False  # unused: not checked
    finally:
        os.sched_setaffinity(0, set(allowed))
