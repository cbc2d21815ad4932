"""Memory bandwidth: Drepper's read, write and copy curves, one and two threads.

Seed 004 (Drepper, "What every programmer should know about memory",
sections 3.5.1 and 3.5.3, figures 3.24-3.29 and 3.31) measures how many bytes
per cycle a core reads, writes or copies while the working set grows from
1 KiB past the last cache: each cache level is a plateau, the DTLB running
out a drop. Then two threads on the same memory (two SMT siblings of one
core, fig. 3.25; two cores, figs. 3.27 and 3.29: writes collapse when both
threads write the same lines) and a second worker on a working set of its
own (fig. 3.31: what sharing a cache costs).

- ``op``: ``read`` (load every vector into a register and do nothing with
  it, as Drepper's test), ``write`` (store a 64-bit pattern into every
  word), ``copy`` (the first half of the
  working set into the second half, each half a mapping of its own:
  ``working_set_bytes`` is all the memory touched, so the cache sizes mark
  the same places on every curve).
- ``width``: ``scalar`` (8-byte general registers), ``sse2`` (16 B, the
  width of Drepper's test), ``avx2`` (32 B), ``avx512`` (64 B), or ``auto``
  (the widest this CPU runs). Each kernel is unrolled eight vectors deep.
- ``stores``: ``normal`` or ``nontemporal`` (streaming stores around the
  caches, what memset/memcpy switch to for large sizes; write and copy only).
- ``threads``, ``placement`` (``cores``, ``smt``, ``sockets``, ``spread``, ``unpinned``:
  see :func:`memlab.placement.choose`), ``shared`` (all threads on one
  working set, figs. 3.25-3.29, or one private working set each).
- ``background_op`` / ``background_working_set_bytes``: one more worker,
  placed like the others, doing its own op on its own working set for the
  whole sample (fig. 3.31); its rate is ``background_GB_per_s``.
- ``pages``: ``4k``, ``thp``, ``hugetlb-2m`` (``strict_pages``: a refused
  huge page is an error instead of a fallback to 4 KiB pages).
- ``check``: after each sample, run each working set's worker for two passes
  in odd-sized chunks and verify every word and the guard pages around it
  (``check_errors`` is 0 when every op touched exactly its bytes).

Metrics per measured thread (the average thread; Drepper's figures plot
this): ``bytes_per_cycle`` (cycles of the core clock memlab calibrates),
``GB_per_s``, ``GiB_per_s``; for all measured threads together
``bytes_per_cycle_total`` and ``GB_per_s_total``; ``cpu_fraction`` (thread CPU
time over wall time: below 1 when other work shared the CPU) and the rate
while on the CPU, ``on_cpu_GB_per_s``. A copy counts the bytes copied
(``traffic_GB_per_s`` counts them twice, read and written, as STREAM does).

>>> m = run(working_set_bytes=64 << 10, op="read", repeat=1, warmup=0, target_seconds=0.01)
>>> m.median("bytes_per_cycle") > 0
True
"""

from __future__ import annotations

import array
import dataclasses
import functools
import math
import os
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from memlab import chart, machine, machine_model
from memlab._core import Kernel
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_bool, check_choice, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement
from memlab.placement import PLACEMENTS as _EVERY_PLACEMENT, choose, cpu_not_applicable

__all__ = [
    "BACKGROUND_OPS",
    "BYTES_READ_WRITTEN",
    "BandwidthParams",
    "CAPTION",
    "FAMILY",
    "LINE_BYTES",
    "MAX_PASS_TRAFFIC_BYTES",
    "OPS",
    "PAGE_KINDS",
    "PASS_OPS",
    "PLACEMENTS",
    "SETUP_SECONDS",
    "SETUP_SECONDS_PER_BYTE",
    "STORES",
    "SWEEPS",
    "VECTOR_BYTES",
    "WIDTHS",
    "aligned_array",
    "figure",
    "host_facts",
    "port_limit_bytes_per_cycle",
    "run",
    "run_pass",
    "setup_seconds",
    "sizes",
    "supported_widths",
    "widest_width",
    "width_support",
]

OPS = ("read", "write", "copy")
WIDTHS = ("auto", "scalar", "sse2", "avx2", "avx512")
STORES = ("normal", "nontemporal")
#: memlab.placement's placements but one_cpu: the C core refuses two workers on one CPU.
PLACEMENTS = tuple(p for p in _EVERY_PLACEMENT if p != "one_cpu")
PAGE_KINDS = ("4k", "thp", "hugetlb-2m")
BACKGROUND_OPS = ("none", "read", "write", "copy")
#: Bytes of one load or store of each width.
VECTOR_BYTES = {"scalar": 8, "sse2": 16, "avx2": 32, "avx512": 64}
#: Bytes read and bytes written per byte an op passes over (what ``GB_per_s`` counts): the
#: instructions' bytes, STREAM's count (a normal store's read of its line first is not counted).
#: ``traffic_GB_per_s`` is ``GB_per_s`` times their sum. ``add`` (dst += src) is the 2:1 mix of
#: :func:`run_pass` and the loaded family; the C core's ``ml_bw_op_traffic`` holds the same table.
BYTES_READ_WRITTEN = {"read": (1, 0), "write": (0, 1), "copy": (1, 1), "add": (2, 1)}
#: Every kernel works on whole cache lines (the widest vector).
LINE_BYTES = 64
MAX_THREADS = 1024
MAX_BYTES = 1 << 46


def _check_working_set(name: str, value: Any, op: str) -> int:
    value = check_int(name, value, maximum=MAX_BYTES)
    if value < LINE_BYTES:
        raise ValueError(f"{name}={value} is below the minimum {LINE_BYTES} "
                         f"(one cache line: the widest vector)")
    if value % LINE_BYTES:
        raise ValueError(f"{name}={value} must be a multiple of {LINE_BYTES} bytes (one cache line)")
    if op == "copy" and value % (2 * LINE_BYTES):
        raise ValueError(f"{name}={value}: copy reads one half of the working set and writes the "
                         f"other, so it must be a multiple of {2 * LINE_BYTES} bytes")
    return value


@dataclass(frozen=True)
class BandwidthParams:
    """One bandwidth point; see the module docstring for each parameter.

    Checked here: sizes (a positive multiple of 64 bytes; copy: of 128),
    names, non-temporal stores only for write and copy, a width this CPU
    runs, no more workers than CPUs, and a placement this machine can give
    (ValueError with the reason otherwise).
    """

    working_set_bytes: int = 1 << 20
    op: str = "read"
    width: str = "auto"
    stores: str = "normal"
    threads: int = 1
    placement: str = "cores"
    shared: bool = True
    pages: str = "4k"
    strict_pages: bool = False
    background_op: str = "none"
    background_working_set_bytes: int = 2 << 20
    check: bool = False

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_choice("op", self.op, OPS)
        _check_working_set("working_set_bytes", self.working_set_bytes, self.op)
        check_choice("width", self.width, WIDTHS)
        check_choice("stores", self.stores, STORES)
        if self.op == "read" and self.stores == "nontemporal":
            raise ValueError("stores='nontemporal' applies to write and copy: op='read' makes no stores")
        check_int("threads", self.threads, 1, MAX_THREADS)
        check_choice("placement", self.placement, PLACEMENTS)
        object.__setattr__(self, "shared", check_bool("shared", self.shared))
        check_choice("pages", self.pages, PAGE_KINDS)
        object.__setattr__(self, "strict_pages", check_bool("strict_pages", self.strict_pages))
        check_choice("background_op", self.background_op, BACKGROUND_OPS)
        _check_working_set("background_working_set_bytes", self.background_working_set_bytes,
                           self.background_op)
        object.__setattr__(self, "check", check_bool("check", self.check))
        if self.width != "auto":
            reason = width_support().get(self.width)
            if reason:
                raise ValueError(f"width={self.width!r} cannot run here: {reason} "
                                 f"(this CPU runs {', '.join(supported_widths())})")
        allowed = len(os.sched_getaffinity(0))
        if self.workers > allowed:
            extra = " plus the background worker" if self.background_op != "none" else ""
            raise ValueError(f"threads={self.threads}{extra} is more than the {allowed} CPUs this "
                             f"process may use")
        choose(self.placement, self.workers)  # ValueError if the machine cannot

    @property
    def workers(self) -> int:
        """Threads started: the measured ones and the background worker, if any."""
        return self.threads + (self.background_op != "none")


# ---- what this CPU runs ------------------------------------------------------


@functools.lru_cache(maxsize=None)
def width_support() -> dict[str, str | None]:
    """Each width (scalar, sse2, avx2, avx512) -> None if this CPU runs it, else the reason.

    Asked of the C core, which checks the CPU, its OS and the build.

    >>> width_support()["scalar"] is None
    True
    """
    line = aligned_array(LINE_BYTES // 8)
    support: dict[str, str | None] = {}
    for width in VECTOR_BYTES:
        config = {"op": "read", "width": width, "stores": "normal", "src": line, "dst": line,
                  "value": 0, "passes": 1, "chunk_bytes": 0}
        try:
            Kernel("bandwidth_pass", config).close()
            support[width] = None
        except ValueError as error:
            text = str(error)
            support[width] = text.split(": ", 1)[1].split(" (widest", 1)[0] if ": " in text else text
    return support


def supported_widths() -> list[str]:
    """The widths this CPU runs, narrowest first.

    >>> supported_widths()[0]
    'scalar'
    """
    return [width for width, reason in width_support().items() if reason is None]


def widest_width() -> str:
    """What ``width="auto"`` picks here.

    >>> widest_width() in VECTOR_BYTES
    True
    """
    return supported_widths()[-1]


# ---- running -------------------------------------------------------------------


def _to_core(params: BandwidthParams, cpu: int | None = None) -> dict[str, Any]:
    """The C config; with ``cpu`` (``run(cpu=...)``) its one worker is pinned to that CPU."""
    config = dataclasses.asdict(params)
    placement = config.pop("placement")
    if cpu is not None and params.workers > 1:
        raise cpu_not_applicable("bandwidth", cpu, f"its {params.workers} workers need a CPU each (two on one CPU "
                                 "take turns instead of running together); place them with placement=")
    cpus = choose(placement, params.workers) if cpu is None else [cpu]
    config["cpus"] = array.array("i", cpus)
    return config


def port_limit_bytes_per_cycle(op: str, vector_bytes: int, working_set_bytes: int,
                               facts: dict[str, Any], threads: int = 1,
                               placement: str = "cores") -> int | None:
    """The L1d port limit (bytes per cycle, per thread) a point's ``bytes_per_cycle`` is held to,
    or None where it does not apply.

    The limit is :meth:`memlab.machine_model.CoreModel.l1d_bytes_per_cycle` for ``op`` and
    ``vector_bytes`` on the machine ``facts`` describe (``cpu_vendor``, ``cpu_family``,
    ``cpu_model_number``, ``caches``, as :func:`memlab.machine.collect` records them). None
    when the model does not know the CPU, when the facts give no L1d size, when the working
    set is larger than the L1d (the ports are then not what limits), or when several workers
    may share one core (``placement`` ``smt`` or ``unpinned`` with more than one thread: two
    threads then divide one core's ports).

    >>> zen4 = {"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 17,
    ...         "caches": [{"level": 1, "type": "Data", "size_bytes": 32 << 10}]}
    >>> port_limit_bytes_per_cycle("read", 64, 16 << 10, zen4), port_limit_bytes_per_cycle("read", 64, 1 << 20, zen4)
    (64, None)
    """
    l1d = machine.cache_sizes(facts).get("L1d")
    if l1d is None or working_set_bytes > l1d:
        return None
    if threads > 1 and placement in ("smt", "unpinned"):
        return None
    return machine_model.core_model(facts).l1d_bytes_per_cycle(op, vector_bytes)


@functools.lru_cache(maxsize=1)
def host_facts() -> dict[str, Any]:
    """This machine's CPU identity and caches (what :func:`port_limit_bytes_per_cycle` reads), read
    once per process; callers read it, never change it."""
    facts: dict[str, Any] = {}
    machine.collect_cpu(facts)
    machine.collect_caches(facts)
    return facts


def _derive(params: BandwidthParams, values: dict[str, float]) -> dict[str, float]:
    """bytes per cycle from the calibrated clock (GHz = cycles_per_byte / ns_per_byte), and at
    L1d-resident sets the on-CPU rate's fraction of the core's L1d port limit."""
    derived: dict[str, float] = {}
    cycles, ns = values.get("cycles_per_byte"), values.get("ns_per_byte")
    if cycles and ns:
        ghz = cycles / ns
        derived["bytes_per_cycle"] = 1.0 / cycles
        for name in ("GB_per_s_total", "on_cpu_GB_per_s", "background_GB_per_s"):
            if name in values:
                derived[name.replace("GB_per_s", "bytes_per_cycle")] = values[name] / ghz
        vector_bytes = int(values.get("vector_bytes") or VECTOR_BYTES[
            widest_width() if params.width == "auto" else params.width])
        limit = port_limit_bytes_per_cycle(params.op, vector_bytes, params.working_set_bytes,
                                           host_facts(), params.threads, params.placement)
        rate = derived.get("on_cpu_bytes_per_cycle", derived["bytes_per_cycle"])
        if limit:
            derived["port_limit_bytes_per_cycle"] = float(limit)
            derived["fraction_of_port_limit"] = rate / limit
    if "GB_per_s" in values:
        derived["traffic_GB_per_s"] = values["GB_per_s"] * float(sum(BYTES_READ_WRITTEN[params.op]))
    return derived


def run(params: BandwidthParams | dict | None = None, **options: Any) -> Measurement:
    """Measure one point: bytes per cycle and GB/s of ``op`` over the working set.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    cpu, target_seconds, counters) are parameters of :class:`BandwidthParams`.

    >>> m = run(working_set_bytes=32 << 10, op="copy", check=True, repeat=1, warmup=0,
    ...         target_seconds=0.01)
    >>> m.median("check_errors")
    0.0
    """
    return FAMILY.run(params, **options)


#: What :func:`run_pass` runs: the three ops, ``add`` (the 2:1 read/write mix the loaded family
#: draws load with; not a measured op of this family) and the read's summing twin.
PASS_OPS = (*OPS, "add", "sum")


#: The most bytes one run_pass call may move (passes x buffer): about ten seconds at 8 GB/s.
MAX_PASS_TRAFFIC_BYTES = 1 << 36


def _nbytes(buffer: Any) -> int:
    """Bytes of a buffer (0 for None; what the C core refuses, it refuses with its own message)."""
    if buffer is None:
        return 0
    try:
        return memoryview(buffer).nbytes
    except TypeError:
        return 0


def run_pass(op: str, src: Any = None, dst: Any = None, *, width: str = "auto",
             stores: str = "normal", value: int = 0, passes: int = 1, chunk_bytes: int = 0) -> int:
    """Run one kernel over numpy arrays (or any C-contiguous buffers); returns the sum for ``sum``.

    ``read`` loads every vector of src (and returns 0); ``sum`` walks src the
    same way adding up its 64-bit words and returns their sum over all
    passes (mod 2**64); ``write`` stores ``value`` into every 64-bit word of
    dst (0 to 2**64 - 1; a negative int64 is its two's complement); ``copy``
    copies src into dst (same size); ``add`` adds src into dst word by word
    (64-bit, wrapping: two loads and one store per vector, normal stores
    only). Buffers start on a 64-byte
    boundary and hold a multiple of 64 bytes (see :func:`aligned_array`).
    ``chunk_bytes`` > 0 runs the passes in chunks of that size, as a team
    worker does. More than one pass moves at most
    :data:`MAX_PASS_TRAFFIC_BYTES` (passes times the buffer's bytes): a call
    cannot be interrupted.

    >>> words = aligned_array(16); words[:] = 3
    >>> run_pass("sum", words, passes=2)
    96
    """
    check_choice("op", op, PASS_OPS)
    check_choice("stores", stores, STORES)
    if op == "sum" and stores != "normal":
        raise ValueError("stores='nontemporal' applies to write and copy: op='sum' makes no stores")
    if op in ("read", "sum", "copy", "add") and src is None:
        raise ValueError(f"op={op!r} needs src")
    if op in ("write", "copy", "add") and dst is None:
        raise ValueError(f"op={op!r} needs dst")
    value = check_int("value", value, -(1 << 63), (1 << 64) - 1)
    passes = check_int("passes", passes, 1)
    chunk_bytes = check_int("chunk_bytes", chunk_bytes, 0, MAX_BYTES)
    traffic = passes * max(_nbytes(src), _nbytes(dst))
    if passes > 1 and traffic > MAX_PASS_TRAFFIC_BYTES:
        raise ValueError(f"passes={passes} over {max(_nbytes(src), _nbytes(dst))} bytes is {traffic} bytes, "
                         f"above the maximum {MAX_PASS_TRAFFIC_BYTES} (2^36) for one call: run_pass cannot be "
                         "interrupted (Ctrl-C acts after it returns)")
    empty = np.zeros(0, dtype=np.uint8)
    config = {"op": op, "width": width, "stores": stores,
              "src": empty if src is None else src, "dst": empty if dst is None else dst,
              "value": value - (1 << 64) if value >= 1 << 63 else value,
              "passes": passes, "chunk_bytes": chunk_bytes}
    with Kernel("bandwidth_pass", config) as kernel:
        sample = kernel.measure(target_ns=0, counters=False)
    metrics = sample["metrics"]
    return int(metrics["sum_low32"]) | int(metrics["sum_high32"]) << 32


def aligned_array(count: int, dtype: Any = np.uint64) -> np.ndarray:
    """A zeroed numpy array of ``count`` items starting on a 64-byte boundary (what the kernels need).

    >>> aligned_array(8).ctypes.data % 64
    0
    """
    itemsize = np.dtype(dtype).itemsize
    check_int("count", count, 0, MAX_BYTES // itemsize)
    raw = np.zeros(count * itemsize + LINE_BYTES, dtype=np.uint8)
    start = -raw.ctypes.data % LINE_BYTES
    return raw[start : start + count * itemsize].view(dtype)


# ---- the standard figure ------------------------------------------------------

#: How to read the figure, under it in reports.
CAPTION = ("Bytes per cycle (per thread) of read, write and copy loops over a working set of 2^N "
           "bytes: a plateau while it fits in each cache (dashed lines), lower beyond. Two threads "
           "writing the same lines collapse; a second worker on its own set shows what sharing a "
           "cache costs (Drepper 3.5.1, 3.5.3).")


def figure(data: Dataset | str | os.PathLike, metric: str = "bytes_per_cycle"):
    """Bytes per cycle against the working set (log2 axis, cache sizes marked), one line per variant.

    As Drepper's figures 3.24-3.29 and 3.31: one line per op (and per any
    other parameter that varies: threads, placement, stores, width,
    background op). The right-hand axis is GB/s at the run's clock.

    >>> fig = figure("memlab-tour/bandwidth.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    fig = chart.line_figure(ds, "working_set_bytes", metric, log2_x=True, caches=True,
                            title="bandwidth: bytes per cycle per thread vs working set")
    ax = fig.axes[0]
    ax.set_xlabel("working set (bytes, log2)")
    ax.set_ylabel("bytes per cycle (per thread)")
    ratios = [row["GB_per_s"] / row[metric] for row in ds.rows
              if chart.finite(row.get("GB_per_s")) and chart.finite(row.get(metric)) and row[metric] > 0]
    if ratios:
        ghz = statistics.median(ratios)
        secondary = ax.secondary_yaxis("right", functions=(lambda b: b * ghz, lambda g: g / ghz))
        secondary.set_ylabel(f"GB/s (at {ghz:.2f} GHz)")
    return fig


# ---- named sweeps: Drepper's figures -------------------------------------------


def _largest_cache_bytes() -> int:
    sizes = machine.cache_sizes()
    return max([size for name, size in sizes.items() if not name.endswith("i")] or [32 << 20])


def _memory_cap_log2() -> int:
    """log2 of the largest working set the sweeps use: an eighth of the memory available
    (two private sets and a background set must fit beside the rest of the machine)."""
    facts: dict[str, Any] = {}
    machine.collect_meminfo(facts)
    available = facts.get("memory_available_bytes") or (4 << 30)
    return max(20, int(math.log2(available // 8)))


def sizes(quick: bool = False, per_octave: int = 2) -> list[int]:
    """Working sets from 1 KiB to past the last cache: 2**28 or 4x the largest cache.

    Rounded to 128 bytes (every op, copy included, takes them), and at most
    an eighth of the memory available. ``quick``: one L1, one L2, one
    L3-sized set and one twice the largest cache.

    >>> sizes()[0]
    1024
    """
    largest = _largest_cache_bytes()
    cap = _memory_cap_log2()
    if quick:
        beyond = min(max(26, math.ceil(math.log2(2 * largest))), cap)
        return sorted({16 << 10, 256 << 10, 4 << 20, 1 << beyond})
    top = min(max(28, math.ceil(math.log2(4 * largest))), cap)
    points = {int(round(2 ** (k / per_octave) / 128)) * 128 for k in range(10 * per_octave, top * per_octave + 1)}
    return sorted(points)


def _sweep(name: str, points: list[dict[str, Any]], quick: bool, description: str) -> Sweep:
    return Sweep(
        name=name + ("_quick" if quick else ""),
        family="bandwidth",
        points=points,
        repeat=2 if quick else 5,
        warmup=1,
        target_seconds=0.03 if quick else 0.1,
        description=description,
    )


def one_thread(quick: bool = False) -> Sweep:
    """Figs. 3.24, 3.26, 3.28: read, write and copy, one thread, the widest vectors.

    >>> one_thread(quick=True).name
    'one_thread_quick'
    """
    return _sweep("one_thread", grid(op=list(OPS), working_set_bytes=sizes(quick)), quick,
                  one_thread.__doc__.splitlines()[0])


def two_threads_smt(quick: bool = False) -> Sweep:
    """Fig. 3.25: two threads on the SMT siblings of one core, one shared working set.

    Needs SMT: building the sweep raises ValueError on a machine without it.

    >>> two_threads_smt  # doctest: +ELLIPSIS
    <function two_threads_smt at ...>
    """
    choose("smt", 2)
    return _sweep("two_threads_smt", grid(op=list(OPS), working_set_bytes=sizes(quick), threads=[2],
                                          placement=["smt"], shared=[True]),
                  quick, two_threads_smt.__doc__.splitlines()[0])


def two_threads_cores(quick: bool = False) -> Sweep:
    """Figs. 3.27, 3.29: two threads on two cores, one shared working set (write and copy collapse);
    beside it, as the control, the two writing separate sets of the same size each.

    The control tells the cost of sharing lines (each write takes the line from the other core)
    from what a second busy core costs anyway (a shared L3, memory bandwidth, the clock).
    Needs two cores: building the sweep raises ValueError on a machine with one.

    >>> two_threads_cores  # doctest: +ELLIPSIS
    <function two_threads_cores at ...>
    """
    choose("cores", 2)
    shared = grid(op=list(OPS), working_set_bytes=sizes(quick), threads=[2], placement=["cores"], shared=[True])
    separate = grid(op=["write"], working_set_bytes=sizes(quick), threads=[2], placement=["cores"], shared=[False])
    return _sweep("two_threads_cores", shared + separate, quick, two_threads_cores.__doc__.splitlines()[0])


def background_working_set_bytes(placement: str = "cores") -> int:
    """Half of the smallest cache shared by two workers placed so (Drepper's 2 MB: half
    the Core 2's shared L2); half the largest cache when they share none.

    >>> background_working_set_bytes("unpinned") % 128
    0
    """
    cpus = choose(placement, 2) if placement != "unpinned" else []
    shared = [c for c in machine.caches_shared_by(cpus) if c["level"] >= 2] if cpus else []
    size = shared[0]["size_bytes"] if shared else _largest_cache_bytes()
    return max(128, size // 2 // 128 * 128)


def two_processes(quick: bool = False) -> Sweep:
    """Fig. 3.31: one thread reads or writes sets of every size while a second worker on
    another core reads or writes its own set of half their shared cache; and, as the control in
    the same run, the same points with no background worker (``background_op`` none).

    >>> two_processes  # doctest: +ELLIPSIS
    <function two_processes at ...>
    """
    choose("cores", 2)
    background = background_working_set_bytes("cores")
    points = grid(background_op=["none", "read", "write"], op=["read", "write"],
                  working_set_bytes=sizes(quick))
    for point in points:
        point.update(threads=1, placement="cores", shared=False,
                     background_working_set_bytes=background)
    return _sweep("two_processes", points, quick, two_processes.__doc__.splitlines()[0])


def nontemporal(quick: bool = False) -> Sweep:
    """Write and copy with normal and non-temporal stores (what memset and memcpy switch to).

    >>> nontemporal(quick=True).name
    'nontemporal_quick'
    """
    return _sweep("nontemporal", grid(op=["write", "copy"], stores=list(STORES),
                                      working_set_bytes=sizes(quick)), quick,
                  nontemporal.__doc__.splitlines()[0])


def widths(quick: bool = False) -> Sweep:
    """Read at every width this CPU runs: the L1 plateau against the load ports.

    >>> widths(quick=True).name
    'widths_quick'
    """
    return _sweep("widths", grid(width=supported_widths(), working_set_bytes=sizes(quick)), quick,
                  widths.__doc__.splitlines()[0])


def _quick() -> Sweep:
    """Quick tour: read, write and copy at four working sets, then two threads writing one set."""
    points = grid(op=list(OPS), working_set_bytes=sizes(quick=True))
    if len(os.sched_getaffinity(0)) >= 2:
        points += grid(op=["write"], working_set_bytes=[16 << 10, 4 << 20], threads=[2],
                       placement=["cores"], shared=[True])
    return Sweep(name="quick", family="bandwidth", points=points, repeat=3, warmup=1,
                 target_seconds=0.03, description=_quick.__doc__)


#: Drepper's figures (and two more) by name; each also has a ``<name>_quick`` variant.
SWEEPS = {
    "fig3_24": one_thread,
    "fig3_25": two_threads_smt,
    "fig3_26": one_thread,
    "fig3_27": two_threads_cores,
    "fig3_28": one_thread,
    "fig3_29": two_threads_cores,
    "fig3_31": two_processes,
    "nontemporal": nontemporal,
    "widths": widths,
}


def _named(name: str, fn, quick: bool):
    def factory() -> Sweep:
        return dataclasses.replace(fn(quick=quick), name=name + ("_quick" if quick else ""))

    factory.__doc__ = fn.__doc__
    return factory


def workers_on_cpu(params: BandwidthParams) -> tuple[OnCpu, ...]:
    """Every worker thread moves bytes throughout; the calling thread only waits for them
    (``Family.on_cpu``).

    >>> sum(part.fraction for part in workers_on_cpu(BandwidthParams(threads=2)))
    2.0
    """
    return (*(OnCpu(f"worker thread {index}", 1.0) for index in range(params.threads)),
            OnCpu("the calling thread (waits for the workers)", 0.0))


#: A bandwidth run's cost beyond its samples, for estimates (``memlab reproduce --list``, the ETA):
#: a fixed part (the run loop's row, the threads) and a part per byte of every set (faulting and
#: filling it). Measured in the run loop on a 2-vCPU AMD EPYC guest (family 25 model 1), one
#: sample of 1 ms, load 2.5-3.7: 9-11 ms at 1 MiB, 31-33 ms at 16 MiB, 145-147 ms at 128 MiB and
#: 265-300 ms at 256 MiB with 4 KiB pages (read); 44-128 ms at 128 MiB and 77-244 ms at 256 MiB
#: with THP (copy). The flat 0.25 s before made a quick bandwidth point read twice what it took.
SETUP_SECONDS = 0.01
SETUP_SECONDS_PER_BYTE = 1.1e-9


def setup_seconds(params: BandwidthParams | Mapping[str, Any]) -> float:
    """About how long a run of a point takes beyond its samples (seconds): :data:`SETUP_SECONDS`
    plus :data:`SETUP_SECONDS_PER_BYTE` for every byte of every set (one a thread unless
    ``shared``, and the background worker's).

    >>> round(setup_seconds({"working_set_bytes": 1 << 27}), 3)
    0.158
    >>> round(setup_seconds({"working_set_bytes": 1 << 27, "threads": 2, "shared": False}), 3)
    0.305
    """
    p = FAMILY.params(params)
    sets = p.working_set_bytes * (1 if p.shared else p.threads)
    background = p.background_working_set_bytes if p.background_op != "none" else 0
    return SETUP_SECONDS + SETUP_SECONDS_PER_BYTE * (sets + background)


FAMILY = Family(
    name="bandwidth",
    params_type=BandwidthParams,
    core="bandwidth",
    to_core=_to_core,
    unit="byte",
    primary_metric="bytes_per_cycle",
    derive=_derive,
    sweeps={
        "quick": _quick,
        **{name: _named(name, fn, False) for name, fn in SWEEPS.items()},
        **{f"{name}_quick": _named(name, fn, True) for name, fn in SWEEPS.items()},
    },
    description="read / write / copy bandwidth in bytes per cycle, one or more threads (Drepper 3.5)",
    figure=figure,
    caption=CAPTION,
    report_columns=("GB_per_s", "bytes_per_cycle_total", "cpu_fraction"),
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.1,
    one_cpu="workers",
    on_cpu=workers_on_cpu,
    setup_seconds=setup_seconds,
)
