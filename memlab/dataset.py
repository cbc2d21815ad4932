"""Datasets: rows of measurements plus metadata, stored as CSV + JSON sidecar.

A dataset ``x`` lives in two files: ``x.csv`` (one row per measured point)
and ``x.json`` (the sidecar: format name and version, metadata, and the type
of every column so that loading restores values exactly). The format is
specified in ``docs/dataset.md``, and this module owns what it says about
the columns of a row (the *row schema*): which columns are parameters and
which are metrics, the statistic suffixes, the point key and the names a
metric may not take. Every other module asks it (:func:`param_names`,
:func:`metric_names`, :func:`primary_metric`, :func:`point_key`).

Example::

    >>> ds = Dataset([{"family": "chase", "working_set_bytes": 4096, "ns_per_element": 1.5}],
    ...              {"param_names": ["working_set_bytes"]})
    >>> ds.save("/tmp/example.csv")
    >>> Dataset.load("/tmp/example.csv").column("ns_per_element")
    [1.5]
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import numbers
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from memlab.conditions import conditions_warning
from memlab.display import table_html
from memlab.files import (
    atomic_write,
    check_output_file,
    check_readable_file,
    open_append,
    remove_stale_temporaries,
)
from memlab.table import TYPE_NAMES, Row, read_table
from memlab.table import is_number as _is_number
from memlab.table import is_numbers as _is_numbers
from memlab.table import is_object as _is_object
from memlab.table import is_text as _is_text
from memlab.table import guess as _guess
from memlab.units import column_unit, format_number, format_param, is_missing, unit_of

__all__ = [
    "BOOKKEEPING_COLUMNS",
    "OUTCOME_COLUMNS",
    "OUTCOME_PAIRS",
    "RUN_COLUMN",
    "RUN_SPREAD_COLUMN",
    "RUN_UNSTABLE_COLUMN",
    "RUN_HALF_WIDTH_COLUMN",
    "RUN_STOP_COLUMN",
    "STOP_INTERVAL",
    "STOP_MAXIMUM",
    "SAMPLE_COLUMN",
    "COLUMN_ALIASES",
    "FINGERPRINT_COLUMN",
    "HOST_COLUMN",
    "MACHINE_PARAM",
    "NEGATED_ALIASES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "STATISTICS",
    "Dataset",
    "DatasetError",
    "DatasetWriter",
    "DuplicatePointError",
    "check_compatible",
    "check_metric_name",
    "check_param_name",
    "check_fact_name",
    "merge_facts",
    "column_renames",
    "column_types",
    "context_column",
    "counter_column",
    "key_value",
    "machine_key",
    "machine_series",
    "metric_column",
    "metric_names",
    "param_names",
    "parse_sidecar",
    "paths_for",
    "point_key",
    "point_runs",
    "primary_metric",
    "renamed_column",
    "row_warning",
    "sidecar_document",
    "run_index",
    "statistic_column",
    "table_schema",
    "union_machines",
]

FORMAT_NAME = "memlab-dataset"
FORMAT_VERSION = 1

_TYPE_NAMES = TYPE_NAMES


class DatasetError(ValueError):
    """A dataset that cannot be read or written as asked; the message names the file and why."""


class DuplicatePointError(DatasetError):
    """:meth:`Dataset.merge` met the same point from the same machine twice.

    ``detail`` says which point; ``remedy(option)`` is the message naming the
    way out in the caller's words (``dedupe=True`` from Python, ``--dedupe``
    on the command line).

    >>> DuplicatePointError("merge: duplicate point ('f', 1)", "dedupe=True").remedy("--dedupe")
    "merge: duplicate point ('f', 1); pass --dedupe to keep the first"
    """

    def __init__(self, detail: str, option: str) -> None:
        self.detail = detail
        super().__init__(self.remedy(option))

    def remedy(self, option: str) -> str:
        """The message with ``option`` as the way to keep the first row of each point."""
        return f"{self.detail}; pass {option} to keep the first"


# --------------------------------------------------------------------------
# the row schema (docs/dataset.md, "Column naming convention")

#: Statistics of a metric ``m`` stored beside its median ``m``: ``m_min`` ...
STATISTICS = ("min", "max", "mean", "stdev", "iqr")
#: The suffix of a metric's raw kept samples: ``m_samples``.
SAMPLES = "samples"
#: Suffixes no metric or parameter name may end with: they name statistic columns.
RESERVED_SUFFIXES = tuple(f"_{name}" for name in (*STATISTICS, SAMPLES))
#: Which run of its point a row is (docs/dataset.md, "Runs"): 0, 1, ...; a row
#: without it is run 0.
RUN_COLUMN = "run"
#: How far the runs of a row's point disagree (docs/dataset.md, "Runs"): the largest run median
#: of the primary metric over the smallest, over the point's runs up to and including this row's
#: (so the point's last run holds the whole point's); 1.0 for its first run.
RUN_SPREAD_COLUMN = "run_spread"
#: Whether that spread exceeds ``memlab.significance.UNSTABLE_RUN_SPREAD`` (True: unstable).
RUN_UNSTABLE_COLUMN = "run_unstable"
#: Under a sweep's precision rule (``memlab.grid.Precision``): the relative half-width of the
#: point's run-level interval over its runs up to and including this row's.
RUN_HALF_WIDTH_COLUMN = "run_half_width"
#: Under a precision rule: why the point took no more runs, on the row of its last run
#: (:data:`STOP_INTERVAL`, :data:`STOP_MAXIMUM`); empty on its other rows.
RUN_STOP_COLUMN = "run_stop"
#: ``run_stop``: the point's interval was as narrow as the rule needs (at or after its minimum runs).
STOP_INTERVAL = "interval"
#: ``run_stop``: the point took the rule's maximum runs with its interval still wider than needed.
STOP_MAXIMUM = "maximum"
#: Columns of every row that are neither parameters nor metrics.
BOOKKEEPING_COLUMNS = ("family", "counters_missing", "counters_scope", "repeat", "warmup_samples",
                       RUN_COLUMN, RUN_SPREAD_COLUMN, RUN_UNSTABLE_COLUMN, RUN_HALF_WIDTH_COLUMN, RUN_STOP_COLUMN)
#: Columns saying, in words, what a point asked of the kernel and what it got: the
#: page kind and the populate call (docs/dataset.md, "Asked and obtained"). Facts of
#: the samples, neither parameters nor metrics; "mixed" where the samples differed.
OUTCOME_COLUMNS = ("pages_requested", "pages_obtained", "populate_requested", "populate_used")
#: Each obtained column and the columns holding what was asked (the ``_requested`` one,
#: and the parameter a family names it with).
OUTCOME_PAIRS = {"pages_obtained": ("pages_requested", "pages"), "populate_used": ("populate_requested", "populate")}
COUNTER_PREFIX = "counter_"
CONTEXT_PREFIX = "context_"
#: Prefix of a metric named like one of its family's parameters (chase's ``laps``).
MEASURED_PREFIX = "measured_"
_RESERVED_PREFIXES = (COUNTER_PREFIX, CONTEXT_PREFIX, MEASURED_PREFIX)
#: Metrics whose name says which one is better, for views that choose a metric to draw.
_HEADLINE_PREFIXES = ("ns_per_", "GB_per_s", "GiB_per_s")


#: Columns renamed since datasets were first written: family -> {old name: new name}.
#: A dataset written before a rename loads, and resumes, under the new names
#: (a metric's statistic and samples columns follow it); docs/dataset.md lists
#: each rename and why.
COLUMN_ALIASES: dict[str, dict[str, str]] = {
    # The clock's spread over one sample's timings: ``core_GHz_min``/``_max`` were written
    # into the columns of core_GHz's own minimum and maximum, over which they won.
    "calibrate": {
        "core_GHz_min": "core_GHz_lowest",
        "core_GHz_max": "core_GHz_highest",
        "calibration_samples": "calibration_timings",
    },
    "chase": {
        "check_visits_min": "check_visits_fewest",
        "check_visits_max": "check_visits_most",
    },
    # Parameters given their unit.
    "region": {"bytes": "region_bytes", "allow_fallback": "strict_pages"},
    "pipe": {"buffer_size": "buffer_bytes", "pipe_size": "pipe_size_bytes"},
    "system": {"buffer_size": "buffer_bytes"},
    # One word per role for where threads run (docs/architecture.md): ``placement`` is a policy,
    # ``<role>_cpu`` one named thread's CPU, ``cpu_a``/``cpu_b`` a pair; share's ``pin`` was a policy.
    "share": {"disp": "disp_longs", "pin": "placement"},
    # One name for "refuse instead of falling back" in every family that maps memory.
    "clear_fault": {"strict": "strict_pages"},
    # The window overlap of the threads' runs; overlap_fraction is now every thread team's one
    # definition, which counts the time a thread was off its CPU too (docs/dataset.md).
    "bandwidth": {"overlap_fraction": "window_overlap_fraction"},
}

#: Renamed boolean parameters whose new name says the opposite: family -> {old name}. A value
#: loads negated (region's ``allow_fallback=True`` is ``strict_pages=False``).
NEGATED_ALIASES: dict[str, frozenset[str]] = {"region": frozenset({"allow_fallback"})}


def renamed_column(column: str, family: str | None) -> str:
    """The current name of a column that ``family``'s rows may carry under an old name.

    A renamed metric takes its statistic, samples and ``measured_`` columns along.

    >>> renamed_column("core_GHz_max_samples", "calibrate"), renamed_column("core_GHz", "calibrate")
    ('core_GHz_highest_samples', 'core_GHz')
    """
    aliases = COLUMN_ALIASES.get(family or "")
    if not aliases:
        return column
    if column in aliases:
        return aliases[column]
    prefix = MEASURED_PREFIX if column.startswith(MEASURED_PREFIX) else ""
    base = column[len(prefix):]
    if base in aliases:
        return prefix + aliases[base]
    for suffix in RESERVED_SUFFIXES:
        stem = base[: -len(suffix)]
        if base.endswith(suffix) and stem in aliases:
            return prefix + aliases[stem] + suffix
    return column


def column_renames(columns: Iterable[str], family: str | None) -> dict[str, str]:
    """The renames :data:`COLUMN_ALIASES` asks of a dataset with these columns: {old: new}.

    A column is renamed only when its new name is not a column already: an
    old name may be a column of the current format too (``core_GHz_min`` is
    core_GHz's minimum now), and a file holding the new name was written
    after the rename.

    >>> column_renames(["core_GHz", "core_GHz_min", "core_GHz_samples"], "calibrate")
    {'core_GHz_min': 'core_GHz_lowest'}
    >>> column_renames(["core_GHz", "core_GHz_min", "core_GHz_lowest"], "calibrate")
    {}
    """
    columns = list(columns)
    present = set(columns)
    renames = {}
    for column in columns:
        new = renamed_column(column, family)
        if new != column and new not in present:
            renames[column] = new
    return renames


def _renamed_metadata(metadata: dict, renames: Mapping[str, str]) -> dict:
    metadata = dict(metadata)
    if isinstance(metadata.get("param_names"), list):
        metadata["param_names"] = [renames.get(n, n) for n in metadata["param_names"]]
    if isinstance(metadata.get("primary_metric"), str):
        metadata["primary_metric"] = renames.get(metadata["primary_metric"], metadata["primary_metric"])
    return metadata


def _fresh(row: Mapping[str, Any]) -> dict:
    """A row of one's own: a Row view copied as a view, anything else as a dict."""
    return row.copy() if isinstance(row, Row) else dict(row)


def _check_family(metadata: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], path: str) -> None:
    family = metadata.get("family")
    if not family:
        return
    for number, row in enumerate(rows, start=2):
        if "family" in row and row["family"] != family:
            raise DatasetError(f"{path}: record {number} would hold family={row['family']!r} in a dataset "
                               f"whose metadata says family={family!r}")


def _only_family(rows: Sequence[Mapping[str, Any]]) -> str | None:
    families = {row.get("family") for row in rows}
    return families.pop() if len(families) == 1 else None


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} name {name!r} must be a non-empty string")
    if name.endswith(RESERVED_SUFFIXES):
        suffix = next(s for s in RESERVED_SUFFIXES if name.endswith(s))
        raise ValueError(
            f"{kind} name {name!r} ends with {suffix!r}, which the dataset format reserves for "
            f"the statistics of a metric ({name[: -len(suffix)]!r}'s {suffix[1:]}); "
            "choose a name such as 'lowest_...', 'highest_...' or '..._count'"
        )
    if name.startswith(_RESERVED_PREFIXES) or name in BOOKKEEPING_COLUMNS or name in OUTCOME_COLUMNS:
        raise ValueError(f"{kind} name {name!r} is reserved by the dataset format (docs/dataset.md)")


def check_param_name(name: str) -> str:
    """Return ``name`` if a parameter may carry it, else ValueError saying why.

    A parameter may not end with a statistic suffix (``_min`` ... ``_samples``),
    start with ``counter_``/``context_``/``measured_`` or be a bookkeeping column.

    >>> check_param_name("working_set_bytes")
    'working_set_bytes'
    """
    _check_name("parameter", name)
    return name


def check_metric_name(name: str) -> str:
    """Return ``name`` if a metric may carry it, else ValueError saying why.

    The reserved-suffix rule: a metric named ``core_GHz_min`` would land in
    the column holding the minimum of ``core_GHz``, so no metric name may end
    with a statistic suffix; nor may a metric's columns meet a bookkeeping
    column (``warmup`` would give ``warmup_samples``).

    >>> check_metric_name("ns_per_element")
    'ns_per_element'
    >>> check_metric_name("core_GHz_min")
    Traceback (most recent call last):
    ...
    ValueError: metric name 'core_GHz_min' ends with '_min', which the dataset format reserves for the statistics of a metric ('core_GHz''s min); choose a name such as 'lowest_...', 'highest_...' or '..._count'
    """
    _check_name("metric", name)
    for column in (statistic_column(name, s) for s in (*STATISTICS, SAMPLES)):
        if column in BOOKKEEPING_COLUMNS:
            raise ValueError(f"metric name {name!r} would write the bookkeeping column {column!r}")
    return name


def check_fact_name(name: str) -> str:
    """Return ``name`` if a sample's fact may carry it (one of :data:`OUTCOME_COLUMNS`), else ValueError.

    >>> check_fact_name("pages_obtained")
    'pages_obtained'
    """
    if name not in OUTCOME_COLUMNS:
        raise ValueError(f"fact name {name!r} is not one of the dataset's outcome columns "
                         f"({', '.join(OUTCOME_COLUMNS)}; docs/dataset.md)")
    return name


def merge_facts(samples: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """One value per fact over a point's samples: the value they all share, else ``"mixed"``.

    >>> merge_facts([{"pages_obtained": "thp"}, {"pages_obtained": "thp"}])
    {'pages_obtained': 'thp'}
    >>> merge_facts([{"pages_obtained": "thp"}, {"pages_obtained": "4k"}])
    {'pages_obtained': 'mixed'}
    """
    seen: dict[str, set[str]] = {}
    for sample in samples:
        for name, value in sample.items():
            seen.setdefault(check_fact_name(name), set()).add(str(value))
    return {name: values.pop() if len(values) == 1 else "mixed" for name, values in seen.items()}


def statistic_column(column: str, statistic: str) -> str:
    """The column of one statistic (or ``samples``) of a metric column.

    >>> statistic_column("ns_per_element", "iqr")
    'ns_per_element_iqr'
    """
    if statistic not in STATISTICS and statistic != SAMPLES:
        raise ValueError(f"statistic={statistic!r} is not one of {', '.join((*STATISTICS, SAMPLES))}")
    return f"{column}_{statistic}"


def metric_column(metric: str, params: Iterable[str] = ()) -> str:
    """The column holding a metric's median: its name, or ``measured_<name>``
    when a parameter has that name (the parameter keeps keying the row).

    >>> metric_column("laps", ["working_set_bytes", "laps"]), metric_column("ns_per_element")
    ('measured_laps', 'ns_per_element')
    """
    check_metric_name(metric)
    return f"{MEASURED_PREFIX}{metric}" if metric in set(params) else metric


def counter_column(counter: str) -> str:
    """The column of a counter's median per sample: ``counter_<name>``."""
    return f"{COUNTER_PREFIX}{counter}"


def context_column(key: str) -> str:
    """The column of a fact about one point's run: ``context_<key>``."""
    return f"{CONTEXT_PREFIX}{key}"


def row_warning(row: Mapping[str, Any]) -> str:
    """Why a row's point was measured under disturbed conditions, in words ("" when it was not):
    :func:`memlab.conditions.conditions_warning` of its ``context_on_cpu_fraction``,
    ``context_steal_fraction`` and ``context_on_cpu_expected`` (1.0 in a dataset written before
    families said what they expect).

    >>> row_warning({"context_on_cpu_fraction": 0.5, "context_on_cpu_expected": 0.5})
    ''
    >>> row_warning({"context_on_cpu_fraction": 0.5})
    'on CPU 50% of its wall time (below 90%)'
    """
    def number(key: str) -> float | None:
        value = row.get(context_column(key))
        return float(value) if _is_real(value) else None

    return conditions_warning(number("on_cpu_fraction"), number("steal_fraction"), number("on_cpu_expected"))


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value


def _columns_of(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    return _union_columns(rows)


def metric_names(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The metric columns of rows: those that have statistic or samples columns, in column order.

    >>> metric_names([{"family": "f", "n": 1, "t": 2.0, "t_min": 1.9, "t_samples": [1.9, 2.0]}])
    ['t']
    """
    columns = _columns_of(rows)
    present = set(columns)
    return [
        c for c in columns
        if c not in BOOKKEEPING_COLUMNS and c not in OUTCOME_COLUMNS
        and any(c + suffix in present for suffix in RESERVED_SUFFIXES)
    ]


def param_names(rows: Iterable[Mapping[str, Any]], metadata: Mapping[str, Any] | None = None) -> list[str]:
    """The parameter columns of rows: ``metadata["param_names"]``, else inferred.

    Inferred (a CSV read without its sidecar): every column that is not a
    metric, a statistic, a counter, a context fact or bookkeeping. A listed
    name whose column carries samples holds a metric (a dataset written
    before metrics named like parameters became ``measured_<name>``) and is
    left out.

    >>> param_names([{"family": "f", "n": 1, "t": 2.0, "t_samples": [2.0], "counter_x": 1.0}])
    ['n']
    """
    rows = list(rows)
    columns = _columns_of(rows)
    present = set(columns)
    listed = (metadata or {}).get("param_names")
    if listed:
        return [n for n in listed if statistic_column(n, SAMPLES) not in present]
    metrics = set(metric_names(rows))
    names = []
    for column in columns:
        if (column in BOOKKEEPING_COLUMNS or column in OUTCOME_COLUMNS or column in metrics
                or column.startswith(_RESERVED_PREFIXES)):
            continue
        if column.endswith(RESERVED_SUFFIXES) and column.rsplit("_", 1)[0] in metrics:
            continue
        names.append(column)
    return names


def primary_metric(
    rows: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, Any] | None = None,
    preferred: Sequence[str] = (),
) -> str:
    """The metric a view shows first: one of ``preferred`` present in the rows,
    else ``metadata["primary_metric"]``, else the first ``ns_per_*``,
    ``GB_per_s`` or ``GiB_per_s`` metric; ValueError when there is none.

    >>> primary_metric([{"n": 1, "ns_per_element": 2.0, "ns_per_element_min": 1.9}])
    'ns_per_element'
    """
    rows = list(rows)
    columns = _columns_of(rows)
    present = set(columns)
    for name in (*preferred, (metadata or {}).get("primary_metric")):
        if name and name in present:
            return name
    for name in metric_names(rows):
        if name.startswith(_HEADLINE_PREFIXES):
            return name
    raise ValueError(f"the dataset has no metric to plot (columns: {', '.join(columns)})")


# --------------------------------------------------------------------------
# machines: which host measured a row (docs/dataset.md, "Machines")

#: The column naming the host that measured a row (its hostname).
HOST_COLUMN = CONTEXT_PREFIX + "host"
#: The column holding the id of the measuring machine's fingerprint
#: (``memlab.machine.fingerprint_id``: CPU model, CPU count, kernel, memory).
FINGERPRINT_COLUMN = CONTEXT_PREFIX + "fingerprint_id"
#: The parameter views add to a dataset of several machines (one curve per machine).
MACHINE_PARAM = "machine"

MachineKey = tuple  # (host or None, fingerprint id or None)


def machine_key(row: Mapping[str, Any], default: MachineKey = (None, None)) -> MachineKey:
    """``(host, fingerprint id)`` of the machine that measured ``row``; ``default`` for a row
    that does not say (written before rows named their machine).

    >>> machine_key({"context_host": "node-a", "context_fingerprint_id": "c4e459e1b89d"})
    ('node-a', 'c4e459e1b89d')
    >>> machine_key({}, default=("here", "0123456789ab"))
    ('here', '0123456789ab')
    """
    host, print_id = row.get(HOST_COLUMN), row.get(FINGERPRINT_COLUMN)
    if is_missing(host) and is_missing(print_id):
        return tuple(default)
    return (None if is_missing(host) else str(host), None if is_missing(print_id) else str(print_id))


def machine_series(
    rows: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    default: MachineKey = (None, None),
) -> list[str]:
    """The machine each row belongs to in a view: one label per row, ``""`` for every
    row when all come from one machine.

    Machines are told apart by fingerprint (CPU model, CPU count, kernel,
    memory). Hosts sharing a fingerprint are one machine when they measured
    different points (a sweep spread over identical hosts, or shards), and
    one machine each when they measured the same point (each-host mode on a
    cluster of identical nodes). ``names`` are the parameter names that key
    a point; ``default`` is the machine of rows that name none.

    >>> rows = [{"family": "f", "n": 1, "context_host": h, "context_fingerprint_id": p}
    ...         for h, p in (("a", "111111111111"), ("b", "222222222222"))]
    >>> machine_series(rows, ["n"])
    ['a', 'b']
    >>> machine_series(rows[:1], ["n"])
    ['']
    """
    keys = [machine_key(row, default) for row in rows]
    hosts_of: dict[Any, list[Any]] = {}
    for host, print_id in keys:
        hosts = hosts_of.setdefault(print_id, [])
        if host not in hosts:
            hosts.append(host)
    split: set[Any] = set()
    for print_id, hosts in hosts_of.items():
        if len(hosts) < 2:
            continue
        measured: dict[tuple, Any] = {}
        for row, (host, other) in zip(rows, keys):
            if other != print_id:
                continue
            point = point_key(row, names)
            if measured.setdefault(point, host) != host:
                split.add(print_id)
                break
    series = [(print_id, host if print_id in split else None) for host, print_id in keys]
    distinct = list(dict.fromkeys(series))
    if len(distinct) < 2:
        return ["" for _ in rows]
    labels: dict[tuple, str] = {}
    for print_id, host in distinct:
        hosts = hosts_of[print_id]
        if host is None and len(hosts) > 1:
            labels[(print_id, host)] = f"{print_id} ({len(hosts)} hosts)"
        else:
            name = host if host is not None else hosts[0]
            labels[(print_id, host)] = name or print_id or "unknown machine"
    texts = list(labels.values())
    for entry, text in list(labels.items()):  # one host seen with two fingerprints (a new kernel)
        if texts.count(text) > 1 and entry[0]:
            labels[entry] = f"{text} ({entry[0][:6]})"
    return [labels[entry] for entry in series]


def union_machines(*lists: Any) -> list[dict]:
    """The entries of several ``metadata["machines"]`` lists, each machine once (the first entry
    of each ``(host, fingerprint_id)``); what is not a list of dicts is skipped.

    >>> union_machines([{"host": "a", "fingerprint_id": "1"}], [{"host": "a", "fingerprint_id": "1"},
    ...                                                       {"host": "b", "fingerprint_id": "1"}])
    [{'host': 'a', 'fingerprint_id': '1'}, {'host': 'b', 'fingerprint_id': '1'}]
    """
    machines: list[dict] = []
    seen: set[tuple] = set()
    for entries in lists:
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            key = (entry.get("host"), entry.get("fingerprint_id"))
            if key not in seen:
                seen.add(key)
                machines.append(entry)
    return machines


def point_key(row: Mapping[str, Any], names: Sequence[str]) -> tuple:
    """A point's identity: ``(family, *values of the parameters names)``.

    Values are normalised so that what a CSV round trip may change does not
    change the key: 4096, 4096.0 and "4096" are one value, NaN is None,
    lists and dicts compare by content.

    >>> point_key({"family": "f", "n": 4096.0, "x": 1.0}, ["n"]) == point_key({"family": "f", "n": "4096"}, ["n"])
    True
    """
    return (row.get("family"), *(key_value(row.get(name)) for name in names))


def run_index(row: Mapping[str, Any]) -> int:
    """Which run of its point a row is: its ``run`` cell, 0 when it has none.

    A dataset written before runs existed holds one run per point: each of
    its rows is run 0. A value that is not a whole number of at least 0 is a
    ValueError naming it.

    >>> run_index({"n": 1, "run": 2}), run_index({"n": 1}), run_index({"run": float("nan")})
    (2, 0, 0)
    """
    value = row.get(RUN_COLUMN)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{RUN_COLUMN}={value!r} is not a run index (a whole number from 0)")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{RUN_COLUMN}={value!r} is not a run index (a whole number from 0)") from None
    if not number.is_integer() or number < 0:
        raise ValueError(f"{RUN_COLUMN}={value!r} is not a run index (a whole number from 0)")
    return int(number)


def point_runs(
    rows: Iterable[Mapping[str, Any]], names: Sequence[str]
) -> dict[tuple, dict[int, list[Mapping[str, Any]]]]:
    """The rows of every point grouped into its runs: ``{point_key: {run: [rows]}}``.

    Points appear in the order of their first row, runs in the order of
    their index. A run normally holds one row; two rows with the same run
    index (two datasets of one-run points merged, a point measured twice
    without a ``run`` column) are both listed under it, and the caller says
    what it does with them (``memlab.compare`` pools their samples and warns).

    >>> rows = [{"family": "f", "n": 1, "run": 0}, {"family": "f", "n": 2},
    ...         {"family": "f", "n": 1, "run": 1}]
    >>> {key: sorted(runs) for key, runs in point_runs(rows, ["n"]).items()}
    {('f', 1): [0, 1], ('f', 2): [0]}
    """
    points: dict[tuple, dict[int, list[Mapping[str, Any]]]] = {}
    for row in rows:
        points.setdefault(point_key(row, names), {}).setdefault(run_index(row), []).append(row)
    return {key: dict(sorted(runs.items())) for key, runs in points.items()}


def key_value(value: Any) -> Any:
    """One value of a point key, normalised (see :func:`point_key`).

    >>> key_value(4096.0), key_value("4096"), key_value(float("nan")), key_value([1.0, "x"])
    (4096, 4096, None, (1, 'x'))
    """
    value = _plain(value)
    if is_missing(value) or isinstance(value, bool):
        return None if is_missing(value) else value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
        if math.isnan(value):
            return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return tuple(key_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


# --------------------------------------------------------------------------
# paths and value encoding


def paths_for(path: str | os.PathLike) -> tuple[str, str]:
    """Return ``(csv_path, sidecar_path)`` for a dataset path.

    Accepts the ``.csv`` path, the ``.json`` sidecar path, or a bare stem.

    >>> paths_for("runs/chase.json")
    ('runs/chase.csv', 'runs/chase.json')
    """
    text = os.fspath(path)
    stem, ext = os.path.splitext(text)
    if ext.lower() not in (".csv", ".json"):
        stem = text
    return stem + ".csv", stem + ".json"


def _plain(value: Any) -> Any:
    """Turn numpy scalars/arrays into plain Python values."""
    if value is None or type(value) in (bool, int, float, str, list, dict):
        return value
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if callable(tolist):
        return tolist()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Row):
        return dict(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _value_type(value: Any) -> str | None:
    """The column type one value needs, or None for a missing value."""
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        # An empty string would read back as missing; JSON keeps it exact.
        return "str" if value else "json"
    return "json"


def _combine_types(old: str | None, new: str | None) -> str | None:
    if old is None:
        return new
    if new is None or new == old:
        return old
    if {old, new} == {"int", "float"}:
        return "float"
    return "json"


def _json_default(value: Any) -> Any:
    plain = _plain(value)
    if plain is value:
        raise TypeError(f"value {value!r} of type {type(value).__name__} is not JSON serializable")
    return plain


def _encode(value: Any, type_name: str | None) -> str:
    value = _plain(value)
    if value is None:
        return ""  # NaN is "nan" (a float column's empty cell reads as NaN too, but not without the sidecar)
    if type_name == "json":
        return json.dumps(value, default=_json_default, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, default=_json_default, separators=(",", ":"))


def column_types(rows: Iterable[dict], columns: Iterable[str]) -> dict[str, str]:
    """Infer the sidecar type of each column ("int", "float", "bool", "str", "json").

    A column whose values are all missing is "float" if one of them is NaN
    (it reads back as NaN) and "json" otherwise (it reads back as None).

    >>> column_types([{"a": 1, "b": [1]}, {"a": 2.5, "b": None}], ["a", "b"])
    {'a': 'float', 'b': 'json'}
    """
    rows = list(rows)
    return _settle_types(_infer_types(rows, columns), rows)


def _settle_types(types: dict[str, str | None], rows: list[dict]) -> dict[str, str]:
    settled = {}
    for name, kind in types.items():
        if kind is None:
            has_nan = any(isinstance(row.get(name), float) and math.isnan(row[name]) for row in rows)
            kind = "float" if has_nan else "json"
        settled[name] = kind
    return settled


def _infer_types(rows: Iterable[dict], columns: Iterable[str]) -> dict[str, str | None]:
    types: dict[str, str | None] = {name: None for name in columns}
    for row in rows:
        for name in types:
            if name in row:
                types[name] = _combine_types(types[name], _value_type(row[name]))
    return types


def _union_columns(rows: Iterable[dict], start: Iterable[str] = ()) -> list[str]:
    columns = list(start)
    seen = set(columns)
    for row in rows:
        for name in row:
            if name not in seen:
                seen.add(name)
                columns.append(name)
    return columns


def _csv_text(rows: list[dict], columns: list[str], types: dict[str, str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_encode(row.get(name), types.get(name)) for name in columns])
    return buffer.getvalue()


def _atomic_write(path: str, text: str) -> None:
    atomic_write(path, text)


def sidecar_document(metadata: Mapping[str, Any], types: Mapping[str, str]) -> dict:
    """The sidecar of a dataset with this metadata and these column types, as a JSON object:
    memlab's own keys (``format``, ``format_version``, the metadata, ``column_types``) and
    ``schema``, the columns as a Frictionless Table Schema (:func:`table_schema`).

    >>> sorted(sidecar_document({"created": "2026-01-01T00:00:00+00:00"}, {"family": "str"}))
    ['column_types', 'created', 'format', 'format_version', 'schema']
    """
    document = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION}
    document.update({k: v for k, v in metadata.items()
                     if k not in ("format", "format_version", "schema", "load_warnings")})
    document.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    document["column_types"] = dict(types)
    document["schema"] = table_schema(types, metadata)
    return document


def _sidecar_text(metadata: dict, types: dict[str, str]) -> str:
    return json.dumps(sidecar_document(metadata, types), indent=2, default=_json_default, sort_keys=False) + "\n"


# --------------------------------------------------------------------------
# the columns as a Frictionless Table Schema (docs/dataset.md, "Table Schema")

#: The Table Schema type of each memlab column type; a ``json`` column is an ``array`` (samples),
#: an ``object`` (counters_missing) or ``any``.
_SCHEMA_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "json": "any"}
#: The column of :meth:`Dataset.long` that a wide dataset does not have (beside RUN_COLUMN).
SAMPLE_COLUMN = "sample"
_STATISTIC_WORDS = {
    "min": "minimum", "max": "maximum", "mean": "mean",
    "stdev": "sample standard deviation", "iqr": "interquartile range (Q3 - Q1)",
}
_FIXED_DESCRIPTIONS = {
    "family": "experiment family of the row",
    "counters_missing": "every counter that did not open, with the reason: {counter name: reason}",
    "counters_scope": "what the counters counted: user+kernel, user, or none (counting off)",
    "repeat": "number of kept samples",
    "warmup_samples": "the primary metric in each warm-up sample (not kept)",
    "pages_requested": "the page kind asked for: 4k, thp, hugetlb-2m, hugetlb-1g",
    "pages_obtained": "the page kind obtained (mixed when the samples differed)",
    "populate_requested": "the populate call asked for: none, touch, map_populate, madvise_populate_write",
    "populate_used": "the populate call made",
    "context_host": "the host that measured the row (its hostname)",
    "context_fingerprint_id": "id of the measuring machine's fingerprint (CPU model, CPU count, kernel, memory)",
    RUN_COLUMN: "index of the run of the point that took the sample, from 0; a point measured once "
                "has the one run 0",
    SAMPLE_COLUMN: "index of the kept sample within its run, from 0, in the order measured",
}


def _describe(column: str, params: set[str], metrics: set[str], long: bool) -> tuple[str, str]:
    """(description, unit) of a column by its role in the row schema."""
    if column in _FIXED_DESCRIPTIONS:
        return _FIXED_DESCRIPTIONS[column], ""
    if column in params:
        return "parameter (part of the identity of the point)", unit_of(column)
    shown = column[len(MEASURED_PREFIX):] if column.startswith(MEASURED_PREFIX) else column
    if long and column in metrics:
        return f"metric {shown}: the value of this sample", unit_of(shown)
    if column in metrics:
        return f"metric {shown}: median over the kept samples", unit_of(shown)
    base, _, suffix = column.rpartition("_")
    if base in metrics:
        shown_base = base[len(MEASURED_PREFIX):] if base.startswith(MEASURED_PREFIX) else base
        if suffix == SAMPLES:
            return f"metric {shown_base}: the kept samples, in the order measured", unit_of(shown_base)
        if suffix in _STATISTIC_WORDS:
            return f"metric {shown_base}: {_STATISTIC_WORDS[suffix]} over the kept samples", unit_of(shown_base)
    if column.startswith(COUNTER_PREFIX):
        name = column[len(COUNTER_PREFIX):]
        return f"counter {name}: median per sample (missing where the counter did not open)", unit_of(name)
    if column.startswith(CONTEXT_PREFIX):
        name = column[len(CONTEXT_PREFIX):]
        return f"fact about the point's run: {name.replace('_', ' ')}", unit_of(name)
    return "", ""


def table_schema(types: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> dict:
    """The columns of a dataset as a Frictionless Table Schema (https://specs.frictionlessdata.io/table-schema/).

    One field per column, in order, with its ``name``, its ``type`` (``int`` is
    ``integer``, ``float`` ``number``, ``bool`` ``boolean``, ``str`` ``string``;
    a JSON column is ``array`` for samples, ``object`` for ``counters_missing``,
    else ``any``), and where the row schema knows them a ``description`` and the
    ``unit`` the name carries. The ``primaryKey`` is the point's identity
    (``family`` and ``param_names``; the machine columns, ``run`` and ``sample``
    where the table has them), given only when ``param_names`` is known. An empty
    cell is missing (``missingValues``); number cells may hold ``nan``, ``inf``
    and ``-inf``, which the specification reads in any case.

    >>> schema = table_schema({"family": "str", "working_set_bytes": "int", "ns_per_element": "float",
    ...                        "ns_per_element_samples": "json"}, {"param_names": ["working_set_bytes"]})
    >>> schema["fields"][1], schema["fields"][3]["type"], schema["primaryKey"]
    ({'name': 'working_set_bytes', 'type': 'integer', 'description': 'parameter (part of the identity of the point)', 'unit': 'bytes'}, 'array', ['family', 'working_set_bytes'])
    """
    metadata = metadata or {}
    columns = list(types)
    long = metadata.get("layout") == "long"
    listed = metadata.get("param_names")
    params = set(listed or param_names([dict.fromkeys(columns)]))
    metrics = set(metadata.get("metric_names") or ()) if long else set(metric_names([dict.fromkeys(columns)]))
    fields = []
    for column in columns:
        kind = _SCHEMA_TYPES.get(types[column], "any")
        if types[column] == "json":
            base, _, suffix = column.rpartition("_")
            if column == "warmup_samples" or (suffix == SAMPLES and base in metrics):
                kind = "array"
            elif column == "counters_missing":
                kind = "object"
        field: dict[str, Any] = {"name": column, "type": kind}
        description, unit = _describe(column, params, metrics, long)
        if description:
            field["description"] = description
        if unit:
            field["unit"] = unit
        fields.append(field)
    schema: dict[str, Any] = {"fields": fields, "missingValues": [""]}
    if listed and all(name in types for name in listed):
        key = ["family"] if "family" in types else []
        key += [name for name in listed if name != "family"]
        key += [name for name in (HOST_COLUMN, FINGERPRINT_COLUMN, RUN_COLUMN, SAMPLE_COLUMN) if name in types]
        schema["primaryKey"] = key
    return schema


#: The sidecar keys memlab reads, with the JSON type each must have (None is allowed
#: for all but ``format``, ``format_version`` and ``column_types``). Other keys are kept as they are.
_SIDECAR_KEYS: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "format_version": (int,),
    "column_types": (dict,),
    "created": (str,),
    "family": (str,),
    "sweep": (str,),
    "description": (str,),
    "param_names": (list,),
    "primary_metric": (str,),
    "machine": (dict,),
    "machine_id": (str,),
    "machine_fingerprint": (dict,),
    "check_start": (dict,),
    "check_end": (dict,),
    "memlab_version": (str,),
    "command": (str,),
    "shard": (str,),
    "repeat": (int,),
    "warmup": (int,),
    "merged_from": (list,),
    "load_warnings": (list,),
    "layout": (str,),
    "metric_names": (list,),
}
_JSON_TYPE_NAMES = {str: "a string", int: "an integer", dict: "a JSON object", list: "a JSON array"}


def _read_sidecar(json_path: str) -> tuple[dict, dict[str, str]]:
    """Return (metadata, column_types); ({}, {}) when there is no sidecar.

    Every problem is a :class:`DatasetError` naming the file: not a regular
    file, not UTF-8, not JSON (or nested too deeply), another format or
    version, a known key of the wrong type, an unknown column type.
    """
    try:
        check_readable_file(json_path, "sidecar")
        with open(json_path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}, {}
    except OSError as error:
        raise DatasetError(f"{json_path}: cannot be read: {error.strerror or error}") from None
    except ValueError as error:
        raise DatasetError(str(error)) from None
    try:
        text = data.decode("utf-8-sig")  # a byte order mark (spreadsheets, editors) is skipped
    except UnicodeDecodeError as error:
        raise DatasetError(f"{json_path}: not UTF-8 text (byte {error.start}: {error.reason})") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise DatasetError(f"{json_path}: JSON nested too deeply to be a memlab sidecar") from None
    except ValueError as error:
        raise DatasetError(f"{json_path}: not valid JSON: {error}") from None
    return parse_sidecar(document, json_path)


def parse_sidecar(document: Any, json_path: str) -> tuple[dict, dict[str, str]]:
    """(metadata, column_types) of a sidecar's JSON object, checked as :meth:`Dataset.load`
    checks a sidecar file; ``json_path`` names where it came from in a :class:`DatasetError`.

    >>> parse_sidecar({"format": "memlab-dataset", "format_version": 1, "column_types": {"n": "int"}}, "x.json")
    ({'format': 'memlab-dataset', 'format_version': 1}, {'n': 'int'})
    """
    if not isinstance(document, dict):
        raise DatasetError(f"{json_path}: sidecar is not a JSON object")
    document = dict(document)
    name = document.get("format", FORMAT_NAME)
    if name != FORMAT_NAME:
        raise DatasetError(f"{json_path}: format={name!r} is not {FORMAT_NAME!r}")
    version = document.get("format_version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise DatasetError(
            f"{json_path}: format_version={version!r} is not supported "
            f"(this memlab reads format_version {FORMAT_VERSION})"
        )
    for key, allowed in _SIDECAR_KEYS.items():
        value = document.get(key)
        if value is None and key not in ("format", "format_version"):
            continue
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise DatasetError(f"{json_path}: {key}={shown} must be {_JSON_TYPE_NAMES[allowed[0]]}")
    names = document.get("param_names")
    if names is not None and not all(isinstance(n, str) and n for n in names):
        raise DatasetError(f"{json_path}: param_names must be a list of column names")
    document.pop("schema", None)  # derived from the columns; written afresh with every sidecar
    types = document.pop("column_types", None) or {}
    for column, kind in types.items():
        if kind not in _TYPE_NAMES:
            raise DatasetError(f"{json_path}: column_types[{column!r}]={kind!r} is not one of {_TYPE_NAMES}")
    return document, types


def _column_roles(header: Sequence[str]) -> dict[str, tuple[tuple[str, ...], Callable[[Any], str | None]]]:
    """What the row schema says of each column it knows: (allowed types, check of a JSON value)."""
    present = set(header)
    metrics = set(metric_names([dict.fromkeys(header)]))
    roles: dict[str, tuple[tuple[str, ...], Callable[[Any], str | None]]] = {}
    numeric = (("int", "float", "json"), _is_number)
    for column in header:
        base, _, suffix = column.rpartition("_")
        if column in ("family", "counters_scope"):
            roles[column] = (("str", "json"), _is_text)
        elif column == "counters_missing":
            roles[column] = (("json",), _is_object)
        elif column == "repeat":
            roles[column] = numeric
        elif column == "warmup_samples" or (suffix == SAMPLES and base in metrics):
            roles[column] = (("json",), _is_numbers)
        elif column in metrics or column.startswith(COUNTER_PREFIX):
            roles[column] = numeric
        elif suffix in STATISTICS and base in metrics and base in present:
            roles[column] = numeric
    return roles


def _schema_problems(header: Sequence[str], types: Mapping[str, str], json_path: str) -> dict:
    """The checks of JSON cells by column; DatasetError for a type the row schema rules out."""
    checks = {}
    for column, (allowed, check) in _column_roles(header).items():
        kind = types.get(column)
        if kind is None:
            continue
        if kind not in allowed:
            raise DatasetError(
                f"{json_path}: column_types[{column!r}]={kind!r}, but the row schema says {column!r} "
                f"holds {'numbers' if check in (_is_number, _is_numbers) else 'other values'} "
                f"(allowed: {', '.join(allowed)}): the sidecar does not describe this CSV"
            )
        checks[column] = check
    return checks


def _read_header(csv_path: str) -> list[str]:
    table, _ = read_table(csv_path, {}, header_only=True)
    return table.names


def _load_table(csv_path: str, json_path: str, metadata: dict, types: dict[str, str]):
    """The CSV's table (checked against the sidecar) and the load warnings."""
    try:
        check_readable_file(csv_path, "dataset")
        header = _read_header(csv_path)
        checks = _schema_problems(header, types, json_path)
        table, warnings = read_table(csv_path, types, checks)
    except FileNotFoundError:
        raise DatasetError(f"{csv_path}: no such file") from None
    except DatasetError:
        raise
    except OSError as error:
        raise DatasetError(f"{csv_path}: cannot be read: {error.strerror or error}") from None
    except ValueError as error:
        raise DatasetError(str(error)) from None
    if types:
        untyped = [name for name in table.names if name not in types]
        if untyped:
            warnings.append(f"{csv_path}: {json_path} gives no type for column(s) {', '.join(untyped)}; "
                            "their values were guessed from the text")
    family = metadata.get("family")
    if family is not None and "family" in table.index and len(table):
        for index in range(len(table)):
            value = table.value("family", index)
            if value != family:
                raise DatasetError(
                    f"{csv_path}: record {index + 2} holds family={value!r}, but its sidecar {json_path} "
                    f"says family={family!r}: the two files do not belong together"
                )
    listed = metadata.get("param_names") or []
    if len(table):
        # a column under its old name holds the parameter too (an earlier memlab's resume wrote the
        # sidecar's names new and kept the CSV's header old)
        renamed = column_renames(table.names, family or _only_family(table.rows()))
        present = set(table.index) | set(renamed.values())
        absent = [name for name in listed if name not in present]
        if absent:
            raise DatasetError(
                f"{csv_path}: {json_path} lists parameter(s) {', '.join(map(repr, absent))} that the CSV "
                "has no column for: the two files do not belong together"
            )
    return table, warnings


# --------------------------------------------------------------------------
# Dataset


class Dataset:
    """Rows of measurements (one dict per point) plus a metadata dict.

    >>> ds = Dataset([{"family": "pipe", "chunk_bytes": 4096, "GiB_per_s": 3.2}])
    >>> len(ds), ds.columns
    (1, ['family', 'chunk_bytes', 'GiB_per_s'])
    """

    def __init__(self, rows: Iterable[dict] | None = None, metadata: dict | None = None):
        self.rows: list[dict] = [_fresh(row) for row in rows] if rows is not None else []
        self.metadata: dict = dict(metadata) if metadata is not None else {}

    # -- files ------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Dataset":
        """Load ``x.csv`` (and its sidecar ``x.json`` if present).

        ``path`` may name the CSV, the sidecar or the bare stem. A truncated
        last CSV record is dropped and noted in ``metadata["load_warnings"]``;
        a UTF-8 byte order mark is skipped. Anything else the reader cannot vouch
        for is a :class:`DatasetError` (a ValueError) naming the file, the
        record and the column: see docs/dataset.md, "Reading". The rows are
        :class:`memlab.table.Row` mappings over compact columns, decoded when
        read (they compare equal to dicts; ``dict(row)`` makes one).

        >>> Dataset([{"family": "f", "n": 1}]).save("/tmp/ds_load.csv")
        >>> Dataset.load("/tmp/ds_load.json").rows
        [{'family': 'f', 'n': 1}]
        """
        csv_path, json_path = paths_for(path)
        metadata, types = _read_sidecar(json_path)
        if not os.path.lexists(csv_path) and os.path.exists(json_path):
            return cls([], metadata)
        table, warnings = _load_table(csv_path, json_path, metadata, types)
        family = metadata.get("family") or (_only_family(table.rows()) if "family" in table.index else None)
        renames = column_renames(table.names, family)
        if renames:
            negated = NEGATED_ALIASES.get(family or "", frozenset()) & set(renames)
            table.rename(renames)
            for name in negated:
                table.negate(renames[name])
            metadata = _renamed_metadata(metadata, renames)
        if warnings:
            metadata["load_warnings"] = list(metadata.get("load_warnings", [])) + warnings
        dataset = cls([], metadata)
        dataset.rows = table.rows()
        return dataset

    def save(self, path: str | os.PathLike) -> None:
        """Write ``x.csv`` and ``x.json`` atomically (temporary file + rename).

        >>> Dataset([{"family": "f", "tags": ["a", "b"]}]).save("/tmp/ds_save.csv")
        """
        csv_path, json_path = paths_for(path)
        columns = self.columns
        types = column_types(self.rows, columns)
        metadata = {k: v for k, v in self.metadata.items() if k != "load_warnings"}
        _check_family(metadata, self.rows, csv_path)
        csv_text = _csv_text(self.rows, columns, types)
        # the sidecar first, as DatasetWriter does: a crash between the two leaves
        # types for columns the CSV lacks, which a load ignores
        _atomic_write(json_path, _sidecar_text(metadata, types))
        _atomic_write(csv_path, csv_text)

    # -- combining --------------------------------------------------------

    @classmethod
    def merge(cls, *datasets: "Dataset", dedupe: bool = False) -> "Dataset":
        """Concatenate datasets (e.g. shards); metadata comes from the first.

        Rows of the same run of the same point measured by the same machine
        (same :meth:`key`, using the first dataset's ``param_names``, same
        :func:`run_index` and same :func:`machine_key`) raise ValueError
        unless ``dedupe=True``, which keeps the first occurrence. The same point from two machines is two
        rows (a fleet's hosts); ``metadata["machines"]`` lists the machines of
        every dataset.

        >>> a = Dataset([{"family": "f", "n": 1}], {"param_names": ["n"]})
        >>> b = Dataset([{"family": "f", "n": 2}], {"param_names": ["n"]})
        >>> len(Dataset.merge(a, b))
        2
        """
        if not datasets:
            raise ValueError("merge needs at least one dataset")
        metadata = dict(datasets[0].metadata)
        metadata.pop("load_warnings", None)
        metadata["merged_from"] = [
            {
                "rows": len(ds),
                **{k: ds.metadata[k] for k in ("sweep", "shard", "created", "machine") if k in ds.metadata},
            }
            for ds in datasets
        ]
        machines = union_machines(*(ds.metadata.get("machines") for ds in datasets))
        if machines:
            metadata["machines"] = machines
        merged = cls([], metadata)
        check = "param_names" in metadata
        seen: dict[tuple, int] = {}
        for index, ds in enumerate(datasets):
            for row in ds.rows:
                if check:
                    machine = machine_key(row)
                    key = (*merged.key(row), *machine, run_index(row))
                    if key in seen:
                        if dedupe:
                            continue
                        host = f" measured by {machine[0] or machine[1]}" if any(machine) else ""
                        which = f" run {run_index(row)}" if run_index(row) else ""
                        raise DuplicatePointError(
                            f"merge: duplicate point {merged.key(row)}{which}{host} in dataset {index} "
                            f"(first seen in dataset {seen[key]})", "dedupe=True"
                        )
                    seen[key] = index
                merged.rows.append(_fresh(row))
        families = {row.get("family") for row in merged.rows}
        if len(families) > 1:
            merged.metadata.pop("family", None)  # the rows say theirs
        return merged

    def filter(self, predicate: Callable[[dict], bool] | None = None, **equals: Any) -> "Dataset":
        """Rows for which ``predicate(row)`` is true and every ``column == value``.

        >>> ds = Dataset([{"family": "f", "n": 1}, {"family": "f", "n": 2}])
        >>> ds.filter(n=2).rows
        [{'family': 'f', 'n': 2}]
        >>> len(ds.filter(lambda row: row["n"] > 0))
        2
        """
        if self.rows:
            known = set(self.columns)
            for name in equals:
                if name not in known:
                    raise ValueError(f"filter: no column {name!r}; columns are {self.columns}")
        kept = [
            row
            for row in self.rows
            if all(row.get(name) == value for name, value in equals.items())
            and (predicate is None or predicate(row))
        ]
        return Dataset(kept, self.metadata)

    # -- access -----------------------------------------------------------

    def column(self, name: str) -> list:
        """The values of one column, None where a row lacks it.

        >>> Dataset([{"a": 1}, {"b": 2}]).column("a")
        [1, None]
        """
        return [row.get(name) for row in self.rows]

    @property
    def columns(self) -> list[str]:
        """Union of the rows' keys, in first-seen order."""
        return _union_columns(self.rows)

    @property
    def param_names(self) -> list[str]:
        """The parameter columns (see :func:`param_names`).

        >>> Dataset([{"family": "f", "n": 1, "t": 2.0, "t_samples": [2.0]}]).param_names
        ['n']
        """
        return param_names(self.rows, self.metadata)

    @property
    def outcome_names(self) -> list[str]:
        """The outcome columns the rows carry (what was asked and obtained: :data:`OUTCOME_COLUMNS`).

        >>> Dataset([{"family": "f", "pages": "thp", "pages_obtained": "4k"}]).outcome_names
        ['pages_obtained']
        """
        present = set(self.columns)
        return [name for name in OUTCOME_COLUMNS if name in present]

    @property
    def metric_names(self) -> list[str]:
        """The metric columns (see :func:`metric_names`)."""
        return metric_names(self.rows)

    def primary_metric(self, preferred: Sequence[str] = ()) -> str:
        """The metric a view shows first (see :func:`primary_metric`)."""
        return primary_metric(self.rows, self.metadata, preferred)

    def key(self, row: dict) -> tuple:
        """Identity of a point: ``(family, *param values)`` per ``metadata["param_names"]``.

        >>> Dataset([], {"param_names": ["n"]}).key({"family": "f", "n": 3, "x": 1.0})
        ('f', 3)
        """
        return point_key(row, self.metadata.get("param_names") or [])

    def to_numpy(self, columns: Iterable[str] | None = None) -> dict:
        """Columns as numpy arrays: numeric ones as float64 (missing -> nan), others as object.

        >>> Dataset([{"n": 1}, {"n": None}]).to_numpy()["n"]
        array([ 1., nan])
        """
        names = list(columns) if columns is not None else self.columns
        arrays = {}
        for name in names:
            values = [_plain(v) for v in self.column(name)]
            numeric = all(
                is_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
            )
            if numeric:
                arrays[name] = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
            else:
                array = np.empty(len(values), dtype=object)
                array[:] = values
                arrays[name] = array
        return arrays

    def long(self, metrics: Sequence[str] | None = None) -> "Dataset":
        """The samples in long form: one row per kept sample of every point (tidy data).

        Each row holds ``family``, the parameters, the asked-and-obtained columns
        and the machine columns (``context_host``, ``context_fingerprint_id``) of
        its point, ``run`` (which run of the point took the sample, from 0: a
        point measured once has the one run 0, and a row that carries a ``run``
        column keeps its value), ``sample`` (the sample's index within its run)
        and one column per metric holding that sample's value (from
        ``<metric>_samples``; NaN where a metric has fewer samples). ``metrics``
        chooses the metrics (default: every metric with samples). The statistics,
        counters and context facts are per point and stay in the wide rows.
        The result's metadata says ``layout: "long"`` and lists ``param_names``
        and ``metric_names``; save it as any dataset.

        >>> wide = Dataset([{"family": "f", "n": 1, "t": 2.0, "t_min": 1.0, "t_samples": [1.0, 2.0, 3.0]}],
        ...                {"param_names": ["n"]})
        >>> wide.long().rows
        [{'family': 'f', 'n': 1, 'run': 0, 'sample': 0, 't': 1.0}, {'family': 'f', 'n': 1, 'run': 0, 'sample': 1, 't': 2.0}, {'family': 'f', 'n': 1, 'run': 0, 'sample': 2, 't': 3.0}]
        """
        if self.metadata.get("layout") == "long":
            raise ValueError("long(): this dataset is already in long form (metadata layout='long')")
        present = set(self.columns)
        names = self.param_names
        available = [m for m in self.metric_names if statistic_column(m, SAMPLES) in present]
        chosen = list(available if metrics is None else metrics)
        for name in chosen:
            if name not in available:
                raise ValueError(f"long(): metrics={name!r} is not a metric with samples here "
                                 f"(metrics with samples: {', '.join(available) or 'none'})")
        clash = [n for n in (RUN_COLUMN, SAMPLE_COLUMN) if n in names or n in chosen]
        if clash:
            raise ValueError(f"long(): the dataset has a parameter or metric named {clash[0]!r}, "
                             "the column long form adds")
        point_columns = ["family", *names, *self.outcome_names,
                         *(c for c in (HOST_COLUMN, FINGERPRINT_COLUMN) if c in present)]
        rows = []
        for row in self.rows:
            run = row.get(RUN_COLUMN)
            run = run if isinstance(run, int) and not isinstance(run, bool) else 0
            lists = {name: row.get(statistic_column(name, SAMPLES)) for name in chosen}
            lists = {name: values if isinstance(values, list) else [] for name, values in lists.items()}
            base = {column: row[column] for column in point_columns if column in row}
            for index in range(max((len(v) for v in lists.values()), default=0)):
                sample = {**base, RUN_COLUMN: run, SAMPLE_COLUMN: index}
                for name, values in lists.items():
                    sample[name] = values[index] if index < len(values) else math.nan
                rows.append(sample)
        metadata = {k: v for k, v in self.metadata.items() if k not in ("load_warnings", "schema")}
        metadata.update(layout="long", param_names=names, metric_names=chosen)
        return Dataset(rows, metadata)

    def to_pandas(self):
        """A pandas DataFrame of the rows; ``df.attrs`` holds the metadata.

        Requires the optional dependency: ``pip install memlab[pandas]``.

        >>> df = Dataset([{"n": 1}]).to_pandas()  # doctest: +SKIP
        """
        try:
            import pandas
        except ImportError as error:
            raise ImportError(
                "Dataset.to_pandas() needs pandas, which is not installed; "
                "install it with: pip install memlab[pandas]"
            ) from error
        frame = pandas.DataFrame(self.rows, columns=self.columns)
        frame.attrs.update(self.metadata)
        return frame

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Dataset(self.rows[index], self.metadata)
        return self.rows[index]

    def _repr_html_(self) -> str:
        """What a notebook shows: the family, sweep and machine, then one line per point (the
        parameters that vary, the primary metric's median with its min … max, the samples, flags)."""
        meta = self.metadata
        heading = " · ".join(str(meta[k]) for k in ("family", "sweep") if meta.get(k)) or "Dataset"
        cpu = (meta.get("machine") or {}).get("cpu_model") if isinstance(meta.get("machine"), dict) else None
        heading += f": {len(self.rows)} row{'s' if len(self.rows) != 1 else ''}" + (f", {cpu}" if cpu else "")
        try:
            metric = self.primary_metric()
        except ValueError:
            return table_html(heading, ["columns"], [[", ".join(self.columns) or "none"]])
        params = self.param_names
        shown = [n for n in params if len({repr(row.get(n)) for row in self.rows}) > 1] or params[:1]
        unit, factor = column_unit(metric, [row.get(metric) for row in self.rows])

        def scaled(value: Any) -> str:
            return format_number(float(value) * factor if _is_real(value) else value)

        rows, flagged, warnings = [], [], []
        for row in self.rows:
            low, high = row.get(f"{metric}_min"), row.get(f"{metric}_max")
            warning = row_warning(row)
            rows.append([*(format_param(n, row.get(n)) for n in shown), scaled(row.get(metric)),
                         f"{scaled(low)} … {scaled(high)}" if low is not None else "-",
                         format_number(row.get("repeat")), "⚠ " + warning if warning else ""])
            flagged.append(bool(warning))
            if warning:
                warnings.append(warning)
        fixed = [n for n in params if n not in shown]
        if fixed and self.rows:
            heading += "; every point: " + ", ".join(f"{n}={format_param(n, self.rows[0].get(n))}" for n in fixed[:6])
            heading += " …" if len(fixed) > 6 else ""
        flags = ([f"{len(warnings)} of {len(self.rows)} points measured under disturbed conditions "
                  f"(first: {warnings[0]})"] if warnings else [])
        return table_html(heading, [*shown, f"{unit} (median)", "min … max", "n", "flags"], rows,
                          flags=flags, flagged=flagged)

    def __repr__(self) -> str:
        parts = [f"{len(self.rows)} rows", f"{len(self.columns)} columns"]
        for name in ("family", "sweep"):
            if name in self.metadata:
                parts.append(f"{name}={self.metadata[name]!r}")
        return f"Dataset({', '.join(parts)})"


# --------------------------------------------------------------------------
# DatasetWriter


class DatasetWriter:
    """Appends rows to ``x.csv`` as they are measured (flush + fsync per row); resumable.

    If ``x.csv`` exists its rows are loaded into ``existing_rows`` and new
    rows are appended after them; the sidecar ``x.json`` is kept in step.
    Opening an existing file refuses (:class:`DatasetError`) rows of another
    family, sweep or parameter set (see :func:`check_compatible`), and
    removes the temporary files a killed writer left beside it. A parameter
    that the file has no column for (the file was written before the
    parameter existed) takes its value from ``defaults``: the old rows are
    rewritten with it, so that they key the same points as new rows.

    >>> with DatasetWriter("/tmp/ds_writer.csv", {"family": "f", "param_names": ["n"]}) as out:
    ...     out.append({"family": "f", "n": len(out.existing_rows)})
    """

    def __init__(self, path: str | os.PathLike, metadata: dict | None = None,
                 defaults: Mapping[str, Any] | None = None, required: Iterable[str] = ()):
        self.csv_path, self.json_path = paths_for(path)
        new_metadata = dict(metadata or {})
        self.existing_rows: list[dict] = []
        self.filled: dict[str, Any] = {}
        self._rows: list[dict] = []
        self._columns: list[str] = []
        self._types: dict[str, str | None] = {}
        self._written_types: dict[str, str] = {}
        self._handle = None
        self._csv = None
        for target in (self.csv_path, self.json_path):
            check_output_file(target, "dataset file")  # OutputError: a link, FIFO, device, directory
            remove_stale_temporaries(target)
        if os.path.lexists(self.csv_path) and os.path.exists(self.csv_path):
            existing = Dataset.load(self.csv_path)
            self.filled = check_compatible(existing, new_metadata, self.csv_path, defaults)
            for row in existing.rows:
                for name, value in self.filled.items():
                    row[name] = value
            _check_required(existing.rows, required, self.csv_path, new_metadata.get("family"))
            self.existing_rows = existing.rows
            self._rows = list(existing.rows)
            on_disk = _read_header(self.csv_path)
            renames = column_renames(on_disk, existing.metadata.get("family") or _only_family(self._rows))
            header = [renames.get(name, name) for name in on_disk]
            self._columns = _union_columns(self._rows, header)
            self._types = _infer_types(self._rows, self._columns)
            created = existing.metadata.get("created")
            previous = {k: v for k, v in existing.metadata.items() if k != "load_warnings"}
            self.metadata = {**previous, **new_metadata}
            machines = union_machines(previous.get("machines"), new_metadata.get("machines"))
            if machines:
                self.metadata["machines"] = machines
            if created:
                self.metadata["created"] = created
            if "load_warnings" in existing.metadata or on_disk != self._columns:
                # repair a truncated tail, write renamed or filled columns, before appending
                self._write_sidecar()
                self._rewrite()
        else:
            self.metadata = new_metadata
            self._write_sidecar()
            self._rewrite()
        self._write_sidecar()
        self._open()

    def _open(self) -> None:
        self._handle = open_append(self.csv_path)
        self._csv = csv.writer(self._handle, lineterminator="\n")

    def _write_sidecar(self) -> None:
        self.metadata.setdefault(
            "created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        )
        _atomic_write(self.json_path, _sidecar_text(self.metadata, self._settled()))

    def _settled(self) -> dict[str, str]:
        self._written_types = _settle_types(self._types, self._rows)
        return self._written_types

    def _rewrite(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        _atomic_write(self.csv_path, _csv_text(self._rows, self._columns, self._settled()))

    def append(self, row: dict) -> None:
        """Write one row as one CSV line, flushed and fsynced before returning."""
        if self._handle is None:
            raise ValueError(f"DatasetWriter for {self.csv_path} is closed")
        row = dict(row)
        new_columns = [name for name in row if name not in self._types]
        changed = list(new_columns)
        for name, value in row.items():
            old = self._types.get(name)
            combined = _combine_types(old, _value_type(value))
            if name in self._types and combined != old:
                changed.append(name)
            self._types[name] = combined
        self._rows.append(row)
        if changed:
            self._columns.extend(new_columns)
            self._write_sidecar()
            self._rewrite()
            self._open()
            return
        self._csv.writerow([_encode(row.get(name), self._types[name]) for name in self._columns])
        self._handle.flush()
        os.fsync(self._handle.fileno())

    @property
    def rows(self) -> list[dict]:
        """Every row in the file: the existing ones and those appended since."""
        return list(self._rows)

    def update_metadata(self, **items: Any) -> None:
        """Add or replace metadata keys and rewrite the sidecar at once (atomically).

        Example: ``writer.update_metadata(check_end=report.to_dict())``
        """
        self.metadata.update(items)
        self._write_sidecar()

    def close(self) -> None:
        """Close the CSV file (the sidecar is always up to date)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _check_required(rows: Sequence[Mapping[str, Any]], required: Iterable[str], path: str,
                    family: str | None) -> None:
    """DatasetError naming file, record, line and column for a row without a value where the
    parameter always has one: resume would key it as no point of any sweep, keep it, and
    measure its point again."""
    required = list(required)
    for index, row in enumerate(rows):
        for name in required:
            if name in row and is_missing(row[name]):
                where = row.where() if isinstance(row, Row) else f"row {index + 1}"
                owner = f"{family}'s parameter" if family else "parameter"
                raise DatasetError(f"{path}: {where}, column {name!r}: empty, but {owner} {name} always has "
                                   "a value: the row is damaged; fix the cell or delete the line, then run again")


def check_compatible(
    existing: "Dataset", new: Mapping[str, Any], path: str, defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Whether rows described by metadata ``new`` may join the dataset ``existing`` read from ``path``.

    DatasetError with the reason when the dataset's ``family``, ``sweep`` or
    ``kernel_sha256`` (a user kernel's source, memlab.userkernel) differs
    from the new one's (both set), when it holds rows of another
    family, or when its parameters differ: a parameter the new rows lack,
    or a new parameter it has no column for and ``defaults`` gives no value
    of. Returns the values to give the existing rows for the new parameters
    ({name: default}), empty when nothing is missing.

    >>> old = Dataset([{"family": "f", "n": 1}], {"family": "f", "param_names": ["n"]})
    >>> check_compatible(old, {"family": "f", "param_names": ["n", "m"]}, "x.csv", {"m": 0})
    {'m': 0}
    """
    old = existing.metadata
    for name in ("family", "sweep", "kernel_sha256"):  # kernel_sha256: a user kernel's source
        if name in old and name in new and old[name] != new[name]:
            raise DatasetError(
                f"{path} holds {name}={old[name]!r} but this run has {name}={new[name]!r}; "
                f"use another output path or remove the file"
            )
    family = new.get("family")
    if family and existing.rows:
        others = sorted({str(row.get("family")) for row in existing.rows} - {family})
        if others:
            raise DatasetError(f"{path} holds rows of family {', '.join(map(repr, others))}, "
                               f"not {family!r}; use another output path")
    new_names = new.get("param_names")
    if new_names is None or not existing.rows:
        return {}
    columns = set(existing.columns)
    old_names = old.get("param_names")
    if old_names is None:
        old_names = [name for name in new_names if name in columns]
    gone = [name for name in old_names if name not in new_names]
    if gone:
        raise DatasetError(
            f"{path} keys its points by parameter(s) {', '.join(map(repr, gone))} that this run does not "
            f"have ({', '.join(new_names)}): its points cannot be told apart; use another output path"
        )
    filled = {}
    for name in new_names:
        if name in columns:
            continue
        if defaults is None or name not in defaults:
            raise DatasetError(
                f"{path} was written before parameter {name!r} existed and {name!r} has no default "
                "to give its rows; use another output path"
            )
        filled[name] = defaults[name]
    return filled
