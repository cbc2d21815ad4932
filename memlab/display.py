"""Compact HTML tables for Jupyter: what a notebook shows for a Dataset, a Measurement, a comparison.

Each object memlab hands a notebook user gives ``_repr_html_`` (IPython calls
it to display the object): :class:`memlab.dataset.Dataset`,
:class:`memlab.measure.Measurement`, :class:`memlab.compare.Comparison`, and
``memlab.reproduce.ItemResult``. They are built here from plain text cells,
so every object's table looks the same: a heading line, a table of at most
:data:`MAX_ROWS` rows (the rest counted below it) and warning lines (flags).
Everything given is escaped; nothing here reads a memlab object.

>>> text = table_html("chase · quick, 2 points", ["n", "ns"], [["1", "2.0"], ["2", "<3>"]], flags=["flag"])
>>> text.count("<tr>"), "&lt;3&gt;" in text
(3, True)
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

__all__ = ["MAX_ROWS", "table_html"]

#: Rows a notebook table shows; the rest are counted under it ("… and 40 more rows").
MAX_ROWS = 20

_STYLE = ("border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:0.9em")
_CELL = "padding:0.1em 0.6em;border-bottom:1px solid #8884;text-align:right;white-space:nowrap"
_FIRST = "padding:0.1em 0.6em;border-bottom:1px solid #8884;text-align:left;white-space:nowrap"


def _cell(tag: str, index: int, value: Any, flagged: bool = False) -> str:
    style = _FIRST if index == 0 else _CELL
    if flagged:
        style += ";background:#f2b70533"
    return f'<{tag} style="{style}">{html.escape(str(value), quote=True)}</{tag}>'


def table_html(heading: str, header: Sequence[str], rows: Iterable[Sequence[Any]], *,
               flags: Sequence[str] = (), flagged: Sequence[bool] = (), max_rows: int = MAX_ROWS) -> str:
    """A heading, a table of ``rows`` (text cells under ``header``) and ``flags``, as HTML.

    Rows past ``max_rows`` are counted, not shown; a row whose ``flagged`` entry is true is
    tinted (a point measured under disturbed conditions); ``flags`` are warning lines under the table.

    >>> "and 1 more row" in table_html("t", ["a"], [["1"], ["2"]], max_rows=1)
    True
    """
    rows = list(rows)
    tinted = list(flagged) + [False] * max(0, len(rows) - len(flagged))
    lines = [f"<div><b>{html.escape(heading)}</b>", f'<table style="{_STYLE}"><thead><tr>']
    lines += [_cell("th", i, h) for i, h in enumerate(header)]
    lines.append("</tr></thead><tbody>")
    for row, tint in zip(rows[:max_rows], tinted):
        lines.append("<tr>" + "".join(_cell("td", i, c, tint) for i, c in enumerate(row)) + "</tr>")
    lines.append("</tbody></table>")
    hidden = len(rows) - max_rows
    if hidden > 0:
        lines.append(f"<div>… and {hidden} more row{'s' if hidden != 1 else ''}</div>")
    lines += [f"<div>⚠ {html.escape(flag)}</div>" for flag in flags]
    lines.append("</div>")
    return "\n".join(lines)
