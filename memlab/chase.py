"""Pointer chase: Drepper's list-walking experiments (seed 004, 3.3.2, 6.3, 7.5).

A working set of ``working_set_bytes`` holds elements
``struct { next; uint64_t pad[npad]; }`` (8 * (npad + 1) bytes) linked into a
circular list (one per chain) and walked by a C loop that does nothing but
follow the pointers. The result is the time per element visited:
``ns_per_element`` and ``cycles_per_element``.

Orders: ``sequential`` (element i -> i + 1), ``random`` (one cycle through
all elements, Sattolo's shuffle seeded with ``seed``), ``random_blocks``
(each block of ``block_pages`` 4 KiB pages shuffled on its own, blocks
walked in turn: fig. 3.17). Layouts: ``packed`` or ``page_per_element``
(each element on its own 4 KiB page, the TLB test of fig. 3.12; elements sit
at different cache-line offsets of their pages so that the cache sets stay
spread as in the packed layout and only the TLB differs).

>>> m = run(working_set_bytes=16 << 10, npad=0, order="sequential", repeat=1, warmup=0,
...         target_seconds=0.01)
>>> m.median("ns_per_element") > 0
True
"""

from __future__ import annotations

import array
import dataclasses
import math
import os
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy

from memlab import placement, twins
from memlab._core import Kernel
from memlab.chase_analysis import cache_levels, caption, figure, format_cache_levels
from memlab.family import Family, OnCpu, check_bool, check_choice, check_cpu, check_int, coerce_fields
from memlab.grid import Sweep, grid
from memlab.machine import cache_sizes, numa_nodes, smt_siblings
from memlab.measure import Measurement

__all__ = [
    "QUICK_MAX_WORKING_SET_BYTES",
    "quick_sizes",
    "ORDERS",
    "LAYOUTS",
    "OPS",
    "PAGE_KINDS",
    "THREAD_LISTS",
    "FIG3_17_BLOCK_PAGES",
    "ChaseParams",
    "FAMILY",
    "run",
    "element_bytes",
    "element_count",
    "total_chains",
    "trace",
    "reference_successors",
    "reference_pad0",
    "cache_levels",
    "caption",
    "figure",
    "format_cache_levels",
    "thread_cpus",
    "usable_cpus",
    "SWEEPS",
    "fig3_4",
    "fig3_10",
    "fig3_11",
    "fig3_12",
    "fig3_13",
    "fig3_15",
    "fig3_16",
    "fig3_17",
    "fig3_19",
    "fig3_20",
    "fig3_21",
    "fig3_30",
    "fig5_3",
    "fig6_2",
    "fig6_4",
    "fig6_5",
    "fig6_7",
    "fig6_8",
    "fig7_1",
    "fig7_9",
]

ORDERS = ("sequential", "random", "random_blocks")
LAYOUTS = ("packed", "page_per_element")
OPS = ("follow", "inc", "addnext0", "addnextlast", "addpair")
PAGE_KINDS = ("4k", "thp", "hugetlb-2m")
THREAD_LISTS = ("shared", "own")
MAX_CHAINS = 16
MAX_THREADS = 64
DEFAULT_NPAD = 7
#: Fig. 3.17's block sizes in 4 KiB pages: 60, 120, 240 ... 61440.
FIG3_17_BLOCK_PAGES = [60 << k for k in range(11)]
PAGE_BYTES = 4096
LINE_BYTES = 64


@dataclass(frozen=True)
class ChaseParams:
    """Parameters of one chase.

    - ``working_set_bytes``: bytes of elements per list (the page_per_element
      layout and ``element_distance`` map more memory and do not count it).
    - ``npad``: pad words per element (0, 7, 15, 31 give 8, 64, 128, 256 B;
      default 7). ``element_bytes`` asks for the element size in bytes
      instead (a multiple of 8; 0: from npad) and sets npad to match: the
      source's 32-bit NPAD=31 is ``element_bytes=128``.
    - ``order``, ``block_pages`` (random_blocks only), ``layout``.
    - ``op``: ``follow``; ``inc`` (pad[0]++); ``addnext0``
      (pad[0] += next->pad[0]); ``addnextlast`` (pad[0] += the next
      element's last pad word); ``addpair`` (adds pad[0] and word
      ``pair_word`` of the same element into a register). All but follow
      need npad >= 1, addpair npad >= 2.
    - ``work_cycles``: dependent one-cycle adds per element before moving on.
    - ``prefetch_distance``: software prefetch of every line of the element
      this many elements ahead (0: off).
    - ``helper_thread``: a second thread walks up to ``helper_distance``
      elements ahead reading every line of each element, pinned to
      ``helper_cpu`` (-1: the walking CPU's SMT sibling where there is one,
      else another CPU: :func:`memlab.placement.beside`; the row says which).
    - ``pages``: ``4k``, ``thp`` or ``hugetlb-2m``; ``strict_pages`` makes a
      refused hugetlb request an error instead of a fallback to 4 KiB pages.
    - ``chains``: independent lists (the working set split between them)
      walked interleaved in one loop: memory-level parallelism.
    - ``pointer_word``: the word of each element that holds ``next`` (0: the
      first; npad: the last, fig. 3.30's critical word); follow only.
    - ``misalign_bytes``: every element starts this many bytes past its
      natural place (0..63, fig. 6.4).
    - ``element_distance``: element slots from one element to the next (1:
      packed; 64 with 64-byte elements puts them 4 KiB apart, fig. 6.5).
    - ``threads``: walking threads, each pinned to its own CPU (one per core
      first, then SMT siblings: :func:`memlab.placement.spread`, from
      ``walk_cpu`` when given); ``thread_lists``: ``shared`` (all walk the one list from evenly
      spaced starts, as the source) or ``own`` (a list of working_set_bytes
      each). The time reported is the fastest thread's, as in the source.
    - ``walk_cpu``: pin the walking thread to this CPU (-1: where it runs,
      or with threads or a helper, where :mod:`memlab.placement` puts it).
      ``run(cpu=N)`` is ``walk_cpu=N``.

    Python chooses every CPU (:func:`thread_cpus`); the C family receives the list
    and only pins the threads to it and checks it.
    - ``memory_node``: bind the list's memory to this NUMA node with mbind
      (-1: the kernel's default, first touch).
    - ``seed``: the shuffle's seed. ``laps``: fixed laps per sample (0:
      adapt the step count to the sample's target duration).
    - ``check``: after each sample, count visits on two laps and report
      ``check_*`` metrics and a ``checksum`` of the list's memory.
    """

    working_set_bytes: int = 1 << 20
    npad: int | None = None
    order: str = "random"
    block_pages: int = 1
    layout: str = "packed"
    op: str = "follow"
    work_cycles: int = 0
    prefetch_distance: int = 0
    helper_thread: bool = False
    helper_distance: int = 100
    helper_cpu: int = -1
    pages: str = "4k"
    strict_pages: bool = False
    chains: int = 1
    seed: int = 1
    laps: int = 0
    check: bool = False
    element_bytes: int = 0
    pair_word: int = 2
    pointer_word: int = 0
    misalign_bytes: int = 0
    element_distance: int = 1
    threads: int = 1
    thread_lists: str = "shared"
    walk_cpu: int = -1
    memory_node: int = -1

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("working_set_bytes", self.working_set_bytes, 8, 1 << 46)
        self._resolve_npad()
        check_choice("order", self.order, ORDERS)
        check_int("block_pages", self.block_pages, 1, 1 << 40)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("op", self.op, OPS)
        check_int("work_cycles", self.work_cycles, 0, 1_000_000)
        check_int("prefetch_distance", self.prefetch_distance, 0, 1 << 20)
        check_bool("helper_thread", self.helper_thread)
        check_int("helper_distance", self.helper_distance, 1, 1 << 24)
        check_int("helper_cpu", self.helper_cpu, -1, 1023)
        if self.helper_thread:
            if self.helper_cpu != -1:
                check_cpu("helper_cpu", self.helper_cpu)
            elif len(os.sched_getaffinity(0)) < 2:
                raise ValueError(
                    "helper_thread=True needs a second CPU, and this process may run on one only "
                    f"(CPU {min(os.sched_getaffinity(0))}): the helper would run where its caller may not"
                )
        check_choice("pages", self.pages, PAGE_KINDS)
        check_bool("strict_pages", self.strict_pages)
        check_int("chains", self.chains, 1, MAX_CHAINS)
        check_int("seed", self.seed, 0, (1 << 63) - 1)
        check_int("laps", self.laps, 0, 1 << 40)
        check_bool("check", self.check)
        check_int("pair_word", self.pair_word, 2, 65535)
        check_int("pointer_word", self.pointer_word, 0, 65535)
        check_int("misalign_bytes", self.misalign_bytes, 0, LINE_BYTES - 1)
        check_int("element_distance", self.element_distance, 1, 1 << 16)
        check_int("threads", self.threads, 1, MAX_THREADS)
        check_choice("thread_lists", self.thread_lists, THREAD_LISTS)
        check_int("walk_cpu", self.walk_cpu, -1, 1023)
        if self.walk_cpu != -1:
            check_cpu("walk_cpu", self.walk_cpu)
        usable = sorted(os.sched_getaffinity(0))
        if self.threads > len(usable):
            raise ValueError(f"threads={self.threads} needs as many CPUs; this process may use {len(usable)} "
                             f"({','.join(map(str, usable))})")
        check_int("memory_node", self.memory_node, -1, 1023)
        self._check_combinations()

    def _resolve_npad(self) -> None:
        """npad from element_bytes when asked in bytes; the two must agree when both are given."""
        check_int("element_bytes", self.element_bytes, 0, 8 << 16)
        if self.element_bytes and self.element_bytes % 8:
            raise ValueError(f"element_bytes={self.element_bytes} is not a multiple of 8 "
                             "(an element is 8-byte words: next and npad pad words)")
        if self.npad is not None:
            check_int("npad", self.npad, 0, 65535)
        if self.element_bytes:
            implied = self.element_bytes // 8 - 1
            if self.npad is not None and self.npad != implied:
                raise ValueError(f"element_bytes={self.element_bytes} means npad={implied}, "
                                 f"not npad={self.npad}; give one of the two")
            object.__setattr__(self, "npad", implied)
        elif self.npad is None:
            object.__setattr__(self, "npad", DEFAULT_NPAD)

    def _check_combinations(self) -> None:
        size = element_bytes(self.npad)
        if self.working_set_bytes < size:
            raise ValueError(
                f"working_set_bytes={self.working_set_bytes} is smaller than one element "
                f"of {size} bytes (npad={self.npad})"
            )
        if self.working_set_bytes // size < self.chains:
            raise ValueError(
                f"working_set_bytes={self.working_set_bytes} holds "
                f"{self.working_set_bytes // size} elements of {size} bytes, "
                f"fewer than chains={self.chains}"
            )
        if self.op in ("inc", "addnext0", "addnextlast") and self.npad < 1:
            raise ValueError(f"op={self.op} needs npad >= 1 (it writes pad[0]); npad={self.npad}")
        if self.op == "addpair" and not 2 <= self.pair_word <= self.npad:
            raise ValueError(f"op=addpair adds pad[0] (word 1) and word pair_word={self.pair_word}, "
                             f"which must be in 2..{self.npad} for npad={self.npad}")
        if self.pointer_word > self.npad:
            raise ValueError(f"pointer_word={self.pointer_word} is outside the element's words "
                             f"0..{self.npad} (npad={self.npad})")
        if self.pointer_word and (self.op != "follow" or self.prefetch_distance or self.helper_thread):
            raise ValueError(f"pointer_word={self.pointer_word} needs op=follow without prefetch or "
                             "helper thread (they address the element from its first word)")
        if self.element_distance > 1 and self.layout != "packed":
            raise ValueError(f"element_distance={self.element_distance} needs layout=packed")
        if self.threads > 1 and self.helper_thread:
            raise ValueError(f"helper_thread=True needs threads=1 (threads={self.threads})")


def element_bytes(npad: int) -> int:
    """Bytes of one element: the next pointer and npad 8-byte pad words.

    >>> element_bytes(7)
    64
    """
    return 8 * (npad + 1)


#: A chase run's cost beyond its samples, for estimates (``memlab reproduce --list``, the ETA): a
#: fixed part (the run loop's row, the machine check, the thread) and a part per byte of list
#: (building it in its order, the first touch). Measured on a 2-vCPU AMD EPYC guest (family 25
#: model 1), one sample of 1 ms: 3 ms at 1 KiB, 38 ms at 16 MiB, 217-266 ms at 128 MiB alone, and
#: 70 ms a run of figure 6.5's points (four 10 ms samples) in the run loop.
SETUP_SECONDS = 0.03
SETUP_SECONDS_PER_BYTE = 2e-9


def setup_seconds(params: ChaseParams | Mapping[str, Any]) -> float:
    """About how long a run of a point takes beyond its samples (seconds): :data:`SETUP_SECONDS`
    plus :data:`SETUP_SECONDS_PER_BYTE` for every byte of every list.

    >>> round(setup_seconds({"working_set_bytes": 1 << 27}), 3)
    0.298
    """
    p = FAMILY.params(params)
    return SETUP_SECONDS + SETUP_SECONDS_PER_BYTE * p.working_set_bytes * total_chains(p)


def total_chains(params: ChaseParams | Mapping[str, Any]) -> int:
    """Lists in memory: ``chains``, times ``threads`` when each thread has its own.

    >>> total_chains({"chains": 2, "threads": 2, "thread_lists": "own"})
    4
    """
    p = FAMILY.params(params)
    return p.chains * (p.threads if p.thread_lists == "own" else 1)


def element_count(params: ChaseParams | Mapping[str, Any]) -> int:
    """Elements in memory: the working set's worth per list, equal per chain.

    >>> element_count({"working_set_bytes": 1000 * 64, "npad": 7, "chains": 3})
    999
    """
    p = FAMILY.params(params)
    per_chain = p.working_set_bytes // element_bytes(p.npad) // p.chains
    return per_chain * total_chains(p)


def thread_cpus(params: ChaseParams | Mapping[str, Any], cpu: int | None = None) -> list[int]:
    """The CPUs of the chase's threads, as the C family receives them: the walking thread's
    (-1: unpinned, a lone walking thread only), then the other walking threads' or the helper's.
    ``cpu`` (``run(cpu=...)``) is the walking thread's.

    >>> thread_cpus({"walk_cpu": -1})
    [-1]
    """
    p = FAMILY.params(params)
    walk = None if p.walk_cpu == -1 else p.walk_cpu
    if cpu is not None:
        if p.threads > 1:
            raise placement.cpu_not_applicable("chase", cpu, f"its {p.threads} walking threads need a CPU each "
                                               "(place the first with walk_cpu=)")
        if walk is not None and walk != cpu:
            raise ValueError(f"cpu={cpu} and walk_cpu={walk} both place the walking thread: give one")
        walk = cpu
    if p.helper_thread:
        helper = None if p.helper_cpu == -1 else p.helper_cpu
        if walk is None and helper is None:
            return placement.choose("two_cpus", 2)  # an SMT pair where there is one
        if walk is None:
            walk = placement.beside(helper)
        if helper is None:
            helper = placement.beside(walk)
        if helper == walk:
            raise ValueError(f"helper_cpu={helper} is the CPU of the walking thread; choose another one")
        return [walk, helper]
    if p.threads > 1:
        return placement.spread(p.threads, first=walk)
    return [-1 if walk is None else walk]


def _to_core(params: ChaseParams, cpu: int | None = None) -> dict[str, Any]:
    """The C config: every parameter but element_bytes (npad already says it) and the CPUs,
    which go as one list (:func:`thread_cpus`)."""
    config = dataclasses.asdict(params)
    for name in ("element_bytes", "walk_cpu", "helper_cpu"):
        del config[name]
    config["cpus"] = array.array("i", thread_cpus(params, cpu))
    return config


def _derive(params: ChaseParams, values: dict[str, float]) -> dict[str, float]:
    """Per element on the CPU: the walk's time while it really ran.

    ``ns_per_element`` is wall-clock; on a shared machine the walking thread
    may be descheduled, so ``on_cpu_fraction`` (thread CPU time / elapsed)
    says how much to trust it, and ``cpu_ns_per_element`` excludes the gaps.
    """
    derived: dict[str, float] = {}
    cpu_ns, elapsed = values.get("thread_cpu_ns"), values.get("elapsed_ns")
    units = values.get("elements_per_s", 0.0) * (elapsed or 0.0) / 1e9
    if cpu_ns and elapsed and units > 0:
        derived["on_cpu_fraction"] = cpu_ns / elapsed
        derived["cpu_ns_per_element"] = cpu_ns / units
    if "build_ns" in values:
        derived["build_seconds"] = values["build_ns"] / 1e9
    return derived


def run(params: ChaseParams | dict | None = None, **options: Any) -> Measurement:
    """Walk the list; ``ns_per_element`` and ``cycles_per_element`` per sample.

    Keywords not taken by :meth:`memlab.family.Family.run` (repeat, warmup,
    cpu, target_seconds, counters) are parameters of :class:`ChaseParams`.
    Metrics besides the per-element times: ``elements``, ``laps``,
    ``build_ns`` (time to build the list), ``huge_page_fraction`` and, with
    ``check=True``, ``check_visits_fewest``/``most`` and ``checksum``.

    >>> m = run(working_set_bytes=64 << 10, order="random", check=True, laps=2,
    ...         repeat=1, warmup=0)
    >>> m.median("check_visits_fewest") == m.median("check_visits_most") == 2
    True
    """
    return FAMILY.run(params, **options)


# ---- the list itself: trace from C, reference in Python ----------------------


def trace(params: ChaseParams | dict | None = None, **overrides: Any) -> dict[str, Any]:
    """Build the list in C, walk ``laps`` laps with the measured loops, return it.

    Returns ``successors`` (numpy uint64: the index each element links to),
    ``pad0`` (each element's pad[0] after the walk; it starts at index + 1),
    ``element_offsets`` (bytes from the region's line-aligned start to each
    element's first byte), ``chain_starts`` (first element of every list in
    memory), and per walking chain (thread t's chain c is number
    t * chains + c) ``walk_starts`` and ``positions`` (where it started and
    stopped).

    >>> t = trace(working_set_bytes=4096, npad=7, order="sequential", laps=1)
    >>> t["successors"][:3].tolist(), t["element_offsets"][:3].tolist()
    ([1, 2, 3], [0, 64, 128])
    """
    p = FAMILY.params(params, **overrides)
    n = element_count(p)
    out = numpy.zeros(3 * n, dtype=numpy.uint64)
    config = dict(_to_core(p), out=out)
    with Kernel("chase_trace", config) as kernel:
        sample = kernel.measure(target_ns=0, counters=False)
    metrics = sample["metrics"]
    chain = n // total_chains(p)
    walking = range(p.threads * p.chains)
    return {
        "successors": out[:n].copy(),
        "pad0": out[n:2 * n].copy(),
        "element_offsets": out[2 * n:].copy(),
        "base_line_offset": int(metrics["base_line_offset"]),
        "chain_starts": [c * chain for c in range(total_chains(p))],
        "walk_starts": [int(metrics[f"start_{c}"]) for c in walking if f"start_{c}" in metrics],
        "positions": [int(metrics[f"position_{c}"]) for c in walking if f"position_{c}" in metrics],
        "steps_per_chain": int(metrics["steps_per_chain"]),
    }


def reference_successors(params: ChaseParams | dict | None = None, **overrides: Any) -> list[int]:
    """The list the C kernel builds, computed in Python (the oracle for tests).

    Element i links to ``result[i]``. Chains own equal consecutive ranges of
    elements; random_blocks shuffles each block into a path from its first
    element to the next block's first element (:func:`memlab.twins.chase_successors`).

    >>> reference_successors(working_set_bytes=1024, npad=31, order="sequential")
    [1, 2, 3, 0]
    """
    p = FAMILY.params(params, **overrides)
    stride = element_bytes(p.npad)
    if p.layout == "page_per_element":
        stride = -(-stride // PAGE_BYTES) * PAGE_BYTES
    block = max(1, p.block_pages * PAGE_BYTES // stride)
    return twins.chase_successors(element_count(p), total_chains(p), p.order, block, p.seed)


def reference_pad0(params: ChaseParams | dict | None, successors: Sequence[int], laps: int) -> list[int]:
    """pad[0] of every element after ``laps`` laps of ``op``, computed in Python.

    pad[0] starts at index + 1; ``inc`` adds 1 per visit, ``addnext0`` adds
    the next element's pad[0] (modulo 2**64), ``addnextlast`` the next
    element's last pad word (which also starts at index + 1 when npad >= 2),
    ``follow`` and ``addpair`` change nothing (:func:`memlab.twins.chase_pad0`).

    >>> reference_pad0({"working_set_bytes": 1024, "npad": 63, "op": "inc",
    ...                 "order": "sequential"}, [1, 0], laps=3)
    [4, 5]
    """
    p = FAMILY.params(params)
    if p.threads > 1 and p.thread_lists == "shared" and p.op not in ("follow", "addpair"):
        raise ValueError("threads > 1 on one shared list update pad[0] in a race: no reference exists")
    return twins.chase_pad0(successors, total_chains(p), p.op, laps, p.npad)


# ---- the seed's figures as named sweeps ---------------------------------------


def _sizes(low_log2: int, high_log2: int, per_octave: int = 1) -> list[int]:
    """Working sets 2**low .. 2**high with per_octave points per doubling."""
    sizes = []
    for k in range(low_log2 * per_octave, high_log2 * per_octave + 1):
        sizes.append(int(round(2 ** (k / per_octave) / 64)) * 64)
    return sorted(set(sizes))


#: The largest working set a quick sweep measures, whatever the last cache (bytes): past the
#: L3 of most CPUs, and a random walk of it still takes seconds, not minutes, on a loaded VM
#: (a VM may report its host's whole L3, 480 MiB here: only FULL sweeps pass that).
QUICK_MAX_WORKING_SET_BYTES = 1 << 27


def quick_sizes(caches: Mapping[str, int] | None = None, low_log2: int = 12) -> list[int]:
    """Working sets of a quick sweep that go past the last cache: 2^low_log2, every other
    doubling up to the last cache, and the first power of two beyond it (at most
    :data:`QUICK_MAX_WORKING_SET_BYTES`, 128 MiB).

    A quick sweep must still show what it is about: the step past the last
    cache (main memory) as well as the ones past L1 and L2. ``caches`` are
    sizes in bytes by name (default: this machine's,
    :func:`memlab.machine.cache_sizes`); without any, 2^24 stands in.

    >>> [s >> 10 for s in quick_sizes({"L1d": 48 << 10, "L2": 2 << 20, "L3": 30 << 20})]
    [4, 16, 64, 256, 1024, 4096, 16384, 32768]
    """
    sizes = cache_sizes() if caches is None else dict(caches)
    last = max((v for k, v in sizes.items() if k != "L1i" and isinstance(v, int) and v > 0), default=1 << 23)
    top_log2 = min(max(low_log2 + 2, last.bit_length()), QUICK_MAX_WORKING_SET_BYTES.bit_length() - 1)
    if (1 << top_log2) <= last and top_log2 < QUICK_MAX_WORKING_SET_BYTES.bit_length() - 1:
        top_log2 += 1
    return sorted({1 << e for e in range(low_log2, top_log2, 2)} | {1 << top_log2})


def _sweep(name: str, points: list[dict[str, Any]], quick: bool, description: str, repeat: int = 5) -> Sweep:
    return Sweep(
        name=name + ("_quick" if quick else ""),
        family="chase",
        points=points,
        repeat=2 if quick else repeat,
        warmup=0 if quick else 1,  # building the list has touched every element already
        target_seconds=0.02 if quick else 0.1,
        description=(description or "").split("\n\n")[0].strip(),
    )


def fig3_10(quick: bool = False):
    """Fig. 3.10: sequential read, NPAD=0: flat at the L1 latency, low everywhere.

    >>> fig3_10(quick=True).name
    'fig3_10_quick'
    """
    sizes = _sizes(10, 20, 1)[::2] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_10", grid(working_set_bytes=sizes, npad=[0], order=["sequential"]), quick,
                  _doc(fig3_10))


def fig3_11(quick: bool = False):
    """Fig. 3.11: sequential read for element sizes 8, 64, 128, 256 bytes.

    >>> fig3_11(quick=True).name
    'fig3_11_quick'
    """
    sizes = quick_sizes() if quick else _sizes(10, 28, 2)
    return _sweep("fig3_11", grid(npad=[0, 7, 15, 31], working_set_bytes=sizes, order=["sequential"]),
                  quick, _doc(fig3_11))


def fig3_12(quick: bool = False):
    """Fig. 3.12: TLB influence, sequential NPAD=7 packed vs one element per page.

    >>> fig3_12(quick=True).name
    'fig3_12_quick'
    """
    sizes = [1 << 10, 1 << 13, 1 << 16] if quick else _sizes(10, 24, 2)
    return _sweep("fig3_12", grid(layout=["packed", "page_per_element"], working_set_bytes=sizes,
                                  npad=[7], order=["sequential"]), quick, _doc(fig3_12))


def fig3_13(quick: bool = False):
    """Fig. 3.13: sequential follow / inc / addnext0 with 16-byte elements (NPAD=1).

    >>> fig3_13(quick=True).name
    'fig3_13_quick'
    """
    sizes = [1 << 12, 1 << 18, 1 << 24] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_13", grid(op=["follow", "inc", "addnext0"], working_set_bytes=sizes, npad=[1], order=["sequential"]),
                  quick, _doc(fig3_13))


def fig3_15(quick: bool = False):
    """Fig. 3.15: sequential vs random read, NPAD=0: random keeps climbing.

    >>> fig3_15(quick=True).name
    'fig3_15_quick'
    """
    sizes = quick_sizes() if quick else _sizes(10, 28, 2)
    return _sweep("fig3_15", grid(order=["sequential", "random"], working_set_bytes=sizes, npad=[0]),
                  quick, _doc(fig3_15))


def fig3_4(quick: bool = False):
    """Fig. 3.4: random writes (inc, 64-byte elements): cycles per element by cache level, log scale.

    >>> fig3_4(quick=True).name
    'fig3_4_quick'
    """
    sizes = [1 << 12, 1 << 18, 1 << 24] if quick else _sizes(10, 28, 2)
    return _sweep("fig3_4", grid(working_set_bytes=sizes, npad=[7], order=["random"], op=["inc"]), quick,
                  _doc(fig3_4))


def fig3_16(quick: bool = False):
    """Fig. 3.16 / table 3.2: last-level cache miss ratio of sequential and random NPAD=0 walks (PMU).

    >>> fig3_16(quick=True).name
    'fig3_16_quick'
    """
    sizes = [1 << 14, 1 << 20, 1 << 24] if quick else _sizes(10, 29, 1)
    return _sweep("fig3_16", grid(order=["sequential", "random"], working_set_bytes=sizes, npad=[0]), quick,
                  _doc(fig3_16) + _counter_note())


def fig3_17(quick: bool = False):
    """Fig. 3.17: random within blocks of 60 .. 61440 pages (x2 each), NPAD=7, and the whole list (inf).

    >>> fig3_17(quick=True).name
    'fig3_17_quick'
    """
    if quick:
        blocks = grid(order=["random_blocks"], block_pages=[60, 960], working_set_bytes=[1 << 16, 1 << 22])
        whole = grid(order=["random"], working_set_bytes=[1 << 16, 1 << 22])
    else:
        sizes = _sizes(10, 28, 1)
        blocks = grid(order=["random_blocks"], block_pages=FIG3_17_BLOCK_PAGES, working_set_bytes=sizes)
        whole = grid(order=["random"], working_set_bytes=sizes)
    points = [dict(p, npad=7) for p in blocks + whole]
    return _sweep("fig3_17", points, quick, _doc(fig3_17))


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity), sorted.

    >>> len(usable_cpus()) >= 1
    True
    """
    return sorted(os.sched_getaffinity(0))


def _thread_counts(wanted: Sequence[int] = (1, 2, 4)) -> tuple[list[int], str]:
    """The source's thread counts this machine can run, and a note naming the others."""
    cpus = len(usable_cpus())
    counts = [t for t in wanted if t <= cpus]
    missing = [t for t in wanted if t > cpus]
    note = ""
    if missing:
        note = (f" Not measured here: threads={', '.join(map(str, missing))} "
                f"(this process may use {cpus} CPU{'s' if cpus != 1 else ''}).")
    return counts, note


def _threads_sweep(name: str, doc: str, quick: bool, **point: Any):
    counts, note = _thread_counts()
    sizes = [1 << 14, 1 << 20, 1 << 25] if quick else _sizes(10, 28, 1)
    # threads vary fastest: 1 and 2 (and 4) threads of one working set are measured back to back,
    # so that the speed-up compares runs the machine's other load hit alike
    points = [dict(p, element_bytes=128, thread_lists="shared", **point)
              for p in grid(working_set_bytes=sizes, threads=counts)]
    return _sweep(name, points, quick, doc + note)


def fig3_19(quick: bool = False):
    """Fig. 3.19: sequential read of 128-byte elements by 1, 2 and 4 threads on one list (fastest thread).

    >>> fig3_19(quick=True).name
    'fig3_19_quick'
    """
    return _threads_sweep("fig3_19", _doc(fig3_19), quick, order="sequential", op="follow")


def fig3_20(quick: bool = False):
    """Fig. 3.20: sequential increment (inc) of 128-byte elements by 1, 2 and 4 threads on one list.

    >>> fig3_20(quick=True).name
    'fig3_20_quick'
    """
    return _threads_sweep("fig3_20", _doc(fig3_20), quick, order="sequential", op="inc")


def fig3_21(quick: bool = False):
    """Fig. 3.21 (with 3.22 and table 3.3): random addnextlast on 128-byte elements by 1, 2 and 4 threads.

    >>> fig3_21(quick=True).name
    'fig3_21_quick'
    """
    return _threads_sweep("fig3_21", _doc(fig3_21), quick, order="random", op="addnextlast")


def fig3_30(quick: bool = False):
    """Fig. 3.30: the critical word: next pointer in the first vs the last word of a 64-byte element.

    >>> fig3_30(quick=True).name
    'fig3_30_quick'
    """
    sizes = [1 << 14, 1 << 20, 1 << 26] if quick else _sizes(10, 28, 1)
    # pointer_word varies fastest: the two placements of one size are measured back to back
    points = grid(order=["sequential", "random"], working_set_bytes=sizes, pointer_word=[0, 7])
    return _sweep("fig3_30", [dict(p, npad=7) for p in points], quick, _doc(fig3_30), repeat=9)


def _numa_pairs() -> tuple[list[dict[str, Any]], str]:
    """(walk_cpu, memory_node) for every node with usable CPUs against every node with memory."""
    nodes = numa_nodes()
    allowed = set(usable_cpus())
    memory = [n["node"] for n in nodes if n["has_memory"]]
    pairs = []
    for node in nodes:
        cpus = sorted(allowed & set(node["cpus"]))
        if cpus:
            pairs += [{"walk_cpu": cpus[0], "memory_node": target} for target in memory]
    if len(memory) == 1:
        note = (f" This machine has one NUMA node with memory (node {memory[0]}): there is no remote "
                "memory, so only node-local access (0 hops) is measured.")
    else:
        note = f" Nodes with memory: {', '.join(map(str, memory))}; hops are ranked from the SLIT distances."
    return pairs, note


def fig5_3(quick: bool = False):
    """Figs. 5.3/5.4: read (follow) and write (inc) cost by NUMA distance, memory bound with mbind.

    >>> fig5_3(quick=True).name
    'fig5_3_quick'
    """
    pairs, note = _numa_pairs()
    sizes = [1 << 14, 1 << 24] if quick else _sizes(10, 28, 1)
    # the node pairs vary fastest: local and remote of one point are measured back to back
    points = [dict(pair, **p, npad=7)
              for p in grid(op=["follow", "inc"], order=["random", "sequential"], working_set_bytes=sizes)
              for pair in pairs]
    return _sweep("fig5_3", points, quick, _doc(fig5_3) + note)


def fig6_2(quick: bool = False):
    """Fig. 6.2: two values added from one element: both in its first line vs first and last line.

    >>> fig6_2(quick=True).name
    'fig6_2_quick'
    """
    sizes = [1 << 14, 1 << 20, 1 << 26] if quick else _sizes(10, 28, 1)
    points = []
    for order, lines in (("sequential", 4), ("random", 2), ("random", 4)):
        element = lines * LINE_BYTES
        for size in sizes:
            for pair_word in (2, (element - LINE_BYTES) // 8):
                points.append(dict(order=order, element_bytes=element, working_set_bytes=size, op="addpair",
                                   pair_word=pair_word))
    return _sweep("fig6_2", points, quick, _doc(fig6_2), repeat=7)


def fig6_4(quick: bool = False):
    """Fig. 6.4: inc on 16-byte elements, aligned vs 4 bytes off (a quarter of the pad[0]s straddle lines).

    >>> fig6_4(quick=True).name
    'fig6_4_quick'
    """
    sizes = [1 << 14, 1 << 20, 1 << 26] if quick else _sizes(10, 28, 1)
    points = grid(order=["sequential", "random"], working_set_bytes=sizes, misalign_bytes=[0, 4])
    return _sweep("fig6_4", [dict(p, npad=1, op="inc") for p in points], quick, _doc(fig6_4), repeat=7)


#: Fig. 6.5's quick distances: around one and two 4 KiB ways, and a few others.
FIG6_5_DISTANCES_QUICK = (1, 2, 3, 8, 16, 32, 48, 63, 64, 65, 96, 127, 128)


def fig6_5(quick: bool = False):
    """Fig. 6.5: lists of 1..16 64-byte elements placed 1..128 elements apart: L1d sets and ways.

    >>> fig6_5(quick=True).name
    'fig6_5_quick'
    """
    distances = list(FIG6_5_DISTANCES_QUICK if quick else range(1, 129))
    points = [dict(element_distance=p["element_distance"], working_set_bytes=64 * p["length"], npad=7,
                   order="sequential")
              for p in grid(element_distance=distances, length=range(1, 17))]
    return Sweep(name="fig6_5_quick" if quick else "fig6_5", family="chase", points=points,
                 repeat=2 if quick else 3, warmup=1, target_seconds=0.004 if quick else 0.01,
                 description=_doc(fig6_5))


def fig6_7(quick: bool = False):
    """Fig. 6.7: random 128-byte elements (the source's NPAD=31 on 32 bits), 160 cycles of work, prefetch 0 vs 5.

    >>> fig6_7(quick=True).name
    'fig6_7_quick'
    """
    sizes = [1 << 14, 1 << 22] if quick else _sizes(10, 28, 1)
    return _sweep("fig6_7", grid(prefetch_distance=[0, 5], working_set_bytes=sizes, element_bytes=[128],
                                 order=["random"], work_cycles=[160]), quick, _doc(fig6_7))


def fig6_8(quick: bool = False):
    """Fig. 6.8: fig. 6.7 plus a helper thread ~100 elements ahead, on the SMT sibling where there is one.

    >>> fig6_8(quick=True).name
    'fig6_8_quick'
    """
    sizes = [1 << 14, 1 << 22] if quick else _sizes(10, 28, 1)
    plain = grid(prefetch_distance=[0, 5], working_set_bytes=sizes)
    helper = grid(helper_thread=[True], working_set_bytes=sizes)
    points = [dict(p, element_bytes=128, order="random", work_cycles=160) for p in plain + helper]
    return _sweep("fig6_8", points, quick, _doc(fig6_8) + _smt_note())


def _smt_note() -> str:
    cpus = usable_cpus()
    with_sibling = [c for c in cpus if (set(smt_siblings(c)) & set(cpus)) - {c}]
    if with_sibling:
        return " The helper runs on the walking CPU's SMT sibling, as in the source."
    return (" This machine has no usable SMT sibling: the helper runs on another core "
            "(the source ran it on the sibling hyper-thread).")


def _counter_note() -> str:
    return (" Needs the hardware counters (cycles, instructions, cache references/misses); where the PMU "
            "refuses them the walk is still measured and the figure says which are missing and why.")


def fig7_1(quick: bool = False):
    """Figs. 7.1-7.3: cycles per instruction and cache/TLB misses per instruction, random and sequential NPAD=0.

    >>> fig7_1(quick=True).name
    'fig7_1_quick'
    """
    sizes = [1 << 14, 1 << 20, 1 << 24] if quick else _sizes(10, 28, 1)
    return _sweep("fig7_1", grid(order=["random", "sequential"], working_set_bytes=sizes, npad=[0]), quick,
                  _doc(fig7_1) + _counter_note())


def fig7_9(quick: bool = False):
    """Fig. 7.9: random NPAD=0 with 4 KiB pages, THP and hugetlb 2 MiB, 2**10 .. 2**29 (memory permitting).

    >>> fig7_9(quick=True).name
    'fig7_9_quick'
    """
    sizes = [1 << 16, 1 << 20, 1 << 24] if quick else _sizes(10, 29, 1)
    return _sweep("fig7_9", grid(pages=list(PAGE_KINDS), working_set_bytes=sizes, npad=[0],
                                 order=["random"]), quick, _doc(fig7_9))


def _doc(fn) -> str:
    """A sweep's description: the first line of its docstring."""
    return (fn.__doc__ or "").strip().splitlines()[0]


def _quick():
    """Quick tour: random and sequential NPAD=7 from L1 to main memory (the family's "quick")."""
    return Sweep(
        name="quick",
        family="chase",
        points=grid(order=["sequential", "random"], working_set_bytes=[1 << 14, 1 << 18, 1 << 22, 1 << 26],
                    npad=[7]),
        repeat=3,
        warmup=1,
        target_seconds=0.05,
        description=_quick.__doc__,
    )


SWEEPS = {
    "fig3_4": fig3_4,
    "fig3_10": fig3_10,
    "fig3_11": fig3_11,
    "fig3_12": fig3_12,
    "fig3_13": fig3_13,
    "fig3_15": fig3_15,
    "fig3_16": fig3_16,
    "fig3_17": fig3_17,
    "fig3_19": fig3_19,
    "fig3_20": fig3_20,
    "fig3_21": fig3_21,
    "fig3_30": fig3_30,
    "fig5_3": fig5_3,
    "fig6_2": fig6_2,
    "fig6_4": fig6_4,
    "fig6_5": fig6_5,
    "fig6_7": fig6_7,
    "fig6_8": fig6_8,
    "fig7_1": fig7_1,
    "fig7_9": fig7_9,
}


def _named(fn, quick: bool):
    def factory():
        return fn(quick=quick)

    factory.__doc__ = fn.__doc__
    return factory


def walkers_on_cpu(params: ChaseParams) -> tuple[OnCpu, ...]:
    """Every walking thread walks throughout; the helper thread waits whenever it is
    ``helper_distance`` elements ahead, so it is not counted on (``Family.on_cpu``).

    >>> [part.fraction for part in walkers_on_cpu(ChaseParams(threads=1))]
    [1.0]
    """
    walkers = tuple(OnCpu(f"walking thread {index}", 1.0) for index in range(params.threads))
    return walkers + ((OnCpu("the helper thread (waits when it is far enough ahead)", 0.0),)
                      if params.helper_thread else ())


FAMILY = Family(
    name="chase",
    params_type=ChaseParams,
    core="chase",
    to_core=_to_core,
    unit="element",
    primary_metric="ns_per_element",
    derive=_derive,
    sweeps={
        "quick": _quick,
        **{name: _named(fn, False) for name, fn in SWEEPS.items()},
        **{f"{name}_quick": _named(fn, True) for name, fn in SWEEPS.items()},
    },
    description="pointer chase through a circular list (Drepper 3.3, 3.5.2, 5.4, 6.2, 6.3, 7.1, 7.5)",
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.1,
    figure=figure,
    caption=caption,
    report_columns=("cycles_per_element",),
    setup_seconds=setup_seconds,
    one_cpu="workers",  # cpu= is walk_cpu=: the walking thread pins itself for each sample,
    on_cpu=walkers_on_cpu,
)
