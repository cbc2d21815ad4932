"""loaded: the chase's latency beside throttled bandwidth threads, all measured over one window."""

import array
import os
import statistics

import pytest

from conftest import interrupt_measure
from memlab import loaded
from memlab._core import Kernel
from memlab.dataset import Dataset

CPUS = sorted(os.sched_getaffinity(0))
SMALL = dict(working_set_bytes=1 << 20, load_working_set_bytes=1 << 20)
FAST = dict(repeat=1, warmup=0, target_seconds=0.03, counters=False)
CHUNK_BYTES = 64 << 10


def two_cpus() -> None:
    if len(CPUS) < 2:
        pytest.skip(f"needs two CPUs (the chaser and a load thread); this process may use {CPUS}")


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


def core_config(**overrides):
    config = dict(working_set_bytes=1 << 20, pages="4k", load_threads=1, load_op="read",
                  load_working_set_bytes=1 << 20, delay_ns=0, cpus=array.array("i", CPUS[:2]))
    config.update(overrides)
    return config


# ---- threads: placed, measured together, joined -------------------------------------------


@pytest.mark.parametrize("op", loaded.LOAD_OPS)
def test_chaser_and_load_thread_run_on_their_cores_and_are_joined(op):
    two_cpus()
    before = threads_now()
    m = loaded.run(load_threads=1, load_op=op, **SMALL, **FAST)
    assert m.median("ran_on_cpu_chaser") == CPUS[0]
    assert m.median("ran_on_cpu_load_0") == CPUS[1]
    assert m.median("load_threads_unmeasured") == 0  # its rate is from inside the chaser's window
    assert m.median("load_GB_per_s") > 0
    factor = 2 if op == "copy" else 1
    assert m.median("load_traffic_GB_per_s") == pytest.approx(factor * m.median("load_GB_per_s"))
    assert m.median("ns_per_element") > 0
    # CPU time over steps: the chaser's own CPU time, never above its wall-clock latency. The two
    # clocks are read one after the other and thread CPU time is accounted in ticks, so a short
    # sample may read a little over (0.4% has been seen); summing the load thread's CPU time in
    # by mistake would read about twice.
    for sample in m.samples:
        assert 0 < sample["on_cpu_ns_per_element"] <= sample["ns_per_element"] * 1.05
    assert threads_now() == before
    # the calling thread is given its affinity back
    assert sorted(os.sched_getaffinity(0)) == CPUS


def test_no_load_thread_measures_the_idle_latency():
    before = threads_now()
    m = loaded.run(load_threads=0, **SMALL, **FAST)
    assert m.median("load_GB_per_s") == 0
    assert "ran_on_cpu_load_0" not in m.metric_names
    assert m.median("element_bytes") == 64  # the chase list: one element per line
    assert threads_now() == before


def test_the_delay_knob_lowers_the_achieved_bandwidth_monotonically():
    """In-cache sets (the load is CPU-bound): each tenfold delay must lower the rate."""
    two_cpus()
    delays = [0, 80_000, 800_000]
    rates = []
    for delay in delays:
        m = loaded.run(load_threads=1, delay_ns=delay, repeat=3, warmup=0, target_seconds=0.05,
                       counters=False, **SMALL)
        rates.append(m.median("load_GB_per_s"))
        if delay:
            # each 64 KiB chunk is followed by at least delay_ns of rest: an upper bound by construction
            for sample in m.samples:
                assert sample["load_GB_per_s"] <= CHUNK_BYTES / delay
    assert rates[0] > rates[1] > rates[2] > 0, rates


def test_ctrl_c_stops_the_chaser_and_joins_the_load_threads():
    two_cpus()
    before = threads_now()
    kernel = Kernel("loaded", core_config())
    assert interrupt_measure(kernel) < 10  # far below the 60 s asked for
    assert threads_now() == before
    assert sorted(os.sched_getaffinity(0)) == CPUS


# ---- refusals --------------------------------------------------------------------------


def test_more_load_threads_than_cpus_beside_the_chaser_are_refused_with_the_reason():
    n = len(CPUS)
    with pytest.raises(ValueError, match=rf"load_threads={n} needs {n + 1} CPUs with the chaser's: "
                                         rf"this process may use {n}"):
        loaded.LoadedParams(load_threads=n, **SMALL)


def test_the_c_core_refuses_two_threads_on_one_cpu_and_cpus_not_allowed():
    two_cpus()
    with pytest.raises(ValueError, match=r"cpus\[1\]=.* is also cpus\[0\]"):
        Kernel("loaded", core_config(cpus=array.array("i", [CPUS[0], CPUS[0]])))
    outside = next(cpu for cpu in range(1023, -1, -1) if cpu not in CPUS)
    with pytest.raises(ValueError, match=rf"cpus\[1\]={outside} is not a CPU this process may use"):
        Kernel("loaded", core_config(cpus=array.array("i", [CPUS[0], outside])))
    with pytest.raises(ValueError, match="cpus holds 1"):
        Kernel("loaded", core_config(cpus=array.array("i", CPUS[:1])))


@pytest.mark.parametrize("params, name", [
    ({"working_set_bytes": 100}, "working_set_bytes=100"),
    ({"pages": "1g"}, "pages='1g'"),
    ({"load_threads": -1}, "load_threads=-1"),
    ({"load_op": "triad"}, "load_op='triad'"),
    ({"load_working_set_bytes": (1 << 20) + 8}, "load_working_set_bytes=1048584 is not a multiple of 64"),
    ({"delay_ns": -5}, "delay_ns=-5"),
    ({"delay_ns": 10**9}, "delay_ns=1000000000"),
])
def test_bad_parameters_are_value_errors_naming_them(params, name):
    with pytest.raises(ValueError, match=name):
        loaded.LoadedParams(**{**SMALL, "load_threads": 0, **params})


def test_the_cpu_option_is_refused_because_the_threads_are_placed_on_cores():
    with pytest.raises(ValueError, match="cpu=0 does not apply to loaded"):
        loaded.run(load_threads=0, cpu=0, **SMALL, **FAST)


# ---- sweeps and the figure -------------------------------------------------------------------


def test_curve_sweeps_hold_the_idle_point_and_every_mix_at_every_delay():
    if len(CPUS) < 2:
        with pytest.raises(ValueError, match="needs two CPUs"):
            loaded.FAMILY.sweep("curve")
        return
    curve = loaded.FAMILY.sweep("curve")
    assert curve.points[0]["load_threads"] == 0
    loaded_points = curve.points[1:]
    assert {(p["load_op"], p["delay_ns"]) for p in loaded_points} == {
        (op, d) for op in loaded.LOAD_OPS for d in loaded.DELAYS_NS}
    assert {p["load_threads"] for p in loaded_points} == {len(CPUS) - 1}
    for name in ("curve_quick", "quick"):
        sweep = loaded.FAMILY.sweep(name)
        assert sweep.points[0]["load_threads"] == 0 and len(sweep.points) > 2
        for point in sweep.points:
            loaded.LoadedParams(**point)  # every point is valid here


def test_figure_draws_one_curve_per_mix_starting_at_the_idle_latency():
    pytest.importorskip("matplotlib")
    rows = [{"family": "loaded", "load_threads": 0, "load_op": "read", "delay_ns": 0,
             "ns_per_element": 90.0, "load_traffic_GB_per_s": 0.0}]
    for op, factor in (("read", 1), ("copy", 2)):
        for delay, gbs, ns in ((0, 10.0, 150.0), (1000, 5.0, 110.0), (100000, 0.2, 92.0)):
            rows.append({"family": "loaded", "load_threads": 1, "load_op": op, "delay_ns": delay,
                         "ns_per_element": ns * factor, "load_traffic_GB_per_s": gbs * factor})
    fig = loaded.figure(Dataset(rows))
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 4]
    assert len(lines) == 2
    for line in lines:
        xs = list(line.get_xdata())
        assert xs == sorted(xs) and xs[0] == 0.0 and line.get_ydata()[0] == 90.0
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["load_op=read (1 load thread)", "load_op=copy (1 load thread)"]


def test_quick_sweep_measures_and_draws():
    pytest.importorskip("matplotlib")
    two_cpus()
    sweep = loaded.FAMILY.sweep("quick")
    rows = [loaded.run({**point, **SMALL}, repeat=1, warmup=0, target_seconds=0.02, counters=False).to_row()
            for point in sweep.points]
    fig = loaded.figure(Dataset(rows))
    assert fig.axes[0].get_lines()
    assert statistics.median(r["ns_per_element"] for r in rows) > 0
