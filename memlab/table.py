"""A dataset's CSV read into columns: compact in memory, strict about what it accepts.

:func:`read_table` parses the CSV a :class:`memlab.dataset.DatasetWriter`
writes (docs/dataset.md, "CSV encoding") into one compact column per header
name: ``float`` columns as arrays of doubles, ``int`` as arrays of 64-bit
integers, ``bool`` as bytes, ``str`` as shared strings, and ``json`` cells
(samples, counters) as their text, parsed when a row asks for them. A
loaded dataset so takes about the file's own size in memory, not the 16x
that a dict of Python objects per row takes.

The reader accepts only what memlab writes (or a spreadsheet program would
save of it) and refuses the rest with a ValueError naming the file, the
record (and its line) and the column: a NUL byte, text that is not UTF-8, a
quote inside an unquoted field or one that never closes, a stray carriage return, a byte order mark
after the start, a duplicated or
empty column name, a record with the wrong number of fields, a cell that is
not a value of its column's type. A UTF-8 byte order mark at the start (what
spreadsheet programs write) is skipped. A last record cut short (the file
ends inside it) is dropped and reported in the warnings: the documented
recovery from a crash while a row was being appended.

:class:`Row` is one record as a mutable mapping over the columns (a write
goes to the row alone); it compares equal to the dict of its values.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> _ = open(path, "w").write('family,n,t_samples\\nf,1,"[1.5,2.5]"\\n')
>>> table, warnings = read_table(path, {"family": "str", "n": "int", "t_samples": "json"})
>>> table.row(0)
{'family': 'f', 'n': 1, 't_samples': [1.5, 2.5]}
"""

from __future__ import annotations

import csv
import json
import math
import re
from array import array
from collections.abc import Mapping, MutableMapping
from typing import Any, Callable, Iterator, Sequence

__all__ = ["Row", "Table", "TYPE_NAMES", "is_number", "is_numbers", "is_object", "is_text", "read_table"]

#: The column types of the sidecar's ``column_types``.
TYPE_NAMES = ("int", "float", "bool", "str", "json")

_BOM = "\ufeff"
# One field: quoted (any text, "" for a quote) or unquoted (no comma, no quote).
_FIELD = re.compile(r'"([^"]*(?:""[^"]*)*)"|([^,"\r]*)')
#: Each field of a record that matches _RECORD: (quoted text or None, unquoted text, the comma after it).
_FIELD_SPLIT = re.compile(r'(?:"([^"]*(?:""[^"]*)*)"|([^,"\r]*))(,|$)')
#: A whole record: fields quoted (any text, "" for a quote) or unquoted (no comma, quote or CR).
_RECORD = re.compile(r'(?:"[^"]*(?:""[^"]*)*"|[^,"\r]*)(?:,(?:"[^"]*(?:""[^"]*)*"|[^,"\r]*))*')
_INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan)",
                    re.ASCII | re.IGNORECASE)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_NONE = 2  # a missing bool
_CHUNK_RECORDS = 256  # records converted column by column at a time


_JSON_NUMBER = r"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|NaN|-?Infinity|null)"
_JSON_SPACE = r"[ \t\n\r]*"
#: JSON text of one number (or null) and of a list of them, as json.loads reads them.
_JSON_NUMBER_TEXT = re.compile(_JSON_SPACE + _JSON_NUMBER + _JSON_SPACE)
_JSON_NUMBERS_TEXT = re.compile(
    rf"{_JSON_SPACE}\[{_JSON_SPACE}(?:{_JSON_NUMBER}{_JSON_SPACE}(?:,{_JSON_SPACE}{_JSON_NUMBER}{_JSON_SPACE})*)?\]"
    + _JSON_SPACE
)
_FLOAT_TEXT = r"(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan))"
#: Cells joined by commas: a chunk of a float or int column, checked in one pass.
_FLOATS = re.compile(rf"{_FLOAT_TEXT}?(?:,{_FLOAT_TEXT}?)*", re.ASCII | re.IGNORECASE)
_INTS = re.compile(r"(?:[-+]?[0-9]{1,18})?(?:,(?:[-+]?[0-9]{1,18})?)*", re.ASCII)


class CellError(ValueError):
    """A cell that is not a value of its column's type (the message says where)."""


def is_number(value: Any) -> str | None:
    """None if a decoded JSON cell is a number (or null), else what is wrong with it."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return None
    return "is not a number"


def is_numbers(value: Any) -> str | None:
    """None if a decoded JSON cell is a list of numbers (or nulls), else what is wrong with it."""
    if isinstance(value, list) and all(is_number(v) is None for v in value):
        return None
    return "is not a list of numbers"


def is_text(value: Any) -> str | None:
    """None if a decoded JSON cell is a string (or null)."""
    return None if value is None or isinstance(value, str) else "is not text"


def is_object(value: Any) -> str | None:
    """None if a decoded JSON cell is an object."""
    return None if isinstance(value, dict) else "is not a JSON object"


#: Checks whose JSON text a regular expression can vouch for without parsing it.
_FAST_JSON = {is_number: _JSON_NUMBER_TEXT, is_numbers: _JSON_NUMBERS_TEXT}


def _parse_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise CellError(f"{text[:40]!r} is not an integer")
    return int(text)


def _parse_float(text: str) -> float:
    if not _FLOAT.fullmatch(text):
        raise CellError(f"{text[:40]!r} is not a number")
    return float(text)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise CellError("JSON nested too deeply") from None
    except ValueError as error:
        raise CellError(f"{text[:40]!r} is not JSON ({error})") from None


def guess(text: str) -> Any:
    """Decode a cell of a column without a type (a CSV without its sidecar).

    >>> guess("4096"), guess("1.5"), guess("true"), guess("[1, 2]"), guess("random")
    (4096, 1.5, True, [1, 2], 'random')
    """
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text[:1] in ("[", "{", '"'):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    return text


class _Column:
    """One column's values in compact storage; ``get(i)`` gives the Python value."""

    __slots__ = ("kind", "values", "missing", "strings", "check", "integers")

    def __init__(self, kind: str | None, check: Callable[[Any], str | None] | None = None):
        self.kind = kind or "guess"
        self.missing: set[int] = set()
        #: a float column's cells written as integers (memlab writes an int as its digits and a
        #: float always with a point, an exponent, inf or nan): {index: the int}, read back exactly
        self.integers: dict[int, int] = {}
        self.strings: dict[str, str] = {}
        self.check = check
        if self.kind == "float":
            self.values: Any = array("d")
        elif self.kind == "int":
            self.values = array("q")
        elif self.kind == "bool":
            self.values = bytearray()
        else:
            self.values = []

    def _shared(self, text: str) -> str:
        return self.strings.setdefault(text, text) if len(self.strings) < 65536 else text

    def append(self, text: str) -> None:
        kind = self.kind
        values = self.values
        if kind == "float":
            number = math.nan if text == "" else _parse_float(text)
            if text and _INT.fullmatch(text):
                self.integers[len(values)] = int(text)
            values.append(number)
        elif kind == "int":
            if text == "":
                self.missing.add(len(values))
                values.append(0)
                return
            number = _parse_int(text)
            if not _INT64_MIN <= number <= _INT64_MAX:
                self._widen()
                self.values.append(number)
                return
            values.append(number)
        elif kind == "bigint":
            values.append(None if text == "" else _parse_int(text))
        elif kind == "bool":
            if text == "":
                values.append(_NONE)
            elif text in ("true", "false"):
                values.append(text == "true")
            else:
                raise CellError(f"{text[:40]!r} is not true or false")
        elif kind == "str":
            values.append(None if text == "" else self._shared(text))
        elif kind == "json":
            if text == "":
                values.append(None)
                return
            value = _parse_json(text)  # checked now, kept as text, parsed again when asked for
            if self.check is not None:
                problem = self.check(value)
                if problem:
                    raise CellError(f"{text[:40]!r} {problem}")
            values.append(self._shared(text))
        else:
            values.append(None if text == "" else guess(text))

    def extend(self, cells: Sequence[str]) -> None:
        """Append a chunk of cells; CellError (with ``index``, the cell's position) at the first bad one."""
        kind = self.kind
        try:
            if kind == "float" and _FLOATS.fullmatch(",".join(cells)):
                start = len(self.values)
                self.values.extend([float(c) if c else math.nan for c in cells])
                for index, cell in enumerate(cells):
                    if cell and "." not in cell and "e" not in cell and "n" not in cell and _INT.fullmatch(cell):
                        self.integers[start + index] = int(cell)
                return
            if kind == "int" and _INTS.fullmatch(",".join(cells)):
                start = len(self.values)
                self.missing.update(start + i for i, c in enumerate(cells) if not c)
                self.values.extend([int(c) if c else 0 for c in cells])
                return
            if kind == "bool" and set(cells) <= {"true", "false", ""}:
                self.values.extend([_NONE if not c else c == "true" for c in cells])
                return
            if kind == "str":
                shared = self._shared
                self.values.extend([shared(c) if c else None for c in cells])
                return
            if kind == "json":
                pattern = _FAST_JSON.get(self.check)
                if pattern is not None:
                    shared, values, append = self._shared, self.values, self.append
                    for index, cell in enumerate(cells):
                        if not cell:
                            values.append(None)
                        elif pattern.fullmatch(cell):
                            values.append(shared(cell))
                        else:
                            self._append_at(index, cell)
                    return
        except ValueError:  # a float() the pattern let through ("1,2" is two numbers when joined)
            pass
        for index, cell in enumerate(cells):
            self._append_at(index, cell)

    def _append_at(self, index: int, cell: str) -> None:
        try:
            self.append(cell)
        except CellError as error:
            error.index = index
            raise

    def _widen(self) -> None:
        """An int column with a value beyond 64 bits: keep Python ints."""
        self.values = [None if i in self.missing else v for i, v in enumerate(self.values)]
        self.missing = set()
        self.kind = "bigint"

    def get(self, index: int) -> Any:
        kind = self.kind
        if kind == "float":
            return self.integers.get(index, self.values[index]) if self.integers else self.values[index]
        if kind == "int":
            return None if index in self.missing else self.values[index]
        if kind == "bool":
            value = self.values[index]
            return None if value == _NONE else bool(value)
        if kind == "json":
            text = self.values[index]
            return None if text is None else json.loads(text)
        return self.values[index]

    def truncate(self, length: int) -> None:
        del self.values[length:]
        self.missing = {i for i in self.missing if i < length}
        self.integers = {i: v for i, v in self.integers.items() if i < length}

    def nbytes(self) -> int:
        """About how many bytes the column's values take."""
        if isinstance(self.values, (array, bytearray)):
            return len(self.values) * (self.values.itemsize if isinstance(self.values, array) else 1)
        total = 8 * len(self.values)
        total += sum(49 + len(s) for s in self.strings)
        return total


class Table:
    """Columns of equal length, by name; :meth:`row` views one record as a :class:`Row`."""

    def __init__(self, names: list[str], columns: list[_Column], lines: Sequence[int] = ()):
        self.names = list(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.columns = columns
        self.length = len(columns[0].values) if columns else 0
        #: the line each record starts on in the file (a quoted cell may span lines)
        self.lines = array("q", lines)

    def __len__(self) -> int:
        return self.length

    def rename(self, renames: Mapping[str, str]) -> None:
        """Rename columns {old: new} (the new names must not be columns already)."""
        self.names = [renames.get(name, name) for name in self.names]
        self.index = {name: i for i, name in enumerate(self.names)}

    def negate(self, name: str) -> None:
        """Flip the true/false values of column ``name`` (a renamed column whose meaning turned over)."""
        column = self.columns[self.index[name]]
        if column.kind == "bool":
            column.values = bytearray(v if v == _NONE else 1 - v for v in column.values)
        elif isinstance(column.values, list):
            column.values = [not v if isinstance(v, bool) else v for v in column.values]

    def value(self, name: str, index: int) -> Any:
        return self.columns[self.index[name]].get(index)

    def row(self, index: int) -> "Row":
        return Row(self, index)

    def rows(self) -> list["Row"]:
        return [Row(self, i) for i in range(self.length)]

    def nbytes(self) -> int:
        """About how many bytes the values take (the arrays and shared strings)."""
        return sum(column.nbytes() for column in self.columns)


class Row(MutableMapping):
    """One record of a :class:`Table` as a mapping; writes stay in the row.

    It behaves as the dict of its values (``==``, ``dict(row)``, ``repr``),
    decoding a cell only when it is asked for, so that a large dataset's
    rows take little memory until they are used.
    """

    __slots__ = ("_table", "_index", "_changed", "_removed")

    def __init__(self, table: Table, index: int, changed: dict | None = None, removed: frozenset = frozenset()):
        self._table = table
        self._index = index
        self._changed = changed
        self._removed = removed

    def __getitem__(self, name: str) -> Any:
        changed = self._changed
        if changed is not None and name in changed:
            return changed[name]
        if name in self._removed:
            raise KeyError(name)
        position = self._table.index.get(name)
        if position is None:
            raise KeyError(name)
        return self._table.columns[position].get(self._index)

    def where(self) -> str:
        """Where the record is in its file: ``record 4 (line 4)`` (record 1 is the header)."""
        lines = self._table.lines
        line = f" (line {lines[self._index]})" if self._index < len(lines) else ""
        return f"record {self._index + 2}{line}"

    def __contains__(self, name: object) -> bool:
        changed = self._changed
        if changed is not None and name in changed:
            return True
        return name in self._table.index and name not in self._removed

    def __setitem__(self, name: str, value: Any) -> None:
        if self._changed is None:
            self._changed = {}
        self._changed[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        if self._changed is not None:
            self._changed.pop(name, None)
        if name in self._table.index:
            self._removed = self._removed | {name}

    def __iter__(self) -> Iterator[str]:
        removed = self._removed
        for name in self._table.names:
            if name not in removed:
                yield name
        if self._changed:
            index = self._table.index
            for name in self._changed:
                if name not in index or name in removed:
                    yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def copy(self) -> "Row":
        """A new row over the same record, with its own changes."""
        return Row(self._table, self._index, dict(self._changed) if self._changed else None, self._removed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self):
        return (dict, (dict(self.items()),))


# --------------------------------------------------------------------------
# reading


def _records(handle, path: str, warnings: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each complete record; a cut last record is dropped with a warning.

    ``handle`` is the file opened in binary: each line is decoded on its own,
    so that an error names the line.
    """
    pending: list[str] = []
    quotes = 0
    start_line = line_number = 0
    for raw in handle:
        line_number += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: line {line_number} is not UTF-8 text ({error.reason} at byte "
                             f"{error.start + 1} of the line)") from None
        if line_number == 1 and line.startswith(_BOM):
            line = line[1:]
        if "\x00" in line:
            raise ValueError(f"{path}: line {line_number} holds a NUL byte: not a memlab CSV (or a damaged one)")
        if _BOM in line:
            raise ValueError(f"{path}: line {line_number} holds a byte order mark (U+FEFF) inside the text "
                             "(files joined together?)")
        if not pending:
            start_line = line_number
        pending.append(line)
        quotes += line.count('"')
        if quotes % 2 or not line.endswith("\n"):
            continue  # inside a quoted field that spans lines, or the end of a cut file
        end = 2 if line.endswith("\r\n") else 1
        text = "".join(pending) if len(pending) > 1 else line
        pending = []
        quotes = 0
        yield start_line, text[:-end]
    if pending:
        if pending[-1].endswith("\n"):
            # a cut file ends anywhere; a whole file with a quote that never closes is damaged
            raise ValueError(f"{path}: the record at line {start_line} opens a quote that never closes "
                             "(a stray quote?)")
        warnings.append(f"{path}: dropped a truncated last record at line {start_line} "
                        "(the file ends inside it, as after a crash while a row was being written)")


def _fields(text: str) -> list[str]:
    """The fields of one record; ValueError for a quote or carriage return where none may be."""
    if '"' not in text and "\r" not in text:
        return text.split(",")
    if _RECORD.fullmatch(text):
        try:
            return next(csv.reader([text], strict=True))
        except csv.Error:
            pass
        # a field longer than csv.field_size_limit() (131,072 characters; a point's samples cell
        # passes that near 7,000 samples): split here, without a limit
        fields = []
        for found in _FIELD_SPLIT.finditer(text):
            quoted, plain, separator = found.groups()
            fields.append(quoted.replace('""', '"') if quoted is not None else plain)
            if not separator:
                return fields
    position = 0  # find and name the fault
    length = len(text)
    while True:
        found = _FIELD.match(text, position)
        quoted = found.group(1)
        position = found.end()
        if position == length:
            raise ValueError("a field the CSV reader cannot split")  # not reached: the record matched
        if text[position] != ",":
            if quoted is not None:
                raise ValueError(f"text after a closing quote (character {position + 1})")
            if text[position] == "\r":
                raise ValueError(f"a carriage return inside an unquoted field (character {position + 1})")
            raise ValueError(f"a quote inside an unquoted field (character {position + 1})")
        position += 1


def read_table(
    path: str,
    types: Mapping[str, str],
    checks: Mapping[str, Callable[[Any], str | None]] | None = None,
    *,
    header_only: bool = False,
) -> tuple[Table, list[str]]:
    """Read a memlab CSV into a :class:`Table`; return it and the load warnings.

    ``types`` maps columns to their type (a column without one is guessed
    cell by cell); ``checks`` maps ``json`` columns to a function returning
    what is wrong with a decoded value (None when nothing is). Every error is
    a ValueError naming ``path``, the record (and line) and the column.
    ``header_only`` stops after the header (a table without rows).
    """
    warnings: list[str] = []
    checks = checks or {}
    header: list[str] | None = None
    columns: list[_Column] = []
    chunk: list[list[str]] = []
    where: list[tuple[int, int]] = []
    lines = array("q")

    def flush() -> None:
        for column, name, cells in zip(columns, header, zip(*chunk)):
            try:
                column.extend(cells)
            except CellError as error:
                number, line = where[getattr(error, "index", 0)]
                kind = column.kind if column.kind != "bigint" else "int"
                raise ValueError(f"{path}: record {number} (line {line}), column {name!r} ({kind}): "
                                 f"{error}") from None
        chunk.clear()
        where.clear()

    with open(path, "rb") as handle:
        number = 0
        for line, text in _records(handle, path, warnings):
            number += 1
            try:
                fields = _fields(text)
            except ValueError as error:
                raise ValueError(f"{path}: record {number} (line {line}): {error}") from None
            if header is None:
                header = _check_header(fields if text else [], path)
                columns = [_Column(types.get(name), checks.get(name)) for name in header]
                if header_only:
                    break
                continue
            if len(fields) != len(header):
                raise ValueError(f"{path}: record {number} (line {line}) has {len(fields)} fields, "
                                 f"the header has {len(header)}")
            chunk.append(fields)
            where.append((number, line))
            lines.append(line)
            if len(chunk) == _CHUNK_RECORDS:
                flush()
        if chunk:
            flush()
    if header is None:
        if not warnings:
            warnings.append(f"{path} is empty, not even a header line (memlab never writes such a file: "
                            "it was cut, as after a crash)")
        return Table([], []), warnings
    table = Table(header, columns, lines)
    lengths = {len(column.values) for column in columns}
    if len(lengths) > 1:  # a cell error cannot leave this, but be certain
        shortest = min(lengths)
        for column in columns:
            column.truncate(shortest)
        table.length = shortest
    return table, warnings


def _check_header(fields: list[str], path: str) -> list[str]:
    seen: dict[str, int] = {}
    for position, name in enumerate(fields, start=1):
        if name == "":
            raise ValueError(f"{path}: column {position} of the header has no name")
        if name in seen:
            raise ValueError(f"{path}: the header names column {name!r} twice (columns {seen[name]} "
                             f"and {position}); which one holds its values is unknowable")
        seen[name] = position
    return list(fields)
