"""Generic figure kinds: the shapes every family's standard figure is built from.

A family's figure (``figure=`` of its :class:`memlab.family.Family`) is one
of these kinds, given the family's parameters and metric: a line over a
numeric parameter (:func:`line_figure`, optionally on a log2 axis with the
cache sizes marked), grouped bars (:func:`bars_figure`, with a reference
line and a text over each bar), a table (:func:`table_figure`) or the raw
samples of each point (:func:`samples_figure`); :func:`generic_figure` picks
one for a family without a figure of its own. The helpers a family needs to
shape its rows (:func:`rows_with`, :func:`varying`, :func:`groups`,
:func:`spread`, :func:`label`) are here too. No function here names a family.

matplotlib is an optional dependency (``pip install 'memlab[plot]'``):
without it every figure raises an ImportError that names the extra. No
pyplot state is used, so figures can be made in a loop, in a report or in a
notebook.

>>> ds = Dataset([{"family": "f", "n": 2, "t": 1.0, "t_min": 0.9}, {"family": "f", "n": 4, "t": 2.0, "t_min": 1.9}])
>>> fig = line_figure(ds, "n", "t")   # doctest: +SKIP
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from typing import Any, Callable, Iterable, Mapping, Sequence

from memlab.dataset import (
    MACHINE_PARAM,
    OUTCOME_PAIRS,
    RUN_SPREAD_COLUMN,
    RUN_UNSTABLE_COLUMN,
    Dataset,
    machine_key,
    machine_series,
    point_key,
    run_index,
)
from memlab.machine import cache_sizes, identity
from memlab.significance import UNSTABLE_RUN_SPREAD, is_unstable, median_of_runs, run_spread
from memlab.units import format_bytes, format_param, metric_label

__all__ = [
    "INSTALL_HINT",
    "as_dataset",
    "bars_figure",
    "by_machine",
    "cache_sizes_of",
    "default_machine",
    "family_of",
    "finite",
    "fold_dataset",
    "fold_runs",
    "generic_figure",
    "groups",
    "grouping_names",
    "label",
    "mark_unstable",
    "line_figure",
    "log2_axis",
    "machine_entries",
    "machine_labels",
    "mark_caches",
    "mark_source",
    "cache_level",
    "narrow",
    "outcome_note",
    "telling_names",
    "drawn_elements",
    "embedded_image",
    "figure_title",
    "new_figure",
    "number",
    "outside_legend",
    "require_matplotlib",
    "rows_with",
    "samples_figure",
    "spread",
    "table_figure",
    "set_title",
    "to_palette_png",
    "to_png",
    "to_svg",
    "unstable",
    "varying",
]

INSTALL_HINT = "pip install 'memlab[plot]'"

_CACHE_LINES = ("L1d", "L2", "L3", "L4")


# --------------------------------------------------------------------------
# matplotlib, optional


def require_matplotlib():
    """Import matplotlib (non-interactive) and return the ``Figure`` class memlab's figures use.

    That class is matplotlib's ``Figure`` with a ``_repr_png_``: a notebook shows a memlab figure
    as an image without ``%matplotlib`` or a pyplot import (it renders on the Agg canvas every
    Figure has). Raises ImportError naming the ``plot`` extra when matplotlib is missing.

    >>> Figure = require_matplotlib()   # doctest: +SKIP
    """
    global _FIGURE_CLASS
    try:
        import matplotlib  # noqa: F401  (imported first: a cached submodule must not hide its absence)
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "memlab's figures need matplotlib, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        ) from error
    if _FIGURE_CLASS is None:

        class MemlabFigure(Figure):
            """A matplotlib Figure that Jupyter displays as a PNG (``_repr_png_``), pyplot or not."""

            def _repr_png_(self) -> bytes:
                return to_png(self)

        _FIGURE_CLASS = MemlabFigure
    return _FIGURE_CLASS


_FIGURE_CLASS: Any = None


def new_figure(width: float = 8.0, height: float = 4.8, **subplots: Any):
    """A constrained-layout Figure of ``width`` x ``height`` inches and its axes (``subplots`` as matplotlib's).

    >>> fig, ax = new_figure(6.0, 4.0)   # doctest: +SKIP
    """
    Figure = require_matplotlib()
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(**subplots) if subplots else fig.subplots()
    return fig, axes


def to_png(fig, dpi: int = 110) -> bytes:
    """The figure rendered as PNG bytes.

    >>> to_png(new_figure()[0])[:4]   # doctest: +SKIP
    b'\\x89PNG'
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def to_svg(fig) -> bytes:
    """The figure as SVG bytes: text kept as text (``svg.fonttype: none``, smaller than glyph
    outlines), no date, ids fixed, so that one figure gives the same bytes every time.

    >>> to_svg(new_figure()[0])[:5]   # doctest: +SKIP
    b'<?xml'
    """
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memlab"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


#: Colours of a palette PNG (:func:`to_palette_png`): a figure's few flat colours and their
#: anti-aliased edges fit; 64 instead of 256 made the report's PNGs a fifth smaller, and 32
#: instead of 64 a further seventh (a quick reproduce report: 1.47 MB to 1.36 MB), with no
#: difference a reader sees (chase, bandwidth, pipe and share figures of a quick run).
PALETTE_COLOURS = 32


def to_palette_png(fig, dpi: int = 110) -> bytes:
    """The figure as a PNG of at most :data:`PALETTE_COLOURS` colours (Pillow's quantizer), about
    a quarter to a third of a full-colour PNG; the full-colour PNG when Pillow is not installed.

    >>> to_palette_png(new_figure()[0])[:4]   # doctest: +SKIP
    b'\\x89PNG'
    """
    full = to_png(fig, dpi)
    try:
        from PIL import Image
    except ImportError:
        return full
    with Image.open(io.BytesIO(full)) as image:
        palette = image.convert("RGB").quantize(colors=PALETTE_COLOURS)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    small = buffer.getvalue()
    return small if len(small) < len(full) else full


#: A figure of more drawn elements than this (:func:`drawn_elements`) is embedded as a PNG without
#: drawing its SVG too: of the 37 figures of a quick reproduce report, the SVG was the smaller
#: only for one of 20 elements (11 KiB against 13); from 40 elements on it was 1.2 to 3 times the
#: PNG, and drawing it took 16 of the report's 36 s of figure drawing.
SVG_MAX_ELEMENTS = 32


def drawn_elements(fig) -> int:
    """About how much a figure draws: its lines' points, its collections' markers and paths, and
    its patches, texts and images weighted by what each adds to an SVG (5, 10, 1000).

    >>> drawn_elements(new_figure()[0])   # doctest: +SKIP
    0
    """
    count = 0
    for ax in fig.axes:
        count += sum(len(line.get_xdata()) for line in ax.get_lines())
        for collection in ax.collections:
            count += len(collection.get_offsets()) + sum(len(path.vertices) for path in collection.get_paths())
        count += 5 * len(ax.patches) + 10 * len(ax.texts) + 1000 * len(ax.images)
    return count


def embedded_image(fig, dpi: int = 110) -> tuple[str, bytes]:
    """The smaller drawing of ``fig`` to embed in a page: ``("image/svg+xml", svg)`` or
    ``("image/png", palette png)`` (:func:`to_svg`, :func:`to_palette_png`). A curve of a few
    points is smaller as SVG; a figure of many points or bars is smaller as PNG, and one of more
    than :data:`SVG_MAX_ELEMENTS` drawn elements is not drawn as SVG at all.

    >>> embedded_image(new_figure()[0])[0] in ("image/svg+xml", "image/png")   # doctest: +SKIP
    True
    """
    png = to_palette_png(fig, dpi)
    if drawn_elements(fig) > SVG_MAX_ELEMENTS:
        return "image/png", png
    svg = to_svg(fig)
    return ("image/svg+xml", svg) if len(svg) < len(png) else ("image/png", png)


def figure_title(fig) -> str:
    """The title a figure shows: its suptitle, else the titles of its axes (joined by " / "),
    one line each; "" when it has none.

    >>> fig, ax = new_figure()          # doctest: +SKIP
    >>> _ = fig.suptitle("Fig. 3.16: L2d miss ratio\\nfig3_16")   # doctest: +SKIP
    >>> figure_title(fig)                # doctest: +SKIP
    'Fig. 3.16: L2d miss ratio fig3_16'
    """
    suptitle = getattr(fig, "_suptitle", None)
    texts = [suptitle.get_text()] if suptitle is not None and suptitle.get_text() else []
    if not texts:
        texts = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return " / ".join(" ".join(text.split()) for text in texts)


#: Width (inches) of a figure drawn for a phone, and the smallest type on it (points).
NARROW_WIDTH_IN = 4.4
NARROW_MIN_FONT_PT = 9.5


def narrow(fig):
    """The same figure laid out for a narrow screen (a phone): 4.4 in wide, type no smaller than
    9.5 pt, panels side by side stacked into a column. Changes ``fig`` and returns it.

    At the report's 110 dpi a phone 360 CSS px wide shows this figure's smallest text at
    about 11 CSS px (the desktop drawing would show it at 4-5 px).

    >>> png = to_png(narrow(line_figure(ds, "n", "t")))   # doctest: +SKIP
    """
    from matplotlib.text import Text

    width, height = fig.get_size_inches()
    rows: dict[tuple, list] = {}
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None:
            continue
        key = (spec.rowspan.start, spec.colspan.start)
        rows.setdefault(key, []).append(ax)
    positions = sorted(rows)
    panels = len(positions)
    if panels > 1 and len({key[0] for key in positions}) == 1:
        grid = fig.add_gridspec(panels, 1)
        for index, key in enumerate(positions):
            for ax in rows[key]:
                ax.set_subplotspec(grid[index, 0])
                ax.yaxis.set_tick_params(labelleft=True)
        fig.set_size_inches(NARROW_WIDTH_IN, 1.0 + 2.9 * panels)
    else:
        fig.set_size_inches(NARROW_WIDTH_IN, max(3.4, min(height, NARROW_WIDTH_IN * 0.95)))
    for text in fig.findobj(Text):
        if text.get_text() and text.get_fontsize() < NARROW_MIN_FONT_PT:
            text.set_fontsize(NARROW_MIN_FONT_PT)
    for legend in list(fig.legends):  # two columns at most: rebuilt, a legend's box is fixed
        handles, texts = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
        title = legend.get_title().get_text()
        legend.remove()
        fig.legend(handles, texts, loc="outside lower center", ncols=min(2, len(texts)), frameon=False,
                   fontsize=NARROW_MIN_FONT_PT, title=title or None, title_fontsize=NARROW_MIN_FONT_PT)
    if fig._suptitle is not None:
        lines = fig._suptitle.get_text().split("\n")
        fig._suptitle.set_text("\n".join(textwrap.fill(line, 52) for line in lines))
    for ax in fig.axes:
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        widest = max((max(map(len, t.split("\n"))) for t in ticks if t), default=0)
        if widest * len(ticks) > 34:  # would overlap at this width: slant them
            for tick in ax.get_xticklabels():
                tick.set_rotation(30)
                tick.set_horizontalalignment("right")
                tick.set_rotation_mode("anchor")
    return fig


def outside_legend(fig, ax=None, **options: Any) -> None:
    """One legend for ``ax`` (default: every axes of ``fig``) under the plot, outside the axes:
    it never covers a bar or a line."""
    handles, labels = [], []
    for each in [ax] if ax is not None else fig.axes:
        for handle, text in zip(*each.get_legend_handles_labels()):
            if text not in labels:
                handles.append(handle)
                labels.append(text)
    if not handles:
        return
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(handles)), fontsize=8,
               frameon=False, **options)


# --------------------------------------------------------------------------
# reading a dataset's rows


def as_dataset(data: Dataset | str | os.PathLike) -> Dataset:
    """A Dataset as given, or loaded from a path."""
    if isinstance(data, Dataset):
        return data
    return Dataset.load(data)


def family_of(ds: Dataset) -> str:
    """The dataset's family: from its metadata, else the one family of its rows ("" if none or several).

    >>> family_of(Dataset([{"family": "chase"}]))
    'chase'
    """
    name = ds.metadata.get("family")
    if name:
        return str(name)
    names = {row.get("family") for row in ds.rows} - {None}
    return names.pop() if len(names) == 1 else ""


def number(value: Any) -> float:
    """A cell as a float (NaN for text, booleans and missing values).

    >>> number(3), number("x")
    (3.0, nan)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def finite(value: Any) -> bool:
    """Whether a cell holds a finite number."""
    return math.isfinite(number(value))


def rows_with(ds: Dataset, metric: str) -> list[dict]:
    """One row per point (and machine) with a finite ``metric``, its runs folded into it
    (:func:`fold_runs`); ValueError when there is none."""
    rows = [row for row in ds.rows if finite(row.get(metric))]
    if not rows:
        raise ValueError(f"no row of the dataset has a finite {metric}")
    return fold_runs(rows, ds.param_names, metric)


def fold_runs(rows: Sequence[Mapping[str, Any]], names: Sequence[str], metric: str | Sequence[str]) -> list[dict]:
    """The runs of each point (docs/dataset.md, "Runs") as one row, in the order of first rows.

    The folded row is the point's first run with each of ``metric`` (one
    name or several) the median of its run medians, ``<metric>_min`` and
    ``_max`` over every run, the samples of every run; ``run_spread`` and
    ``run_unstable`` over all its runs (of the first metric,
    :func:`memlab.significance.run_spread`) and ``runs`` their count. A point
    of one run keeps its row as it is.

    >>> rows = [{"family": "f", "n": 1, "t": v, "t_samples": [v], "run": r} for r, v in enumerate((1.0, 2.0, 3.0))]
    >>> [(row["t"], row["run_spread"], row["run_unstable"]) for row in fold_runs(rows, ["n"], "t")]
    [(2.0, 3.0, True)]
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    points: dict[tuple, dict[int, list[Mapping[str, Any]]]] = {}
    for row in rows:
        key = (point_key(row, names), machine_key(row))
        points.setdefault(key, {}).setdefault(run_index(row), []).append(row)
    folded = []
    for runs in points.values():
        members = [row for group in runs.values() for row in group]
        if len(members) == 1:
            folded.append(dict(members[0]))
            continue
        row = dict(members[0])
        for position, name in enumerate(metrics):
            samples = [[v for r in group for v in _run_samples(r, name)] for group in runs.values()]
            samples = [run for run in samples if run]
            if not samples:
                continue
            row[name] = median_of_runs(samples)
            for statistic, pick in (("min", min), ("max", max)):
                values = [number(r.get(f"{name}_{statistic}")) for r in members]
                values = [v for v in values if math.isfinite(v)]
                if values:
                    row[f"{name}_{statistic}"] = pick(values)
            if f"{name}_samples" in row:
                row[f"{name}_samples"] = [v for run in samples for v in run]
            if position == 0:
                spread_of_runs = run_spread(samples)
                row[RUN_SPREAD_COLUMN], row[RUN_UNSTABLE_COLUMN] = spread_of_runs, is_unstable(spread_of_runs)
        row["runs"] = len(runs)
        folded.append(row)
    return folded


def fold_dataset(ds: Dataset) -> Dataset:
    """``ds`` with each point's runs folded into one row (:func:`fold_runs`, every metric, the primary
    first): what a family's figure, table or headline draws from. A dataset of one run a point
    comes back as it is.

    >>> rows = [{"family": "f", "n": 1, "t": v, "t_samples": [v], "run": r} for r, v in enumerate((1.0, 3.0))]
    >>> [row["t"] for row in fold_dataset(Dataset(rows, {"param_names": ["n"]})).rows]
    [2.0]
    """
    if not any(run_index(row) for row in ds.rows):
        return ds
    metrics = list(ds.metric_names)
    try:
        primary = ds.primary_metric()
    except ValueError:
        primary = None
    if primary in metrics:
        metrics = [primary] + [m for m in metrics if m != primary]
    return Dataset(fold_runs(ds.rows, ds.param_names, metrics), ds.metadata)


def _run_samples(row: Mapping[str, Any], metric: str) -> list[float]:
    """A run's finite samples of ``metric`` (its median alone when it kept none)."""
    samples = [number(v) for v in (row.get(f"{metric}_samples") or [])]
    samples = [v for v in samples if math.isfinite(v)]
    if samples:
        return samples
    value = number(row.get(metric))
    return [value] if math.isfinite(value) else []


def unstable(row: Mapping[str, Any]) -> bool:
    """Whether a (folded) row's point is unstable: its runs disagree beyond the bound."""
    flag = row.get(RUN_UNSTABLE_COLUMN)
    return flag is True or (isinstance(flag, str) and flag.lower() == "true")


def mark_unstable(ax, points: Sequence[tuple[float, float]]) -> None:
    """The one marker of every figure kind for an unstable point (its runs disagree by more than
    ``memlab.significance.UNSTABLE_RUN_SPREAD``): a red ring around it, named once in the legend."""
    if not points:
        return
    xs, ys = zip(*points)
    named = getattr(ax, "_memlab_unstable_named", False)
    ax.scatter(xs, ys, s=90, facecolors="none", edgecolors="red", linewidths=1.3, zorder=5,
               label=None if named else f"unstable: runs disagree > {UNSTABLE_RUN_SPREAD:g}x")
    ax._memlab_unstable_named = True


def varying(rows: Sequence[Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    """The names among ``names`` whose value differs between rows."""
    return [n for n in names if len({repr(row.get(n)) for row in rows}) > 1]


def grouping_names(ds: Dataset) -> list[str]:
    """What a figure may group rows by: the parameters, then the columns saying what the kernel
    gave (``pages_obtained``, ``populate_used``) where the rows carry them, so that a bar or a
    line stands for what was obtained, not only for what was asked.

    >>> grouping_names(Dataset([{"family": "f", "pages": "thp", "pages_obtained": "4k"}],
    ...                        {"param_names": ["pages"]}))
    ['pages', 'pages_obtained']
    """
    present = set(ds.columns)
    return [*ds.param_names, *(name for name in OUTCOME_PAIRS if name in present)]


def telling_names(ds: Dataset, rows: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """The columns that tell ``rows`` (default: all of ``ds``'s) apart: the varying parameters, then
    each obtained column (``pages_obtained``, ``populate_used``) that, in some row, differs from what
    was asked (a hugetlb request served with 4 KiB pages, like the 4 KiB rows); one that only
    repeats what was asked is left out. Without the ``_requested`` columns: where it varies.

    >>> rows = [{"family": "f", "pages": p, "pages_requested": p, "pages_obtained": "4k"}
    ...         for p in ("4k", "hugetlb-2m")]
    >>> telling_names(Dataset(rows, {"param_names": ["pages"]}))
    ['pages', 'pages_obtained']
    >>> telling_names(Dataset(rows[:1] * 2, {"param_names": ["pages"]}))
    []
    """
    rows = ds.rows if rows is None else rows
    names = varying(rows, ds.param_names)
    present = set(ds.columns)
    for name in OUTCOME_PAIRS:
        if name not in present:
            continue
        asked = OUTCOME_PAIRS[name][0]
        if any(row.get(asked) for row in rows):
            differs = any(row.get(asked) and row.get(name) not in (None, row.get(asked), "none") for row in rows)
        else:
            differs = bool(varying(rows, [name]))
        if differs:
            names.append(name)
    return names


def label(row: Mapping[str, Any], names: Sequence[str]) -> str:
    """``name=value`` of each name, values formatted for a reader ("all" for no names).

    An obtained column (``pages_obtained``) beside what was asked (``pages``) is shown only
    where the two differ.

    >>> label({"pages": "thp", "pages_obtained": "thp"}, ["pages", "pages_obtained"])
    'pages=thp'
    >>> label({"pages": "hugetlb-2m", "pages_obtained": "4k"}, ["pages", "pages_obtained"])
    'pages=hugetlb-2m pages_obtained=4k'
    """
    shown = [n for n in names if not _same_as_asked(row, n, names)]
    return " ".join(f"{n}={format_param(n, row.get(n))}" for n in shown) or "all"


def outcome_note(row: Mapping[str, Any]) -> str:
    """What the kernel gave where it is not what the row asked for ("" where it is, or unknown):
    ``pages_obtained`` against ``pages_requested``, ``populate_used`` against ``populate_requested``.

    >>> outcome_note({"pages_requested": "thp", "pages_obtained": "4k"})
    'got 4k pages'
    >>> outcome_note({"pages_requested": "thp", "pages_obtained": "thp", "populate_requested": "map_populate",
    ...               "populate_used": "madvise_populate_write"})
    'populated by madvise_populate_write'
    >>> outcome_note({"pages_requested": "4k", "pages_obtained": "4k"})
    ''
    """
    notes = []
    pages, asked = row.get("pages_obtained"), row.get("pages_requested")
    if pages and asked and pages != asked and pages != "none":
        notes.append(f"got {pages} pages")
    used, asked = row.get("populate_used"), row.get("populate_requested")
    if used and asked and used != asked:
        notes.append(f"populated by {used}")
    return ", ".join(notes)


def _same_as_asked(row: Mapping[str, Any], name: str, names: Sequence[str]) -> bool:
    asked = [a for a in OUTCOME_PAIRS.get(name, ()) if a in names]
    return bool(asked) and all(row.get(a) == row.get(name) for a in asked)


def groups(rows: Sequence[dict], names: Sequence[str]) -> dict[tuple, list[dict]]:
    """Rows grouped by their values of ``names``, groups and rows in first-seen order."""
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        key = tuple(repr(row.get(n)) for n in names)
        grouped.setdefault(key, []).append(row)
    return grouped


def spread(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[float], list[float]] | None:
    """Error-bar lengths (below, above) from the rows' ``<metric>_min``/``_max`` (None without them)."""
    if not all(finite(r.get(f"{metric}_min")) and finite(r.get(f"{metric}_max")) for r in rows):
        return None
    below = [max(0.0, r[metric] - r[f"{metric}_min"]) for r in rows]
    above = [max(0.0, r[f"{metric}_max"] - r[metric]) for r in rows]
    return below, above


def default_machine(ds: Dataset) -> tuple:
    """The machine ``(host, fingerprint id)`` of rows that do not name one: the one the
    metadata records, else ``(None, None)``.

    >>> default_machine(Dataset([], {}))
    (None, None)
    """
    facts = ds.metadata.get("machine")
    if isinstance(facts, Mapping) and facts:
        me = identity(facts)
        return me["host"] or None, me["fingerprint_id"]
    return None, None


def machine_labels(ds: Dataset) -> list[str]:
    """Which machine measured each row, as a label ("" for every row of a one-machine dataset).

    See :func:`memlab.dataset.machine_series`: machines differ by fingerprint;
    hosts of one fingerprint are told apart when they measured the same points.

    >>> machine_labels(Dataset([{"family": "f", "n": 1, "context_host": "a", "context_fingerprint_id": "1"},
    ...                         {"family": "f", "n": 1, "context_host": "b", "context_fingerprint_id": "2"}],
    ...                        {"param_names": ["n"]}))
    ['a', 'b']
    """
    return machine_series(ds.rows, ds.param_names, default_machine(ds))


def by_machine(data: Dataset | str | os.PathLike) -> Dataset:
    """The dataset as figures draw it: with several machines, each row gets a ``machine``
    parameter (its label, the first parameter), so every figure kind draws one curve,
    bar series or column per machine; a one-machine dataset is returned as it is.

    >>> view = by_machine(Dataset([{"family": "f", "n": 1, "context_host": "a", "context_fingerprint_id": "1"},
    ...                            {"family": "f", "n": 1, "context_host": "b", "context_fingerprint_id": "2"}],
    ...                           {"param_names": ["n"]}))
    >>> view.param_names, [row["machine"] for row in view.rows]
    (['machine', 'n'], ['a', 'b'])
    """
    ds = as_dataset(data)
    labels = machine_labels(ds)
    if not any(labels):
        return ds
    metadata = dict(ds.metadata)
    metadata["param_names"] = [MACHINE_PARAM] + [n for n in ds.param_names if n != MACHINE_PARAM]
    return Dataset([{**row, MACHINE_PARAM: label} for row, label in zip(ds.rows, labels)], metadata)


def machine_entries(ds: Dataset) -> list[dict[str, Any]]:
    """The machines a dataset's metadata records, one entry each (``host``,
    ``fingerprint_id``, ``fingerprint``, ``facts``): ``metadata["machines"]``, else
    the single ``metadata["machine"]``.

    >>> [e["host"] for e in machine_entries(Dataset([], {"machine": {"hostname": "a"}}))]
    ['a']
    """
    entries = [e for e in ds.metadata.get("machines") or [] if isinstance(e, Mapping)]
    if entries:
        return [dict(e) for e in entries]
    facts = ds.metadata.get("machine")
    if isinstance(facts, Mapping) and facts:
        return [{**identity(facts), "facts": dict(facts)}]
    return []


def cache_sizes_of(ds: Dataset) -> tuple[dict[str, int], str]:
    """Cache sizes in bytes for the dataset's machine, and where they came from.

    From ``metadata["machine"]["caches"]`` when the dataset recorded them,
    else from this machine (``memlab.machine.cache_sizes()``).

    >>> cache_sizes_of(Dataset([], {"machine": {"caches": [
    ...     {"level": 1, "type": "Data", "size_bytes": 32768}]}}))
    ({'L1d': 32768}, 'dataset')
    """
    facts = ds.metadata.get("machine") or {}
    if facts.get("caches"):
        return cache_sizes(facts), "dataset"
    layouts = [cache_sizes(e.get("facts") or {}) for e in machine_entries(ds)]
    if layouts and all(layout == layouts[0] for layout in layouts) and layouts[0]:
        return layouts[0], "dataset"
    if len(layouts) > 1:
        return {}, "several machines with different caches: none marked"
    return cache_sizes(), "this machine"


def set_title(fig, ds: Dataset, text: str) -> None:
    """The figure's title: ``text``, then the sweep and the CPU model the data came from."""
    machine = ds.metadata.get("machine") or {}
    machines = machine_entries(ds)
    cpu = f"{len(machines)} machines" if len(machines) > 1 else machine.get("cpu_model")
    detail = [part for part in (ds.metadata.get("sweep"), cpu) if part]
    fig.suptitle(text + (f"\n{' - '.join(map(str, detail))}" if detail else ""), fontsize=11)


# --------------------------------------------------------------------------
# axes


def log2_axis(ax, values: Sequence[float]) -> None:
    """A log2 x axis labelled 2^n, about a dozen ticks across ``values``."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    positive = [v for v in values if v > 0 and math.isfinite(v)]  # a log axis shows no other x
    if not positive:
        raise ValueError(f"no x value is a positive size for a log2 axis (they run from {min(values)} "
                         f"to {max(values)}): the dataset's sizes are damaged")
    ax.set_xscale("log", base=2)
    low = math.floor(math.log2(min(positive)))
    high = math.ceil(math.log2(max(positive)))
    step = max(1, math.ceil((high - low + 1) / 12))
    ax.xaxis.set_major_locator(FixedLocator([2.0**e for e in range(low, high + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"$2^{{{round(math.log2(x))}}}$" if x > 0 else ""))


def mark_caches(ax, sizes: Mapping[str, int], x_range: tuple[float, float], source: str) -> None:
    """Dashed vertical lines at the cache sizes within ``x_range``, named; ``source`` when not the dataset's."""
    low, high = x_range
    for name in _CACHE_LINES:
        size = sizes.get(name)
        if not size or not low / 2 <= size <= high * 2:
            continue
        ax.axvline(size, color="0.45", linestyle="--", linewidth=0.9, zorder=0)
        ax.annotate(
            f"{name} {format_bytes(size)}", xy=(size, 1.0), xycoords=("data", "axes fraction"),
            xytext=(3, -3), textcoords="offset points", rotation=90, va="top", ha="left",
            fontsize=8, color="0.3",
        )
    if source != "dataset":
        text = source if not sizes else f"cache sizes of {source}"
        ax.text(0.99, 0.01, text, transform=ax.transAxes, ha="right",
                va="bottom", fontsize=7, color="0.4")


#: The gid of every artist :func:`mark_source` draws (a test or a reader finds the marks by it).
SOURCE_GID = "memlab-source"


def mark_source(ax, x: float | None, y: float, label: str, *, span: tuple[float, float] | None = None) -> None:
    """One number of a source on a figure, in ``ax``'s data coordinates: a white diamond at
    (``x``, ``y``) with ``label`` beside it (``"source: 240 cycles, beyond the L2"``); with
    ``span`` (low, high) a line from low to high at ``y`` under the diamond too (a number that
    applies across a region of working sets); with ``x`` None a dotted horizontal line across the
    axes, labelled at its right end (a number that applies to every bar). The y axis grows to
    show ``y`` (and its label) when it lies outside or at the top; the marks come after the figure's own, so its title and
    legend stay as they were. Every artist has the gid :data:`SOURCE_GID`.

    >>> fig, ax = new_figure()                                        # doctest: +SKIP
    >>> mark_source(ax, 1 << 20, 240.0, "source: 240 cycles, P4")     # doctest: +SKIP
    """
    if not (isinstance(y, (int, float)) and math.isfinite(y)):
        raise ValueError(f"y={y!r} must be a finite number")
    if x is not None and not (isinstance(x, (int, float)) and math.isfinite(x)):
        raise ValueError(f"x={x!r} must be a finite number or None")
    low, high = ax.get_ylim()
    log = ax.get_yscale() == "log"
    if log and y <= 0:
        raise ValueError(f"y={y!r} cannot be shown on a log axis (it must be above 0)")
    scale = math.log if log else (lambda v: v)
    if scale(y) > scale(low) + 0.92 * (scale(high) - scale(low)):  # room above it for its label
        ax.set_ylim(top=max(high, y * 1.5 if log else y + 0.1 * (y - min(low, 0.0))))
    elif y < low:
        ax.set_ylim(bottom=y / 1.5 if log else y - 0.08 * (high - y))
    style = {"color": "black", "fontsize": 7, "gid": SOURCE_GID,
             "bbox": {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.75}}
    if x is None:
        ax.axhline(y, color="black", linestyle=":", linewidth=1.1, zorder=6, gid=SOURCE_GID)
        ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(-3, 2),
                    textcoords="offset points", ha="right", va="bottom", zorder=7, **style)
        return
    if span is not None:
        ax.plot(list(span), [y, y], color="black", linewidth=1.2, zorder=6, gid=SOURCE_GID,
                solid_capstyle="butt")
    ax.plot([x], [y], marker="D", markersize=6, markerfacecolor="white", markeredgecolor="black",
            markeredgewidth=1.2, linestyle="none", zorder=7, gid=SOURCE_GID)
    # The label beside the marker, on the side with room: to its left in the right part of the axes.
    across = ax.transAxes.inverted().transform(ax.transData.transform((x, y)))[0]
    right = not math.isfinite(across) or across < 0.55
    ax.annotate(label, xy=(x, y), xytext=(5 if right else -5, 4), textcoords="offset points",
                ha="left" if right else "right", va="bottom", zorder=7, **style)


def cache_level(size: float, sizes: Mapping[str, int]) -> str:
    """The smallest data cache of ``sizes`` (name -> bytes, as :func:`cache_sizes_of` gives them)
    that holds ``size`` bytes, else ``memory``; "-" when no data cache size is known.

    >>> sizes = {"L1d": 48 << 10, "L1i": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
    >>> [cache_level(s, sizes) for s in (4096, 48 << 10, 64 << 10, 8 << 20, 128 << 20)]
    ['L1d', 'L1d', 'L2', 'L3', 'memory']
    """
    data = sorted((bytes_, name) for name, bytes_ in sizes.items() if bytes_ and not name.endswith("i"))
    if not data:
        return "-"
    for bytes_, name in data:
        if size <= bytes_:
            return name
    return "memory"


# --------------------------------------------------------------------------
# the kinds


def line_figure(
    data: Dataset | str | os.PathLike,
    x: str,
    metric: str | None = None,
    *,
    log2_x: bool | None = None,
    caches: bool = False,
    title: str | None = None,
):
    """``metric`` against parameter ``x``, one line per combination of the other varying parameters.

    The shaded band is each point's min..max over its repetitions. ``log2_x``
    (default: when x spans 16x or more) draws x on a log2 axis; ``caches``
    marks the cache sizes of the dataset's machine.

    >>> fig = line_figure(Dataset([{"family": "f", "n": 2, "t": 1.0}, {"family": "f", "n": 4, "t": 2.0}]),
    ...                   "n", "t")   # doctest: +SKIP
    """
    ds = as_dataset(data)
    metric = metric or ds.primary_metric()
    rows = [r for r in rows_with(ds, metric) if finite(r.get(x))]
    if not rows:
        raise ValueError(f"no row of the dataset has a finite {x}")
    others = [n for n in telling_names(ds, rows) if n != x]
    fig, ax = new_figure()
    xs_all = [float(r[x]) for r in rows]
    if log2_x is None:
        log2_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 16
    shaky: list[tuple[float, float]] = []
    for members in groups(rows, others).values():
        members = sorted(members, key=lambda r: r[x])
        xs = [r[x] for r in members]
        ys = [r[metric] for r in members]
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.4, label=label(members[0], others))
        if spread(members, metric) is not None and len(members) > 1:
            ax.fill_between(xs, [r[f"{metric}_min"] for r in members], [r[f"{metric}_max"] for r in members],
                            color=line.get_color(), alpha=0.15, linewidth=0)
        shaky.extend((r[x], r[metric]) for r in members if unstable(r))
    if log2_x:
        log2_axis(ax, xs_all)
    if caches:
        sizes, source = cache_sizes_of(ds)
        mark_caches(ax, sizes, (min(xs_all), max(xs_all)), source)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(metric_label(metric))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    mark_unstable(ax, shaky)
    if others or shaky:
        ax.legend(fontsize=8, loc="best")
    set_title(fig, ds, title or f"{family_of(ds)}: {metric_label(metric)} vs {x.replace('_', ' ')}")
    return fig


def bars_figure(
    data: Dataset | str | os.PathLike,
    metric: str | None = None,
    *,
    category: Sequence[str] | None = None,
    series: Sequence[str] = (),
    facet: Sequence[str] = (),
    reference: tuple[str, float] | None = None,
    annotate: Callable[[dict], str] | None = None,
    title: str | None = None,
    log_y: bool = False,
    scale: float = 1.0,
    ylabel: str | None = None,
    facet_title: Callable[[dict], str] | None = None,
    note: str = "",
):
    """Grouped bars of ``metric``: categories on the x-axis, one bar colour per ``series``.

    ``category``/``series``/``facet`` name parameters (only the varying ones
    are used; ``category`` None takes every other varying parameter; each
    ``facet`` value gets a panel, titled by ``facet_title(row)`` or
    ``name=value``). A category shows only the series it has, side by side
    and centred (no gaps). Error bars are min..max over the repetitions;
    ``reference`` = (label, value) draws a horizontal line; ``annotate(row)``
    writes text over a bar, above its error bar. ``scale`` multiplies the
    values (ns -> µs: 1e-3, with ``ylabel`` saying the unit); ``log_y`` draws
    a log axis (bars of very different heights); ``note`` is a line of small
    text under the plot (what the numbers over the bars are). The legend
    sits under the plot, never over a bar.

    >>> fig = bars_figure(Dataset([{"family": "f", "k": "a", "v": 1.0}]), "v")   # doctest: +SKIP
    """
    ds = as_dataset(data)
    metric = metric or ds.primary_metric()
    rows = rows_with(ds, metric)
    changing = telling_names(ds, rows)
    facet = [n for n in facet if n in changing]
    machine = [MACHINE_PARAM] if MACHINE_PARAM in changing and MACHINE_PARAM not in facet else []
    series = machine + [n for n in series if n in changing and n != MACHINE_PARAM]
    if category is None:
        category = [n for n in changing if n not in series and n not in facet]
    else:
        category = [n for n in category if n in changing and n not in series]
    panels = groups(rows, facet)
    per_panel = [len(groups(members, category)) * max(1, len(groups(members, series)))
                 for members in panels.values()]
    slots = sum(per_panel)
    fig, axes = new_figure(max(6.0, min(14.0, 2.5 + 0.75 * slots)), 4.8,
                           ncols=len(panels), sharey=True, squeeze=False,
                           gridspec_kw={"width_ratios": [max(2, n) for n in per_panel]})
    series_keys = list(groups(rows, series))
    colors = {key: f"C{i % 10}" for i, key in enumerate(series_keys)}
    named = set()
    shaky_bars = False
    for ax in axes[0]:
        ax.set_yscale("log" if log_y else "linear")
    for ax, members in zip(axes[0], panels.values()):
        categories = groups(members, category)
        for c_index, c_members in enumerate(categories.values()):
            present = [key for key in series_keys
                       if any(tuple(repr(r.get(n)) for n in series) == key for r in c_members)]
            width = 0.8 / max(1, len(present))
            for s_index, s_key in enumerate(present):
                row = next(r for r in c_members if tuple(repr(r.get(n)) for n in series) == s_key)
                x = c_index + (s_index - (len(present) - 1) / 2) * width
                errors = spread([row], metric)
                yerr = None if errors is None else [[errors[0][0] * scale], [errors[1][0] * scale]]
                bar_label = label(row, series) if series and s_key not in named else None
                named.add(s_key)
                ax.bar([x], [row[metric] * scale], width * 0.92, color=colors[s_key], label=bar_label,
                       yerr=yerr, capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
                if unstable(row):
                    mark_unstable(ax, [(x, row[metric] * scale)])
                    shaky_bars = True
                text = annotate(row) if annotate is not None else ""
                if text:
                    top = row[metric] * scale + (yerr[1][0] if yerr is not None else 0.0)
                    ax.annotate(text, (x, top), xytext=(0, 2), textcoords="offset points", ha="center",
                                va="bottom", fontsize=7)
        labels = [_category_label(c[0], category, members) for c in categories.values()]
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlim(-0.6, len(labels) - 0.4)
        if category:
            ax.set_xlabel(category[0].replace("_", " "), fontsize=9)
        if facet:
            ax.set_title(facet_title(members[0]) if facet_title else label(members[0], facet), fontsize=9)
        if reference is not None:
            ax.axhline(reference[1] * scale, color="k", linestyle="--", linewidth=1.0, label=reference[0])
        ax.grid(True, axis="y", alpha=0.3)
        if log_y:
            ax.margins(y=0.25)
        else:
            ax.margins(y=0.12)
    axes[0][0].set_ylabel(ylabel or metric_label(metric))
    if series or reference is not None or shaky_bars:
        outside_legend(fig)
    set_title(fig, ds, (title or f"{family_of(ds)}: {metric_label(metric)}") + (f"\n({note})" if note else ""))
    return fig


def _category_label(row: Mapping[str, Any], names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """The first parameter's value, then ``name=value`` for each other one that differs from its usual value
    (an obtained column beside what was asked: where it differs from what was asked).

    >>> rows = [{"populate": "touch", "populate_used": "touch"},
    ...         {"populate": "map_populate", "populate_used": "madvise_populate_write"}]
    >>> [_category_label(r, ["populate", "populate_used"], rows) for r in rows]
    ['touch', 'map_populate\\npopulate_used=madvise_populate_write']
    """
    if not names:
        return ""
    parts = [format_param(names[0], row.get(names[0]))]
    for name in names[1:]:
        if any(asked in names for asked in OUTCOME_PAIRS.get(name, ())):
            if not _same_as_asked(row, name, names):
                parts.append(f"{name}={format_param(name, row.get(name))}")
            continue
        values = [repr(r.get(name)) for r in rows]
        usual = max(set(values), key=values.count)
        if repr(row.get(name)) != usual:
            parts.append(f"{name}={format_param(name, row.get(name))}")
    return "\n".join(parts)


def table_figure(
    data: Dataset | str | os.PathLike,
    header: Sequence[str],
    cells: Sequence[Sequence[str]],
    *,
    widths: Sequence[float] | None = None,
    bold_last: bool = False,
    title: str = "",
):
    """A table drawn as a figure: ``header`` over ``cells`` (text, one list per line).

    The first column is left-aligned, the others right-aligned; ``bold_last``
    sets the last line (a total, a score) in bold.

    >>> fig = table_figure(Dataset([]), ["test", "index"], [["spawn", "400.0"]])   # doctest: +SKIP
    """
    ds = as_dataset(data)
    fig, ax = new_figure(8.0, 1.0 + 0.3 * (len(cells) + 1))
    ax.axis("off")
    table = ax.table(cellText=[list(line) for line in cells], colLabels=list(header),
                     colWidths=list(widths) if widths else None, loc="center", cellLoc="right",
                     colLoc="right")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1.0, 1.35)
    for (r, c), cell in table.get_celld().items():
        if c == 0:
            cell.set_text_props(ha="left")
        if r == 0 or (bold_last and r == len(cells)):
            cell.set_text_props(weight="bold")
    set_title(fig, ds, title or family_of(ds))
    return fig


def samples_figure(
    data: Dataset | str | os.PathLike,
    metric: str,
    *,
    reference: tuple[str, float] | None = None,
    ylabel: str | None = None,
    title: str | None = None,
):
    """Every kept sample of ``metric`` as a dot and the median as a bar, one column per point.

    ``reference`` = (label, value) draws a horizontal dashed line (a nominal
    value to compare with).

    >>> fig = samples_figure("memlab-tour/calibrate.csv", "core_GHz")   # doctest: +SKIP
    """
    ds = as_dataset(data)
    rows = rows_with(ds, metric)
    fig, ax = new_figure(6.5, 4.0)
    names = varying(rows, ds.param_names) or ds.param_names[:1]
    for index, row in enumerate(rows):
        samples = [v for v in (row.get(f"{metric}_samples") or []) if finite(v)]
        ax.scatter([index] * len(samples), samples, color="C0", s=14, alpha=0.6)
        ax.scatter([index], [row[metric]], color="C1", marker="_", s=600, label="median" if index == 0 else None)
    mark_unstable(ax, [(index, row[metric]) for index, row in enumerate(rows) if unstable(row)])
    if reference is not None and math.isfinite(reference[1]):
        ax.axhline(reference[1], color="k", linestyle="--", linewidth=1, label=reference[0])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([label(r, names) for r in rows], fontsize=8)
    ax.set_ylabel(ylabel or metric_label(metric))
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    set_title(fig, ds, title or f"{family_of(ds)}: {metric_label(metric)}")
    return fig


def generic_figure(data: Dataset | str | os.PathLike):
    """The figure of a family without one of its own: the primary metric over the
    first numeric parameter with more than two values (lines), else bars.

    >>> fig = generic_figure(Dataset([{"family": "x", "k": "a", "GB_per_s": 1.0, "GB_per_s_min": 0.9}]))  # doctest: +SKIP
    """
    ds = as_dataset(data)
    metric = ds.primary_metric()
    rows = rows_with(ds, metric)
    changing = varying(rows, ds.param_names)
    numeric = [n for n in changing if all(finite(r.get(n)) for r in rows) and len({r[n] for r in rows}) > 2]
    if numeric:
        return line_figure(ds, numeric[0], metric)
    return bars_figure(ds, metric)
