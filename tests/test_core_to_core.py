"""core_to_core: a cache line bounced between two pinned threads, the matrix, its figure."""

import math
import os
import statistics

import pytest

from conftest import interrupt_measure, memlab_thread_count
from memlab import core_to_core as c2c
from memlab._core import Kernel
from memlab.dataset import Dataset

CPUS = sorted(os.sched_getaffinity(0))
FAST = dict(repeat=1, warmup=0, target_seconds=0.02, counters=False)


def two_cpus() -> tuple[int, int]:
    if len(CPUS) < 2:
        pytest.skip(f"needs two CPUs this process may use; it has {CPUS}")
    return CPUS[0], CPUS[1]


def threads_now() -> int:
    return memlab_thread_count()


def one_sample(**config) -> dict:
    with Kernel("core_to_core", {"method": "cas", "lines": 16, **config}) as kernel:
        return kernel.measure(target_ns=20_000_000, counters=False)


# ---- pinning, the protocol, the threads ---------------------------------------------------


@pytest.mark.parametrize("method", c2c.METHODS)
def test_threads_run_where_asked_and_are_joined(method):
    a, b = two_cpus()
    before = threads_now()
    for cpu_a, cpu_b in ((a, b), (b, a)):
        m = c2c.run(cpu_a=cpu_a, cpu_b=cpu_b, method=method, **FAST)
        assert m.median("ran_on_cpu_a") == cpu_a
        assert m.median("ran_on_cpu_b") == cpu_b
        assert m.median("round_trip_ns") > 0
        assert m.median("one_way_ns") == pytest.approx(m.median("round_trip_ns") / 2)
    assert threads_now() == before


def test_every_round_trip_is_answered_once():
    a, b = two_cpus()
    sample = one_sample(cpu_a=a, cpu_b=b)
    metrics = sample["metrics"]
    # A counts the steps it completed; B answered each of them, the last one maybe not yet
    assert sample["units"] - 1 <= metrics["answered_round_trips"] <= sample["units"]
    assert metrics["chunks"] >= 5
    assert sample["units"] >= metrics["chunks"] * metrics["round_trips_per_chunk"]
    assert metrics["fastest_chunk_round_trip_ns"] <= metrics["round_trip_ns"]
    assert 0 < metrics["cpu_fraction_a"] <= 1.05 and 0 < metrics["cpu_fraction_b"] <= 1.05


@pytest.mark.parametrize("lines", [1, 3, 16, 1024])
def test_the_chunks_take_turns_over_the_lines_and_every_round_trip_is_still_answered(lines):
    """Each line's counter goes on where that line's last chunk left it: were the two threads to
    disagree on which line or value comes next, they would wait for each other until the deadline.
    A line's median lies between the fastest chunk and the slowest line's; with one line, the one
    line's median is the sample's. 1024 lines are more than a short sample has chunks."""
    a, b = two_cpus()
    sample = one_sample(cpu_a=a, cpu_b=b, lines=lines)
    metrics = sample["metrics"]
    assert sample["units"] - 1 <= metrics["answered_round_trips"] <= sample["units"]
    assert (metrics["fastest_chunk_round_trip_ns"] <= metrics["fastest_line_round_trip_ns"]
            <= metrics["slowest_line_round_trip_ns"])
    if lines == 1:
        assert metrics["fastest_line_round_trip_ns"] == metrics["round_trip_ns"]
        assert metrics["slowest_line_round_trip_ns"] == metrics["round_trip_ns"]


@pytest.mark.ctrl_c
def test_ctrl_c_stops_and_joins_both_threads_promptly():
    a, b = two_cpus()
    before = threads_now()
    kernel = Kernel("core_to_core", {"cpu_a": a, "cpu_b": b, "method": "store", "lines": 16})
    interrupt_measure(kernel)  # KeyboardInterrupt well before the sample's 30 s deadline
    assert threads_now() == before


# A thread that cannot start leaves no thread behind: tests/test_team.py, for every team.


# ---- refusals --------------------------------------------------------------------------


def test_one_cpu_for_both_threads_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"cpu_a=0 and cpu_b=0 are one CPU: bouncing a line needs two CPUs"):
        c2c.CoreToCoreParams(cpu_a=0, cpu_b=0)
    with pytest.raises(ValueError, match=r"cpu_a=0 and cpu_b=0 are one CPU"):  # the C core says it too
        one_sample(cpu_a=0, cpu_b=0)


def test_a_cpu_this_process_may_not_use_is_refused_with_the_allowed_list():
    outside = next(cpu for cpu in range(4095, -1, -1) if cpu not in CPUS)
    allowed = ",".join(map(str, CPUS))
    with pytest.raises(ValueError, match=rf"cpu_b={outside} is not a CPU this process may use \(allowed: {allowed}"):
        c2c.run(cpu_a=CPUS[0], cpu_b=outside, **FAST)
    with pytest.raises(ValueError, match=rf"cpu_a={outside} is not a CPU this process may use"):
        one_sample(cpu_a=outside, cpu_b=CPUS[0])


@pytest.mark.parametrize("params, name", [
    ({"cpu_a": -1}, "cpu_a=-1"),
    ({"cpu_b": 4096}, "cpu_b=4096"),
    ({"cpu_a": "0"}, "cpu_a='0'"),
    ({"method": "xchg"}, "method='xchg'"),
    ({"lines": 0}, "lines=0"),
    ({"lines": 1025}, "lines=1025"),
    ({"threads": 2}, "threads"),
])
def test_bad_parameters_are_value_errors_naming_them(params, name):
    with pytest.raises((ValueError, TypeError), match=name):
        c2c.CoreToCoreParams(**params)


@pytest.mark.parametrize("config, name", [
    ({"cpu_a": -1, "cpu_b": 1}, "cpu_a"),
    ({"cpu_a": 0, "cpu_b": 5000}, "cpu_b"),
    ({"cpu_a": 0, "cpu_b": 1, "method": "xchg"}, "method"),
    ({"cpu_a": 0, "cpu_b": 1, "lines": 0}, "lines"),
    ({"cpu_a": 0, "cpu_b": 1, "lines": 1025}, "lines"),
])
def test_the_c_core_checks_its_parameters_too(config, name):
    with pytest.raises(ValueError, match=name):
        Kernel("core_to_core", {"method": "cas", "lines": 16, **config})


def test_the_cpu_option_is_refused_because_the_pair_places_the_threads():
    with pytest.raises(ValueError, match="cpu=0 does not apply to core_to_core"):
        c2c.run(cpu_a=0, cpu_b=1, cpu=0, **FAST)


# ---- the matrix ------------------------------------------------------------------------


def test_pairs_are_every_ordered_pair_of_distinct_cpus():
    assert c2c.pairs([3, 1, 2]) == [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]
    assert c2c.pairs([5]) == []
    assert c2c.pairs() == [(a, b) for a in CPUS for b in CPUS if a != b]


def test_matrix_sweeps_cover_every_pair_and_refuse_one_cpu():
    if len(CPUS) < 2:
        with pytest.raises(ValueError, match="needs two CPUs"):
            c2c.FAMILY.sweep("matrix")
        return
    full = c2c.FAMILY.sweep("matrix")
    assert sorted((p["cpu_a"], p["cpu_b"], p["method"]) for p in full.points) == sorted(
        (a, b, m) for a, b in c2c.pairs() for m in c2c.METHODS)
    quick = c2c.FAMILY.sweep("matrix_quick")
    assert {(p["cpu_a"], p["cpu_b"]) for p in quick.points} == set(c2c.pairs())
    assert [(p["cpu_a"], p["cpu_b"]) for p in c2c.FAMILY.sweep("quick").points] == [
        (CPUS[0], CPUS[1]), (CPUS[1], CPUS[0])]


def test_matrix_of_a_dataset_puts_each_pair_in_its_cell():
    rows = [{"family": "core_to_core", "cpu_a": a, "cpu_b": b, "method": m, "round_trip_ns": 10 * a + b + k}
            for k, m in enumerate(("cas", "store")) for a in (0, 1, 2) for b in (0, 1, 2) if a != b]
    cpus, values = c2c.matrix(Dataset(rows))
    assert cpus == [0, 1, 2]
    assert values[2][1] == 21 and values[0][2] == 2
    assert all(math.isnan(values[i][i]) for i in range(3))
    _, store = c2c.matrix(Dataset(rows), method="store")
    assert store[2][1] == 22
    with pytest.raises(ValueError, match="method='xchg' is not in the dataset"):
        c2c.matrix(Dataset(rows), method="xchg")


def test_the_measured_matrix_is_complete_in_both_directions():
    two_cpus()
    pairs = c2c.pairs()[:12]  # on a large machine, a corner is enough
    rows = []
    for cpu_a, cpu_b in pairs:
        m = c2c.run(cpu_a=cpu_a, cpu_b=cpu_b, repeat=5, warmup=1, target_seconds=0.03, counters=False)
        rows.append(m.to_row())
    cpus, values = c2c.matrix(Dataset(rows))
    index = {cpu: i for i, cpu in enumerate(cpus)}
    for cpu_a, cpu_b in pairs:
        there = values[index[cpu_a]][index[cpu_b]]
        assert math.isfinite(there) and there > 0
        if (cpu_b, cpu_a) in pairs:
            # both directions are in the matrix; whether they agree is a measurement (on a VM
            # the same pair's round trip moved 4x between two moments: 265 and 60 ns), not a test
            assert math.isfinite(values[index[cpu_b]][index[cpu_a]])


# ---- topology marks and the figure ---------------------------------------------------------


def make_sysfs(root, cpus):
    """cpus: (cpu, package, core, siblings, l2 sharers, l3 sharers)."""
    base = root / "sys/devices/system/cpu"
    base.mkdir(parents=True)
    (base / "online").write_text(f"0-{len(cpus) - 1}\n")
    for cpu, package, core, siblings, l2, l3 in cpus:
        topology = base / f"cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
        (topology / "core_cpus_list").write_text(",".join(map(str, siblings)) + "\n")
        for index, (level, kind, size, shared) in enumerate(
                [(1, "Data", "48K", siblings), (1, "Instruction", "32K", siblings),
                 (2, "Unified", "2048K", l2), (3, "Unified", "32768K", l3)]):
            cache = base / f"cpu{cpu}/cache/index{index}"
            cache.mkdir(parents=True)
            (cache / "level").write_text(f"{level}\n")
            (cache / "type").write_text(f"{kind}\n")
            (cache / "size").write_text(f"{size}\n")
            (cache / "shared_cpu_list").write_text(",".join(map(str, shared)) + "\n")


def test_relation_reads_smt_shared_caches_and_packages_from_sysfs(tmp_path):
    # two packages; package 0: cores {0,4} and {1,5} sharing an L2 as a pair; package 1: {2,6}, {3,7}
    p0, p1 = [0, 1, 4, 5], [2, 3, 6, 7]
    layout = [(0, 0, 0, [0, 4], p0, p0), (1, 0, 1, [1, 5], p0, p0), (2, 1, 0, [2, 6], [2, 6], p1),
              (3, 1, 1, [3, 7], [3, 7], p1), (4, 0, 0, [0, 4], p0, p0), (5, 0, 1, [1, 5], p0, p0),
              (6, 1, 0, [2, 6], [2, 6], p1), (7, 1, 1, [3, 7], [3, 7], p1)]
    make_sysfs(tmp_path, layout)
    rel = lambda a, b: c2c.relation(a, b, root=str(tmp_path))  # noqa: E731
    assert rel(0, 4) == {"smt_siblings": 1.0, "same_package": 1.0, "shared_cache_level": 1.0}
    assert rel(0, 1) == {"smt_siblings": 0.0, "same_package": 1.0, "shared_cache_level": 2.0}
    assert rel(2, 3) == {"smt_siblings": 0.0, "same_package": 1.0, "shared_cache_level": 3.0}
    assert rel(0, 2) == {"smt_siblings": 0.0, "same_package": 0.0, "shared_cache_level": 0.0}


def test_rows_carry_the_relation_of_their_pair():
    a, b = two_cpus()
    row = c2c.run(cpu_a=a, cpu_b=b, **FAST).to_row()
    for name, value in c2c.relation(a, b).items():
        assert row[name] == value


def test_figure_prints_every_value_and_the_topology_marks():
    pytest.importorskip("matplotlib")
    marks = {(0, 1): dict(smt_siblings=1, same_package=1, shared_cache_level=1),
             (0, 2): dict(smt_siblings=0, same_package=1, shared_cache_level=3),
             (1, 2): dict(smt_siblings=0, same_package=0, shared_cache_level=0)}
    rows = []
    for a in range(3):
        for b in range(3):
            if a != b:
                rel = marks[(min(a, b), max(a, b))]
                rows.append({"family": "core_to_core", "cpu_a": a, "cpu_b": b, "method": "cas",
                             "round_trip_ns": 100.0 + 10 * a + b, **rel})
    fig = c2c.figure(Dataset(rows))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert sorted(t.split("\n")[0] for t in texts) == sorted(f"{100 + 10 * a + b}" for a in range(3)
                                                           for b in range(3) if a != b)
    assert "101\nSMT" in texts and "102\nL3" in texts and "112\nx-pkg" in texts
    assert any("round trip ns" in ax.get_ylabel() for ax in fig.axes)  # the colour bar


def test_quick_sweep_measures_and_draws():
    pytest.importorskip("matplotlib")
    two_cpus()
    sweep = c2c.FAMILY.sweep("quick")
    rows = [c2c.run(point, repeat=2, warmup=0, target_seconds=0.02, counters=False).to_row()
            for point in sweep.points]
    fig = c2c.figure(Dataset(rows))
    values = [t.get_text() for t in fig.axes[0].texts]
    assert len(values) == 2
    assert statistics.median(r["round_trip_ns"] for r in rows) > 0
