"""How memlab writes a value for a reader: sizes, numbers, parameters, metric names.

The one place values are formatted for people (figures, the HTML report,
``memlab compare``'s table, ``memlab info``, the chase cache-level table);
the dataset files never go through it.

>>> format_bytes(48 << 10), format_param("working_set_bytes", 1 << 20), metric_label("ns_per_element")
('48 KiB', '1 MiB', 'ns per element')
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Iterable

__all__ = [
    "format_bytes",
    "format_duration",
    "format_number",
    "format_quantity",
    "column_unit",
    "format_param",
    "format_plain",
    "is_bytes_name",
    "is_missing",
    "metric_label",
    "suggest",
    "unit_of",
]

_BINARY_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def is_missing(value: Any) -> bool:
    """None or NaN: a cell without a value.

    >>> is_missing(None), is_missing(float("nan")), is_missing(0)
    (True, True, False)
    """
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_bytes_name(name: str) -> bool:
    """Whether a column named ``name`` holds a size in bytes (its name ends in ``_bytes``).

    >>> is_bytes_name("working_set_bytes"), is_bytes_name("npad")
    (True, False)
    """
    return name.endswith("_bytes")


def format_bytes(size: float) -> str:
    """A size in bytes with a binary unit: ``32 KiB``, ``1.5 MiB``, ``100 B``.

    >>> format_bytes(3 << 19), format_bytes(100)
    ('1.5 MiB', '100 B')
    """
    for unit, scale in _BINARY_UNITS:
        if size >= scale:
            scaled = size / scale
            return f"{scaled:.0f} {unit}" if scaled == int(scaled) else f"{scaled:.3g} {unit}"
    return f"{size:.0f} B"


def format_param(name: str, value: Any, missing: str = "-") -> str:
    """A parameter's value for a label: sizes in binary units, booleans as yes/no.

    >>> format_param("region_bytes", 64 << 20), format_param("atomic", True), format_param("n", 0.5)
    ('64 MiB', 'yes', '0.5')
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_missing(value):
        return missing
    if isinstance(value, int) and is_bytes_name(name) and value >= 1024:
        return format_bytes(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_number(value: Any, pattern: str | None = None, missing: str = "-") -> str:
    """A measured number for a person: four significant digits, one notation everywhere.

    Numbers of 1000 and more are written whole with thousands separators,
    smaller ones with four significant digits and no exponent (0.001676 and
    0.0007274 side by side, never 7.274e-04), below 1e-6 with an exponent;
    integers as they are; lists or dicts (raw samples) as an ellipsis. With
    ``pattern`` (``"{:.3f}"``) the value is formatted by it instead.

    >>> format_number(12345), format_number(2132.8), format_number(827.34), format_number(0.0007274)
    ('12,345', '2,133', '827.3', '0.0007274')
    >>> format_number(0.001676), format_number(2 / 3), format_number(None), format_number(3e-9)
    ('0.001676', '0.6667', '-', '3.000e-09')
    >>> format_number(1.25, "{:.1f}", missing="n/a"), format_number(float("nan"), "{:.1f}", missing="n/a")
    ('1.2', 'n/a')
    """
    if is_missing(value):
        return missing
    if pattern is not None:
        return pattern.format(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        magnitude = abs(value)
        if magnitude == 0:
            return "0"
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude < 1e-6:
            return f"{value:.3e}"
        decimals = max(0, 3 - math.floor(math.log10(magnitude)))
        return f"{value:.{decimals}f}"
    if isinstance(value, (list, dict)):
        return "…"
    return str(value)


_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def format_quantity(value: Any, name: str, missing: str = "-") -> str:
    """A value of the column ``name`` with its unit: times in ns scaled to a readable unit
    (the column's header says per what), sizes in binary units, other units from the name,
    four significant digits.

    >>> format_quantity(827.34, "ns_per_round_trip"), format_quantity(40213.0, "ns_per_round_trip")
    ('827.3 ns', '40.21 µs')
    >>> format_quantity(2132.8, "loops_per_s"), format_quantity(3.342, "core_GHz"), format_quantity(0.5, "ratio")
    ('2,133 loops per s', '3.342 GHz', '0.5000')
    """
    if is_missing(value):
        return missing
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if name.startswith("ns_per_") or name.endswith("_ns") or name == "ns":
            for unit, scale in _TIME_UNITS:
                if abs(value) >= scale or unit == "ns":
                    return f"{format_number(float(value) / scale)} {unit}"
        if is_bytes_name(name) and isinstance(value, int):
            return format_bytes(value)
    unit = unit_of(name)
    text = format_number(float(value) if isinstance(value, int) and not isinstance(value, bool) and unit
                         else value, missing=missing)
    return f"{text} {unit}" if unit else text


def format_plain(value: Any) -> str:
    """A value as text, a whole float without its ``.0`` (a CSV read without types gives 4096.0).

    >>> format_plain(4096.0), format_plain("random"), format_plain(0.5)
    ('4096', 'random', '0.5')
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def metric_label(name: str) -> str:
    """A column name as axis text: ``ns_per_element`` -> ``ns per element``.

    >>> metric_label("GiB_per_s")
    'GiB per s'
    """
    return name.replace("_per_", " per ").replace("_", " ")


def suggest(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the known names closest to ``name`` ("" when none is close).

    The hint an error message about an unknown name ends with.

    >>> suggest("working_set", ["working_set_bytes", "npad"]), suggest("zzz", ["npad"])
    ("; did you mean 'working_set_bytes'?", '')
    """
    known = [str(k) for k in known]
    close = difflib.get_close_matches(str(name), known, n=2, cutoff=0.6)
    if not close:
        lowered = str(name).lower()
        close = [k for k in known if lowered and (k.lower().startswith(lowered) or lowered in k.lower())][:2]
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


#: Unit suffixes of parameter and metric names (docs/dataset.md: names carry units).
_NAME_UNITS = (
    ("_bytes", "bytes"), ("_size", "bytes"), ("_ns", "ns"), ("_us", "µs"), ("_ms", "ms"), ("_s", "s"),
    ("_GHz", "GHz"), ("_cycles", "cycles"), ("_pages", "pages"), ("_longs", "longs"),
    ("_KiB", "KiB"), ("_per_s", "per s"),
)


def unit_of(name: str) -> str:
    """The unit a parameter's or metric's name carries ("" when it names none).

    >>> unit_of("working_set_bytes"), unit_of("budget_ns"), unit_of("pause_s"), unit_of("npad")
    ('bytes', 'ns', 's', '')
    >>> unit_of("ns_per_element"), unit_of("GiB_per_s")
    ('ns per element', 'GiB per s')
    """
    if name == "bytes":
        return "bytes"
    if "_per_" in name:
        return metric_label(name)
    for suffix, unit in _NAME_UNITS:
        if name.endswith(suffix):
            return unit
    return ""


def format_duration(seconds: float) -> str:
    """A duration for a person: ``0.4 s``, ``12 s``, ``3.5 min``, ``2.1 h``.

    >>> format_duration(0.42), format_duration(12.3), format_duration(210), format_duration(7600)
    ('0.4 s', '12 s', '3.5 min', '2.1 h')
    """
    if not math.isfinite(seconds):
        return "?"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def column_unit(name: str, values: Iterable[Any]) -> tuple[str, float]:
    """(header, factor) for a table column of ``name``: one unit for the whole column, times in
    ns scaled to the unit that suits the column's median, so every cell is ``value * factor``.

    >>> column_unit("ns_per_round_trip", [827.0, 40213.0, 52000.0])
    ('µs per round trip', 0.001)
    >>> column_unit("GiB_per_s", [1.0]), column_unit("ns_per_element", [1.2, 4.0])
    (('GiB per s', 1.0), ('ns per element', 1.0))
    """
    numbers = sorted(float(v) for v in values
                     if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
    label = metric_label(name)
    if numbers and (name.startswith("ns_per_") or name.endswith("_ns")):
        median = abs(numbers[len(numbers) // 2])
        for unit, scale in _TIME_UNITS:
            if median >= scale or unit == "ns":
                if name.startswith("ns_per_"):
                    return f"{unit} per {metric_label(name[len('ns_per_'):])}", 1.0 / scale
                return f"{metric_label(name[:-3])} ({unit})", 1.0 / scale
    return label, 1.0
