"""How memlab writes a value for a reader: sizes, numbers, parameters, metric names.

The one place values are formatted for people (figures, the HTML report,
``memlab compare``'s table, ``memlab info``, the chase cache-level table);
the dataset files never go through it.

>>> format_bytes(48 << 10), format_param("working_set_bytes", 1 << 20), metric_label("ns_per_element")
('48 KiB', '1 MiB', 'ns per element')
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "format_bytes",
    "format_number",
    "format_param",
    "format_plain",
    "is_bytes_name",
    "is_missing",
    "metric_label",
]

_BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


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
    """A measured number for a table cell.

    With ``pattern`` (``"{:.3f}"``) the value is formatted by it; otherwise
    large or tiny floats get an exponent, others four significant digits,
    integers of five digits and more thousands separators, and lists or
    dicts (raw samples) an ellipsis.

    >>> format_number(12345), format_number(0.000012), format_number(2 / 3), format_number(None)
    ('12,345', '1.200e-05', '0.6667', '-')
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
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return "…"
    return str(value)


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
