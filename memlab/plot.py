"""A dataset's standard figure: the one its family declares, else a generic one.

:func:`figure` picks the figure from the dataset's family (``metadata["family"]``,
else the rows' ``family`` column) through :mod:`memlab.registry`: each family
declares its figure (``Family.figure``, drawn in the family's own module from
the kinds of :mod:`memlab.chart`); a family without one, or an unknown family,
gets :func:`memlab.chart.generic_figure`. This module names no family.

matplotlib is an optional dependency (``pip install 'memlab[plot]'``); without
it :func:`figure` raises an ImportError that names the extra.

Example::

    >>> from memlab.dataset import Dataset
    >>> ds = Dataset.load("memlab-tour/region.csv")   # doctest: +SKIP
    >>> fig = figure(ds)                               # doctest: +SKIP (needs matplotlib)
    >>> fig.savefig("region.png")                      # doctest: +SKIP
"""

from __future__ import annotations

import os

from memlab import registry, userkernel
from memlab.chart import (
    INSTALL_HINT,
    as_dataset,
    bars_figure,
    by_machine,
    cache_sizes_of,
    family_of,
    fold_dataset,
    generic_figure,
    line_figure,
    narrow,
    require_matplotlib,
    samples_figure,
    table_figure,
    to_png,
)
from memlab.dataset import Dataset

__all__ = [
    "INSTALL_HINT",
    "bars_figure",
    "cache_sizes_of",
    "figure",
    "generic_figure",
    "line_figure",
    "narrow",
    "require_matplotlib",
    "samples_figure",
    "table_figure",
    "to_png",
]


def figure(data: Dataset | str | os.PathLike):
    """The standard figure of a dataset, chosen by its family (a generic one for others).

    A dataset of several machines (a fleet sweep, merged shards of several
    hosts) is drawn with one curve, bar series or column per machine: its
    rows get a ``machine`` parameter (:func:`memlab.chart.by_machine`). The
    runs of a point are folded into one mark (:func:`memlab.chart.fold_dataset`):
    the median of its run medians; an unstable point is ringed in red.

    Returns a matplotlib Figure; ValueError for a dataset without rows or
    without a metric to draw, and for a family whose result is a number or
    a table (calibrate, system: the message gives the number).

    >>> fig = figure("memlab-tour/chase.csv")   # doctest: +SKIP
    >>> fig.savefig("chase.png")                # doctest: +SKIP
    """
    ds = as_dataset(data)
    require_matplotlib()
    if not ds.rows:
        raise ValueError("the dataset has no rows to plot")
    ds = by_machine(ds)  # several machines: one curve (bar series, column) per machine
    ds = fold_dataset(ds)  # several runs a point: one mark per point (docs/dataset.md, "Runs")
    family = registry.all_families().get(family_of(ds))
    if family is not None and not family.has_figure:
        shown = "a number" if family.table is None else "a table"
        said = f": {family.headline(ds)}" if family.headline is not None else ""
        raise ValueError(f"{family.name}'s result is {shown}, not a figure (memlab report shows it){said}")
    if family is not None and family.figure is not None:
        return family.figure(ds)
    if family is None and ds.metadata.get("kernel_sha256"):  # a kernel file's data, its family not built here
        return userkernel.default_figure(ds)
    return generic_figure(ds)
