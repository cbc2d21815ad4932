"""The one place a Python family is registered: its module name here.

Each module defines ``FAMILY`` (a :class:`memlab.family.Family`), or
``FAMILIES`` (a tuple of them) when one experiment has several kernels, and
``run()``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from memlab.family import Family

FAMILY_MODULES: tuple[str, ...] = (
    "calibrate",
    "region",
    "chase",
    "pipe",
    "clear",
    "matrix",
    "system",
    "share",
    "bandwidth",
)

__all__ = ["FAMILY_MODULES", "family", "family_module", "all_families"]


def _module_families(module: ModuleType) -> tuple[Family, ...]:
    families = getattr(module, "FAMILIES", None)
    return tuple(families) if families else (module.FAMILY,)


def all_families() -> dict[str, Family]:
    """Every registered family by name, in registration order."""
    result: dict[str, Family] = {}
    for module_name in FAMILY_MODULES:
        for fam in _module_families(importlib.import_module(f"memlab.{module_name}")):
            result[fam.name] = fam
    return result


def family(name: str) -> Family:
    """The :class:`Family` registered under name (ValueError if unknown)."""
    families = all_families()
    if name not in families:
        raise ValueError(
            f"family={name!r} is not a memlab family (known: {', '.join(families)})"
        )
    return families[name]


def family_module(name: str) -> ModuleType:
    """The module that defines the family called name."""
    return importlib.import_module(_module_of(name))


def _module_of(name: str) -> str:
    for module_name in FAMILY_MODULES:
        module = importlib.import_module(f"memlab.{module_name}")
        if any(f.name == name for f in _module_families(module)):
            return module.__name__
    raise ValueError(f"family={name!r} is not a memlab family")
