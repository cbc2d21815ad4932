"""What this machine's cores can do: the microarchitecture facts the sources' effects depend on.

:data:`MICROARCHITECTURES` is one small table, keyed by CPU vendor, family and
model ranges (as ``/proc/cpuinfo`` gives them and :func:`memlab.machine.collect`
records them: ``cpu_vendor``, ``cpu_family``, ``cpu_model_number``), of what a
memory benchmark's results rest on: how many bytes per cycle the L1d can load
and store, how wide the vector units execute, whether the L3 is a victim
cache and which cores share it, SMT and the known hardware prefetchers.
:func:`core_model` finds a machine's entry; a CPU the table does not list
gets a :class:`CoreModel` whose every field reads ``"unknown"``, never a
guess from a neighbouring model.

The facts come from the vendors' optimisation manuals (AMD's *Software
Optimization Guide* for families 17h, 19h and 1Ah; Intel's *64 and IA-32
Architectures Optimization Reference Manual*), and the family/model ranges
from the Linux kernel (``arch/x86/kernel/cpu/amd.c``'s Zen generations,
``arch/x86/include/asm/intel-family.h``). Read by ``memlab info``, by
:mod:`memlab.reasons` (why a verdict differs from the source's), by
:mod:`memlab.bandwidth` (``fraction_of_port_limit`` of its rows) and
``experiments/bandwidth_vs_bare.py`` (the L1d plateau at every width).

>>> model = core_model({"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 17})
>>> model.name, model.l1d_bytes_per_cycle("write", 64)
('Zen 4', 32)
>>> core_model({"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 1}).name
'unknown'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "MICROARCHITECTURES",
    "UNKNOWN",
    "CoreModel",
    "Microarchitecture",
    "core_model",
    "format_model",
]

UNKNOWN = "unknown"

AMD = "AuthenticAMD"
INTEL = "GenuineIntel"

_AMD_17H = "AMD, Software Optimization Guide for AMD Family 17h Processors (pub. 55723)"
_AMD_19H = "AMD, Software Optimization Guide for AMD Family 19h Processors (pub. 56665)"
_AMD_1AH = "AMD, Software Optimization Guide for AMD Family 1Ah Processors (pub. 58455)"
_INTEL_ORM = "Intel, Intel 64 and IA-32 Architectures Optimization Reference Manual (248966)"

_ZEN_3_4_PREFETCHERS = ("L1 stream", "L1 stride", "L1 region", "L2 stream", "L2 up/down")
_INTEL_PREFETCHERS = ("L1 next-line (DCU)", "L1 IP stride", "L2 adjacent line (spatial)", "L2 streamer")


@dataclass(frozen=True)
class Microarchitecture:
    """One row of the table: a core design and the CPUs (vendor, family, model ranges) that have it.

    Loads and stores: ``vector_loads_per_cycle`` vector loads of up to ``native_vector_bits``
    each, at most ``load_bytes_per_cycle`` in all (likewise stores); a narrower vector moves
    ``ports x its bytes``, a wider one is split (:meth:`CoreModel.l1d_bytes_per_cycle`).
    ``vector_execution``: how the widest vectors run; ``l3``: ``victim`` (filled by the L2's
    evictions), ``inclusive`` or ``non-inclusive``; ``l3_shared_by``: the cores one L3 serves;
    ``smt_threads``: hardware threads a core supports (a machine may disable them);
    ``clear_skips_cache_beyond_llc``: rep stos over an extent larger than the last cache writes
    without allocating its lines in the cache (AMD Zen, as the huge-page clearing patch series
    states; None where no source says); ``integer_alus``: the integer ALUs a core issues simple
    adds to, so independent adds a cycle when one thread has the core (``reference``).
    """

    name: str
    vendor: str
    family: int
    models: tuple[tuple[int, int], ...]
    vector_loads_per_cycle: int
    load_bytes_per_cycle: int
    vector_stores_per_cycle: int
    store_bytes_per_cycle: int
    native_vector_bits: int
    vector_execution: str
    l3: str
    l3_shared_by: str
    smt_threads: int
    prefetchers: tuple[str, ...] | None
    reference: str
    clear_skips_cache_beyond_llc: bool | None = None
    integer_alus: int | None = None

    def matches(self, vendor: str, family: int, model: int) -> bool:
        return (vendor == self.vendor and family == self.family
                and any(low <= model <= high for low, high in self.models))


#: The table. Family/model ranges as the Linux kernel assigns them (Zen generations in
#: arch/x86/kernel/cpu/amd.c; Intel models in asm/intel-family.h); mobile Zen 5 (family 1Ah
#: models 20h-2Fh, 60h-7Fh), whose vector datapath differs from the desktop and server parts,
#: and Intel's hybrid parts (two core types in one package) are left out: unknown.
MICROARCHITECTURES: tuple[Microarchitecture, ...] = (
    Microarchitecture("Zen / Zen+", AMD, 0x17, ((0x00, 0x2F), (0x50, 0x5F)), 2, 32, 1, 16, 128,
                      "256-bit AVX as two 128-bit halves", "victim", "CCX (4 cores)", 2, None, _AMD_17H, True,
                      integer_alus=4),
    Microarchitecture("Zen 2", AMD, 0x17, ((0x30, 0x4F), (0x60, 0x7F), (0x90, 0x91), (0xA0, 0xAF)),
                      2, 64, 1, 32, 256, "256-bit native; no AVX-512", "victim", "CCX (4 cores)", 2, None,
                      _AMD_17H, True, integer_alus=4),
    Microarchitecture("Zen 3", AMD, 0x19, ((0x00, 0x0F), (0x20, 0x5F)), 2, 64, 1, 32, 256,
                      "256-bit native; no AVX-512", "victim", "CCD (8 cores)", 2, _ZEN_3_4_PREFETCHERS,
                      _AMD_19H, True, integer_alus=4),
    Microarchitecture("Zen 4", AMD, 0x19, ((0x10, 0x1F), (0x60, 0xAF)), 2, 64, 1, 32, 256,
                      "512-bit AVX-512 as two 256-bit halves", "victim", "CCD (8 cores)", 2,
                      _ZEN_3_4_PREFETCHERS, _AMD_19H, True, integer_alus=4),
    Microarchitecture("Zen 5", AMD, 0x1A, ((0x00, 0x1F), (0x40, 0x4F)), 2, 128, 2, 64, 512,
                      "512-bit native", "victim", "CCD (8 cores)", 2, None, _AMD_1AH, True, integer_alus=6),
    Microarchitecture("Skylake (client)", INTEL, 6, ((0x4E, 0x4E), (0x5E, 0x5E), (0x8E, 0x8E), (0x9E, 0x9E),
                                                     (0xA5, 0xA6)),
                      2, 64, 1, 32, 256, "256-bit native; no AVX-512", "inclusive", "package (ring)", 2,
                      _INTEL_PREFETCHERS, _INTEL_ORM, integer_alus=4),
    Microarchitecture("Skylake-SP / Cascade Lake", INTEL, 6, ((0x55, 0x55),), 2, 128, 1, 64, 512,
                      "512-bit native (port 0+1 fused, port 5 on two-FMA parts)", "non-inclusive",
                      "socket (mesh)", 2, _INTEL_PREFETCHERS, _INTEL_ORM, integer_alus=4),
    Microarchitecture("Golden Cove (Sapphire Rapids, Emerald Rapids)", INTEL, 6, ((0x8F, 0x8F), (0xCF, 0xCF)),
                      3, 128, 2, 64, 512, "512-bit native", "non-inclusive", "socket (mesh)", 2,
                      _INTEL_PREFETCHERS, _INTEL_ORM, integer_alus=5),
)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 0)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class CoreModel:
    """This machine's CPU identity and its microarchitecture's entry (None when the table has none).

    >>> CoreModel("GenuineIntel", 6, 1, None, None, None).field("l1d_store_bytes_per_cycle")
    'unknown'
    """

    vendor: str | None
    family: int | None
    model: int | None
    stepping: int | None
    microcode: str | None
    entry: Microarchitecture | None

    @property
    def known(self) -> bool:
        return self.entry is not None

    @property
    def name(self) -> str:
        return self.entry.name if self.entry else UNKNOWN

    def l1d_bytes_per_cycle(self, op: str, vector_bytes: int) -> int | None:
        """The L1d limit for ``op`` (read, write, copy: bytes copied) with vectors of
        ``vector_bytes``: min(the cap, ports x the vector), None when unknown.

        >>> zen4 = core_model({"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 17})
        >>> zen4.l1d_bytes_per_cycle("read", 16), zen4.l1d_bytes_per_cycle("copy", 64)
        (32, 32)
        """
        if op not in ("read", "write", "copy"):
            raise ValueError(f"op={op!r} is not one of 'read', 'write', 'copy'")
        if isinstance(vector_bytes, bool) or not isinstance(vector_bytes, int) or vector_bytes <= 0:
            raise ValueError(f"vector_bytes={vector_bytes!r} must be a positive number of bytes")
        if self.entry is None:
            return None
        entry = self.entry
        load = min(entry.load_bytes_per_cycle, entry.vector_loads_per_cycle * vector_bytes)
        store = min(entry.store_bytes_per_cycle, entry.vector_stores_per_cycle * vector_bytes)
        return {"read": load, "write": store, "copy": min(load, store)}[op]

    def field(self, name: str) -> Any:
        """One field of :meth:`fields` (``"unknown"`` where the table does not say)."""
        return self.fields()[name]

    def fields(self) -> dict[str, Any]:
        """The model as ``memlab info`` prints it: identity, then each fact or ``"unknown"``."""
        entry = self.entry
        result: dict[str, Any] = {
            "cpu_vendor": self.vendor or UNKNOWN,
            "cpu_family": UNKNOWN if self.family is None else f"{self.family} (0x{self.family:x})",
            "cpu_model_number": UNKNOWN if self.model is None else f"{self.model} (0x{self.model:x})",
            "cpu_stepping": UNKNOWN if self.stepping is None else self.stepping,
            "cpu_microcode": self.microcode or UNKNOWN,
            "microarchitecture": self.name,
        }
        if entry is None:
            for name in ("l1d_load_bytes_per_cycle", "l1d_store_bytes_per_cycle", "integer_alus", "vector_execution",
                         "l3", "l3_shared_by", "smt_threads_per_core", "prefetchers",
                         "clear_skips_cache_beyond_llc", "reference"):
                result[name] = UNKNOWN
            return result
        widest = entry.native_vector_bits // 8
        result.update({
            "l1d_load_bytes_per_cycle": self.l1d_bytes_per_cycle("read", widest),
            "l1d_store_bytes_per_cycle": self.l1d_bytes_per_cycle("write", widest),
            "integer_alus": UNKNOWN if entry.integer_alus is None else entry.integer_alus,
            "vector_execution": entry.vector_execution,
            "l3": entry.l3,
            "l3_shared_by": entry.l3_shared_by,
            "smt_threads_per_core": entry.smt_threads,
            "prefetchers": ", ".join(entry.prefetchers) if entry.prefetchers else UNKNOWN,
            "clear_skips_cache_beyond_llc": (UNKNOWN if entry.clear_skips_cache_beyond_llc is None
                                             else entry.clear_skips_cache_beyond_llc),
            "reference": entry.reference,
        })
        return result


def core_model(facts: Mapping[str, Any]) -> CoreModel:
    """The :class:`CoreModel` of a machine from its facts (``cpu_vendor``, ``cpu_family``,
    ``cpu_model_number``, ``cpu_stepping``, ``cpu_microcode``, as :func:`memlab.machine.collect`
    records them); a CPU the table does not list, or facts without them, give an unknown model.

    >>> core_model({}).name
    'unknown'
    """
    vendor = facts.get("cpu_vendor")
    vendor = str(vendor) if vendor else None
    family, model = _int(facts.get("cpu_family")), _int(facts.get("cpu_model_number"))
    microcode = facts.get("cpu_microcode")
    entry = None
    if vendor is not None and family is not None and model is not None:
        entry = next((e for e in MICROARCHITECTURES if e.matches(vendor, family, model)), None)
    return CoreModel(vendor, family, model, _int(facts.get("cpu_stepping")),
                     str(microcode) if microcode else None, entry)


def format_model(model: CoreModel) -> str:
    """The model's fields as ``memlab info`` lines (label, value).

    >>> print(format_model(core_model({})).splitlines()[0])
    cpu vendor        unknown
    """
    return "\n".join(f"{_LABELS.get(name, name):<17} {value}" for name, value in model.fields().items())


_LABELS = {
    "cpu_vendor": "cpu vendor",
    "cpu_family": "cpu family",
    "cpu_model_number": "cpu model",
    "cpu_stepping": "cpu stepping",
    "cpu_microcode": "microcode",
    "microarchitecture": "core design",
    "l1d_load_bytes_per_cycle": "L1d load B/cycle",
    "l1d_store_bytes_per_cycle": "L1d store B/cycle",
    "integer_alus": "integer ALUs",
    "vector_execution": "vectors",
    "l3": "L3 kind",
    "l3_shared_by": "L3 shared by",
    "smt_threads_per_core": "SMT (design)",
    "prefetchers": "prefetchers",
    "clear_skips_cache_beyond_llc": "big clears",
    "reference": "model source",
}
