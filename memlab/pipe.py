"""Pipe transfer: how fast one process can hand bytes to another (seed 000).

A writer process and a reader process, forked from C and pinned to CPUs when
asked, move ``total_bytes`` through a pipe in ``buffer_bytes`` chunks. The
writer uses ``write`` or ``vmsplice``, the reader ``read`` or ``splice`` to
/dev/null; the metric is the reader's rate in GiB/s. :func:`ladder` climbs
the article "Making Linux pipes fast" rung by rung (:func:`ladder_sweep`,
run by ``experiments/pipes_ladder.py``), :func:`latency` times small
ping-pong messages over two pipes (lmbench's lat_pipe).

Besides ``GiB_per_s`` every sample reports ``bytes_received``, the transfer
size ``total_bytes`` (adapted until a sample lasts the target time unless
given), each side's ``*_context_switches``, ``*_page_faults``, ``*_calls``
and ``*_eagain_spins``, the pipe's real size ``pipe_bytes``, huge-page
coverage of the buffers (``writer_huge_fraction``) and, with ``verify``,
``verify_errors`` (wrong bytes seen by the reader; 0 means intact).

The per-side switches and faults come from getrusage() in each child and
cost nothing. perf counters (``counters=True``) are opened in each child
too, but they are switched out and in on every context switch, and a pipe
at one switch per chunk pays for it: on a 2-core VM vmsplice/splice on one
CPU fell from 16 to 11 GiB/s with them. :func:`run`, :func:`latency` and
the sweeps here therefore leave them off unless asked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from memlab import chart
from memlab.dataset import Dataset
from memlab.family import Family, OnCpu, check_bool, check_choice, check_cpu, check_int, check_number, coerce_fields
from memlab.grid import Sweep, grid
from memlab.measure import Measurement
from memlab.placement import choose
from memlab.units import format_quantity, metric_label

__all__ = [
    "FAMILY",
    "LATENCY",
    "LatencyParams",
    "PLACEMENTS",
    "PipeParams",
    "READERS",
    "RUNGS",
    "WRITERS",
    "add_ratios",
    "available_placements",
    "figure",
    "ladder_sweep",
    "latency",
    "latency_figure",
    "pipe_max_size",
    "placement_cpus",
    "rung_of",
    "run",
]

WRITERS = ("write", "vmsplice")
READERS = ("read", "splice")
PAGE_BYTES = os.sysconf("SC_PAGESIZE")
PIPE_MAX_SIZE_PATH = "/proc/sys/fs/pipe-max-size"
MAX_BUFFER_BYTES = 1 << 30
MAX_TOTAL_BYTES = 1 << 46

# The article's ladder: each rung adds one change to the one before.
RUNGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("write/read", {"writer": "write", "reader": "read", "huge_pages": False, "busy_loop": False}),
    ("vmsplice/read", {"writer": "vmsplice", "reader": "read", "huge_pages": False, "busy_loop": False}),
    ("vmsplice/splice", {"writer": "vmsplice", "reader": "splice", "huge_pages": False, "busy_loop": False}),
    ("+huge pages", {"writer": "vmsplice", "reader": "splice", "huge_pages": True, "busy_loop": False}),
    ("+busy loop", {"writer": "vmsplice", "reader": "splice", "huge_pages": True, "busy_loop": True}),
)
#: The largest pipe size F_SETPIPE_SZ takes (an int).
MAX_PIPE_SIZE_BYTES = (1 << 31) - 1
PLACEMENTS = ("two_cpus", "one_cpu")


def pipe_max_size() -> int | None:
    """The largest pipe an unprivileged process may ask for, in bytes (None if unknown).

    >>> pipe_max_size() is None or pipe_max_size() >= 4096
    True
    """
    try:
        with open(PIPE_MAX_SIZE_PATH) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def _check_cpu(name: str, value: Any) -> int | None:
    if value is None:
        return None
    check_int(name, value, 0, (os.cpu_count() or 1) - 1)
    return check_cpu(name, value)


@dataclass(frozen=True)
class PipeParams:
    """One pipe transfer.

    ``pipe_size_bytes`` None keeps the kernel's default pipe; ``total_bytes`` None
    adapts the bytes per sample until a sample lasts the target time.
    ``vmsplice_sections`` None lets the writer use as many buffer sections
    as make reuse safe (two when pipe_size_bytes <= buffer_bytes, the article's
    scheme); a smaller number is only for showing, with ``verify``, what
    reusing pages still in the pipe does. ``writer_cpu``/``reader_cpu`` None
    leaves that end unpinned.

    ``verify``: the writer fills every chunk with a position-dependent
    pattern and the reader checks every byte; a ``splice`` reader then
    splices into a memory file (memfd) and checks its pages instead of
    splicing to /dev/null, where bytes cannot be looked at.
    """

    writer: str = "write"
    reader: str = "read"
    buffer_bytes: int = 256 << 10
    pipe_size_bytes: int | None = 256 << 10
    total_bytes: int | None = None
    huge_pages: bool = False
    busy_loop: bool = False
    touch_pages: bool = True
    verify: bool = False
    vmsplice_sections: int | None = None
    writer_cpu: int | None = None
    reader_cpu: int | None = None
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_choice("writer", self.writer, WRITERS)
        check_choice("reader", self.reader, READERS)
        check_int("buffer_bytes", self.buffer_bytes, 1, MAX_BUFFER_BYTES)
        if self.pipe_size_bytes is not None:
            check_int("pipe_size_bytes", self.pipe_size_bytes, PAGE_BYTES, MAX_PIPE_SIZE_BYTES)
            if self.pipe_size_bytes % PAGE_BYTES:
                raise ValueError(
                    f"pipe_size_bytes={self.pipe_size_bytes} is not a multiple of the page size {PAGE_BYTES}"
                )
            limit = pipe_max_size()
            if limit is not None and self.pipe_size_bytes > limit:
                raise ValueError(
                    f"pipe_size_bytes={self.pipe_size_bytes} is above the maximum {limit} ({PIPE_MAX_SIZE_PATH})"
                )
        if self.total_bytes is not None:
            check_int("total_bytes", self.total_bytes, 1, MAX_TOTAL_BYTES)
        for name in ("huge_pages", "busy_loop", "touch_pages", "verify"):
            check_bool(name, getattr(self, name))
        if self.vmsplice_sections is not None:
            check_int("vmsplice_sections", self.vmsplice_sections, 1, 1024)
        writer_cpu = _check_cpu("writer_cpu", self.writer_cpu)
        reader_cpu = _check_cpu("reader_cpu", self.reader_cpu)
        if self.busy_loop and writer_cpu is not None and writer_cpu == reader_cpu:
            raise ValueError(
                f"busy_loop=True needs the two ends on two different CPUs, but writer_cpu="
                f"{writer_cpu} and reader_cpu={reader_cpu}: each end would spin through its time "
                "slice waiting for the other, which cannot run meanwhile"
            )
        check_number("timeout_s", self.timeout_s, 0.001, 86400.0)


def _to_core(params: PipeParams) -> dict[str, Any]:
    return {
        "writer": params.writer,
        "reader": params.reader,
        "buffer_bytes": params.buffer_bytes,
        "pipe_size_bytes": params.pipe_size_bytes or 0,
        "total_bytes": params.total_bytes or 0,
        "huge_pages": params.huge_pages,
        "busy_loop": params.busy_loop,
        "touch_pages": params.touch_pages,
        "verify": params.verify,
        "vmsplice_sections": params.vmsplice_sections or 0,
        "writer_cpu": -1 if params.writer_cpu is None else params.writer_cpu,
        "reader_cpu": -1 if params.reader_cpu is None else params.reader_cpu,
        "timeout_s": float(params.timeout_s),
    }


def _derive(params: PipeParams, values: dict[str, float]) -> dict[str, float]:
    derived: dict[str, float] = {}
    writer_ns = values.get("writer_elapsed_ns", 0.0)
    if writer_ns > 0:
        derived["writer_GiB_per_s"] = values.get("total_bytes", 0.0) / writer_ns * 1e9 / 2**30
    return derived


def run(params: PipeParams | dict | None = None, **options: Any) -> Measurement:
    """Pipe ``total_bytes`` from a writer to a reader process; primary metric GiB_per_s.

    Keywords are PipeParams fields or measure options (repeat, warmup,
    target_seconds, cpu, counters: off by default, see the module notes).

    >>> m = run(writer="vmsplice", reader="splice", total_bytes=8 << 20, verify=True,
    ...         repeat=1, warmup=0)
    >>> m.median("bytes_received"), m.median("verify_errors")
    (8388608.0, 0.0)
    """
    options.setdefault("counters", False)
    return FAMILY.run(params, **options)


# ---- the ladder ------------------------------------------------------------


def placement_cpus(placement: str) -> tuple[int, int]:
    """(writer_cpu, reader_cpu) for 'two_cpus' or 'one_cpu', as :func:`memlab.placement.choose`
    places two threads (``two_cpus``: two SMT siblings of one core where the machine has them,
    else two cores).

    >>> a, b = placement_cpus("one_cpu"); a == b
    True
    """
    check_choice("placement", placement, PLACEMENTS)
    if placement == "two_cpus" and len(os.sched_getaffinity(0)) < 2:
        raise ValueError(f"placement='two_cpus' needs two CPUs, but this process may use only "
                         f"{sorted(os.sched_getaffinity(0))}")
    writer, reader = choose(placement, 2)
    return writer, reader


def available_placements() -> tuple[str, ...]:
    """The placements this process can use: both when it may run on two CPUs."""
    return PLACEMENTS if len(os.sched_getaffinity(0)) >= 2 else ("one_cpu",)


def rung_of(row: Mapping[str, Any]) -> tuple[int, str] | None:
    """(index, name) of the ladder rung a row's parameters match, or None."""
    for index, (name, settings) in enumerate(RUNGS):
        if all(row.get(key) == value for key, value in settings.items()):
            return index, name
    return None


def _placement_of(row: Mapping[str, Any]) -> str:
    writer_cpu, reader_cpu = row.get("writer_cpu"), row.get("reader_cpu")
    if writer_cpu is None or reader_cpu is None or _missing(writer_cpu) or _missing(reader_cpu):
        return "unpinned"
    return "one_cpu" if writer_cpu == reader_cpu else "two_cpus"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ---- the standard figures -----------------------------------------------------

#: How the figures name a placement.
PLACEMENT_LABELS = {"two_cpus": "two CPUs", "one_cpu": "one CPU", "unpinned": "unpinned"}
_RUNG_PARAMS = ("writer", "reader", "huge_pages", "busy_loop", "writer_cpu", "reader_cpu")


def _rung_label(row: Mapping[str, Any]) -> str:
    label = f"{row.get('writer', '?')}/{row.get('reader', '?')}"
    if row.get("huge_pages"):
        note = chart.outcome_note(row)  # the kernel may serve the THP request with 4 KiB pages
        label += "\n+huge pages" + (f" ({note})" if note else "")
    if row.get("busy_loop"):
        label += "\n+busy loop"
    return label


def _rung_order(row: Mapping[str, Any]) -> tuple:
    return (row.get("writer") == "vmsplice", row.get("reader") == "splice",
            bool(row.get("huge_pages")), bool(row.get("busy_loop")))


def figure(data: Dataset | str, metric: str = "GiB_per_s"):
    """The pipe ladder: GiB/s per rung as bars, each labelled with its ratio to the first rung.

    Rungs are ordered as in "Making Linux pipes fast" (write/read, vmsplice,
    splice, huge pages, busy loop); one bar colour per placement (writer and
    reader on two CPUs, or on one). Rows differing in another parameter
    (verify, sizes) get bars of their own.

    >>> fig = figure("memlab-tour/pipe.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = chart.rows_with(ds, metric)
    extra = [n for n in chart.varying(rows, ds.param_names) if n not in _RUNG_PARAMS]
    rows = sorted(rows, key=lambda r: (_rung_order(r), tuple(repr(r.get(n)) for n in extra)))

    def rung_label(row: Mapping[str, Any]) -> str:
        return _rung_label(row) + ("\n" + chart.label(row, extra) if extra else "")

    labels: list[str] = []
    for row in rows:
        if rung_label(row) not in labels:
            labels.append(rung_label(row))
    order = ("two_cpus", "one_cpu", "unpinned")
    placements = sorted({_placement_of(row) for row in rows}, key=order.index)
    fig, ax = chart.new_figure(max(6.5, min(14.0, 1.5 * len(labels) + 2)), 4.8)
    width = 0.8 / len(placements)
    for p_index, placement in enumerate(placements):
        members = [r for r in rows if _placement_of(r) == placement]
        first = members[0][metric]
        xs = [labels.index(rung_label(r)) + (p_index - (len(placements) - 1) / 2) * width for r in members]
        errors = chart.spread(members, metric)
        ax.bar(xs, [r[metric] for r in members], width * 0.92, color=f"C{p_index}",
               label=PLACEMENT_LABELS[placement], yerr=errors, capsize=2,
               error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
        for index, (x, row) in enumerate(zip(xs, members)):
            top = row[metric] + (errors[1][index] if errors is not None else 0.0)  # above the error bar
            ax.annotate(f"x{row[metric] / first:.1f}" if first > 0 else "", (x, top), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_xlabel("rung (writer/reader, then what it adds)", fontsize=9)
    ax.set_ylabel(metric_label(metric))
    ax.grid(True, axis="y", alpha=0.3)
    ax.margins(y=0.15)
    if placements != ["unpinned"]:
        chart.outside_legend(fig, ax, title="placement", title_fontsize=8)
    chart.set_title(fig, ds, "pipe ladder: throughput per rung\n"
                             "xN over a bar: its ratio to the first rung of the same placement")
    return fig


def latency_figure(data: Dataset | str, metric: str = "ns_per_round_trip"):
    """Round trip of a small message over two pipes (ns), one bar per placement and wait mode.

    The two processes on two CPUs or on one, blocking in the kernel or
    busy-looping (lmbench's lat_pipe); one bar colour per message size.

    >>> fig = latency_figure("memlab-tour/pipe_latency.csv")   # doctest: +SKIP
    """
    ds = chart.as_dataset(data)
    rows = [dict(r) for r in chart.rows_with(ds, metric)]
    for row in rows:
        placement = _placement_of({"writer_cpu": row.get("ping_cpu"), "reader_cpu": row.get("pong_cpu")})
        row["placement"] = PLACEMENT_LABELS[placement] + (", busy loop" if row.get("busy_loop") else ", blocking")
    view = Dataset(rows, {**ds.metadata, "param_names": ["placement", "message_bytes"]})
    return chart.bars_figure(view, metric, category=["placement"], series=["message_bytes"], log_y=True,
                             scale=1e-3, ylabel="µs per round trip (log scale)",
                             annotate=lambda row: format_quantity(row[metric], metric),
                             title="pipe latency: one round trip of a small message")


def ladder_sweep(
    quick: bool = False,
    *,
    placements: Sequence[str] | None = None,
    total_bytes: int | None = None,
    buffer_bytes: int = 256 << 10,
    pipe_size_bytes: int | None = 256 << 10,
    verify: bool = False,
    repeat: int | None = None,
    target_seconds: float | None = None,
) -> Sweep:
    """The ladder as a :class:`memlab.grid.Sweep`: every rung on every placement.

    The busy-loop rung is left out of the one-CPU placement (memlab refuses
    it: both ends would spin on one CPU). With ``total_bytes`` None each
    rung adapts its transfer until a sample lasts ``target_seconds`` (0.5 s,
    0.1 s when quick).

    >>> len(ladder_sweep(quick=True).points)
    9
    """
    points: list[dict[str, Any]] = []
    for placement in placements or available_placements():
        writer_cpu, reader_cpu = placement_cpus(placement)
        for name, settings in RUNGS:
            if settings["busy_loop"] and writer_cpu == reader_cpu:
                continue
            points.append({
                **settings,
                "buffer_bytes": buffer_bytes,
                "pipe_size_bytes": pipe_size_bytes,
                "total_bytes": total_bytes,
                "verify": verify,
                "writer_cpu": writer_cpu,
                "reader_cpu": reader_cpu,
            })
    return Sweep(
        name="ladder_quick" if quick else "ladder",
        family="pipe",
        points=points,
        repeat=repeat if repeat is not None else (3 if quick else 5),
        warmup=1,
        target_seconds=target_seconds if target_seconds is not None else (0.1 if quick else 0.5),
        description="the five rungs of 'Making Linux pipes fast' on two CPUs and on one",
        options={"counters": False},
    )


def add_ratios(dataset: Dataset) -> Dataset:
    """Label each row with its rung and placement and its rate relative to the first rung.

    Adds ``rung``, ``rung_name``, ``placement``, ``ratio_to_first`` and
    ``ratio_to_previous`` (medians of GiB_per_s, within one placement, and
    within one run where the rows have runs: run r of every rung is taken in
    one round).

    >>> rows = [{"writer": "write", "reader": "read", "huge_pages": False, "busy_loop": False,
    ...          "writer_cpu": 0, "reader_cpu": 1, "run": r, "GiB_per_s": 2.0 * (r + 1)} for r in range(2)]
    >>> rows += [{**row, "writer": "vmsplice", "GiB_per_s": 3.0} for row in rows]
    >>> [round(row["ratio_to_first"], 2) for row in add_ratios(Dataset(rows)).rows]
    [1.0, 1.0, 1.5, 0.75]
    """
    rows = [dict(row) for row in dataset.rows]
    for row in rows:
        found = rung_of(row)
        row["rung"], row["rung_name"] = found if found else (-1, "")
        row["placement"] = _placement_of(row)
    for placement, run in {(row["placement"], row.get("run")) for row in rows}:
        members = sorted((r for r in rows if r["placement"] == placement and r.get("run") == run and r["rung"] >= 0),
                         key=lambda r: r["rung"])
        first = next((r["GiB_per_s"] for r in members if r["rung"] == 0), math.nan)
        previous = math.nan
        for row in members:
            rate = row.get("GiB_per_s", math.nan)
            row["ratio_to_first"] = rate / first if first and not math.isnan(first) else math.nan
            row["ratio_to_previous"] = rate / previous if previous and not math.isnan(previous) else math.nan
            previous = rate
    return Dataset(rows=rows, metadata=dict(dataset.metadata))


def _verify_cost_sweep():
    writer_cpu, reader_cpu = placement_cpus("two_cpus")
    return Sweep(
        name="verify_cost",
        family="pipe",
        points=grid(
            writer=list(WRITERS), reader=list(READERS), verify=[False, True],
            writer_cpu=[writer_cpu], reader_cpu=[reader_cpu],
        ),
        repeat=5,
        target_seconds=0.5,
        description="each writer/reader pair with and without checking every byte",
        options={"counters": False},
    )


def _touch_sweep():
    writer_cpu, reader_cpu = placement_cpus(available_placements()[0])
    return Sweep(
        name="touch",
        family="pipe",
        points=grid(
            writer=["vmsplice"], reader=["splice"], huge_pages=[False, True],
            touch_pages=[True, False], writer_cpu=[writer_cpu], reader_cpu=[reader_cpu],
        ),
        repeat=5,
        target_seconds=0.5,
        description="vmsplice of never-touched pages (seed 000, footnote 19), with and without huge pages",
        options={"counters": False},
    )


# ---- latency -----------------------------------------------------------------


@dataclass(frozen=True)
class LatencyParams:
    """Ping-pong of ``message_bytes`` over two pipes; ``round_trips`` None adapts."""

    message_bytes: int = 1
    round_trips: int | None = None
    busy_loop: bool = False
    ping_cpu: int | None = None
    pong_cpu: int | None = None
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        coerce_fields(self)
        check_int("message_bytes", self.message_bytes, 1, 1 << 20)
        if self.round_trips is not None:
            check_int("round_trips", self.round_trips, 1, 1 << 40)
        check_bool("busy_loop", self.busy_loop)
        ping_cpu = _check_cpu("ping_cpu", self.ping_cpu)
        pong_cpu = _check_cpu("pong_cpu", self.pong_cpu)
        if self.busy_loop and ping_cpu is not None and ping_cpu == pong_cpu:
            raise ValueError(
                f"busy_loop=True needs the two ends on two different CPUs, but ping_cpu={ping_cpu} "
                f"and pong_cpu={pong_cpu}"
            )
        check_number("timeout_s", self.timeout_s, 0.001, 86400.0)


def _latency_to_core(params: LatencyParams) -> dict[str, Any]:
    return {
        "message_bytes": params.message_bytes,
        "round_trips": params.round_trips or 0,
        "busy_loop": params.busy_loop,
        "ping_cpu": -1 if params.ping_cpu is None else params.ping_cpu,
        "pong_cpu": -1 if params.pong_cpu is None else params.pong_cpu,
        "timeout_s": float(params.timeout_s),
    }


def latency(params: LatencyParams | dict | None = None, **options: Any) -> Measurement:
    """Round-trip time of a small message between two processes, in ns_per_round_trip.

    The ping process writes ``message_bytes`` into one pipe, the pong
    process reads them and writes them back through a second pipe (as
    lmbench's lat_pipe); ``echo_errors`` counts echoes that came back wrong.

    >>> m = latency(round_trips=2000, repeat=1, warmup=0)
    >>> m.median("ns_per_round_trip") > 0, m.median("echo_errors")
    (True, 0.0)
    """
    options.setdefault("counters", False)
    return LATENCY.run(params, **options)


def _quick_sweep():
    return ladder_sweep(quick=True)


def _ladder_sweep():
    return ladder_sweep(quick=False)


def _sides_on_cpu(busy_loop: bool, first_cpu: int | None, second_cpu: int | None,
                  first: str, second: str, waits: tuple[str, str]) -> tuple[OnCpu, OnCpu]:
    """Two processes that hand work to each other: spinning (``busy_loop``) each is on a CPU
    throughout (half of it when both are pinned to one CPU); blocking, each waits for the other
    by design, and together they keep at least half a CPU busy (a quarter each)."""
    if not busy_loop:
        return (OnCpu(f"the {first} (blocks {waits[0]})", 0.25), OnCpu(f"the {second} (blocks {waits[1]})", 0.25))
    share = 0.5 if first_cpu is not None and first_cpu == second_cpu else 1.0
    return (OnCpu(f"the {first} (spins)", share), OnCpu(f"the {second} (spins)", share))


def transfer_on_cpu(params: PipeParams) -> tuple[OnCpu, OnCpu]:
    """The writer and the reader process and their shares of the wall time on a CPU (``Family.on_cpu``).

    >>> [part.fraction for part in transfer_on_cpu(PipeParams())]
    [0.25, 0.25]
    """
    return _sides_on_cpu(params.busy_loop, params.writer_cpu, params.reader_cpu, "writer process",
                         "reader process", ("on a full pipe", "waiting for data"))


def latency_on_cpu(params: LatencyParams) -> tuple[OnCpu, OnCpu]:
    """The ping and the pong process: one waits while the other answers (``Family.on_cpu``)."""
    return _sides_on_cpu(params.busy_loop, params.ping_cpu, params.pong_cpu, "ping process", "pong process",
                         ("waiting for the answer", "waiting for the message"))


FAMILY = Family(
    name="pipe",
    params_type=PipeParams,
    core="pipe",
    to_core=_to_core,
    unit="buffer",
    primary_metric="GiB_per_s",
    derive=_derive,
    sweeps={
        "quick": _quick_sweep,
        "ladder": _ladder_sweep,
        "verify_cost": _verify_cost_sweep,
        "touch": _touch_sweep,
    },
    description="a writer and a reader process joined by a pipe (seed 000)",
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.5,
    figure=figure,
    caption="The ladder of 'Making Linux pipes fast': each rung adds one change (vmsplice, splice, "
            "huge pages, busy loop); the number over a bar is its speed-up over write/read.",
    report_columns=("writer_GiB_per_s", "verify_errors"),
    on_cpu=transfer_on_cpu,
)

def latency_sweep(quick: bool = False) -> Sweep:
    """lmbench's lat_pipe on every placement: blocking on two CPUs and on one, busy on two."""
    points = []
    for placement in available_placements():
        ping_cpu, pong_cpu = placement_cpus(placement)
        for busy in (False, True):
            if busy and ping_cpu == pong_cpu:
                continue  # refused: spinning against the process it waits for
            points.append({"ping_cpu": ping_cpu, "pong_cpu": pong_cpu, "busy_loop": busy})
    return Sweep(name="quick" if quick else "latency", family="pipe_latency", points=points,
                 repeat=3 if quick else 7, warmup=1, target_seconds=0.1 if quick else 0.3,
                 description="round-trip latency of a 1-byte message over two pipes",
                 options={"counters": False})


LATENCY = Family(
    name="pipe_latency",
    params_type=LatencyParams,
    core="pipe_latency",
    to_core=_latency_to_core,
    unit="round_trip",
    primary_metric="ns_per_round_trip",
    description="ping-pong over two pipes (lmbench lat_pipe)",
    sweeps={"quick": lambda: latency_sweep(quick=True), "latency": latency_sweep},
    default_repeat=5,
    default_warmup=1,
    default_target_seconds=0.2,
    figure=latency_figure,
    caption="One byte sent back and forth over two pipes (lmbench's lat_pipe): the cost of "
            "waking the other process, on two CPUs or one, blocking or busy-looping.",
    on_cpu=latency_on_cpu,
)

FAMILIES = (FAMILY, LATENCY)
