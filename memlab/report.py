"""One self-contained HTML report of one or more datasets.

The report holds, for every dataset, its standard figure (a PNG embedded as
a ``data:`` URI) with the family's caption, a table of its points (the
varying parameters, the primary metric's median with min..max and the
family's ``report_columns``),
then the facts of the machine the data came from, the memlab version and the
exact command that wrote it. It needs no server, no network and no other
file, and reflows to a phone's width.

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
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from memlab import chart, plot, registry
from memlab._version import __version__
from memlab.check import conditions_warning
from memlab.dataset import Dataset, context_column, machine_key
from memlab.family import Family
from memlab.machine import collect, format_facts
from memlab.units import format_number, format_param

__all__ = ["ReportItem", "as_items", "build_report", "write_report"]

_STYLE = """
:root { color-scheme: light dark; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; line-height: 1.45;
       max-width: 62rem; margin: 0 auto; padding: 0.8rem; }
h1 { font-size: 1.5rem; margin: 0.4rem 0; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #8884; padding-bottom: 0.2rem; }
img { max-width: 100%; height: auto; display: block; margin: 0.6rem 0; background: #fff; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.85rem; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2rem 0.55rem; border-bottom: 1px solid #8883; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { position: sticky; top: 0; background: Canvas; }
pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.8rem; }
pre { white-space: pre-wrap; word-break: break-word; background: #8881; padding: 0.6rem; }
.meta { color: GrayText; font-size: 0.85rem; }
.failed { border-left: 4px solid #c33; padding-left: 0.6rem; }
.badge { background: #f2b705; color: #000; border-radius: 0.3rem; padding: 0 0.35rem; font-weight: 600; }
tr.flagged td { background: #f2b70522; }
.warn { border-left: 4px solid #f2b705; padding-left: 0.6rem; }
nav ul { padding-left: 1.2rem; columns: 2 12rem; }
"""


@dataclass
class ReportItem:
    """One section of a report: a dataset (or a failure) with a heading."""

    title: str
    dataset: Dataset | None = None
    source: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _anchor(index: int, title: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
    return f"s{index}-{cleaned}"


def _family(ds: Dataset) -> Family | None:
    return registry.all_families().get(str(ds.metadata.get("family") or ""))


def _table(ds: Dataset) -> str:
    try:
        metric = ds.primary_metric()
    except ValueError:
        return "<p>No metric columns.</p>"
    params = ds.param_names
    shown = chart.varying(ds.rows, params) or params
    family = _family(ds)
    wanted = family.report_columns if family is not None else ()
    extras = [c for c in wanted if c in set(ds.columns) and c != metric]
    header = [*shown, f"{metric} (median)", "min … max", "n", *extras]
    watched = any(key in row for row in ds.rows for key in _CONDITION_COLUMNS)
    if watched:
        header.append("conditions")
    lines = [_conditions_note(ds), "<div class=scroll><table>", "<thead><tr>"]
    lines += [f"<th>{_escape(h)}</th>" for h in header]
    lines.append("</tr></thead><tbody>")
    for row in ds.rows:
        low, high = row.get(f"{metric}_min"), row.get(f"{metric}_max")
        spread = f"{format_number(low)} … {format_number(high)}" if low is not None else "-"
        cells = [format_param(n, row.get(n)) for n in shown]
        cells += [format_number(row.get(metric)), spread, format_number(row.get("repeat"))]
        cells += [format_number(row.get(c)) for c in extras]
        html_cells = [f"<td>{_escape(c)}</td>" for c in cells]
        if watched:
            html_cells.append(f"<td>{_conditions_badge(row)}</td>")
        flagged = " class=flagged" if watched and _row_warning(row) else ""
        lines.append(f"<tr{flagged}>" + "".join(html_cells) + "</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(line for line in lines if line)


_CONDITION_COLUMNS = (context_column("on_cpu_fraction"), context_column("steal_fraction"))


def _row_warning(row: dict) -> str:
    def number(key: str) -> float | None:
        value = row.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return conditions_warning(number(_CONDITION_COLUMNS[0]), number(_CONDITION_COLUMNS[1]))


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


def _conditions_note(ds: Dataset) -> str:
    flagged = sum(1 for row in ds.rows if _row_warning(row))
    if not flagged:
        return ""
    return (f"<p class=warn><span class=badge>⚠</span> {flagged} of {len(ds.rows)} points were "
            f"measured with less than 90% of their wall time on CPU or more than 2% steal time: "
            f"their numbers include time they were not running (see <code>memlab check</code>).</p>")


def _check_summary(meta: dict) -> str:
    """One line on the machine checks at the sweep's start and end, when they warned."""
    parts = []
    for key, when in (("check_start", "start"), ("check_end", "end")):
        report = meta.get(key)
        if isinstance(report, dict) and report.get("warnings"):
            parts.append(f"at the {when}: {', '.join(map(str, report['warnings']))}")
    return ("machine check warnings " + "; ".join(parts)) if parts else ""


def _figure_html(ds: Dataset, title: str) -> str:
    try:
        png = chart.to_png(plot.figure(ds))
    except ImportError as error:
        return f"<p class=meta>No figure: {_escape(error)}</p>"
    except (ValueError, TypeError, KeyError) as error:
        return f"<p class=meta>No figure could be drawn: {_escape(error)}</p>"
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_escape(title)}: standard figure">'


def _section(index: int, item: ReportItem) -> str:
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
        if len(ds):
            parts.append(_figure_html(ds, item.title))
            family = _family(ds)
            caption = family.caption_for(ds) if family is not None else ""
            if caption:
                parts.append(f"<p>{_escape(caption)}</p>")
            parts.append(_table(chart.by_machine(ds)))
            missing = _missing_counters(ds)
            if missing:
                parts.append(f"<p class=meta>Counters this machine could not give: {_escape(missing)}</p>")
        else:
            parts.append("<p>The dataset has no rows.</p>")
    for note in item.notes:
        parts.append(f"<p class=meta>{_escape(note)}</p>")
    if item.error:
        parts.append(f"<div class=failed><p>Failed:</p><pre>{_escape(item.error)}</pre></div>")
    parts.append("</section>")
    return "\n".join(parts)


def _missing_counters(ds: Dataset) -> str:
    names: dict[str, str] = {}
    for row in ds.rows:
        missing = row.get("counters_missing")
        if isinstance(missing, dict):
            names.update(missing)
    return ", ".join(sorted(names))


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
) -> str:
    """The report's HTML text: one section per dataset, machine facts, version and command.

    ``datasets`` are Datasets, paths to datasets, or :class:`ReportItem`
    (which may carry an error instead of data, e.g. a family that failed
    during a tour). ``command`` defaults to this process's command line.

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
    if intro:
        body.append(f"<p>{_escape(intro)}</p>")
    body.append(f'<nav><ul>{toc}<li><a href="#machine">machine</a></li></ul></nav>')
    body += [_section(i, item) for i, item in enumerate(items)]
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

    >>> write_report(["memlab-tour/chase.csv"], "report.html")   # doctest: +SKIP
    PosixPath('report.html')
    """
    path = Path(out)
    if path.parent != Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    text = build_report(datasets, **options)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
