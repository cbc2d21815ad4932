"""The standard figure of each family, drawn the way its seed draws it.

matplotlib is an optional dependency (``pip install 'memlab[plot]'``);
without it every function here raises an ImportError that names the extra.
Each figure function takes a :class:`memlab.dataset.Dataset` (or a path to
one) and returns a :class:`matplotlib.figure.Figure`; :func:`figure` picks the
function from the dataset's ``metadata["family"]``. No pyplot state is used,
so figures can be made in a loop, in a report or in a notebook.

Example::

    >>> from memlab.dataset import Dataset
    >>> ds = Dataset([{"family": "calibrate", "budget_ns": 50_000_000, "core_GHz": 3.3}],
    ...              {"family": "calibrate", "param_names": ["budget_ns"]})
    >>> fig = figure(ds)                 # doctest: +SKIP (needs matplotlib)
    >>> fig.savefig("calibrate.png")     # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from memlab.dataset import Dataset

__all__ = [
    "FIGURES",
    "INSTALL_HINT",
    "UNIXBENCH_BASELINES",
    "bars_figure",
    "cache_sizes_of",
    "calibrate_figure",
    "chase_figure",
    "clear_fault_figure",
    "clear_order_figure",
    "figure",
    "latency_figure",
    "line_figure",
    "matrix_figure",
    "matrix_init_figure",
    "pipe_figure",
    "pipe_latency_figure",
    "plot_main",
    "region_figure",
    "require_matplotlib",
    "share_figure",
    "system_figure",
    "to_png",
    "unixbench_index",
]

INSTALL_HINT = "pip install 'memlab[plot]'"

#: UnixBench's baselines (George, a SPARCstation 20-61, = index 10): test -> (result, unit).
UNIXBENCH_BASELINES: dict[tuple[str, int | None, int | None], tuple[float, str]] = {
    ("execl", None, None): (43.0, "lps"),
    ("spawn", None, None): (126.0, "lps"),
    ("file_copy", 1024, 2000): (3960.0, "KBps"),
    ("file_copy", 256, 500): (1655.0, "KBps"),
    ("file_copy", 4096, 8000): (5800.0, "KBps"),
}

_CACHE_LINES = ("L1d", "L2", "L3", "L4")


# --------------------------------------------------------------------------
# matplotlib, optional


def require_matplotlib():
    """Import matplotlib (non-interactive) and return its ``Figure`` class.

    Raises ImportError naming the ``plot`` extra when matplotlib is missing.

    >>> Figure = require_matplotlib()   # doctest: +SKIP
    """
    try:
        import matplotlib  # noqa: F401  (imported first: a cached submodule must not hide its absence)
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "memlab's figures need matplotlib, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        ) from error
    return Figure


def _new_figure(width: float = 8.0, height: float = 4.8, **subplots: Any):
    Figure = require_matplotlib()
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(**subplots) if subplots else fig.subplots()
    return fig, axes


def to_png(fig, dpi: int = 110) -> bytes:
    """The figure rendered as PNG bytes.

    >>> to_png(figure(Dataset([{"family": "x", "n": 1, "v": 2.0}])))[:4]   # doctest: +SKIP
    b'\\x89PNG'
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


# --------------------------------------------------------------------------
# reading a dataset


def _as_dataset(data: Dataset | str | os.PathLike) -> Dataset:
    if isinstance(data, Dataset):
        return data
    return Dataset.load(data)


def _family(ds: Dataset) -> str:
    name = ds.metadata.get("family")
    if name:
        return str(name)
    names = {row.get("family") for row in ds.rows} - {None}
    return names.pop() if len(names) == 1 else ""


def _param_names(ds: Dataset) -> list[str]:
    """The parameter columns: from the metadata, else the columns before the first metric."""
    names = ds.metadata.get("param_names")
    columns = ds.columns
    if names:
        # A metric with a parameter's name overwrites it in the row: not a parameter any more.
        return [n for n in names if n in set(columns) and f"{n}_samples" not in columns]
    found = []
    for name in columns:
        if name == "family":
            continue
        if f"{name}_samples" in columns or f"{name}_min" in columns:
            break
        found.append(name)
    return found


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _finite(value: Any) -> bool:
    return math.isfinite(_number(value))


def _primary_metric(ds: Dataset, preferred: Sequence[str] = ()) -> str:
    columns = set(ds.columns)
    for name in (*preferred, ds.metadata.get("primary_metric")):
        if name and name in columns:
            return name
    for name in ds.columns:
        if name.startswith(("ns_per_", "GB_per_s", "GiB_per_s")) and not name.endswith(
            ("_min", "_max", "_mean", "_stdev", "_iqr", "_samples")
        ):
            return name
    raise ValueError(f"the dataset has no metric to plot (columns: {', '.join(ds.columns)})")


def _rows_with(ds: Dataset, metric: str) -> list[dict]:
    rows = [row for row in ds.rows if _finite(row.get(metric))]
    if not rows:
        raise ValueError(f"no row of the dataset has a finite {metric}")
    return rows


def _varying(rows: Sequence[Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    return [n for n in names if len({repr(row.get(n)) for row in rows}) > 1]


def _format_bytes(value: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            scaled = value / size
            return f"{scaled:.0f} {unit}" if scaled == int(scaled) else f"{scaled:.3g} {unit}"
    return f"{value:.0f} B"


def _format_value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int) and (name.endswith(("_bytes", "_size")) or name == "bytes") and value >= 1024:
        return _format_bytes(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _label(row: Mapping[str, Any], names: Sequence[str]) -> str:
    return " ".join(f"{n}={_format_value(n, row.get(n))}" for n in names) or "all"


def _groups(rows: Sequence[dict], names: Sequence[str]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = tuple(repr(row.get(n)) for n in names)
        groups.setdefault(key, []).append(row)
    return groups


def _spread(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[float], list[float]] | None:
    """Error-bar lengths (below, above) from the rows' ``<metric>_min``/``_max``."""
    if not all(_finite(r.get(f"{metric}_min")) and _finite(r.get(f"{metric}_max")) for r in rows):
        return None
    below = [max(0.0, r[metric] - r[f"{metric}_min"]) for r in rows]
    above = [max(0.0, r[f"{metric}_max"] - r[metric]) for r in rows]
    return below, above


def cache_sizes_of(ds: Dataset) -> tuple[dict[str, int], str]:
    """Cache sizes in bytes for the dataset's machine, and where they came from.

    From ``metadata["machine"]["caches"]`` when the dataset recorded them,
    else from this machine (``memlab.machine.cache_sizes()``).

    >>> cache_sizes_of(Dataset([], {"machine": {"caches": [
    ...     {"level": 1, "type": "Data", "size_bytes": 32768}]}}))
    ({'L1d': 32768}, 'dataset')
    """
    from memlab.machine import cache_sizes

    facts = ds.metadata.get("machine") or {}
    if facts.get("caches"):
        return cache_sizes(facts), "dataset"
    return cache_sizes(), "this machine"


def _title(fig, ds: Dataset, text: str) -> None:
    machine = ds.metadata.get("machine") or {}
    detail = [part for part in (ds.metadata.get("sweep"), machine.get("cpu_model")) if part]
    fig.suptitle(text + (f"\n{' - '.join(map(str, detail))}" if detail else ""), fontsize=11)


def _metric_label(metric: str) -> str:
    return metric.replace("_per_", " per ").replace("_", " ")


# --------------------------------------------------------------------------
# generic shapes


def _log2_axis(ax, values: Sequence[float]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    low = math.floor(math.log2(min(values)))
    high = math.ceil(math.log2(max(values)))
    step = max(1, math.ceil((high - low + 1) / 12))
    ax.xaxis.set_major_locator(FixedLocator([2.0**e for e in range(low, high + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"$2^{{{round(math.log2(x))}}}$" if x > 0 else ""))


def _mark_caches(ax, sizes: Mapping[str, int], x_range: tuple[float, float], source: str) -> None:
    low, high = x_range
    for name in _CACHE_LINES:
        size = sizes.get(name)
        if not size or not low / 2 <= size <= high * 2:
            continue
        ax.axvline(size, color="0.45", linestyle="--", linewidth=0.9, zorder=0)
        ax.annotate(
            f"{name} {_format_bytes(size)}", xy=(size, 1.0), xycoords=("data", "axes fraction"),
            xytext=(3, -3), textcoords="offset points", rotation=90, va="top", ha="left",
            fontsize=8, color="0.3",
        )
    if source != "dataset":
        ax.text(0.99, 0.01, f"cache sizes of {source}", transform=ax.transAxes, ha="right",
                va="bottom", fontsize=7, color="0.4")


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

    The shaded band is each point's min..max over its repetitions.

    >>> fig = line_figure(Dataset([{"family": "f", "n": 2, "t": 1.0}, {"family": "f", "n": 4, "t": 2.0}]),
    ...                   "n", "t")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    metric = metric or _primary_metric(ds)
    rows = [r for r in _rows_with(ds, metric) if _finite(r.get(x))]
    if not rows:
        raise ValueError(f"no row of the dataset has a finite {x}")
    others = [n for n in _varying(rows, _param_names(ds)) if n != x]
    fig, ax = _new_figure()
    xs_all = [float(r[x]) for r in rows]
    if log2_x is None:
        log2_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 16
    for key, members in _groups(rows, others).items():
        members = sorted(members, key=lambda r: r[x])
        xs = [r[x] for r in members]
        ys = [r[metric] for r in members]
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.4, label=_label(members[0], others))
        spread = _spread(members, metric)
        if spread is not None and len(members) > 1:
            ax.fill_between(xs, [r[f"{metric}_min"] for r in members], [r[f"{metric}_max"] for r in members],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    if log2_x:
        _log2_axis(ax, xs_all)
    if caches:
        sizes, source = cache_sizes_of(ds)
        _mark_caches(ax, sizes, (min(xs_all), max(xs_all)), source)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(_metric_label(metric))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if others:
        ax.legend(fontsize=8, loc="best")
    _title(fig, ds, title or f"{_family(ds)}: {_metric_label(metric)} vs {x.replace('_', ' ')}")
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
):
    """Grouped bars of ``metric``: categories on the x-axis, one bar colour per ``series``.

    ``category``/``series``/``facet`` name parameters (only the varying ones
    are used; ``category`` None takes every other varying parameter). Error
    bars are min..max over the repetitions; ``reference`` = (label, value)
    draws a horizontal line; ``annotate(row)`` writes text over a bar.

    >>> fig = bars_figure(Dataset([{"family": "f", "k": "a", "v": 1.0}]), "v")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    metric = metric or _primary_metric(ds)
    rows = _rows_with(ds, metric)
    varying = _varying(rows, _param_names(ds))
    series = [n for n in series if n in varying]
    facet = [n for n in facet if n in varying]
    if category is None:
        category = [n for n in varying if n not in series and n not in facet]
    else:
        category = [n for n in category if n in varying]
    panels = _groups(rows, facet)
    slots = sum(len(_groups(members, category)) for members in panels.values())
    fig, axes = _new_figure(max(6.0, min(14.0, 2.5 + 1.5 * slots)), 4.8,
                            ncols=len(panels), sharey=True, squeeze=False)
    series_keys = list(_groups(rows, series))
    colors = [f"C{i % 10}" for i in range(len(series_keys))]
    width = 0.8 / max(1, len(series_keys))
    for ax, members in zip(axes[0], panels.values()):
        categories = _groups(members, category)
        for s_index, s_key in enumerate(series_keys):
            xs, ys, chosen = [], [], []
            for c_index, c_members in enumerate(categories.values()):
                hit = [r for r in c_members if tuple(repr(r.get(n)) for n in series) == s_key]
                if hit:
                    xs.append(c_index + (s_index - (len(series_keys) - 1) / 2) * width)
                    ys.append(hit[0][metric])
                    chosen.append(hit[0])
            if not chosen:
                continue
            spread = _spread(chosen, metric)
            label = _label(chosen[0], series) if series else None
            bars = ax.bar(xs, ys, width * 0.92, color=colors[s_index], label=label,
                          yerr=spread, capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            if annotate is not None:
                for bar, row in zip(bars, chosen):
                    text = annotate(row)
                    if text:
                        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                    xytext=(0, 3), textcoords="offset points", ha="center",
                                    va="bottom", fontsize=7)
        labels = [_category_label(c[0], category, members) for c in categories.values()]
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        if category:
            ax.set_xlabel(category[0].replace("_", " "), fontsize=9)
        if facet:
            ax.set_title(_label(members[0], facet), fontsize=9)
        if reference is not None:
            ax.axhline(reference[1], color="k", linestyle="--", linewidth=1.0, label=reference[0])
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.12)
    axes[0][0].set_ylabel(_metric_label(metric))
    if series or reference is not None:
        axes[0][-1].legend(fontsize=8, loc="best")
    _title(fig, ds, title or f"{_family(ds)}: {_metric_label(metric)}")
    return fig


def _category_label(row: Mapping[str, Any], names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """The first parameter's value, then ``name=value`` for each other one that differs from its usual value."""
    if not names:
        return ""
    parts = [_format_value(names[0], row.get(names[0]))]
    for name in names[1:]:
        values = [repr(r.get(name)) for r in rows]
        usual = max(set(values), key=values.count)
        if repr(row.get(name)) != usual:
            parts.append(f"{name}={_format_value(name, row.get(name))}")
    return "\n".join(parts)


def _generic_figure(ds: Dataset):
    metric = _primary_metric(ds)
    rows = _rows_with(ds, metric)
    varying = _varying(rows, _param_names(ds))
    numeric = [n for n in varying if all(_finite(r.get(n)) for r in rows) and len({r[n] for r in rows}) > 2]
    if numeric:
        return line_figure(ds, numeric[0], metric)
    return bars_figure(ds, metric)


# --------------------------------------------------------------------------
# the families' figures


def latency_figure(data: Dataset | str | os.PathLike, metric: str | None = None,
                   x: str = "working_set_bytes"):
    """Latency per element (ns) vs working set on a log2 axis, cache sizes marked.

    One line per variant (every other parameter that varies: npad, order,
    pages ...); the vertical dashed lines are the L1d, L2 and L3 sizes of the
    machine the dataset was measured on. A right-hand axis gives cycles per
    element when the dataset has them (Drepper's figures 3.10-3.15 plot cycles).

    >>> fig = latency_figure("results/chase-quick.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    metric = metric or _primary_metric(ds, ("ns_per_element",))
    fig = line_figure(ds, x, metric, log2_x=True, caches=True,
                      title=f"{_family(ds)}: {_metric_label(metric)} vs working set")
    ax = fig.axes[0]
    ax.set_xlabel("working set (bytes, log2)")
    values = [r[metric] for r in ds.rows if _finite(r.get(metric)) and r[metric] > 0]
    if values and max(values) / min(values) > 20:
        lows = [r.get(f"{metric}_min") for r in ds.rows]
        low = min([v for v in lows if _finite(v) and v > 0] + values)
        ax.set_ylim(low / 1.5, None)
        ax.set_yscale("log")  # as Drepper's figure 3.15: L1 and DRAM latency on one plot
    ratios = [
        r["cycles_per_element"] / r[metric]
        for r in ds.rows
        if metric == "ns_per_element" and _finite(r.get("cycles_per_element")) and _finite(r.get(metric))
        and r[metric] > 0
    ]
    if ratios:
        ratios.sort()
        ghz = ratios[len(ratios) // 2]
        if ghz > 0:
            secondary = ax.secondary_yaxis("right", functions=(lambda ns: ns * ghz, lambda c: c / ghz))
            secondary.set_ylabel(f"cycles per element (at {ghz:.2f} GHz)")
    return fig


chase_figure = latency_figure


def _chase_sweep_figure(ds: Dataset):
    """A chase dataset's figure, chosen by its sweep (memlab.chase_views; plot.py imports no family)."""
    from memlab.chase_views import figure as chase_views_figure

    return chase_views_figure(ds)


def _rung_label(row: Mapping[str, Any]) -> str:
    label = f"{row.get('writer', '?')}/{row.get('reader', '?')}"
    if row.get("huge_pages"):
        label += "\n+huge pages"
    if row.get("busy_loop"):
        label += "\n+busy loop"
    return label


def _placement(row: Mapping[str, Any]) -> str:
    writer, reader = row.get("writer_cpu"), row.get("reader_cpu")
    if not _finite(writer) or not _finite(reader):
        return "unpinned"
    return "one CPU" if writer == reader else "two CPUs"


def _rung_order(row: Mapping[str, Any]) -> tuple:
    return (row.get("writer") == "vmsplice", row.get("reader") == "splice",
            bool(row.get("huge_pages")), bool(row.get("busy_loop")))


def pipe_figure(data: Dataset | str | os.PathLike, metric: str = "GiB_per_s"):
    """The pipe ladder: GiB/s per rung as bars, each labelled with its ratio to the first rung.

    Rungs are ordered as in "Making Linux pipes fast" (write/read, vmsplice,
    splice, huge pages, busy loop); one bar colour per placement (writer and
    reader on two CPUs, or on one).

    >>> fig = pipe_figure("memlab-tour/pipe.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    rows = _rows_with(ds, metric)
    rung_params = {"writer", "reader", "huge_pages", "busy_loop", "writer_cpu", "reader_cpu"}
    extra = [n for n in _varying(rows, _param_names(ds)) if n not in rung_params]
    rows = sorted(rows, key=lambda r: (_rung_order(r), tuple(repr(r.get(n)) for n in extra)))

    def rung_label(row: Mapping[str, Any]) -> str:
        return _rung_label(row) + ("\n" + _label(row, extra) if extra else "")

    labels: list[str] = []
    for row in rows:
        if rung_label(row) not in labels:
            labels.append(rung_label(row))
    order = ("two CPUs", "one CPU", "unpinned")
    placements = sorted({_placement(row) for row in rows}, key=order.index)
    fig, ax = _new_figure(max(6.5, min(14.0, 1.4 * len(labels) + 2)), 4.8)
    width = 0.8 / len(placements)
    for p_index, placement in enumerate(placements):
        members = [r for r in rows if _placement(r) == placement]
        first = members[0][metric]
        xs = [labels.index(rung_label(r)) + (p_index - (len(placements) - 1) / 2) * width for r in members]
        bars = ax.bar(xs, [r[metric] for r in members], width * 0.92, color=f"C{p_index}",
                      label=placement, yerr=_spread(members, metric), capsize=2,
                      error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
        for bar, row in zip(bars, members):
            ax.annotate(f"x{row[metric] / first:.1f}" if first > 0 else "",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(_metric_label(metric))
    ax.grid(True, axis="y", alpha=0.3)
    ax.margins(y=0.12)
    if len(placements) > 1 or placements != ["unpinned"]:
        ax.legend(fontsize=8, title="placement", title_fontsize=8)
    _title(fig, ds, "pipe: throughput ladder (ratio to the first rung over each bar)")
    return fig


def pipe_latency_figure(data: Dataset | str | os.PathLike, metric: str = "ns_per_round_trip"):
    """Round trip of a small message over two pipes (ns), one bar per placement and wait mode.

    The two processes on two CPUs or on one, blocking in the kernel or
    busy-looping (lmbench's lat_pipe); one bar colour per message size.

    >>> fig = pipe_latency_figure("memlab-tour/pipe_latency.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    rows = [dict(r) for r in _rows_with(ds, metric)]
    for row in rows:
        placement = _placement({"writer_cpu": row.get("ping_cpu"), "reader_cpu": row.get("pong_cpu")})
        row["placement"] = placement + (", busy loop" if row.get("busy_loop") else ", blocking")
    view = Dataset(rows, {**ds.metadata, "param_names": ["placement", "message_bytes"]})
    return bars_figure(view, metric, category=["placement"], series=["message_bytes"],
                       title="pipe latency: ns per round trip")


def clear_order_figure(data: Dataset | str | os.PathLike, metric: str = "GB_per_s"):
    """User-space clearing: GB/s by clearing order (x) and store method (bars), one panel per extent.

    Seed 001 compares the old kernel order with sequential clearing; here
    every method (memset, rep stosb, vector, non-temporal) is one colour.

    >>> fig = clear_order_figure("memlab-tour/clear_order.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    return bars_figure(ds, metric, category=["order", "target_subpage"], series=["method"],
                       facet=["extent_bytes", "pages", "region_bytes"],
                       title="clearing: GB/s by order x method")


def clear_fault_figure(data: Dataset | str | os.PathLike, metric: str = "GB_per_s"):
    """Kernel zeroing on first touch: GB/s made usable by populate mode, one bar colour per page kind.

    Each bar is labelled with the page faults per page actually taken.

    >>> fig = clear_fault_figure("memlab-tour/clear_fault.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)

    def faults(row: dict) -> str:
        value = row.get("faults_per_page")
        return f"{value:.2g} f/pg" if _finite(value) else ""

    return bars_figure(ds, metric, series=["pages"], facet=["region_bytes"], annotate=faults,
                       title="page faults: GB/s of memory made usable")


def matrix_figure(data: Dataset | str | os.PathLike, metric: str = "GFLOP_per_s"):
    """Matrix multiply: GFLOP/s by variant, numpy's BLAS as a dashed reference line.

    Each bar carries its time relative to naive (Drepper's table 6.2 reports
    naive 100%, transposed 23.4%, tiled 17.3%, tiled+SIMD 9.47%). One panel
    per matrix size N.

    >>> fig = matrix_figure("memlab-tour/matrix.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    rows = _rows_with(ds, metric)
    sizes = sorted({r.get("n") for r in rows}, key=lambda n: _number(n))
    fig, axes = _new_figure(max(6.5, 4.0 * len(sizes)), 4.8, ncols=len(sizes), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        members = [r for r in rows if r.get("n") == n]
        blas = [r for r in members if r.get("variant") == "blas"]
        others = [r for r in members if r.get("variant") != "blas"]
        naive = next((r[metric] for r in others if r.get("variant") == "naive"), math.nan)
        if others:
            bars = ax.bar(range(len(others)), [r[metric] for r in others], 0.7,
                          color=[f"C{i}" for i in range(len(others))],
                          yerr=_spread(others, metric), capsize=2,
                          error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            for bar, row in zip(bars, others):
                if _finite(naive) and row[metric] > 0:
                    ax.annotate(f"{100 * naive / row[metric]:.3g}% of naive time",
                                (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 3),
                                textcoords="offset points", ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(others)))
            ax.set_xticklabels([_matrix_label(r) for r in others], fontsize=8)
        for row in blas:
            ax.axhline(row[metric], color="k", linestyle="--", linewidth=1.1,
                       label=f"BLAS (numpy.matmul, 1 thread): {row[metric]:.3g}")
        if blas:
            ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_ylabel(_metric_label(metric))
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)
    _title(fig, ds, "matrix multiply: GFLOP/s by variant")
    return fig


def _matrix_label(row: Mapping[str, Any]) -> str:
    variant = str(row.get("variant"))
    if variant in ("tiled", "tiled_simd") and _finite(row.get("tile")):
        return f"{variant}\ntile {int(row['tile'])}"
    return variant


def matrix_init_figure(data: Dataset | str | os.PathLike, metric: str = "GB_per_s"):
    """Matrix initialisation (Drepper table 6.1): GB/s by order, normal vs non-temporal stores.

    >>> fig = matrix_init_figure("memlab-tour/matrix_init.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    return bars_figure(ds, metric, category=["order"], series=["stores"], facet=["n"],
                       title="matrix init: GB/s by order x stores")


def unixbench_index(row: Mapping[str, Any]) -> tuple[float, float, str]:
    """(result, baseline, unit) of a system row, by UnixBench's rules: INDEX = result / baseline * 10.

    The result is the row's ``result`` (memlab.system's lps or KBps), else
    ``loops_per_s`` (spawn, execl) or ``KB_per_s`` (file_copy); the baseline
    is UnixBench's for the same test, buffer size and file size.

    >>> unixbench_index({"test": "execl", "loops_per_s": 430.0})
    (430.0, 43.0, 'lps')
    """
    test = row.get("test")
    key = (test, None, None)
    if test == "file_copy":
        key = (test, row.get("buffer_size"), row.get("max_blocks"))
    baseline, unit = UNIXBENCH_BASELINES.get(key, (math.nan, "KBps" if test == "file_copy" else "lps"))
    names = ("result", "KB_per_s") if unit == "KBps" else ("result", "loops_per_s")
    result = next((_number(row[n]) for n in names if n in row and _finite(row[n])), math.nan)
    return result, baseline, unit


def system_figure(data: Dataset | str | os.PathLike):
    """UnixBench's index table: each test's result, its baseline and INDEX = result / baseline x 10.

    The last row is the geometric mean of the indexes (UnixBench's score).

    >>> fig = system_figure("memlab-tour/system.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    if not ds.rows:
        raise ValueError("the dataset has no rows")
    table = []
    indexes = []
    for row in ds.rows:
        result, baseline, unit = unixbench_index(row)
        index = _number(row.get("index"))
        if not math.isfinite(index) and math.isfinite(result) and math.isfinite(baseline):
            index = result / baseline * 10.0
        if math.isfinite(index) and index > 0:
            indexes.append(index)
        name = str(row.get("test"))
        if row.get("test") == "file_copy":
            name += f" {row.get('buffer_size')} B, {row.get('max_blocks')} blocks"
        if _finite(row.get("copies")) and row.get("copies") != 1:
            name += f" ({row['copies']} copies)"
        table.append([name, f"{result:,.1f} {unit}", f"{baseline:,.1f}", f"{index:,.1f}"])
    score = math.exp(sum(map(math.log, indexes)) / len(indexes)) if indexes else math.nan
    table.append(["score (geometric mean)", "", "", f"{score:,.1f}"])
    fig, ax = _new_figure(8.0, 1.0 + 0.3 * (len(table) + 1))
    ax.axis("off")
    cells = ax.table(cellText=table, colLabels=["test", "result", "baseline", "index"],
                     colWidths=[0.44, 0.24, 0.16, 0.16], loc="center", cellLoc="right", colLoc="right")
    cells.auto_set_font_size(False)
    cells.set_fontsize(9)
    cells.scale(1.0, 1.35)
    for (r, c), cell in cells.get_celld().items():
        if c == 0:
            cell.set_text_props(ha="left")
        if r == 0 or r == len(table):
            cell.set_text_props(weight="bold")
    _title(fig, ds, "system: UnixBench index (result / baseline x 10)")
    return fig


def share_figure(data: Dataset | str | os.PathLike, metric: str | None = None):
    """Cache-line sharing: ns per increment by ``disp`` (longs between the threads' counters).

    disp 0 shares one counter, disp 1..7 one cache line (false sharing), 8
    and more a line per thread. One line per other varying parameter
    (atomic, threads).

    >>> fig = share_figure("memlab-tour/share.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    metric = metric or _primary_metric(ds, ("ns_per_increment",))
    rows = [r for r in _rows_with(ds, metric) if _finite(r.get("disp"))]
    if not rows:
        return _generic_figure(ds)
    disps = sorted({r["disp"] for r in rows})
    others = [n for n in _varying(rows, _param_names(ds)) if n != "disp"]
    fig, ax = _new_figure()
    for members in _groups(rows, others).values():
        members = sorted(members, key=lambda r: r["disp"])
        xs = [disps.index(r["disp"]) for r in members]
        ax.errorbar(xs, [r[metric] for r in members], yerr=_spread(members, metric), marker="o",
                    markersize=4, capsize=2, label=_label(members[0], others))
    ax.set_xticks(range(len(disps)))
    ax.set_xticklabels([str(int(d)) for d in disps])
    ax.set_xlabel("disp (longs between counters; 8 longs = one 64-byte line)")
    ax.set_ylabel(_metric_label(metric))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if others:
        ax.legend(fontsize=8)
    _title(fig, ds, "share: ns per increment by counter spacing")
    return fig


def calibrate_figure(data: Dataset | str | os.PathLike, metric: str = "core_GHz"):
    """The core clock measured by a dependent add chain (GHz), every sample shown; TSC as a reference.

    >>> fig = calibrate_figure("memlab-tour/calibrate.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    rows = _rows_with(ds, metric)
    fig, ax = _new_figure(6.5, 4.0)
    names = _varying(rows, _param_names(ds)) or [n for n in _param_names(ds)[:1]]
    for index, row in enumerate(rows):
        samples = [v for v in (row.get(f"{metric}_samples") or []) if _finite(v)]
        ax.scatter([index] * len(samples), samples, color="C0", s=14, alpha=0.6)
        ax.scatter([index], [row[metric]], color="C1", marker="_", s=600, label="median" if index == 0 else None)
    tsc = _number((ds.metadata.get("machine") or {}).get("tsc_mhz"))
    if math.isfinite(tsc):
        ax.axhline(tsc / 1000, color="k", linestyle="--", linewidth=1, label=f"TSC {tsc / 1000:.3g} GHz")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_label(r, names) for r in rows], fontsize=8)
    ax.set_ylabel("core clock (GHz)")
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    _title(fig, ds, "calibrate: core clock from a dependent add chain")
    return fig


def region_figure(data: Dataset | str | os.PathLike, metric: str = "GB_per_s"):
    """Mapping and populating memory: GB/s by populate mode, one bar colour per page kind.

    >>> fig = region_figure("memlab-tour/region.csv")   # doctest: +SKIP
    """
    ds = _as_dataset(data)
    return bars_figure(ds, metric, series=["pages"], facet=["bytes"],
                       title="region: GB/s of memory mapped and populated")


#: family name (``metadata["family"]``) -> its standard figure.
FIGURES: dict[str, Callable[..., Any]] = {
    "calibrate": calibrate_figure,
    "region": region_figure,
    "chase": _chase_sweep_figure,
    "pipe": pipe_figure,
    "pipe_latency": pipe_latency_figure,
    "clear_fault": clear_fault_figure,
    "clear_order": clear_order_figure,
    "matrix": matrix_figure,
    "matrix_init": matrix_init_figure,
    "system": system_figure,
    "share": share_figure,
}


def figure(data: Dataset | str | os.PathLike):
    """The standard figure of a dataset, chosen by its family (a generic one for others).

    >>> fig = figure("memlab-tour/chase.csv")   # doctest: +SKIP
    >>> fig.savefig("chase.png")                # doctest: +SKIP
    """
    ds = _as_dataset(data)
    require_matplotlib()
    if not ds.rows:
        raise ValueError("the dataset has no rows to plot")
    draw = FIGURES.get(_family(ds))
    return draw(ds) if draw is not None else _generic_figure(ds)


# --------------------------------------------------------------------------
# command line


def plot_main(argv: Sequence[str] | None = None) -> int:
    """``memlab plot DATASET [-o fig.png]``: draw the dataset's standard figure to a file."""
    parser = argparse.ArgumentParser(prog="memlab plot", description="draw a dataset's standard figure")
    parser.add_argument("dataset", help="a dataset (.csv, .json or stem)")
    parser.add_argument("-o", "--out", help="image file (.png, .svg, .pdf); default: DATASET.png")
    parser.add_argument("--dpi", type=int, default=120, help="resolution of raster images")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.dpi < 10:
        print(f"memlab plot: error: --dpi={args.dpi} is below the minimum 10", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(os.path.splitext(args.dataset)[0] + ".png")
    try:
        fig = figure(Dataset.load(args.dataset))
        fig.savefig(out, dpi=args.dpi)
    except ImportError as error:
        print(f"memlab plot: {error}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as error:
        print(f"memlab plot: error: {error}", file=sys.stderr)
        return 1
    print(f"{args.dataset} -> {out}")
    return 0
