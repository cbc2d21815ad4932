"""memlab.plot and the families' figures: every family's standard figure from a fixture dataset, and the missing-matplotlib path."""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest

import dataclasses

import plot_fixtures as fixtures
from memlab import chase, clear, cli, matrix, pipe, plot, region, registry, share, system
from memlab.dataset import Dataset
from memlab.units import metric_label

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_MAGIC)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


WITHOUT_FIGURE = {"calibrate", "system"}  # a number and a table: the report shows them as text


@pytest.mark.parametrize("name", sorted(set(fixtures.ALL) - WITHOUT_FIGURE))
def test_every_fixture_renders_a_nonempty_png(name):
    ds = fixtures.ALL[name]()
    fig = plot.figure(ds)
    data = plot.to_png(fig, dpi=60)
    width, height = png_size(data)
    assert width > 100 and height > 100
    assert len(data) > 5000  # a drawn figure, not a blank canvas


def test_figure_dispatches_on_the_family_in_the_metadata(monkeypatch):
    seen = []
    families = registry.all_families()
    families["pipe"] = dataclasses.replace(
        families["pipe"], figure=lambda ds: seen.append(ds.metadata["family"]) or "drawn")
    monkeypatch.setattr(registry, "all_families", lambda: families)
    assert plot.figure(fixtures.pipe()) == "drawn"
    assert seen == ["pipe"]


def test_every_family_declares_a_figure_and_a_caption():
    for family in registry.all_families().values():
        assert callable(family.figure) or family.headline or family.table, family.name
        assert family.caption, family.name


@pytest.mark.parametrize("name, shown", [("calibrate", "a number"), ("system", "a table")])
def test_a_number_or_a_table_is_not_drawn_as_a_figure(name, shown):
    with pytest.raises(ValueError, match=f"{name}'s result is {shown}, not a figure"):
        plot.figure(fixtures.ALL[name]())


def test_narrow_drawing_stacks_panels_and_enlarges_type():
    from matplotlib.text import Text

    fig = clear.order_figure(fixtures.clear_order())
    assert len({ax.get_subplotspec().colspan.start for ax in fig.axes}) == 2  # side by side
    narrow = plot.narrow(fig)
    assert narrow.get_size_inches()[0] == pytest.approx(4.4)
    assert len({ax.get_subplotspec().rowspan.start for ax in fig.axes}) == 2  # one above the other
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text()]
    assert min(sizes) >= 9.5
    width, _ = png_size(plot.to_png(narrow, dpi=110))
    assert width == pytest.approx(4.4 * 110, abs=2)


def _code_strings(path: Path) -> set[str]:
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
        and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


@pytest.mark.parametrize("module", ["plot.py", "chart.py", "report.py", "compare.py"])
def test_views_name_no_family(module):
    strings = _code_strings(Path(plot.__file__).with_name(module))
    named = sorted(set(registry.all_families()) & strings)
    assert not named, f"memlab/{module} names the families {named}: that knowledge belongs to their modules"


def test_figure_accepts_a_path(tmp_path):
    path = tmp_path / "clear.csv"
    fixtures.clear_order().save(path)
    fig = plot.figure(str(path))
    assert fig.axes and fig.axes[0].patches


def test_chase_has_a_log2_axis_a_line_per_variant_and_the_cache_sizes():
    fig = chase.figure(fixtures.chase())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.xaxis.get_transform().base == 2
    data_lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
    assert sorted(line.get_label() for line in data_lines) == [
        "npad=0 order=random", "npad=0 order=sequential", "npad=7 order=random", "npad=7 order=sequential",
    ]
    verticals = sorted(line.get_xdata()[0] for line in ax.get_lines() if len(set(line.get_xdata())) == 1
                       and len(line.get_xdata()) == 2)
    assert verticals == [32 * 1024, 512 * 1024, 32 << 20]
    texts = [t.get_text() for t in ax.texts]
    assert "L1d 32 KiB" in texts and "L2 512 KiB" in texts and "L3 32 MiB" in texts
    # The lines carry the medians of the rows, x sorted.
    random0 = next(line for line in data_lines if line.get_label() == "npad=0 order=random")
    expected = [r["ns_per_element"] for r in sorted(fixtures.chase().filter(npad=0, order="random").rows,
                                                    key=lambda r: r["working_set_bytes"])]
    assert list(random0.get_ydata()) == pytest.approx(expected)
    # Cycles on the right-hand axis: the fixture's 3.3 cycles per ns.
    assert any("3.30 GHz" in a.get_ylabel() for a in fig.axes[0].child_axes)


def test_chase_uses_this_machines_caches_when_the_dataset_has_none():
    ds = fixtures.chase()
    ds.metadata.pop("machine")
    ax = chase.figure(ds).axes[0]
    assert any(t.get_text() == "cache sizes of this machine" for t in ax.texts)


def test_pipe_bars_are_the_ladder_with_ratios_to_the_first_rung():
    ds = fixtures.pipe()
    fig = pipe.figure(ds)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    two_cpus = [rate for *_, rate in fixtures.PIPE_RUNGS]
    one_cpu = [rate * 0.6 for *_, busy, rate in fixtures.PIPE_RUNGS if not busy]
    assert heights == pytest.approx(two_cpus + one_cpu)
    ratios = [t.get_text() for t in ax.texts]
    assert ratios[: len(two_cpus)] == [f"x{rate / 3.5:.1f}" for rate in two_cpus]
    assert ratios[0] == "x1.0" and ratios[len(two_cpus)] == "x1.0"
    # Each ratio sits above its bar's error bar (min..max), not through it.
    tops = [t.xy[1] for t in ax.texts]
    assert all(top >= height for top, height in zip(tops, heights))
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "write/read"
    assert ax.get_xlabel().startswith("rung")
    assert "first rung of the same placement" in fig._suptitle.get_text()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["two CPUs", "one CPU"]


def test_a_pipe_huge_page_rung_served_with_4k_pages_says_so():
    ds = fixtures.pipe()
    for row in ds.rows:
        row.update(pages_requested="thp" if row["huge_pages"] else "4k", pages_obtained="4k")
    labels = [t.get_text() for t in pipe.figure(ds).axes[0].get_xticklabels()]
    huge = [text for text in labels if "+huge pages" in text]
    assert huge and all("+huge pages (got 4k pages)" in text for text in huge), labels
    assert not any("got" in text for text in labels if "+huge pages" not in text)


def test_pipe_rungs_are_ordered_whatever_the_row_order():
    ds = fixtures.pipe()
    ds.rows.reverse()
    ax = pipe.figure(ds).axes[0]
    assert [t.get_text() for t in ax.texts][0] == "x1.0"
    assert ax.patches[0].get_height() == pytest.approx(3.5)


def test_clear_order_is_order_by_method_with_a_panel_per_extent():
    fig = clear.order_figure(fixtures.clear_order())
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(ax.patches) == 2 * 4
        assert [t.get_text() for t in ax.get_xticklabels()] == ["sequential", "kernel"]
        assert ax.get_legend() is None  # the legend is under the plot, not over the bars
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["method=memset", "method=rep_stosb", "method=vector", "method=nontemporal"]
    assert fig.axes[0].get_title() == "extent_bytes=4 KiB"


def test_clear_fault_panels_per_question_and_explains_the_numbers():
    fig = clear.fault_figure(fixtures.clear_fault())
    ax = fig.axes[0]
    assert len(ax.patches) == 6
    assert "1" in [t.get_text() for t in ax.texts]
    assert "page faults taken per page" in fig._suptitle.get_text()
    ds = fixtures.clear_fault()
    ds.rows.append({**ds.rows[0], "pause_s": 1.0})
    titles = [a.get_title() for a in clear.fault_figure(ds).axes]
    assert titles == ["populate mode", "pause first"]


def test_bars_leave_no_gap_for_a_missing_series():
    rows = [{"family": "f", "k": "a", "s": "x", "v": 1.0}, {"family": "f", "k": "a", "s": "y", "v": 2.0},
            {"family": "f", "k": "b", "s": "y", "v": 3.0}]
    ax = plot.bars_figure(Dataset(rows, {"family": "f", "param_names": ["k", "s"]}), "v",
                          category=["k"], series=["s"]).axes[0]
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert centres[-1] == pytest.approx(1.0)  # category b's only bar is centred on its tick


def test_clear_fault_says_what_populate_call_was_made_and_what_it_stands_for():
    fig = clear.fault_figure(fixtures.clear_fault())
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["touch", "map_populate", "madvise_populate_write",
                     "map_populate\npopulate_used=madvise_populate_write"]
    titles = [t.get_text() for t in fig.texts] + [a.get_title() for a in fig.axes]
    assert any("bulk page allocator" in t for t in titles), titles


def test_region_bars_group_by_the_pages_obtained_and_say_what_was_asked():
    ax = region.figure(fixtures.region()).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["pages=4k", "pages=thp", "pages=hugetlb-2m pages_obtained=4k"]


def test_a_fallback_is_named_even_where_every_row_got_the_same_pages():
    ds = fixtures.region()
    ds = Dataset([r for r in ds.rows if r["pages"] != "thp"], ds.metadata)  # pages_obtained is 4k throughout
    labels = region.figure(ds).axes[0].get_legend_handles_labels()[1]
    assert labels == ["pages=4k", "pages=hugetlb-2m pages_obtained=4k"]


def test_matrix_bars_by_variant_with_blas_as_a_reference_line():
    ax = matrix.figure(fixtures.matrix()).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "naive", "transposed", "tiled\ntile 8", "tiled_sse2\n(the source's SSE2)\ntile 8",
        "tiled_simd\n(memlab, beyond it)\ntile 256"]
    assert [p.get_height() for p in ax.patches] == pytest.approx([0.3, 1.4, 1.8, 2.6, 3.4])
    reference = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(reference) == 1 and reference[0].get_ydata()[0] == pytest.approx(40.0)
    assert "BLAS" in reference[0].get_label()
    texts = [t.get_text() for t in ax.texts]
    assert texts[0] == "100% of naive time"
    assert texts[1] == f"{100 * 0.3 / 1.4:.3g}% of naive time\n(source: 23.4%)"
    assert texts[3] == f"{100 * 0.3 / 2.6:.3g}% of naive time\n(source: 9.47%)"  # the source's SSE2 listing
    assert texts[4] == f"{100 * 0.3 / 3.4:.3g}% of naive time"  # memlab's own: the source has no number


def test_system_table_has_unixbench_indexes_units_and_the_geometric_mean():
    header, lines = system.table(fixtures.system())
    assert header == ["test", "result (median)", "min … max", "UnixBench baseline", "index"]
    assert all(line[1].endswith(("lps", "KBps")) for line in lines[:-1])
    indexes = [float(line[4].replace(",", "")) for line in lines[:5]]
    assert indexes == pytest.approx([100.0, 100.0, 1000.0, 1000.0, 1000.0])
    assert lines[5][0].startswith("score (geometric mean")
    assert float(lines[5][4].replace(",", "")) == pytest.approx(10 ** ((2 * 2 + 3 * 3) / 5), rel=1e-3)
    assert system.headline(fixtures.system()).startswith("UnixBench index score ")


def test_system_table_computes_the_index_when_rows_lack_it():
    ds = fixtures.system()
    for r in ds.rows:
        del r["index"]
    _, lines = system.table(ds)
    assert [line[4] for line in lines[:5]] == ["100.0", "100.0", "1,000", "1,000", "1,000"]


def test_unixbench_index_uses_the_baseline_of_the_same_buffer():
    assert system.unixbench_index({"test": "file_copy", "buffer_bytes": 4096, "max_blocks": 8000,
                                 "KB_per_s": 58000.0}) == (58000.0, 5800.0, "KBps")
    assert system.unixbench_index({"test": "spawn", "loops_per_s": 126.0}) == (126.0, 126.0, "lps")
    result, baseline, _ = system.unixbench_index({"test": "file_copy", "buffer_bytes": 512, "max_blocks": 1,
                                                "KB_per_s": 1.0})
    assert result == 1.0 and math.isnan(baseline)


def test_share_plots_time_per_thread_by_threads_one_curve_per_placement():
    fig = share.figure(fixtures.share())
    plain, atomic = fig.axes[0], fig.axes[1]
    assert plain.get_xlabel().startswith("threads")
    assert [t.get_text() for t in plain.get_xticklabels()] == ["1", "2", "3", "4"]
    assert plain.get_ylabel() == metric_label("ns_per_increment_per_thread")
    assert sorted(plain.get_legend_handles_labels()[1]) == sorted(
        ["one counter", "one cache line (false sharing)", "a cache line each"])
    assert "plain" in plain.get_title() and "lock_add" in atomic.get_title()
    # the source's penalty, one line / own lines, written over each thread count from 2 on
    assert [t.get_text() for t in plain.texts] == ["400%", "600%", "800%"]


def test_share_atomic_forms_give_figure_6_12():
    fig = share.figure(fixtures.share_atomic_ops())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(share.ATOMIC_OPS)
    assert sorted(ax.get_legend_handles_labels()[1]) == ["threads=1", "threads=4"]
    assert "2.91x" in [t.get_text() for t in ax.texts]  # cas over sync_add_and_fetch


def test_unknown_family_gets_a_generic_line_figure():
    ax = plot.figure(fixtures.unknown()).axes[0]
    assert ax.get_xscale() == "log"
    assert len([line for line in ax.get_lines() if len(line.get_xdata()) == 6]) == 2


def test_empty_or_metricless_datasets_are_value_errors():
    with pytest.raises(ValueError, match="no rows"):
        plot.figure(Dataset([], {"family": "chase"}))
    with pytest.raises(ValueError, match="no metric"):
        plot.figure(Dataset([{"family": "x", "n": 1}], {"family": "x"}))


def test_sizes_a_log2_axis_cannot_show_are_left_out_or_a_value_error():
    """A damaged dataset with sizes <= 0 gave 'math domain error' with no word of what was wrong."""
    ds = fixtures.chase()
    ds.rows[0]["working_set_bytes"] = -4096
    ax = chase.figure(ds).axes[0]
    assert ax.get_xscale() == "log"  # the other sizes still set the ticks
    assert all(tick > 0 for tick in ax.xaxis.get_majorticklocs())
    for row in ds.rows:
        row["working_set_bytes"] = 0
    with pytest.raises(ValueError, match="no x value is a positive size for a log2 axis"):
        chase.figure(ds)


def test_missing_matplotlib_is_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'memlab\[plot\]'"):
        plot.require_matplotlib()
    with pytest.raises(ImportError, match=r"memlab\[plot\]"):
        plot.figure(fixtures.chase())


def test_plot_command_without_matplotlib_says_what_to_install(monkeypatch, tmp_path, capsys):
    fixtures.matrix().save(tmp_path / "m.csv")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["plot", str(tmp_path / "m.csv")]) == 1
    assert "pip install 'memlab[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "m.png").exists()


def test_plot_command_writes_the_figure(tmp_path, capsys):
    fixtures.pipe().save(tmp_path / "pipe.csv")
    assert cli.main(["plot", str(tmp_path / "pipe.csv")]) == 0
    png_size((tmp_path / "pipe.png").read_bytes())
    assert cli.main(["plot", str(tmp_path / "pipe.json"), "-o", str(tmp_path / "fig.svg")]) == 0
    assert (tmp_path / "fig.svg").read_text().lstrip().startswith("<?xml")
    assert "pipe.csv -> " in capsys.readouterr().out


def test_plot_command_errors(tmp_path, capsys):
    assert cli.main(["plot", str(tmp_path / "absent.csv")]) == 2  # unreadable input: a bad argument
    assert "absent.csv" in capsys.readouterr().err
    fixtures.pipe().save(tmp_path / "pipe.csv")
    assert cli.main(["plot", str(tmp_path / "pipe.csv"), "--dpi", "1"]) == 2
    assert "--dpi=1 is below the minimum 10" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path / "pipe.csv"), "--dpi", "10000"]) == 2  # a 12 GB image before
    assert "--dpi=10000 is above the maximum 1200" in capsys.readouterr().err
    assert cli.main(["plot"]) == 2


def test_a_parameter_overwritten_by_a_metric_is_not_a_variant():
    # A family reporting a metric named like a parameter (chase's adapted `laps`) leaves the
    # metric's median in that column: every row differs, but it is not a line of its own.
    ds = fixtures.chase().filter(npad=0)
    ds.metadata["param_names"] = [*ds.metadata["param_names"], "laps"]
    for index, r in enumerate(ds.rows):
        r["laps"] = 1000.0 + index
        r["laps_samples"] = [1000.0 + index]
    ax = chase.figure(ds).axes[0]
    labels = sorted(line.get_label() for line in ax.get_lines() if len(line.get_xdata()) > 2)
    assert labels == ["order=random", "order=sequential"]


def test_pipe_rows_differing_beyond_the_rung_get_bars_of_their_own():
    ds = fixtures.pipe().filter(writer_cpu=0, reader_cpu=1)
    checked = [dict(r, verify=True, GiB_per_s=r["GiB_per_s"] / 2) for r in ds.rows]
    ds = Dataset(ds.rows + checked, ds.metadata)
    ax = pipe.figure(ds).axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:2] == ["write/read\nverify=no", "write/read\nverify=yes"]
    assert len(labels) == len(ax.patches) == 10


def test_pipe_latency_bars_by_placement_and_wait_mode():
    ax = plot.figure(fixtures.pipe_latency()).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["two CPUs, blocking", "two CPUs, busy loop",
                                                            "one CPU, blocking"]
    assert [p.get_height() for p in ax.patches] == pytest.approx([14.0, 1.8, 7.6])  # µs
    assert ax.get_yscale() == "log" and ax.get_ylabel().startswith("µs per round trip")
    assert [t.get_text() for t in ax.texts] == ["14.00 µs", "1.800 µs", "7.600 µs"]
