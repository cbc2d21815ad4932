"""Datasets: rows of measurements plus metadata, stored as CSV + JSON sidecar.

A dataset ``x`` lives in two files: ``x.csv`` (one row per measured point)
and ``x.json`` (the sidecar: format name and version, metadata, and the type
of every column so that loading restores values exactly). The format is
specified in ``docs/dataset.md``.

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
from typing import Any, Callable, Iterable, Iterator

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Dataset", "DatasetWriter", "paths_for"]

FORMAT_NAME = "memlab-dataset"
FORMAT_VERSION = 1

_TYPE_NAMES = ("int", "float", "bool", "str", "json")


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


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _value_type(value: Any) -> str | None:
    """The column type one value needs, or None for a missing value."""
    value = _plain(value)
    if _is_missing(value):
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
    if _is_missing(value):
        return ""
    if type_name == "json":
        return json.dumps(value, default=_json_default, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, default=_json_default, separators=(",", ":"))


def _decode(text: str, type_name: str | None) -> Any:
    if text == "":
        return math.nan if type_name == "float" else None
    if type_name == "int":
        return int(text)
    if type_name == "float":
        return float(text)
    if type_name == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"bool column holds {text!r}, expected true or false")
        return text == "true"
    if type_name == "str":
        return text
    if type_name == "json":
        return json.loads(text)
    return _guess(text)


def _guess(text: str) -> Any:
    """Decode a cell whose column type is unknown (sidecar missing)."""
    if text in ("true", "false"):
        return text == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text[:1] in ("[", "{", '"'):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


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
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _sidecar_text(metadata: dict, types: dict[str, str]) -> str:
    document = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION}
    document.update({k: v for k, v in metadata.items() if k not in ("format", "format_version")})
    document.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    document["column_types"] = dict(types)
    return json.dumps(document, indent=2, default=_json_default, sort_keys=False) + "\n"


def _read_sidecar(json_path: str) -> tuple[dict, dict[str, str]]:
    """Return (metadata, column_types); ({}, {}) when there is no sidecar."""
    try:
        with open(json_path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return {}, {}
    if not isinstance(document, dict):
        raise ValueError(f"{json_path}: sidecar is not a JSON object")
    name = document.get("format", FORMAT_NAME)
    if name != FORMAT_NAME:
        raise ValueError(f"{json_path}: format={name!r} is not {FORMAT_NAME!r}")
    version = document.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{json_path}: format_version={version!r} is not supported "
            f"(this memlab reads format_version {FORMAT_VERSION})"
        )
    types = document.pop("column_types", {}) or {}
    for column, kind in types.items():
        if kind not in _TYPE_NAMES:
            raise ValueError(f"{json_path}: column_types[{column!r}]={kind!r} is not one of {_TYPE_NAMES}")
    return document, types


def _read_csv(csv_path: str, types: dict[str, str]) -> tuple[list[dict], list[str], list[str]]:
    """Return (rows, header, warnings); a truncated last record is dropped."""
    with open(csv_path, encoding="utf-8", newline="") as handle:
        text = handle.read()
    warnings: list[str] = []
    if not text:
        return [], [], warnings
    truncated = not text.endswith("\n")
    records: list[list[str]] = []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        for record in reader:
            records.append(record)
    except csv.Error as error:
        if not truncated:
            raise ValueError(f"{csv_path}: line {reader.line_num}: {error}") from None
        records.append([])  # the partial record, dropped below
    if truncated:
        records.pop()
        warnings.append(f"{csv_path}: dropped a truncated last line (the file did not end with a newline)")
    if not records:
        return [], [], warnings
    header, body = records[0], records[1:]
    rows = []
    for number, record in enumerate(body, start=2):
        if len(record) != len(header):
            raise ValueError(f"{csv_path}: record {number} has {len(record)} fields, the header has {len(header)}")
        rows.append({name: _decode(cell, types.get(name)) for name, cell in zip(header, record)})
    return rows, header, warnings


# --------------------------------------------------------------------------
# Dataset


class Dataset:
    """Rows of measurements (one dict per point) plus a metadata dict.

    >>> ds = Dataset([{"family": "pipe", "chunk_bytes": 4096, "GiB_per_s": 3.2}])
    >>> len(ds), ds.columns
    (1, ['family', 'chunk_bytes', 'GiB_per_s'])
    """

    def __init__(self, rows: Iterable[dict] | None = None, metadata: dict | None = None):
        self.rows: list[dict] = [dict(row) for row in rows] if rows is not None else []
        self.metadata: dict = dict(metadata) if metadata is not None else {}

    # -- files ------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Dataset":
        """Load ``x.csv`` (and its sidecar ``x.json`` if present).

        ``path`` may name the CSV, the sidecar or the bare stem. A truncated
        last CSV line is dropped and noted in ``metadata["load_warnings"]``.

        >>> Dataset([{"family": "f", "n": 1}]).save("/tmp/ds_load.csv")
        >>> Dataset.load("/tmp/ds_load.json").rows
        [{'family': 'f', 'n': 1}]
        """
        csv_path, json_path = paths_for(path)
        metadata, types = _read_sidecar(json_path)
        if not os.path.exists(csv_path) and os.path.exists(json_path):
            return cls([], metadata)
        rows, _, warnings = _read_csv(csv_path, types)
        if warnings:
            metadata["load_warnings"] = list(metadata.get("load_warnings", [])) + warnings
        dataset = cls(rows, metadata)
        dataset.rows = rows  # already fresh dicts
        return dataset

    def save(self, path: str | os.PathLike) -> None:
        """Write ``x.csv`` and ``x.json`` atomically (temporary file + rename).

        >>> Dataset([{"family": "f", "tags": ["a", "b"]}]).save("/tmp/ds_save.csv")
        """
        csv_path, json_path = paths_for(path)
        columns = self.columns
        types = column_types(self.rows, columns)
        metadata = {k: v for k, v in self.metadata.items() if k != "load_warnings"}
        _atomic_write(csv_path, _csv_text(self.rows, columns, types))
        _atomic_write(json_path, _sidecar_text(metadata, types))

    # -- combining --------------------------------------------------------

    @classmethod
    def merge(cls, *datasets: "Dataset", dedupe: bool = False) -> "Dataset":
        """Concatenate datasets (e.g. shards); metadata comes from the first.

        Rows with the same :meth:`key` (family + parameter values, using the
        first dataset's ``param_names``) raise ValueError unless
        ``dedupe=True``, which keeps the first occurrence.

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
        merged = cls([], metadata)
        check = "param_names" in metadata
        seen: dict[tuple, int] = {}
        for index, ds in enumerate(datasets):
            for row in ds.rows:
                if check:
                    key = merged.key(row)
                    if key in seen:
                        if dedupe:
                            continue
                        raise ValueError(
                            f"merge: duplicate point {key} in dataset {index} "
                            f"(first seen in dataset {seen[key]}); pass dedupe=True to keep the first"
                        )
                    seen[key] = index
                merged.rows.append(dict(row))
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

    def key(self, row: dict) -> tuple:
        """Identity of a point: ``(family, *param values)`` per ``metadata["param_names"]``.

        >>> Dataset([], {"param_names": ["n"]}).key({"family": "f", "n": 3, "x": 1.0})
        ('f', 3)
        """
        names = self.metadata.get("param_names") or []
        return (row.get("family"), *(_hashable(row.get(name)) for name in names))

    def to_numpy(self, columns: Iterable[str] | None = None) -> dict:
        """Columns as numpy arrays: numeric ones as float64 (missing -> nan), others as object.

        >>> Dataset([{"n": 1}, {"n": None}]).to_numpy()["n"]
        array([ 1., nan])
        """
        import numpy as np

        names = list(columns) if columns is not None else self.columns
        arrays = {}
        for name in names:
            values = [_plain(v) for v in self.column(name)]
            numeric = all(
                _is_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
            )
            if numeric:
                arrays[name] = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
            else:
                array = np.empty(len(values), dtype=object)
                array[:] = values
                arrays[name] = array
        return arrays

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

    def __repr__(self) -> str:
        parts = [f"{len(self.rows)} rows", f"{len(self.columns)} columns"]
        for name in ("family", "sweep"):
            if name in self.metadata:
                parts.append(f"{name}={self.metadata[name]!r}")
        return f"Dataset({', '.join(parts)})"


def _hashable(value: Any) -> Any:
    value = _plain(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


# --------------------------------------------------------------------------
# DatasetWriter


class DatasetWriter:
    """Appends rows to ``x.csv`` as they are measured (flush + fsync per row); resumable.

    If ``x.csv`` exists its rows are loaded into ``existing_rows`` and new
    rows are appended after them; the sidecar ``x.json`` is kept in step.

    >>> with DatasetWriter("/tmp/ds_writer.csv", {"family": "f", "param_names": ["n"]}) as out:
    ...     out.append({"family": "f", "n": len(out.existing_rows)})
    """

    def __init__(self, path: str | os.PathLike, metadata: dict | None = None):
        self.csv_path, self.json_path = paths_for(path)
        new_metadata = dict(metadata or {})
        self.existing_rows: list[dict] = []
        self._rows: list[dict] = []
        self._columns: list[str] = []
        self._types: dict[str, str | None] = {}
        self._written_types: dict[str, str] = {}
        self._handle = None
        self._csv = None
        if os.path.exists(self.csv_path):
            existing = Dataset.load(self.csv_path)
            _check_compatible(existing.metadata, new_metadata, self.csv_path)
            self.existing_rows = existing.rows
            self._rows = list(existing.rows)
            with open(self.csv_path, encoding="utf-8", newline="") as handle:
                header = next(csv.reader(handle), [])
            self._columns = _union_columns(self._rows, header)
            self._types = _infer_types(self._rows, self._columns)
            created = existing.metadata.get("created")
            previous = {k: v for k, v in existing.metadata.items() if k != "load_warnings"}
            self.metadata = {**previous, **new_metadata}
            if created:
                self.metadata["created"] = created
            if "load_warnings" in existing.metadata or header != self._columns:
                self._rewrite()  # repair a truncated tail before appending to it
        else:
            self.metadata = new_metadata
            self._rewrite()
        self._write_sidecar()
        self._open()

    def _open(self) -> None:
        self._handle = open(self.csv_path, "a", encoding="utf-8", newline="")
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
            elif combined is None and self._written_types.get(name) == "json" and value is not None:
                changed.append(name)  # a first NaN in an all-missing column: reads back as NaN now
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


def _check_compatible(existing: dict, new: dict, path: str) -> None:
    for name in ("family", "sweep"):
        if name in existing and name in new and existing[name] != new[name]:
            raise ValueError(
                f"{path} holds {name}={existing[name]!r} but this run has {name}={new[name]!r}; "
                f"use another output path or remove the file"
            )
