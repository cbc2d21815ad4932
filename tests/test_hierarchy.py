"""memlab.hierarchy: the cache edges read off a latency curve, kept under the machine's fingerprint,
the regions they give, and the points ``memlab reproduce`` adds so that each region is measured.

The curves here are synthetic (plateaus at chosen sizes), so the edges are known; one test measures a
short real curve and asserts only its shape, never what this CPU's caches are.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math

import pytest

from memlab import catalogue, cli, hierarchy
from memlab.catalogue import Claim, Item, NotMeasurable, Number
from memlab.dataset import Dataset
from memlab.grid import Sweep
from memlab.hierarchy import Hierarchy, Level

reproducing = importlib.import_module("memlab.reproduce")

KiB, MiB = 1 << 10, 1 << 20


def sysfs(l1=48 * KiB, l2=1 * MiB, l3=32 * MiB):
    caches = [{"level": 1, "type": "Data", "size_bytes": l1}, {"level": 1, "type": "Instruction", "size_bytes": l1},
              {"level": 2, "type": "Unified", "size_bytes": l2}]
    if l3:
        caches.append({"level": 3, "type": "Unified", "size_bytes": l3})
    return {"caches": caches}


def curve(steps, top=256 * MiB, metric="ns_per_element"):
    """Rows of a random walk, three working sets per doubling from 4 KiB to ``top``: latency
    ``value`` up to (and including) each step's size, then the next step's."""
    rows = []
    for size in hierarchy.curve_sizes(top):
        value = next((v for edge, v in steps if size <= edge), steps[-1][1])
        rows.append({"working_set_bytes": size, metric: value})
    return rows


@pytest.fixture(autouse=True)
def own_machine_folder(tmp_path_factory, monkeypatch):
    """Each test its own per-machine cache folder: a hierarchy another test kept for this machine
    would stand in for the measurement a test counts."""
    folder = tmp_path_factory.mktemp("machine-cache")
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(folder))
    return folder


def below(size):
    """The largest curve size not above ``size`` (where an edge lands on the curve's grid)."""
    return max(s for s in hierarchy.curve_sizes(size))


# ---- the edges from synthetic curves --------------------------------------------------------------


def test_three_caches_and_memory_give_three_edges():
    rows = curve([(32 * KiB, 1.0), (1 * MiB, 4.0), (16 * MiB, 12.0), (math.inf, 90.0)])
    found = hierarchy.from_curve(rows, sysfs(l1=32 * KiB, l2=1 * MiB, l3=16 * MiB))
    assert [(level.name, level.edge_bytes) for level in found.caches] == [
        ("L1d", 32 * KiB), ("L2", 1 * MiB), ("L3", 16 * MiB)]
    assert found.l1d_bytes == 32 * KiB and found.l2_bytes == 1 * MiB and found.last_cache.name == "L3"
    assert found.memory_latency_ns == 90.0
    assert [level.latency_ns for level in found.caches] == [1.0, 4.0, 12.0]
    assert found.caches[0].next_bytes == min(s for s in hierarchy.curve_sizes(256 * MiB) if s > 32 * KiB)
    assert found.sysfs == {"L1d": 32 * KiB, "L2": 1 * MiB, "L3": 16 * MiB}


def test_a_vm_reporting_its_hosts_l3_gets_the_l3_it_measured():
    """sysfs says 480 MiB; the curve's third plateau ends at 32 MiB. cache_levels names the memory
    plateau "L3" (it is below 480 MiB); the hierarchy takes the last plateau as memory whatever its
    name."""
    rows = curve([(48 * KiB, 1.0), (1 * MiB, 4.0), (32 * MiB, 14.0), (math.inf, 110.0)])
    found = hierarchy.from_curve(rows, sysfs(l3=480 * MiB))
    assert found.last_cache.name == "L3"
    assert found.last_cache.edge_bytes == below(32 * MiB)
    assert found.last_cache.sysfs_bytes == 480 * MiB
    assert found.memory_latency_ns == 110.0


def test_an_l3_the_curve_does_not_show_leaves_the_l2_as_the_last_cache():
    rows = curve([(48 * KiB, 1.0), (800 * KiB, 4.0), (math.inf, 150.0)], top=128 * MiB)
    found = hierarchy.from_curve(rows, sysfs())
    assert [level.name for level in found.caches] == ["L1d", "L2"]
    assert found.last_cache.name == "L2" and found.last_cache.edge_bytes == below(800 * KiB)
    assert "l3" not in hierarchy.regions(found, 16 << 30)


def test_steps_inside_one_sysfs_cache_are_one_level():
    """A random walk's latency climbs in steps inside a large L2 when its misses go far (here 4 ns,
    then 10 ns, both within sysfs's 1 MiB L2): one L2, with the first step's latency."""
    rows = curve([(48 * KiB, 1.0), (256 * KiB, 4.0), (800 * KiB, 10.0), (math.inf, 150.0)], top=128 * MiB)
    found = hierarchy.from_curve(rows, sysfs())
    assert [(level.name, level.edge_bytes) for level in found.caches] == [
        ("L1d", below(48 * KiB)), ("L2", below(800 * KiB))]
    assert found.caches[1].latency_ns == 4.0


def test_a_climb_inside_main_memory_is_not_a_cache():
    """Page walks lengthen as a walk through memory grows (150 ns, then 200 ns past 32 MiB on a VM
    whose host maps it with small pages): 1.33x is not a cache level; the step into memory is."""
    rows = curve([(48 * KiB, 1.0), (1 * MiB, 4.0), (32 * MiB, 150.0), (math.inf, 200.0)], top=256 * MiB)
    found = hierarchy.from_curve(rows, sysfs(l3=480 * MiB))
    assert [level.name for level in found.caches] == ["L1d", "L2"]
    assert 150.0 <= found.memory_latency_ns <= 200.0


def test_without_sysfs_sizes_every_plateau_is_a_level():
    rows = curve([(32 * KiB, 1.0), (512 * KiB, 4.0), (8 * MiB, 12.0), (math.inf, 90.0)], top=64 * MiB)
    found = hierarchy.from_curve(rows, {})
    assert [level.name for level in found.caches] == ["L1d", "L2", "L3"]
    assert all(level.sysfs_name is None and level.sysfs_bytes is None for level in found.caches)


def test_the_on_cpu_time_is_read_where_every_row_has_it():
    rows = curve([(32 * KiB, 1.0), (1 * MiB, 4.0), (math.inf, 90.0)], top=64 * MiB)
    for row in rows:  # wall time preempted everywhere: flat; on CPU: the real steps
        row["cpu_ns_per_element"], row["ns_per_element"] = row["ns_per_element"], 500.0
    found = hierarchy.from_curve(rows, sysfs())
    assert [level.edge_bytes for level in found.caches] == [32 * KiB, 1 * MiB]
    assert dict(found.curve)[4096] == 1.0


def test_too_short_a_curve_is_a_value_error():
    with pytest.raises(ValueError, match="at least 3 working-set sizes"):
        hierarchy.from_curve([{"working_set_bytes": 4096, "ns_per_element": 1.0}], sysfs())


def test_a_hierarchy_survives_json():
    found = hierarchy.from_curve(curve([(32 * KiB, 1.0), (1 * MiB, 4.0), (math.inf, 90.0)], top=64 * MiB),
                                 sysfs(), fingerprint={"cpu_model": "X"}, fingerprint_id="abc", seconds=3.5)
    assert Hierarchy.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    with pytest.raises(ValueError, match="not a measured hierarchy"):
        Hierarchy.from_dict({"caches": [{"name": "L1d"}], "curve": []})


def test_the_curve_stops_past_the_last_cache_sysfs_reports():
    assert hierarchy.largest_curve_bytes({"L1d": 48 * KiB, "L2": 1 * MiB, "L3": 32 * MiB}, 24 << 30) == 128 * MiB
    assert hierarchy.largest_curve_bytes({"L3": 480 * MiB}, 24 << 30) == hierarchy.TOP_MAX_BYTES
    assert hierarchy.largest_curve_bytes({}, 24 << 30) == hierarchy.TOP_MIN_BYTES
    assert hierarchy.largest_curve_bytes({"L3": 32 * MiB}, 256 * MiB) == 32 * MiB  # an eighth of what is free
    sizes = hierarchy.curve_sizes(64 * KiB)
    assert sizes[0] == 4096 and sizes[-1] == 64 * KiB and all(size % 64 == 0 for size in sizes)
    assert len(sizes) == 4 * hierarchy.PER_DOUBLING + 1
    with pytest.raises(ValueError, match="largest_bytes=1024"):
        hierarchy.curve_sizes(1024)


def test_measure_walks_the_curve_and_reports_each_point():
    """A short real curve (4 KiB to 64 KiB): its points, the progress calls and this machine's
    fingerprint; what its plateaus are depends on the CPU and is not asserted."""
    calls = []
    found = hierarchy.measure(largest_bytes=64 * KiB, repeat=1, target_seconds=0.002,
                              on_point=lambda done, total: calls.append((done, total)))
    sizes = hierarchy.curve_sizes(64 * KiB)
    assert [size for size, _ in found.curve] == sizes  # one point a set: the median of its walks
    assert all(ns > 0 for _, ns in found.curve)
    walks = hierarchy.RUNS * len(sizes)
    assert calls == [(done, walks) for done in range(1, walks + 1)]
    assert found.fingerprint_id and found.fingerprint and found.measured_at.endswith("Z")
    with pytest.raises(ValueError, match="runs=0"):
        hierarchy.measure(largest_bytes=64 * KiB, runs=0)


def test_a_sets_latency_is_the_median_of_its_walks():
    """Three walks of the curve, one disturbed at 2 MiB (another job in the L3 that minute): the
    median keeps the L3's latency there, so the edge does not move."""
    steps = [(32 * KiB, 1.0), (1 * MiB, 4.0), (4 * MiB, 15.0), (math.inf, 150.0)]
    walks = [curve(steps) for _ in range(3)]
    for row in walks[1]:
        if row["working_set_bytes"] == 2 * MiB:
            row["ns_per_element"] = 150.0
    found = hierarchy.from_curve([row for walk in walks for row in walk], sysfs(l1=32 * KiB, l3=8 * MiB))
    assert len(found.curve) == len(walks[0]) and dict(found.curve)[2 * MiB] == 15.0
    assert [level.edge_bytes for level in found.caches] == [below(32 * KiB), below(1 * MiB), below(4 * MiB)]


def test_an_edge_is_where_the_plateau_still_holds_not_inside_the_climb():
    """An L2 shared with the host's other tenants climbs over several sets (4 ns at 128 KiB, 6.5,
    8, 9 ... 15 at 512 KiB) instead of stepping: wherever the least-squares split puts the boundary
    inside that climb, the edge is the last set at most 1.5x the plateau's lower quartile."""
    climb = {161 * KiB: 6.5, 203 * KiB: 8.1, 256 * KiB: 9.0, 322 * KiB: 13.0, 406 * KiB: 14.5}
    rows = []
    for row in curve([(32 * KiB, 1.3), (128 * KiB, 4.0), (1 * MiB, 15.4), (math.inf, 150.0)]):
        size = row["working_set_bytes"]
        nearest = min(climb, key=lambda edge: abs(edge - size))
        if abs(nearest - size) < 8 * KiB:
            row["ns_per_element"] = climb[nearest]
        rows.append(row)
    found = hierarchy.from_curve(rows, sysfs(l1=32 * KiB, l2=512 * KiB, l3=32 * MiB))
    l2 = found.level("L2")
    assert l2 is not None and l2.edge_bytes == below(128 * KiB)
    assert l2.next_bytes == min(size for size in hierarchy.curve_sizes(256 * MiB) if size > below(128 * KiB))
    # a plateau that holds to its end keeps its last set
    assert found.level("L1d").edge_bytes == below(32 * KiB)


# ---- kept under the fingerprint ---------------------------------------------------------------------


def synthetic(l1=32 * KiB, l2=1 * MiB, l3=32 * MiB, available=16 << 30) -> Hierarchy:
    caches = [Level("L1d", l1, None, 1.0, None, "L1d", l1), Level("L2", l2, None, 4.0, None, "L2", l2)]
    if l3:
        caches.append(Level("L3", l3, None, 14.0, None, "L3", l3))
    return Hierarchy(tuple(caches), 100.0, ((4096, 1.0), (l2, 4.0)), memory_available_bytes=available)


class Counting:
    def __init__(self, found: Hierarchy | None = None):
        self.calls, self.found = 0, found or synthetic()

    def __call__(self, on_point=None):
        self.calls += 1
        return self.found


def test_the_hierarchy_is_kept_and_measured_again_for_another_fingerprint(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLAB_FAKE_FINGERPRINT", raising=False)
    measure = Counting()
    found, why = hierarchy.obtain(tmp_path, measuring=measure)
    assert measure.calls == 1 and why == "measured" and found == measure.found
    assert (tmp_path / hierarchy.CACHE_FILE).exists()
    kept, why = hierarchy.obtain(tmp_path, measuring=measure)
    assert measure.calls == 1 and kept == found and why.startswith("kept in")
    assert hierarchy.load(tmp_path) == found
    monkeypatch.setenv("MEMLAB_FAKE_FINGERPRINT", json.dumps({"cpu_model": "Another CPU"}))
    assert hierarchy.load(tmp_path) is None
    _, why = hierarchy.obtain(tmp_path, measuring=measure)
    assert measure.calls == 2 and "fingerprint differs" in why
    _, why = hierarchy.obtain(tmp_path, measuring=measure)
    assert measure.calls == 2


def test_a_hierarchy_kept_for_this_machine_serves_every_output_folder(tmp_path, own_machine_folder):
    """Two runs into two folders judge in the same regions: the second takes the hierarchy the
    first kept for this machine (and copies it into its folder); --remeasure replaces both."""
    measure = Counting()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    found, why = hierarchy.obtain(first, measuring=measure)
    assert measure.calls == 1 and why == "measured"
    assert hierarchy.load(own_machine_folder) == found
    kept, why = hierarchy.obtain(second, measuring=measure)
    assert measure.calls == 1 and kept == found
    assert why.startswith(f"kept for this machine in {own_machine_folder / hierarchy.CACHE_FILE}")
    assert "--remeasure" in why and hierarchy.load(second) == found
    measure.found = synthetic(l2=2 * MiB)
    again, why = hierarchy.obtain(second, measuring=measure, remeasure=True)
    assert measure.calls == 2 and again.l2_bytes == 2 * MiB
    assert hierarchy.load(own_machine_folder).l2_bytes == 2 * MiB and hierarchy.load(second).l2_bytes == 2 * MiB
    third = tmp_path / "third"
    third.mkdir()
    hierarchy.obtain(third, measuring=measure, machine_folder=False)
    assert measure.calls == 3


def test_a_machine_folder_that_cannot_be_written_leaves_the_output_folders_copy(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    measure = Counting()
    out = tmp_path / "out"
    out.mkdir()
    found, why = hierarchy.obtain(out, measuring=measure, machine_folder=blocked)
    assert why == "measured" and hierarchy.load(out) == found


def test_remeasure_measures_even_with_one_kept(tmp_path):
    measure = Counting()
    hierarchy.obtain(tmp_path, measuring=measure)
    measure.found = synthetic(l2=2 * MiB)
    found, why = hierarchy.obtain(tmp_path, measuring=measure, remeasure=True)
    assert measure.calls == 2 and "--remeasure" in why
    assert found.l2_bytes == 2 * MiB and hierarchy.load(tmp_path).l2_bytes == 2 * MiB


@pytest.mark.parametrize("text", ["not json", "[]", json.dumps({"format": 0, "fingerprint_id": "x", "hierarchy": {}}),
                                  json.dumps({"format": hierarchy.FORMAT, "hierarchy": {}})])
def test_a_file_that_is_not_a_kept_hierarchy_is_measured_again(tmp_path, text):
    (tmp_path / hierarchy.CACHE_FILE).write_text(text)
    measure = Counting()
    assert hierarchy.load(tmp_path) is None
    hierarchy.obtain(tmp_path, measuring=measure)
    assert measure.calls == 1


# ---- regions ----------------------------------------------------------------------------------------


def test_regions_come_from_the_measured_edges():
    bounds = hierarchy.regions(synthetic(l1=40 * KiB, l2=800 * KiB, l3=24 * MiB), 16 << 30)
    assert bounds == {"l1": (4096, 20 * KiB), "l2": (80 * KiB, 800 * KiB), "l3": (1600 * KiB, 24 * MiB),
                      "beyond_l2": (3200 * KiB, math.inf), "beyond_llc": (96 * MiB, math.inf)}
    assert hierarchy.cap_note(synthetic(l3=24 * MiB), 16 << 30) == ""
    two = hierarchy.regions(synthetic(l1=40 * KiB, l2=800 * KiB, l3=None), 16 << 30)
    assert "l3" not in two and two["beyond_llc"] == (3200 * KiB, math.inf)


def test_beyond_the_last_cache_is_also_beyond_every_cache_sysfs_reports():
    # A curve measured while other jobs shared the L3 can hide it: memory must then still be
    # judged beyond the L3 that sysfs reports, not at 4x the L2.
    hidden = dataclasses.replace(synthetic(l1=48 * KiB, l2=1 * MiB, l3=None),
                                 sysfs={"L1d": 48 * KiB, "L1i": 32 * KiB, "L2": 1 * MiB, "L3": 32 * MiB})
    assert hierarchy.regions(hidden, 64 << 30)["beyond_llc"] == (128 * MiB, math.inf)
    assert hierarchy.regions(hidden, 64 << 30)["beyond_l2"] == (4 * MiB, math.inf)  # the measured L2 still rules


def test_edges_too_close_for_a_region_between_them_give_none():
    bounds = hierarchy.regions(synthetic(l1=32 * KiB, l2=48 * KiB, l3=None), 16 << 30)
    assert "l2" not in bounds and bounds["l1"] == (4096, 16 * KiB)
    ds = Dataset([], {"hierarchy": hierarchy.attach(synthetic(l1=32 * KiB, l2=48 * KiB, l3=None), 16 << 30)})
    with pytest.raises(NotMeasurable, match="no region in the L2"):
        catalogue.region(ds, {40 * KiB: 1.0}, "l2")


def test_beyond_the_last_cache_is_capped_by_free_memory_and_says_so():
    found = synthetic(l3=512 * MiB)
    assert hierarchy.regions(found, 64 << 30)["beyond_llc"] == (2048 * MiB, math.inf)
    capped = hierarchy.regions(found, 4 << 30)["beyond_llc"]
    assert capped == (512 * MiB, math.inf)  # an eighth of 4 GiB
    note = hierarchy.cap_note(found, 4 << 30)
    assert "capped" not in note and "starts at 512 MiB" in note and "4x the last cache (2 GiB)" in note
    assert "4 GiB of memory available" in note
    assert hierarchy.regions(found)["beyond_llc"] == hierarchy.regions(found, 16 << 30)["beyond_llc"]  # as measured


def test_caches_and_region_use_the_attached_hierarchy_before_sysfs():
    ds = Dataset([], {"machine": sysfs(l1=48 * KiB, l2=2 * MiB, l3=480 * MiB)})
    assert catalogue.caches(ds)["L3"] == 480 * MiB
    ds.metadata["hierarchy"] = hierarchy.attach(synthetic(l1=32 * KiB, l2=1 * MiB, l3=32 * MiB), 16 << 30)
    assert catalogue.caches(ds) == {"L1d": 32 * KiB, "L2": 1 * MiB, "L3": 32 * MiB}
    points = {8 * KiB: 1.0, 256 * KiB: 4.0, 8 * MiB: 14.0, 128 * MiB: 100.0}
    assert catalogue.region(ds, points, "l1") == {8 * KiB: 1.0}
    assert catalogue.region(ds, points, "l2") == {256 * KiB: 4.0}
    assert catalogue.region(ds, points, "l3") == {8 * MiB: 14.0}
    assert catalogue.region(ds, points, "beyond_llc") == {128 * MiB: 100.0}
    with pytest.raises(ValueError, match="where='l4'"):
        catalogue.region(ds, points, "l4")


def test_a_region_without_a_point_says_where_the_sweep_stops_and_the_last_cache_ends():
    ds = Dataset([], {"hierarchy": hierarchy.attach(synthetic(l3=32 * MiB), 16 << 30)})
    with pytest.raises(NotMeasurable) as stopped:
        catalogue.region(ds, {8 * KiB: 1.0, 8 * MiB: 14.0}, "beyond_llc")
    assert str(stopped.value).startswith("the sweep stops at 8 MiB, the last cache ends at 32 MiB")
    with pytest.raises(NotMeasurable, match="no working set in the L2 .* was measured"):
        catalogue.region(ds, {8 * KiB: 1.0, 8 * MiB: 14.0}, "l2")
    without_l3 = Dataset([], {"hierarchy": hierarchy.attach(synthetic(l3=None), 16 << 30)})
    with pytest.raises(NotMeasurable, match="no region in the last cache beyond the L2: .* end at the L2"):
        catalogue.region(without_l3, {8 * MiB: 14.0}, "l3")
    capped = Dataset([], {"hierarchy": hierarchy.attach(synthetic(l3=512 * MiB), 4 << 30)})
    with pytest.raises(NotMeasurable, match="starts at 512 MiB here"):
        catalogue.region(capped, {8 * MiB: 14.0}, "beyond_llc")


def test_a_claim_beyond_the_last_cache_is_not_measurable_with_the_reason():
    """Figure 3.24's read/write claim beyond the last cache, judged on a sweep that stops at 8 MiB
    where the measured last cache ends at 32 MiB."""
    rows = [{"family": "bandwidth", "op": op, "working_set_bytes": size, "threads": 1, "background_op": "none",
             "stores": "normal", "bytes_per_cycle": rate, "on_cpu_bytes_per_cycle": rate}
            for op in ("read", "write", "copy") for size, rate in ((8 * KiB, 32.0), (256 * KiB, 20.0), (8 * MiB, 10.0))]
    judged = reproducing.judge("fig3.24", Dataset(rows, {"machine": sysfs()}), measured=synthetic(l3=32 * MiB))
    details = [v.detail for v in judged.verdicts if v.status == catalogue.NOT_MEASURABLE]
    assert any("the sweep stops at 8 MiB, the last cache ends at 32 MiB" in d for d in details), details


# ---- the sweeps reach every region --------------------------------------------------------------------


def chase_sweep(points, name="s"):
    return Sweep(name, "chase", [dict(p) for p in points], repeat=1, warmup=0)


def test_each_series_gets_a_point_in_each_region_it_lacks():
    found = synthetic(l1=32 * KiB, l2=1 * MiB, l3=32 * MiB)
    quick = chase_sweep([{"working_set_bytes": s, "order": o} for o in ("random", "sequential")
                         for s in (8 * KiB, 256 * KiB, 8 * MiB)])
    full = chase_sweep([{"working_set_bytes": 1 << k, "order": o} for o in ("random", "sequential")
                        for k in range(10, 29)])
    added = reproducing.region_points(quick, found, 16 << 30, full).points[len(quick.points):]
    assert added == [{"working_set_bytes": 128 * MiB, "order": "random"},
                     {"working_set_bytes": 128 * MiB, "order": "sequential"}]
    assert reproducing.region_points(quick, found, 16 << 30, full).points[:len(quick.points)] == quick.points


def test_a_region_the_full_sweep_stops_short_of_gets_no_point():
    found = synthetic(l3=32 * MiB)
    quick = chase_sweep([{"working_set_bytes": 8 * KiB}, {"working_set_bytes": 256 * KiB}])
    full = chase_sweep([{"working_set_bytes": 1 << k} for k in range(10, 25)])  # stops at 16 MiB
    assert [p["working_set_bytes"] for p in reproducing.region_points(quick, found, 16 << 30, full).points] == [
        8 * KiB, 256 * KiB, 8 * MiB]  # the L3's point, none beyond it


def test_without_a_full_sweep_the_region_sizes_are_powers_of_two_inside():
    found = synthetic(l1=40 * KiB, l2=800 * KiB, l3=None)
    sweep = chase_sweep([{"working_set_bytes": 300 * KiB}])
    sizes = [p["working_set_bytes"] for p in reproducing.region_points(sweep, found, 16 << 30).points]
    assert sizes == [300 * KiB, 8 * KiB, 4 * MiB]


def test_a_size_the_family_refuses_is_not_added():
    """A last cache of 32 TiB puts "beyond" at 128 TiB, above the chase's largest working set (64 TiB)."""
    found = synthetic(l3=32 << 40)
    sweep = chase_sweep([{"working_set_bytes": 8 * KiB}, {"working_set_bytes": 256 * KiB}])
    points = reproducing.region_points(sweep, found, 1 << 52).points
    assert [p["working_set_bytes"] for p in points] == [8 * KiB, 256 * KiB, 8 << 30]  # the L3's, none beyond
    assert hierarchy.with_region_points(sweep.points, {"l3": (1 << 20, 1 << 22)}, accept=lambda point: False) == \
        sweep.points


def test_a_full_sweep_gets_points_only_within_its_own_reach():
    found = synthetic(l1=32 * KiB, l2=1 * MiB, l3=32 * MiB)
    items = catalogue.select(["fig6.5", "fig3.10"])
    plain = {t.name: t for t in reproducing.plan(items, False, "/nowhere")}
    planned = {t.name: t for t in reproducing.plan(items, False, "/nowhere", measured=found, available_bytes=16 << 30)}
    for name, task in planned.items():
        largest = max(p["working_set_bytes"] for p in plain[name].sweep.points)
        assert max(p["working_set_bytes"] for p in task.sweep.points) == largest, name


def test_a_sweep_without_working_sets_is_left_alone():
    sweep = Sweep("q", "calibrate", [{}], repeat=1)
    assert reproducing.region_points(sweep, synthetic(), 16 << 30) is sweep


def test_plan_adds_the_region_points_to_the_quick_sweeps():
    found = synthetic(l1=32 * KiB, l2=1 * MiB, l3=32 * MiB)
    items = catalogue.select(["fig3.15", "table6.1"])
    plain = {t.name: t for t in reproducing.plan(items, True, "/nowhere")}
    planned = {t.name: t for t in reproducing.plan(items, True, "/nowhere", measured=found, available_bytes=16 << 30)}
    chase_task = planned["chase.fig3_15_quick"]
    sizes = {p["working_set_bytes"] for p in chase_task.sweep.points}
    assert 128 * MiB in sizes and len(chase_task.sweep.points) > len(plain["chase.fig3_15_quick"].sweep.points)
    assert chase_task.path == plain["chase.fig3_15_quick"].path
    assert planned["matrix_init.table_6_1_quick"].sweep.points == plain["matrix_init.table_6_1_quick"].sweep.points


# ---- reproduce and its command line -----------------------------------------------------------------------


def tiny_chase(sweep: Sweep) -> Sweep:
    return Sweep("tiny", "chase", [{"working_set_bytes": 4096, "npad": 0, "order": "sequential"}],
                 repeat=1, warmup=0, target_seconds=0.002)


def _walks(ds: Dataset):
    sizes = sorted({row["working_set_bytes"] for row in ds.rows})
    return catalogue.verdict(True, f"measured {sizes}")


def _beyond(ds: Dataset):
    found = catalogue.region(ds, catalogue.curve(ds, "ns_per_element"), "beyond_llc")
    return catalogue.verdict(True, f"beyond the last cache: {sorted(found)}")


@pytest.fixture
def chase_catalogue(monkeypatch):
    entry = Item(key="walk", source="drepper", section="0.0", label="Figure 0.2", title="a tiny walk",
                 sweep="chase.fig3_10", quick=tiny_chase, measured="a walk", machine="none",
                 numbers=(Number("ns", 1.0, "ns", lambda ds: catalogue.value_of(ds, "ns_per_element")),),
                 claims=(Claim("it walks", "nowhere 1.1", _walks), Claim("beyond", "nowhere 1.2", _beyond)),
                 script="experiments/fig3_10.py", notebook="notebooks/chase.ipynb", note="A stand-in item.")
    monkeypatch.setattr(catalogue, "ITEMS", (entry,))
    tiny = Hierarchy((Level("L1d", 8 * KiB, None, 1.0, None, None, None),
                      Level("L2", 16 * KiB, None, 4.0, None, None, None)), 90.0, ((4096, 1.0),),
                     memory_available_bytes=16 << 30)
    measure = Counting(tiny)
    monkeypatch.setattr(hierarchy, "measure", measure)
    return measure


def test_reproduce_measures_the_hierarchy_once_and_reaches_its_regions(chase_catalogue, tmp_path, capsys):
    assert cli.main(["reproduce", "walk", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert chase_catalogue.calls == 1 and (tmp_path / hierarchy.CACHE_FILE).exists()
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    assert verdicts["hierarchy"]["regions"]["beyond_llc"] == [64 * KiB, None]
    assert "the L2 ends at 16 KiB" in verdicts["hierarchy"]["note"]
    claims = verdicts["items"][0]["claims"]
    assert claims[0]["detail"] == f"measured {[4096, 16384, 65536]}"  # 16 KiB: the L2; 64 KiB: beyond
    assert claims[1]["status"] == catalogue.REPRODUCED and "65536" in claims[1]["detail"]
    assert "caches: measured here" in capsys.readouterr().err
    assert "Regions the claims are judged in" in (tmp_path / "report.html").read_text()
    assert "3/3 points" in reproducing.listing(catalogue.select(["walk"]), quick=True, out=tmp_path)
    assert cli.main(["reproduce", "walk", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert chase_catalogue.calls == 1
    assert cli.main(["reproduce", "walk", "--quick", "--out", str(tmp_path), "--no-progress", "--remeasure"]) == 0
    assert chase_catalogue.calls == 2
    assert "measured again (--remeasure)" in capsys.readouterr().err


def _clock(ds: Dataset):
    return catalogue.verdict(True, "ticks")


def test_reproduce_without_working_set_sweeps_measures_no_hierarchy(monkeypatch, tmp_path):
    def never(**options):
        raise AssertionError("the hierarchy was measured for items without working sets")

    entry = Item(key="clock", source="drepper", section="0.0", label="Figure 0.1", title="the clock",
                 sweep="calibrate.quick", quick="calibrate.quick", measured="a dependent add chain", machine="none",
                 numbers=(), claims=(Claim("the clock ticks", "nowhere 1.1", _clock),),
                 script="experiments/fig3_10.py", notebook="notebooks/chase.ipynb", note="A stand-in item.")
    monkeypatch.setattr(catalogue, "ITEMS", (entry,))
    monkeypatch.setattr(hierarchy, "measure", never)
    result = reproducing.reproduce(["clock"], quick=True, out=tmp_path, progress=False)
    assert result.hierarchy is None and result.hierarchy_note == ""
    assert json.loads((tmp_path / "verdicts.json").read_text())["hierarchy"] is None
