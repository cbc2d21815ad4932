"""Every family memlab knows, imported statically: the one list a new family joins.

A family module (``memlab/<family>.py``) defines ``FAMILY`` (a
:class:`memlab.family.Family`), or ``FAMILIES`` (a tuple of them) when one
experiment has several kernels, and ``run()``. To add a family, import its
module here and list it in :data:`MODULES`; the runner, the views, the tour
and the command line find it through this module and never change.

>>> family("calibrate").name
'calibrate'
"""

from __future__ import annotations

from types import ModuleType

from memlab import bandwidth, calibrate, chase, clear, core_to_core, loaded, matrix, pipe, region, share, system, tlb
from memlab.family import Family
from memlab.units import suggest

__all__ = ["FAMILY_MODULES", "MODULES", "all_families", "family", "family_module"]

#: Every family module, in the order listings, the tour and the report use.
MODULES: tuple[ModuleType, ...] = (
    calibrate,
    region,
    chase,
    pipe,
    clear,
    matrix,
    system,
    share,
    bandwidth,
    core_to_core,
    loaded,
    tlb,
)

#: The family modules' names (``memlab.<name>``).
FAMILY_MODULES: tuple[str, ...] = tuple(module.__name__.rpartition(".")[2] for module in MODULES)


def _module_families(module: ModuleType) -> tuple[Family, ...]:
    families = getattr(module, "FAMILIES", None)
    return tuple(families) if families else (module.FAMILY,)


def all_families() -> dict[str, Family]:
    """Every registered family by name, in registration order.

    >>> list(all_families())[:2]
    ['calibrate', 'region']
    """
    return {fam.name: fam for module in MODULES for fam in _module_families(module)}


def family(name: str) -> Family:
    """The :class:`Family` registered under name (ValueError if unknown).

    >>> family("region").unit
    'page'
    """
    families = all_families()
    if name not in families:
        raise ValueError(
            f"family={name!r} is not a memlab family{suggest(name, families)} (known: {', '.join(families)})"
        )
    return families[name]


def family_module(name: str) -> ModuleType:
    """The module that defines the family called name.

    >>> family_module("pipe_latency").__name__
    'memlab.pipe'
    """
    for module in MODULES:
        if any(fam.name == name for fam in _module_families(module)):
            return module
    raise ValueError(f"family={name!r} is not a memlab family")
