"""The one place a Python family is registered: its module name here.

Each module defines ``FAMILY`` (a :class:`memlab.family.Family`) and ``run()``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from memlab.family import Family

FAMILY_MODULES: tuple[str, ...] = (
    "calibrate",
    "region",
    "pipe",
)

__all__ = ["FAMILY_MODULES", "family", "family_module", "all_families"]


def family_module(name: str) -> ModuleType:
    """The module ``memlab.<name>`` of a registered family (ValueError if unknown)."""
    if name not in FAMILY_MODULES:
        raise ValueError(
            f"family={name!r} is not a memlab family (known: {', '.join(FAMILY_MODULES)})"
        )
    return importlib.import_module(f"memlab.{name}")


def family(name: str) -> Family:
    """The :class:`Family` registered under name."""
    return family_module(name).FAMILY


def all_families() -> dict[str, Family]:
    """Every registered family, in registration order."""
    return {name: family(name) for name in FAMILY_MODULES}
