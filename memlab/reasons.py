"""Why this machine differs from the source's: a reason for every verdict that is not "reproduced".

One module of rules, each a small function of a :class:`Context` (the item,
its claim and verdict, the dataset the claim was judged on, the machine facts
the dataset recorded and the :mod:`memlab.machine_model` of its CPU) that
returns a sentence naming the values it rests on, or None when it does not
apply. :func:`explain` tries :data:`RULES` in order and joins what applies;
where none does the reason says so: "no known machine difference explains
this: a candidate defect". A bandwidth above the core's L1d port limit is an
*invalid measurement* (the clock or the byte count is wrong), never a record.

The rules read the dataset and the facts only, never the catalogue's text of
one item, so that any claim vocabulary can call :func:`explain`.
``memlab reproduce`` (:func:`memlab.reproduce.judge`) attaches the reason to
each :class:`memlab.catalogue.Verdict` and writes it into ``verdicts.json``
and the report.

>>> ctx = Context("fig9.9", "A claim.", "not reproduced", "a / b = 1.0", {}, Dataset([], {}), "")
>>> explain(ctx)
'no known machine difference explains this: a candidate defect'
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from memlab.chart import cache_sizes_of
from memlab.dataset import Dataset
from memlab.machine_model import CoreModel, core_model
from memlab.units import format_bytes

__all__ = ["CANDIDATE_DEFECT", "NOISE_RULES", "RULES", "Context", "explain", "invalid_bandwidth"]

CANDIDATE_DEFECT = "no known machine difference explains this: a candidate defect"
#: The source's vector loads and stores were 16-byte SSE (Drepper 3.5.1).
SOURCE_VECTOR_BYTES = 16
#: A rate this close to a port limit is at the limit (the calibrated clock's own error is ~1%).
AT_LIMIT = 0.9
#: A measured rate this far above the limit is invalid (clock error and rounding allowed for).
ABOVE_LIMIT = 1.02
#: Steal or preemption above these shares makes a run a busy one.
BUSY_STEAL = 0.02
BUSY_ON_CPU = 0.9


@dataclass(frozen=True)
class Context:
    """What a rule reads: the item's key, the claim's text, the verdict (status, detail, values),
    the dataset it was judged on, and ``source_machine`` (the item's machine, as its source
    describes it)."""

    item: str
    claim: str
    status: str
    detail: str
    values: Mapping[str, float]
    dataset: Dataset
    source_machine: str
    model: CoreModel = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", core_model(self.facts))

    @property
    def facts(self) -> Mapping[str, Any]:
        return self.dataset.metadata.get("machine") or {}

    @property
    def family(self) -> str:
        family = self.dataset.metadata.get("family")
        if family:
            return str(family)
        return str(self.dataset.rows[0].get("family", "")) if self.dataset.rows else ""

    def mentions(self, *words: str) -> bool:
        text = self.claim.lower()
        return any(word.lower() in text for word in words)


# ---- reading the dataset -------------------------------------------------------------------


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _sizes(ds: Dataset) -> dict[str, int]:
    sizes, _ = cache_sizes_of(ds)
    return sizes


def _rows(ds: Dataset, metric: str, **match: Any) -> list[dict]:
    return [r for r in ds.rows if _finite(r.get(metric)) and all(r.get(k) == v for k, v in match.items())]


def _region_rows(ds: Dataset, rows: Sequence[dict], where: str) -> list[dict]:
    sizes = _sizes(ds)
    if "L1d" not in sizes or "L2" not in sizes:
        return []
    l1, l2 = sizes["L1d"], sizes["L2"]
    bounds = {"l1": (4096, l1 / 2), "l2": (2 * l1, l2 / 2)}[where]
    return [r for r in rows if _finite(r.get("working_set_bytes"))
            and bounds[0] <= r["working_set_bytes"] <= bounds[1]]


def _median(rows: Sequence[dict], metric: str) -> float | None:
    values = [r[metric] for r in rows if _finite(r.get(metric))]
    return statistics.median(values) if values else None


def _cpu_name(ctx: Context) -> str:
    return _cpu_name_for(ctx.model)


def _source_name(ctx: Context) -> str | None:
    """The source machine's name (its description's first clause), None when the source does not
    name it."""
    name = ctx.source_machine.split(":")[0].split(";")[0].split("(")[0].strip()
    for article in ("a ", "an ", "the "):
        name = name.removeprefix(article)
    return name if name and not name.lower().startswith(("not named", "unnamed", "unknown")) else None


def _sources(ctx: Context) -> str:
    """``the source's <name>``, or ``the source's machine`` when it is not named."""
    return f"the source's {_source_name(ctx) or 'machine'}"


def _one_thread(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("threads", 1) == 1 and r.get("background_op", "none") == "none"
            and r.get("stores", "normal") == "normal"]


def _vector_bytes(rows: Sequence[dict]) -> int | None:
    widths = {int(r["vector_bytes"]) for r in rows if _finite(r.get("vector_bytes")) and r["vector_bytes"] > 0}
    return widths.pop() if len(widths) == 1 else None


# ---- the rules -----------------------------------------------------------------------------


def invalid_bandwidth(ds: Dataset, model: CoreModel | None = None) -> list[str]:
    """The bandwidth rows of ``ds`` that ran faster than the core's L1d port limit allows
    (bytes per cycle on the CPU above the limit for their op and vector width): invalid
    measurements, one sentence each. [] where the limit is unknown.

    >>> invalid_bandwidth(Dataset([], {}))
    []
    """
    model = model or core_model(ds.metadata.get("machine") or {})
    found = []
    for row in ds.rows:
        rate, width, op = row.get("on_cpu_bytes_per_cycle"), row.get("vector_bytes"), row.get("op")
        if op not in ("read", "write", "copy") or not _finite(rate) or not _finite(width) or width <= 0:
            continue
        limit = model.l1d_bytes_per_cycle(op, int(width))
        if limit is not None and rate > ABOVE_LIMIT * limit:
            found.append(f"invalid measurement: {op} of {format_bytes(row.get('working_set_bytes', 0))} ran "
                         f"{rate:.3g} B/cycle, above {_cpu_name_for(model)}'s {limit} B/cycle L1d {op} limit "
                         f"with {int(width)}-byte vectors: the clock or the byte count is wrong, not a record")
    return found


def _cpu_name_for(model: CoreModel) -> str:
    return f"this {model.name} core" if model.known else "this core"


def _rule_invalid(ctx: Context) -> str | None:
    if ctx.family != "bandwidth":
        return None
    found = invalid_bandwidth(ctx.dataset, ctx.model)
    if not found:
        return None
    return found[0] + (f" (and {len(found) - 1} more such rows)" if len(found) > 1 else "")


def _store_control(ctx: Context) -> tuple[float, float, int] | None:
    """(the L1d write rate, the L2 write rate, the store limit) of one thread, with the limit known."""
    rows = _one_thread(_rows(ctx.dataset, "on_cpu_bytes_per_cycle", op="write"))
    width = _vector_bytes(rows)
    if width is None:
        return None
    limit = ctx.model.l1d_bytes_per_cycle("write", width)
    sizes = _sizes(ctx.dataset)
    l1_rows = _region_rows(ctx.dataset, rows, "l1")
    if limit is None or not l1_rows or "L1d" not in sizes:
        return None
    half = sizes["L1d"] / 2  # the control: a write at half the L1d, where the store port is the limit
    control = min(l1_rows, key=lambda r: abs(r["working_set_bytes"] - half))
    l2 = _median(_region_rows(ctx.dataset, rows, "l2"), "on_cpu_bytes_per_cycle")
    if l2 is None:
        return None
    return control["on_cpu_bytes_per_cycle"], l2, limit


def _rule_store_limit(ctx: Context) -> str | None:
    """Writes in the L1d at the core's store limit: the step to the L2 is the port's, not the cache's."""
    if (ctx.family != "bandwidth" or not ctx.mentions("writ") or not ctx.mentions("l1d", "cache level")
            or ctx.mentions("thread")):
        return None
    found = _store_control(ctx)
    if found is None:
        return None
    l1, l2, limit = found
    if l1 < AT_LIMIT * limit:
        return None
    if l2 >= AT_LIMIT * limit:
        return (f"L1d writes {l1:.3g} B/cycle and L2 writes {l2:.3g} B/cycle, both at {_cpu_name(ctx)}'s "
                f"{limit} B/cycle store limit: {_sources(ctx)} had no such limit between "
                "its L1d and L2")
    return (f"L1d writes {l1:.3g} B/cycle, at {_cpu_name(ctx)}'s {limit} B/cycle store limit (the source's "
            f"{SOURCE_VECTOR_BYTES}-byte stores were far below its L1d's): the L1d rate is the store port's, "
            f"and the L2's {l2:.3g} B/cycle ({l2 / l1:.2g} of it) is a smaller step than {_sources(ctx)} took")


def _rule_load_limit(ctx: Context) -> str | None:
    """Reads in the L1d at the core's load limit, many times the source's 16-byte loads: the L2
    cannot keep up with what the L1d's ports take, unlike the source's."""
    if ctx.family != "bandwidth" or not ctx.mentions("read") or not ctx.mentions("l1d") or ctx.mentions("thread"):
        return None
    rows = _one_thread(_rows(ctx.dataset, "on_cpu_bytes_per_cycle", op="read"))
    width = _vector_bytes(rows)
    limit = ctx.model.l1d_bytes_per_cycle("read", width) if width else None
    l1 = _median(_region_rows(ctx.dataset, rows, "l1"), "on_cpu_bytes_per_cycle")
    l2 = _median(_region_rows(ctx.dataset, rows, "l2"), "on_cpu_bytes_per_cycle")
    if limit is None or l1 is None or l2 is None or l1 < AT_LIMIT * limit or width <= SOURCE_VECTOR_BYTES:
        return None
    return (f"L1d reads {l1:.3g} B/cycle, at {_cpu_name(ctx)}'s {limit} B/cycle load limit with {width}-byte "
            f"vectors ({width // SOURCE_VECTOR_BYTES}x the source's {SOURCE_VECTOR_BYTES}-byte SSE loads); the "
            f"L2 region's {l2:.3g} B/cycle is what the L2 refills, so the ratio compares the L2 with wider "
            "ports than the source's")


def _rule_beyond_l2_in_l3(ctx: Context) -> str | None:
    """'Beyond the L2' of a source machine without an L3 is main memory; here it is in the L3."""
    if not ctx.mentions("beyond the l2") or "l3" in ctx.source_machine.lower():
        return None
    sizes = _sizes(ctx.dataset)
    if "L2" not in sizes or "L3" not in sizes:
        return None
    start, l3 = 4 * sizes["L2"], sizes["L3"]
    inside = sorted({r["working_set_bytes"] for r in ctx.dataset.rows if _finite(r.get("working_set_bytes"))
                     and start <= r["working_set_bytes"] <= l3})
    if not inside:
        return None
    points = ", ".join(format_bytes(size) for size in inside[:4])
    where = (f"the source's {_source_name(ctx)} had no L3, its 'beyond the L2' was main memory" if _source_name(ctx)
             else "not in main memory as a machine without an L3 would be")
    return (f"'beyond the L2' here starts at {format_bytes(start)} (4x the {format_bytes(sizes['L2'])} L2) and the "
            f"points at {points} lie inside this machine's {format_bytes(l3)} L3: {where}")


def _overlap(rows: Sequence[dict]) -> float | None:
    return _median([r for r in rows if r.get("threads", 1) >= 2], "overlap_fraction")


def _rule_vm_threads(ctx: Context) -> str | None:
    """Two threads on two vCPUs of a VM: the guest cannot see whether they share a host core."""
    virt = str(ctx.facts.get("virtualization") or "none")
    if virt in ("none", "") or not ctx.mentions("thread", "two"):
        return None
    two = [r for r in ctx.dataset.rows if _finite(r.get("threads")) and r["threads"] >= 2]
    if not two:
        return None
    overlap = _overlap(two)
    together = f" (they ran together {overlap:.0%} of the time)" if overlap is not None else ""
    smt = ctx.facts.get("smt_threads_per_core")
    shown = f"{smt} thread per core to the guest" if smt == 1 else f"{smt} threads per core to the guest"
    return (f"this is a {virt} guest ({shown if smt else 'SMT unknown'}): its {ctx.facts.get('cpu_count', '?')} "
            f"CPUs are vCPUs whose place on the host it cannot see; if the two threads' vCPUs are hyper-threads "
            f"of one host core they share its L1d and L2, and no line moves between cores nor is a bus shared "
            f"as on {_sources(ctx)}{together}")


def _pipe_rate(rows: Sequence[dict], one_cpu: bool, **match: Any) -> float | None:
    chosen = [r for r in rows if all(r.get(k) == v for k, v in match.items())
              and _finite(r.get("writer_cpu")) and _finite(r.get("reader_cpu"))
              and (r["writer_cpu"] == r["reader_cpu"]) == one_cpu]
    return _median(chosen, "GiB_per_s")


def _rule_wakeup(ctx: Context) -> str | None:
    """The pipe's wake-up cost: the first rung on one CPU against two (the control rows)."""
    if ctx.family != "pipe":
        return None
    first = {"writer": "write", "reader": "read", "huge_pages": False, "busy_loop": False}
    one, two = _pipe_rate(ctx.dataset.rows, True, **first), _pipe_rate(ctx.dataset.rows, False, **first)
    if one is None or two is None or one <= two:
        return None
    virt = str(ctx.facts.get("virtualization") or "none")
    where = (f"in this {virt} guest a wake-up of the other CPU goes through the hypervisor"
             if virt not in ("none", "") else "a wake-up of the other CPU costs more than the copy")
    return (f"write/read moves {one:.3g} GiB/s with both ends on one CPU and {two:.3g} GiB/s on two "
            f"({one / two:.2g}x): {where}, and every rung but the busy loop pays it, so the ladder's steps "
            "differ from the source's")


def _rule_sample_spread(ctx: Context) -> str | None:
    """A difference smaller than this run's own spread between samples of one point."""
    metric = ctx.dataset.metadata.get("primary_metric")
    if not metric:
        return None
    spreads = [(r[f"{metric}_max"] - r[f"{metric}_min"]) / r[metric] for r in ctx.dataset.rows
               if _finite(r.get(metric)) and r[metric] > 0 and _finite(r.get(f"{metric}_max"))
               and _finite(r.get(f"{metric}_min"))]
    effects = [abs(v - 1) for v in ctx.values.values() if _finite(v) and 0 < v < 10]
    if not spreads or not effects:
        return None
    spread = statistics.median(spreads)
    effect = max(effects)
    if effect >= spread:
        return None
    return (f"the largest measured effect ({effect:.1%}) is below this run's median spread between samples of "
            f"one point ({spread:.1%} of {metric}, {len(spreads)} points): this run cannot tell it from noise")


def _rule_busy(ctx: Context) -> str | None:
    """A run that lost CPU time to steal or to other processes."""
    steal = _median(ctx.dataset.rows, "context_steal_fraction")
    on_cpu = _median(ctx.dataset.rows, "context_on_cpu_fraction")
    parts = []
    if steal is not None and steal > BUSY_STEAL:
        parts.append(f"the hypervisor stole {steal:.1%} of the CPU (median over the points)")
    if on_cpu is not None and on_cpu < BUSY_ON_CPU:
        parts.append(f"the measured threads were on the CPU {on_cpu:.0%} of the wall time")
    if not parts:
        return None
    return "a busy run: " + " and ".join(parts)


def _rule_huge_backing(ctx: Context) -> str | None:
    """Huge pages asked for but not obtained, or obtained only in the guest."""
    if not ctx.mentions("huge"):
        return None
    thp = ctx.facts.get("thp_enabled", "unknown")
    if ctx.family == "pipe":
        touched = _median(_rows(ctx.dataset, "writer_huge_fraction", huge_pages=True, touch_pages=True),
                          "writer_huge_fraction")
        untouched = _median(_rows(ctx.dataset, "writer_huge_fraction", huge_pages=True, touch_pages=False),
                            "writer_huge_fraction")
        if touched is not None and untouched is not None and untouched < 0.5 <= touched:
            return (f"with huge pages asked for, the never-touched buffer got {untouched:.0%} huge pages against "
                    f"{touched:.0%} for the touched one (THP enabled={thp}: a huge page is made at the first "
                    "touch), so the never-touched case ran on 4 KiB pages")
        return None
    huge = _rows(ctx.dataset, "huge_page_fraction", pages="thp")
    fraction = _median(huge, "huge_page_fraction")
    if fraction is None:
        return None
    if fraction < 0.5:
        return f"the 'thp' rows got {fraction:.0%} huge pages (THP enabled={thp}): they ran on 4 KiB pages"
    virt = str(ctx.facts.get("virtualization") or "none")
    if virt not in ("none", ""):
        return (f"the 'thp' rows got {fraction:.0%} huge pages in this {virt} guest, but a guest's huge page "
                "need not be a huge page of the host: each TLB miss also walks the host's page tables "
                "(two-dimensional paging), which the source's machine did not do")
    return None


def _rule_clear_beyond_llc(ctx: Context) -> str | None:
    """rep stos over extents at least the last cache: AMD Zen writes them without allocating lines."""
    if ctx.family not in ("clear_order", "clear_fault") or not ctx.mentions("batch", "extent"):
        return None
    sizes = _sizes(ctx.dataset)
    llc = max((size for name, size in sizes.items() if not name.endswith("i")), default=None)
    extents = sorted({r["extent_bytes"] for r in ctx.dataset.rows if _finite(r.get("extent_bytes"))})
    if llc is None or not extents or extents[-1] < llc:
        return None
    skips = ctx.model.entry.clear_skips_cache_beyond_llc if ctx.model.entry else None
    if not skips:
        return None
    ratio = max((v for v in ctx.values.values() if _finite(v)), default=None)
    measured = f" ({ratio:.3g}x)" if ratio is not None else ""
    return (f"the {format_bytes(extents[-1])} extents are at least this machine's {format_bytes(llc)} last cache, "
            f"and on AMD Zen ({ctx.model.name} here) rep stos over an extent larger than the last cache writes "
            f"without allocating the lines, as the clearing patches say: the batches run at a different rate "
            f"from the 2 MiB calls{measured}")


Rule = Callable[[Context], "str | None"]
#: The machine-difference rules, in the order their sentences appear; an invalid measurement first.
RULES: tuple[Rule, ...] = (
    _rule_invalid,
    _rule_store_limit,
    _rule_load_limit,
    _rule_beyond_l2_in_l3,
    _rule_clear_beyond_llc,
    _rule_huge_backing,
    _rule_wakeup,
    _rule_vm_threads,
)
#: The run's own conditions: asked only when no machine difference explains the verdict.
NOISE_RULES: tuple[Rule, ...] = (
    _rule_sample_spread,
    _rule_busy,
)


def explain(ctx: Context) -> str:
    """The reason for a verdict that is not "reproduced": every machine-difference rule's sentence
    that applies, joined with "; "; else the run's conditions (a spread between samples larger than
    the effect, steal, preemption) that make it noise, ending "no known machine difference explains
    this"; else :data:`CANDIDATE_DEFECT`. A "not measurable" verdict's reason is its detail (already
    the reason it could not be judged)."""
    if ctx.status == "not measurable":
        return ctx.detail
    found = [sentence for rule in RULES if (sentence := rule(ctx))]
    if found:
        return "; ".join(found)
    noise = [sentence for rule in NOISE_RULES if (sentence := rule(ctx))]
    if noise:
        return "; ".join(noise) + "; no known machine difference explains it otherwise: may be noise, run it again alone"
    return CANDIDATE_DEFECT
