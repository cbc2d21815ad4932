"""Native in Jupyter: a Dataset, a Measurement and a comparison display as compact HTML tables, and
memlab's figures as images, without %matplotlib or a pyplot import (a fresh kernel, via nbclient)."""

from __future__ import annotations

import html
import re

import pytest

import plot_fixtures as fixtures
from memlab import chart, display, plot
from memlab.compare import compare
from memlab.dataset import Dataset
from memlab.measure import Measurement

KiB = 1 << 10


def _cells(text: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", text)]


def test_a_dataset_shows_its_points_metric_spread_and_flags():
    ds = fixtures.chase()
    ds.rows[1]["context_on_cpu_fraction"], ds.rows[1]["context_steal_fraction"] = 0.4, 0.0
    text = ds._repr_html_()
    assert text.startswith("<div><b>chase · quick: ") and "Fixture CPU" in text
    header = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", text)]
    assert "working_set_bytes" in header and any(h.endswith("(median)") for h in header)
    assert header[-3:] == ["min … max", "n", "flags"]
    cells = _cells(text)
    assert "⚠ on CPU 40% of its wall time (below 90%)" in cells
    assert text.count("background:#f2b70533") == len(header)  # the flagged row is tinted, the others not
    assert "1 of " in text and "points measured under disturbed conditions" in text


def test_a_long_dataset_shows_the_first_rows_and_counts_the_rest():
    rows = [{"family": "f", "size_bytes": n * KiB, "ns_per_op": float(n)} for n in range(1, 31)]
    text = Dataset(rows, {"family": "f", "param_names": ["size_bytes"], "primary_metric": "ns_per_op"})._repr_html_()
    assert text.count("<tr>") == display.MAX_ROWS + 1 and "… and 10 more rows" in text


def test_a_dataset_without_a_metric_lists_its_columns():
    text = Dataset([{"family": "f", "n": 1}], {"family": "f"})._repr_html_()
    assert "<table" in text and "family, n" in text


def test_a_measurement_shows_its_parameters_metrics_and_flag():
    measurement = Measurement("chase", {"working_set_bytes": 16 * KiB}, [{"ns_per_element": 1.0}, {"ns_per_element": 3.0}],
                              [], {}, "none", [], "ns_per_element",
                              context={"on_cpu_fraction": 0.3, "steal_fraction": 0.0, "on_cpu_expected": 1.0})
    text = measurement._repr_html_()
    assert "Measurement: chase, 2 samples; working_set_bytes=16 KiB" in html.unescape(text)
    assert _cells(text)[:3] == ["ns_per_element", "2.000", "1.000 … 3.000"]
    assert "⚠ on CPU 30% of its wall time (below 90%)" in html.unescape(text)


def test_a_comparison_shows_each_point_with_its_ratio_and_verdict():
    base = fixtures.chase()
    faster = Dataset([{**row, "ns_per_element": row["ns_per_element"] * 0.5,
                       "ns_per_element_samples": [v * 0.5 for v in row["ns_per_element_samples"]]} for row in base.rows],
                     dict(base.metadata))
    result = compare(base, faster)
    text = html.unescape(result._repr_html_())
    assert text.startswith("<div><b>compare ns_per_element (lower is better): geometric mean ratio")
    shown = result.points[:display.MAX_ROWS]
    assert text.count("<tr>") == len(shown) + 1
    assert all(f"{p.verdict}: {p.reason}" in text for p in shown)
    assert f"… and {len(result.points) - len(shown)} more rows" in text


def test_a_memlab_figure_renders_itself_as_png():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    fig = plot.figure(fixtures.pipe())
    png = fig._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 2000
    assert isinstance(fig, chart.require_matplotlib())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fresh_kernel_shows_a_dataset_as_a_table_and_its_figure_as_an_image(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the notebook extra (nbformat) is not installed")
    nbclient = pytest.importorskip("nbclient", reason="the notebook extra (nbclient) is not installed")
    pytest.importorskip("ipykernel", reason="the notebook extra (ipykernel) is not installed")
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    path = tmp_path / "chase.csv"
    fixtures.chase().save(path)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import memlab\nmemlab.Dataset.load({str(path)!r})"),
                nbformat.v4.new_code_cell(f"memlab.plot.figure(memlab.Dataset.load({str(path)!r}))"),
                nbformat.v4.new_code_cell("import sys\nprint('pyplot' if 'matplotlib.pyplot' in sys.modules else 'no pyplot')")]
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    table, image, pyplot = (cell.outputs for cell in nb.cells)
    shown = [o["data"] for o in table if o.get("output_type") == "execute_result"]
    assert shown and "<table" in shown[0]["text/html"] and "working_set_bytes" in shown[0]["text/html"]
    drawn = [o["data"] for o in image if o.get("output_type") == "execute_result"]
    assert drawn and "image/png" in drawn[0], image
    assert [o.get("text") for o in pyplot] == ["no pyplot\n"]
