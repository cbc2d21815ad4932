"""Bare-C parity: every family against a small C program doing the same, in one table.

memlab's promise is that its harness costs nothing: the number it reports is
the number a bare C program gets. This command puts each family beside the
bare comparator in experiments/ (compiled here, no memlab code in them) and
runs both in interleaved rounds: round r runs every case once, memlab first
in even rounds and the bare program first in odd ones, so that the load of
other processes (and its drift over the run) falls on both alike.

Cases: chase (random list, L1d/2, L2/2, beyond the last cache:
experiments/chase_bare.c); bandwidth read, write, copy at the same three
sizes (experiments/bandwidth_bare.c, normal stores, the widest width; THP
beyond the caches on both sides; the copy between two separate mappings on
both sides, ``layout apart``), and the copy once more against a bare copy
between the two halves of one region (``layout halves``, memlab's layout
before 2026-12-07: docs/bandwidth.md, "Where a copy's halves sit"); every pipe rung on two CPUs and on
one (experiments/pipe_pair/pipe_pair.c, as a shell pipeline); clear, every
method in 4 KiB and 2 MiB calls over a faulted THP region beyond the caches,
and in 4 KiB calls over half the last cache in one-pass samples
(experiments/clear_bare.c); spawn and execl (experiments/standalone/);
core_to_core's round trip (experiments/core_to_core_bare.c; the first pair
of CPUs, every ordered pair without ``--quick``).

One row per case: memlab's median and the bare program's (in the case's
unit), ``ratio``: memlab's speed over the bare program's (rates: memlab /
bare; times: bare / memlab; 1 = parity, below 1 = memlab slower) with its
95% bootstrap interval (``memlab.significance.median_ratio_interval``), the
same on the CPU (work over the thread's or process's CPU time, which leaves
out time other processes took the CPU; empty where a comparator does not
report it), the 1-minute load average over the case's runs and the host (CPU
vendor, family, model); the bandwidth cases inside the L1d also give each
side's on-CPU fraction of the core's L1d port limit (memlab's
``fraction_of_port_limit``, the bare program's computed alike). The table goes
to stdout as Markdown, with a line under it on the port limit and on how much
of its core the thread got (experiments/core_share.c, independent adds per
cycle against the core design's integer ALUs, run at the end of each round);
``--out`` writes the rows as a memlab dataset.

Modes: the default (5 rounds, full sizes, every CPU pair: about 6 minutes),
``--quick`` (3 rounds, short samples, 64 MiB beyond the caches: under a
minute), ``--tiny`` (one round of the smallest samples and sizes: checks
that every case runs, measures nothing; the test suite's mode).

Sizes: half the L1d, half the L2 and half the last cache are those this
machine measured (``memlab.hierarchy``: the edges of its own latency curve,
kept in ``hierarchy.json`` of the ``--hierarchy`` folder, default memlab's
per-machine cache folder where ``memlab reproduce`` keeps it too, under the
machine's fingerprint, and measured once, 10-20 s, when it is missing or from
another machine), since a virtual machine's sysfs may report its host's whole L3 while
other guests leave it a fraction: a clear "in the caches" sized by sysfs ran
at memory speed. ``--sysfs`` (and ``--tiny``, unless given ``--hierarchy``)
sizes them by the caches sysfs reports instead. Beyond the last cache is
beyond both.

``--case TEXT`` (repeatable) keeps the cases whose name contains one of the
texts (``--families clear --case "vector, 4 KiB"``), to give one gap many rounds.

Run: python experiments/parity.py [--quick | --tiny] [--rounds N] [--cpu N]
                                  [--families chase,bandwidth,pipe,clear,system,core_to_core]
                                  [--case TEXT ...] [--out results/parity.csv]
                                  [--hierarchy DIR | --sysfs]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memlab import bandwidth, chase, clear, core_to_core, hierarchy, machine, machine_model, measure, pipe, system
from memlab.dataset import Dataset
from memlab.files import cache_directory
from memlab.runner import progress_bar
from memlab.significance import median_ratio_interval

HERE = Path(__file__).resolve().parent
FAMILIES = ("chase", "bandwidth", "pipe", "clear", "system", "core_to_core")

#: program -> (source under experiments/, extra compiler flags).
PROGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "chase_bare": ("chase_bare.c", ("-O2", "-march=native", "-pthread")),
    "bandwidth_bare": ("bandwidth_bare.c", ("-O3", "-march=native")),
    "clear_bare": ("clear_bare.c", ("-O2", "-march=native")),
    "core_to_core_bare": ("core_to_core_bare.c", ("-O2", "-pthread")),
    "pipe_pair": ("pipe_pair/pipe_pair.c", ("-O2",)),
    "spawn": ("standalone/spawn.c", ("-O2",)),
    "execl": ("standalone/execl.c", ("-O2",)),
    "fstime": ("standalone/fstime.c", ("-O2",)),
    "copy_layouts": ("copy_layouts.c", ("-O2",)),  # not a case: where a copy's halves sit (docs/bandwidth.md)
    "core_share": ("core_share.c", ("-O2",)),  # not a case: the thread's share of its core (port-limit line)
}

#: (wall values, on-CPU values or None) of one run of one side.
Samples = tuple[list[float], "list[float] | None"]


# ---- the bare programs: compiling and running them -------------------------------------

def compiler() -> str:
    """$CC, else gcc, else cc."""
    return os.environ.get("CC") or shutil.which("gcc") or "cc"


def compile_command(name: str, directory: str | os.PathLike) -> list[str]:
    """The command compiling one bare program into directory (warnings on; no loop turned into a
    library call in bandwidth_bare: gcc's -fno-tree-loop-distribute-patterns)."""
    source, flags = PROGRAMS[name]
    command = [*shlex.split(compiler()), *flags, "-Wall", "-Wextra"]
    if name == "bandwidth_bare" and "clang" not in compiler():
        command.append("-fno-tree-loop-distribute-patterns")
    return command + ["-o", str(Path(directory) / name), str(HERE / source)]


def compile_programs(directory: str | os.PathLike, names: list[str] | None = None) -> dict[str, str]:
    """Compile the bare programs (in parallel); name -> binary path. Raises RuntimeError with the
    compiler's message when one fails."""
    names = list(PROGRAMS) if names is None else names
    running = {name: subprocess.Popen(compile_command(name, directory), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for name in names}
    for name, process in running.items():
        output, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"compiling {PROGRAMS[name][0]} failed: {output.strip()}")
    return {name: str(Path(directory) / name) for name in names}


def _pinned(cpu: int | None):
    return (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None


def _run(command: list[str], cpu: int | None = None, timeout: float = 600) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, preexec_fn=_pinned(cpu))
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def chase_bare_samples(binary: str, working_set: int, npad: int, order: str, pages: str, seed: int,
                       samples: int, target_ms: float, cpu: int | None,
                       layout: dict[str, int] | None = None) -> list[tuple[float, float]]:
    """(wall ns, on-CPU ns) per element of each sample of chase_bare (fastest thread with threads;
    one thread is pinned to cpu, several are placed by the program from there)."""
    layout = layout or {}
    threads = layout.get("threads", 1)
    command = [binary, str(working_set), str(npad), order, pages, str(seed), str(samples), str(target_ms),
               str(threads), str(layout.get("misalign_bytes", 0)), str(layout.get("pointer_word", 0)),
               str(layout.get("element_distance", 1))]
    output = _run(command, cpu if threads == 1 else None)
    return [(float(a), float(b)) for a, b in (line.split() for line in output.splitlines())]


def bandwidth_bare_samples(binary: str, mode: str, width: str, size: int, samples: int, target_ms: float,
                           cpu: int | None, pages: str = "4k", layout: str = "halves") -> Samples:
    """Traffic GB/s (bytes read plus written) per sample of bandwidth_bare: (wall, on-CPU)."""
    output = _run([binary, mode, width, str(size), str(samples), str(target_ms), pages, layout], cpu)
    pairs = [line.split() for line in output.splitlines()]
    return [float(a) for a, _ in pairs], [float(b) for _, b in pairs]


def clear_bare_samples(binary: str, region_bytes: int, method: str, extent_bytes: int, passes: int,
                       cpu: int | None, pages: str = "thp") -> Samples:
    """GB/s cleared per timed pass of clear_bare over a region of ``pages`` (thp, 4k): (wall, on-CPU)."""
    output = _run([binary, str(region_bytes), pages, method, str(extent_bytes), str(passes)], cpu)
    wall, on_cpu = [], []
    for line in output.splitlines():
        words = line.split()
        if words and words[0] == "pass":
            wall.append(float(words[words.index("GB_per_s") + 1]))
            on_cpu.append(float(words[words.index("cpu_GB_per_s") + 1]))
    return wall, on_cpu


def core_to_core_bare_samples(binary: str, cpu_a: int, cpu_b: int, method: str, round_trips: int,
                              samples: int, lines: int) -> list[float]:
    """ns per round trip of each sample of core_to_core_bare."""
    output = _run([binary, str(cpu_a), str(cpu_b), method, str(round_trips), str(samples), str(lines)])
    return [float(value) for value in output.split()]


PIPE_RESULT = re.compile(r"bytes=(\d+) ns=(\d+) GiB_per_s=([0-9.]+)")


def pipe_pair_command(binary: str, settings: dict[str, Any], cpus: tuple[int, int], total_bytes: int,
                      buffer_bytes: int, pipe_size_bytes: int) -> str:
    """The shell pipeline ``taskset W pipe_pair write ... | taskset R pipe_pair read ...`` of one rung."""
    common = ["--buffer-size", str(buffer_bytes), "--pipe-size", str(pipe_size_bytes),
              "--total-bytes", str(total_bytes)]
    if settings["huge_pages"]:
        common.append("--huge-pages")
    if settings["busy_loop"]:
        common.append("--busy-loop")
    writer = ["write", *common] + (["--vmsplice"] if settings["writer"] == "vmsplice" else [])
    reader = ["read", *common] + (["--splice"] if settings["reader"] == "splice" else [])
    return (f"taskset -c {cpus[0]} {shlex.quote(binary)} {' '.join(writer)} | "
            f"taskset -c {cpus[1]} {shlex.quote(binary)} {' '.join(reader)}")


def pipe_pair_sample(command: str, timeout_s: float = 120) -> float:
    """GiB/s of one run of the pipe_pair pipeline."""
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout_s)
    match = PIPE_RESULT.search(done.stdout)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"{command!r} failed: {done.stderr.strip() or done.stdout.strip()}")
    return float(match.group(3))


def standalone_rates(command: list[str], copies: int = 1, cpu: int | None = None) -> tuple[float, float]:
    """Run copies of a standalone UnixBench loop in parallel from the shell: the sum of their rates,
    and their work over their summed CPU time."""
    one = shlex.join(command)
    if cpu is not None:
        one = f"taskset -c {cpu} {one}"
    done = subprocess.run(" ".join([f"{one} &"] * copies) + " wait", shell=True, capture_output=True,
                          text=True, check=True)
    results = [dict(zip(words[::2], map(float, words[1::2])))
               for words in (line.split() for line in done.stdout.splitlines())]
    if len(results) != copies:
        raise RuntimeError(f"expected {copies} results from {one!r}, got {done.stdout!r}")
    work = sum(r["rate_per_cpu_s"] * r["cpu_s"] for r in results)
    return sum(r["rate"] for r in results), work / sum(r["cpu_s"] for r in results)


# ---- settings and cases -----------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """How long and how large: one per mode (:data:`MODES`)."""

    rounds: int
    repeat: int
    target_ms: float         # one sample in the caches
    beyond_target_ms: float  # one sample beyond the last cache
    beyond_bytes: int        # the working set beyond the last cache
    clear_region_bytes: int
    system_seconds: float    # one spawn or execl run
    pipe_seconds: float      # one pipe sample (the transfer size memlab finds for it)
    all_pairs: bool          # core_to_core: every ordered pair, or the first
    clear_cached_passes: int # clear in the caches: one-pass samples a side per round
    core_share_chunks: int   # experiments/core_share.c chunks per round (about 1 ms each)


def _beyond_bytes(factor: int, floor: int) -> int:
    largest = max([s for n, s in machine.cache_sizes().items() if not n.endswith("i")] or [32 << 20])
    return max(floor, factor * largest) // (1 << 20) * (1 << 20)


def settings_for(mode: str) -> Settings:
    """The settings of ``full``, ``quick`` or ``tiny``."""
    if mode == "full":
        return Settings(5, 3, 50.0, 300.0, _beyond_bytes(4, 256 << 20), 1 << 30, 1.0, 0.2, True, 100, 500)
    if mode == "quick":
        return Settings(3, 2, 10.0, 60.0, _beyond_bytes(2, 64 << 20), 64 << 20, 0.3, 0.05, False, 30, 200)
    if mode == "tiny":
        return Settings(1, 1, 5.0, 5.0, 4 << 20, 8 << 20, 0.02, 0.002, False, 2, 10)
    raise ValueError(f"mode={mode!r} is not one of 'full', 'quick', 'tiny'")


@dataclass
class Case:
    """One comparison: memlab's side and the bare side, each a function giving one run's samples.

    ``lower_is_better``: the unit is a time (ns), so the speed ratio is bare / memlab.
    """

    family: str
    name: str
    unit: str
    lower_is_better: bool
    memlab: Callable[[], Samples]
    bare: Callable[[], Samples]
    memlab_wall: list[float] = field(default_factory=list)
    memlab_on_cpu: list[float] = field(default_factory=list)
    bare_wall: list[float] = field(default_factory=list)
    bare_on_cpu: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    #: bandwidth cases inside the L1d: the core's L1d port limit for the op (bytes per cycle, of the
    #: op's own bytes as memlab counts them) and the traffic per byte of the op (the unit's scale).
    port_limit: float | None = None
    traffic_per_byte: float = 1.0

    def run_side(self, side: str) -> None:
        self.loads.append(os.getloadavg()[0])
        wall, on_cpu = (self.memlab if side == "memlab" else self.bare)()
        getattr(self, f"{side}_wall").extend(wall)
        if on_cpu is not None:
            getattr(self, f"{side}_on_cpu").extend(on_cpu)


@dataclass(frozen=True)
class Sizes:
    """The working sets of the cases inside the caches, and where they come from.

    ``l1d_half``, ``l2_half``: the chase's and bandwidth's L1d and L2 cases; ``cached_clear_bytes``:
    the clear "in the caches", half the last cache in whole 2 MiB chunks (None where half the last
    cache is less than the clear family's smallest region, one chunk); ``source``: what they were
    read from, for the table's header."""

    l1d_half: int
    l2_half: int
    cached_clear_bytes: int | None
    source: str

    @property
    def note(self) -> str:
        """Why the clear "in the caches" is not measured ("" when it is)."""
        if self.cached_clear_bytes is not None:
            return ""
        return (f"clear in the caches: not measured, half the last cache is less than the clear family's "
                f"smallest region ({_size(clear.CHUNK_BYTES)})")


def _cached_clear(last_cache_bytes: int) -> int | None:
    """Half the last cache in whole 2 MiB chunks (the clear family's THP chunk), None below one.

    >>> _cached_clear(32 << 20), _cached_clear(6 << 20), _cached_clear(1666000)
    (16777216, 2097152, None)
    """
    half = last_cache_bytes // 2 // clear.CHUNK_BYTES * clear.CHUNK_BYTES
    return half or None


def sizes_from_sysfs(sizes: dict[str, int] | None = None) -> Sizes:
    """The sizes by the caches sysfs reports (``sizes``: :func:`memlab.machine.cache_sizes`'s
    names and bytes; default this machine's).

    >>> s = sizes_from_sysfs({"L1d": 32 << 10, "L1i": 32 << 10, "L2": 512 << 10, "L3": 32 << 20})
    >>> s.l1d_half, s.l2_half, s.cached_clear_bytes
    (16384, 262144, 16777216)
    """
    sizes = machine.cache_sizes() if sizes is None else sizes
    l1d, l2 = sizes.get("L1d", 32 << 10), sizes.get("L2", 1 << 20)
    largest = max([s for n, s in sizes.items() if not n.endswith("i")] or [4 << 20])
    return Sizes(l1d // 2 // 1024 * 1024, l2 // 2 // 1024 * 1024, _cached_clear(largest), "the caches sysfs reports")


def sizes_from_hierarchy(found: hierarchy.Hierarchy, why: str = "") -> Sizes:
    """The sizes by this machine's measured edges (:mod:`memlab.hierarchy`): half the L1d edge;
    half the L2 edge, but at least twice the L1d edge (where a random walk finds most lines in the
    L2) and at most the L2 edge; half the last cache's edge. A level the curve did not show falls
    back to sysfs's size.

    >>> L = hierarchy.Level
    >>> found = hierarchy.Hierarchy((L("L1d", 26000, 32768, 1.2, None, "L1d", 32768),
    ...                              L("L2", 330000, 409600, 4.0, None, "L2", 524288),
    ...                              L("L3", 1666000, 2097152, 12.0, None, "L3", 33554432)), 95.0, ())
    >>> s = sizes_from_hierarchy(found)
    >>> s.l1d_half, s.l2_half, s.cached_clear_bytes
    (12288, 164864, None)
    """
    fallback = sizes_from_sysfs(dict(found.sysfs) or None)
    l1d = found.l1d_bytes
    l1d_half = l1d // 2 // 1024 * 1024 if l1d else fallback.l1d_half
    l2 = found.l2_bytes
    if l2 and l1d:
        l2_half = min(l2, max(2 * l1d, l2 // 2)) // 1024 * 1024
    else:
        l2_half = fallback.l2_half
    last = found.last_cache
    if last is not None and last.name != "L1d":
        cached = _cached_clear(last.edge_bytes)
    else:
        cached = fallback.cached_clear_bytes
    edges = ", ".join(f"{level.name} {_size(level.edge_bytes)}" for level in found.caches) or "no cache level"
    source = f"this machine's measured caches ({edges}; {why or 'measured'})"
    return Sizes(l1d_half, l2_half, cached, source)


def obtain_sizes(folder: str | os.PathLike, progress: bool = True) -> Sizes:
    """The sizes from the hierarchy kept in ``folder`` (``hierarchy.json``), measured now (with a
    progress bar on stderr) and kept there when it is missing or from another machine."""
    bar = None

    def on_point(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total, "measuring this machine's caches", enabled=progress, unit="set")
        bar.update(done - bar.n)

    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        found, why = hierarchy.obtain(folder, on_point=on_point)
    finally:
        if bar is not None:
            bar.close()
    return sizes_from_hierarchy(found, why)


def _levels(settings: Settings, sizes: Sizes | None = None) -> list[tuple[str, int, str]]:
    """(label, bytes, pages): half the L1d, half the L2, beyond the last cache (THP there)."""
    sizes = sizes or sizes_from_sysfs()
    return [("L1d/2", sizes.l1d_half, "4k"), ("L2/2", sizes.l2_half, "4k"),
            ("beyond LLC", settings.beyond_bytes, "thp")]


def _values(samples: list[dict[str, float]], key: str, scale: float = 1.0) -> list[float]:
    """One metric of each sample that has it (a sample in which a loaded machine never let the
    thread run has no rate)."""
    return [sample[key] * scale for sample in samples if key in sample]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def chase_cases(bins: dict[str, str], s: Settings, cpu: int, sizes: Sizes | None = None) -> list[Case]:
    cases = []
    for label, size, _ in _levels(s, sizes):
        target = s.beyond_target_ms if label == "beyond LLC" else s.target_ms

        def mine(size=size, target=target) -> Samples:
            m = chase.run(working_set_bytes=size, npad=7, order="random", pages="4k", seed=1, cpu=cpu,
                          repeat=s.repeat, warmup=1, target_seconds=target / 1000, counters=False)
            return _values(m.samples, "ns_per_element"), _values(m.samples, "cpu_ns_per_element")

        def theirs(size=size, target=target) -> Samples:
            pairs = chase_bare_samples(bins["chase_bare"], size, 7, "random", "4k", 1, s.repeat, target, cpu)
            return [a for a, _ in pairs], [b for _, b in pairs]

        cases.append(Case("chase", f"random, {label} ({_size(size)})", "ns/element", True, mine, theirs))
    return cases


def bandwidth_cases(bins: dict[str, str], s: Settings, cpu: int, sizes: Sizes | None = None) -> list[Case]:
    width = bandwidth.widest_width()
    facts = bandwidth.host_facts()
    cases = []
    for label, size, pages in _levels(s, sizes):
        target = s.beyond_target_ms if label == "beyond LLC" else s.target_ms
        for op, layout in (("read", None), ("write", None), ("copy", "apart"), ("copy", "halves")):

            def mine(op=op, size=size, pages=pages, target=target) -> Samples:
                m = bandwidth.run(working_set_bytes=size, op=op, width=width, pages=pages, cpu=cpu,
                                  repeat=s.repeat, warmup=1, target_seconds=target / 1000, counters=False)
                scale = float(sum(bandwidth.BYTES_READ_WRITTEN[op]))  # traffic, as the bare program counts
                return _values(m.samples, "GB_per_s", scale), _values(m.samples, "on_cpu_GB_per_s", scale)

            def theirs(op=op, size=size, pages=pages, target=target, layout=layout) -> Samples:
                return bandwidth_bare_samples(bins["bandwidth_bare"], op, width, size, s.repeat, target, cpu,
                                              pages, layout or "halves")  # read, write: one region

            against = " vs one region in halves" if layout == "halves" else ""
            limit = bandwidth.port_limit_bytes_per_cycle(op, bandwidth.VECTOR_BYTES[width], size, facts)
            cases.append(Case("bandwidth", f"{op} {width}, {label} ({_size(size)}, {pages}){against}",
                              "GB/s traffic", False, mine, theirs,
                              port_limit=float(limit) if limit else None,  # inside the L1d only
                              traffic_per_byte=float(sum(bandwidth.BYTES_READ_WRITTEN[op]))))
    return cases


def pipe_cases(bins: dict[str, str], s: Settings) -> list[Case]:
    cases = []
    buffer_bytes = pipe_size = 256 << 10
    for placement in pipe.available_placements():
        cpus = pipe.placement_cpus(placement)
        for name, settings in pipe.RUNGS:
            if settings["busy_loop"] and cpus[0] == cpus[1]:
                continue
            point = dict(settings, buffer_bytes=buffer_bytes, pipe_size_bytes=pipe_size,
                         writer_cpu=cpus[0], reader_cpu=cpus[1])
            sized: dict[str, int] = {}

            def total(point=point, sized=sized) -> int:
                if "total" not in sized:  # memlab finds the transfer size of one sample, once
                    m = pipe.run(point, repeat=1, warmup=1, target_seconds=s.pipe_seconds, counters=False)
                    sized["total"] = int(m.median("total_bytes"))
                return sized["total"]

            def mine(point=point, total=total) -> Samples:
                m = pipe.run(point, total_bytes=total(), repeat=s.repeat, warmup=0, counters=False)
                return _values(m.samples, "GiB_per_s"), None

            def theirs(settings=settings, cpus=cpus, total=total) -> Samples:
                command = pipe_pair_command(bins["pipe_pair"], settings, cpus, total(), buffer_bytes, pipe_size)
                return [pipe_pair_sample(command) for _ in range(s.repeat)], None

            cases.append(Case("pipe", f"{name}, {placement} ({cpus[0]} -> {cpus[1]})", "GiB/s", False,
                              mine, theirs))
    return cases


def clear_cases(bins: dict[str, str], s: Settings, cpu: int, sizes: Sizes | None = None) -> list[Case]:
    cases = []
    region = s.clear_region_bytes
    for method in clear.METHODS:
        for extent in (4096, 2 << 20):

            def mine(method=method, extent=extent) -> Samples:
                m = clear.order(region_bytes=region, pages="thp", order="sequential", method=method,
                                extent_bytes=extent, cpu=cpu, repeat=s.repeat, warmup=1, target_seconds=0.0)
                return _values(m.samples, "GB_per_s"), _values(m.samples, "cpu_GB_per_s")

            def theirs(method=method, extent=extent) -> Samples:
                return clear_bare_samples(bins["clear_bare"], region, method, extent, s.repeat, cpu)

            cases.append(Case("clear", f"{method}, {_size(extent)} calls over {_size(region)} THP",
                              "GB/s", False, mine, theirs))
    sizes = sizes or sizes_from_sysfs()
    cached = sizes.cached_clear_bytes
    for method in clear.METHODS if cached else ():
        # one pass a sample, back to back on both sides: whatever memlab does between two
        # samples (a /proc/self/smaps walk did, docs/parity.md) shows as caches to refill

        def mine_cached(method=method) -> Samples:
            m = clear.order(region_bytes=cached, pages="thp", order="sequential", method=method,
                            extent_bytes=4096, cpu=cpu, repeat=s.clear_cached_passes, warmup=1,
                            target_seconds=0.0, counters=False)
            return _values(m.samples, "GB_per_s"), _values(m.samples, "cpu_GB_per_s")

        def theirs_cached(method=method) -> Samples:
            return clear_bare_samples(bins["clear_bare"], cached, method, 4096, s.clear_cached_passes, cpu)

        cases.append(Case("clear", f"{method}, 4 KiB calls over {_size(cached)} THP, in the caches",
                          "GB/s", False, mine_cached, theirs_cached))
    return cases


def system_cases(bins: dict[str, str], s: Settings, cpu: int) -> list[Case]:
    cases = []
    for test in ("spawn", "execl"):

        def mine(test=test) -> Samples:
            m = system.run(test=test, duration_s=s.system_seconds, copies=1, cpu=cpu, repeat=s.repeat,
                           warmup=0, counters=False)
            return (_values(m.samples, system.unixbench_metric(test)),
                    _values(m.samples, system.unixbench_metric(test, per_cpu_s=True)))

        def theirs(test=test) -> Samples:
            runs = [standalone_rates([bins[test], str(s.system_seconds)], 1, cpu) for _ in range(s.repeat)]
            return [rate for rate, _ in runs], [per_cpu for _, per_cpu in runs]

        cases.append(Case("system", f"{test}, one copy", "loops/s", False, mine, theirs))
    return cases


def core_to_core_cases(bins: dict[str, str], s: Settings) -> list[Case]:
    cases = []
    pairs = core_to_core.pairs()
    round_trips = 200  # memlab's chunk: one bare sample is as long as one of its chunks
    for cpu_a, cpu_b in pairs if s.all_pairs else pairs[:1]:
        seen: list[float] = []

        def mine(cpu_a=cpu_a, cpu_b=cpu_b, seen=seen) -> Samples:
            m = core_to_core.run(cpu_a=cpu_a, cpu_b=cpu_b, method="cas", repeat=s.repeat, warmup=0,
                                 target_seconds=s.target_ms / 1000, counters=False)
            seen[:] = _values(m.samples, "round_trip_ns")
            return seen[:], None

        def theirs(cpu_a=cpu_a, cpu_b=cpu_b, seen=seen) -> Samples:
            # each value: the median over as many bare samples as one memlab sample lasts
            ns = statistics.median(seen) if seen else 100.0
            count = max(core_to_core.DEFAULT_LINES, round(s.target_ms * 1e6 / (ns * round_trips)))
            values = core_to_core_bare_samples(bins["core_to_core_bare"], cpu_a, cpu_b, "cas", round_trips,
                                               count * s.repeat, core_to_core.DEFAULT_LINES)
            return [statistics.median(values[i * count:(i + 1) * count]) for i in range(s.repeat)], None

        cases.append(Case("core_to_core", f"cas, CPU {cpu_a} -> {cpu_b}", "ns/round trip", True, mine, theirs))
    return cases


def build_cases(bins: dict[str, str], s: Settings, families: list[str], cpu: int,
                sizes: Sizes | None = None) -> list[Case]:
    """The cases of the chosen families this machine can run (pipes on two CPUs and core_to_core
    need two CPUs), sized by ``sizes`` inside the caches (default :func:`sizes_from_sysfs`)."""
    two_cpus = len(os.sched_getaffinity(0)) >= 2
    sizes = sizes or sizes_from_sysfs()
    makers = {
        "chase": lambda: chase_cases(bins, s, cpu, sizes),
        "bandwidth": lambda: bandwidth_cases(bins, s, cpu, sizes),
        "pipe": lambda: pipe_cases(bins, s),
        "clear": lambda: clear_cases(bins, s, cpu, sizes),
        "system": lambda: system_cases(bins, s, cpu),
        "core_to_core": lambda: core_to_core_cases(bins, s) if two_cpus else [],
    }
    return [case for family in families for case in makers[family]()]


def select_cases(cases: list[Case], texts: list[str]) -> list[Case]:
    """The cases whose name contains one of texts (every case when texts is empty).

    >>> [c.name for c in select_cases([Case("clear", "vector, 4 KiB calls", "GB/s", False, None, None),
    ...                                Case("clear", "memset, 2 MiB calls", "GB/s", False, None, None)],
    ...                               ["vector"])]
    ['vector, 4 KiB calls']
    """
    return [case for case in cases if not texts or any(text in case.name for text in texts)]


# ---- rounds and the table --------------------------------------------------------------

def core_share_chunks(binary: str, chunks: int, cpu: int | None) -> list[float]:
    """Independent adds per cycle of each chunk of experiments/core_share.c: its adds per ns in
    eight independent chains over its adds per ns in one dependent chain (one a cycle: the clock),
    both on the thread's CPU clock."""
    share = []
    for line in _run([binary, str(chunks)], cpu).splitlines():
        chain_adds, chain_ns, adds, ns = (float(word) for word in line.split())
        if chain_ns > 0 and ns > 0:
            share.append((adds / ns) / (chain_adds / chain_ns))
    return share


@dataclass
class CoreShare:
    """The thread's share of its core's throughput, from every chunk of every round."""

    adds_per_cycle: list[float]
    cpu: int
    integer_alus: int | None

    def summary(self) -> dict[str, Any]:
        """Median and 90th percentile of independent adds per cycle, the chunks, the ALU count."""
        ordered = sorted(self.adds_per_cycle)
        return {"adds_per_cycle_median": statistics.median(ordered),
                "adds_per_cycle_p90": ordered[int(0.9 * (len(ordered) - 1))], "chunks": len(ordered),
                "cpu": self.cpu, "integer_alus": self.integer_alus}

    def text(self) -> str:
        """One sentence for the port-limit line.

        >>> CoreShare([2.0, 2.5, 3.0, 3.5, 4.0], 1, 4).text()
        'this thread got 3.00 independent adds per cycle (median of 5 chunks on CPU 1; 90th percentile 3.50) of the 4 integer ALUs a core of this design has (experiments/core_share.c)'
        """
        values = self.summary()
        alus = (f"of the {self.integer_alus} integer ALUs a core of this design has" if self.integer_alus
                else "(the machine model gives no ALU count for this CPU)")
        return (f"this thread got {values['adds_per_cycle_median']:.2f} independent adds per cycle (median of "
                f"{values['chunks']} chunks on CPU {self.cpu}; 90th percentile {values['adds_per_cycle_p90']:.2f}) "
                f"{alus} (experiments/core_share.c)")


def run_rounds(cases: list[Case], rounds: int, progress: bool = True,
               probe: Callable[[], None] | None = None) -> None:
    """Interleaved rounds: every case once per round, memlab first in even rounds; ``probe``, when
    given, runs once at the end of each round."""
    for index in range(rounds):
        order = ("memlab", "bare") if index % 2 == 0 else ("bare", "memlab")
        for case in cases:
            for side in order:
                case.run_side(side)
        if probe is not None:
            probe()
        if progress:
            print(f"round {index + 1}/{rounds} done, load average {os.getloadavg()[0]:.2f}",
                  file=sys.stderr, flush=True)


def speed_ratio(memlab_values: list[float], bare_values: list[float],
                lower_is_better: bool) -> tuple[float, float, float]:
    """memlab's speed over the bare program's (median over median) and its 95% bootstrap interval;
    NaNs when a side has no values.

    >>> speed_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], lower_is_better=True)
    (0.5, 0.5, 0.5)
    """
    if not memlab_values or not bare_values:
        return math.nan, math.nan, math.nan
    if lower_is_better:
        memlab_values = [1.0 / v for v in memlab_values]
        bare_values = [1.0 / v for v in bare_values]
    ratio = statistics.median(memlab_values) / statistics.median(bare_values)
    low, high = median_ratio_interval(bare_values, memlab_values)
    return ratio, low, high


def host() -> dict[str, Any]:
    """The host's CPU identity: vendor, family, model (number and name)."""
    facts = bandwidth.host_facts()
    return {key: facts.get(key) for key in ("cpu_vendor", "cpu_family", "cpu_model_number", "cpu_model")}


def port_fraction(on_cpu_traffic: list[float], case: Case, ghz: float) -> float:
    """The median on-CPU rate of one side as a fraction of the case's L1d port limit: traffic GB/s
    over the traffic per byte of the op is the op's GB/s, over the core clock its bytes per cycle
    (memlab's ``fraction_of_port_limit``, computed alike for the bare program). NaN without a limit,
    a clock or on-CPU values.

    >>> case = Case("bandwidth", "copy", "GB/s traffic", False, None, None, port_limit=32.0, traffic_per_byte=2.0)
    >>> port_fraction([96.0, 128.0, 112.0], case, 2.0)
    0.875
    """
    if not case.port_limit or not on_cpu_traffic or not ghz > 0:
        return math.nan
    return statistics.median(on_cpu_traffic) / case.traffic_per_byte / ghz / case.port_limit


def rows(cases: list[Case]) -> list[dict[str, Any]]:
    """One row per case (see the module docstring)."""
    identity = host()
    ghz = measure.core_ghz() if any(case.port_limit for case in cases) else math.nan
    out = []
    for case in cases:
        ratio, low, high = speed_ratio(case.memlab_wall, case.bare_wall, case.lower_is_better)
        cpu_ratio, cpu_low, cpu_high = speed_ratio(case.memlab_on_cpu, case.bare_on_cpu, case.lower_is_better)
        limit = case.port_limit or math.nan
        out.append({
            "family": case.family, "case": case.name, "unit": case.unit,
            "memlab_median": statistics.median(case.memlab_wall), "bare_median": statistics.median(case.bare_wall),
            "ratio": ratio, "ratio_low": low, "ratio_high": high,
            "on_cpu_ratio": cpu_ratio, "on_cpu_ratio_low": cpu_low, "on_cpu_ratio_high": cpu_high,
            "memlab_samples": len(case.memlab_wall), "bare_samples": len(case.bare_wall),
            "load_average_min": min(case.loads), "load_average_max": max(case.loads),
            "port_limit_bytes_per_cycle": limit, "core_GHz": ghz if case.port_limit else math.nan,
            "memlab_fraction_of_port_limit": port_fraction(case.memlab_on_cpu, case, ghz),
            "bare_fraction_of_port_limit": port_fraction(case.bare_on_cpu, case, ghz),
            **identity,
        })
    return out


def _ratio_cell(ratio: float, low: float, high: float) -> str:
    return "" if math.isnan(ratio) else f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


def port_limit_line(table: list[dict[str, Any]], facts: dict[str, Any] | None = None,
                    share: CoreShare | None = None) -> str:
    """One line on the bandwidth cases inside the L1d against the core's L1d port limit: each one's
    on-CPU fraction of the limit, memlab's and the bare program's ("" without bandwidth rows), and
    the thread's share of its core (``share``) where measured. ``facts`` (default this host's) say
    why there is no limit where the model gives none.

    >>> row = {"family": "bandwidth", "case": "read avx2, L1d/2 (16 KiB, 4k)", "port_limit_bytes_per_cycle": 64.0,
    ...        "core_GHz": 3.0, "memlab_fraction_of_port_limit": 0.91, "bare_fraction_of_port_limit": 0.93}
    >>> port_limit_line([row], {"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 1})
    'L1d port limit (Zen 3, core clock 3.00 GHz as calibrated), on-CPU fraction memlab / bare: read avx2, L1d/2 (16 KiB, 4k) 0.910 / 0.930 of 64 B/cycle.'
    """
    rows_ = [r for r in table if r["family"] == "bandwidth"]
    if not rows_:
        return ""
    facts = bandwidth.host_facts() if facts is None else facts
    model = machine_model.core_model(facts)
    limited = [r for r in rows_ if not math.isnan(r["port_limit_bytes_per_cycle"])]
    if not limited:
        if not model.known:
            why = (f"the machine model does not know this CPU ({facts.get('cpu_vendor')} family "
                   f"{facts.get('cpu_family')} model {facts.get('cpu_model_number')})")
        elif machine.cache_sizes(facts).get("L1d") is None:
            why = "sysfs gives no L1d size"
        else:
            why = "no bandwidth case is inside the L1d"
        return f"L1d port limit: not given: {why}."
    cells = [f"{r['case']} {r['memlab_fraction_of_port_limit']:.3f} / {r['bare_fraction_of_port_limit']:.3f} "
             f"of {r['port_limit_bytes_per_cycle']:.0f} B/cycle" for r in limited]
    return (f"L1d port limit ({model.name}, core clock {limited[0]['core_GHz']:.2f} GHz as calibrated), "
            f"on-CPU fraction memlab / bare: " + "; ".join(cells) + "."
            + (f" Throughput the core gave: {share.text()}." if share is not None else ""))


def markdown(table: list[dict[str, Any]], mode: str, rounds: int, sizes: Sizes | None = None,
             share: CoreShare | None = None) -> str:
    """The table as Markdown, under one line naming the host, the date, the mode and the load (and
    a second naming where the sizes inside the caches come from, given ``sizes``)."""
    first = table[0]
    loads = [r["load_average_min"] for r in table] + [r["load_average_max"] for r in table]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"Host: {first['cpu_vendor']} family {first['cpu_family']} model {first['cpu_model_number']} "
             f"({first['cpu_model']}), {len(os.sched_getaffinity(0))} CPUs; {when}; mode {mode}, "
             f"{rounds} interleaved rounds; load average {min(loads):.1f}-{max(loads):.1f}.",
             *([f"Sizes inside the caches: {sizes.source}." + (f" {sizes.note[0].upper()}{sizes.note[1:]}."
                                                                 if sizes.note else "")]
               if sizes is not None else []),
             "",
             "| family | case | unit | memlab | bare | ratio [95%] | on-CPU ratio [95%] | load | host |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table:
        lines.append(
            f"| {r['family']} | {r['case']} | {r['unit']} | {r['memlab_median']:.4g} | {r['bare_median']:.4g} | "
            f"{_ratio_cell(r['ratio'], r['ratio_low'], r['ratio_high'])} | "
            f"{_ratio_cell(r['on_cpu_ratio'], r['on_cpu_ratio_low'], r['on_cpu_ratio_high'])} | "
            f"{r['load_average_min']:.1f}-{r['load_average_max']:.1f} | "
            f"{r['cpu_vendor']} {r['cpu_family']}/{r['cpu_model_number']} |")
    port = port_limit_line(table, share=share)
    return "\n".join(lines + (["", port] if port else []))


def main(argv: list[str] | None = None) -> int:
    """Command line: compiles the programs, runs the rounds, prints the table (exit 2 on bad input)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--quick", action="store_true", help="3 rounds of short samples: under a minute")
    modes.add_argument("--tiny", action="store_true", help="one round of the smallest samples: every case runs")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5; quick 3; tiny 1)")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)),
                        help="the CPU of the one-CPU cases (default: the highest this process may use)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, of " + ", ".join(FAMILIES))
    parser.add_argument("--case", action="append", default=[], metavar="TEXT",
                        help="keep the cases whose name contains TEXT (repeatable)")
    parser.add_argument("--out", help="write the rows as a memlab dataset (.csv or .jsonl)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--hierarchy", metavar="DIR",
                       help="the folder whose hierarchy.json sizes the cases inside the caches (measured and "
                            f"kept there when missing; default {cache_directory()}, or sysfs with --tiny)")
    where.add_argument("--sysfs", action="store_true", help="size the cases by the caches sysfs reports")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "tiny" if args.tiny else "full"
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        parser.error(f"--families={args.families!r}: {', '.join(unknown) or 'none'} not among {', '.join(FAMILIES)}")
    if args.rounds is not None and not 1 <= args.rounds <= 100:
        parser.error(f"--rounds={args.rounds} is outside 1 to 100")
    if args.cpu not in os.sched_getaffinity(0):
        parser.error(f"--cpu={args.cpu} is not among the CPUs this process may use "
                     f"({sorted(os.sched_getaffinity(0))})")
    settings = settings_for(mode)
    rounds = args.rounds or settings.rounds
    texts = args.case
    if texts:  # checked before the caches are measured, except a text naming a size (checked below)
        names = [case.name for case in build_cases({name: "" for name in PROGRAMS}, settings, families, args.cpu)]
        unmatched = [text for text in texts if not any(text in name for name in names)
                     and not re.search(r"\d+ [KM]iB", text)]
        if unmatched:
            parser.error(f"--case={unmatched[0]!r} is in no case name of {', '.join(families)}")
    if args.sysfs or (mode == "tiny" and not args.hierarchy) or not {"chase", "bandwidth", "clear"} & set(families):
        sizes = sizes_from_sysfs()
    else:
        try:
            sizes = obtain_sizes(args.hierarchy or cache_directory())
        except OSError as error:
            parser.error(f"--hierarchy: {error}")
    with tempfile.TemporaryDirectory() as directory:
        bins = compile_programs(directory)
        cases = build_cases(bins, settings, families, args.cpu, sizes)
        unmatched = [text for text in texts if not any(text in case.name for case in cases)]
        if unmatched:  # a text named a size these caches do not give
            parser.error(f"--case={unmatched[0]!r} is in no case name of {', '.join(families)} at the sizes of "
                         f"{sizes.source}" + (f"; {sizes.note}" if sizes.note else ""))
        cases = select_cases(cases, texts)
        share = None
        if any(case.port_limit for case in cases):
            entry = machine_model.core_model(bandwidth.host_facts()).entry
            share = CoreShare([], args.cpu, getattr(entry, "integer_alus", None))

            def probe() -> None:
                share.adds_per_cycle.extend(core_share_chunks(bins["core_share"], settings.core_share_chunks,
                                                              args.cpu))
        run_rounds(cases, rounds, probe=probe if share is not None else None)
    table = rows(cases)
    print(markdown(table, mode, rounds, sizes, share))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Dataset(table, metadata={"experiment": "parity", "mode": mode, "rounds": rounds, "cpu": args.cpu,
                                 "sizes": dataclasses.asdict(sizes),
                                 "core_share": share.summary() if share is not None else None,
                                 "machine": machine.collect(include_core=False)}).save(args.out)
        print(f"{len(table)} rows -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
