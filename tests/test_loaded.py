"""loaded: the chase's latency beside throttled bandwidth threads, all measured over one window."""

import array
import os
import statistics

import pytest

from conftest import interrupt_measure, memlab_thread_count
from memlab import bandwidth, loaded
from memlab._core import Kernel
from memlab.dataset import Dataset

CPUS = sorted(os.sched_getaffinity(0))
SMALL = dict(working_set_bytes=1 << 20, load_working_set_bytes=1 << 20)
FAST = dict(repeat=1, warmup=0, target_seconds=0.03, counters=False)
CHUNK_BYTES = loaded.CHUNK_BYTES


def two_cpus() -> None:
    if len(CPUS) < 2:
        pytest.skip(f"needs two CPUs (the chaser and a load thread); this process may use {CPUS}")


#: Measurements a test takes before it gives up on a load thread this machine never ran in the window.
MEASURED_TRIES = 3


def measured_load(**kwargs):
    """loaded.run(**kwargs) with every load thread measured inside the chaser's window in every sample.

    A load thread the scheduler keeps off its CPU for the whole window (another job on that CPU:
    seen under a two-process hog at load 7 with a 30 ms window) has fewer than two notes inside it:
    the sample says so (load_threads_unmeasured) and leaves its rate out. Such a measurement must
    report exactly that; it is taken again, up to MEASURED_TRIES times, and only if the load thread
    was never measured is the test skipped, with the load threads' CPU fractions measured.
    """
    seen = []
    for _ in range(MEASURED_TRIES):
        m = loaded.run(**kwargs)
        if all(sample["load_threads_unmeasured"] == 0 for sample in m.samples):
            return m
        for sample in m.samples:  # an unmeasured thread's rate and bytes are left out, not guessed
            assert 0 <= sample["load_threads_unmeasured"] <= kwargs["load_threads"], sample
            if sample["load_threads_unmeasured"] == kwargs["load_threads"]:
                assert sample["load_GB_per_s"] == 0 and sample["load_bytes"] == 0, sample
        seen.append(", ".join(f"{s['load_threads_unmeasured']:.0f} unmeasured at load_cpu_fraction "
                              f"{s['load_cpu_fraction']:.2f}" for s in m.samples))
    pytest.skip(f"the load thread was never measured inside the chaser's window in {MEASURED_TRIES} "
                f"measurements (this machine kept it off its CPU): " + " | ".join(seen))


def threads_now() -> int:
    return memlab_thread_count()


def core_config(**overrides):
    config = dict(working_set_bytes=1 << 20, pages="4k", load_threads=1, load_op="read",
                  load_working_set_bytes=1 << 20, delay_ns=0, load_chunk_bytes=0,
                  cpus=array.array("i", CPUS[:2]))
    config.update(overrides)
    return config


# ---- threads: placed, measured together, joined -------------------------------------------


@pytest.mark.parametrize("op", loaded.LOAD_OPS)
def test_chaser_and_load_thread_run_on_their_cores_and_are_joined(op):
    two_cpus()
    before = threads_now()
    m = measured_load(load_threads=1, load_op=op, **SMALL, **FAST)
    assert m.median("ran_on_cpu_chaser") == CPUS[0]
    assert m.median("ran_on_cpu_load_0") == CPUS[1]
    assert m.median("load_threads_unmeasured") == 0  # its rate is from inside the chaser's window
    assert m.median("load_GB_per_s") > 0
    reads, writes = bandwidth.BYTES_READ_WRITTEN[op]  # the bandwidth family's count
    for sample in m.samples:
        rate = sample["load_GB_per_s"]
        assert sample["load_read_GB_per_s"] == pytest.approx(reads * rate)
        assert sample["load_write_GB_per_s"] == pytest.approx(writes * rate)
        assert sample["load_traffic_GB_per_s"] == pytest.approx((reads + writes) * rate)
    assert m.median("ns_per_element") > 0
    for sample in m.samples:
        # the chaser reads one 64-byte line per step; all the threads' traffic is the load's plus that
        assert sample["chaser_GB_per_s"] == pytest.approx(64 / sample["ns_per_element"])
        assert sample["total_traffic_GB_per_s"] == pytest.approx(sample["load_traffic_GB_per_s"]
                                                                 + sample["chaser_GB_per_s"])
    # CPU time over steps: the chaser's own CPU time, never above its wall-clock latency. The two
    # clocks are read one after the other and thread CPU time is accounted in ticks, so a short
    # sample may read a little over (0.4% has been seen); summing the load thread's CPU time in
    # by mistake would read about twice.
    for sample in m.samples:
        assert 0 < sample["on_cpu_ns_per_element"] <= sample["ns_per_element"] * 1.05
    assert threads_now() == before
    # the calling thread is given its affinity back
    assert sorted(os.sched_getaffinity(0)) == CPUS


@pytest.mark.parametrize("op", loaded.LOAD_OPS)
def test_the_load_bytes_are_whole_passes_counted_read_and_written_per_mix(op):
    """A known-size run: with a 64 KiB set, every (1 MiB, unthrottled) chunk is whole passes, so the bytes
    a load thread passed over inside the window are whole passes, and the traffic is the mix's reads plus
    writes of them."""
    two_cpus()
    m = measured_load(load_threads=1, load_op=op, working_set_bytes=1 << 20, load_working_set_bytes=CHUNK_BYTES,
                      repeat=2, warmup=0, target_seconds=0.03, counters=False)
    reads, writes = bandwidth.BYTES_READ_WRITTEN[op]
    for sample in m.samples:
        assert sample["load_bytes"] > 0 and sample["load_bytes"] % CHUNK_BYTES == 0
        assert sample["load_traffic_bytes"] == (reads + writes) * sample["load_bytes"]
    row = m.to_row()
    assert row["load_op"] == op  # the mix is named in the rows


@pytest.mark.parametrize("delay, asked, chunk", [(0, 0, loaded.UNTHROTTLED_CHUNK_BYTES), (1000, 0, CHUNK_BYTES),
                                                 (0, 4096, 4096), (1000, 256 << 10, 256 << 10)])
def test_a_throttled_load_rests_after_64_kib_chunks_and_an_unthrottled_one_runs_1_mib_chunks(delay, asked, chunk):
    """The chunk a load thread ran, measured over the window (bytes over chunks): a 1 MiB set is one
    unthrottled chunk per pass, or sixteen throttled ones; load_chunk_bytes, when given, is the chunk."""
    two_cpus()
    m = measured_load(load_threads=1, delay_ns=delay, load_chunk_bytes=asked, **SMALL, **FAST)
    assert m.median("load_threads_unmeasured") == 0
    for sample in m.samples:
        assert sample["load_bytes_per_chunk"] == chunk


def test_no_load_thread_measures_the_idle_latency():
    before = threads_now()
    m = loaded.run(load_threads=0, **SMALL, **FAST)
    assert m.median("load_GB_per_s") == 0
    assert m.median("load_bytes_per_chunk") == 0  # no load thread, no chunk
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


@pytest.mark.ctrl_c
def test_ctrl_c_stops_the_chaser_and_joins_the_load_threads():
    two_cpus()
    before = threads_now()
    kernel = Kernel("loaded", core_config())
    interrupt_measure(kernel)  # KeyboardInterrupt well before the sample's 30 s deadline
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
    ({"load_op": "triad"}, "load_op='triad' is not one of 'read', 'write', 'copy', 'add'"),
    ({"load_working_set_bytes": (1 << 20) + 8}, "load_working_set_bytes=1048584 is not a multiple of 64"),
    ({"delay_ns": -5}, "delay_ns=-5"),
    ({"delay_ns": 10**9}, "delay_ns=1000000000"),
    ({"load_chunk_bytes": 100}, "load_chunk_bytes=100 is not a multiple of 64"),
    ({"load_chunk_bytes": -64}, "load_chunk_bytes=-64"),
    ({"load_chunk_bytes": 2 << 30}, "load_chunk_bytes=2147483648"),
])
def test_bad_parameters_are_value_errors_naming_them(params, name):
    with pytest.raises(ValueError, match=name):
        loaded.LoadedParams(**{**SMALL, "load_threads": 0, **params})


def test_the_c_core_refuses_a_chunk_not_of_whole_lines():
    with pytest.raises(ValueError, match="load_chunk_bytes=100 is not a multiple of 64"):
        Kernel("loaded", core_config(load_chunk_bytes=100))


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
    assert sorted(labels) == sorted(["load_op=read (reads only, 1 load thread, knee 0.2 GB/s, 92 ns)",
                                     "load_op=copy (1 read : 1 write, 1 load thread, no knee: rising)",
                                     "idle + 10% (the knee's band)"])
    # read stays within 10% of 90 ns up to 0.2 GB/s (92 ns), then 110 ns: its knee is marked; copy is
    # 184 ns already at its lightest load (0.4 GB/s): no flat part, no mark
    marks = [line for line in ax.get_lines() if line.get_marker() == "D"]
    assert [(list(m.get_xdata()), list(m.get_ydata())) for m in marks] == [([0.2], [92.0])]
    knees = {k.load_op: k for k in loaded.knees(Dataset(rows))}
    assert knees["read"].status == "knee" and knees["copy"].status == "rising"


def _curve_rows(points, idle_ns=100.0, op="add"):
    rows = [{"family": "loaded", "load_threads": 0, "load_op": "read", "delay_ns": 0,
             "ns_per_element": idle_ns, "load_traffic_GB_per_s": 0.0}]
    rows += [{"family": "loaded", "load_threads": 1, "load_op": op, "delay_ns": 1000 * i,
              "ns_per_element": ns, "load_traffic_GB_per_s": gbs} for i, (gbs, ns) in enumerate(points)]
    return Dataset(rows)


def test_knee_of_a_curve_flat_then_steep_is_the_last_point_within_the_band():
    points = [(12.0, 400.0), (0.5, 101.0), (2.0, 103.0), (6.0, 108.0), (9.0, 125.0), (11.0, 200.0)]
    knee = loaded.find_knee(points, 100.0)
    assert (knee.status, knee.GB_per_s, knee.ns_per_element, knee.points) == ("knee", 6.0, 108.0, 6)
    assert "up to 6 GB/s" in knee.reason and "25% above it at 9 GB/s" in knee.reason
    # a wider band moves it out, a narrower one in
    assert loaded.find_knee(points, 100.0, tolerance=0.3).GB_per_s == 9.0
    assert loaded.find_knee(points, 100.0, tolerance=0.02).GB_per_s == 0.5
    # the first exit marks it: a point back inside the band later does not move it
    assert loaded.find_knee(points + [(13.0, 104.0)], 100.0).GB_per_s == 6.0
    # the same through a dataset: per mix, named, with the idle latency from the load_threads=0 row
    [found] = loaded.knees(_curve_rows(points))
    assert (found.load_op, found.status, found.GB_per_s, found.idle_ns_per_element) == ("add", "knee", 6.0, 100.0)
    table = loaded.knee_table(_curve_rows(points))
    assert "add      2 reads : 1 write" in table and " knee " in table and "108" in table


def test_a_flat_curve_has_no_knee_and_says_how_far_it_stayed_flat():
    knee = loaded.find_knee([(1.0, 99.0), (4.0, 104.0), (8.0, 109.5)], 100.0)
    assert knee.status == "flat" and knee.GB_per_s is None and knee.ns_per_element is None
    assert "up to 8 GB/s" in knee.reason and "no knee" in knee.reason


def test_a_curve_rising_from_the_lightest_load_has_no_flat_part():
    rising = [(gbs, 100.0 * (1 + 0.2 * gbs)) for gbs in (1.0, 2.0, 4.0, 8.0)]  # monotone, 20% at the first
    knee = loaded.find_knee(rising, 100.0)
    assert knee.status == "rising" and knee.GB_per_s is None
    assert "20% above the idle 100 ns at the lightest load measured (1 GB/s)" in knee.reason


def test_too_few_points_or_no_idle_latency_say_so():
    knee = loaded.find_knee([(1.0, 100.0), (9.0, 300.0)], 100.0)
    assert knee.status == "too few points" and "2 loaded points: a knee needs at least 3" in knee.reason
    assert loaded.find_knee([(1.0, 100.0), (9.0, 300.0)], 100.0, min_points=2).status == "knee"
    rows = [r for r in _curve_rows([(1.0, 100.0), (2.0, 101.0), (3.0, 300.0)]).rows if r["load_threads"]]
    [knee] = loaded.knees(Dataset(rows))
    assert knee.status == "no idle point" and "load_threads=0" in knee.reason
    with pytest.raises(ValueError, match="tolerance=-0.1 must be a finite number >= 0"):
        loaded.find_knee([], 100.0, tolerance=-0.1)


def test_figure_marks_the_knee_of_each_mix():
    pytest.importorskip("matplotlib")
    fig = loaded.figure(_curve_rows([(0.5, 101.0), (2.0, 103.0), (6.0, 108.0), (9.0, 125.0)]))
    ax = fig.axes[0]
    marks = [line for line in ax.get_lines() if line.get_marker() == "D"]
    assert [(list(m.get_xdata()), list(m.get_ydata())) for m in marks] == [([6.0], [108.0])]
    assert any("(2 reads : 1 write, 1 load thread, knee 6 GB/s, 108 ns)" in t.get_text()
               for t in ax.get_legend().get_texts())
    band = [line for line in ax.get_lines() if list(line.get_ydata()) == pytest.approx([110.0, 110.0])]
    assert band  # the band: idle + 10%


def test_quick_sweep_measures_and_draws():
    pytest.importorskip("matplotlib")
    two_cpus()
    sweep = loaded.FAMILY.sweep("quick")
    rows = [loaded.run({**point, **SMALL}, repeat=1, warmup=0, target_seconds=0.02, counters=False).to_row()
            for point in sweep.points]
    fig = loaded.figure(Dataset(rows))
    assert fig.axes[0].get_lines()
    assert statistics.median(r["ns_per_element"] for r in rows) > 0
