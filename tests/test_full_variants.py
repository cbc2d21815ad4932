"""What the full run (``memlab reproduce``) measures beside the long fixed run (``--fixed``): its
samples (a quarter of each sweep's target, half its repetitions) and the points the items'
``full`` variants keep (figure 3.17 without the walks that repeat the whole list, figure 6.5 at
the distances a set can overflow at, the fault sweep at the points its claims read, the clearing
sweeps in a smaller region still far beyond the last cache). Nothing is measured or timed.
"""

from __future__ import annotations

import importlib
import math

import pytest

from memlab import catalogue, clear
from memlab.catalogue import core
from memlab.catalogue.clearing import FULL_REGION_BYTES, full_region_bytes
from memlab.catalogue.drepper_chase import FIG6_5_FULL_DISTANCES, PAGE_BYTES
from memlab.chase_analysis import associativity
from memlab.grid import Sweep
from memlab.registry import family as get_family

reproducing = importlib.import_module("memlab.reproduce")


@pytest.mark.parametrize(("target", "expected"), [(0.5, 0.125), (0.2, 0.05), (0.1, 0.025), (0.03, 0.01),
                                                   (0.01, 0.01), (0.004, 0.004), (None, None)])
def test_a_full_run_sample_is_a_quarter_of_the_target_not_below_the_floor(target, expected):
    full = reproducing.in_full_runs(Sweep("s", "calibrate", [{}], repeat=5, target_seconds=target), 0.05)
    if expected is None:
        assert full.target_seconds is None
    else:
        assert full.target_seconds == pytest.approx(expected)


@pytest.mark.parametrize(("repeat", "expected"), [(1, 1), (2, 2), (3, 2), (5, 3), (7, 4), (11, 6)])
def test_a_full_run_keeps_half_the_repetitions_at_least_two_never_more_than_the_sweep(repeat, expected):
    assert reproducing.in_full_runs(Sweep("s", "calibrate", [{}], repeat=repeat), 0.05).repeat == expected


def test_a_sweep_that_names_its_runs_keeps_its_samples_in_the_full_run():
    sweep = Sweep("s", "calibrate", [{}], repeat=5, target_seconds=0.2, runs=3)
    assert reproducing.in_full_runs(sweep, 0.05) is sweep


def test_full_variant_keeps_updates_and_refuses_to_leave_nothing():
    sweep = Sweep("s", "calibrate", [{"x": 1}, {"x": 2}, {"x": 3}])
    assert core.full_variant(keep=lambda p: p["x"] > 1)(sweep).points == [{"x": 2}, {"x": 3}]
    assert core.full_variant(update=lambda: {"x": 9})(sweep).points == [{"x": 9}]  # three points, now one
    with pytest.raises(ValueError, match="no point of sweep calibrate.s is left"):
        core.full_variant(keep=lambda p: False)(sweep)


def _sweeps(key: str):
    entry = catalogue.item(key)
    return reproducing.item_sweep(entry), reproducing.item_sweep(entry, fixed=True)


def test_fig3_17_full_leaves_out_exactly_the_block_walks_that_repeat_the_whole_list():
    full, fixed = _sweeps("fig3.17")
    left_out = [p for p in fixed.points if p not in full.points]
    assert left_out and all(p["order"] == "random_blocks" and p["block_pages"] * PAGE_BYTES >= p["working_set_bytes"]
                            for p in left_out)
    assert all(p in fixed.points for p in full.points)
    kept_blocks = [p for p in full.points if p["order"] == "random_blocks"]
    assert kept_blocks and all(p["block_pages"] * PAGE_BYTES < p["working_set_bytes"] for p in kept_blocks)
    # the whole-list walk keeps every working set, and every block size stays at the largest set
    assert {p["working_set_bytes"] for p in full.points if p["order"] == "random"} == \
        {p["working_set_bytes"] for p in fixed.points}
    largest = max(p["working_set_bytes"] for p in fixed.points)
    assert {p["block_pages"] for p in kept_blocks if p["working_set_bytes"] == largest} == \
        {p["block_pages"] for p in fixed.points if p["order"] == "random_blocks"}


def _surface(distances, way_elements: int, ways: int):
    return [{"element_distance": d, "working_set_bytes": 64 * n, "npad": 7,
             "ns_per_element": 5.0 if d % way_elements == 0 and n > ways else 1.5}
            for d in distances for n in range(1, 17)]


@pytest.mark.parametrize(("way_elements", "ways"), [(64, 8), (64, 12), (32, 8), (16, 4), (128, 8)])
def test_fig6_5_full_distances_read_the_same_l1d_off_the_map_as_all_128(way_elements, ways):
    everything = associativity(_surface(range(1, 129), way_elements, ways))
    thinned = associativity(_surface(FIG6_5_FULL_DISTANCES, way_elements, ways))
    for key in ("ways", "way_bytes", "l1d_bytes", "sets"):
        assert thinned[key] == everything[key]
    assert everything["l1d_bytes"] == 64 * way_elements * ways


def test_fig6_5_full_sweep_has_those_distances_at_every_length():
    full, fixed = _sweeps("fig6.5")
    assert {p["element_distance"] for p in full.points} == set(FIG6_5_FULL_DISTANCES)
    lengths = {p["working_set_bytes"] for p in fixed.points}
    assert len(full.points) == len(FIG6_5_FULL_DISTANCES) * len(lengths)
    assert all(p in fixed.points for p in full.points)


def test_the_fault_items_full_sweep_is_the_points_their_rows_pick_up_to_1_gib_and_one_task(tmp_path):
    family = get_family("clear_fault")
    for key in ("clear-fault", "bulk-populate"):
        entry = catalogue.item(key)
        full, fixed = _sweeps(key)
        picked = [p for p in fixed.points
                  if all(getattr(family.params(p), name) == value for name, value in entry.rows.items())
                  and p["region_bytes"] <= core.FULL_FAULT_MAX_REGION_BYTES
                  and clear.hugetlb_can_serve(p["pages"], p["region_bytes"])]
        assert full.points == picked and len(picked) < len(fixed.points)
        assert {p["pages"] for p in full.points} >= {"4k", "thp"}
        assert max(p["region_bytes"] for p in fixed.points) > core.FULL_FAULT_MAX_REGION_BYTES
    tasks = reproducing.plan(catalogue.select(["clear-fault", "bulk-populate"]), False, tmp_path)
    assert len([t for t in tasks if t.measured_here]) == 1


def test_a_hugetlb_point_is_kept_only_where_its_pool_holds_the_region(tmp_path):
    pool = tmp_path / "sys/kernel/mm/hugepages/hugepages-2048kB"
    pool.mkdir(parents=True)
    (pool / "free_hugepages").write_text("128\n")  # 256 MiB of 2 MiB pages
    assert clear.hugetlb_pages_free("hugetlb-2m", str(tmp_path)) == 128
    assert clear.hugetlb_can_serve("hugetlb-2m", 256 << 20, str(tmp_path))
    assert not clear.hugetlb_can_serve("hugetlb-2m", 512 << 20, str(tmp_path))
    assert clear.hugetlb_pages_free("hugetlb-1g", str(tmp_path)) == 0  # no such pool
    assert not clear.hugetlb_can_serve("hugetlb-1g", 1 << 30, str(tmp_path))
    assert clear.hugetlb_can_serve("4k", 1 << 40, str(tmp_path)) and clear.hugetlb_can_serve("thp", 1 << 40)


def test_a_fault_rate_of_pages_never_granted_is_not_measurable_not_a_4k_rate():
    from memlab.catalogue.clearing import _fault_rate
    rows = [{"pages": "hugetlb-1g", "populate": "touch", "pages_obtained": "4k", "region_bytes": 1 << 30,
             "GB_per_s": 1.1},
            {"pages": "thp", "populate": "touch", "pages_obtained": "thp", "region_bytes": 1 << 30, "GB_per_s": 10.0},
            {"pages": "thp", "populate": "touch", "pages_obtained": "4k", "region_bytes": 1 << 31, "GB_per_s": 1.0}]
    with pytest.raises(catalogue.NotMeasurable, match="no hugetlb-1g page was granted"):
        _fault_rate("hugetlb-1g")(core.Dataset(rows, {}))
    assert _fault_rate("thp")(core.Dataset(rows, {})) == 10.0  # the larger region fell back: not a THP rate
    rows[0]["pages_obtained"] = "hugetlb-1g"
    assert _fault_rate("hugetlb-1g")(core.Dataset(rows, {})) == 1.1


def test_whole_octaves_keeps_the_powers_of_two_of_a_half_octave_sweep():
    full, fixed = _sweeps("fig3.11")
    sizes = {p["working_set_bytes"] for p in fixed.points}
    assert {p["working_set_bytes"] for p in full.points} == {s for s in sizes if s & (s - 1) == 0} != sizes
    assert all(p in fixed.points for p in full.points)
    octave_sweep = Sweep("s", "chase", [{"working_set_bytes": 1 << k} for k in range(10, 20)])
    assert core.whole_octaves(octave_sweep) is octave_sweep


def test_a_region_the_octaves_miss_gets_its_point_from_the_named_sweep(tmp_path, monkeypatch):
    from memlab import hierarchy
    found = hierarchy.from_curve([{"working_set_bytes": 1 << k, "ns_per_element": 1.0 if k < 15 else
                                   4.0 if k < 20 else 80.0} for k in range(12, 27)], {"caches": []})
    # an L2 region between two octaves (32 KiB < 40-50 KiB < 64 KiB): no power of two lies in it
    monkeypatch.setattr(hierarchy, "regions", lambda found, available=None: {
        "l1": (4096, 16384), "l2": (40_000, 50_000), "beyond_l2": (1 << 22, math.inf),
        "beyond_llc": (1 << 24, math.inf)})
    tasks = reproducing.plan(catalogue.select(["fig3.10"]), False, tmp_path, measured=found,
                             available_bytes=1 << 34)
    sizes = {p["working_set_bytes"] for p in tasks[0].sweep.points}
    named = {p["working_set_bytes"] for p in reproducing._named_sweep("chase.fig3_10").points}
    assert sizes <= named
    assert [s for s in sizes if 40_000 <= s <= 50_000] == [46336], sorted(sizes)  # 2^15.5, from the named sweep
