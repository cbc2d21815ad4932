"""Drepper's pointer-chase figures: sections 3.2-3.5, 5.4, 6.2-6.3, 7.1 and 7.5 (the chase family).

Each item below is data: the figure, its sweep, the source's numbers and its
claims, each claim a rule of :mod:`memlab.catalogue.claims` with the source's
effect (the numbers in its citation).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from memlab import chase_analysis
from memlab.catalogue import core
from memlab.catalogue.claims import Ratio, Same, Sanity, Steps
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
    _value,
    at_largest_common,
    at_working_sets,
    curve,
    cycles_in,
    finite,
    full_variant,
    ghz,
    largest,
    machine_fact,
    nearest,
    need_cpus,
    region,
    region_median,
    rows_where,
    shorter,
    together,
    value_of,
    verdict,
    whole_octaves,
)
from memlab.chase_analysis import associativity, counter_ratios
from memlab.dataset import Dataset
from memlab.grid import Sweep
from memlab.units import format_bytes

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["drepper"].url)

# ---- Drepper, section 3.3.2: the pointer chase ---------------------------------------

P4 = ("Pentium 4 in 64-bit mode (16 KiB L1d, 1 MiB L2; main memory 200+ cycles away); "
      "time per list element in cycles")
_CHASE_SCRIPT = "experiments/fig{}.py"


def _chase_item(number: str, title: str, measured: str, numbers: Sequence[Number],
                claims: Sequence[Claim], machine: str = P4, section: str = "3.3.2",
                quick: Callable[[Sweep], Sweep] | None = None, note: str = "",
                full: Callable[[Sweep], Sweep] | None = None) -> Item:
    name = number.replace(".", "_")
    return Item(
        key=f"fig{number}", source="drepper", section=section, label=f"Figure {number}", title=title,
        sweep=f"chase.fig{name}", quick=quick or at_working_sets(), measured=measured, machine=machine,
        numbers=tuple(numbers), claims=tuple(claims), script=_CHASE_SCRIPT.format(name),
        notebook="notebooks/chase.ipynb", note=note, full=full or whole_octaves,
    )


def _cycles_number(quantity: str, source: float, where: str, note: str = "", **match: Any) -> Number:
    return Number(quantity, source, "cycles", lambda ds: cycles_in(ds, where, **match), note, provenance=_TRANSLATED)


def _seq_beyond_over_l2(ds: Dataset) -> float:
    l2 = region_median(ds, "l2", order="sequential")
    return largest(region(ds, curve(ds, "ns_per_element", order="sequential"), "beyond_llc"))[1] / l2


_seq_beyond_l2_low = Same(_seq_beyond_over_l2, 200 / 9, "sequential, the largest working set beyond the last cache "
                          "/ the L2 region, ns per element", "about 9 cycles per element in the L2 and beyond it, "
                          "against 200+ for a memory access")


def _region_ratio(top: str, bottom: str, metric: str = "ns_per_element", **match: Any) -> Callable[[Dataset], float]:
    """ds -> median of ``metric`` over region ``top`` / over region ``bottom`` (rows matching ``match``)."""
    return lambda ds: region_median(ds, top, metric, **match) / region_median(ds, bottom, metric, **match)


def _l2_above_l1(effect: float, note: str, **match: Any) -> Ratio:
    return Ratio(_region_ratio("l2", "l1", **match), effect, "L2 region / L1d region, ns per element", note)


FIG3_10 = _chase_item(
    "3.10", "sequential read access, NPAD=0",
    "A circular list of 8-byte elements (NPAD=0) laid out in address order, walked by following "
    "the pointers; time per element against the working set (2^10 to 2^28 bytes).",
    numbers=[
        _cycles_number("L1d region", 4, "l1", "P4 L1d hit", order="sequential"),
        _cycles_number("L2 region", 9, "l2", "less than the L2's 14 cycles: prefetching", order="sequential"),
        _cycles_number("beyond the last cache", 9, "beyond_llc", "main memory costs 200+ cycles; prefetching "
                       "hides it", order="sequential"),
    ],
    claims=[
        Claim("From main memory (beyond the last cache) a sequential walk costs about what it costs in the L2, "
              "not a memory access: within the square root of the memory access's 22x of the L2 region's time "
              "per element.",
              "Drepper 3.3.2, fig. 3.10: about 9 cycles per element both in the L2 and beyond it, "
              "where a memory access costs more than 200 (the P4 has no L3: beyond its L2 is main memory)",
              _seq_beyond_l2_low),
        Claim("The L2 region costs more per element than the L1d region.",
              "Drepper 3.3.2, fig. 3.10: about 4 cycles in L1d, about 9 in L2",
              _l2_above_l1(9 / 4, "about 4 cycles in the L1d, about 9 in the L2", order="sequential")),
    ],
)


def _l1_spread(ds: Dataset) -> float:
    values = [region_median(ds, "l1", npad=npad) for npad in (0, 7, 15, 31)]
    return max(values) / min(values)


_same_in_l1 = Same(_l1_spread, 28 / 9, "L1d region, the slowest / the fastest of NPAD 0, 7, 15, 31",
                   "in the L2 NPAD 7-31 cost about 28 cycles where NPAD 0 costs 9")


def _grows_with(param: str, values: Sequence[Any], where: str, metric: str = "ns_per_element",
                base: Mapping[str, Any] | None = None) -> Steps:
    """Each value of ``param`` slower than the one before, at the largest working set in ``where``
    they share."""

    def series(ds: Dataset) -> dict[str, float]:
        groups = {f"{param}={v}": {param: v, **(base or {})} for v in values}
        return at_largest_common(ds, metric, where, groups)[1]

    return Steps(series, True, f"{metric} at the largest working set {REGION_NAMES[where]} all measured")


def _above(param: str, low: Any, highs: Sequence[Any], where: str, effect: float, note: str,
           base: Mapping[str, Any] | None = None, metric: str = "ns_per_element") -> Ratio:
    """Every ``highs`` value of ``param`` over the ``low`` one (median over ``where``) against the
    source's ``effect``."""

    def ratios(ds: Dataset) -> dict[str, float]:
        ref = region_median(ds, where, metric, **{param: low}, **dict(base or {}))
        return {f"{param}={high}": region_median(ds, where, metric, **{param: high}, **dict(base or {})) / ref
                for high in highs}

    return Ratio(ratios, effect, f"{REGION_NAMES[where]}, {metric} / {param}={low}", note)


FIG3_11 = _chase_item(
    "3.11", "sequential read for several element sizes",
    "The sequential walk of figure 3.10 with elements of 8, 64, 128 and 256 bytes "
    "(NPAD=0, 7, 15, 31): the same working sets hold fewer, larger elements.",
    numbers=[
        _cycles_number("L2 region, NPAD=7", 28, "l2", "one new cache line per element, from L2", npad=7),
        _cycles_number("L2 region, NPAD=31", 28, "l2", "NPAD 7, 15, 31 coincide in L2", npad=31),
        _cycles_number("L1d region, NPAD=31", 4, "l1", "all sizes coincide in L1d", npad=31),
    ],
    claims=[
        Claim("While the list fits in the L1d, every element size costs about the same per element "
              "(closer than the square root of the 3.1x the L2 region shows).",
              "Drepper 3.3.2, fig. 3.11: the curves coincide while only the L1d is used",
              _same_in_l1),
        Claim("In the L2 region, elements of a cache line or more (NPAD 7, 15, 31) cost more than "
              "8-byte elements.", "Drepper 3.3.2, fig. 3.11: about 28 cycles for NPAD 7-31 in L2, "
              "about 9 for NPAD=0", _above("npad", 0, (7, 15, 31), "l2", 28 / 9, "about 28 cycles for NPAD 7-31 against 9")),
        Claim("From main memory (beyond the last cache), the larger the element the more each costs "
              "(NPAD 0 < 7 < 15 < 31).",
              "Drepper 3.3.2, fig. 3.11: beyond L2 the four curves differ widely, in element-size order (the P4 "
              "has no L3: beyond its L2 is main memory)",
              _grows_with("npad", (0, 7, 15, 31), "beyond_llc")),
    ],
)


def _per_page_jump(ds: Dataset) -> float:
    packed = curve(ds, "ns_per_element", layout="packed")
    paged = curve(ds, "ns_per_element", layout="page_per_element")
    for size in sorted(set(packed) & set(paged)):
        if paged[size] >= 2 * packed[size]:
            return float(size)
    raise NotMeasurable("one element per page never cost twice the packed layout in this sweep")


def _layouts_at_largest(ds: Dataset) -> dict[str, float]:
    packed = curve(ds, "ns_per_element", layout="packed")
    paged = curve(ds, "ns_per_element", layout="page_per_element")
    common = set(packed) & set(paged)
    if not common:
        raise NotMeasurable("the two layouts share no working set")
    size = max(common)
    return {"packed": packed[size], "one element per page": paged[size]}


_per_page_slower = Steps(_layouts_at_largest, True, "ns per element at the largest working set both layouts "
                         "measured")


def _layouts_at_smallest(ds: Dataset) -> float:
    packed = curve(ds, "ns_per_element", layout="packed")
    paged = curve(ds, "ns_per_element", layout="page_per_element")
    common = sorted(set(packed) & set(paged))
    if not common:
        raise NotMeasurable("the two layouts share no working set")
    size = common[0]
    if size > 4096:
        raise NotMeasurable(f"the smallest working set measured ({format_bytes(size)}) is above 4 KiB")
    return paged[size] / packed[size]


_per_page_same_small = Same(_layouts_at_smallest, 2.0, "one element per page / packed at the smallest working set",
                            "the jump the figure marks at 2^13 bytes: one element per page first costs twice "
                            "the packed list")


FIG3_12 = _chase_item(
    "3.12", "TLB influence for sequential read",
    "Sequential NPAD=7 (64-byte elements) packed, against one element per 4 KiB page (the rest of "
    "each page unused and not counted): every element then needs its own TLB entry.",
    numbers=[
        Number("working set where one element per page first costs 2x packed", 8192, "bytes",
               _per_page_jump, "the jump starts at 2^13 bytes: 64 TLB entries", compare=False, provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Once the pages outnumber the TLB, one element per page costs far more than the packed "
              "list at the largest working set.",
              "Drepper 3.3.2, fig. 3.12: the one-per-page curve rises steeply from 2^13 bytes, when the "
              "TLB overflows", _per_page_slower),
        Claim("With a few pages (up to 4 KiB of elements) both layouts cost about the same "
              "(within the square root of the 2x jump).", "Drepper 3.3.2, fig. 3.12: the curves part only when the TLB overflows",
              _per_page_same_small),
    ],
    quick=at_working_sets(1024, 1 << 16),
)

FIG3_13 = _chase_item(
    "3.13", "sequential read and write, NPAD=1",
    "Sequential 16-byte elements (NPAD=1): follow the pointers; Inc adds 1 to pad[0] of each "
    "element; Addnext0 adds the next element's pad[0] to its own.",
    numbers=[
        _cycles_number("beyond the last cache, follow", 14, "beyond_llc", op="follow"),
        _cycles_number("beyond the last cache, addnext0", 28, "beyond_llc", "twice follow: written lines go "
                       "back to memory", op="addnext0"),
    ],
    claims=[
        Claim("From main memory (beyond the last cache), a walk that writes (Addnext0) costs about twice "
              "Follow per element: modified lines must be written back.",
              "Drepper 3.3.2, fig. 3.13: 28 cycles for Addnext0 beyond L2, twice the 14 of Follow (the P4 has "
              "no L3: beyond its L2 is main memory, where the written lines go back)",
              _above("op", "follow", ("addnext0",), "beyond_llc", 28 / 14, "28 cycles against 14")),
    ],
)


def _random_over_sequential(ds: Dataset) -> float:
    _, found = at_largest_common(ds, "ns_per_element", "beyond_l2", {
        "random": {"order": "random"}, "sequential": {"order": "sequential"}})
    return found["random"] / found["sequential"]


_random_vs_sequential = Ratio(_random_over_sequential, 450 / 9, "random / sequential at the largest working set "
                              "beyond 4x the L2 both measured", "450 cycles and more against about 9")


def _random_past_l1(ds: Dataset) -> dict[str, float]:
    points = curve(ds, "ns_per_element", order="random")
    l1 = core.caches(ds)["L1d"]
    climb = {format_bytes(k): v for k, v in points.items() if k >= 2 * l1}
    if len(climb) < 3:
        raise NotMeasurable(f"fewer than three random working sets past the L1d were measured ({len(climb)})")
    return climb


_keeps_climbing = Steps(_random_past_l1, True, "random order, ns per element by working set past the L1d")


FIG3_15 = _chase_item(
    "3.15", "sequential vs random read, NPAD=0",
    "The NPAD=0 list walked in address order and in a random order (one cycle through all "
    "elements), time per element against the working set.",
    numbers=[
        _cycles_number("random, beyond the L2", 450, "beyond_l2", "450 cycles and more at the largest sets",
                       order="random"),
        _cycles_number("sequential, beyond the L2", 9, "beyond_l2", order="sequential"),
    ],
    claims=[
        Claim("Beyond the L2, random order is far slower per element than sequential order (the source: 50x).",
              "Drepper 3.3.2, fig. 3.15: random reaches 450 cycles and more where sequential stays near 9",
              _random_vs_sequential),
        Claim("The random curve keeps climbing past the L1d (no plateau): each larger working set costs "
              "more than the one before.",
              "Drepper 3.3.2, fig. 3.15: 'the curve has no flat plateaus ... it keeps rising'",
              _keeps_climbing),
    ],
)


#: Figure 3.17's blocks are counted in 4 KiB pages.
PAGE_BYTES = 4096


def _fig3_17_quick(sweep: Sweep) -> Sweep:
    """The whole list and three block sizes (the smallest, a middle one and the largest of those
    at most half the largest working set kept) at the four working sets of :func:`at_working_sets`
    and one beyond the last cache (four times it, the nearest the full sweep has): a block as
    large as the set is the whole-list walk again, so every block size kept is smaller than the
    set the claims judge at."""
    sizes = core.caches(Dataset([], {}))
    llc = max(size for name, size in sizes.items() if not name.endswith("i"))
    sweep_sizes = sorted({p["working_set_bytes"] for p in sweep.points})
    memory = nearest(sweep_sizes, 4 * llc)
    blocks = sorted({p["block_pages"] for p in sweep.points if p.get("order") == "random_blocks"
                     and 2 * p["block_pages"] * PAGE_BYTES <= memory})
    keep = {blocks[0], blocks[len(blocks) // 2], blocks[-1]} if blocks else set()
    points = [p for p in sweep.points if p.get("order") == "random" or p.get("block_pages") in keep]
    return at_working_sets(memory)(dataclasses.replace(sweep, points=points))


def _fig3_17_full(sweep: Sweep) -> Sweep:
    """Every point but the block walks whose block holds the whole set: such a walk is the
    whole-list walk again (one block, shuffled whole), 143 of the named sweep's 228 points; the
    claims judge blocks smaller than the set, and each block curve starts where it departs."""
    return full_variant(keep=lambda p: p.get("order") != "random_blocks"
                        or p["block_pages"] * PAGE_BYTES < p["working_set_bytes"])(sweep)


def _smaller_blocks(ds: Dataset) -> tuple[float, list[int]]:
    """The largest working set beyond the last cache the whole-list walk measured, and the block
    sizes measured there that are smaller than it (a block as large as the set is the whole list)."""
    size, _ = largest(region(ds, curve(ds, "ns_per_element", order="random"), "beyond_llc"))
    blocks = sorted({row["block_pages"] for row in rows_where(ds, "ns_per_element", order="random_blocks",
                                                              working_set_bytes=size)
                     if row["block_pages"] * PAGE_BYTES < size})
    if not blocks:
        raise NotMeasurable(f"no block smaller than the working set of {format_bytes(size)} was measured there")
    return size, blocks


def _at(ds: Dataset, size: float, **match: Any) -> float:
    return value_of(ds, "ns_per_element", working_set_bytes=size, **match)


def _blocks_and_whole(ds: Dataset) -> dict[str, float]:
    size, blocks = _smaller_blocks(ds)
    return {f"blocks of {blocks[0]} page(s)": _at(ds, size, order="random_blocks", block_pages=blocks[0]),
            "the whole list": _at(ds, size, order="random")}


_blocks_faster = Steps(_blocks_and_whole, True, "ns per element at the largest working set beyond the last cache")


def _by_block_size(ds: Dataset) -> dict[str, float]:
    size, blocks = _smaller_blocks(ds)
    if len(blocks) < 2:
        raise NotMeasurable(f"fewer than two block sizes smaller than the working set of {format_bytes(size)} "
                            "were measured there")
    found = {f"{k} pages": _at(ds, size, order="random_blocks", block_pages=k) for k in blocks}
    found["whole list"] = _at(ds, size, order="random")
    return found


_blocks_approach_whole = Steps(_by_block_size, True, "ns per element by block size at the largest working set "
                               "beyond the last cache")


FIG3_17 = _chase_item(
    "3.17", "random order within blocks of pages, NPAD=7",
    "Random NPAD=7 walks where each block of k 4 KiB pages is shuffled on its own and the blocks "
    "are walked in turn (k = 1 ... 2^16, and the whole list): fewer TLB entries in use at a time.",
    numbers=[],
    claims=[
        Claim("Randomising within small blocks of pages is faster than randomising the whole list at "
              "large working sets (fewer TLB misses).",
              "Drepper 3.3.2, fig. 3.17: the smaller the block, the lower the curve; TLB misses make the "
              "difference", _blocks_faster),
        Claim("The larger the block, the closer the walk gets to the whole-list random walk (the cost "
              "rises as blocks grow).",
              "Drepper 3.3.2, fig. 3.17: as the block size grows the results approach the one-block curve",
              _blocks_approach_whole),
    ],
    quick=_fig3_17_quick, full=_fig3_17_full,
)


# ---- Drepper, sections 3.2, 3.3.2, 3.3.4 and 3.5.2: random writes, the miss ratio, several
# threads, the critical word (figures 3.4, 3.16, 3.19-3.21, 3.30) ----------------------------

#: Figure 3.4's walk: pad[0]++ on each element of a randomly linked list.
RANDOM_INC = {"order": "random", "op": "inc"}
RANDOM_WRITE_MACHINE = ("a processor with an L1d and an L2 but no L3 (the text reads 2^13 bytes of L1d and 2^20 "
                        "bytes of L2 off the curve); cycles per element, log scale")
FOUR_CPUS = ("a machine with four processors on one bus to the memory controller and one bus to the memory "
             "modules; 128-byte elements (NPAD=15), the fastest thread's cycles per element")




def _random_write_plateaus(ds: Dataset) -> dict[str, float]:
    beyond = largest(region(ds, curve(ds, "ns_per_element", **RANDOM_INC), "beyond_l2"))[1]
    return {"L1d": region_median(ds, "l1", **RANDOM_INC), "L2": region_median(ds, "l2", **RANDOM_INC),
            "beyond the L2": beyond}


_random_write_levels = Steps(_random_write_plateaus, True, "random pad[0]++, ns per element by level",
                             480 / 10, "under 10, about 28, 480 and more cycles")


def _random_write_over_l1(ds: Dataset) -> float:
    beyond = largest(region(ds, curve(ds, "ns_per_element", **RANDOM_INC), "beyond_l2"))[1]
    return beyond / region_median(ds, "l1", **RANDOM_INC)


_random_write_orders = Ratio(_random_write_over_l1, 480 / 10, "the largest working set beyond 4x the L2 / the L1d "
                             "region", "480 cycles and more against under 10")


FIG3_4 = _chase_item(
    "3.4", "access times for random writes",
    "Each element of a randomly linked list of 64-byte elements (NPAD=7) gets pad[0]++ as the walk passes: "
    "a write to a line nobody prefetched; cycles per element against the working set, both on log scales.",
    numbers=[
        _cycles_number("L1d region", 10, "l1", "under 10 while the set fits in the L1d", **RANDOM_INC),
        _cycles_number("L2 region", 28, "l2", "about 28 once the L1d is exceeded", **RANDOM_INC),
        _cycles_number("beyond the L2", 480, "beyond_l2", "480 and more: main memory, and dirty lines are "
                       "written back", **RANDOM_INC),
    ],
    claims=[
        Claim("Three plateaus, one per level: the L2 region costs more per element than the L1d region, and "
              "beyond the L2 more than the L2 region.",
              "Drepper 3.2, fig. 3.4: under 10 cycles in the L1d, about 28 from the L2, 480 and more once the L2 "
              "is exceeded", _random_write_levels),
        Claim("The cost grows by an order of magnitude, not by a few percent: at the largest working set beyond "
              "the L2 a random write costs many times its cost in the L1d (the source: 48x).",
              "Drepper 3.2, fig. 3.4: under 10 cycles against 480 and more; 'not a few percent, but sometimes "
              "orders of magnitude'", _random_write_orders),
    ],
    machine=RANDOM_WRITE_MACHINE, section="3.2", quick=at_working_sets(1 << 27),
)


LLC_COUNTERS = ("cache_references", "cache_misses")


def _miss_ratios(ds: Dataset, order: str) -> dict[float, float]:
    """{working set: last-level misses per reference (%)} of the ``order`` rows; NotMeasurable with the
    counters' own reason (no PMU, not permitted) where they were not counted."""
    rows = rows_where(ds, None, order=order)
    missing = chase_analysis.missing_counters(rows, LLC_COUNTERS)
    if missing:
        raise NotMeasurable("needs the hardware counters cache_references and cache_misses: "
                            + "; ".join(f"{name}: {why}" for name, why in missing.items()))
    values: dict[float, list[float]] = {}
    for row in rows:
        ratio = chase_analysis.counter_ratios(row).get("llc_miss_ratio_percent")
        if ratio is not None and finite(row.get("working_set_bytes")):
            values.setdefault(row["working_set_bytes"], []).append(ratio)
    if not values:
        raise NotMeasurable(f"no row with order={order} counted both cache_references and cache_misses")
    return {k: statistics.median(values[k]) for k in sorted(values)}


def _random_misses_past_l2(ds: Dataset) -> dict[str, float]:
    l2 = core.caches(ds)["L2"]
    points = {format_bytes(k): v for k, v in _miss_ratios(ds, "random").items() if k >= l2}
    if len(points) < 2:
        raise NotMeasurable(f"fewer than two random working sets of the L2 size ({format_bytes(l2)}) or more "
                            f"were counted ({len(points)})")
    return points


_miss_ratio_climbs = Steps(_random_misses_past_l2, True, "random walk, last-level misses per reference by working set")


def _misses_by_order(ds: Dataset) -> dict[str, float]:
    random, sequential = _miss_ratios(ds, "random"), _miss_ratios(ds, "sequential")
    common = set(random) & set(sequential)
    if not common:
        raise NotMeasurable("the random and sequential walks share no counted working set")
    size = max(common)
    if size < 4 * core.caches(ds)["L2"]:
        raise NotMeasurable(f"the largest counted working set of both walks ({format_bytes(size)}) is not beyond "
                            f"4x the L2")
    return {"sequential": sequential[size], "random": random[size]}


_random_misses_more = Steps(_misses_by_order, True, "last-level misses per reference at the largest working set "
                            "both walks counted")


def _largest_miss_ratio(order: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        return largest(_miss_ratios(ds, order))[1]

    return measured


FIG3_16 = _chase_item(
    "3.16", "L2d miss ratio",
    "The walks of figure 3.15 (NPAD=0, sequential and random) with the cache counters attached: misses per "
    "cache access against the working set (table 3.2 lists the counts per iteration).",
    numbers=[
        Number("random walk, misses per reference at the largest working set", None, "%",
               _largest_miss_ratio("random"), "the text gives no number: the ratio grows once the set exceeds "
               "the L2, towards almost 100%", provenance=_TRANSLATED),
        Number("sequential walk, misses per reference at the largest working set", None, "%",
               _largest_miss_ratio("sequential"), "the text gives no number: with (nearly) perfect prediction L2 "
               "use grows only slightly", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Once the working set exceeds the L2, the random walk's miss ratio climbs with it: higher at "
              "each larger working set.",
              "Drepper 3.3.2, fig. 3.16: when the working set exceeds the L2 the miss ratio starts to grow; it "
              "keeps growing until it reaches almost 100%", _miss_ratio_climbs),
        Claim("Beyond the L2 the random walk misses more often than the sequential walk, whose lines are "
              "prefetched: at the largest working set both measured.",
              "Drepper 3.3.2, fig. 3.16 and table 3.2: with (nearly) perfect predictability the sequential walk "
              "shows only a slight increase in L2 use; the random walk's misses approach 100%", _random_misses_more),
    ],
    quick=at_working_sets(),
    note=("The source counted L2 misses on a Pentium 4 whose L2 was the last cache; memlab counts the last-level "
          "cache (perf cache-misses per cache-references), so on a machine with an L3 the climb starts past the "
          "L3. Without hardware counters (most virtual machines) the walks are still measured and the claims say "
          "which counter is missing and why."),
)


#: Two-thread points count only where the threads ran together at least this share of the time:
#: on a busy machine they take turns on the CPUs, and neither contention nor sharing shows.




def _one_and_n(ds: Dataset, threads: int, where: str) -> tuple[float, float, float]:
    """(working set, one thread's, the fastest of ``threads`` threads' time per element) at the largest
    working set of ``where`` both measured (NotMeasurable with fewer CPUs than threads)."""
    need_cpus(ds, threads)
    size, found = at_largest_common(ds, "ns_per_element", where, {"one": {"threads": 1}, "n": {"threads": threads}})
    return size, found["one"], found["n"]


def _thread_slowdown(ds: Dataset, threads: int, where: str) -> tuple[float, float]:
    """(working set, percent) by which the fastest of ``threads`` threads is slower per element than one
    thread alone, at the largest working set of ``where`` both measured."""
    size, one, n = _one_and_n(ds, threads, where)
    return size, (n / one - 1) * 100


def _memory_slowdowns(two: float, four: float, note_two: str, note_four: str) -> list[Number]:
    """The source's slowdowns of the fastest of 2 and of 4 threads beyond the last cache, in percent."""

    def slowdown(threads: int) -> Callable[[Dataset], float]:
        return lambda ds: _thread_slowdown(ds, threads, "beyond_llc")[1]

    return [Number(f"slowdown of the fastest of {n} threads, beyond the last cache", source, "%", slowdown(n), note,
                   provenance=_TRANSLATED)
            for n, source, note in ((2, two, note_two), (4, four, note_four))]


def _n_over_one(threads: int, where: str) -> Callable[[Dataset], float]:
    """ds -> the fastest of ``threads`` threads' time per element / one thread's, in ``where``."""

    def ratio(ds: Dataset) -> float:
        _, one, n = _one_and_n(ds, threads, where)
        return n / one

    return ratio


def _threads_slower(threads: int, where: str, percent: float) -> Ratio:
    return Ratio(_n_over_one(threads, where), 1 + percent / 100, f"the fastest of {threads} threads / one thread, "
                 f"ns per element, {REGION_NAMES[where]}", f"up to {percent:g}% slower")


def _threads_unaffected(threads: int, where: str, contrast_percent: float) -> Same:
    return Same(_n_over_one(threads, where), 1 + contrast_percent / 100, f"the fastest of {threads} threads / one "
                f"thread, ns per element, {REGION_NAMES[where]}", f"{contrast_percent:g}% slower beyond the last "
                "cache, where the threads share the memory bus")


def _four_over_two(where: str) -> Callable[[Dataset], float]:
    def ratio(ds: Dataset) -> float:
        _, _, two = _one_and_n(ds, 2, where)
        _, _, four = _one_and_n(ds, 4, where)
        return four / two

    return ratio


def _four_lose_more(two_percent: float, four_percent: float, where: str) -> Ratio:
    """The fastest of four threads against the fastest of two: the source's slowdowns against one
    thread, (1 + four) / (1 + two)."""
    return Ratio(_four_over_two(where), (1 + four_percent / 100) / (1 + two_percent / 100),
                 f"the fastest of 4 threads / the fastest of 2, ns per element, {REGION_NAMES[where]}",
                 f"{four_percent:g}% against {two_percent:g}% slower than one thread")


def _times_one_thread(threads: int, where: str) -> Steps:
    def series(ds: Dataset) -> dict[str, float]:
        _, one, n = _one_and_n(ds, threads, where)
        return {"one thread": one, f"the fastest of {threads}": n}

    return Steps(series, True, f"ns per element, {REGION_NAMES[where]}")


_THREADS_NOTE = ("The threads walk one shared list, each pinned to its own CPU and starting at its own place; the "
                 "time is the fastest thread's on-CPU time per element, as the source reports the fastest thread. "
                 "Thread counts above this machine's CPUs are not measured, and their claims say so. Points whose "
                 "threads were all on their CPUs together less than half of the time (overlap_fraction: a busy "
                 "machine makes them take turns) are left out, and a claim left without points says why. The source's "
                 "slowdowns come from the shared bus to memory, beyond its last cache: on a machine whose last "
                 "cache is larger than the sweep's largest working set those claims are not measurable.")


def _threads_item(number: str, title: str, measured: str, numbers: Sequence[Number], claims: Sequence[Claim],
                  largest_bytes: int = 1 << 27) -> Item:
    """A thread figure's item; its quick run adds ``largest_bytes``, past most last caches. Its numbers and
    claims leave out the points whose threads ran together less than :data:`TOGETHER` of the time."""
    numbers = [dataclasses.replace(n, measured=together(n.measured)) if n.measured else n for n in numbers]
    claims = [dataclasses.replace(c, check=dataclasses.replace(c.check, statistic=together(c.check.statistic)))
              for c in claims]
    return _chase_item(number, title, measured, numbers, claims, machine=FOUR_CPUS, section="3.3.4",
                       quick=at_working_sets(largest_bytes), note=_THREADS_NOTE)


FIG3_19 = _threads_item(
    "3.19", "sequential read access, multiple threads",
    "1, 2 and 4 threads follow the pointers of one sequentially linked list of 128-byte elements (NPAD=15), "
    "reading only: no line is modified, no synchronisation; the fastest thread's time per element.",
    numbers=_memory_slowdowns(18, 34, "up to 18%", "up to 34%"),
    claims=[
        Claim("While the list fits in the caches the threads do not slow each other: in the L2 region the "
              "fastest of two threads reads about as fast as one thread alone (the lines are shared, no RFO).",
              "Drepper 3.3.4, fig. 3.19: no RFO messages are needed and all cache lines can be shared; the "
              "slowdown comes from the buses to the memory controller and the memory modules alone",
              _threads_unaffected(2, "l2", 18)),
        Claim("Beyond the last cache the threads share the memory bus: the fastest of two is slower per element "
              "than one thread alone.",
              "Drepper 3.3.4, fig. 3.19: up to 18% slower with two threads; even with two threads the bandwidth "
              "does not suffice for linear scaling", _threads_slower(2, "beyond_llc", 18)),
        Claim("Beyond the last cache four threads lose more than two.",
              "Drepper 3.3.4, fig. 3.19: up to 18% with two threads, 34% with four",
              _four_lose_more(18, 34, "beyond_llc")),
    ],
)

FIG3_20 = _threads_item(
    "3.20", "sequential increment, multiple threads",
    "Figure 3.19's walk by 1, 2 and 4 threads, each incrementing pad[0] of every element it passes (inc): "
    "the threads write the same lines; the fastest thread's time per element, log scale.",
    numbers=[
        _cycles_number("one thread, L1d region", 20, "l1", "under 20: one thread passes 20 cycles only once the "
                       "L1d is exceeded", threads=1),
        _cycles_number("fastest of 2 threads, L1d region", 20, "l1", "20 and more already at the smallest "
                       "working set", threads=2),
        *_memory_slowdowns(18, 93, "18%, as when reading", "93%: prefetch and write-back traffic saturate the bus"),
    ],
    claims=[
        Claim("With more than one thread writing, the L1d stops helping: in the L1d region the fastest of two "
              "threads costs more per element than one thread alone.",
              "Drepper 3.3.4, fig. 3.20: one thread exceeds 20 cycles only once the L1d is too small; with "
              "several threads the access times reach such values at once, even at the smallest working sets",
              _times_one_thread(2, "l1")),
        Claim("Beyond the last cache the fastest of two incrementing threads is slower per element than one "
              "thread alone.",
              "Drepper 3.3.4, fig. 3.20: with two threads 18% of the performance is still lost",
              _threads_slower(2, "beyond_llc", 18)),
        Claim("Beyond the last cache four writing threads lose far more than two.",
              "Drepper 3.3.4, fig. 3.20: 18% with two threads, 93% with four: prefetch traffic and write-back "
              "saturate the bus", _four_lose_more(18, 93, "beyond_llc")),
    ],
)


def _speedup(ds: Dataset, threads: int, where: str) -> tuple[float, float]:
    """(working set, n x t1 / tn) at the largest working set of ``where`` one and ``threads`` threads measured."""
    size, one, n = _one_and_n(ds, threads, where)
    return size, threads * one / n


def _speedup_in(threads: int, where: str) -> Callable[[Dataset], float]:
    return lambda ds: _speedup(ds, threads, where)[1]


_linear_in_cache = Ratio(_speedup_in(2, "l2"), 2.0, "two threads' speed-up n x t1 / tn in the L2 region",
                         "almost linear: nearly 2")


def _speedups(ds: Dataset) -> dict[str, float]:
    return {"L2 region": _speedup(ds, 2, "l2")[1], "beyond the last cache": _speedup(ds, 2, "beyond_llc")[1]}


_speedup_falls = Steps(_speedups, False, "two threads' speed-up over one")


def _four_over_two_speedup(ds: Dataset) -> float:
    return _speedup(ds, 4, "beyond_llc")[1] / _speedup(ds, 2, "beyond_llc")[1]


_four_hardly_better = Same(_four_over_two_speedup, 2.0, "speed-up of four threads / of two, beyond the last cache",
                           "linear scaling would double the speed-up from two threads to four")


def _most_threads_cycles(ds: Dataset) -> float:
    counts = [row["threads"] for row in rows_where(ds, "ns_per_element") if finite(row.get("threads"))]
    if not counts:
        raise NotMeasurable("no row records its number of threads")
    if max(counts) < 2:
        raise NotMeasurable("no point of several threads")
    rows = rows_where(ds, "ns_per_element", threads=max(counts))
    size = max(row["working_set_bytes"] for row in rows if finite(row.get("working_set_bytes")))
    cycles = [_value(row, "ns_per_element") * ghz(row) for row in rows
              if row.get("working_set_bytes") == size and ghz(row) is not None]
    if not cycles:
        raise NotMeasurable("the rows record no core clock to turn ns into cycles")
    return statistics.median(cycles)


FIG3_21 = _threads_item(
    "3.21", "random Addnextlast, multiple threads",
    "1, 2 and 4 threads walk one randomly linked list of 128-byte elements, each adding the next element's "
    "last word to pad[0] of the current one (addnextlast); the fastest thread's time per element, and "
    "(figure 3.22) the speed-up n x t1 / tn over one thread.",
    numbers=[
        Number("cycles per element, the most threads at the largest working set", 1500, "cycles",
               _most_threads_cycles, "the extreme case: four threads, the largest set; here as many threads as "
               "this machine ran", compare=False, provenance=_TRANSLATED),
    ],
    claims=[
        Claim("While the list fits in the caches the threads scale almost linearly: in the L2 region two threads "
              "reach a speed-up near 2.",
              "Drepper 3.3.4, fig. 3.22: in the L2 and L3 the speed-up is almost linear, nearly reaching 2 and 4",
              _linear_in_cache),
        Claim("Once the list no longer fits in the last cache the speed-up drops: two threads gain less beyond "
              "the last cache than in the L2 region.",
              "Drepper 3.3.4, fig. 3.22: as soon as the L3 does not suffice for the working set the numbers crash",
              _speedup_falls),
        Claim("Beyond the last cache four threads gain hardly more than two: about the two-thread speed-up.",
              "Drepper 3.3.4, table 3.3 and fig. 3.22: for four threads it is almost not worth going beyond two; "
              "the numbers are equally bad for two and four threads", _four_hardly_better),
    ],
    largest_bytes=1 << 26,  # a random walk by several threads: 64 MiB keeps the quick run to seconds
)


def _critical_word_slowdowns(ds: Dataset) -> dict[str, float]:
    """{order: median percent by which pointer_word=7 is slower than pointer_word=0 beyond the L2}."""
    found, reasons = {}, []
    for order in ("sequential", "random"):
        try:
            first = region(ds, curve(ds, "ns_per_element", order=order, pointer_word=0), "beyond_l2")
            last = curve(ds, "ns_per_element", order=order, pointer_word=7)
        except NotMeasurable as reason:
            reasons.append(str(reason))
            continue
        common = sorted(set(first) & set(last))
        if not common:
            reasons.append(f"order={order}: the two pointer words share no working set beyond 4x the L2")
            continue
        found[order] = statistics.median((last[k] / first[k] - 1) * 100 for k in common)
    if not found:
        raise NotMeasurable("; ".join(reasons))
    return found


#: Figure 3.30's window: the critical word at the end is between this much faster and slower (percent).
CRITICAL_WORD_WINDOW = (-2.0, 10.0)


def _critical_word_within(ds: Dataset) -> Verdict:
    found = _critical_word_slowdowns(ds)
    low, high = CRITICAL_WORD_WINDOW
    detail = ", ".join(f"{order} {percent:.3g}%" for order, percent in found.items())
    return verdict(all(low <= p <= high for p in found.values()),
                   f"beyond 4x the L2, pointer in the last word against the first: {detail} slower (between "
                   f"{low:g}% and {high:g}% for each order)", **found)


_critical_word_small = Sanity(_critical_word_within, "the source's 0.7% is below a shared machine's noise: the "
                              "window checks only the sign and the size")


def _critical_word_number(order: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        found = _critical_word_slowdowns(ds)
        if order not in found:
            raise NotMeasurable(f"no order={order} pairs beyond 4x the L2")
        return found[order]

    return measured


def _fig3_30_quick(sweep: Sweep) -> Sweep:
    """Both orders and both pointer words at the sweep's sets nearest a quarter of the L2 (inside the
    caches, for the figure), eight times the L2 and 128 MiB (where the claim reads), three repetitions:
    the effect is small, so fewer sets measured more often."""
    sizes = core.caches(Dataset([], {}))
    sweep_sizes = sorted({p["working_set_bytes"] for p in sweep.points})
    keep = {nearest(sweep_sizes, t) for t in (sizes["L2"] / 4, min(8 * sizes["L2"], 1 << 28), 1 << 27)}
    return shorter(sweep, [p for p in sweep.points if p["working_set_bytes"] in keep], repeat=3)


FIG3_30 = _chase_item(
    "3.30", "critical word at end of cache line",
    "Follow, sequential and random, on 64-byte elements (NPAD=7) with the list pointer in the first word of "
    "each element against in its last word; the slowdown of the second in percent.",
    numbers=[
        Number("slowdown beyond the L2, sequential", 0.7, "%", _critical_word_number("sequential"),
               "about 0.7%; slightly more for sequential access", provenance=_TRANSLATED),
        Number("slowdown beyond the L2, random", 0.7, "%", _critical_word_number("random"), "about 0.7%",
               provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Beyond the L2 a critical word at the end of the line costs a little, never saves: the walk with "
              "the pointer in the last word is between 2% faster (noise) and 10% slower than with it in the "
              "first, for both orders.",
              "Drepper 3.5.2, fig. 3.30: the values are noisy, but once the L2 no longer holds the working set "
              "the critical word at the end costs about 0.7%", _critical_word_small),
    ],
    machine="not named in the text; 64-byte cache lines filled in 8-byte pieces, critical word first",
    section="3.5.2", quick=_fig3_30_quick,
    note=("The source's effect (about 0.7%) is smaller than the noise of a quick run on a shared machine; the "
          "claim asks only that the sign and size fit. Read the full sweep (nine repetitions) for the effect itself."),
)




def _prefetch_ratio_in_l2(ds: Dataset) -> float:
    off = region_median(ds, "l2", prefetch_distance=0, helper_thread=False)
    return region_median(ds, "l2", prefetch_distance=5, helper_thread=False) / off


_prefetch_same_in_cache = Same(_prefetch_ratio_in_l2, 1 / (1 - 0.08), "L2 region: prefetch 5 / no prefetch",
                               "beyond the L2 prefetching saves up to 8%")


def _slower_over_faster(faster: Mapping[str, Any], slower: Mapping[str, Any]) -> Callable[[Dataset], float]:
    def ratio(ds: Dataset) -> float:
        _, found = at_largest_common(ds, "ns_per_element", "beyond_l2", {"a": faster, "b": slower})
        return found["b"] / found["a"]

    return ratio


def _faster_beyond(faster: Mapping[str, Any], slower: Mapping[str, Any], what: str, saved: float) -> Ratio:
    """``faster`` takes ``saved`` (a fraction) less time than ``slower`` in the source."""
    return Ratio(_slower_over_faster(faster, slower), 1 / (1 - saved), f"{what}, time per element at the largest "
                 "working set beyond 4x the L2", f"{saved:.0%} less time")


_FIG6_7_MACHINE = ("a 32-bit machine with a 512 KiB L2 as its last cache; NPAD=31 there is 128 bytes "
                   "per element (two cache lines), 160 cycles of work per element")

FIG6_7 = _chase_item(
    "6.7", "average with prefetch, NPAD=31",
    "A random walk doing about 160 cycles of dependent work per element, without and with a "
    "software prefetch of the element five ahead.",
    numbers=[
        Number("time saved by prefetching beyond the L2", 0.08, "fraction",
               lambda ds: 1 - value_beyond(ds, prefetch_distance=5, helper_thread=False)
               / value_beyond(ds, prefetch_distance=0, helper_thread=False), "50-60 cycles, up to 8%",
               provenance=_TRANSLATED),
    ],
    claims=[
        Claim("While the list fits in the cache, prefetching changes nothing.",
              "Drepper 6.3.2, fig. 6.7: up to the L2 size the numbers match; the prefetches cost nothing",
              _prefetch_same_in_cache),
        Claim("Beyond the cache, prefetching five elements ahead makes the walk faster.",
              "Drepper 6.3.2, fig. 6.7: beyond L2 prefetching saves 50-60 cycles, up to 8%",
              _faster_beyond({"prefetch_distance": 5, "helper_thread": False},
                             {"prefetch_distance": 0, "helper_thread": False}, "no prefetch / prefetch 5", 0.08)),
    ],
    machine=_FIG6_7_MACHINE, section="6.3.2",
    note="The source's 32-bit NPAD=31 elements are 128 bytes; the sweep walks 128-byte elements too "
         "(element_bytes=128), where memlab's 64-bit NPAD=31 would be 256.",
)


def value_beyond(ds: Dataset, **match: Any) -> float:
    """The per-element time at the largest working set beyond 4x the L2 for the rows matching ``match``."""
    return largest(region(ds, curve(ds, "ns_per_element", **match), "beyond_l2"))[1]


def _helper_ratio(ds: Dataset) -> float:
    threads = machine_fact(ds, "smt_threads_per_core")
    if finite(threads) and threads < 2:
        raise NotMeasurable("no SMT: the source ran the helper on the other hyperthread of the walking "
                            "core, sharing its L1d and L2")
    need_cpus(ds, 2)
    return _slower_over_faster({"helper_thread": True}, {"prefetch_distance": 0, "helper_thread": False})(ds)


_helper_check = Ratio(_helper_ratio, 1 / (1 - 0.25), "no prefetch / helper thread, time per element at the largest "
                      "working set beyond 4x the L2", "about 25% less time")


FIG6_8 = _chase_item(
    "6.8", "average with helper thread, NPAD=31",
    "Figure 6.7's walk plus a helper thread running about 100 elements ahead and reading every "
    "cache line of each element, on the other hyperthread of the same core.",
    numbers=[
        Number("time saved by the helper thread beyond the L2", 0.25, "fraction",
               lambda ds: 1 - value_beyond(ds, helper_thread=True)
               / value_beyond(ds, prefetch_distance=0, helper_thread=False), "about 25%", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Beyond the cache, a helper thread reading ahead makes the walk faster than no prefetch.",
              "Drepper 6.3.4, fig. 6.8: once L2 is exceeded the helper cuts the time by about 25%",
              _helper_check),
    ],
    machine=_FIG6_7_MACHINE + "; helper on the SMT sibling", section="6.3.4",
    note="The helper shares the walking core's caches only where it runs on an SMT sibling.",
)


def _huge_rows(ds: Dataset) -> dict[str, Any]:
    """The match of the rows that really ran on huge pages: hugetlb where granted, else THP where
    the kernel gave huge pages. Rows that record the page kind obtained (``pages_obtained``) are
    grouped by it; older rows by the kind asked for and whether it was granted."""
    if any("pages_obtained" in row for row in ds.rows):
        for pages in ("hugetlb-2m", "thp"):
            if any(row.get("pages_obtained") == pages for row in ds.rows):
                return {"pages_obtained": pages}
        raise NotMeasurable("no huge pages: every row obtained 4 KiB pages")
    for pages, column in (("hugetlb-2m", "pages_granted_hugetlb"), ("thp", "huge_page_fraction")):
        try:
            rows = rows_where(ds, "ns_per_element", pages=pages)
        except NotMeasurable:
            continue
        granted = [r for r in rows if finite(r.get(column)) and r[column] >= 0.9]
        if granted and len(granted) == len(rows):
            return {"pages": pages}
    raise NotMeasurable("no huge pages: no hugetlb pages were reserved and THP was not granted")


def _huge_speedup(at: int | None) -> Callable[[Dataset], float]:
    """ds -> 4 KiB time / huge-page time per element at ``at`` (for None, the largest working set beyond
    the last cache both page kinds measured: the source's 512 MiB is main memory)."""

    def ratio(ds: Dataset) -> float:
        huge = _huge_rows(ds)
        small = curve(ds, "ns_per_element", **({"pages_obtained": "4k"} if "pages_obtained" in huge
                                                 else {"pages": "4k"}))
        big = curve(ds, "ns_per_element", **huge)
        common = sorted(set(small) & set(big))
        if not common:
            raise NotMeasurable("4 KiB and huge pages share no working set")
        size = at if at is not None else max(region(ds, {k: small[k] for k in common}, "beyond_llc"))
        if size not in common:
            raise NotMeasurable(f"no working set of {format_bytes(size)} with both page kinds")
        return small[size] / big[size]

    return ratio


def _huge_faster(at: int | None, gain: float) -> Ratio:
    where = format_bytes(at) if at is not None else "the largest working set beyond the last cache"

    def what_kind(ds: Dataset) -> dict[str, float]:
        kind = next(iter(_huge_rows(ds).values()))
        return {kind: _huge_speedup(at)(ds)}

    return Ratio(what_kind, 1 + gain, f"4 KiB / huge pages, time per element at {where}", f"{gain:.0%} faster")


def _huge_gain_at(size: int | None) -> Callable[[Dataset], float]:
    return lambda ds: _huge_speedup(size)(ds) - 1


FIG7_9 = _chase_item(
    "7.9", "random walk with huge pages, NPAD=0",
    "Figure 3.15's random NPAD=0 walk on 4 KiB pages and on 2 MiB huge pages (hugetlbfs).",
    numbers=[
        Number("speed-up of huge pages at 2^20 bytes", 0.57, "fraction", _huge_gain_at(1 << 20),
               "the whole set fits one 2 MiB page: no DTLB misses", provenance=_TRANSLATED),
        Number("speed-up of huge pages at the largest working set beyond the last cache", 0.38, "fraction",
               _huge_gain_at(None), "the source: 38% at 512 MiB", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("At 2^20 bytes the walk is faster on huge pages than on 4 KiB pages.",
              "Drepper 7.5, fig. 7.9: 57% faster at 2^20 bytes", _huge_faster(1 << 20, 0.57)),
        Claim("From main memory (the largest working set beyond the last cache) the walk is still faster on "
              "huge pages.",
              "Drepper 7.5, fig. 7.9: 38% faster at 512 MiB, far beyond the caches", _huge_faster(None, 0.38)),
    ],
    section="7.5", quick=at_working_sets(1 << 20),
    note="hugetlb pages need a reservation (root: experiments/fig7_9.py makes one); without one the "
         "hugetlb points fall back to 4 KiB pages and the claims use THP where the kernel granted it.",
)


# ---- Drepper 5.4, 6.2.1, 7.1: NUMA, two lines, misalignment, associativity, counters -------------

LINE_BYTES = 64


def _region_median(ds: Dataset, where: str, metric: str = "ns_per_element", **match: Any) -> float:
    return region_median(ds, where, metric, **match)


def _slowdown(ds: Dataset, where: str, base: Mapping[str, Any], other: Mapping[str, Any]) -> float:
    """How much more ``other`` costs per element than ``base`` over a cache region, as a fraction."""
    return _region_median(ds, where, **other) / _region_median(ds, where, **base) - 1


_HOPS_NOTE = ("AMD's published costs for a four-socket Opteron (the source's reference [amdccnuma]); "
              "each hop is one HyperTransport link between a CPU and the memory's node")


def _numa_hops(ds: Dataset) -> dict[float, int]:
    """SLIT distance -> hops (10 is 0, the next larger distance 1 ...) of the dataset's rows;
    NotMeasurable on a machine with one node with memory, or rows at one distance only."""
    nodes = machine_fact(ds, "numa_nodes")
    if isinstance(nodes, list) and nodes:
        memory = [n.get("node") for n in nodes if isinstance(n, Mapping) and n.get("has_memory", True)]
        if len(memory) < 2:
            where = f" (node {memory[0]})" if memory else ""
            raise NotMeasurable(f"one NUMA node with memory on this machine{where}: there is no remote memory, "
                                "only local (0-hop) access was measured")
    distances = sorted({float(r["numa_distance"]) for r in ds.rows if finite(r.get("numa_distance"))})
    if len(distances) < 2:
        raise NotMeasurable("the dataset has rows at one NUMA distance only (numa_distance "
                            f"{', '.join(f'{d:g}' for d in distances) or 'not recorded'}): no remote memory was measured")
    return {d: i for i, d in enumerate(distances)}


def _hop_cost(ds: Dataset, op: str, hop: int) -> float:
    """ns per element of a random walk beyond the L2 doing ``op``, memory ``hop`` hops away."""
    by_hop = {h: d for d, h in _numa_hops(ds).items()}
    if hop not in by_hop:
        raise NotMeasurable(f"no memory {hop} hops away (this machine's farthest is {max(by_hop)} hop"
                            f"{'s' if max(by_hop) != 1 else ''})")
    return _region_median(ds, "beyond_l2", order="random", op=op, numa_distance=by_hop[hop])


def _hop_ratio(op: str, hop: int, base_op: str = "follow") -> Callable[[Dataset], float]:
    return lambda ds: _hop_cost(ds, op, hop) / _hop_cost(ds, base_op, 0)


_remote_read_slower = Ratio(_hop_ratio("follow", 1), 1.09, "random read beyond the L2, 1 hop / local",
                            "9% slower")


def _reads_by_hops(ds: Dataset) -> dict[str, float]:
    hops = sorted(set(_numa_hops(ds).values()))
    if len(hops) < 3:
        raise NotMeasurable(f"needs memory at 0, 1 and 2 hops; this machine's memory is at most {hops[-1]} hop away")
    return {f"{h} hops": _hop_cost(ds, "follow", h) for h in hops}


_farther_slower = Steps(_reads_by_hops, True, "random read beyond the L2, ns per element by hops", 1.30,
                        "9% slower at 1 hop, 30% at 2")


def _read_and_write_local(ds: Dataset) -> dict[str, float]:
    distances = sorted({float(r["numa_distance"]) for r in ds.rows if finite(r.get("numa_distance"))})
    local = {"numa_distance": distances[0]} if distances else {}
    return {"read (follow)": region_median(ds, "beyond_l2", order="random", op="follow", **local),
            "write (inc)": region_median(ds, "beyond_l2", order="random", op="inc", **local)}


_writes_slower_than_reads = Steps(_read_and_write_local, True, "local memory, random walk beyond the L2, ns per element")


def _random_only(sweep: Sweep) -> Sweep:
    return dataclasses.replace(sweep, points=[p for p in sweep.points if p.get("order", "random") == "random"])


def _fig5_3_quick(sweep: Sweep) -> Sweep:
    """Random walks only (the source's figure is about memory, not prefetching) at the working sets
    of :func:`at_working_sets`, for every (CPU, memory node) pair of the full sweep; reads and writes
    of one working set back to back (the claims compare them), five short samples each."""
    quick = at_working_sets()(_random_only(sweep))
    points = sorted(quick.points, key=lambda p: (p["working_set_bytes"], p.get("op", "follow") != "follow"))
    return dataclasses.replace(quick, points=points, repeat=min(5, sweep.repeat))


FIG5_3 = _chase_item(
    "5.3", "read and write cost by NUMA distance",
    "Reads (follow) and writes (inc) of a 64-byte-element list whose memory is bound with mbind to each "
    "node with memory, walked from the first CPU of each node; time per element beyond the caches by the "
    "number of hops between the walking CPU and the memory.",
    numbers=[
        Number("read, 1 hop / 0 hops", 1.09, "x", _hop_ratio("follow", 1),
               "9% slower (figure 5.4's bandwidth test: remote reads 20% slower)", provenance=_TRANSLATED),
        Number("read, 2 hops / 0 hops", 1.30, "x", _hop_ratio("follow", 2), "30% slower", provenance=_TRANSLATED),
        Number("write, 2 hops / read, 0 hops", 1.49, "x", _hop_ratio("inc", 2), "49% slower", provenance=_TRANSLATED),
        Number("write, 2 hops / write, 0 hops", 1.32, "x", _hop_ratio("inc", 2, "inc"), "32% slower",
               provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Beyond the caches, reading memory one hop away costs more than reading local memory.",
              "Drepper 5.4, fig. 5.3: 1-hop reads are 9% slower than 0-hop reads (fig. 5.4: remote reads "
              "always 20% slower)", _remote_read_slower),
        Claim("The more hops to the memory, the more a read costs: 2 hops more than 1, 1 more than 0.",
              "Drepper 5.4, fig. 5.3: reads 9% slower at 1 hop, 30% at 2 hops", _farther_slower),
        Claim("Writing costs more than reading: beyond the caches, a random walk that increments each "
              "element is slower than one that only follows the pointers (local memory).",
              "Drepper 5.4, fig. 5.3: 'writes are, not surprisingly, slower than reads'",
              _writes_slower_than_reads),
    ],
    machine=_HOPS_NOTE, section="5.4", quick=_fig5_3_quick,
    note="A machine with one NUMA node has no remote memory: the hop claims are not measurable there and "
         "only the local walks are measured (the write-against-read claim is judged on them).",
)


def _paired_quick(sweep: Sweep) -> Sweep:
    """Figures 6.2 and 6.4 compare two placements measured back to back at each working set: the
    working sets of :func:`at_working_sets`, five short samples each (the slowdowns are tens of
    percent, and a busy machine moves one sample by as much)."""
    quick = at_working_sets()(sweep)
    return dataclasses.replace(quick, repeat=min(5, sweep.repeat))


#: Figure 6.2's series: name -> the rows' match (order, element size).
FIG6_2_SERIES = {
    "sequential, 4 lines": {"order": "sequential", "element_bytes": 256},
    "random, 2 lines": {"order": "random", "element_bytes": 128},
    "random, 4 lines": {"order": "random", "element_bytes": 256},
}


def _pair_slowdown(ds: Dataset, where: str, series: str) -> float:
    """Figure 6.2: the second value in the element's last line against both in its first line."""
    match = FIG6_2_SERIES[series]
    last_line = (match["element_bytes"] - LINE_BYTES) // 8
    return _slowdown(ds, where, {**match, "pair_word": 2}, {**match, "pair_word": last_line})


def _pair_number(where: str, series: str) -> Callable[[Dataset], float]:
    return lambda ds: 100 * _pair_slowdown(ds, where, series)


def _pair_costs(series: Sequence[str], wheres: Sequence[str]) -> Callable[[Dataset], dict[str, float]]:
    """ds -> {series, region: time with the last line / with the first line}."""
    return lambda ds: {f"{name}, {REGION_NAMES[w]}": 1 + _pair_slowdown(ds, w, name) for w in wheres for name in series}


_pairs_free_in_l1 = Same(_pair_costs(list(FIG6_2_SERIES), ("l1",)), 1.17, "last line / first line",
                         "17% slower in the L2 region, where the second line does cost")


def _pairs_cost(series: Sequence[str], wheres: Sequence[str], percent: float, note: str) -> Ratio:
    return Ratio(_pair_costs(series, wheres), 1 + percent / 100, "last line / first line", note)


FIG6_2 = _chase_item(
    "6.2", "spreading over multiple cache lines",
    "A walk adding two values of each element: both in the element's first cache line, or one in the first "
    "and one in the last line; elements of 4 lines walked sequentially, of 2 and 4 lines walked randomly. "
    "The figure is the slowdown of the second placement.",
    numbers=[
        Number("sequential, L2 region, slowdown", 17, "%", _pair_number("l2", "sequential, 4 lines"),
               "about 17%", provenance=_TRANSLATED),
        Number("sequential, beyond the L2, slowdown", 27, "%", _pair_number("beyond_l2", "sequential, 4 lines"),
               "27% once main memory is used", provenance=_TRANSLATED),
        Number("random, 2 lines, L2 region, slowdown", None, "%", _pair_number("l2", "random, 2 lines"),
               "between 25% and 35% (both random curves)", provenance=_TRANSLATED),
        Number("random, 2 lines, beyond the L2, slowdown", None, "%", _pair_number("beyond_l2", "random, 2 lines"),
               "falls to about 10%: each memory access costs more, not the second line less", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("While the list fits in the L1d, using a second cache line costs nothing.",
              "Drepper 6.2.1, fig. 6.2: no negative effects at all while the working set fits in the L1d",
              _pairs_free_in_l1),
        Claim("Walked sequentially, the element's last line costs extra once the L1d is exceeded, in the L2 "
              "region and beyond it.",
              "Drepper 6.2.1, fig. 6.2: about 17% while the L2 suffices, 27% from main memory",
              _pairs_cost(["sequential, 4 lines"], ("l2", "beyond_l2"), 17, "17% in the L2 region, 27% beyond it: the smaller taken")),
        Claim("Walked randomly, the element's last line costs extra in the L2 region (elements of 2 and of "
              "4 lines).",
              "Drepper 6.2.1, fig. 6.2: between 25% and 35% for working sets that fit in the L2",
              _pairs_cost(["random, 2 lines", "random, 4 lines"], ("l2",), 25, "between 25% and 35%: the lower end taken")),
    ],
    section="6.2.1", quick=_paired_quick,
    machine="a Core 2 era machine (the text names none; 64-byte cache lines); slowdown in percent",
)


def _misalign_slowdown(ds: Dataset, where: str, order: str) -> float:
    """Figure 6.4: elements 4 bytes off their alignment against aligned ones."""
    return _slowdown(ds, where, {"order": order, "misalign_bytes": 0}, {"order": order, "misalign_bytes": 4})


def _misaligned_costs(where: str, percent: float, note: str) -> Ratio:
    return Ratio(lambda ds: 1 + _misalign_slowdown(ds, where, "sequential"), 1 + percent / 100,
                 f"sequential, {REGION_NAMES[where]}: misaligned / aligned", note)


def _misalign_by_order(ds: Dataset) -> dict[str, float]:
    return {"random": 1 + _misalign_slowdown(ds, "l2", "random"),
            "sequential": 1 + _misalign_slowdown(ds, "l2", "sequential")}


_sequential_hit_harder = Steps(_misalign_by_order, True, "L2 region, misaligned / aligned by order")


FIG6_4 = _chase_item(
    "6.4", "overhead of unaligned accesses",
    "Figure 3.13's Inc walk (16-byte elements, NPAD=1) with the list aligned and with every element "
    "4 bytes off its alignment, so that a quarter of the increments straddle two cache lines; sequential "
    "and random order. The figure is the slowdown of the misaligned list.",
    numbers=[
        Number("sequential, L2 region, slowdown", 300, "%", lambda ds: 100 * _misalign_slowdown(ds, "l2", "sequential"),
               "about 300%: the L1d-L2 link is overloaded", provenance=_TRANSLATED),
        Number("sequential, beyond the last cache, slowdown", None, "%",
               lambda ds: 100 * _misalign_slowdown(ds, "beyond_llc", "sequential"),
               "between 20% and 30% for very large working sets", provenance=_TRANSLATED),
        Number("random, L2 region, slowdown", None, "%", lambda ds: 100 * _misalign_slowdown(ds, "l2", "random"),
               "smaller than sequential: hidden by the higher cost of each access", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Walked sequentially, misaligned elements cost more than aligned ones while the list fits in "
              "the L2.", "Drepper 6.2.1, fig. 6.4: about 300% for working sets that fit in the L2",
              _misaligned_costs("l2", 300, "about 300% slower")),
        Claim("From main memory (beyond the last cache) misaligned elements still cost more than aligned ones.",
              "Drepper 6.2.1, fig. 6.4: 20% to 30% for very large working sets (main memory: the curve's "
              "right end, 2^28 bytes)",
              _misaligned_costs("beyond_llc", 20, "20% to 30% slower: the lower end taken")),
        Claim("Misalignment costs a sequential walk more than a random one.",
              "Drepper 6.2.1, fig. 6.4: the effect is larger for sequential access; in the random case it is "
              "partly hidden by the higher cost of each access", _sequential_hit_harder),
    ],
    section="6.2.1", quick=_paired_quick,
    machine="a Core 2 era machine (the text names none); slowdown in percent",
)


def _l1d_geometry(ds: Dataset) -> tuple[int, int]:
    """(L1d bytes, ways) of the dataset's machine from its cache facts (NotMeasurable without ways)."""
    for cache in machine_fact(ds, "caches") or []:
        if cache.get("level") == 1 and cache.get("type") == "Data":
            size, ways = cache.get("size_bytes"), cache.get("ways")
            if finite(size) and finite(ways) and ways > 0:
                return int(size), int(ways)
    raise NotMeasurable("the machine's L1d size and ways are unknown (no cache facts in sysfs)")


def _surface(ds: Dataset) -> dict[int, dict[int, float]]:
    """Figure 6.5's surface: element distance -> list length -> median ns per element."""
    cells: dict[int, dict[int, list[float]]] = {}
    for row in rows_where(ds, "ns_per_element"):
        distance, size = row.get("element_distance"), row.get("working_set_bytes")
        if finite(distance) and finite(size):
            length = int(size) // LINE_BYTES
            cells.setdefault(int(distance), {}).setdefault(length, []).append(_value(row, "ns_per_element"))
    if not cells:
        raise NotMeasurable("the dataset has no rows with element_distance")
    return {d: {n: statistics.median(v) for n, v in by.items()} for d, by in cells.items()}


def _way_distance(ds: Dataset, surface: Mapping[int, Mapping[int, float]]) -> tuple[int, int]:
    """(elements one L1d way apart, ways); NotMeasurable where the surface cannot show a conflict."""
    size, ways = _l1d_geometry(ds)
    distance = size // ways // LINE_BYTES
    if distance not in surface:
        raise NotMeasurable(f"no list with elements one L1d way ({format_bytes(size // ways)}, {distance} "
                            "elements) apart was measured")
    longest = max(surface[distance])
    if longest <= ways:
        raise NotMeasurable(f"the L1d has {ways} ways: lists of up to {longest} elements never overflow one set")
    return distance, ways


def _conflict_ratio(ds: Dataset) -> float:
    surface = _surface(ds)
    distance, ways = _way_distance(ds, surface)
    fits = statistics.median(v for n, v in surface[distance].items() if n <= ways)
    overflows = statistics.median(v for n, v in surface[distance].items() if n > ways)
    return overflows / fits


_set_conflict = Ratio(_conflict_ratio, 10 / 3, "elements one L1d way apart: lists longer than the ways / shorter, "
                      "ns per element", "10 cycles per element instead of 3")


def _free_ratio(ds: Dataset) -> float:
    surface = _surface(ds)
    distance, ways = _way_distance(ds, surface)
    longest = max(max(by) for by in surface.values())
    # elements d apart fall into distance / gcd(d, distance) sets; no set overflows while each holds <= ways
    free = [d for d in surface if math.ceil(longest / (distance // math.gcd(d, distance))) <= ways
            and longest in surface[d]]
    if not free:
        raise NotMeasurable("every distance measured maps the longest list onto too few sets")
    short = statistics.median(v for d in free for n, v in surface[d].items() if n <= 4)
    long = statistics.median(surface[d][longest] for d in free)
    return long / short


_other_distances_free = Same(_free_ratio, 10 / 3, "distances that spread the list over enough sets: the longest "
                             "list / up to 4 elements, ns per element", "10 cycles against 3 where one set overflows")


def _l1d_read_off_the_map(ds: Dataset) -> Verdict:
    size, ways = _l1d_geometry(ds)
    _way_distance(ds, _surface(ds))
    found = associativity(Dataset(rows_where(ds, "ns_per_element"), ds.metadata))
    if found["ways"] is None:
        return verdict(False, f"no set conflict found on the map (sysfs: {format_bytes(size)}, {ways} ways)",
                       ways=0.0)
    holds = found["ways"] == ways and found["l1d_bytes"] == size
    return verdict(holds, f"read off the map: {format_bytes(found['l1d_bytes'])}, {found['ways']} ways; sysfs: "
                   f"{format_bytes(size)}, {ways} ways", ways=found["ways"], l1d_bytes=found["l1d_bytes"])


_reads_the_l1d = Sanity(_l1d_read_off_the_map, "the map must read this machine's own L1d geometry, an exact "
                        "match with no effect to bound")


def _fig6_5_cycles(kind: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        rows = rows_where(ds, "ns_per_element")
        clocks = [c for c in (ghz(r) for r in rows) if c is not None]
        if not clocks:
            raise NotMeasurable("the rows record no core clock to turn ns into cycles")
        found = associativity(Dataset(rows, ds.metadata))
        if found[kind] is None:
            raise NotMeasurable("no set conflict on the map")
        return found[kind] * statistics.median(clocks)

    return measured


def _fig6_5_geometry(kind: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        found = associativity(Dataset(rows_where(ds, "ns_per_element"), ds.metadata))
        if found[kind] is None:
            raise NotMeasurable("no set conflict on the map")
        return float(found[kind])

    return measured


#: Figure 6.5's quick distances (in 64-byte elements): one and two 4 KiB ways (every element in one
#: set), one element past a way, and two that spread a list over 64 and 4 sets. Five distances at
#: every list length keep the quick run near 20 s of its 3-minute budget; the full sweep has all 128.
FIG6_5_DISTANCES = (1, 16, 64, 65, 128)


def _fig6_5_quick(sweep: Sweep) -> Sweep:
    """A few distances (:data:`FIG6_5_DISTANCES`), every list length, short samples: the surface must
    still show where one set overflows, and that other distances do not."""
    points = [p for p in sweep.points if p.get("element_distance") in FIG6_5_DISTANCES]
    return shorter(sweep, points, repeat=2, target_seconds=0.004)


#: Figure 6.5's full-run distances (in 64-byte elements): every distance up to 16, then every 8th
#: to 128, and one element either side of a 4 KiB way. A way spans a power of two of sets (64 on
#: every L1d of 32 or 48 KiB with 4 KiB ways), so the distances where a set overflows are all here
#: and :func:`memlab.chase_analysis.associativity` reads the same ways and size off this map as
#: off the named sweep's 128 distances (``--fixed``), in a quarter of the points.
FIG6_5_FULL_DISTANCES = tuple(sorted({*range(1, 17), *range(24, 129, 8), 63, 65}))


def _fig6_5_full(sweep: Sweep) -> Sweep:
    return full_variant(keep=lambda p: p.get("element_distance") in FIG6_5_FULL_DISTANCES)(sweep)


#: Figure 6.5: a list overflowing one L1d set costs at least this many times a list that fits (the
#: source: 10 cycles against 3, 3.3x; the claim asks for under half that).

FIG6_5 = _chase_item(
    "6.5", "cache associativity effects",
    "Sequential lists of 1 to 16 one-line elements whose elements sit a fixed distance apart (counted in "
    "elements): cycles per element by distance and list length. At a multiple of one L1d way all elements "
    "share one cache set.",
    numbers=[
        Number("cycles per element, no set conflict", 3, "cycles", _fig6_5_cycles("l1_ns"), "L1d hits",
               provenance=_TRANSLATED),
        Number("cycles per element, a set overflowing", 10, "cycles", _fig6_5_cycles("conflict_ns"),
               "the elements come from the L2 on every lap", provenance=_TRANSLATED),
        Number("L1d ways read off the map", 8, "ways", _fig6_5_geometry("ways"), compare=False, provenance=_TRANSLATED),
        Number("L1d size read off the map", 32 << 10, "bytes", _fig6_5_geometry("l1d_bytes"), compare=False,
               provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Elements one L1d way apart all share one cache set: a list longer than the ways costs far more "
              "per element than one that fits.",
              "Drepper 6.2.1, fig. 6.5: at distances of a multiple of 4096 bytes and more than 8 elements, 10 "
              "cycles per element instead of 3", _set_conflict),
        Claim("At distances that spread the list over enough sets, the longest list costs what the short ones "
              "do: virtual addresses map well onto the L1d's slots.",
              "Drepper 6.2.1, fig. 6.5: the same 3 cycles for almost all placements of the elements",
              _other_distances_free),
        Claim("The map measures the L1d: its ways and size, read off where the conflicts start, are the "
              "machine's.",
              "Drepper 6.2.1, fig. 6.5: from this graph the processor has a 32 KB L1d with 8 ways; the test "
              "can determine these values", _reads_the_l1d),
    ],
    section="6.2.1", quick=_fig6_5_quick, full=_fig6_5_full,
    machine="a 32-bit machine with a 32 KiB, 8-way L1d (NPAD=15 there is one 64-byte line per element); "
            "cycles per element",
    note="The elements are 64 bytes (one line) as in the source; the distance is counted in elements.",
)


def _counters_missing(ds: Dataset, names: Sequence[str]) -> None:
    for row in ds.rows:
        missing = row.get("counters_missing")
        if isinstance(missing, Mapping):
            for name in names:
                if name in missing:
                    raise NotMeasurable(f"no PMU: {name} {missing[name]}")


def _cpi_curve(ds: Dataset, **match: Any) -> dict[float, float]:
    """Working set -> median cycles per instruction (from the rows' hardware counters)."""
    _counters_missing(ds, ("cycles", "instructions"))
    values: dict[float, list[float]] = {}
    for row in rows_where(ds, None, **match):
        cpi = counter_ratios(row).get("cycles_per_instruction")
        if cpi is not None and finite(row.get("working_set_bytes")):
            values.setdefault(row["working_set_bytes"], []).append(cpi)
    if not values:
        raise NotMeasurable("the rows carry no cycles and instructions counters")
    return {k: statistics.median(v) for k, v in sorted(values.items())}


def _cpi_in(where: str) -> Callable[[Dataset], float]:
    return lambda ds: statistics.median(region(ds, _cpi_curve(ds, order="random"), where).values())


def _cpi_rises(low: str, high: str, effect: float, note: str) -> Ratio:
    return Ratio(lambda ds: _cpi_in(high)(ds) / _cpi_in(low)(ds), effect,
                 f"random walk, cycles per instruction, {REGION_NAMES[high]} / {REGION_NAMES[low]}", note)


FIG7_1 = _chase_item(
    "7.1", "cycles per instruction (follow random)",
    "The random NPAD=0 walk with the hardware counters attached: cycles (CPU_CLK_UNHALTED) over instructions "
    "retired (INST_RETIRED), by working set.",
    numbers=[
        Number("CPI, L1d region", 1.0, "cycles/instruction", _cpi_in("l1"), "1 or less", provenance=_TRANSLATED),
        Number("CPI, L2 region", 3.0, "cycles/instruction", _cpi_in("l2"), "rises to 3.0 past the L1d",
               provenance=_TRANSLATED),
        Number("CPI, beyond the L2", 20, "cycles/instruction", _cpi_in("beyond_l2"), "above 20",
               provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Once the L1d is exceeded, each instruction takes more cycles.",
              "Drepper 7.1, fig. 7.1: CPI 1 or less for small working sets, 3.0 once the L1d is exceeded",
              _cpi_rises("l1", "l2", 3.0, "CPI 1 or less, 3.0 once the L1d is exceeded")),
        Claim("Once the L2 is exceeded too, each instruction takes more cycles still.",
              "Drepper 7.1, fig. 7.1: CPI above 20 once the L2 is exceeded", _cpi_rises("l2", "beyond_l2", 20 / 3, "CPI 3.0 in the L2, above 20 beyond it")),
    ],
    machine="Intel Core 2 (32 KiB L1d, a 2^21-byte L2 as the last cache); counters read with oprofile",
    section="7.1", quick=lambda sweep: at_working_sets()(_random_only(sweep)),
    note="Needs the hardware counters (cycles, instructions): where the PMU refuses them (most virtual "
         "machines) the walk is still measured and the claims say why they cannot be judged. The same sweep "
         "draws figures 7.2 and 7.3 (misses per instruction, random and sequential).",
)

