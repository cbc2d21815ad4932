"""Every family memlab knows: its own, imported statically, then those of other packages and kernel files.

A family module (``memlab/<family>.py``) defines ``FAMILY`` (a
:class:`memlab.family.Family`), or ``FAMILIES`` (a tuple of them) when one
experiment has several kernels, and ``run()``. To add a family, import its
module here and list it in :data:`MODULES`; the runner, the views, the tour
and the command line find it through this module and never change.

Other packages add families through the entry-point group ``memlab.families``
(:data:`ENTRY_POINT_GROUP`): each entry point names a Family, a tuple of them,
or a function returning either; a family there must make the declarations
memlab's own make (:func:`check_declarations`), else it is left out with one
warning. A kernel file's family (memlab.userkernel) is entered with
:func:`register` for the life of the process.

>>> family("calibrate").name
'calibrate'
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import warnings
from types import ModuleType
from typing import Any

from memlab import bandwidth, calibrate, chase, clear, core_to_core, loaded, matrix, pipe, region, share, system, tlb
from memlab.family import Family, describe_params
from memlab.units import suggest

__all__ = ["ENTRY_POINT_GROUP", "FAMILY_MODULES", "MODULES", "PluginFamilyWarning", "all_families",
           "check_declarations", "family", "family_module", "origin", "plugin_families", "register"]

#: The entry-point group through which other packages add families.
ENTRY_POINT_GROUP = "memlab.families"

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


class PluginFamilyWarning(UserWarning):
    """A family of another package that memlab leaves out (it fails a declaration check or its entry
    point does not load)."""


#: Families entered with register(): kernel files (memlab.userkernel) and tests; name -> family.
_REGISTERED: dict[str, Family] = {}
#: The entry-point families, loaded once: name -> (family, "entry point NAME of DISTRIBUTION").
_PLUGINS: dict[str, tuple[Family, str]] | None = None


def _builtin() -> dict[str, Family]:
    return {fam.name: fam for module in MODULES for fam in _module_families(module)}


def check_declarations(fam: Any) -> list[str]:
    """What a family lacks of the declarations memlab's own families make: a params dataclass whose
    every parameter has a type, a default, a help line and (numbers) a range or (words) choices; a
    primary metric; a figure (or a headline or table); a ``quick`` sweep. Empty when complete
    (memlab's own families leave some help to their docs pages; another package's may not).

    >>> check_declarations(family("calibrate"))
    []
    >>> check_declarations(family("region"))[0]
    "parameter region_bytes has no help (a 'region_bytes: ...' line in the params docstring)"
    """
    if not isinstance(fam, Family):
        return [f"{fam!r} is not a memlab.family.Family"]
    missing = []
    if not dataclasses.is_dataclass(fam.params_type):
        return [f"params_type {fam.params_type!r} is not a dataclass"]
    try:
        specs = {spec.name: spec for spec in describe_params(fam.params_type)}
    except Exception as error:  # a params class that cannot be built with its defaults
        return [f"its params cannot be built with their defaults ({error})"]
    for f in dataclasses.fields(fam.params_type):
        spec = specs.get(f.name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f"parameter {f.name} has no default")
        if spec is None or not spec.help:
            missing.append(f"parameter {f.name} has no help (a '{f.name}: ...' line in the params docstring)")
        elif spec.type in ("int", "float", "str") and not spec.allowed:
            missing.append(f"parameter {f.name} has no range or choices (check_int/check_number/check_choice "
                           f"in __post_init__)")
    if not fam.primary_metric:
        missing.append("no primary_metric")
    if fam.figure is None and fam.headline is None and fam.table is None:
        missing.append("no figure (nor headline or table)")
    if "quick" not in fam.sweeps:
        missing.append("no 'quick' sweep")
    return missing


def _entry_point_families(entry: Any) -> tuple[Family, ...]:
    loaded = entry.load()
    if callable(loaded) and not isinstance(loaded, Family):
        loaded = loaded()
    return (loaded,) if isinstance(loaded, Family) else tuple(loaded)


def plugin_families(reload: bool = False) -> dict[str, tuple[Family, str]]:
    """The families of other packages (:data:`ENTRY_POINT_GROUP`), each with where it comes from;
    one :class:`PluginFamilyWarning` per entry point left out, naming what it lacks."""
    global _PLUGINS
    if _PLUGINS is not None and not reload:
        return _PLUGINS
    found: dict[str, tuple[Family, str]] = {}
    builtin = _builtin()
    _PLUGINS = found  # a plugin's loader may register a kernel file (register() asks again meanwhile)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(entry, "dist", None), "name", None) or "?"
        where = f"entry point {entry.name} of {dist}"
        try:
            families = _entry_point_families(entry)
        except Exception as error:
            warnings.warn(f"memlab: {where} ({entry.value}) does not load: {type(error).__name__}: {error}",
                          PluginFamilyWarning, stacklevel=2)
            continue
        for fam in families:
            name = getattr(fam, "name", repr(fam))
            missing = check_declarations(fam)
            if not missing and (name in builtin or name in found):
                missing = [f"its name {name!r} is taken by {'memlab' if name in builtin else found[name][1]}"]
            if missing:
                warnings.warn(f"memlab: family {name!r} of {where} is left out: " + "; ".join(missing),
                              PluginFamilyWarning, stacklevel=2)
                continue
            found[name] = (fam, where)
    _PLUGINS = found
    return found


def register(fam: Family, *, replace: bool = False) -> Family:
    """Enter ``fam`` as a family for the life of the process (a kernel file's, memlab.userkernel);
    ``replace`` lets it take the place of a registered family of its name (a newer build of the file).
    ValueError for the name of one of memlab's own families, or a registered one without ``replace``.
    """
    if fam.name in _builtin() or fam.name in plugin_families():
        raise ValueError(f"family {fam.name!r} is already a family of "
                         f"{'memlab' if fam.name in _builtin() else plugin_families()[fam.name][1]}: rename it")
    if fam.name in _REGISTERED and not replace and _REGISTERED[fam.name] is not fam:
        raise ValueError(f"family {fam.name!r} is already registered")
    _REGISTERED[fam.name] = fam
    return fam


def origin(name: str) -> str:
    """Where the family called name comes from: ``memlab``, an entry point, or ``registered``.

    >>> origin("chase")
    'memlab'
    """
    if name in _builtin():
        return "memlab"
    if name in plugin_families():
        return plugin_families()[name][1]
    if name in _REGISTERED:
        return "registered"
    raise ValueError(f"family={name!r} is not a memlab family")


def all_families() -> dict[str, Family]:
    """Every family by name: memlab's own in registration order, then other packages', then those
    registered in this process (kernel files).

    >>> list(all_families())[:2]
    ['calibrate', 'region']
    """
    return {**_builtin(), **{name: fam for name, (fam, _) in plugin_families().items()}, **_REGISTERED}


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
    raise ValueError(f"family={name!r} is not a memlab family" +
                     (" module (it comes from another package or a kernel file)" if name in all_families() else ""))
