"""Page clearing: orders, zeroed memory, fault counts and every error path."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from disasm import function_lines, loops
from conftest import experiment, hugetlb_free_pages, python_with_hidden_features, require_populate_write, skip_if_thp_refused, thp_fallbacks_during

from memlab import _core, clear
from memlab.machine import populate_write_supported
from memlab.clear import CHUNK_BYTES, METHODS, ORDERS, FaultParams, OrderParams
from memlab.twins import kernel_order as reference_kernel_order

#: The aligned vector stores a clear loop may use (normal and non-temporal), as objdump names them.
VECTOR_STORES = {"movdqa", "vmovdqa", "vmovdqa64", "vmovdqa32", "movaps", "vmovaps", "movntdq", "vmovntdq", "movntps",
                 "vmovntps"}

# Compiled kernels whose instructions depend on the -march level of the build.
pytestmark = pytest.mark.build

MiB = 1 << 20
GiB = 1 << 30
QUICK = {"repeat": 1, "warmup": 0, "target_seconds": 0.0}


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# ---- the kernel's order -------------------------------------------------------


def test_kernel_order_matches_the_seed_example():
    assert clear.kernel_order(8, 5) == [0, 1, 2, 7, 3, 6, 4, 5]


def test_kernel_order_matches_the_oracle_for_every_target_of_a_2mib_page():
    for target in range(512):
        got = clear.kernel_order(512, target)
        assert got == reference_kernel_order(512, target), target
        assert sorted(got) == list(range(512))
        assert got[-1] == target


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 16, 33])
def test_kernel_order_matches_the_oracle_for_small_and_odd_pages(n):
    for target in range(n):
        assert clear.kernel_order(n, target) == reference_kernel_order(n, target)


def test_kernel_order_first_and_last_targets_are_plain_sweeps():
    assert clear.kernel_order(8, 0) == [7, 6, 5, 4, 3, 2, 1, 0]
    assert clear.kernel_order(8, 7) == [0, 1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("n, target", [(8, 8), (8, -1), (0, 0)])
def test_kernel_order_rejects_targets_outside_the_page(n, target):
    with pytest.raises(ValueError, match=r"n_subpages|target"):
        clear.kernel_order(n, target)


def test_kernel_order_c_boundary_checks_target_and_buffer():
    import array

    with pytest.raises(ValueError, match=r"target=8 is outside the huge page \[0, 7\]"):
        with _core.Kernel("clear_kernel_order", {"n_subpages": 8, "target": 8, "out": array.array("I", [0] * 8)}):
            pass
    with pytest.raises(ValueError, match="at least 8 are needed"):
        with _core.Kernel("clear_kernel_order", {"n_subpages": 8, "target": 1, "out": array.array("I", [0] * 4)}):
            pass
    with pytest.raises(ValueError, match="items of 8 bytes"):
        with _core.Kernel("clear_kernel_order", {"n_subpages": 8, "target": 1, "out": array.array("Q", [0] * 8)}):
            pass


# ---- the plan: every order visits each subpage exactly once ----------------


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("extent", [4096, 64 << 10, 2 * MiB, 4 * MiB, 6 * MiB])
def test_every_order_visits_each_extent_exactly_once(order, extent):
    region = 12 * MiB
    offsets = clear.clear_plan(region, order, extent_bytes=extent, target_subpage=37, seed=5)
    assert sorted(offsets) == list(range(0, region, extent))


def test_plan_orders_subpages_within_each_chunk():
    region = 4 * MiB
    for target in (0, 5, 256, 300, 511):
        offsets = clear.clear_plan(region, "kernel", target_subpage=target)
        for chunk in range(region // CHUNK_BYTES):
            inside = offsets[chunk * 512 : (chunk + 1) * 512]
            assert all(chunk * CHUNK_BYTES <= o < (chunk + 1) * CHUNK_BYTES for o in inside)
            assert [(o % CHUNK_BYTES) // 4096 for o in inside] == reference_kernel_order(512, target)
    assert clear.clear_plan(region, "sequential") == list(range(0, region, 4096))
    reverse = clear.clear_plan(region, "reverse")
    assert reverse[:512] == list(range(CHUNK_BYTES - 4096, -1, -4096))


def test_plan_kernel_order_over_larger_extents_uses_the_unit_holding_the_target():
    # 64 KiB extents: 32 units per chunk; subpage 300 lies in unit 18.
    offsets = clear.clear_plan(2 * MiB, "kernel", extent_bytes=64 << 10, target_subpage=300)
    assert [o // (64 << 10) for o in offsets] == reference_kernel_order(32, 18)


def test_random_plan_is_seeded_and_differs_per_chunk():
    first = clear.clear_plan(4 * MiB, "random", seed=3)
    assert first == clear.clear_plan(4 * MiB, "random", seed=3)
    assert first != clear.clear_plan(4 * MiB, "random", seed=4)
    chunk0 = [o // 4096 for o in first[:512]]
    chunk1 = [o // 4096 - 512 for o in first[512:]]
    assert chunk0 != chunk1 and chunk0 != list(range(512))


# ---- cleared memory is zero ---------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("order", ORDERS)
def test_cleared_memory_is_all_zero(method, order):
    for pages in ("4k", "thp"):
        for extent in (4096, 64 << 10, 2 * MiB, 4 * MiB):
            m = clear.order(region_bytes=6 * MiB, pages=pages, order=order, method=method, extent_bytes=extent,
                            target_subpage=200, check=True, **QUICK)
            assert m.median("nonzero_bytes") == 0, (pages, extent)
            assert m.median("passes") == 1
            assert m.median("calls_per_pass") == -(-6 * MiB // extent)
            assert m.median("GB_per_s") > 0


def test_order_reports_store_width_and_coverage():
    m = clear.order(region_bytes=8 * MiB, method="vector", **QUICK)
    assert m.median("store_bytes") in (16, 32, 64)
    assert m.median("median_chunk_GB_per_s") > 0
    assert m.median("cpu_GB_per_s") > 0
    assert m.median("ns_per_subpage") > 0
    assert 0 <= m.median("huge_fraction") <= 1
    m4k = clear.order(region_bytes=8 * MiB, pages="4k", method="rep_stosb", **QUICK)
    assert m4k.median("huge_fraction") == 0
    assert m4k.median("store_bytes") == 1


@pytest.mark.parametrize("method", METHODS)
def test_baseline_is_cleared_too_and_gives_a_ratio(method):
    m = clear.order(region_bytes=6 * MiB, method=method, order="sequential", extent_bytes=2 * MiB,
                    baseline_order="kernel", baseline_extent_bytes=4096, target_subpage=3, check=True, **QUICK)
    assert m.median("nonzero_bytes") == 0
    assert m.median("baseline_nonzero_bytes") == 0
    sample = m.samples[0]
    assert sample["ratio_to_baseline"] == pytest.approx(sample["GB_per_s"] / sample["baseline_GB_per_s"])
    assert sample["cpu_ratio_to_baseline"] == pytest.approx(sample["cpu_GB_per_s"] / sample["baseline_cpu_GB_per_s"])
    assert sample["median_chunk_ratio_to_baseline"] == pytest.approx(
        sample["median_chunk_GB_per_s"] / sample["baseline_median_chunk_GB_per_s"])


def test_order_fills_the_target_time_with_whole_passes():
    m = clear.order(region_bytes=4 * MiB, repeat=2, warmup=1, target_seconds=0.02)
    assert m.median("passes") >= 1
    for sample in m.samples:
        assert sample["GB_per_s"] == pytest.approx(sample["passes"] * 4 * MiB / sample["elapsed_ns"])


# ---- faults ---------------------------------------------------------------------


def _page_fault_counter_or_skip(m):
    if m.median("page_faults") < 0:
        pytest.skip(f"the software page-fault counter is unavailable: {m.counters_missing}")


def test_fault_4k_touch_takes_one_fault_per_page():
    m = clear.fault(region_bytes=16 * MiB, pages="4k", populate="touch", repeat=2, warmup=1)
    _page_fault_counter_or_skip(m)
    pages = 16 * MiB // 4096
    assert m.median("page_faults") == pytest.approx(pages, rel=0.01)
    assert m.median("faults_handled") == pytest.approx(pages, rel=0.01)
    assert m.median("huge_fraction") == 0
    assert m.median("faults_per_page") == pytest.approx(1.0, rel=0.01)
    assert m.median("resident_fraction") == 1.0
    assert m.median("ns_per_fault") > 0


def test_fault_thp_touch_takes_one_fault_per_huge_page():
    with thp_fallbacks_during() as refused:
        m = clear.fault(region_bytes=32 * MiB, pages="thp", populate="touch", touch_offset="last", repeat=2)
    _page_fault_counter_or_skip(m)
    skip_if_thp_refused(min(s["huge_fraction"] for s in m.samples), refused())
    assert min(s["huge_fraction"] for s in m.samples) == 1
    assert m.median("page_faults") == pytest.approx(16, abs=1)
    assert m.median("resident_fraction") == 1.0
    assert m.median("granted_page_bytes") == CHUNK_BYTES


@pytest.mark.parametrize("populate", ["map_populate", "madvise_populate_write"])
def test_fault_bulk_paths_raise_no_cpu_faults(populate):
    if populate == "madvise_populate_write":
        require_populate_write()
    m = clear.fault(region_bytes=16 * MiB, pages="4k", populate=populate, repeat=1)
    _page_fault_counter_or_skip(m)
    assert m.median("page_faults") < 16
    assert m.median("faults_handled") == pytest.approx(4096, rel=0.01)
    assert m.median("GB_per_s") > 0
    assert m.facts == {"pages_requested": "4k", "pages_obtained": "4k", "populate_requested": populate,
                       "populate_used": populate}


def test_fault_map_populate_of_thp_is_done_another_way_and_the_row_says_which():
    m = clear.fault(region_bytes=8 * MiB, pages="thp", populate="map_populate", repeat=1, warmup=0)
    row = m.to_row()
    assert row["populate"] == row["populate_requested"] == "map_populate"
    assert row["populate_used"] == ("madvise_populate_write" if populate_write_supported() else "touch")
    assert row["pages_obtained"] == ("thp" if m.median("huge_fraction") >= 0.5 else "4k")
    assert m.median("resident_fraction") == 1.0


def test_fault_rate_counts_the_bytes_resident_after_population():
    m = clear.fault(region_bytes=4 * MiB, pages="4k", populate="touch", repeat=1, warmup=0)
    sample = m.samples[0]
    assert sample["GB_per_s"] == pytest.approx(sample["resident_fraction"] * 4 * MiB / sample["elapsed_ns"])


def test_fault_records_the_pause_before_each_sample():
    m = clear.fault(region_bytes=4 * MiB, pages="4k", pause_s=0.1, repeat=2, warmup=1)
    assert len(m.warmup_samples) == 1
    for sample in m.samples + m.warmup_samples:
        assert sample["pause_before_s"] >= 0.1
    assert m.params["pause_s"] == 0.1


def test_hugetlb_lack_is_reported_or_raised():
    if hugetlb_free_pages(2048) >= 2:
        pytest.skip("2 MiB hugetlb pages are reserved; the lack cannot be shown")
    m = clear.fault(region_bytes=4 * MiB, pages="hugetlb-2m", repeat=1, warmup=0)
    assert m.median("granted_page_bytes") == 4096
    assert m.median("huge_fraction") == 0
    assert m.facts["pages_requested"] == "hugetlb-2m" and m.facts["pages_obtained"] == "4k"
    with pytest.raises(OSError, match="hugetlb-2m pages refused"):
        clear.fault(region_bytes=4 * MiB, pages="hugetlb-2m", strict_pages=True, repeat=1, warmup=0)


def test_hugetlb_2m_fault_and_clear(reserved_hugetlb_2m):
    m = clear.fault(region_bytes=4 * MiB, pages="hugetlb-2m", strict_pages=True, repeat=1, warmup=0)
    assert m.median("granted_page_bytes") == CHUNK_BYTES
    assert m.median("huge_fraction") == 1
    c = clear.order(region_bytes=4 * MiB, pages="hugetlb-2m", order="kernel", check=True, **QUICK)
    assert c.median("nonzero_bytes") == 0


def test_hugetlb_1g_skips_without_reserved_pages():
    if hugetlb_free_pages(1048576) < 1:
        pytest.skip("no 1 GiB hugetlb pages are reserved (/sys/kernel/mm/hugepages/hugepages-1048576kB)")
    m = clear.fault(region_bytes=GiB, pages="hugetlb-1g", strict_pages=True, repeat=1, warmup=0)
    assert m.median("huge_fraction") == 1


# ---- bad parameters -------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"region_bytes": 5000, "pages": "4k"}, r"region_bytes=5000 is not a multiple of the 4k page size"),
        ({"region_bytes": 3 * MiB, "pages": "thp"}, r"region_bytes=3145728 is not a multiple of the thp page"),
        ({"region_bytes": 2 * MiB, "pages": "hugetlb-1g"}, r"region_bytes=2097152 is not a multiple"),
        ({"region_bytes": 100}, r"region_bytes=100 is below the minimum 4096"),
        ({"pages": "64k"}, r"pages='64k' is not one of"),
        ({"populate": "poke"}, r"populate='poke' is not one of"),
        ({"touch_offset": "end"}, r"touch_offset='end' is not one of"),
        ({"pause_s": -1}, r"pause_s=-1 is below the minimum 0"),
        ({"pages": "thp", "populate": "map_populate", "strict_pages": True},
         r"populate='map_populate' cannot populate THP pages with strict_pages=True"),
    ],
)
def test_fault_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FaultParams(**kwargs)
    with pytest.raises(ValueError, match=message):
        clear.fault(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"region_bytes": 3 * MiB}, r"region_bytes=3145728 is not a multiple of the 2 MiB chunk"),
        ({"region_bytes": 2 * MiB, "extent_bytes": 4 * MiB}, r"extent_bytes=4194304 is larger than region_bytes"),
        ({"extent_bytes": 12288}, r"extent_bytes=12288 must divide the 2 MiB chunk"),
        ({"extent_bytes": 5000}, r"extent_bytes=5000 is not a multiple of the 4 KiB subpage"),
        ({"method": "clzero"}, r"method='clzero' is not one of"),
        ({"order": "zigzag"}, r"order='zigzag' is not one of"),
        ({"pages": "huge"}, r"pages='huge' is not one of"),
        ({"target_subpage": 512}, r"target_subpage=512 is above the maximum 511"),
        ({"target_subpage": -1}, r"target_subpage=-1 is below the minimum 0"),
        ({"baseline_order": "kernal"}, r"baseline_order='kernal' is not one of"),
        ({"baseline_extent_bytes": 4096}, r"baseline_extent_bytes=4096 needs a baseline_order"),
        ({"baseline_order": "kernel", "baseline_extent_bytes": 12288},
         r"baseline_extent_bytes=12288 must divide the 2 MiB chunk"),
    ],
)
def test_order_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        OrderParams(**kwargs)
    with pytest.raises(ValueError, match=message):
        clear.order(**kwargs)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"region_bytes": 3 * MiB}, "region_bytes=3145728 is not a multiple of the 2 MiB chunk"),
        ({"extent_bytes": 8 * MiB}, "extent_bytes=8388608 is larger than region_bytes=4194304"),
        ({"extent_bytes": 12288}, "extent_bytes=12288 must divide the 2 MiB chunk"),
        ({"target_subpage": 512}, "target_subpage"),
        ({"method": "clzero"}, "method"),
        ({"order": "zigzag"}, "order"),
        ({"baseline_extent_bytes": 4096}, "baseline_extent_bytes=4096 needs a baseline_order"),
        ({"baseline_order": "kernel", "baseline_extent_bytes": 8 * MiB},
         "baseline_extent_bytes=8388608 is larger than region_bytes=4194304"),
    ],
)
def test_order_c_boundary_rejects_bad_parameters(config, message):
    base = {"region_bytes": 4 * MiB, "pages": "4k", "order": "sequential", "method": "memset",
            "extent_bytes": 4096, "target_subpage": 0, "seed": 1, "check": False,
            "baseline_order": "none", "baseline_extent_bytes": 0, "strict_pages": False}
    base.update(config)
    with pytest.raises(ValueError, match=re.escape(message)):
        with _core.Kernel("clear_order", base):
            pass


def test_fault_c_boundary_rejects_a_region_off_the_page_size():
    config = {"region_bytes": 3 * MiB, "pages": "thp", "populate": "touch", "touch_offset": "first",
              "pause_s": 0.0, "strict_pages": False}
    with pytest.raises(ValueError, match="region_bytes=3145728 is not a multiple of the 2 MiB page size"):
        with _core.Kernel("clear_fault", config):
            pass


def test_regions_larger_than_memory_raise_memory_error_before_touching():
    huge = 1 << 40
    before = rss_bytes()
    with pytest.raises(MemoryError, match="region_bytes"):
        clear.fault(region_bytes=huge, pages="4k", **QUICK)
    with pytest.raises(MemoryError, match="region_bytes"):
        clear.order(region_bytes=huge, pages="4k", **QUICK)
    assert rss_bytes() - before < 64 * MiB


# ---- sweeps ---------------------------------------------------------------------


@pytest.mark.parametrize("family, names", [
    (clear.FAULT_FAMILY, ["quick", "clear_fault", "clear_fault_quick"]),
    (clear.ORDER_FAMILY, ["quick", "clear_order", "clear_order_quick", "clear_patch", "clear_patch_quick"]),
])
def test_named_sweeps_have_valid_points(family, names):
    for name in names:
        sweep = family.sweep(name)
        assert sweep.family == family.name
        for point in sweep.points:
            family.params(point)


def test_families_are_registered():
    from memlab.registry import family

    assert family("clear_fault") is clear.FAULT_FAMILY
    assert family("clear_order") is clear.ORDER_FAMILY


@pytest.mark.parametrize("hidden, store_bytes", [("avx512f", 32), ("avx2", 16)])
def test_vector_clearing_follows_the_cpu_features(hidden, store_bytes):
    # the widest stores the CPU has; with MEMLAB_HIDE_CPU_FEATURES as on a CPU without them
    if store_bytes == 32 and not _core.cpu_features()["avx2"]:
        pytest.skip("this CPU has no AVX2")
    script = (
        "from memlab import clear\n"
        "for method in ('vector', 'nontemporal'):\n"
        "    m = clear.order(region_bytes=4 << 20, method=method, check=True, repeat=1, warmup=0, target_seconds=0)\n"
        "    print(method, m.median('store_bytes'), m.median('nonzero_bytes'))\n"
    )
    out = python_with_hidden_features(script, hidden).split()
    assert out == ["vector", str(float(store_bytes)), "0.0", "nontemporal", str(float(store_bytes)), "0.0"]


# ---- the patch comparison: both orders, converging targets, LLC misses, scripts ---------


@pytest.mark.parametrize("quick", [True, False])
def test_the_kernel_order_is_measured_converging_on_three_targets(quick):
    assert clear.KERNEL_TARGETS == (0, 256, 511)
    for sweep in (clear.patch_sweep(quick=quick), clear.order_sweep(quick=quick)):
        kernel = [p for p in sweep.points if "kernel" in (p["order"], p.get("baseline_order"))]
        assert {p["target_subpage"] for p in kernel} == {0, 256, 511}, sweep.name
    # every comparison against the kernel order, for every method, at every target
    patch = clear.patch_sweep(quick=quick)
    against_kernel = {(p["method"], p["extent_bytes"], p["target_subpage"]) for p in patch.points
                      if p["baseline_order"] == "kernel"}
    assert len(against_kernel) == len(METHODS) * 2 * 3


def test_the_kernel_order_at_target_0_is_the_reverse_order_and_converges_elsewhere():
    # why the targets matter: at 0 the old order is a plain reverse sweep; at 256 it converges
    n = clear.CHUNK_SUBPAGES
    assert clear.kernel_order(n, 0) == list(range(n - 1, -1, -1))
    middle = clear.kernel_order(n, 256)
    assert middle[-1] == 256 and middle[:2] == [0, 511]
    assert clear.kernel_order(8, 5) == [0, 1, 2, 7, 3, 6, 4, 5]


def test_quick_scripts_write_to_different_files():
    from memlab.sweep import output_path
    paths = {name: output_path(None, experiment(name).sweep(quick=True), many=False)
             for name in ("clear_order", "clear_patch", "clear_fault")}
    assert len(set(paths.values())) == 3, paths
    full = {name: output_path(None, experiment(name).sweep(quick=False), many=False)
            for name in ("clear_order", "clear_patch")}
    assert len(set(full.values()) | set(paths.values())) == 5


@pytest.mark.parametrize("name, family, point", [
    ("clear_order", "clear_order", {"region_bytes": 4 * MiB, "pages": "thp"}),
    ("clear_patch", "clear_order", {"region_bytes": 4 * MiB, "pages": "thp", "baseline_order": "kernel"}),
    ("clear_fault", "clear_fault", {"region_bytes": 4 * MiB, "pages": "4k"}),
])
def test_clear_scripts_exit_non_zero_when_a_point_fails(name, family, point, tmp_path, monkeypatch, capsys):
    from memlab.grid import Sweep
    script = experiment(name)
    # a point that works, then one larger than this machine's memory: MemoryError before anything is touched
    too_big = dict(point, region_bytes=1 << 40)
    monkeypatch.setattr(script, "sweep", lambda quick=False: Sweep("failing", family, [point, too_big], repeat=1,
                                                                   warmup=0, target_seconds=0.0))
    out = tmp_path / "failing.csv"
    assert script.main(["--out", str(out), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "MemoryError" in captured.err
    assert "ratio: wall clock" not in captured.out  # clear_patch prints no table from a failed run
    from memlab.dataset import Dataset
    assert len(Dataset.load(out)) == 1  # the point measured before the failure stays on disk


def test_llc_miss_ratio_from_synthetic_counters():
    # the cover letter's figures: 10.96% of references missed before, 0.73% after
    assert clear.llc_miss_ratio(1096, 10_000) == pytest.approx(0.1096)
    assert clear.llc_miss_ratio(73.0, 10_000.0) == pytest.approx(0.0073)
    assert clear.llc_miss_ratio(0, 0) != clear.llc_miss_ratio(0, 0)  # NaN: no references, no ratio
    with pytest.raises(ValueError, match="cache_misses=-1 is below the minimum 0"):
        clear.llc_miss_ratio(-1, 10)
    values = {"counter_cache_misses": 73.0, "counter_cache_references": 10_000.0,
              "baseline_cache_misses": 1096.0, "baseline_cache_references": 10_000.0}
    derived = clear.ORDER_FAMILY.derive(OrderParams(region_bytes=4 * MiB), values)
    assert derived == {"llc_miss_ratio": pytest.approx(0.0073), "baseline_llc_miss_ratio": pytest.approx(0.1096)}
    # a side the PMU did not count gives no ratio at all, never a zero
    assert clear.ORDER_FAMILY.derive(OrderParams(region_bytes=4 * MiB), {"counter_cache_misses": 5.0}) == {}
    row = {"llc_miss_ratio": 0.0073, "baseline_llc_miss_ratio": 0.1096, "baseline_order": "kernel"}
    assert clear.patch_llc_miss(row) == {"llc_miss_ratio": 0.0073, "baseline_llc_miss_ratio": 0.1096}


def test_llc_miss_ratio_is_measured_or_said_not_measurable_here():
    m = clear.order(region_bytes=4 * MiB, order="sequential", extent_bytes=2 * MiB, baseline_order="kernel",
                    baseline_extent_bytes=4096, target_subpage=256, **QUICK)
    row = m.to_row()
    llc = clear.patch_llc_miss(row)
    if "cache_misses" in m.counters_missing or "cache_references" in m.counters_missing:
        # this machine's case (no PMU in the VM): the row says why, and has no ratio
        assert "llc_miss_ratio" not in m.samples[0] and "baseline_llc_miss_ratio" not in m.samples[0]
        assert llc["not_measurable"].startswith("not measurable here: cache_")
        assert m.counters_missing.get("cache_misses", m.counters_missing.get("cache_references")) in llc["not_measurable"]
    else:
        sample = m.samples[0]
        assert 0 <= sample["llc_miss_ratio"] and 0 <= sample["baseline_llc_miss_ratio"]
        assert sample["baseline_cache_references"] > 0
        assert set(llc) == {"llc_miss_ratio", "baseline_llc_miss_ratio"}
    # counting off: not measurable, and the reason says so
    quiet = clear.order(region_bytes=4 * MiB, baseline_order="kernel", counters=False, **QUICK).to_row()
    assert clear.patch_llc_miss(quiet)["not_measurable"] == (
        "not measurable here: cache_misses: not requested; cache_references: not requested")


def test_patch_figure_shows_both_rates_and_their_ratio():
    from memlab.dataset import Dataset
    rows = []
    for target in (0, 256, 511):
        m = clear.order(region_bytes=4 * MiB, order="sequential", extent_bytes=2 * MiB, baseline_order="kernel",
                        baseline_extent_bytes=4096, target_subpage=target, method="rep_stosb", **QUICK)
        rows.append(m.to_row())
    fig = clear.ORDER_FAMILY.figure(Dataset(rows))
    ax = fig.axes[0]
    bars = [patch.get_width() for patch in ax.patches]
    assert sorted(bars) == sorted([r["GB_per_s"] for r in rows] + [r["baseline_GB_per_s"] for r in rows])
    texts = [t.get_text() for t in ax.texts]
    assert [t.split()[0] for t in texts] == [f"x{r['GB_per_s'] / r['baseline_GB_per_s']:.2f}" for r in rows]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"sequential, 2 MiB calls\nvs kernel order -> {t}, 4 KiB calls" for t in (0, 256, 511)]
    assert sorted(ax.get_legend_handles_labels()[1]) == ["after (the new plan)", "before (the old plan)"]


@pytest.mark.parametrize("function, store_bytes", [("clear_calls_sse2", 16), ("clear_calls_sse2_stream", 16),
                                                   ("clear_calls_avx2", 32), ("clear_calls_avx2_stream", 32),
                                                   ("clear_calls_avx512", 64), ("clear_calls_avx512_stream", 64)])
def test_a_vector_clear_stores_256_bytes_a_turn_inside_its_call_loop(function, store_bytes):
    """A vector method's call loop holds its stores (no call through a pointer) in one inner loop of
    256 bytes of stores a turn: an inner loop of one store per branch (what gcc -O2 made of the C
    before) cleared 2 MiB in the caches at 0.7 of the unrolled turn's rate."""
    if "-fsanitize" in _core.build_info().get("cflags", ""):
        pytest.skip("a sanitizer build: its kernels carry the sanitizer's checks and calls")
    lines = function_lines(_core.__file__, function)
    if lines is None:
        pytest.skip(f"objdump is missing or {function} is not in the symbol table (stripped build)")
    assert not [text for _, text in lines if text.startswith("call")], lines
    stores = [(address, text) for address, text in lines if text.split()[0] in VECTOR_STORES and text.endswith(")")]
    assert stores, lines
    first, last = stores[0][0], stores[-1][0]
    # the innermost loop around the stores: every store of the function is in one turn of it
    around = [loop for loop in loops(lines) if loop[0] <= first and last <= loop[1]]
    assert around, f"{function}: no loop around its stores"
    head, branch = min(around, key=lambda loop: loop[1] - loop[0])
    assert len(stores) * store_bytes == 256, stores
    assert not [loop for loop in loops(lines) if head < loop[0] and loop[1] < branch], "a loop inside the stores' loop"


def test_rep_stosb_runs_inside_its_call_loop():
    """rep stosb sits in the loop over a pass's calls, reached by no call through a pointer: that
    loop, spilling the pointer and reloading it after every call, cost 5% in the caches."""
    if "-fsanitize" in _core.build_info().get("cflags", ""):
        pytest.skip("a sanitizer build: its loops carry the sanitizer's checks and calls")
    lines = function_lines(_core.__file__, "clear_calls_rep_stosb")
    if lines is None:
        pytest.skip("objdump is missing or clear_calls_rep_stosb is not in the symbol table (stripped build)")
    (head, branch), = loops(lines)
    inside = [text for address, text in lines if head <= address <= branch]
    assert any(text.startswith("rep stos") for text in inside), inside
    assert not [text for text in inside if text.startswith("call") or "(%rsp)" in text], inside
