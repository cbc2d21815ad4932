"""One self-contained HTML report of one or more datasets.

The report holds, for every dataset, its standard figure (embedded once as a
``data:`` URI, SVG or a palette PNG, whichever is smaller, scaled to the
screen's width) or,
for a family whose result is a number or a table, that number in large type
and that table; the family's caption; a table of its points (the first
varying parameter, the primary metric's median in one unit per column, the
other varying parameters (or, when they make series as in the figure's legend,
one heading per series above its rows), min..max and the family's
``report_columns``; the parameters every point shares are said once above it); which counters the
family did not ask for and which the machine refused; then the facts of the
machine the data came from, the memlab version and the exact command that
wrote it. It needs no server, no network and no other file, and reflows to
a phone's width (tests/test_report_browser.py checks it in Chromium).

Example::

    >>> from memlab.dataset import Dataset
    >>> ds = Dataset([{"family": "calibrate", "budget_ns": 5e7, "core_GHz": 3.3}],
    ...              {"family": "calibrate", "param_names": ["budget_ns"]})
    >>> html_text = build_report([ds], command="memlab report calibrate.csv")
    >>> html_text.startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

import base64
import datetime
import html
import math
import multiprocessing
import os
import shlex
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from memlab import chart, hierarchy, plot, registry
from memlab._version import __version__
from memlab.conditions import ON_CPU_MIN_FRACTION, STEAL_MAX_FRACTION
from memlab.dataset import (
    MACHINE_PARAM,
    SAMPLES,
    Dataset,
    context_column,
    machine_key,
    point_key,
    point_runs,
    row_warning,
    run_index,
    statistic_column,
)
from memlab.family import Family
from memlab.files import atomic_write, check_output_file_in_new_directory
from memlab.machine import collect, format_facts
from memlab.significance import UNSTABLE_RUN_SPREAD, is_unstable, run_spread
from memlab.units import column_unit, format_bytes, format_number, format_param

__all__ = ["ReportItem", "anchor", "as_items", "build_report", "draw_figures", "escape", "html_table",
           "reason_html", "unstable_points", "write_report"]

_STYLE = """
:root { color-scheme: light dark; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; line-height: 1.45;
       max-width: 62rem; margin: 0 auto; padding: 0.8rem; }
h1 { font-size: 1.5rem; margin: 0.4rem 0; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #8884; padding-bottom: 0.2rem; }
img { max-width: 100%; height: auto; display: block; margin: 0.6rem 0; background: #fff; }
section, li, p { overflow-wrap: anywhere; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.85rem; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2rem 0.55rem; border-bottom: 1px solid #8883; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { position: sticky; top: 0; background: Canvas; }
pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.8rem; }
pre { white-space: pre-wrap; word-break: break-word; background: #8881; padding: 0.6rem; }
.meta { color: GrayText; font-size: 0.85rem; }
.reason { margin: 0.2rem 0; }
.headline { font-size: 1.6rem; margin: 0.6rem 0; }
.failed { border-left: 4px solid #c33; padding-left: 0.6rem; }
.badge { background: #f2b705; color: #000; border-radius: 0.3rem; padding: 0 0.35rem; font-weight: 600; }
tr.flagged td { background: #f2b70522; }
tr.series td { text-align: left; font-weight: 600; padding-top: 0.6rem; border-bottom: 1px solid #8886; }
.warn { border-left: 4px solid #f2b705; padding-left: 0.6rem; }
nav ul { padding-left: 1.2rem; columns: 2 12rem; }
td.wrap, th.wrap { white-space: normal; text-align: left; min-width: 8rem; }
.verdict { display: inline-block; padding: 0 0.45rem; border-radius: 0.6rem; font-size: 0.8rem;
           white-space: nowrap; }
.verdict-good { background: #2a72; border: 1px solid #2a7; }
.verdict-bad { background: #c332; border: 1px solid #c33; }
.verdict-none { background: #8882; border: 1px solid #888; }
.verdict-open { background: #f2b70533; border: 1px solid #f2b705; }
.count { white-space: nowrap; margin-right: 0.5rem; }
ul.items { padding-left: 1.2rem; }
ul.items li { margin: 0.3rem 0; }
details { margin: 0.6rem 0; }
summary { cursor: pointer; font-weight: 600; }
ul.claims { padding-left: 1.2rem; }
ul.claims li { margin: 0.35rem 0; }
"""


@dataclass
class ReportItem:
    """One section of a report: a dataset (or a failure) with a heading.

    ``lead`` and ``trail`` are HTML fragments made by memlab (escape anything
    else with :func:`escape`) shown before the figure and after the table;
    ``caption`` replaces the family's caption under the figure. ``marks``: called with the
    matplotlib figure after the family drew it and before it is embedded (``memlab reproduce``
    marks the source's numbers on it, :func:`memlab.chart.mark_source`).
    """

    title: str
    dataset: Dataset | None = None
    source: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)
    lead: list[str] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)
    caption: str | None = None
    marks: Callable[[Any], Any] | None = None


def reason_html(reason: str) -> str:
    """One line of HTML for a verdict's reason (why this machine differs from the source's), escaped.

    >>> reason_html("L1d writes 32.3 B/cycle <at the limit>")
    '<div class=reason><b>Why here:</b> L1d writes 32.3 B/cycle &lt;at the limit&gt;</div>'
    """
    return f"<div class=reason><b>Why here:</b> {escape(reason)}</div>"


def escape(value: Any) -> str:
    """Text made safe for HTML (quotes included).

    >>> escape("<a & b>")
    '&lt;a &amp; b&gt;'
    """
    return html.escape(str(value), quote=True)


_escape = escape


def anchor(index: int, title: str) -> str:
    """The id of the report section at ``index`` with ``title`` (for links to it).

    >>> anchor(2, "Figure 3.15: random")
    's2-figure-3-15--random'
    """
    cleaned = "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
    return f"s{index}-{cleaned}"


_anchor = anchor


def html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, html_cells: bool = False,
               wrap: Sequence[int] = ()) -> str:
    """A scrollable HTML table; cells are escaped text, or HTML made by memlab with ``html_cells``.
    Columns listed in ``wrap`` (indexes) wrap their text and align left.

    >>> html_table(["a"], [["<1>"]]).count("&lt;1&gt;")
    1
    """

    def cell(tag: str, index: int, value: Any) -> str:
        klass = ' class="wrap"' if index in wrap else ""
        text = str(value) if html_cells and tag == "td" else escape(value)
        return f"<{tag}{klass}>{text}</{tag}>"

    lines = ["<div class=scroll><table>", "<thead><tr>"]
    lines += [cell("th", i, h) for i, h in enumerate(header)]
    lines.append("</tr></thead><tbody>")
    for row in rows:
        lines.append("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines)


def _family(ds: Dataset) -> Family | None:
    return registry.all_families().get(str(ds.metadata.get("family") or ""))


def _table(ds: Dataset) -> str:
    family = _family(ds)
    if family is not None and family.table is not None:
        try:
            header, cells_of_rows = family.table(ds)
        except (ValueError, TypeError, KeyError) as error:
            return f"<p class=meta>No table could be made: {_escape(error)}</p>"
        return _html_table(header, cells_of_rows)
    try:
        metric = ds.primary_metric()
    except ValueError:
        return "<p>No metric columns.</p>"
    params = ds.param_names
    shown = chart.telling_names(ds) or params[:1]
    # Several machines (chart.by_machine): the machine heads a series, as in the figure's legend.
    shown = [n for n in shown if n != MACHINE_PARAM] + [n for n in shown if n == MACHINE_PARAM]
    wanted = family.report_columns if family is not None else ()
    extras = [c for c in wanted if c in set(ds.columns) and c != metric]
    # The measured value right after the first parameter: a phone shows it without scrolling.
    unit, factor = column_unit(metric, [row.get(metric) for row in ds.rows])
    extra_units = [column_unit(c, [row.get(c) for row in ds.rows]) for c in extras]
    # When the other varying parameters make series (as the figure's legend does), the rows
    # are grouped under one heading per series instead of repeating them in columns.
    # One row per point: its runs folded (the median of the run medians, min … max over every
    # run, n every sample), the conditions of its most disturbed run.
    rows = _point_rows(ds, metric)
    grouped = _series(rows, shown)
    columns = shown[:1] if grouped else shown
    header = [*columns[:1], f"{unit} (median)", *columns[1:], "min … max", "n", *(u for u, _ in extra_units)]
    watched = any(key in row for row in rows for key in _CONDITION_COLUMNS)
    if watched:
        header.append("conditions")
    levels = cache_levels_here(ds) if "working_set_bytes" in columns else None
    if levels is not None:
        at = columns.index("working_set_bytes") + 2  # after the working set and, when it is first, the value
        header.insert(at, CACHE_COLUMN)
    lines = [_conditions_note(rows), _unstable_note(ds), _fixed_params(ds, shown), _cache_note(levels),
             "<div class=scroll><table>",
             "<thead><tr>"]
    lines += [f"<th>{_escape(h)}</th>" for h in header]
    lines.append("</tr></thead>")
    for heading, series_rows in (grouped or [("", rows)]):
        lines.append("<tbody>")
        if heading:
            lines.append(f"<tr class=series><td colspan={len(header)}>{_escape(heading)}</td></tr>")
        for row in series_rows:
            low, high = row.get(f"{metric}_min"), row.get(f"{metric}_max")
            count = _sample_count(row, metric)
            # One sample has no spread to show.
            spread = (f"{_scaled(low, factor)} … {_scaled(high, factor)}" if low is not None and count != 1
                      else "-")
            params_cells = [format_param(n, row.get(n)) for n in columns]
            cells = [*params_cells[:1], _scaled(row.get(metric), factor), *params_cells[1:], spread,
                     format_number(count)]
            cells += [_scaled(row.get(c), f) for c, (_, f) in zip(extras, extra_units)]
            if levels is not None:
                size = row.get("working_set_bytes")
                cells.insert(at, chart.cache_level(float(size), levels[0]) if chart.finite(size) else "-")
            html_cells = [f"<td>{_escape(c)}</td>" for c in cells]
            if watched:
                html_cells.append(f"<td>{_conditions_badge(row)}</td>")
            flagged = " class=flagged" if watched and _row_warning(row) else ""
            lines.append(f"<tr{flagged}>" + "".join(html_cells) + "</tr>")
        lines.append("</tbody>")
    lines.append("</table></div>")
    return "\n".join(line for line in lines if line)


def _point_rows(ds: Dataset, metric: str) -> list[dict]:
    """The rows of a points table: one per point (and machine), its runs folded into it
    (:func:`memlab.chart.fold_runs`), with the condition columns of its most disturbed run (the
    one the conditions flag, else the one least on its CPU), so that folding hides no warning.

    >>> rows = [{"family": "f", "n": 1, "run": r, "t": v, "t_samples": [v],
    ...          "context_on_cpu_fraction": cpu} for r, v, cpu in ((0, 1.0, 1.0), (1, 3.0, 0.5))]
    >>> [(row["t"], row["context_on_cpu_fraction"]) for row in _point_rows(Dataset(rows, {"param_names": ["n"]}), "t")]
    [(2.0, 0.5)]
    """
    if not any(run_index(row) for row in ds.rows):
        return list(ds.rows)
    names = ds.param_names
    members: dict[tuple, list[dict]] = {}
    for row in ds.rows:
        members.setdefault((point_key(row, names), machine_key(row)), []).append(row)
    folded = chart.fold_runs(ds.rows, names, [metric] + [m for m in ds.metric_names if m != metric])
    keys = [*_CONDITION_COLUMNS, context_column("on_cpu_expected")]
    for row in folded:
        group = members.get((point_key(row, names), machine_key(row)), [row])
        worst = min(group, key=lambda r: (not _row_warning(r), chart.number(r.get(_CONDITION_COLUMNS[0]))))
        for key in keys:
            if key in worst:
                row[key] = worst[key]
    return folded


def _sample_count(row: dict, metric: str) -> Any:
    """How many samples a table row's value comes from: its samples (every run's, once folded),
    else its ``repeat``."""
    samples = row.get(statistic_column(metric, SAMPLES))
    if isinstance(samples, (list, tuple)) and samples:
        return len(samples)
    return row.get("repeat")


def _series(rows: Sequence[dict], shown: Sequence[str]) -> list[tuple[str, list[dict]]]:
    """The rows as series: grouped by every varying parameter but the first, each group headed by
    its values (``op=read · threads=1``). Empty (no grouping) when only one parameter varies or a
    group would hold a single row (the parameters then describe points, not series: matrix's tile).

    >>> rows = [{"n": n, "op": op} for op in ("read", "write") for n in (1, 2)]
    >>> [(heading, len(group)) for heading, group in _series(rows, ["n", "op"])]
    [('op=read', 2), ('op=write', 2)]
    >>> _series([{"n": 1, "op": "read"}, {"n": 2, "op": "write"}], ["n", "op"])
    []
    """
    if len(shown) < 2:
        return []
    grouped = chart.groups(rows, shown[1:])
    if any(len(group) < 2 for group in grouped.values()):
        return []
    return [(" · ".join(f"{n}={format_param(n, group[0].get(n))}" for n in shown[1:]), group)
            for group in grouped.values()]


def _row_spread(row: dict, metric: str) -> float:
    """A row's own run spread (``run_spread`` or ``<metric>_run_spread``, when the run loop wrote one)."""
    for key in (f"{metric}_run_spread", "run_spread"):
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            return float(value)
    return math.nan


def unstable_points(ds: Dataset) -> list[tuple[str, float]]:
    """The points whose runs disagree beyond :data:`memlab.significance.UNSTABLE_RUN_SPREAD`:
    ``(the point in words, largest run median / smallest)``, in the order of the rows. The spread
    is a row's ``run_spread`` column where the run loop wrote one, else it is computed from the
    primary metric's samples of the point's runs (rows with a ``run`` index); a point of one run
    is never unstable.

    >>> rows = [{"family": "f", "n": 1, "run": r, "ns_per_op": v, "ns_per_op_samples": [v, v]}
    ...         for r, v in ((0, 1.0), (1, 2.0))]
    >>> unstable_points(Dataset(rows, {"family": "f", "param_names": ["n"]}))
    [('n=1', 2.0)]
    """
    try:
        metric = ds.primary_metric()
    except ValueError:
        return []
    names = ds.param_names
    samples = statistic_column(metric, SAMPLES)
    found = []
    telling = None  # the columns that name a point: read once, for the first unstable one
    for runs in point_runs(ds.rows, names).values():
        first = next(iter(runs.values()))[0]
        spread = max((_row_spread(row, metric) for rows in runs.values() for row in rows), default=math.nan)
        if not spread == spread and len(runs) > 1:
            spread = run_spread([[value for row in rows for value in _samples(row, samples, metric)]
                                 for rows in runs.values()])
        if is_unstable(spread):
            if telling is None:
                telling = chart.telling_names(ds) or names
            words = ", ".join(f"{n}={format_param(n, first.get(n))}" for n in telling)
            found.append((words or "the point", spread))
    return found


def _samples(row: dict, column: str, metric: str) -> list[float]:
    values = row.get(column)
    if isinstance(values, (list, tuple)) and values:
        return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    value = row.get(metric)
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _unstable_note(ds: Dataset) -> str:
    found = unstable_points(ds)
    if not found:
        return ""
    listed = "; ".join(f"{words} ({spread:.2f}x)" for words, spread in found[:12])
    more = f" and {len(found) - 12} more" if len(found) > 12 else ""
    points = len(point_runs(ds.rows, ds.param_names))
    return (f"<p class=warn><span class=badge>unstable</span> {len(found)} of {points} points: their runs "
            f"disagree by more than {UNSTABLE_RUN_SPREAD:.2f}x (largest run median / smallest): "
            f"{_escape(listed)}{more}.</p>")


def _scaled(value: Any, factor: float) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and factor != 1.0:
        value = float(value) * factor
    return format_number(value)


def _fixed_params(ds: Dataset, shown: Sequence[str]) -> str:
    """The parameters every point shares, said once above the table."""
    fixed = [n for n in ds.param_names if n not in shown]
    if not fixed or not ds.rows:
        return ""
    words = ", ".join(f"{n}={format_param(n, ds.rows[0].get(n))}" for n in fixed)
    return f"<p class=meta>Every point: {_escape(words)}.</p>"


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["<div class=scroll><table>", "<thead><tr>"]
    lines += [f"<th>{_escape(h)}</th>" for h in header]
    lines.append("</tr></thead><tbody>")
    for cells in rows:
        lines.append("<tr>" + "".join(f"<td>{_escape(c)}</td>" for c in cells) + "</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines)


_CONDITION_COLUMNS = (context_column("on_cpu_fraction"), context_column("steal_fraction"))


def _row_warning(row: dict) -> str:
    return row_warning(row)


def _conditions_badge(row: dict) -> str:
    """A warning badge for a point measured under disturbed conditions, else the two numbers."""
    warning = _row_warning(row)
    on_cpu, steal = (row.get(key) for key in _CONDITION_COLUMNS)
    numbers = []
    if isinstance(on_cpu, (int, float)) and on_cpu == on_cpu:
        numbers.append(f"on CPU {on_cpu:.0%}")
    if isinstance(steal, (int, float)) and steal == steal:
        numbers.append(f"steal {steal:.1%}")
    text = ", ".join(numbers) or "-"
    if not warning:
        return f"<span class=meta>{_escape(text)}</span>"
    return f'<span class=badge title="{_escape(warning)}">⚠ {_escape(text)}</span>'


def _conditions_note(rows: Sequence[dict]) -> str:
    flagged = sum(1 for row in rows if _row_warning(row))
    if not flagged:
        return ""
    return (f"<p class=warn><span class=badge>⚠</span> {flagged} of {len(rows)} points were "
            f"measured with less than {ON_CPU_MIN_FRACTION:.0%} of the CPU time their threads should get "
            f"(the family says which should be on a CPU, and how much) or more than "
            f"{STEAL_MAX_FRACTION:.0%} steal time: their numbers include time they were not running "
            f"(see <code>memlab check</code>).</p>")


def _check_summary(meta: dict) -> str:
    """One line on the machine checks at the sweep's start and end, when they warned."""
    parts = []
    for key, when in (("check_start", "start"), ("check_end", "end")):
        report = meta.get(key)
        if isinstance(report, dict) and report.get("warnings"):
            parts.append(f"at the {when}: {', '.join(map(str, report['warnings']))}")
    return ("machine check warnings " + "; ".join(parts)) if parts else ""


#: The reason the C core gives for a counter a family did not ask for (csrc/counters.c).
NOT_REQUESTED = "not requested"

#: The column of a points or numbers table naming the cache each working set falls in here.
CACHE_COLUMN = "cache here"


def cache_levels_here(ds: Dataset) -> tuple[dict[str, int], str]:
    """The cache sizes a working set of ``ds`` is placed by in the column :data:`CACHE_COLUMN`
    (:func:`memlab.chart.cache_level`), and where they come from: the edges of this machine's
    measured hierarchy where ``memlab reproduce`` attached it (:func:`memlab.hierarchy.attach`),
    else the sizes sysfs reports (:func:`memlab.chart.cache_sizes_of`).

    >>> cache_levels_here(Dataset([], {"machine": {"caches": [{"level": 1, "type": "Data", "size_bytes": 32768}]}}))
    ({'L1d': 32768}, 'dataset')
    """
    attached = hierarchy.attached(ds.metadata)
    if attached is not None:
        sizes = hierarchy.cache_sizes_measured(attached[0])
        if sizes:
            return sizes, "measured"
    return chart.cache_sizes_of(ds)


def _cache_note(levels: tuple[dict[str, int], str] | None) -> str:
    """What the column :data:`CACHE_COLUMN` goes by (nothing when the table has none)."""
    if levels is None:
        return ""
    sizes, source = levels
    by = {"measured": "the cache edges measured on this machine's latency curve",
          "dataset": "the cache sizes sysfs reported for the dataset's machine",
          "this machine": "the cache sizes sysfs reports on this machine"}.get(source, source)
    listed = ", ".join(f"{name} {format_bytes(size)}" for name, size in sorted(sizes.items(), key=lambda kv: kv[1])
                       if not name.endswith("i"))
    return (f"<p class=meta>{CACHE_COLUMN}: the smallest cache each working set fits in, by {_escape(by)}"
            + (f" ({_escape(listed)})" if listed else "") + "; memory beyond the last.</p>")


def _figure_html(ds: Dataset, title: str, figures: dict[Any, str] | None = None,
                 marks: Callable[[Any], Any] | None = None) -> str:
    """The figure embedded once, as the smaller of SVG and a palette PNG
    (:func:`memlab.chart.embedded_image`), scaled by CSS to the screen's width; its ``alt`` text is
    the title the figure shows (or why there is none). ``figures`` keeps what was drawn by dataset
    object (and ``marks``), so that items showing one dataset draw it once. ``marks`` (a
    :class:`ReportItem`'s) draws on the figure before it is embedded."""
    key = _figure_key(ds, marks)
    if figures is not None and key in figures:
        return figures[key]
    try:
        fig = plot.figure(ds)
        if marks is not None:
            marks(fig)
        mime, data = chart.embedded_image(fig)
        shown = chart.figure_title(fig) or f"{title}: standard figure"
        uri = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        drawn = f'<img src="{uri}" alt="{_escape(shown)}" data-figure-title="{_escape(chart.figure_title(fig))}">'
    except ImportError as error:
        drawn = f"<p class=meta>No figure: {_escape(error)}</p>"
    except (ValueError, TypeError, KeyError) as error:
        drawn = f"<p class=meta>No figure could be drawn: {_escape(error)}</p>"
    if figures is not None:
        figures[key] = drawn
    return drawn


def _figure_key(ds: Dataset, marks: Callable[[Any], Any] | None) -> tuple[int, int | None]:
    """What one drawing is kept under: items that show one Dataset object with the same marks
    share it."""
    return id(ds), id(marks) if marks is not None else None


def _has_figure(item: ReportItem) -> bool:
    """Whether :func:`_section` draws a figure for ``item`` (a dataset with rows, of a family that
    has a figure or of none known)."""
    ds = item.dataset
    if ds is None or not len(ds):
        return False
    family = _family(ds)
    return family is None or family.has_figure


def _forked_worker_init() -> None:
    """Run first in a forked pool worker: SIGTERM back to its default. The parent may have made
    SIGTERM stop a command (``memlab.cli``); a worker inherits that, and the pool's own end
    (``terminate``, a SIGTERM to each worker) would then print a traceback from every idle one."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: What :func:`forked_map`'s workers call, set in the parent before it forks.
_FORKED: tuple[Callable[[Any], Any], list[Any]] | None = None


def _forked_call(index: int) -> Any:
    assert _FORKED is not None
    function, arguments = _FORKED
    return function(arguments[index])


def forked_map(function: Callable[[Any], Any], arguments: Iterable[Any], workers: int = 1,
               on_done: Callable[[int, int], None] | None = None) -> list[Any]:
    """``function(argument)`` of every argument, in order. ``workers`` above 1: by that many
    forked processes at once (where the platform forks; else here, one after the other), which
    see the parent's memory as it was (a function or argument need not pickle; a result must);
    every worker is ended and reaped on return, on an error or Ctrl-C too. ``on_done(done,
    total)`` after each. The report's figures and a reproduce run's judging use it.

    >>> forked_map(abs, [-1, 2, -3], workers=2)
    [1, 2, 3]
    """
    global _FORKED
    arguments = list(arguments)
    results: list[Any] = []

    def done() -> None:
        if on_done is not None:
            on_done(len(results), len(arguments))

    workers = min(workers, len(arguments))
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _FORKED = (function, arguments)
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_forked_worker_init)
        try:
            for result in pool.imap(_forked_call, range(len(arguments))):
                results.append(result)
                done()
        finally:
            pool.terminate()
            pool.join()
            _FORKED = None
        return results
    for argument in arguments:
        results.append(function(argument))
        done()
    return results


def draw_figures(items: Sequence[ReportItem], workers: int = 1,
                 on_figure: Callable[[int, int], None] | None = None) -> dict[Any, str]:
    """Every figure the sections of ``items`` show, drawn once each (items that show one dataset
    with the same marks share it), as the HTML :func:`build_report` embeds, keyed as its cache is.
    ``workers`` above 1: drawn by that many forked processes at once (:func:`forked_map`); a figure
    is a second or two of one CPU, and a quick reproduce report has 37. ``on_figure(done, total)``
    after each.

    >>> draw_figures([])
    {}
    """
    jobs: dict[Any, tuple[Dataset, str, Any]] = {}
    for item in items:
        if _has_figure(item):
            jobs.setdefault(_figure_key(item.dataset, item.marks), (item.dataset, item.title, item.marks))
    drawn = forked_map(lambda job: _figure_html(job[0], job[1], None, job[2]), jobs.values(), workers, on_figure)
    return dict(zip(jobs, drawn))


def _section(index: int, item: ReportItem, figures: dict[Any, str] | None = None) -> str:
    anchor = _anchor(index, item.title)
    parts = [f'<section id="{anchor}"><h2>{_escape(item.title)}</h2>']
    ds = item.dataset
    if ds is not None:
        meta = ds.metadata
        facts = []
        if meta.get("description"):
            facts.append(meta["description"])
        detail = [f"sweep {meta['sweep']}"] if meta.get("sweep") else []
        detail.append(f"{len(ds)} point{'' if len(ds) == 1 else 's'}")
        if meta.get("repeat") is not None:
            detail.append(f"repeat {meta['repeat']}")
        if meta.get("created"):
            detail.append(f"measured {meta['created']}")
        if item.source:
            detail.append(f"file {item.source}")
        facts.append(", ".join(detail))
        if _check_summary(meta):
            facts.append(_check_summary(meta))
        parts.append("<p class=meta>" + "<br>".join(map(_escape, facts)) + "</p>")
    parts += item.lead
    if ds is not None:
        if len(ds):
            family = _family(ds)
            if family is not None and family.headline is not None:
                try:
                    parts.append(f"<p class=headline>{_escape(family.headline(ds))}</p>")
                except (ValueError, TypeError, KeyError) as error:
                    parts.append(f"<p class=meta>No result could be read: {_escape(error)}</p>")
            if _has_figure(item):
                parts.append(_figure_html(ds, item.title, figures, item.marks))
            caption = family.caption_for(ds) if family is not None else ""
            if item.caption is not None:
                caption = item.caption
            if caption:
                parts.append(f"<p>{_escape(caption)}</p>")
            parts.append(_table(chart.by_machine(ds)))
            parts += _counters_notes(ds)
        else:
            parts.append("<p>The dataset has no rows.</p>")
    parts += item.trail
    for note in item.notes:
        parts.append(f"<p class=meta>{_escape(note)}</p>")
    if item.error:
        parts.append(f"<div class=failed><p>Failed:</p><pre>{_escape(item.error)}</pre></div>")
    parts.append("</section>")
    return "\n".join(parts)


def _counters_notes(ds: Dataset) -> list[str]:
    """What the table lacks in counters: those the family did not ask for, and those the machine refused."""
    refused: dict[str, str] = {}
    unrequested: set[str] = set()
    for row in ds.rows:
        missing = row.get("counters_missing")
        if isinstance(missing, dict):
            for name, reason in missing.items():
                if str(reason) == NOT_REQUESTED:
                    unrequested.add(name)
                else:
                    refused[name] = str(reason)
    notes = []
    if unrequested:
        notes.append(f"<p class=meta>Counters: not counted for this family "
                     f"({_escape(', '.join(sorted(unrequested)))}).</p>")
    if refused:
        reasons: dict[str, list[str]] = {}
        for name, reason in sorted(refused.items()):
            reasons.setdefault(reason, []).append(name)
        said = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in reasons.items())
        notes.append(f"<p class=meta>Counters this machine could not give: {_escape(said)}.</p>")
    return notes


def _machines(items: Sequence[ReportItem]) -> list[dict]:
    """Every machine the datasets record (``metadata["machines"]`` or ``["machine"]``), once each,
    with the number of rows it measured."""
    seen: dict[tuple, dict] = {}
    for item in items:
        if item.dataset is None:
            continue
        entries = chart.machine_entries(item.dataset)
        for entry in entries:
            key = (entry.get("host"), entry.get("fingerprint_id"))
            seen.setdefault(key, {**entry, "rows": 0})
        for row in item.dataset.rows:
            key = machine_key(row)
            if key in seen:
                seen[key]["rows"] += 1
            elif not any(key) and len(entries) == 1:  # a row written before rows named their machine
                seen[(entries[0].get("host"), entries[0].get("fingerprint_id"))]["rows"] += 1
    return list(seen.values())


_MACHINE_TABLE = (("host", "host"), ("CPU", "cpu_model"), ("CPUs", "cpu_count"),
                  ("kernel", "kernel_release"), ("memory", "memory_total_GiB"))


def _machine_table(machines: Sequence[dict]) -> str:
    """One line per machine: host, the fingerprint's facts, its id and how many rows it measured."""
    lines = ["<div class=scroll><table>", "<thead><tr>"]
    lines += [f"<th>{_escape(h)}</th>" for h, _ in _MACHINE_TABLE] + ["<th>fingerprint</th>", "<th>rows</th>"]
    lines.append("</tr></thead><tbody>")
    for entry in machines:
        facts = {**(entry.get("fingerprint") or {}), "host": entry.get("host") or "-"}
        cells = [facts.get(key, "-") for _, key in _MACHINE_TABLE]
        if isinstance(cells[-1], (int, float)):
            cells[-1] = f"{cells[-1]} GiB"
        cells += [entry.get("fingerprint_id", "-"), entry.get("rows", 0)]
        lines.append("<tr>" + "".join(f"<td>{_escape(c)}</td>" for c in cells) + "</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines)


def _machine_html(items: Sequence[ReportItem]) -> str:
    machines = _machines(items)
    parts = ['<section id="machine"><h2>Machine</h2>']
    if not machines:
        parts.append("<p class=meta>The datasets record no machine facts; these are of the machine "
                     "that wrote the report.</p>")
        machines = [{"facts": collect(include_core=False)}]
    else:
        if len(machines) > 1:
            parts.append(f"<p class=meta>The datasets come from {len(machines)} different machines.</p>")
        parts.append(_machine_table(machines))
    for entry in machines:
        if entry.get("facts"):
            parts.append(f"<pre>{_escape(format_facts(entry['facts']))}</pre>")
    parts.append("</section>")
    return "\n".join(parts)


def _default_command() -> str:
    argv = list(sys.argv)
    if argv:
        argv[0] = Path(argv[0]).name
        if argv[0] == "__main__.py":
            argv[0] = "python -m memlab"
    return " ".join(shlex.quote(a) for a in argv)


def as_items(datasets: Iterable[Any]) -> list[ReportItem]:
    """One :class:`ReportItem` per dataset, path (loaded here) or item, titled "family · sweep"."""
    items = []
    for entry in datasets:
        if isinstance(entry, ReportItem):
            items.append(entry)
            continue
        source = ""
        if not isinstance(entry, Dataset):
            source = os.fspath(entry)
            entry = Dataset.load(entry)
        meta = entry.metadata
        title = str(meta.get("family") or "dataset")
        if meta.get("sweep"):
            title += f" · {meta['sweep']}"
        items.append(ReportItem(title=title, dataset=entry, source=source))
    return items


def build_report(
    datasets: Iterable[Dataset | ReportItem | str | os.PathLike],
    *,
    title: str = "memlab report",
    command: str | None = None,
    intro: str = "",
    preamble: str = "",
    on_section: Callable[[int, int, str], None] | None = None,
    figure_workers: int = 1,
    on_figure: Callable[[int, int], None] | None = None,
) -> str:
    """The report's HTML text: one section per dataset, machine facts, version and command.

    ``datasets`` are Datasets, paths to datasets, or :class:`ReportItem`
    (which may carry an error instead of data, e.g. a family that failed
    during a tour). ``command`` defaults to this process's command line.
    ``preamble`` is HTML made by memlab that the report leads with (a
    summary); ``intro`` a paragraph of text after it. ``on_section(done, total, title)`` is called
    after each section is drawn (progress for a long report). Items that show
    the same Dataset object draw its figure once. ``figure_workers`` above 1: the figures are
    drawn first, that many at once (:func:`draw_figures`, ``on_figure(done, total)`` after each),
    then the sections; else each section draws its own.

    >>> text = build_report([Dataset([{"family": "f", "n": 1, "t": 2.0}], {"family": "f"})])
    >>> "<img" in text or "No figure" in text
    True
    """
    items = as_items(datasets)
    command = _default_command() if command is None else command
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    toc = "".join(
        f'<li><a href="#{_anchor(i, item.title)}">{_escape(item.title)}</a>'
        f'{" (failed)" if item.error and item.dataset is None else ""}</li>'
        for i, item in enumerate(items)
    )
    body = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_escape(title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{_escape(title)}</h1>",
        f"<p class=meta>memlab {_escape(__version__)} · written {_escape(created)}<br>"
        f"command: <code>{_escape(command)}</code></p>",
    ]
    if preamble:  # what the report leads with (reproduce: the verdicts, what differs)
        body.append(preamble)
    if intro:
        body.append(f"<p>{_escape(intro)}</p>")
    body.append(f'<nav><ul>{toc}<li><a href="#machine">machine</a></li></ul></nav>')
    figures: dict[Any, str] = draw_figures(items, figure_workers, on_figure) if figure_workers > 1 else {}
    for i, item in enumerate(items):
        body.append(_section(i, item, figures))
        if on_section is not None:
            on_section(i + 1, len(items), item.title)
    body.append(_machine_html(items))
    body += [
        f"<p class=meta>memlab {_escape(__version__)} · Python {_escape(sys.version.split()[0])}</p>",
        "</body>",
        "</html>",
    ]
    return "\n".join(body) + "\n"


def write_report(
    datasets: Iterable[Dataset | ReportItem | str | os.PathLike],
    out: str | os.PathLike,
    **options: Any,
) -> Path:
    """Write :func:`build_report` to ``out`` (an .html file) and return its path.

    ``out`` is checked first (:func:`memlab.files.check_output_file`: not a
    directory, FIFO or device, in a directory that takes a new file) and
    written atomically, never through a symlink.

    >>> write_report(["memlab-tour/chase.csv"], "report.html")   # doctest: +SKIP
    PosixPath('report.html')
    """
    path = Path(out)
    check_output_file_in_new_directory(path, "report", "report's directory")  # before the figures are drawn
    text = build_report(datasets, **options)
    atomic_write(path, text)
    return path
