"""What the full run (``memlab reproduce``) measures beside the long fixed run (``--fixed``): its
samples (a quarter of each sweep's target, half its repetitions) and the points the items'
``full`` variants keep (figure 3.17 without the walks that repeat the whole list, figure 6.5 at
the distances a set can overflow at, the fault sweep at the points its claims read, the clearing
sweeps in a smaller region still far beyond the last cache). Nothing is measured or timed.
"""

from __future__ import annotations

import importlib

import pytest

from memlab import catalogue
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


def test_the_fault_items_full_sweep_is_the_points_their_rows_pick_and_one_task(tmp_path):
    family = get_family("clear_fault")
    for key in ("clear-fault", "bulk-populate"):
        entry = catalogue.item(key)
        full, fixed = _sweeps(key)
        picked = [p for p in fixed.points
                  if all(getattr(family.params(p), name) == value for name, value in entry.rows.items())]
        assert full.points == picked and len(picked) < len(fixed.points)
    tasks = reproducing.plan(catalogue.select(["clear-fault", "bulk-populate"]), False, tmp_path)
    assert len([t for t in tasks if t.measured_here]) == 1


def test_full_region_is_four_times_the_largest_cache_within_its_bounds():
    low, high = FULL_REGION_BYTES
    assert full_region_bytes({"L1d": 48 << 10, "L2": 2 << 20, "L3": 32 << 20}) == low  # 128 MiB -> the floor
    assert full_region_bytes({"L3": 96 << 20}) == 512 << 20  # 384 MiB rounds up to a power of two
    assert full_region_bytes({"L3": 480 << 20}) == high  # a VM reporting a large host L3: capped
    assert full_region_bytes({}) == low
    here = full_region_bytes()
    largest = max(core.cache_sizes_of(core.Dataset([], {}))[0].values(), default=0)
    assert low <= here <= high and (here >= 4 * largest or here == high)


@pytest.mark.parametrize("key", ["clear-order", "clear-extent", "clear-patch"])
def test_the_clearing_items_clear_the_full_region_and_otherwise_the_named_points(key):
    full, fixed = _sweeps(key)
    assert {p["region_bytes"] for p in full.points} == {full_region_bytes()}
    assert {p["region_bytes"] for p in fixed.points} == {1 << 30}
    strip = [{k: v for k, v in p.items() if k != "region_bytes"} for p in full.points]
    assert strip == [{k: v for k, v in p.items() if k != "region_bytes"} for p in fixed.points]


def test_clear_order_and_clear_extent_still_share_one_task_in_the_full_run(tmp_path):
    tasks = reproducing.plan(catalogue.select(["clear-order", "clear-extent"]), False, tmp_path)
    measured = [t for t in tasks if t.measured_here]
    assert len(measured) == 1 and {e.key for e in measured[0].items} == {"clear-order", "clear-extent"}


def test_every_full_variant_keeps_the_fixed_sweeps_parameters_apart_from_its_update():
    for entry in catalogue.items():
        if entry.full is None:
            continue
        try:
            full, fixed = reproducing.item_sweep(entry), reproducing.item_sweep(entry, fixed=True)
        except ValueError:  # a sweep this machine cannot build
            continue
        assert full.points, entry.key
        names = set().union(*(p.keys() for p in fixed.points))
        assert all(set(p) <= names for p in full.points), entry.key
