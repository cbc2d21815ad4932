"""Reasons for verdicts that depart from the source: each rule on synthetic machines and datasets.

A Zen 4, a Sapphire Rapids and an unknown CPU, with made-up rows, so that every rule is tested the
way it must fire and the way it must not, whatever host runs the suite."""

from __future__ import annotations

import json

from memlab import catalogue
from memlab.reproduce import judge
from memlab.dataset import Dataset
from memlab.reasons import CANDIDATE_DEFECT, Context, explain, invalid_bandwidth
from memlab.report import reason_html

CACHES = [{"level": 1, "type": "Data", "size_bytes": 32 << 10}, {"level": 2, "type": "Unified", "size_bytes": 1 << 20},
          {"level": 3, "type": "Unified", "size_bytes": 32 << 20}]
ZEN4 = {"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 17}
SAPPHIRE_RAPIDS = {"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 0x8F}
UNKNOWN_CPU = {"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 1}
CORE2 = "Intel Core 2: two cores, 32 KiB L1d each, one 4 MiB L2 both share as the last cache"
P4 = "Pentium 4 (NetBurst) in 64-bit mode: 16 KiB L1d, 1 MiB L2 as the last cache"


def dataset(family: str, rows: list[dict], cpu: dict, **facts) -> Dataset:
    machine = {"caches": CACHES, "virtualization": "none", **cpu, **facts}
    return Dataset([{"family": family, **row} for row in rows], {"family": family, "machine": machine})


def bandwidth(cpu: dict, l1_write: float, l2_write: float, l1_read: float = 60.0, **facts) -> Dataset:
    rows = []
    for op, l1, l2 in (("write", l1_write, l2_write), ("read", l1_read, 30.0)):
        for size, rate in ((8 << 10, l1), (16 << 10, l1), (256 << 10, l2), (64 << 20, 5.0)):
            rows.append({"op": op, "working_set_bytes": size, "threads": 1, "background_op": "none",
                         "stores": "normal", "vector_bytes": 64, "on_cpu_bytes_per_cycle": rate,
                         "bytes_per_cycle": rate})
    return dataset("bandwidth", rows, cpu, **facts)


def context(ds: Dataset, claim: str, source: str = CORE2, values=None, status="not reproduced") -> Context:
    return Context("fig", claim, status, "the detail", values or {"ratio": 1.0}, ds, source)


WRITE_CLAIM = "Writing drops sharply once the L1d is exceeded: the L1d region writes at least 1.5x the L2."


def test_zen4_writes_at_its_store_limit_in_the_l1d_and_the_l2():
    reason = explain(context(bandwidth(ZEN4, 32.3, 32.2), WRITE_CLAIM))
    assert "L1d writes 32.3 B/cycle and L2 writes 32.2 B/cycle" in reason
    assert "Zen 4" in reason and "32 B/cycle store limit" in reason and "Intel Core 2" in reason


def test_the_same_rates_on_sapphire_rapids_are_below_its_store_limit_and_stay_unexplained():
    reason = explain(context(bandwidth(SAPPHIRE_RAPIDS, 32.3, 32.2), WRITE_CLAIM))
    assert "store limit" not in reason
    assert reason == CANDIDATE_DEFECT


def test_an_unknown_cpu_gives_no_port_reason():
    assert explain(context(bandwidth(UNKNOWN_CPU, 32.3, 32.2), WRITE_CLAIM)) == CANDIDATE_DEFECT


def test_sapphire_rapids_at_its_store_limit_in_the_l1d_only():
    reason = explain(context(bandwidth(SAPPHIRE_RAPIDS, 63.0, 40.0), WRITE_CLAIM))
    assert "L1d writes 63 B/cycle" in reason and "64 B/cycle store limit" in reason and "40" in reason


def test_the_store_control_is_the_l1d_write_nearest_half_the_l1d():
    ds = bandwidth(ZEN4, 20.0, 32.2)
    rows = [dict(r) for r in ds.rows]
    rows[1]["on_cpu_bytes_per_cycle"] = 32.0  # 16 KiB: half the 32 KiB L1d
    reason = explain(context(Dataset(rows, ds.metadata), WRITE_CLAIM))
    assert "L1d writes 32 B/cycle" in reason


def test_a_rate_above_the_port_limit_is_an_invalid_measurement_first():
    ds = bandwidth(ZEN4, 32.3, 32.2, l1_read=100.0)
    reason = explain(context(ds, WRITE_CLAIM))
    assert reason.startswith("invalid measurement: read of 8 KiB ran 100 B/cycle, above this Zen 4 core's 64 B/cycle")
    assert invalid_bandwidth(bandwidth(SAPPHIRE_RAPIDS, 32.3, 32.2, l1_read=100.0)) == []
    assert invalid_bandwidth(bandwidth(UNKNOWN_CPU, 32.3, 32.2, l1_read=100.0)) == []


def test_reads_at_the_load_limit_with_vectors_wider_than_the_sources():
    claim = "Reading stays near its L1d rate well past the L1d: the L2 region reads at least half the L1d rate."
    reason = explain(context(bandwidth(ZEN4, 20.0, 10.0, l1_read=63.0), claim))
    assert "L1d reads 63 B/cycle" in reason and "64 B/cycle load limit with 64-byte vectors" in reason
    assert explain(context(bandwidth(SAPPHIRE_RAPIDS, 20.0, 10.0, l1_read=63.0), claim)) == CANDIDATE_DEFECT


def chase(sizes, source=P4, **facts) -> Context:
    rows = [{"working_set_bytes": size, "ns_per_element": 10.0} for size in sizes]
    return context(dataset("chase", rows, ZEN4, **facts), "Beyond the L2, the larger the element the more each costs.",
                   source=source)


def test_beyond_the_l2_inside_this_machines_l3():
    reason = explain(chase([16 << 10, 8 << 20]))
    assert "8 MiB" in reason and "32 MiB L3" in reason and "Pentium 4" in reason
    assert explain(chase([16 << 10, 128 << 20])) == CANDIDATE_DEFECT
    assert explain(chase([8 << 20], source="AMD Opteron: a 2 MiB L3 all cores share")) == CANDIDATE_DEFECT


def pipe_rows(one: float, two: float) -> list[dict]:
    first = {"writer": "write", "reader": "read", "huge_pages": False, "busy_loop": False}
    return [{**first, "writer_cpu": 0, "reader_cpu": 0, "GiB_per_s": one},
            {**first, "writer_cpu": 0, "reader_cpu": 1, "GiB_per_s": two}]


def test_the_pipes_wake_up_cost_one_cpu_against_two():
    ds = dataset("pipe", pipe_rows(3.88, 0.898), ZEN4, virtualization="kvm")
    reason = explain(context(ds, "On two CPUs each rung is at least as fast as the one before."))
    assert "3.88 GiB/s with both ends on one CPU and 0.898 GiB/s on two (4.3x)" in reason and "kvm" in reason
    cheap = dataset("pipe", pipe_rows(0.9, 3.5), ZEN4, virtualization="kvm")
    assert explain(context(cheap, "On two CPUs each rung is at least as fast as the one before.")) == CANDIDATE_DEFECT


def test_two_threads_in_a_vm_and_on_bare_metal():
    rows = [{"op": "write", "working_set_bytes": 16 << 10, "threads": 2, "overlap_fraction": 0.8,
             "on_cpu_bytes_per_cycle": 20.0}]
    claim = "Beyond the caches the two threads share the memory bandwidth."
    vm = explain(context(dataset("bandwidth", rows, SAPPHIRE_RAPIDS, virtualization="kvm", cpu_count=2,
                                 smt_threads_per_core=1), claim))
    assert "kvm guest" in vm and "80%" in vm
    assert explain(context(dataset("bandwidth", rows, SAPPHIRE_RAPIDS), claim)) == CANDIDATE_DEFECT


def test_huge_pages_not_obtained_by_a_never_touched_buffer():
    rows = [{"huge_pages": True, "touch_pages": touched, "writer_huge_fraction": fraction, "GiB_per_s": 1.0}
            for touched, fraction in ((True, 1.0), (False, 0.0))]
    claim = "With huge pages the slowdown does not show."
    reason = explain(context(dataset("pipe", rows, ZEN4, thp_enabled="madvise"), claim))
    assert "never-touched buffer got 0% huge pages against 100%" in reason and "madvise" in reason
    both = [dict(r, writer_huge_fraction=1.0) for r in rows]
    assert explain(context(dataset("pipe", both, ZEN4), claim)) == CANDIDATE_DEFECT


def test_guest_huge_pages_and_missing_huge_pages():
    claim = "At 2^20 bytes the walk is faster on huge pages than on 4 KiB pages."
    got = [{"pages": "thp", "working_set_bytes": 1 << 20, "huge_page_fraction": 1.0}]
    assert "two-dimensional paging" in explain(context(dataset("chase", got, ZEN4, virtualization="kvm"), claim))
    none = [dict(got[0], huge_page_fraction=0.0)]
    assert "got 0% huge pages" in explain(context(dataset("chase", none, ZEN4, thp_enabled="never"), claim))
    assert explain(context(dataset("chase", got, ZEN4), claim)) == CANDIDATE_DEFECT


def test_clearing_extents_beyond_the_last_cache_on_zen_only():
    rows = [{"method": "rep_stosb", "extent_bytes": extent, "GB_per_s": 10.0} for extent in (2 << 20, 32 << 20)]
    claim = "32 MiB batches cost about what 2 MiB calls cost (within 10%)."
    reason = explain(context(dataset("clear_order", rows, ZEN4), claim, values={"ratio": 1.84}))
    assert "32 MiB extents" in reason and "Zen 4" in reason and "1.84x" in reason
    assert explain(context(dataset("clear_order", rows, SAPPHIRE_RAPIDS), claim)) == CANDIDATE_DEFECT
    assert explain(context(dataset("clear_order", rows, UNKNOWN_CPU), claim)) == CANDIDATE_DEFECT


def spread_dataset(low: float, high: float, **row) -> Dataset:
    rows = [{"working_set_bytes": 1 << 16, "ns_per_element": 10.0, "ns_per_element_min": low,
             "ns_per_element_max": high, **row}]
    ds = dataset("chase", rows, UNKNOWN_CPU)
    ds.metadata["primary_metric"] = "ns_per_element"
    return ds


def test_an_effect_within_the_samples_spread_is_called_noise_not_a_machine_difference():
    reason = explain(context(spread_dataset(9.5, 10.5), "A claim.", values={"ratio": 1.015}))
    assert "1.5%" in reason and "10.0%" in reason and "may be noise" in reason
    assert explain(context(spread_dataset(9.99, 10.01), "A claim.", values={"ratio": 1.015})) == CANDIDATE_DEFECT


def test_a_busy_run_is_named_with_its_steal_and_on_cpu_share():
    ds = spread_dataset(10.0, 10.0, context_steal_fraction=0.05, context_on_cpu_fraction=0.6)
    reason = explain(context(ds, "A claim.", values={"ratio": 1.5}))
    assert "stole 5.0%" in reason and "60%" in reason


def test_not_measurable_keeps_its_own_reason():
    ctx = context(bandwidth(ZEN4, 32.3, 32.2), WRITE_CLAIM, status="not measurable")
    assert explain(ctx) == "the detail"


def test_judge_attaches_reasons_to_verdicts_that_depart_and_none_to_reproduced(tmp_path):
    ds = bandwidth(ZEN4, 32.2, 32.3)  # the L2 no slower: the direction contradicted
    result = judge("fig3.26", ds)
    by_claim = dict(zip((c.text for c in result.item.claims), result.verdicts))
    write = by_claim[catalogue.item("fig3.26").claims[1].text]
    assert write.status == catalogue.NOT_REPRODUCED and "32 B/cycle store limit" in write.reason
    assert all(v.reason == "" for v in result.verdicts if v.status == catalogue.REPRODUCED)
    claims = result.to_dict()["claims"]
    assert json.loads(json.dumps(claims))[1]["reason"] == write.reason
    assert "why: L1d writes 32.2" in result.table()


def test_the_reasons_html_line_is_escaped():
    assert reason_html("a <b> & c") == "<div class=reason><b>Why here:</b> a &lt;b&gt; &amp; c</div>"


def test_a_source_machine_the_source_does_not_name_is_not_said_to_lack_an_l3():
    reason = explain(chase([8 << 20], source="not named in the text; 64-byte cache lines"))
    assert "8 MiB" in reason and "not in main memory" in reason and "not named" not in reason
