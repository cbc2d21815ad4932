"""Matrix multiply and matrix initialisation (Drepper sections 6.1, 6.2.1, 9.1).

``multiply(n, variant)`` times c = a * b on N x N float64 matrices:

* ``naive``      i-j-k as printed in section 6.2.1;
* ``transposed`` the second matrix transposed first (timed, and reported
  alone as ``transpose_seconds``), then i-j-k over two sequential walks;
* ``tiled``      Drepper's sub-matrix blocking with tile ``tile`` (default:
  cache line / sizeof(double), read from the machine);
* ``tiled_sse2`` the source's own vectorised sub-matrix program (its SSE2
  listing in section 9.1): the tiled loops with the innermost one on 16-byte
  vectors (``_mm_load_sd`` + ``_mm_unpacklo_pd``, ``_mm_mul_pd``,
  ``_mm_add_pd``, a non-temporal prefetch per row); table 6.2's "vectorised"
  line (9.47% of naive), refused where SSE2 is missing or hidden;
* ``tiled_simd`` what memlab adds beyond the source: packed sub-matrix panels
  (depth ``tile``) and a register-blocked micro-kernel written with
  intrinsics for the widest ISA the CPU has (AVX-512F, AVX2+FMA, SSE2),
  chosen at run time, with a portable C fallback (``isa="scalar"``);
* ``blas``       ``numpy.matmul`` on the same matrices, timed in Python with
  numpy's BLAS limited to one thread, as the ceiling.

The reference kernels (naive, transposed, tiled, tiled_sse2 and init with
normal stores) are compiled with auto-vectorisation and loop interchange off
(tiled_sse2 also without contracting its multiply and add into an FMA)
(:func:`reference_flags`), so each is the algorithm it is named after; the
flags are in every result (``context_kernel_flags``).  Every product is
checked against numpy after every sample (``max_abs_error``).

``init(n, order, stores)`` writes an N x N int32 matrix row- or column-wise
with normal or non-temporal stores (table 6.1); element (i, j) gets the value
i*n + j wrapped to 32 bits, checked after every sample (``wrong_elements``).

Single-threaded BLAS: threadpoolctl when it is installed, otherwise the
OpenBLAS ``*_set_num_threads`` function found in the loaded library through
ctypes (numpy's own OpenBLAS); the thread count used is recorded as the
metric ``blas_threads`` and the method as ``context_blas_thread_limit``.
When neither works (another BLAS), ``blas_threads`` is NaN unless
OPENBLAS_NUM_THREADS/OMP_NUM_THREADS/MKL_NUM_THREADS=1 was set before numpy
was imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from memlab import chart, machine, machine_model
from memlab._core import Kernel, build_info, cpu_features
from memlab._core import families as core_families
from memlab.files import atomic_write
from memlab.files import cache_directory as files_cache_directory
from memlab.dataset import Dataset
from memlab.family import Family, check_choice, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement, measure
from memlab.units import metric_label

__all__ = [
    "BLOCK_CHOICES",
    "REGISTER_BLOCKS",
    "blas_facts",
    "cache_directory",
    "cpu_vector_facts",
    "model_blocks",
    "search_blocks",
    "search_candidates",
    "supported_isas",
    "tuned_blocks",
    "vector_execution_bits",
    "FAMILY",
    "INIT_FAMILY",
    "ISAS",
    "InitParams",
    "MultiplyParams",
    "ORDERS",
    "REFERENCE_FLAGS",
    "reference_flags",
    "STORES",
    "SOURCE_PERCENT_OF_NAIVE",
    "VARIANTS",
    "cache_line_bytes",
    "default_tile",
    "expected_init",
    "figure",
    "init",
    "init_figure",
    "multiply",
    "percent_of_naive",
    "run",
    "single_thread_blas",
    "table_6_1_sweep",
    "table_6_2_sweep",
]

VARIANTS = ("naive", "transposed", "tiled", "tiled_sse2", "tiled_simd", "blas")
C_VARIANTS = ("naive", "transposed", "tiled", "tiled_sse2", "tiled_simd")
#: Table 6.2 of the source: time as a percentage of the naive loop (Intel Core 2, N = 1000).
SOURCE_PERCENT_OF_NAIVE = {"naive": 100.0, "transposed": 23.4, "tiled": 17.3, "tiled_sse2": 9.47}
ISAS = ("auto", "avx512", "avx2", "sse2", "scalar")
ORDERS = ("row", "column")
STORES = ("normal", "nontemporal")
MAX_N = 1 << 20


@functools.cache
def reference_flags() -> str:
    """How csrc/matrix.c keeps its reference kernels scalar and in loop order.

    gcc: per-function optimize flags; clang: loop pragmas; as the C core
    reports it (asked at first use, not at import).

    >>> "vectorize" in reference_flags()
    True
    """
    return core_families()["matrix"]["description"].split("built with ", 1)[1]


def __getattr__(name: str) -> str:
    # REFERENCE_FLAGS stays importable for existing code, computed at first use.
    if name == "REFERENCE_FLAGS":
        return reference_flags()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
#: Rows of the product recomputed at once by the numpy check (bounds its memory).
_CHECK_CHUNK_BYTES = 1 << 20


def cache_line_bytes() -> int:
    """The L1 data cache line size in bytes (sysconf, then sysfs, else 64).

    >>> cache_line_bytes() in (32, 64, 128, 256)
    True
    """
    try:
        value = os.sysconf("SC_LEVEL1_DCACHE_LINESIZE")
    except (ValueError, OSError):
        value = 0
    if value and value > 0:
        return int(value)
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return 64


def default_tile(variant: str) -> int | None:
    """The tile used when none is given, in elements (None: the variant has none, or
    chooses it per machine).

    ``tiled`` and ``tiled_sse2``: cache line / sizeof(double) (Drepper's SM);
    ``tiled_simd`` chooses the depth of its packed panels with its other blocks
    (:func:`tuned_blocks`), so None.

    >>> default_tile("tiled") == cache_line_bytes() // 8
    True
    """
    check_choice("variant", variant, VARIANTS)
    if variant in ("tiled", "tiled_sse2"):
        return max(1, cache_line_bytes() // 8)
    return None


#: Every register block name of any ISA (see REGISTER_BLOCKS below).
_ALL_REGISTER_BLOCKS = ("12x16", "14x16", "8x24", "6x32", "6x8", "4x12", "6x4", "4x6", "4x4")


@dataclass(frozen=True)
class MultiplyParams:
    """One product c = a * b of N x N float64 matrices.

    ``tile`` (elements) is used by ``tiled`` and ``tiled_sse2`` (sub-matrix
    edge) and ``tiled_simd`` (panel depth); None picks :func:`default_tile`, and the
    other variants ignore it.  ``isa`` forces the micro-kernel of
    ``tiled_simd``; ``register_block`` (one of the ISA's
    :data:`REGISTER_BLOCKS`), ``block_rows`` and ``block_cols`` (the packed
    row and column blocks, elements) force its blocks; what is not given is
    chosen per machine as ``blocks`` says (:data:`BLOCK_CHOICES`:
    :func:`tuned_blocks` or :func:`model_blocks`). ``seed`` draws the inputs
    (uniform in [-1, 1)).
    """

    n: int = 1000
    variant: str = "tiled"
    tile: int | None = None
    isa: str = "auto"
    seed: int = 0
    register_block: str | None = None
    block_rows: int | None = None
    block_cols: int | None = None
    blocks: str = "tuned"

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("n", self.n, 1, MAX_N)
        check_choice("variant", self.variant, VARIANTS)
        if self.tile is None:
            object.__setattr__(self, "tile", default_tile(self.variant))
        else:
            object.__setattr__(self, "tile", check_int("tile", self.tile, 1, MAX_N))
        check_choice("isa", self.isa, ISAS)
        check_int("seed", self.seed, 0)
        if self.register_block is not None:
            allowed = _ALL_REGISTER_BLOCKS if self.isa == "auto" else REGISTER_BLOCKS[self.isa]
            check_choice("register_block", self.register_block, allowed)
        for name in ("block_rows", "block_cols"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(name, getattr(self, name), 1, MAX_N))
        check_choice("blocks", self.blocks, BLOCK_CHOICES)


@dataclass(frozen=True)
class InitParams:
    """An N x N int32 matrix written ``order``-wise with ``stores`` stores."""

    n: int = 3000
    order: str = "row"
    stores: str = "normal"

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("n", self.n, 1, MAX_N)
        check_choice("order", self.order, ORDERS)
        check_choice("stores", self.stores, STORES)


# ---- memory ---------------------------------------------------------------


def _memory_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def _check_memory(needed_bytes: int, what: str) -> None:
    """MemoryError before allocating when ``needed_bytes`` exceed MemAvailable."""
    available = _memory_available_bytes()
    if available is not None and needed_bytes > available:
        raise MemoryError(
            f"{what} need {needed_bytes} bytes, more than the {available} bytes available"
        )


# ---- operands --------------------------------------------------------------


def _check_operand(name: str, array: Any, n: int, writable: bool = False) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{name} must be a numpy.ndarray (got {type(array).__name__})")
    if array.dtype != np.float64:
        raise ValueError(
            f"{name} has dtype {array.dtype}; float64 is required "
            f"(convert with numpy.asarray({name}, dtype=numpy.float64))"
        )
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise ValueError(f"{name} has shape {array.shape}; a square n x n matrix is required")
    if array.shape[0] != n:
        raise ValueError(f"{name} has shape {array.shape} but n={n}")
    if not array.flags.c_contiguous:
        raise ValueError(
            f"{name} is not C-contiguous; pass numpy.ascontiguousarray({name}) instead"
        )
    if writable and not array.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return array


def _operands(params: MultiplyParams, a: Any, b: Any, out: Any) -> tuple[np.ndarray, ...]:
    """The inputs (given or drawn from params.seed) and the output matrix."""
    n = params.n
    if (a is None) != (b is None):
        raise ValueError("a and b must be given together (or neither, to draw them from seed)")
    if a is not None:
        a = _check_operand("a", a, n)
        b = _check_operand("b", b, n)
    if out is not None:
        out = _check_operand("out", out, n, writable=True)
        for name, other in (("a", a), ("b", b)):
            if other is not None and np.shares_memory(out, other):
                raise ValueError(f"out overlaps {name}; the product needs its own memory")
    matrix_bytes = n * n * 8
    fresh = (2 if a is None else 0) + (1 if out is None else 0)
    temporary = 1 if params.variant == "transposed" else 0
    _check_memory(
        (fresh + temporary) * matrix_bytes,
        f"n={n}: {fresh} new and {temporary} temporary {n}x{n} float64 matrices",
    )
    if a is None:
        rng = np.random.default_rng(params.seed)
        a = rng.uniform(-1.0, 1.0, size=(n, n))
        b = rng.uniform(-1.0, 1.0, size=(n, n))
    if out is None:
        out = np.zeros((n, n))
    return a, b, out


def _max_abs_error(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """max |c - a @ b|, computed by numpy in row blocks (no N x N temporary)."""
    n = a.shape[0]
    rows = max(1, _CHECK_CHUNK_BYTES // (8 * n))
    worst = 0.0
    for start in range(0, n, rows):
        block = np.matmul(a[start : start + rows], b)
        block -= c[start : start + rows]
        worst = max(worst, float(np.max(np.abs(block, out=block))))
    return worst


# ---- tiled_simd's blocks: chosen per machine ------------------------------------

#: The register blocks (rows x cols of C held in registers) of each ISA's
#: micro-kernels in csrc/matrix.c, its default first.
REGISTER_BLOCKS = {
    "avx512": ("12x16", "14x16", "8x24", "6x32"),
    "avx2": ("6x8", "4x12"),
    "sse2": ("6x4", "4x6", "4x4"),
    "scalar": ("4x4",),
}
ISA_BITS = {"avx512": 512, "avx2": 256, "sse2": 128, "scalar": 64}
#: How tiled_simd's blocks are chosen when not given: ``tuned`` (the fastest of
#: a short measured search, cached per machine) or ``model`` (from the cache
#: sizes alone, no search).
BLOCK_CHOICES = ("tuned", "model")
#: Where the searched blocks are cached (else $XDG_CACHE_HOME/memlab, else ~/.cache/memlab).
BLOCKS_CACHE_FILE = "matrix_blocks.json"
#: The search's matrix size, rounds and time per candidate and round.
SEARCH_N = 1024
SEARCH_ROUNDS = 3
SEARCH_SECONDS = 0.03
_MAX_DEPTH = 1024
def cpu_vector_facts(root: str = "/") -> dict[str, Any]:
    """Vendor, family, model and SIMD flags of this machine's CPU (of the tree at ``root``), as
    :func:`memlab.machine.collect_cpu` reads them: the CPU facts tiled_simd chooses by.

    >>> sorted(cpu_vector_facts())
    ['family', 'flags', 'model', 'vendor']
    """
    facts: dict[str, Any] = {}
    machine.collect_cpu(facts, root)
    flags = facts.get("cpu_flags_simd", [])
    return {"vendor": facts.get("cpu_vendor", ""), "family": facts.get("cpu_family"),
            "model": facts.get("cpu_model_number"),
            "flags": [flag for flag in ("sse2", "avx2", "fma", "avx512f") if flag in flags]}


def vector_execution_bits(facts: Mapping[str, Any] | None = None) -> int | None:
    """How wide the CPU executes its widest vector FMA, in bits (None: no x86 SIMD flags).

    The widest the ISA offers (``avx512f`` 512, ``avx2`` with ``fma`` 256, ``sse2`` 128),
    narrowed to what the core executes at once where the machine model
    (:mod:`memlab.machine_model`) knows the core: Zen 4 runs a 512-bit FMA as two
    256-bit halves. ``facts`` as :func:`cpu_vector_facts`.

    >>> vector_execution_bits({"vendor": "AuthenticAMD", "family": 25, "model": 17, "flags": ["avx2", "fma", "avx512f"]})
    256
    >>> vector_execution_bits({"vendor": "GenuineIntel", "family": 6, "model": 143, "flags": ["avx2", "fma", "avx512f"]})
    512
    """
    facts = cpu_vector_facts() if facts is None else facts
    flags = set(facts.get("flags", ()))
    isa_bits = 512 if "avx512f" in flags else 256 if {"avx2", "fma"} <= flags else 128 if "sse2" in flags else None
    core = machine_model.core_model({"cpu_vendor": facts.get("vendor"), "cpu_family": facts.get("family"),
                                     "cpu_model_number": facts.get("model")})
    if isa_bits is None or not core.known:
        return isa_bits
    return min(isa_bits, core.entry.native_vector_bits)


@functools.cache
def supported_isas() -> tuple[str, ...]:
    """The ISAs of tiled_simd this CPU runs, widest first, as the C core sees them
    (MEMLAB_HIDE_CPU_FEATURES hides some).

    >>> supported_isas()[-1]
    'scalar'
    """
    features = cpu_features()
    isas = []
    if features.get("avx512f") and features.get("avx2"):
        isas.append("avx512")
    if features.get("avx2"):
        isas.append("avx2")
    if features.get("sse2"):
        isas.append("sse2")
    return (*isas, "scalar")


def _block_shape(register_block: str) -> tuple[int, int]:
    rows, cols = register_block.split("x")
    return int(rows), int(cols)


def _round_down(value: float, step: int, minimum: int) -> int:
    return max(minimum, int(value) // step * step)


def model_blocks(isa: str, register_block: str | None = None, depth: int | None = None,
                 caches: Mapping[str, int] | None = None, l3_sharing: int | None = None) -> dict[str, Any]:
    """tiled_simd's blocks from the cache sizes alone.

    The depth kc lets one mr-row panel of a (kc x mr doubles) fill two
    thirds of L1d (a multiple of 64, 64 to 1024); the row block mc lets the
    packed block of a (mc x kc) fill a quarter of L2; the column block nc lets
    the packed block of b (kc x nc) fill half of this CPU's share of L3
    (at most 8 MiB). ``caches`` as :func:`memlab.machine.cache_sizes` (this
    machine's by default; 32 KiB, 256 KiB, 8 MiB stand in for what is missing).

    >>> model_blocks("avx512", "8x24", caches={"L1d": 49152, "L2": 1 << 20, "L3": 32 << 20}, l3_sharing=2)
    {'isa': 'avx512', 'register_block': '8x24', 'block_depth': 512, 'block_rows': 64, 'block_cols': 2040}
    """
    check_choice("isa", isa, tuple(REGISTER_BLOCKS))
    register_block = REGISTER_BLOCKS[isa][0] if register_block is None else check_choice(
        "register_block", register_block, REGISTER_BLOCKS[isa])
    if caches is None:
        caches = machine.cache_sizes()
    if l3_sharing is None:
        l3_sharing = _l3_sharing()
    mr, nr = _block_shape(register_block)
    l1 = caches.get("L1d", 32 << 10)
    l2 = caches.get("L2", 256 << 10)
    l3 = caches.get("L3", 8 << 20) / max(1, l3_sharing)
    kc = depth if depth is not None else min(_MAX_DEPTH, _round_down(l1 * 2 / 3 / (mr * 8), 64, 64))
    mc = _round_down(l2 / 4 / (kc * 8), mr, mr)
    nc = _round_down(min(l3 / 2, 8 << 20) / (kc * 8), nr, nr)
    return {"isa": isa, "register_block": register_block, "block_depth": kc, "block_rows": mc,
            "block_cols": nc}


def _l3_sharing() -> int:
    """How many of this machine's CPUs share CPU 0's last-level cache (1 when unknown)."""
    shared = [c for c in machine.caches_shared_by([0]) if c.get("level", 0) >= 3]
    cpus = machine.parse_cpu_list(shared[-1].get("shared_cpu_list")) if shared else None
    return len(cpus) if cpus else 1


def search_candidates(isas: Sequence[str], caches: Mapping[str, int] | None = None,
                      l3_sharing: int | None = None) -> list[dict[str, Any]]:
    """What :func:`search_blocks` measures: for every register block of each ISA,
    the model's blocks (:func:`model_blocks`), the same with three register
    rows per row block, and half the depth with three rows.

    >>> len(search_candidates(["avx2"], caches={"L1d": 32768, "L2": 1 << 20, "L3": 1 << 25}, l3_sharing=1))
    6
    """
    candidates = []
    for isa in isas:
        for block in REGISTER_BLOCKS[check_choice("isa", isa, tuple(REGISTER_BLOCKS))]:
            model = model_blocks(isa, block, caches=caches, l3_sharing=l3_sharing)
            mr = _block_shape(block)[0]
            half = model_blocks(isa, block, depth=max(64, model["block_depth"] // 2 // 64 * 64),
                                caches=caches, l3_sharing=l3_sharing)
            for candidate in (model, {**model, "block_rows": 3 * mr}, {**half, "block_rows": 3 * mr}):
                if candidate not in candidates:
                    candidates.append(candidate)
    return candidates


def _core_config(a: np.ndarray, b: np.ndarray, c: np.ndarray, blocks: Mapping[str, Any]) -> dict[str, Any]:
    return {"a": a, "b": b, "c": c, "n": a.shape[0], "variant": "tiled_simd",
            "tile": blocks["block_depth"], "isa": blocks["isa"], "block_rows": blocks["block_rows"],
            "block_cols": blocks["block_cols"], "register_block": blocks["register_block"]}


def search_blocks(isas: Sequence[str], n: int = SEARCH_N, rounds: int = SEARCH_ROUNDS,
                  seconds: float = SEARCH_SECONDS, candidates: Sequence[Mapping[str, Any]] | None = None
                  ) -> dict[str, Any]:
    """Measure tiled_simd's candidate blocks (:func:`search_candidates`) at N = n and return the fastest.

    The candidates take turns (``rounds`` interleaved rounds, each at least
    one product and ``seconds`` of products); each is scored by its median
    GFLOP per CPU-second, which a shared machine's preemption does not lower.
    The result is the winner's blocks with ``GFLOP_per_cpu_s``, ``runner_up``
    (the second best's blocks and rate), ``candidates``, ``search_n``,
    ``rounds``, ``load_average`` and ``searched_unix``.

    >>> best = search_blocks(["scalar"], n=16, rounds=1, seconds=0)
    >>> best["register_block"], best["candidates"]
    ('4x4', 3)
    """
    n = check_int("n", n, 1, 8192)
    rounds = check_int("rounds", rounds, 1, 100)
    if not 0 <= seconds <= 10:
        raise ValueError(f"seconds={seconds} is outside [0, 10]")
    candidates = [dict(c) for c in (search_candidates(isas) if candidates is None else candidates)]
    if not candidates:
        raise ValueError("no candidate blocks to search")
    _check_memory(3 * n * n * 8, f"the block search at n={n}: three {n}x{n} float64 matrices")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1.0, 1.0, size=(n, n)), rng.uniform(-1.0, 1.0, size=(n, n))
    c = np.zeros((n, n))
    rates: list[list[float]] = [[] for _ in candidates]
    for _ in range(rounds):
        for index, blocks in enumerate(candidates):
            with Kernel("matrix", _core_config(a, b, c, blocks)) as kernel:
                metrics = kernel.measure(target_ns=int(seconds * 1e9), counters=False)["metrics"]
            fraction = metrics.get("cpu_fraction", 0.0)
            rates[index].append(metrics["GFLOP_per_s"] / fraction if fraction > 0 else metrics["GFLOP_per_s"])
    medians = [float(np.median(r)) for r in rates]
    order = sorted(range(len(candidates)), key=lambda i: -medians[i])
    best = dict(candidates[order[0]])
    best["GFLOP_per_cpu_s"] = round(medians[order[0]], 2)
    if len(order) > 1:
        best["runner_up"] = {**candidates[order[1]], "GFLOP_per_cpu_s": round(medians[order[1]], 2)}
    best.update({"candidates": len(candidates), "search_n": n, "rounds": rounds,
                 "load_average": _load_average(), "searched_unix": round(time.time(), 1)})
    return best


def _load_average() -> str:
    try:
        with open("/proc/loadavg") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return ""


def cache_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where memlab caches what it measured about this machine (:func:`memlab.files.cache_directory`).

    >>> str(cache_directory({"MEMLAB_CACHE_DIR": "/tmp/x"}))
    '/tmp/x'
    """
    return files_cache_directory(environ)


def _search_key(isas: Sequence[str]) -> str:
    """The cache entry's key: this machine's fingerprint id, the core's build, the ISAs searched."""
    facts: dict[str, Any] = {}
    machine.collect_cpu(facts)
    machine.collect_kernel(facts)
    machine.collect_meminfo(facts)
    info = build_info()
    return f"{machine.fingerprint_id(machine.fingerprint(facts))} {info['compiler']} {info['cflags']} {'+'.join(isas)}"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def tuned_blocks(isa: str = "auto", search: bool = True) -> dict[str, Any]:
    """tiled_simd's blocks for ``isa`` on this machine, and how they were chosen (``choice``).

    ``choice`` is ``cached`` (an earlier search's result for this machine's
    fingerprint, core build and ISAs, from :func:`cache_directory`),
    ``searched`` (:func:`search_blocks` ran now and its result was cached) or
    ``model`` (``search=False`` and nothing cached: :func:`model_blocks` of
    the ISA's default register block). ``isa="auto"`` searches the widest ISA
    the CPU runs and, when the CPU executes that ISA's vectors at a narrower
    width (:func:`vector_execution_bits`), the next narrower one too.

    >>> tuned_blocks("scalar", search=False)["choice"] in ("cached", "model")
    True
    """
    supported = supported_isas()
    if isa == "auto":
        isas = [supported[0]]
        width = vector_execution_bits()
        if width is not None and width < ISA_BITS[supported[0]] and len(supported) > 1:
            isas.append(supported[1])
    else:
        isas = [check_choice("isa", isa, ISAS[1:])]
    key = _search_key(isas)
    path = cache_directory() / BLOCKS_CACHE_FILE
    cached = _read_cache(path).get(key)
    if isinstance(cached, dict) and {"isa", "register_block", "block_depth", "block_rows", "block_cols"} <= set(cached):
        return {**cached, "choice": "cached", "cache_file": str(path)}
    if not search:
        return {**model_blocks(isas[0]), "choice": "model"}
    best = search_blocks(isas)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_cache(path)
    data[key] = best
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return {**best, "choice": "searched", "cache_file": str(path)}


# ---- single-threaded BLAS ----------------------------------------------------

_OPENBLAS_SETTERS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


def _openblas_functions() -> tuple[Any, Any] | None:
    """set/get_num_threads of the OpenBLAS numpy has loaded, through ctypes."""
    try:
        with open("/proc/self/maps") as handle:
            paths = sorted({line.split()[-1] for line in handle if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in _OPENBLAS_SETTERS:
            if hasattr(library, setter) and hasattr(library, getter):
                set_fn, get_fn = getattr(library, setter), getattr(library, getter)
                set_fn.argtypes, set_fn.restype = [ctypes.c_int], None
                get_fn.argtypes, get_fn.restype = [], ctypes.c_int
                return set_fn, get_fn
    return None


@contextlib.contextmanager
def single_thread_blas() -> Iterator[tuple[str, float]]:
    """Limit numpy's BLAS to one thread inside the block.

    Yields ``(method, threads)``: how the limit was set ("threadpoolctl",
    "openblas_set_num_threads", "environment" or "none") and the thread count
    in force (NaN when unknown).

    >>> with single_thread_blas() as (method, threads):
    ...     _ = np.ones((64, 64)) @ np.ones((64, 64))
    >>> method in ("threadpoolctl", "openblas_set_num_threads", "environment", "none")
    True
    """
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=1, user_api="blas"):
            counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
            yield "threadpoolctl", float(max(counts)) if counts else math.nan
        return
    functions = _openblas_functions()
    if functions is not None:
        set_threads, get_threads = functions
        before = get_threads()
        set_threads(1)
        try:
            yield "openblas_set_num_threads", float(get_threads())
        finally:
            set_threads(before)
        return
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    if any(os.environ.get(name) == "1" for name in names):
        yield "environment", 1.0
    else:
        yield "none", math.nan


def blas_facts() -> dict[str, Any]:
    """Which BLAS numpy.matmul runs: threadpoolctl's library, version and core type (OpenBLAS's
    ``architecture``), and the OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE it was started with
    ("" when unset or unknown).

    >>> sorted(blas_facts())
    ['blas_architecture', 'blas_library', 'blas_version', 'openblas_coretype', 'openblas_l2_size']
    """
    facts = {"blas_library": "", "blas_version": "", "blas_architecture": ""}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = None
    if threadpool_info is not None:
        for info in threadpool_info():
            if info.get("user_api") == "blas":
                facts = {"blas_library": str(info.get("internal_api", "")),
                         "blas_version": str(info.get("version") or ""),
                         "blas_architecture": str(info.get("architecture") or "")}
                break
    facts["openblas_coretype"] = os.environ.get("OPENBLAS_CORETYPE", "")
    facts["openblas_l2_size"] = os.environ.get("OPENBLAS_L2_SIZE", "")
    return facts


def _blas_sample(a: np.ndarray, b: np.ndarray, c: np.ndarray, target_seconds: float) -> dict:
    n = a.shape[0]
    flops = 2.0 * n**3
    multiplies = 0
    elapsed_ns = cpu_ns = 0
    with single_thread_blas() as (_, threads):
        while True:
            cpu_start = time.thread_time_ns()
            start = time.perf_counter_ns()
            np.matmul(a, b, out=c)
            elapsed_ns += time.perf_counter_ns() - start
            cpu_ns += time.thread_time_ns() - cpu_start
            multiplies += 1
            if elapsed_ns >= target_seconds * 1e9:
                break
    elapsed_ns = max(elapsed_ns, 1)
    return {
        "elapsed_ns": elapsed_ns,
        "units": flops * multiplies,
        "bytes": 0,
        "metrics": {
            "multiplies": multiplies,
            "seconds": elapsed_ns / 1e9 / multiplies,
            "GFLOP_per_s": flops * multiplies / elapsed_ns,
            "cpu_fraction": cpu_ns / elapsed_ns,
            "blas_threads": threads,
        },
    }


# ---- families ------------------------------------------------------------------


class _MatrixFamily(Family):
    """Family whose run() owns the operand matrices of the measurement."""

    def run(
        self,
        params: Any = None,
        *,
        repeat: int | None = None,
        warmup: int | None = None,
        cpu: int | None = None,
        target_seconds: float | None = None,
        counters: bool = True,
        a: np.ndarray | None = None,
        b: np.ndarray | None = None,
        out: np.ndarray | None = None,
        **overrides: Any,
    ) -> Measurement:
        """Measure one point; ``a``/``b``/``out`` are the multiply's operands
        (see :func:`multiply`), ``out`` alone the init matrix (see :func:`init`).

        >>> FAMILY.run(n=16, variant="tiled", repeat=1, warmup=0).median("max_abs_error") < 1e-12
        True
        """
        checked = self.params(params, **overrides)
        options = {
            "repeat": self.default_repeat if repeat is None else repeat,
            "warmup": self.default_warmup if warmup is None else warmup,
            "cpu": cpu,
            "target_seconds": (
                self.default_target_seconds if target_seconds is None else target_seconds
            ),
            "counters": counters,
        }
        if isinstance(checked, MultiplyParams):
            measurement = self._run_multiply(checked, a, b, out, options)
        else:
            if a is not None or b is not None:
                raise ValueError("matrix_init takes no a or b")
            measurement = self._run_init(checked, out, options)
        measurement.context["on_cpu_expected"] = self.expected_on_cpu(checked, cpu)
        return measurement

    def _run_multiply(self, params: MultiplyParams, a, b, out, options) -> Measurement:
        user_inputs = a is not None
        a, b, c = _operands(params, a, b, out)
        param_dict = dataclasses.asdict(params)
        if user_inputs:
            param_dict["seed"] = None

        def derive(_: Any, values: dict[str, float]) -> dict[str, float]:
            derived = {"max_abs_error": _max_abs_error(a, b, c)}
            if values.get("cpu_fraction", 0) > 0:
                derived["GFLOP_per_cpu_s"] = values["GFLOP_per_s"] / values["cpu_fraction"]
            return derived

        if params.variant == "blas":
            measurement = measure(
                self.name, param_dict, python_sample=lambda t: _blas_sample(a, b, c, t),
                unit=self.unit, primary_metric=self.primary_metric, derive=derive, **options,
            )
            with single_thread_blas() as (method, _):
                measurement.context["blas_thread_limit"] = method
            measurement.context["kernel_flags"] = "numpy.matmul"
            measurement.context.update(blas_facts())
        else:
            config = {
                "a": a, "b": b, "c": c, "n": params.n, "variant": params.variant,
                "tile": params.tile or 1, "isa": params.isa, "block_rows": 0, "block_cols": 0,
                "register_block": "auto",
            }
            chosen = _simd_blocks(params) if params.variant == "tiled_simd" else None
            if chosen is not None:
                config.update(_core_config(a, b, c, chosen))
            measurement = measure(
                self.name, param_dict, core="matrix", config=config, unit=self.unit,
                primary_metric=self.primary_metric, derive=derive, **options,
            )
            measurement.context["kernel_flags"] = _kernel_flags(params.variant)
            if chosen is not None:
                width = vector_execution_bits()
                measurement.context.update({
                    "block_choice": chosen["choice"], "register_block": chosen["register_block"],
                    "isa_used": chosen["isa"], "vector_execution_bits": width if width is not None else "",
                })
        return measurement

    def _run_init(self, params: InitParams, out, options) -> Measurement:
        n = params.n
        if out is None:
            _check_memory(n * n * 4, f"n={n}: one {n}x{n} int32 matrix")
            out = np.empty((n, n), dtype=np.int32)
        elif not (
            isinstance(out, np.ndarray) and out.dtype == np.int32 and out.shape == (n, n)
            and out.flags.c_contiguous and out.flags.writeable
        ):
            raise ValueError(f"out must be a writable C-contiguous ({n}, {n}) int32 numpy array")
        out.fill(-1)  # touches every page before the first sample

        def derive(_: Any, values: dict[str, float]) -> dict[str, float]:
            return {"wrong_elements": float(_wrong_init_elements(out))}

        config = {"matrix": out, "n": n, "order": params.order, "stores": params.stores}
        measurement = measure(
            self.name, dataclasses.asdict(params), core="matrix_init", config=config,
            unit=self.unit, primary_metric=self.primary_metric, derive=derive, **options,
        )
        measurement.context["kernel_flags"] = reference_flags()
        return measurement


_BLOCK_FIELDS = {"tile": "block_depth", "register_block": "register_block", "block_rows": "block_rows",
                 "block_cols": "block_cols"}


def _simd_blocks(params: MultiplyParams) -> dict[str, Any]:
    """tiled_simd's ISA and blocks for params: what params give, the rest as ``params.blocks``
    says; ``choice`` says how (``given``, or ``cached``/``searched``/``model`` and which
    fields were given)."""
    isa = params.isa
    if isa == "auto" and params.register_block is not None:
        isa = next(i for i in supported_isas() if params.register_block in REGISTER_BLOCKS[i])
    given = {field: getattr(params, field) for field in _BLOCK_FIELDS if getattr(params, field) is not None}
    if isa != "auto" and len(given) == len(_BLOCK_FIELDS):
        chosen = {"isa": isa, "choice": "given"}
    elif params.blocks == "model":
        isa = supported_isas()[0] if isa == "auto" else isa
        chosen = {**model_blocks(isa, params.register_block, depth=params.tile), "choice": "model"}
    else:
        chosen = tuned_blocks(isa, search=isa != "scalar")
        if isa != "auto" and params.register_block is not None and chosen["register_block"] != params.register_block:
            # the tuned row block belongs to another register block: the model's for this one
            chosen = {**chosen, "block_rows": model_blocks(isa, params.register_block,
                                                            depth=params.tile)["block_rows"]}
    chosen = {key: chosen[key] for key in ("isa", "register_block", "block_depth", "block_rows",
                                           "block_cols", "choice") if key in chosen}
    for field, value in given.items():
        chosen[_BLOCK_FIELDS[field]] = value
    if chosen["choice"] != "given" and given:
        chosen["choice"] += f" ({', '.join(given)} given)"
    return chosen


def _kernel_flags(variant: str) -> str:
    build = build_info()["cflags"]
    if variant == "tiled_simd":
        return f"{build}; intrinsics with target attributes, ISA chosen at run time"
    if variant == "tiled_sse2":
        return f"{build} {reference_flags()}; the source's SSE2 intrinsics, no FMA contraction"
    return f"{build} {reference_flags()}"


def expected_init(n: int, rows: slice = slice(None)) -> np.ndarray:
    """The matrix init() writes: element (i, j) = i*n + j wrapped to int32.

    >>> expected_init(2).tolist()
    [[0, 1], [2, 3]]
    """
    check_int("n", n, 1, MAX_N)
    start, stop, _ = rows.indices(n)
    flat = np.arange(start * n, stop * n, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    return flat.astype(np.uint32).view(np.int32).reshape(stop - start, n)


def _wrong_init_elements(matrix: np.ndarray) -> int:
    n = matrix.shape[0]
    rows = max(1, _CHECK_CHUNK_BYTES // (8 * n))
    wrong = 0
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        wrong += int(np.count_nonzero(matrix[start:stop] != expected_init(n, slice(start, stop))))
    return wrong


# ---- public API ------------------------------------------------------------------


def multiply(
    n: int = 1000,
    variant: str = "tiled",
    tile: int | None = None,
    *,
    isa: str = "auto",
    seed: int = 0,
    a: np.ndarray | None = None,
    b: np.ndarray | None = None,
    out: np.ndarray | None = None,
    **options: Any,
) -> Measurement:
    """Time c = a * b for N x N float64 matrices with one variant; GFLOP/s (2N^3/t).

    ``a``/``b``: C-contiguous float64 (n, n) arrays (anything else is a
    ValueError, never a silent copy); by default drawn from ``seed``.
    ``out`` receives the product.  Metrics per sample: ``GFLOP_per_s``,
    ``seconds`` per product, ``max_abs_error`` against numpy,
    ``cpu_fraction`` (thread CPU time / wall time of the timed work: below 1
    when the machine preempted the kernel) and ``GFLOP_per_cpu_s``,
    ``transpose_seconds`` (transposed), ``aligned_vectors`` (tiled_sse2: the
    listing's aligned loads, used when every row is 16-byte aligned), the
    micro-kernel's shape (tiled_simd),
    ``blas_threads`` (blas).  ``options``: repeat, warmup, cpu,
    target_seconds, counters.

    >>> m = multiply(64, "tiled", tile=8, repeat=1, warmup=0)
    >>> m.median("max_abs_error") < 1e-12
    True
    """
    return FAMILY.run(
        n=n, variant=variant, tile=tile, isa=isa, seed=seed, a=a, b=b, out=out, **options
    )


def run(params: MultiplyParams | dict | None = None, **options: Any) -> Measurement:
    """Measure one multiply point (see :func:`multiply`); GFLOP_per_s is primary.

    >>> run(n=32, variant="naive", repeat=1, warmup=0).median("max_abs_error") < 1e-12
    True
    """
    return FAMILY.run(params, **options)


def init(
    n: int = 3000,
    order: str = "row",
    stores: str = "normal",
    *,
    out: np.ndarray | None = None,
    **options: Any,
) -> Measurement:
    """Time writing an N x N int32 matrix row- or column-wise; GB/s and seconds.

    ``stores="nontemporal"`` uses movnti (``_mm_stream_si32``) per element,
    as in table 6.1.  ``out`` (optional, a C-contiguous (n, n) int32 array)
    receives the matrix; ``wrong_elements`` counts values differing from
    :func:`expected_init` after each sample.

    >>> m = init(64, "column", "nontemporal", repeat=1, warmup=0)
    >>> m.median("wrong_elements")
    0.0
    """
    return INIT_FAMILY.run(n=n, order=order, stores=stores, out=out, **options)


def percent_of_naive(dataset: Dataset) -> Dataset:
    """Add each row's time relative to naive at the same n (``percent_of_naive``), as table 6.2 shows it,
    and in the same run where the rows have runs (run r of every variant is taken in one round).

    >>> ds = percent_of_naive(Dataset([{"n": 8, "variant": "naive", "seconds": 2.0},
    ...                                {"n": 8, "variant": "tiled", "seconds": 0.5}]))
    >>> ds.column("percent_of_naive")
    [100.0, 25.0]
    >>> percent_of_naive(Dataset([{"n": 8, "variant": "naive", "seconds": 2.0, "run": 0},
    ...                           {"n": 8, "variant": "naive", "seconds": 4.0, "run": 1},
    ...                           {"n": 8, "variant": "tiled", "seconds": 1.0, "run": 0},
    ...                           {"n": 8, "variant": "tiled", "seconds": 1.0, "run": 1}])).column("percent_of_naive")
    [100.0, 100.0, 50.0, 25.0]
    """
    naive = {(row["n"], row.get("run")): row["seconds"] for row in dataset.rows if row["variant"] == "naive"}
    for row in dataset.rows:
        base = naive.get((row["n"], row.get("run")))
        row["percent_of_naive"] = 100.0 * row["seconds"] / base if base else math.nan
    return dataset


def table_6_2_sweep(n: int = 1000, repeat: int = 3, tile: int | None = None, name: str = "table_6_2") -> Sweep:
    """Drepper's table 6.2: every multiply variant at N=n (``experiments/table6_2.py`` runs it).

    >>> [p["variant"] for p in table_6_2_sweep(64).points] == list(VARIANTS)
    True
    """
    points = [{"n": n, "variant": v, "tile": tile if v in ("tiled", "tiled_sse2") else None} for v in VARIANTS]
    return Sweep(
        name=name, family="matrix", points=points, repeat=repeat, warmup=1,
        description=f"Drepper table 6.2: matrix multiply variants at N={n}",
    )


def table_6_1_sweep(n: int = 3000, repeat: int = 5, name: str = "table_6_1") -> Sweep:
    """Drepper's table 6.1: row/column order x normal/non-temporal stores at N=n
    (``experiments/table6_1.py`` runs it).

    >>> len(table_6_1_sweep(64).points)
    4
    """
    return Sweep(
        name=name, family="matrix_init", points=grid(n=[n], order=list(ORDERS), stores=list(STORES)),
        repeat=repeat, warmup=1, description=f"Drepper table 6.1: {n}x{n} int matrix initialisation",
    )


# ---- the standard figures -------------------------------------------------------


def figure(data: Dataset | str, metric: str = "GFLOP_per_s"):
    """Matrix multiply: GFLOP/s by variant, numpy's BLAS as a dashed reference line.

    Each bar carries its time relative to naive, and the source's figure beside it
    where the source has the variant (Drepper's table 6.2: naive 100%,
    transposed 23.4%, tiled 17.3%, the SSE2 listing ``tiled_sse2`` 9.47%);
    ``tiled_simd`` is labelled as memlab's, beyond the source. One panel per
    matrix size N.

    >>> fig = figure("memlab-tour/matrix.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = chart.rows_with(ds, metric)
    sizes = sorted({r.get("n") for r in rows}, key=chart.number)
    fig, axes = chart.new_figure(max(6.5, 4.0 * len(sizes)), 4.8, ncols=len(sizes), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        members = [r for r in rows if r.get("n") == n]
        blas = [r for r in members if r.get("variant") == "blas"]
        others = [r for r in members if r.get("variant") != "blas"]
        naive = next((r[metric] for r in others if r.get("variant") == "naive"), math.nan)
        if others:
            bars = ax.bar(range(len(others)), [r[metric] for r in others], 0.7,
                          color=[f"C{i}" for i in range(len(others))],
                          yerr=chart.spread(others, metric), capsize=2,
                          error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            for bar, row in zip(bars, others):
                if chart.finite(naive) and row[metric] > 0:
                    source = SOURCE_PERCENT_OF_NAIVE.get(str(row.get("variant")))
                    ax.annotate(f"{100 * naive / row[metric]:.3g}% of naive time"
                                + (f"\n(source: {source:.3g}%)" if source and row.get("variant") != "naive" else ""),
                                (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 3),
                                textcoords="offset points", ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(others)))
            ax.set_xticklabels([_variant_label(r) for r in others], fontsize=8)
        for row in blas:
            ax.axhline(row[metric], color="k", linestyle="--", linewidth=1.1,
                       label=f"BLAS (numpy.matmul, 1 thread): {row[metric]:.3g}")
        if blas:
            ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_ylabel(metric_label(metric))
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)
    chart.set_title(fig, ds, "matrix multiply: GFLOP/s by variant")
    return fig


def _variant_label(row: dict) -> str:
    variant = str(row.get("variant"))
    name = {"tiled_sse2": "tiled_sse2\n(the source's SSE2)", "tiled_simd": "tiled_simd\n(memlab, beyond it)"}.get(
        variant, variant)
    if variant in ("tiled", "tiled_sse2", "tiled_simd") and chart.finite(row.get("tile")):
        return f"{name}\ntile {int(row['tile'])}"
    return name


def init_figure(data: Dataset | str, metric: str = "GB_per_s"):
    """Matrix initialisation (Drepper table 6.1): GB/s by order, normal vs non-temporal stores.

    >>> fig = init_figure("memlab-tour/matrix_init.csv")   # doctest: +SKIP
    """
    return chart.bars_figure(data, metric, category=["order"], series=["stores"], facet=["n"],
                             title="matrix init: GB/s by order x stores")


FAMILY = _MatrixFamily(
    name="matrix",
    params_type=MultiplyParams,
    core="matrix",
    unit="flop",
    primary_metric="GFLOP_per_s",
    sweeps={
        "quick": lambda: table_6_2_sweep(128, 2, name="quick"),
        "table_6_2": table_6_2_sweep,
    },
    description="N x N float64 matrix multiply: naive, transposed, tiled, tiled_sse2 (the source's SSE2 listing), "
                "tiled_simd (memlab's, beyond the source), blas",
    default_repeat=3,
    figure=figure,
    caption="Matrix multiply variants of Drepper's table 6.2 (naive, transposed, tiled, and tiled_sse2, the "
            "source's own SSE2 listing); each bar says its time relative to the naive loop beside the "
            "source's. tiled_simd (packed panels, the widest vectors) is what memlab adds beyond the source; "
            "the dashed line is numpy's BLAS on one thread.",
    report_columns=("seconds", "max_abs_error"),
)

INIT_FAMILY = _MatrixFamily(
    name="matrix_init",
    params_type=InitParams,
    core="matrix_init",
    unit="element",
    primary_metric="GB_per_s",
    sweeps={
        "quick": lambda: table_6_1_sweep(1000, 2, name="quick"),
        "table_6_1": table_6_1_sweep,
    },
    description="N x N int32 matrix initialisation, row/column order, normal/non-temporal stores",
    default_repeat=5,
    figure=init_figure,
    caption="Writing a matrix row-wise or column-wise with normal or non-temporal stores "
            "(Drepper's table 6.1).",
    report_columns=("seconds", "wrong_elements"),
)

FAMILIES = (FAMILY, INIT_FAMILY)
