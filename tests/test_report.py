"""memlab.report: one self-contained HTML file with figures, tables, machine facts, version, command."""

from __future__ import annotations

import datetime
import html
import multiprocessing
import sys

import pytest

import plot_fixtures as fixtures
from html_check import parse_report
from memlab import __version__, cli, registry, report
from memlab.dataset import Dataset
from memlab.units import format_number, format_param

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")


def test_report_embeds_one_png_per_dataset_and_parses():
    datasets = [fixtures.chase(), fixtures.pipe(), fixtures.matrix()]
    text = report.build_report(datasets, command="memlab report a.csv b.csv -o r.html")
    parsed = parse_report(text)
    assert len(parsed.images) == 3
    assert parsed.headings[0] == "memlab report"
    assert parsed.headings[1:4] == ["chase · quick", "pipe · quick", "matrix · quick"]
    assert "machine" in [h.lower() for h in parsed.headings]
    assert any(m.get("name") == "viewport" and "width=device-width" in m.get("content", "") for m in parsed.meta)
    assert "memlab report a.csv b.csv -o r.html" in text
    assert f"memlab {__version__}" in text
    assert "Fixture CPU" in text and "6.1.0-fixture" in text  # the dataset's machine, not this one
    assert "http://" not in text and "https://" not in text  # nothing to fetch
    assert html.escape(registry.family("pipe").caption) in text


def test_report_table_shows_the_varying_parameters_and_the_spread():
    parsed = parse_report(report.build_report([fixtures.matrix()], command="x"))
    width = 7
    # The measured value right after the first parameter (a phone shows it without scrolling).
    assert parsed.cells[:width] == ["variant", "GFLOP per s (median)", "tile", "min … max", "n", "seconds",
                                    "max abs error"]
    rows = [parsed.cells[i : i + width] for i in range(width, width * 7, width)]
    assert [r[0] for r in rows] == ["naive", "transposed", "tiled", "tiled_sse2", "tiled_simd", "blas"]
    assert [r[2] for r in rows] == ["-", "-", "8", "8", "256", "-"]
    naive = fixtures.matrix().rows[0]
    assert rows[0][1] == format_number(naive["GFLOP_per_s"])
    assert rows[0][3] == f"{format_number(naive['GFLOP_per_s_min'])} … {format_number(naive['GFLOP_per_s_max'])}"
    assert rows[0][4] == "3"


def test_report_table_says_which_pages_the_kernel_gave():
    ds = fixtures.region()
    ds = Dataset([r for r in ds.rows if r["pages"] != "thp"], ds.metadata)  # every row got 4 KiB pages
    text = report.build_report([ds], command="x")
    parsed = parse_report(text)
    assert parsed.cells[:5] == ["pages", "GB per s (median)", "min … max", "n", "huge fraction"]
    # what the kernel gave heads each series (populate mode), beside what was asked in the rows
    headings = [c for c in parsed.cells if c.startswith("populate=")]
    assert sorted(headings) == ["populate=madvise_populate_write · pages_obtained=4k",
                                "populate=touch · pages_obtained=4k"]
    for heading in headings:
        start = parsed.cells.index(heading)
        asked = [parsed.cells[start + 1], parsed.cells[start + 6]]
        assert sorted(asked) == ["4k", "hugetlb-2m"], parsed.cells


def test_report_table_heads_each_series_once_instead_of_repeating_it_in_columns():
    """chase varies npad and order besides the size: one heading per (npad, order), as the legend."""
    ds = fixtures.chase()
    text = report.build_report([ds], command="x")
    parsed = parse_report(text)
    assert parsed.cells[:6] == ["working_set_bytes", "ns per element (median)", "cache here", "min … max", "n",
                                "cycles per element"]
    headings = [c for c in parsed.cells if c.startswith("npad=")]
    assert headings == ["npad=0 · order=sequential", "npad=7 · order=sequential",
                        "npad=0 · order=random", "npad=7 · order=random"]
    table = next(part for part in text.split("<section") if "<tr class=series>" in part)  # not the machine table
    assert table.count("<tr class=series>") == 4 and table.count("<tbody>") == 4
    # Under each heading its own rows, in the dataset's order.
    start = parsed.cells.index("npad=7 · order=random")
    first = next(r for r in ds.rows if r["npad"] == 7 and r["order"] == "random")
    assert parsed.cells[start + 1:start + 3] == [format_param("working_set_bytes", first["working_set_bytes"]),
                                                 format_number(first["ns_per_element"])]


def test_report_says_the_shared_parameters_once_and_scales_times_per_column():
    text = report.build_report([fixtures.pipe_latency()], command="x")
    parsed = parse_report(text)
    assert "Every point: message_bytes=" in text
    header = [c for c in parsed.cells if c.endswith("(median)")]
    assert header == ["µs per round trip (median)"]


def test_counters_not_requested_are_not_blamed_on_the_machine():
    ds = fixtures.region()
    for row in ds.rows:
        row["counters_missing"] = {"cycles": "not requested", "instructions": "event not supported (ENOENT)"}
    text = report.build_report([ds], command="x")
    assert "Counters: not counted for this family (cycles)." in text
    assert "Counters this machine could not give: instructions (event not supported (ENOENT))." in text


def test_a_number_and_a_table_are_shown_as_text_not_images():
    text = report.build_report([fixtures.calibrate(), fixtures.system()], command="x")
    parsed = parse_report(text)
    assert parsed.images == []
    assert "<p class=headline>Core clock " in text and "<p class=headline>UnixBench index score " in text
    assert "UnixBench baseline" in parsed.cells and any(c.endswith(" lps") for c in parsed.cells)


def test_report_escapes_what_the_data_says():
    ds = fixtures.region()
    ds.metadata["description"] = "<script>alert(1)</script>"
    ds.rows[0]["pages"] = "<b>4k</b>"
    text = report.build_report([ds], command="memlab report '<x>'")
    assert "<script>" not in text and "<b>4k" not in text
    assert "&lt;script&gt;" in text and "&lt;b&gt;4k&lt;/b&gt;" in text
    parse_report(text)


def test_failed_items_and_empty_datasets_are_shown():
    items = [
        report.ReportItem("chase", error="OSError: [Errno 12] Cannot allocate memory"),
        report.ReportItem("pipe", dataset=Dataset([], {"family": "pipe"})),
        report.ReportItem("matrix", dataset=fixtures.matrix(), notes=["measured in 1.0 s"]),
    ]
    text = report.build_report(items, command="memlab tour")
    parsed = parse_report(text)
    assert len(parsed.images) == 1
    assert "Cannot allocate memory" in text and "(failed)" in text
    assert "The dataset has no rows." in text and "measured in 1.0 s" in text


def test_datasets_from_two_machines_show_both():
    other = fixtures.pipe()
    other.metadata["machine"] = {"cpu_model": "Other CPU"}
    other.metadata["machine_id"] = "other0000000"
    text = report.build_report([fixtures.chase(), other], command="x")
    assert "2 different machines" in text and "Other CPU" in text and "Fixture CPU" in text


def test_report_without_matplotlib_still_writes_tables(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = report.build_report([fixtures.chase()], command="x")
    parsed = parse_report(text)
    assert parsed.images == []
    assert "pip install &#x27;memlab[plot]&#x27;" in text
    assert "ns per element (median)" in parsed.cells


def test_report_command_writes_one_file(tmp_path, capsys):
    for name in ("chase", "clear_order", "system"):
        fixtures.ALL[name]().save(tmp_path / f"{name}.csv")
    out = tmp_path / "sub" / "report.html"
    argv = ["report", str(tmp_path / "chase.csv"), str(tmp_path / "clear_order.json"),
            str(tmp_path / "system"), "-o", str(out)]
    assert cli.main(argv) == 0
    text = out.read_text(encoding="utf-8")
    parsed = parse_report(text)
    assert len(parsed.images) == 2  # system's result is a table
    assert "UnixBench index score" in text
    assert "memlab report " + str(tmp_path / "chase.csv") in text
    assert f"3 datasets -> {out}" in capsys.readouterr().out
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]


def test_report_command_errors(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nothing.csv"), "-o", str(tmp_path / "r.html")]) == 2
    assert "nothing.csv" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    assert cli.main(["report"]) == 2


def test_items_showing_one_dataset_draw_its_figure_once(monkeypatch):
    shared, other = fixtures.chase(), fixtures.pipe()
    drawn = []
    real = report.plot.figure
    monkeypatch.setattr(report.plot, "figure", lambda ds, *a, **k: drawn.append(ds) or real(ds, *a, **k))
    items = [report.ReportItem(title=t, dataset=ds) for t, ds in (("one", shared), ("two", shared), ("three", other))]
    progress = []
    text = report.build_report(items, on_section=lambda done, total, title: progress.append((done, total, title)))
    assert len(drawn) == 2
    parsed = parse_report(text)
    assert len(parsed.images) == 3
    # Its alt text is the title the figure shows, the same figure for both items.
    alts = [image["alt"] for image in parsed.images]
    assert alts[0] == alts[1] == report.chart.figure_title(real(shared)) and alts[0].startswith("chase")
    assert progress == [(1, 3, "one"), (2, 3, "two"), (3, 3, "three")]


def test_a_figure_is_embedded_once_as_the_smaller_of_svg_and_a_palette_png():
    ds = fixtures.pipe()
    text = report.build_report([ds])
    parsed = parse_report(text)
    (image,) = parsed.images
    fig = report.plot.figure(ds)
    svg, png = report.chart.to_svg(fig), report.chart.to_palette_png(fig)
    mime, data = report.chart.embedded_image(fig)
    small = report.chart.drawn_elements(fig) <= report.chart.SVG_MAX_ELEMENTS
    assert (mime, data) == (("image/svg+xml", svg) if small and len(svg) < len(png) else ("image/png", png))
    assert image["src"].startswith(f"data:{mime};base64,")
    assert len(png) < len(report.chart.to_png(fig))  # the palette is smaller than full colour
    assert image["alt"] == report.chart.figure_title(fig) and image["alt"].startswith("pipe ladder")


def test_points_whose_runs_disagree_are_listed():
    rows = []
    for size in (4096, 8192):
        for run, value in enumerate((1.0, 2.0 if size == 8192 else 1.05)):
            rows.append({"family": "chase", "working_set_bytes": size, "run": run, "ns_per_element": value,
                         "ns_per_element_samples": [value, value * 1.01], "repeat": 2})
    ds = Dataset(rows, {"family": "chase", "param_names": ["working_set_bytes"], "primary_metric": "ns_per_element"})
    assert report.unstable_points(ds) == [("working_set_bytes=8 KiB", pytest.approx(2.0, rel=0.01))]
    text = report.build_report([ds])
    assert "1 of 2 points: their runs disagree by more than 1.25x" in text and "working_set_bytes=8 KiB (2.0" in text
    written = [{**row, "run_spread": 1.3} for row in rows[:1]]  # a spread the run loop wrote wins
    assert report.unstable_points(Dataset(written, ds.metadata)) == [("working_set_bytes=4 KiB", 1.3)]


def test_the_points_table_has_one_row_a_point_with_every_run_folded_in():
    rows = []
    for size in (4096, 8192):
        for run, (value, on_cpu) in enumerate(((1.0, 1.0), (3.0, 0.5 if size == 8192 else 0.99), (2.0, 0.98))):
            rows.append({"family": "chase", "working_set_bytes": size, "run": run, "ns_per_element": value,
                         "ns_per_element_min": value, "ns_per_element_max": value,
                         "ns_per_element_samples": [value], "repeat": 1, "context_on_cpu_fraction": on_cpu})
    ds = Dataset(rows, {"family": "chase", "param_names": ["working_set_bytes"], "primary_metric": "ns_per_element"})
    parsed = parse_report(report.build_report([ds]))
    header = parsed.cells[:6]
    assert header == ["working_set_bytes", "ns per element (median)", "cache here", "min … max", "n", "conditions"]
    body = [parsed.cells[i:i + 6] for i in range(6, len(parsed.cells), 6)]
    # The median of the three run medians, min … max over the runs, n every run's sample.
    assert [cells[:5] for cells in body[:2]] == [["4 KiB", "2.000", "L1d", "1.000 … 3.000", "3"],
                                                  ["8 KiB", "2.000", "L1d", "1.000 … 3.000", "3"]]
    # The point is flagged by its most disturbed run, counted once as a point.
    assert "on CPU 98%" in body[0][5] and "on CPU 50%" in body[1][5]
    text = report.build_report([ds])
    assert "1 of 2 points were measured with less than 90%" in text


def test_one_sample_has_no_spread_to_show():
    row = {"family": "chase", "working_set_bytes": 4096, "ns_per_element": 1.5, "ns_per_element_min": 1.5,
           "ns_per_element_max": 1.5, "ns_per_element_samples": [1.5], "repeat": 1}
    ds = Dataset([row], {"family": "chase", "param_names": ["working_set_bytes"], "primary_metric": "ns_per_element"})
    parsed = parse_report(report.build_report([ds]))
    assert parsed.cells[parsed.cells.index("4 KiB"):][:5] == ["4 KiB", "1.500", "L1d", "-", "1"]


#: A quick reproduce run reports 42 items in at most 1.5 MB (issue "What a reader sees"): about
#: 36 KB an item, its figure included.
ITEM_BUDGET_BYTES = 1_500_000 // 42


@pytest.mark.parametrize("name", sorted(fixtures.ALL))
def test_an_item_with_its_figure_fits_the_quick_reports_budget(name):
    empty = len(report.build_report([]))
    text = report.build_report([report.ReportItem(name, dataset=fixtures.ALL[name]())])
    assert len(text) - empty <= ITEM_BUDGET_BYTES, (name, len(text) - empty)


def test_the_clearing_order_figure_says_what_every_bar_shares():
    from memlab.clear import order_figure

    rows = [{**row, "region_bytes": 256 << 20} for row in fixtures.clear_order().rows
            if row["method"] == "rep_stosb" and row["order"] == "sequential"]
    fig = order_figure(Dataset(rows, fixtures.clear_order().metadata))
    assert "every bar: order=sequential, method=rep_stosb, pages=thp, region_bytes=256 MiB" in \
        report.chart.figure_title(fig)


def test_the_points_table_names_the_cache_each_working_set_falls_in_here():
    from memlab import hierarchy
    from memlab.hierarchy import Hierarchy, Level
    caches = {"caches": [{"level": 1, "type": "Data", "size_bytes": 48 << 10},
                         {"level": 2, "type": "Unified", "size_bytes": 1 << 20}]}
    rows = [{"family": "chase", "working_set_bytes": size, "order": "random", "ns_per_element": 1.0,
             "ns_per_element_min": 0.9, "ns_per_element_max": 1.1, "repeat": 1}
            for size in (16 << 10, 40 << 10, 768 << 10, 4 << 20)]
    ds = Dataset(rows, {"family": "chase", "param_names": ["working_set_bytes", "order"], "machine": caches})

    def column(dataset):
        cells = parse_report("<!doctype html>" + report._table(dataset)).cells
        width = cells.index("n") + 1
        assert cells[2] == "cache here"  # after the working set and its value
        return [cells[i + 2] for i in range(width, len(cells), width)]

    # By sysfs's sizes (no hierarchy attached): 40 KiB fits the 48 KiB L1d, 4 MiB fits no cache.
    assert column(ds) == ["L1d", "L1d", "L2", "memory"]
    # By the edges measured here (32 KiB, 512 KiB, 2 MiB) where memlab reproduce attached them.
    found = Hierarchy((Level("L1d", 32 << 10, None, 1.0, None, "L1d", 48 << 10),
                       Level("L2", 512 << 10, None, 4.0, None, "L2", 1 << 20),
                       Level("L3", 2 << 20, None, 9.0, None, None, None)), 90.0, ())
    ds.metadata["hierarchy"] = hierarchy.attach(found, 1 << 34)
    assert column(ds) == ["L1d", "L2", "L3", "memory"]
    assert "edges measured on this machine" in report._table(ds)


def test_a_figure_of_many_elements_is_not_drawn_as_svg(monkeypatch):
    """Past SVG_MAX_ELEMENTS drawn elements the SVG is never the smaller: it is not drawn at all;
    a figure of a few points is still drawn both ways and the smaller embedded."""
    fig, ax = report.chart.new_figure()
    ax.plot(range(200), range(200), marker="o")
    assert report.chart.drawn_elements(fig) >= 200
    drawn = []
    real = report.chart.to_svg
    monkeypatch.setattr(report.chart, "to_svg", lambda f: drawn.append(f) or real(f))
    assert report.chart.embedded_image(fig)[0] == "image/png" and drawn == []
    few, ax = report.chart.new_figure(3.0, 2.0)
    ax.plot([1, 2, 3], [1, 4, 9])
    assert report.chart.drawn_elements(few) <= report.chart.SVG_MAX_ELEMENTS
    mime, data = report.chart.embedded_image(few)
    assert drawn == [few]
    svg, png = real(few), report.chart.to_palette_png(few)
    assert (mime, data) == (("image/svg+xml", svg) if len(svg) < len(png) else ("image/png", png))


def test_figures_drawn_by_worker_processes_are_the_serial_ones(monkeypatch):
    """build_report(figure_workers=2) draws every figure once in forked workers, reports each
    (done, total), and gives the page the serial drawing gives; no worker is left behind."""
    shared, other = fixtures.chase(), fixtures.pipe()
    items = [report.ReportItem(title=t, dataset=ds) for t, ds in (("one", shared), ("two", shared), ("three", other))]
    monkeypatch.setattr(report.datetime, "datetime", _FrozenDatetime)
    serial = report.build_report(items, command="x")
    figures, drawn_here = [], []
    real = report.plot.figure
    monkeypatch.setattr(report.plot, "figure", lambda ds, *a, **k: drawn_here.append(ds) or real(ds, *a, **k))
    parallel = report.build_report(items, command="x", figure_workers=2,
                                   on_figure=lambda done, total: figures.append((done, total)))
    assert figures == [(1, 2), (2, 2)]
    assert drawn_here == []  # the workers drew them; the sections took their drawings
    assert parallel == serial
    assert multiprocessing.active_children() == []
    assert report.draw_figures(items, workers=2).keys() == report.draw_figures(items, workers=1).keys()


class _FrozenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime(2026, 12, 7, 8, 0, 0, tzinfo=tz)
