"""What chase datasets say (slowdowns, thread speed-up, table 3.3, associativity, counters) and the figures."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import pytest

import plot_fixtures as fixtures
from memlab import chase, chase_analysis
from memlab.dataset import Dataset
from memlab.machine import numa_nodes

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
KiB, MiB = 1 << 10, 1 << 20
PARAMS = chase.FAMILY.param_names


def point(**params):
    return chase.FAMILY.params(params).__dict__


def chase_row(params, ns, cpu_ns=None, counters=None, missing=None, seed=0, **metrics):
    cpu_ns = ns if cpu_ns is None else cpu_ns
    row = fixtures.row("chase", point(**params), "ns_per_element",
                       {"ns_per_element": ns, "cpu_ns_per_element": cpu_ns, "cycles_per_element": ns * 3.0,
                        **metrics}, seed=seed)
    row["context_core_GHz"] = 3.0
    if counters is not None:
        for name, value in counters.items():
            row[f"counter_{name}"] = value
        row["counters_missing"] = dict(missing or {})
    elif missing is not None:
        row["counters_missing"] = dict(missing)
    return row


def synthetic(sweep, rows, description=""):
    return Dataset(rows, {"family": "chase", "sweep": sweep, "param_names": PARAMS, "machine": fixtures.MACHINE,
                          "description": description or f"{sweep} fixture"})


def data_lines(ax, points):
    """The plotted curves of ax (not the cache-size markers): lines with `points` points."""
    return [line for line in ax.lines if len(line.get_xdata()) == points]


def texts(fig):
    found = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        found += [t.get_text() for t in ax.texts] + [ax.get_title(), ax.get_ylabel(), ax.get_xlabel()]
        found += [t.get_text() for t in ax.get_xticklabels()]
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    if fig._suptitle is not None:
        found.append(fig._suptitle.get_text())
    return "\n".join(found)


# ---- slowdowns -------------------------------------------------------------------

def test_slowdown_pairs_rows_by_working_set_and_the_grouping_parameters():
    rows = []
    for order, extra in (("sequential", 1.10), ("random", 1.02)):
        for size in (KiB << 4, MiB << 4):
            rows.append(chase_row(dict(order=order, working_set_bytes=size, pointer_word=0), 10.0))
            rows.append(chase_row(dict(order=order, working_set_bytes=size, pointer_word=7), 10.0 * extra))
    rows.append(chase_row(dict(order="random", working_set_bytes=KiB << 8, pointer_word=7), 99.0))  # no pair
    found = chase_analysis.slowdown(rows, "pointer_word", 0, 7, by=("order",))
    assert [(e["order"], e["working_set_bytes"]) for e in found] == [
        ("random", KiB << 4), ("random", MiB << 4), ("sequential", KiB << 4), ("sequential", MiB << 4)]
    assert [round(e["slowdown_percent"], 6) for e in found] == [2.0, 2.0, 10.0, 10.0]
    assert all(e["element_size_bytes"] == 64 for e in found)


def test_slowdown_uses_on_cpu_time_where_every_row_has_it():
    rows = [chase_row(dict(misalign_bytes=0), 10.0, cpu_ns=4.0), chase_row(dict(misalign_bytes=4), 30.0, cpu_ns=5.0)]
    assert chase_analysis.slowdown(rows, "misalign_bytes", 0, 4)[0]["slowdown_percent"] == pytest.approx(25.0)
    del rows[0]["cpu_ns_per_element"]
    assert chase_analysis.slowdown(rows, "misalign_bytes", 0, 4)[0]["slowdown_percent"] == pytest.approx(200.0)


# ---- threads: fig. 3.22 and table 3.3 --------------------------------------------------

def thread_rows(times, sweep_params):
    return [chase_row(dict(sweep_params, threads=n, working_set_bytes=size, element_bytes=128), ns, cpus_usable=2)
            for (n, size), ns in times.items()]


def test_speedup_is_threads_times_single_over_multi_time():
    rows = thread_rows({(1, 1 << 20): 10.0, (2, 1 << 20): 10.0, (1, 1 << 26): 100.0, (2, 1 << 26): 160.0},
                       dict(order="random", op="addnextlast"))
    found = chase_analysis.thread_speedup(rows)
    assert [(e["working_set_bytes"], round(e["speedup"], 6)) for e in found] == [(1 << 20, 2.0), (1 << 26, 1.25)]


def test_efficiency_table_takes_the_largest_working_set_and_says_what_was_not_measured():
    datasets = [
        synthetic("fig3_19_quick", thread_rows({(1, 1 << 20): 5.0, (2, 1 << 20): 5.0, (1, 1 << 24): 8.0,
                                                (2, 1 << 24): 9.0}, dict(order="sequential"))),
        synthetic("fig3_21", thread_rows({(1, 1 << 24): 100.0, (2, 1 << 24): 125.0},
                                         dict(order="random", op="addnextlast"))),
    ]
    table = chase_analysis.efficiency_table(datasets)
    assert [row["threads"] for row in table] == [2, 4]
    assert table[0]["sequential read"] == pytest.approx(2 * 8.0 / 9.0)
    assert table[0]["sequential inc"] is None and table[0]["random addnextlast"] == pytest.approx(1.6)
    assert table[0]["source random addnextlast"] == 1.54 and table[1]["source sequential read"] == 2.98
    assert all(table[1][column] is None for column in ("sequential read", "sequential inc", "random addnextlast"))
    text = chase_analysis.format_efficiency_table(table)
    assert "1.78 (1.69)" in text and "1.6 (1.54)" in text
    assert "4        not measured: this machine gave the walk 2 CPUs" in text


# ---- associativity: fig. 6.5 ----------------------------------------------------------

def surface(ways, way_bytes, distances=range(1, 129), lengths=range(1, 17), l1=1.4, l2=4.5, spikes=(), early=None):
    rows = []
    for d in distances:
        for n in lengths:
            sets_used = max(1, way_bytes // math.gcd(d * 64, way_bytes) // 1) if (d * 64) % way_bytes else 1
            per_set = math.ceil(n / sets_used) if (d * 64) % way_bytes == 0 else 0
            ns = l2 if per_set > ways or (early and d in early and n >= early[d]) else l1
            if (d, n) in spikes:
                ns = l2 * 3
            rows.append({"element_distance": d, "working_set_bytes": 64 * n, "npad": 7, "element_bytes": 0,
                         "ns_per_element": ns})
    return rows


@pytest.mark.parametrize("ways,size", [(8, 32 * KiB), (12, 48 * KiB), (4, 16 * KiB)])
def test_associativity_reads_ways_and_size_off_the_surface(ways, size):
    found = chase_analysis.associativity(surface(ways, size // ways))
    assert found["ways"] == ways and found["l1d_bytes"] == size and found["way_bytes"] == size // ways
    assert found["sets"] == size // ways // 64
    assert found["conflict_distances"] == [d for d in range(1, 129) if (d * 64) % (size // ways) == 0]
    assert found["l1_ns"] == pytest.approx(1.4) and found["conflict_ns"] == pytest.approx(4.5)


def test_associativity_ignores_a_lone_slow_point_and_reports_no_conflict_honestly():
    noisy = surface(12, 4096, spikes=[(5, 3), (17, 16), (64, 9)])
    found = chase_analysis.associativity(noisy)
    assert (found["ways"], found["l1d_bytes"]) == (12, 48 * KiB)
    flat = [dict(row, ns_per_element=1.4) for row in surface(12, 4096, distances=[1, 2, 3])]
    none = chase_analysis.associativity(flat)
    assert none["ways"] is None and none["l1d_bytes"] is None and none["conflict_distances"] == []
    assert "no conflict up to lists of 16 elements" in chase_analysis.format_associativity(none)


@pytest.mark.parametrize("distances", [(1, 16, 64, 65, 128), range(1, 129)])
def test_associativity_reads_the_ways_at_one_way_span_not_at_a_multiple(distances):
    """A quick run on a Zen 3 (8 ways of 4 KiB) saw lists 8 KiB apart slow from 6 elements, 4 KiB
    apart from 9: the map reads 8 ways and 32 KiB at the way span, not 5 ways and 40 KiB."""
    found = chase_analysis.associativity(surface(8, 4096, distances=distances, early={128: 6}))
    assert (found["ways"], found["way_bytes"], found["l1d_bytes"]) == (8, 4096, 32 * KiB)


def test_associativity_sets_sysfs_beside_the_measurement():
    ds = Dataset(surface(8, 4096), {"machine": {"caches": [
        {"level": 1, "type": "Data", "size_bytes": 32 * KiB, "ways": 8}]}})
    found = chase_analysis.associativity(ds)
    assert (found["sysfs_bytes"], found["sysfs_ways"]) == (32 * KiB, 8)
    text = chase_analysis.format_associativity(found)
    assert "measured: L1d 32 KiB, 8 ways of 4 KiB (64 sets)" in text and "sysfs:    L1d 32 KiB, 8 ways" in text
    with pytest.raises(ValueError, match="associativity needs rows with element_distance"):
        chase_analysis.associativity([{"working_set_bytes": 64, "ns_per_element": 1.0}])


# ---- counters and NUMA -------------------------------------------------------------------

def test_counter_ratios_and_missing_counters():
    row = {"counter_cycles": 900.0, "counter_instructions": 300.0, "counter_cache_misses": 3.0,
           "counter_cache_references": 12.0, "counter_dtlb_load_misses": float("nan")}
    ratios = chase_analysis.counter_ratios(row)
    assert ratios == {"cycles_per_instruction": 3.0, "llc_misses_per_instruction_percent": 1.0,
                      "llc_miss_ratio_percent": 25.0}
    rows = [dict(row, counters_missing={"dtlb_load_misses": "no PMU (ENOENT)"})]
    assert chase_analysis.missing_counters(rows, ["cycles", "dtlb_load_misses", "l1d_load_misses"]) == {
        "dtlb_load_misses": "no PMU (ENOENT)", "l1d_load_misses": "not in the dataset"}


def test_hops_rank_the_slit_distances():
    assert chase_analysis.hops([{"numa_distance": 10.0}, {"numa_distance": 32.0}, {"numa_distance": 10.0}]) == {
        10.0: 0, 32.0: 1}


# ---- figures -------------------------------------------------------------------------------

def curve(sweep_params, values, **extra):
    return [chase_row(dict(sweep_params, working_set_bytes=size), ns, **extra) for size, ns in values]


SIZES = [1 << k for k in range(12, 27, 2)]


def test_counter_figures_say_which_counters_are_missing_and_why():
    missing = {name: "event not supported by this CPU or hypervisor (ENOENT)"
               for name in ("cycles", "instructions", "cache_references", "cache_misses", "l1d_load_misses",
                            "llc_load_misses", "dtlb_load_misses")}
    for sweep in ("fig7_1", "fig3_16"):
        rows = []
        for order in ("random", "sequential"):
            rows += curve(dict(order=order, npad=0), [(s, 2.0 + i) for i, s in enumerate(SIZES)], missing=missing)
        fig = chase_analysis.figure(synthetic(sweep, rows))
        text = texts(fig)
        assert "Hardware counters missing" in text and "(ENOENT)" in text
        assert "cycles per element (clock)" in text  # the walk is still shown, from the clock


def test_counter_figures_draw_the_ratios_where_the_pmu_opened():
    rows = []
    for order in ("random", "sequential"):
        for i, size in enumerate(SIZES):
            counters = {"cycles": 1000.0 * (i + 1), "instructions": 1000.0, "cache_references": 100.0,
                        "cache_misses": 10.0 * i, "l1d_load_misses": 5.0 * i, "llc_load_misses": 2.0 * i,
                        "dtlb_load_misses": 1.0 * i}
            rows.append(chase_row(dict(order=order, npad=0, working_set_bytes=size), 3.0, counters=counters))
    fig = chase_analysis.figure(synthetic("fig7_1", rows))
    assert "Hardware counters missing" not in texts(fig)
    cpi = fig.axes[0].lines[0]
    assert list(cpi.get_ydata()) == pytest.approx([float(i + 1) for i in range(len(SIZES))])
    assert len(data_lines(fig.axes[1], len(SIZES))) == 4 and len(data_lines(fig.axes[2], len(SIZES))) == 4
    ratio = chase_analysis.figure(synthetic("fig3_16", rows))
    curves = data_lines(ratio.axes[0], len(SIZES))
    assert sorted(line.get_label() for line in curves) == ["Random", "Sequential"]
    assert all(list(line.get_ydata()) == pytest.approx([10.0 * i for i in range(len(SIZES))]) for line in curves)


def test_threads_figure_has_the_curves_and_the_speedup_and_says_what_was_left_out():
    rows = thread_rows({(n, s): 5.0 * n ** 0.2 * (1 + i) for n in (1, 2) for i, s in enumerate(SIZES)},
                       dict(order="random", op="addnextlast"))
    note = "Fig. 3.21: random. Not measured here: threads=4 (this process may use 2 CPUs)."
    fig = chase_analysis.figure(synthetic("fig3_21_quick", rows, note))
    left, right = fig.axes[:2]
    assert len(data_lines(left, len(SIZES))) == 2 and left.get_yscale() == "log"
    assert "#threads=2" in texts(fig) and "Not measured here: threads=4" in texts(fig)
    assert len(data_lines(right, len(SIZES))) == 1 and right.get_ylim()[1] == pytest.approx(4.5)


def test_slowdown_figures_plot_percent_by_working_set():
    rows = []
    for order in ("sequential", "random"):
        for size in SIZES:
            for word, ns in ((0, 10.0), (7, 10.07)):
                rows.append(chase_row(dict(order=order, npad=7, working_set_bytes=size, pointer_word=word), ns))
    fig = chase_analysis.figure(synthetic("fig3_30", rows))
    lines = data_lines(fig.axes[0], len(SIZES))
    assert len(lines) == 2 and all(y == pytest.approx(0.7) for line in lines for y in line.get_ydata())
    assert "slowdown vs critical word at start (%)" in texts(fig)
    rows = []
    for order, lines_per in (("sequential", 4), ("random", 2), ("random", 4)):
        for size in SIZES:
            for pair in (2, (lines_per - 1) * 8):
                rows.append(chase_row(dict(order=order, element_bytes=64 * lines_per, op="addpair",
                                           pair_word=pair, working_set_bytes=size), 10.0 if pair == 2 else 12.0))
    text = texts(chase_analysis.figure(synthetic("fig6_2", rows)))
    assert "Sequential 4 CLs" in text and "Random 2 CLs" in text and "Random 4 CLs" in text
    rows = [chase_row(dict(order=o, npad=1, op="inc", misalign_bytes=m, working_set_bytes=s), 3.0 + m)
            for o in ("sequential", "random") for s in SIZES for m in (0, 4)]
    text = texts(chase_analysis.figure(synthetic("fig6_4", rows)))
    assert "Sequential inc (16-byte elements, 4 bytes off)" in text


def test_block_figure_labels_every_curve_by_its_block_and_the_whole_list_as_infinity():
    rows = [chase_row(dict(order="random_blocks", block_pages=b, npad=7, working_set_bytes=s), 5.0)
            for b in (60, 120) for s in SIZES]
    rows += [chase_row(dict(order="random", npad=7, working_set_bytes=s), 6.0) for s in SIZES]
    text = texts(chase_analysis.figure(synthetic("fig3_17", rows)))
    assert "blocks=60 pages" in text and "blocks=120 pages" in text and "blocks=inf (whole list)" in text
    assert "block_pages=1" not in text


def test_associativity_figure_is_a_map_with_the_result_under_it():
    rows = [chase_row({"element_distance": r["element_distance"], "working_set_bytes": r["working_set_bytes"],
                       "npad": 7, "order": "sequential"}, r["ns_per_element"])
            for r in surface(12, 4096, distances=[1, 32, 63, 64, 65, 128])]
    fig = chase_analysis.figure(synthetic("fig6_5_quick", rows))
    assert fig.axes[0].collections, "no heat map"
    text = texts(fig)
    assert "measured: L1d 48 KiB, 12 ways of 4 KiB" in text and "sysfs:" in text


def test_numa_figure_on_one_node_says_there_is_no_remote_memory():
    rows = [chase_row(dict(walk_cpu=0, memory_node=0, op=op, order=o, npad=7, working_set_bytes=s), 5.0,
                      numa_distance=10.0, memory_node_checked=0.0)
            for op in ("follow", "inc") for o in ("random", "sequential") for s in SIZES]
    text = texts(chase_analysis.figure(synthetic("fig5_3", rows)))
    assert "One NUMA node with memory here (node 0)" in text and "0 hops" in text


def test_numa_figure_with_remote_nodes_shows_the_slowdown_per_hop():
    rows = []
    for node, distance, factor in ((0, 10.0, 1.0), (1, 21.0, 1.3)):
        rows += [chase_row(dict(walk_cpu=0, memory_node=node, op=op, order=o, npad=7, working_set_bytes=s),
                           5.0 * factor, numa_distance=distance, memory_node_checked=float(node))
                 for op in ("follow", "inc") for o in ("random", "sequential") for s in SIZES]
    fig = chase_analysis.figure(synthetic("fig5_3", rows))
    text = texts(fig)
    assert "+30%" in text and "1 hop" in text and "slowdown vs local memory (%)" in text
    assert all(y == pytest.approx(30.0) for line in fig.axes[1].lines if line.get_label().startswith("read")
               for y in line.get_ydata())


def test_helper_figure_says_where_the_helper_ran():
    base = dict(element_bytes=128, order="random", work_cycles=160)
    rows = [chase_row(dict(base, working_set_bytes=s), 50.0) for s in SIZES]
    rows += [chase_row(dict(base, working_set_bytes=s, helper_thread=True), 40.0, helper_on_smt_sibling=0.0,
                       smt_sibling_available=0.0) for s in SIZES]
    for row in rows[len(SIZES):]:
        row["measured_helper_cpu"] = 1.0
    text = texts(chase_analysis.figure(synthetic("fig6_8", rows)))
    assert "no SMT sibling for the helper here: it ran on another core (CPU 1)" in text


def test_random_writes_figure_labels_the_levels_in_cycles():
    rows = curve(dict(order="random", op="inc", npad=7),
                 [(s, 1.5 if s <= 32 * KiB else 5.0 if s <= 512 * KiB else 60.0) for s in [1 << k for k in range(10, 27)]])
    fig = chase_analysis.figure(synthetic("fig3_4", rows))
    text = texts(fig)
    assert "L1d: 4.5 cycles" in text and fig.axes[0].get_yscale() == "log"


def test_other_sweeps_keep_the_latency_curve():
    fig = chase_analysis.figure(fixtures.chase())
    assert fig.axes[0].get_xscale() == "log"


# ---- the sweeps ------------------------------------------------------------------------------

def test_fig3_17_blocks_are_the_sources():
    sweep = chase.fig3_17()
    blocks = sorted({p["block_pages"] for p in sweep.points if p["order"] == "random_blocks"})
    assert blocks == [60, 120, 240, 480, 960, 1920, 3840, 7680, 15360, 30720, 61440]
    assert {p["order"] for p in sweep.points} == {"random_blocks", "random"}


def test_fixed_figures_use_the_sources_element_sizes_and_range():
    for fn in (chase.fig6_7, chase.fig6_8):
        assert {chase.ChaseParams(**p).npad for p in fn().points} == {15}  # 128 bytes, as the 32-bit NPAD=31
    assert max(p["working_set_bytes"] for p in chase.fig7_9().points) == 1 << 29
    assert {chase.element_bytes(chase.ChaseParams(**p).npad) for p in chase.fig6_5().points} == {64}


def test_thread_sweeps_measure_what_the_machine_has_and_name_the_rest():
    usable = len(os.sched_getaffinity(0))
    for fn in (chase.fig3_19, chase.fig3_20, chase.fig3_21):
        sweep = fn()
        assert sorted({p["threads"] for p in sweep.points}) == [t for t in (1, 2, 4) if t <= usable]
        assert ("Not measured here: threads=4" in sweep.description) == (usable < 4)


def test_numa_sweep_covers_every_node_pair_and_says_when_there_is_one_node():
    nodes = numa_nodes()
    with_memory = [n["node"] for n in nodes if n["has_memory"]]
    sweep = chase.fig5_3()
    assert {p["memory_node"] for p in sweep.points} == set(with_memory)
    assert ("one NUMA node with memory" in sweep.description) == (len(with_memory) == 1)


def test_fig6_5_lengths_and_distances():
    sweep = chase.fig6_5()
    assert sorted({p["working_set_bytes"] // 64 for p in sweep.points}) == list(range(1, 17))
    assert sorted({p["element_distance"] for p in sweep.points}) == list(range(1, 129))


@pytest.mark.parametrize("name", ["fig3_19_quick", "fig5_3_quick", "fig7_1_quick"])
def test_quick_sweeps_run_and_draw(name, tmp_path):
    from memlab import plot
    from memlab.sweep import run_sweep

    sweep = chase.FAMILY.sweep(name)
    dataset = run_sweep(sweep, tmp_path / f"{name}.csv", progress=False, repeat=1, runs=1)
    assert len(dataset) == len(sweep.points)
    fig = plot.figure(Dataset.load(tmp_path / f"{name}.csv"))
    text = texts(fig)
    if name == "fig7_1_quick" and "cycles" in dataset.rows[0].get("counters_missing", {}):
        assert "Hardware counters missing" in text
    if name == "fig5_3_quick" and len([n for n in numa_nodes() if n["has_memory"]]) == 1:
        assert "One NUMA node with memory here" in text
        assert all(row["memory_policy_bound"] == 1 for row in dataset.rows)


def load_script(name):
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table3_3_script_prints_the_table_from_datasets(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    paths = []
    for sweep, params in (("fig3_19", dict(order="sequential")), ("fig3_21", dict(order="random", op="addnextlast"))):
        path = tmp_path / f"{sweep}.csv"
        synthetic(sweep, thread_rows({(1, 1 << 24): 10.0, (2, 1 << 24): 12.5}, params)).save(path)
        paths += ["--dataset", str(path)]
    assert load_script("table3_3").main(paths) == 0
    out = capsys.readouterr().out
    assert "1.6 (1.69)" in out and "not measured: this machine gave the walk 2 CPUs" in out


def test_fig6_5_script_prints_the_l1d_beside_sysfs(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    path = tmp_path / "fig6_5.csv"
    Dataset(surface(8, 4096), {"family": "chase", "sweep": "fig6_5", "machine": fixtures.MACHINE}).save(path)
    assert load_script("fig6_5").main(["--dataset", str(path)]) == 0
    out = capsys.readouterr().out
    assert "measured: L1d 32 KiB, 8 ways" in out and "sysfs:    L1d 32 KiB" in out


def test_each_sweep_has_its_caption_in_the_report(tmp_path):
    from memlab import registry, report

    family = registry.family("chase")
    assert family.caption_for(synthetic("fig6_5_quick", [])) == chase_analysis.CAPTIONS["fig6_5"]
    assert family.caption_for(fixtures.chase()) == chase_analysis.LATENCY_CAPTION
    assert set(chase_analysis.CAPTIONS) <= set(chase.SWEEPS)
    rows = [chase_row(dict(order="random", npad=7, working_set_bytes=s, pointer_word=w), 10.0)
            for s in SIZES for w in (0, 7)]
    path = tmp_path / "fig3_30.csv"
    synthetic("fig3_30", rows).save(path)
    out = tmp_path / "report.html"
    report.write_report([str(path)], str(out))
    assert "rather than the first: the critical word arrives later" in out.read_text()
