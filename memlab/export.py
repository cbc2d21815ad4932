"""Datasets out of memlab: Parquet, long-form CSV and JSON (``memlab export``).

A dataset's own files (CSV + sidecar, docs/dataset.md) stay the format memlab
writes while it measures; this module turns one into what other tools read
best. Every export carries the sidecar document (memlab's metadata, the
column types and the columns as a Frictionless Table Schema,
:func:`memlab.dataset.table_schema`), so a file read a year later still says
what each column is and what machine measured it.

- ``parquet``: the rows as a Parquet table (needs ``pip install 'memlab[parquet]'``,
  pyarrow): integers as int64, numbers as float64 (NaN kept), samples as lists,
  other JSON cells as their JSON text; the sidecar document in the file's
  key-value metadata under ``memlab``. :func:`read_parquet` reads it back into
  the same values.
- ``csv-long``: :meth:`memlab.dataset.Dataset.long` saved as a dataset: one row
  per sample, with its own sidecar.
- ``json``: one JSON document, the sidecar's keys plus ``rows`` (strict JSON:
  NaN is ``null``, infinities ``±1e999``).

Example::

    >>> from memlab.dataset import Dataset
    >>> ds = Dataset([{"family": "f", "n": 1, "t": 1.5, "t_samples": [1.5, float("nan")]}],
    ...              {"param_names": ["n"]})
    >>> export(ds, "/tmp/example-export.json", "json")
    '/tmp/example-export.json'
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

from memlab.dataset import (
    FORMAT_NAME,
    Dataset,
    DatasetError,
    column_types,
    paths_for,
    parse_sidecar,
    sidecar_document,
)
from memlab.files import atomic_write, check_output_file, check_readable_file

__all__ = ["FORMATS", "PARQUET_EXTRA", "default_path", "export", "read_parquet", "require_pyarrow"]

#: The formats of :func:`export` and the file suffix of each.
FORMATS = {"parquet": ".parquet", "csv-long": "-long.csv", "json": "-export.json"}
#: The optional dependency group that brings pyarrow.
PARQUET_EXTRA = "parquet"
#: The Parquet key-value metadata key holding the sidecar document.
METADATA_KEY = b"memlab"


def require_pyarrow():
    """The modules ``(pyarrow, pyarrow.parquet)``, or ImportError saying which extra installs them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ImportError(
            f"Parquet needs pyarrow, which is not installed; install it with: "
            f"pip install 'memlab[{PARQUET_EXTRA}]'"
        ) from None
    return pyarrow, pyarrow.parquet


def default_path(dataset_path: str | os.PathLike, fmt: str) -> str:
    """Where ``memlab export DATASET --format FMT`` writes without ``--out``: beside the dataset.

    >>> default_path("runs/chase.csv", "parquet"), default_path("runs/chase", "csv-long")
    ('runs/chase.parquet', 'runs/chase-long.csv')
    >>> default_path("runs/chase.json", "json")  # not the dataset's own sidecar
    'runs/chase-export.json'
    """
    _check_format(fmt)
    stem = os.path.splitext(paths_for(dataset_path)[0])[0]
    return stem + FORMATS[fmt]


def export(dataset: Dataset, path: str | os.PathLike, fmt: str, *, long: bool = False) -> str:
    """Write ``dataset`` to ``path`` in format ``fmt`` (``parquet``, ``csv-long``, ``json``); return the path.

    ``long=True`` writes the long form (:meth:`Dataset.long`) in Parquet or
    JSON too; ``csv-long`` is always long. The write is atomic (a temporary
    file renamed over the target). ImportError for Parquet without pyarrow.
    """
    _check_format(fmt)
    path = os.fspath(path)
    if fmt == "csv-long":
        if os.path.splitext(path)[1].lower() != ".csv":
            raise ValueError(f"--out={path!r}: a csv-long export is a dataset, its path ends in .csv")
        table = dataset if dataset.metadata.get("layout") == "long" else dataset.long()
        table.save(path)
        return path
    table = dataset.long() if long and dataset.metadata.get("layout") != "long" else dataset
    check_output_file(path, "--out")
    if fmt == "parquet":
        atomic_write(path, _parquet_bytes(table))
    else:
        atomic_write(path, _json_text(table))
    return path


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"format={fmt!r} is not one of {', '.join(FORMATS)}")


def _document(dataset: Dataset) -> tuple[dict, dict[str, str]]:
    columns = dataset.columns
    types = column_types(dataset.rows, columns)
    return sidecar_document(dataset.metadata, types), types


# --------------------------------------------------------------------------
# Parquet


def _list_kind(values: list) -> str | None:
    """"int" or "float" when every value is a list of that kind of number (None allowed), else None."""
    kinds = set()
    for value in values:
        if value is None:
            continue
        if not isinstance(value, list):
            return None
        for item in value:
            if item is None:
                continue
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                return None
            kinds.add("int" if isinstance(item, int) else "float")
    if len(kinds) > 1:
        return None
    return kinds.pop() if kinds else "float"


def _arrow_array(pa, kind: str, values: list):
    if kind == "int":
        return pa.array(values, pa.int64())
    if kind == "float":
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if kind == "bool":
        return pa.array(values, pa.bool_())
    if kind == "str":
        return pa.array(values, pa.string())
    listed = _list_kind(values)
    if listed is not None:
        return pa.array(values, pa.list_(pa.int64() if listed == "int" else pa.float64()))
    return pa.array([None if v is None else json.dumps(v, separators=(",", ":")) for v in values], pa.string())


def _plain_rows(dataset: Dataset) -> list[dict]:
    # a Row view decodes every cell when read; one dict per row reads each once
    return [dict(row) for row in dataset.rows]


def _parquet_bytes(dataset: Dataset) -> bytes:
    pa, parquet = require_pyarrow()
    document, types = _document(dataset)
    rows = _plain_rows(dataset)
    arrays = [_arrow_array(pa, types[name], [_plain(row.get(name)) for row in rows]) for name in types]
    table = pa.Table.from_arrays(arrays, names=list(types))
    text = json.dumps(document, default=_default, separators=(",", ":"))
    table = table.replace_schema_metadata({METADATA_KEY: text.encode("utf-8")})
    sink = pa.BufferOutputStream()
    parquet.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def read_parquet(path: str | os.PathLike) -> Dataset:
    """Read a Parquet file :func:`export` wrote back into a :class:`Dataset` with the same values.

    As with a dataset's CSV (docs/dataset.md), a missing value in a ``float``
    column reads as NaN; every other value, NaN, None and the int/float kind of
    each number included, comes back as it was written. A file without memlab's
    metadata is a :class:`DatasetError`.
    """
    pa, parquet = require_pyarrow()
    path = os.fspath(path)
    try:
        check_readable_file(path, "Parquet file")
        with open(path, "rb") as handle:  # read whole: pyarrow would hold the file open with the table
            data = handle.read()
        table = parquet.read_table(pa.BufferReader(data))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (OSError, pa.ArrowException) as error:
        raise DatasetError(f"{path}: cannot be read as Parquet: {error}") from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise DatasetError(f"{path}: no {METADATA_KEY.decode()} metadata: not a dataset memlab exported")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise DatasetError(f"{path}: its memlab metadata is not JSON: {error}") from None
    metadata, types = parse_sidecar(document, path)
    columns = {}
    for name in table.column_names:
        values = table.column(name).to_pylist()
        kind = types.get(name)
        if kind == "float":
            values = [math.nan if v is None else v for v in values]
        elif kind == "json" and table.schema.field(name).type == "string":
            values = [None if v is None else json.loads(v) for v in values]
        columns[name] = values
    rows = [{name: values[index] for name, values in columns.items()} for index in range(table.num_rows)]
    return Dataset(rows, metadata)


# --------------------------------------------------------------------------
# JSON


def _json_text(dataset: Dataset) -> str:
    document, _ = _document(dataset)
    document["format"] = FORMAT_NAME
    document["rows"] = _plain_rows(dataset)
    return _strict_json(document) + "\n"


def _strict_json(value: Any) -> str:
    """``value`` as strict JSON (RFC 8259): NaN as ``null``, infinities as ``1e999`` / ``-1e999``
    (numbers JSON readers take for infinity), never the ``NaN``/``Infinity`` tokens.

    >>> _strict_json({"a": [1, 1.5, float("nan"), float("-inf")], "b": None})
    '{"a":[1,1.5,null,-1e999],"b":null}'
    """
    value = _plain(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "null"
        if math.isinf(value):
            return "1e999" if value > 0 else "-1e999"
        return float.__repr__(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_strict_json(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k))}:{_strict_json(v)}" for k, v in value.items()) + "}"
    return _strict_json(_default(value))


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (list, dict, str)):
        return tolist()
    return value


def _default(value: Any) -> Any:
    plain = _plain(value)
    if plain is value:
        raise TypeError(f"value {value!r} of type {type(value).__name__} is not JSON serializable")
    return plain
