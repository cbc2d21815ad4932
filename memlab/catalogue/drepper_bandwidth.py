"""Drepper's bandwidth figures: section 3.5.1 (figures 3.24-3.29) and 3.5.3 (figure 3.31).

The bandwidth family's sweeps; every claim a rule of :mod:`memlab.catalogue.claims`
with the source's effect (the numbers in its citation).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from memlab.catalogue import core
from memlab.catalogue.claims import Direction, Ratio, Same, Sanity, Steps
from memlab.catalogue.core import (
    REGION_NAMES,
    SOURCES,
    TRANSLATION,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    Verdict,
    curve,
    nearest,
    region,
    rows_where,
    shorter,
    together,
    verdict,
    whole_octaves,
)
from memlab.dataset import Dataset
from memlab.grid import Sweep
from memlab.units import format_bytes

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["drepper"].url)

# ---- Drepper, sections 3.5.1 and 3.5.3: bandwidth ------------------------------------

_BW_NOTEBOOK = "notebooks/bandwidth.ipynb"
#: One measured thread on a set of its own, no background worker: the one-thread curves.
ONE_THREAD = {"threads": 1, "background_op": "none", "stores": "normal"}
#: Two measured threads sharing one working set (figures 3.25, 3.27, 3.29).
TWO_SHARED = {"threads": 2, "shared": True, "background_op": "none", "stores": "normal"}
#: Figures 3.27 and 3.29's control: the two threads each writing a set of their own.
TWO_SEPARATE = {**TWO_SHARED, "shared": False}

P4_BW = ("Pentium 4 (NetBurst) in 64-bit mode: 16 KiB L1d, 1 MiB L2 as the last cache, a front-side "
         "bus; 16-byte SSE loads and stores (movaps), bytes per cycle")
P4_HT = P4_BW + "; two threads on the two hyper-threads of its one core"
CORE2_BW = ("Intel Core 2: two cores, 32 KiB L1d each, one 4 MiB L2 both share as the last cache, a "
            "front-side bus; 16-byte SSE loads and stores, bytes per cycle")
CORE2_TWO = CORE2_BW + "; one thread on each core, both on one working set"
OPTERON_BW = ("AMD Opteron (family 10h): 64 KiB L1d, 512 KiB L2 per core, a 2 MiB L3 all cores share; "
              "16-byte SSE loads and stores, bytes per cycle")
OPTERON_TWO = OPTERON_BW + "; one thread on each of two cores, both on one working set"
CORE2_31 = ("Intel Core 2 as in figure 3.26: a process on one core reads or writes sets of every size "
            "while a process on the other core reads or writes its own 2 MB, half the shared 4 MiB L2")
_BW_NOTE = ("memlab reads and writes with the widest vectors this CPU runs (width=auto); the source used "
            "16-byte SSE instructions, so this machine's L1d plateau is higher where its vectors are wider "
            "(bandwidth.widths measures every width). The numbers and verdicts use bytes over the threads' "
            "CPU time (on_cpu_bytes_per_cycle), so another process taking the CPU does not count; the "
            "figure shows bytes over wall time.")


def _bw_quick(sweep: Sweep, ops: Sequence[str] | None = None, l3: bool = True) -> Sweep:
    """Quick variant of a bandwidth working-set sweep: every series (or those of ``ops``) at a
    quarter of the L1d, a quarter of the L2, a set between the L2 and the last cache (with ``l3``,
    where there is an L3) and the sweep's set nearest twice the last cache, each the nearest the
    full sweep has."""
    sizes = core.caches(Dataset([], {}))
    llc = max(size for name, size in sizes.items() if not name.endswith("i"))
    sweep_sizes = sorted({p["working_set_bytes"] for p in sweep.points})
    targets = [sizes["L1d"] / 4, sizes["L2"] / 4, 2 * llc]
    if l3 and "L3" in sizes:
        targets.append(math.sqrt(4 * sizes["L2"] * sizes["L3"] / 2))
    keep = {nearest(sweep_sizes, t) for t in targets}
    # the store-limit control (memlab.reasons): one write at half the L1d, against the core's store limit
    control = nearest(sweep_sizes, sizes["L1d"] / 2) if l3 else None
    return shorter(sweep, [p for p in sweep.points if (p["working_set_bytes"] in keep
                                                       or (p["working_set_bytes"] == control
                                                           and p.get("op", "read") == "write"))
                           and (ops is None or p.get("op", "read") in ops)], repeat=2)


def _bw_quick_two(sweep: Sweep) -> Sweep:
    """Quick variant of the two-thread sweeps: read and write (what their claims compare) in the
    L1d, the L2 and beyond the last cache."""
    return _bw_quick(sweep, ops=("read", "write"), l3=False)


def bw_rate(ds: Dataset, where: str, **match: Any) -> float:
    """Median bytes per cycle (on the CPU, per measured thread) over a cache region, for the rows
    matching ``match``.

    >>> ds = Dataset([{"op": "read", "working_set_bytes": 8192, "bytes_per_cycle": 30.0}],
    ...              {"machine": {"caches": [{"level": 1, "type": "Data", "size_bytes": 32768},
    ...                                      {"level": 2, "type": "Unified", "size_bytes": 1 << 20}]}})
    >>> bw_rate(ds, "l1", op="read")
    30.0
    """
    return statistics.median(region(ds, curve(ds, "bytes_per_cycle", **match), where).values())


def _bw_number(quantity: str, source: float, where: str, note: str = "", base: Mapping[str, Any] | None = None,
               **match: Any) -> Number:
    match = {**(ONE_THREAD if base is None else base), **match}
    return Number(quantity, source, "bytes/cycle", lambda ds: bw_rate(ds, where, **match), note, provenance=_TRANSLATED)




def _rate_ratio(top: Mapping[str, Any], top_where: str, bottom: Mapping[str, Any],
                bottom_where: str) -> Callable[[Dataset], float]:
    """ds -> rate(top in top_where) / rate(bottom in bottom_where)."""
    return lambda ds: bw_rate(ds, top_where, **top) / bw_rate(ds, bottom_where, **bottom)


def _bw_ratio(name: str, top: Mapping[str, Any], top_where: str, bottom: Mapping[str, Any],
              bottom_where: str, effect: float, note: str) -> Ratio:
    """rate(top in top_where) / rate(bottom in bottom_where) against the source's ``effect``."""
    return Ratio(_rate_ratio(top, top_where, bottom, bottom_where), effect, f"{name}, bytes per cycle", note)


def _bw_direction(name: str, top: Mapping[str, Any], top_where: str, bottom: Mapping[str, Any],
                  bottom_where: str, rising: bool) -> Direction:
    """rate(top) / rate(bottom) above 1 (``rising``) or below it: a direction the source gives no size for."""
    return Direction(_rate_ratio(top, top_where, bottom, bottom_where), rising, f"{name}, bytes per cycle")


def _each_region(top: Mapping[str, Any], bottom: Mapping[str, Any],
                 wheres: Sequence[str]) -> Callable[[Dataset], dict[str, float]]:
    """ds -> {region: rate(top) / rate(bottom)} over the regions of ``wheres`` that were measured
    (NotMeasurable when none was)."""

    def ratios(ds: Dataset) -> dict[str, float]:
        found, reasons = {}, []
        for where in wheres:
            try:
                found[REGION_NAMES[where]] = bw_rate(ds, where, **top) / bw_rate(ds, where, **bottom)
            except NotMeasurable as reason:
                reasons.append(str(reason))
        if not found:
            raise NotMeasurable("; ".join(reasons))
        return found

    return ratios


def _bw_falls(op: str, wheres: Sequence[str], effect: float, note: str,
              base: Mapping[str, Any] | None = None) -> Steps:
    """The rate of ``op`` lower in each region of ``wheres`` than in the one before."""
    match = {**(ONE_THREAD if base is None else base), "op": op}
    return Steps(lambda ds: {REGION_NAMES[w]: bw_rate(ds, w, **match) for w in wheres}, False,
                 f"{op} bytes per cycle by region", effect, note)


def _copy_within_its_halves(ds: Dataset) -> Verdict:
    ratios, reasons = {}, []
    for where in ("l1", "l2", "beyond_llc"):
        try:
            rates = {op: bw_rate(ds, where, **ONE_THREAD, op=op) for op in ("read", "write", "copy")}
        except NotMeasurable as reason:
            reasons.append(str(reason))
            continue
        ratios[where] = rates["copy"] / min(rates["read"], rates["write"])
    if not ratios:
        raise NotMeasurable("; ".join(reasons))
    detail = ", ".join(f"{REGION_NAMES[w]} {r:.3g}" for w, r in ratios.items())
    return verdict(all(r <= COPY_ALLOWANCE for r in ratios.values()),
                   f"copy / the slower of read and write: {detail} (at most {COPY_ALLOWANCE:.3g} in each)", **ratios)


#: Copy moves each byte twice (a read and a write): it cannot beat the slower of the two by more
#: than the noise of two separate measurements, taken here as 10%.
COPY_ALLOWANCE = 1.10

_copy_bounded = Sanity(_copy_within_its_halves, "a copy is a read and a write: any working machine meets it")


def _need_placement(placement: str, what: str) -> Callable[[Dataset], None]:
    def check(ds: Dataset) -> None:
        if not any(row.get("placement") == placement for row in ds.rows):
            raise NotMeasurable(f"the dataset has no rows with placement={placement} ({what})")

    return check


def _with_need(need: Callable[[Dataset], None], check: Callable[[Dataset], Verdict]) -> Callable[[Dataset], Verdict]:
    def checked(ds: Dataset) -> Verdict:
        need(ds)
        return check(ds)

    return checked


def _bw_item(number: str, title: str, section: str, measured: str, machine: str, numbers: Sequence[Number],
             claims: Sequence[Claim], compare_with: tuple[str, ...] = (), note: str = _BW_NOTE) -> Item:
    name = number.replace(".", "_")
    return Item(
        key=f"fig{number}", source="drepper", section=section, label=f"Figure {number}", title=title,
        sweep=f"bandwidth.fig{name}", quick=_bw_quick_two if compare_with else _bw_quick, measured=measured,
        machine=machine,
        numbers=tuple(numbers), claims=tuple(claims), script=f"experiments/fig{name}.py",
        notebook=_BW_NOTEBOOK, note=note, compare_with=compare_with, full=whole_octaves,
    )


_BW_MEASURED = ("Read (load every vector, use none), write (store into every word) and copy (read one "
                "half, write the other) over working sets from 1 KiB to past the last cache, one thread; "
                "bytes per cycle against the working set.")
READ, WRITE = ({**ONE_THREAD, "op": op} for op in ("read", "write"))
#: Figures 3.24 and 3.26: beyond the caches one thread reads at least twice as fast as it writes.
_READ_OVER_WRITE_BEYOND_P4 = _bw_ratio("read / write beyond the last cache", READ, "beyond_llc", WRITE,
                                       "beyond_llc", 5.3 / 0.5, "5.3 against 0.5 bytes per cycle")
_READ_OVER_WRITE_BEYOND_CORE2 = _bw_ratio("read / write beyond the last cache", READ, "beyond_llc", WRITE,
                                          "beyond_llc", 20, "up to 20 times")

FIG3_24 = _bw_item(
    "3.24", "Pentium 4 bandwidth", "3.5.1", _BW_MEASURED, P4_BW,
    numbers=[
        _bw_number("read, L1d region", 16, "l1", "one 16-byte load per cycle", op="read"),
        _bw_number("read, beyond the last cache", 5.3, "beyond_llc", "what the front-side bus streams",
                   op="read"),
        _bw_number("write, L1d region", 4, "l1", "never above 4: a write-through L1d", op="write"),
        _bw_number("write, beyond the last cache", 0.5, "beyond_llc", "ten times slower than reading",
                   op="write"),
        _bw_number("copy, beyond the last cache", 0.5, "beyond_llc", "no better than write", op="copy"),
    ],
    claims=[
        Claim("Reading is fastest while the set fits in the L1d: beyond the last cache it reads a "
              "fraction of the L1d rate.",
              "Drepper 3.5.1, fig. 3.24: 16 bytes per cycle in the L1d, under 6 once it is exceeded, "
              "5.3 from memory", _bw_ratio("read L1d / read beyond the last cache", READ, "l1", READ,
                                          "beyond_llc", 16 / 5.3, "16 against 5.3 bytes per cycle")),
        Claim("Beyond the caches writing is much slower than reading.",
              "Drepper 3.5.1, fig. 3.24: write and copy fall to 0.5 bytes per cycle beyond the L2, ten "
              "times slower than the 5.3 of reading",
              _READ_OVER_WRITE_BEYOND_P4),
    ],
)

FIG3_25 = _bw_item(
    "3.25", "Pentium 4 bandwidth with two hyper-threads", "3.5.1",
    "Figure 3.24's read, write and copy by two threads on the two hyper-threads of one core, both on "
    "one working set; bytes per cycle per thread, beside figure 3.24's one thread.", P4_HT,
    numbers=[
        _bw_number("read per thread, L1d region", 8, "l1", "half of figure 3.24's 16: the threads share "
                   "the core", base=TWO_SHARED, op="read", placement="smt"),
    ],
    claims=[
        Claim("Two hyper-threads share one core's cache and bandwidth: in the L1d region and beyond the "
              "last cache, each reads about half of what one thread alone reads.",
              "Drepper 3.5.1, fig. 3.25: each hyper-thread can use only half the cache and half the "
              "bandwidth; the worst case for hyper-threads",
              Ratio(together(_with_need(
                  _need_placement("smt", "two SMT siblings of one core; the machine may have no SMT"),
                  _each_region({**TWO_SHARED, "op": "read", "placement": "smt"}, READ, ("l1", "beyond_llc")))),
                  0.5, "read per thread of two / one thread alone, bytes per cycle", "half the cache and half "
                  "the bandwidth each")),
    ],
    compare_with=("fig3.24",),
)

FIG3_26 = _bw_item(
    "3.26", "Core 2 bandwidth", "3.5.1", _BW_MEASURED, CORE2_BW,
    numbers=[
        _bw_number("read, L1d region", 16, "l1", "one 16-byte load per cycle", op="read"),
        _bw_number("read, L2 region", 16, "l2", "prefetching into the L1d keeps reads near 16", op="read"),
        _bw_number("write, L1d region", 16, "l1", "close to 16: a write-back L1d", op="write"),
        Number("read / write beyond the last cache", 20, "x",
               lambda ds: bw_rate(ds, "beyond_llc", **READ) / bw_rate(ds, "beyond_llc", **WRITE),
               "up to 20 times", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Reading stays near its L1d rate well past the L1d: the L2 region reads about the "
              "L1d rate (prefetching reaches the L1d).",
              "Drepper 3.5.1, fig. 3.26: reads hover around the optimal 16 bytes per cycle over the whole "
              "range of working sets",
              Same(_rate_ratio(READ, "l2", READ, "l1"), 16 / 5.3, "read L2 / read L1d, bytes per cycle",
                   "the Pentium 4's read falls 3x past its caches in figure 3.24, the contrast the text draws")),
        Claim("Writing drops once the L1d is exceeded: the L2 region writes slower than the L1d region.",
              "Drepper 3.5.1, fig. 3.26: writes run near 16 bytes per cycle in the L1d and fall sharply "
              "once it is exhausted",
              _bw_direction("write L2 / write L1d", WRITE, "l2", WRITE, "l1", rising=False)),
        Claim("Beyond the caches writing is much slower than reading.",
              "Drepper 3.5.1, fig. 3.26: once the L2 is exceeded reads are up to 20 times faster than "
              "writes",
              _READ_OVER_WRITE_BEYOND_CORE2),
    ],
)

#: Figures 3.27 and 3.29: each of two threads reading one set reads about as fast as one thread alone.
_READ_SHARED_UNAFFECTED = Same(together(_each_region({**TWO_SHARED, "op": "read"}, READ, ("l1", "l2"))), 2.0,
                               "read per thread of two / one thread alone, bytes per cycle",
                               "for large sets each thread gets about half the one-thread rate")

FIG3_27 = _bw_item(
    "3.27", "Core 2 bandwidth with two threads", "3.5.1",
    "Figure 3.26's read, write and copy by two threads on two cores, both on one working set with no "
    "synchronisation; bytes per cycle per thread, beside figure 3.26's one thread.", CORE2_TWO,
    numbers=[
        _bw_number("read per thread, L1d region", 16, "l1", "the same as one thread", base=TWO_SHARED,
                   op="read"),
    ],
    claims=[
        Claim("Reading is unaffected by the second thread: in the L1d and L2 regions each of the two reads "
              "about as fast as one thread alone.",
              "Drepper 3.5.1, fig. 3.27: the read performance is no different from the single-threaded case",
              _READ_SHARED_UNAFFECTED),
        Claim("Writing a shared set that fits in the L1d is as slow as writing memory: each of the two "
              "writes slower than one thread in its L1d (the line moves between the cores).",
              "Drepper 3.5.1, fig. 3.27: in the L1d range write and copy run as if the data came from "
              "main memory; the cores compete for the same lines (RFO messages)",
              Direction(together(_rate_ratio({**TWO_SHARED, "op": "write"}, "l1", WRITE, "l1")), False,
                        "write per thread of two, L1d / one thread alone, L1d, bytes per cycle")),
        Claim("Beyond the caches the two threads share the memory bandwidth: each writes about half "
              "what one thread alone writes.",
              "Drepper 3.5.1, fig. 3.27: both cores share the front-side bus, so for large sets each thread "
              "gets about half the single-threaded performance",
              Ratio(together(_rate_ratio({**TWO_SHARED, "op": "write"}, "beyond_llc", WRITE, "beyond_llc")),
                    0.5, "write per thread of two / one thread alone beyond the last cache, bytes per cycle",
                    "about half")),
        Claim("It is the sharing that slows the writes: in the L1d region each of two threads writing one "
              "set writes slower than each of two writing sets of their own (the control, measured in the "
              "same run).",
              "Drepper 3.5.1, fig. 3.27: both threads compete for the same memory location and RFO messages "
              "must be sent for the cache lines",
              Direction(together(_rate_ratio({**TWO_SHARED, "op": "write"}, "l1", {**TWO_SEPARATE, "op": "write"},
                                             "l1")), False,
                        "write per thread, one shared set / separate sets, L1d region, bytes per cycle")),
    ],
    compare_with=("fig3.26",),
)

FIG3_28 = _bw_item(
    "3.28", "AMD family 10h Opteron bandwidth", "3.5.1", _BW_MEASURED, OPTERON_BW,
    numbers=[
        _bw_number("read, L1d region", 32, "l1", "more than 32: two loads per cycle", op="read"),
        _bw_number("write, L1d region", 18.7, "l1", op="write"),
        _bw_number("read, beyond the last cache", 2.3, "beyond_llc", "the curve flattens quickly to 2.3: "
                   "little prefetching; its flat low end, main memory (one region, not the L3 and memory mixed)",
                   op="read"),
        _bw_number("write, L2 region", 6, "l2", op="write"),
        _bw_number("write, L3 region", 2.8, "l3", op="write"),
        _bw_number("write, beyond the last cache", 0.5, "beyond_llc", op="write"),
    ],
    claims=[
        Claim("In the L1d, reading is faster than writing.",
              "Drepper 3.5.1, fig. 3.28: more than 32 bytes per cycle read, 18.7 written",
              _bw_ratio("read / write, L1d region", READ, "l1", WRITE, "l1", 32 / 18.7,
                        "more than 32 against 18.7 bytes per cycle")),
        Claim("The write rate steps down at each cache level: L1d, then the L2, then beyond the last cache.",
              "Drepper 3.5.1, fig. 3.28: writes fall from 18.7 bytes per cycle in the L1d to 6 in the L2, "
              "2.8 in the L3 and 0.5 beyond it", _bw_falls("write", ("l1", "l2", "beyond_llc"), 0.5 / 18.7,
                                                     "18.7, 6 and 0.5 bytes per cycle")),
        Claim("Copy is no faster than the slower of read and write at any cache level (within 10%): a sanity check.",
              "Drepper 3.5.1, fig. 3.28: copy cannot be faster than either read or write; read dominates "
              "first, write later", _copy_bounded),
    ],
)

FIG3_29 = _bw_item(
    "3.29", "AMD family 10h Opteron bandwidth with two threads", "3.5.1",
    "Figure 3.28's read, write and copy by two threads on two cores, both on one working set; bytes per "
    "cycle per thread, beside figure 3.28's one thread.", OPTERON_TWO,
    numbers=[
        _bw_number("read per thread, L1d region", 32, "l1", "largely unchanged from one thread",
                   base=TWO_SHARED, op="read"),
    ],
    claims=[
        Claim("Reading is largely unchanged by the second thread: in the L1d and L2 regions each of the "
              "two reads about as fast as one thread alone.",
              "Drepper 3.5.1, fig. 3.29: the read performance is largely unchanged; L1d and L2 work as before",
              _READ_SHARED_UNAFFECTED),
        Claim("Writing a shared set is far slower than one thread writing it, even where it fits in a "
              "cache: in the L2 region each of the two writes slower than one thread alone.",
              "Drepper 3.5.1, fig. 3.29: all shared data has to go through the L3, and that sharing costs "
              "far more than an L3 access even when the L3 could hold the whole set",
              Direction(together(_rate_ratio({**TWO_SHARED, "op": "write"}, "l2", WRITE, "l2")), False,
                        "write per thread of two / one thread alone, L2 region, bytes per cycle")),
        Claim("It is the sharing that costs: in the L2 region each of two threads writing one set writes "
              "slower than each of two writing sets of their own (the control, measured in the same run).",
              "Drepper 3.5.1, fig. 3.29: all data the threads share has to go through the L3, and that "
              "sharing is quite inefficient",
              Direction(together(_rate_ratio({**TWO_SHARED, "op": "write"}, "l2", {**TWO_SEPARATE, "op": "write"},
                                             "l2")), False,
                        "write per thread, one shared set / separate sets, L2 region, bytes per cycle")),
    ],
    compare_with=("fig3.28",),
)


def _background_sets(ds: Dataset) -> tuple[int, float, float]:
    """The background set and the measured sets nearest a sixteenth and a quarter of the cache the
    two workers share (twice the background set, as the sweep sizes it)."""
    rows = rows_where(ds, "bytes_per_cycle", background_op=("read", "write"))
    background = int(statistics.median(row["background_working_set_bytes"] for row in rows))
    shared = 2 * background
    sizes = sorted({row["working_set_bytes"] for row in rows})
    small, large = nearest(sizes, shared / 16), nearest(sizes, shared / 4)
    if not small < large <= shared / 2:
        raise NotMeasurable(f"the sweep has no two working sets between a sixteenth and a half of the shared "
                            f"cache ({format_bytes(shared)}, twice the {format_bytes(background)} background set)")
    return background, small, large


def _drop_by_op(ds: Dataset) -> dict[str, float]:
    """Per op: (large / small set beside a writing worker) / (large / small set alone), the control
    measured in the same run: the drop the background worker causes, not the one the measured
    thread's own caches cause."""
    background, small, large = _background_sets(ds)
    ratios = {}
    for op in ("read", "write"):
        points = curve(ds, "bytes_per_cycle", op=op, background_op="write", threads=1)
        try:
            alone = curve(ds, "bytes_per_cycle", op=op, background_op="none", threads=1,
                          background_working_set_bytes=background)
        except NotMeasurable:
            raise NotMeasurable(f"op={op} has no control: the same points with no background worker "
                                f"(background_op=none) were not measured in this run") from None
        for name, found in (("beside a writing background worker", points), ("alone", alone)):
            if small not in found or large not in found:
                raise NotMeasurable(f"op={op} {name} lacks {format_bytes(small)} or {format_bytes(large)}")
        drop = (points[large] / points[small]) / (alone[large] / alone[small])
        ratios[f"{op}, {format_bytes(large)} / {format_bytes(small)}, beside a writer / alone"] = drop
    return ratios


_background_drop = Direction(_drop_by_op, False, "bytes per cycle beside a background worker writing half the "
                             "shared cache, against the same sets alone in the same run")


def _writer_over_reader(ds: Dataset) -> dict[str, float]:
    _, _, large = _background_sets(ds)
    ratios = {}
    for op in ("read", "write"):
        beside_writer = curve(ds, "bytes_per_cycle", op=op, background_op="write", threads=1)
        beside_reader = curve(ds, "bytes_per_cycle", op=op, background_op="read", threads=1)
        if large not in beside_writer or large not in beside_reader:
            raise NotMeasurable(f"op={op} lacks {format_bytes(large)} beside a reading or a writing worker")
        ratios[f"{op} at {format_bytes(large)}"] = beside_writer[large] / beside_reader[large]
    return ratios


_writer_worse = Direction(_writer_over_reader, False, "bytes per cycle beside a writing / beside a reading "
                          "background worker")


def _fig3_31_quick(sweep: Sweep) -> Sweep:
    """The two measured sets the claims compare, nearest a sixteenth and a quarter of the cache the
    two workers share, beside a reading and a writing worker and alone (the control; every point
    with a worker fills the background set, half that cache, so the quick run keeps few)."""
    background = sweep.points[0]["background_working_set_bytes"]
    sizes = sorted({p["working_set_bytes"] for p in sweep.points})
    keep = {nearest(sizes, t) for t in (background / 8, background / 2)}
    return shorter(sweep, [p for p in sweep.points if p["working_set_bytes"] in keep], repeat=2)


FIG3_31 = Item(
    key="fig3.31", source="drepper", section="3.5.3", label="Figure 3.31", title="bandwidth with two processes",
    sweep="bandwidth.fig3_31", quick=_fig3_31_quick, full=whole_octaves,
    measured="One thread reads or writes sets of every size while a second worker on another core reads or "
             "writes a set of its own, half the cache the two cores share; the four read/write "
             "combinations, bytes per cycle of the measured thread.",
    machine=CORE2_31,
    numbers=(
        Number("background working set", 2 << 20, "bytes",
               lambda ds: statistics.median(row["background_working_set_bytes"] for row in
                                            rows_where(ds, None, background_op=("read", "write"))),
               "half the shared cache", compare=False, provenance=_TRANSLATED),
    ),
    claims=(
        Claim("Beside a worker writing its own half of the shared cache, the measured thread slows down "
              "before its set reaches a quarter of that cache: from a sixteenth to a quarter it loses more "
              "than the same sets lose alone (the control, measured in the same run), where a cache split "
              "evenly between the cores would hold both.",
              "Drepper 3.5.3, fig. 3.31: performance degrades before the working set reaches 1 MB, not at "
              "the 2 MB each core could use; the processes share no memory, so this is eviction alone",
              _background_drop),
        Claim("The drop is clearest beside a writing worker: at a quarter of the shared cache the measured "
              "thread is slower beside a writer than beside a reader.",
              "Drepper 3.5.3, fig. 3.31: the effect is best seen when the background process is writing",
              _writer_worse),
    ),
    script="experiments/fig3_31.py", notebook=_BW_NOTEBOOK,
    note=("The background worker is a thread with a set of its own (the source used a second process: "
          "no memory is shared either way), sized to half the smallest cache both cores share. "
          + _BW_NOTE),
)
