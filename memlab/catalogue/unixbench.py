"""byte-unixbench (UnixBench 5.1): the system family's items, beside a published run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from memlab import system
from memlab.catalogue.claims import Direction, Sanity, Steps
from memlab.catalogue.core import (
    SOURCES,
    TRANSLATION,
    Claim,
    Item,
    NotMeasurable,
    Number,
    Provenance,
    Verdict,
    finite,
    need_cpus,
    verdict,
)
from memlab.dataset import Dataset
from memlab.grid import Sweep

#: Where this module's published numbers were read (see each number's provenance).
_TRANSLATED = Provenance(TRANSLATION, SOURCES["unixbench"].url)

# ---- UnixBench ----------------------------------------------------------------------------

I7_10700 = "a published UnixBench run on an Intel Core i7-10700 (8 cores, 16 CPUs), Linux"


def _copies(ds: Dataset) -> list[int]:
    return sorted({int(r["copies"]) for r in ds.rows if finite(r.get("copies"))})


def _unixbench_rows(ds: Dataset, name: str) -> list[dict]:
    """Rows of the UnixBench test ``name`` (execl, spawn, fsbuffer, fstime, fsdisk)."""
    found = []
    for row in ds.rows:
        test = system.unixbench_test(row)
        if test is not None and test.name == name:
            found.append(row)
    if not found:
        raise NotMeasurable(f"the dataset has no rows of UnixBench's {name}")
    return found


def _result(ds: Dataset, copies: int, name: str) -> float:
    """Median result (lps or KBps) of UnixBench test ``name`` with ``copies`` copies."""
    values = []
    for row in _unixbench_rows(ds, name):
        result, _, _ = system.unixbench_index(row)
        if finite(result) and row.get("copies") == copies:
            values.append(result)
    if not values:
        raise NotMeasurable(f"no result of {name} with {copies} cop{'y' if copies == 1 else 'ies'}")
    return statistics.median(values)


def _many_over_one(test: str) -> Callable[[Dataset], float]:
    def ratio(ds: Dataset) -> float:
        need_cpus(ds, 2)
        copies = _copies(Dataset(_unixbench_rows(ds, test), ds.metadata))
        if len(copies) < 2:
            raise NotMeasurable(f"{test} ran with one number of copies only")
        return _result(ds, copies[-1], test) / _result(ds, copies[0], test)

    return ratio


def _more_copies_more(test: str, published: float) -> Direction:
    return Direction(_many_over_one(test), True, f"{test}: one copy per CPU / one copy, per second", published,
                     "the published run's 16 copies on 16 CPUs: the size depends on the CPU count")


def _indexes_above_ten(*names: str) -> Callable[[Dataset], Verdict]:
    def check(ds: Dataset) -> Verdict:
        indexes = {}
        for row in ds.rows:
            t = system.unixbench_test(row)
            if t is not None and (not names or t.name in names) and row.get("copies") == 1 \
                    and finite(row.get("index")):
                indexes.setdefault(t.name, []).append(float(row["index"]))
        if not indexes:
            which = ", ".join(names) if names else "any UnixBench test"
            raise NotMeasurable(f"no row of {which} with an index and 1 copy")
        medians = {name: statistics.median(v) for name, v in indexes.items()}
        detail = ", ".join(f"{name} {v:.4g}" for name, v in medians.items())
        return verdict(all(v > 10 for v in medians.values()), f"index with 1 copy: {detail}", **medians)

    return check


def _above_baseline(*names: str) -> Sanity:
    return Sanity(_indexes_above_ten(*names), "the baseline is a 1990s SPARCstation; any working machine beats it")


def _rates_by_buffer(ds: Dataset) -> dict[str, float]:
    return {f"{b} B": _result(ds, 1, name) for b, name in ((256, "fsbuffer"), (1024, "fstime"), (4096, "fsdisk"))}


_bigger_buffers = Steps(_rates_by_buffer, True, "1 copy, KBps by buffer size", 4243414.0 / 423736.0,
                        "423736, 1584363 and 4243414 KBps")


def _index_many_over_one(ds: Dataset) -> float:
    need_cpus(ds, 2)
    by_copies = system.index_by_copies(ds)
    if len(by_copies) < 2:
        raise NotMeasurable("the run has one number of copies only")
    copies = sorted(by_copies)
    return by_copies[copies[-1]] / by_copies[copies[0]]


_index_more_copies = Direction(_index_many_over_one, True, "index: one copy per CPU / one copy", None,
                               "the published run's 16 copies on 16 CPUs: the size depends on the CPU count")


def _index_of(copies_wanted: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        by_copies = system.index_by_copies(ds)
        if not by_copies:
            raise NotMeasurable("no UnixBench index in the dataset")
        key = min(by_copies) if copies_wanted == "one" else max(by_copies)
        if copies_wanted == "many" and len(by_copies) < 2:
            raise NotMeasurable("one number of copies only")
        return by_copies[key]

    return measured


#: Seconds of one sample of a UnixBench test in the full run (UnixBench's own, and the long fixed
#: run's, are 30). Its tests are loops of one short operation whose rate is the count over the time
#: (process creation ran 3,300-5,700 loops a second on a 2-vCPU Zen 5 guest, docs/parity.md: a 1 s
#: sample holds thousands; the quick run's are 0.5 s); a shorter sample is noisier, and the full run's precision
#: rule answers that with more runs a point, up to its maximum (docs/reproduce.md, "UnixBench's
#: samples"). Its claims are directions and sanity checks; its numbers are rates, not totals.
FULL_SAMPLE_SECONDS = 1.0


def _full_samples(sweep: Sweep) -> Sweep:
    """The full run's UnixBench sweep: every test's samples :data:`FULL_SAMPLE_SECONDS` long.

    >>> from memlab import system
    >>> {p["duration_s"] for p in _full_samples(system.unixbench_sweep()).points}
    {1.0}
    """
    return dataclasses.replace(sweep, points=[{**point, "duration_s": FULL_SAMPLE_SECONDS} for point in sweep.points])


def _unixbench_item(key: str, label: str, title: str, measured: str, numbers: Sequence[Number],
                    claims: Sequence[Claim], rows: Mapping[str, Any] | None = None) -> Item:
    return Item(
        key=key, source="unixbench", section="the System Benchmarks Index", label=label, title=title,
        sweep="system.unixbench", quick="system.unixbench_quick", measured=measured, machine=I7_10700,
        numbers=tuple(numbers), claims=tuple(claims), script="experiments/unixbench.py",
        notebook="notebooks/system.ipynb", rows=rows or {}, full=_full_samples,
    )


def _many_result(name: str) -> Callable[[Dataset], float]:
    def measured(ds: Dataset) -> float:
        copies = _copies(Dataset(_unixbench_rows(ds, name), ds.metadata))
        if len(copies) < 2:
            raise NotMeasurable("one number of copies only")
        return _result(ds, copies[-1], name)

    return measured


def _loop_item(key: str, name: str, label: str, title: str, measured: str, one: tuple[float, float],
               many: tuple[float, float], what: str) -> Item:
    """execl and process creation: published results (lps, index) with 1 copy and with 16."""
    return _unixbench_item(
        key, label, title, measured,
        numbers=[
            Number("1 copy", one[0], "lps", lambda ds: _result(ds, 1, name), f"index {one[1]}", provenance=_TRANSLATED),
            Number("one copy per CPU", many[0], "lps", _many_result(name), f"16 copies, index {many[1]}",
                   compare=False, provenance=_TRANSLATED),
        ],
        claims=[
            Claim("The machine beats UnixBench's baseline system (index above 10): a sanity check.",
                  "UnixBench: the baseline machine (a SPARCstation 20-61) scores 10 by definition",
                  _above_baseline(name)),
            Claim(f"One copy per CPU {what} per second in total than one copy.",
                  f"the published run: {one[0]} lps with 1 copy, {many[0]} with 16", _more_copies_more(name, many[0] / one[0])),
        ],
        rows={"test": name},
    )


UNIXBENCH_EXECL = _loop_item(
    "unixbench-execl", "execl", "Execl Throughput", "a program that re-executes itself",
    "execl: a process replaces itself with a fresh copy of the same program, carrying its counter in "
    "its arguments, for 30 s; execs per second (lps), index = result / 43.0 x 10.",
    (6304.3, 1466.1), (8930.6, 2076.9), "execs more")

UNIXBENCH_SPAWN = _loop_item(
    "unixbench-spawn", "spawn", "Process Creation", "fork, exit, wait",
    "spawn: fork a child that exits at once and wait for it, in a loop for 30 s; loops per second, "
    "index = result / 126.0 x 10.",
    (5337.9, 423.6), (16079.3, 1276.1), "creates more processes")

UNIXBENCH_FILE_COPY = _unixbench_item(
    "unixbench-file-copy", "File Copy", "read and write a file in 256, 1024 and 4096-byte buffers",
    "fstime -c: copy a file of max_blocks KiB in buffer-size chunks for 30 s, rewinding at the end; "
    "KB per second against baselines of 1655.0 (256 B / 500 blocks), 3960.0 (1024 / 2000) and 5800.0 "
    "(4096 / 8000) KBps.",
    numbers=[
        Number("256 B buffers, 500 blocks", 423736.0, "KBps",
               lambda ds: _result(ds, 1, "fsbuffer"), "index 2560.3", provenance=_TRANSLATED),
        Number("1024 B buffers, 2000 blocks", 1584363.0, "KBps",
               lambda ds: _result(ds, 1, "fstime"), "index 4000.9", provenance=_TRANSLATED),
        Number("4096 B buffers, 8000 blocks", 4243414.0, "KBps",
               lambda ds: _result(ds, 1, "fsdisk"), "index 7316.2", provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Larger buffers copy more kilobytes per second (256 < 1024 < 4096 bytes).",
              "the published run: 423736, 1584363 and 4243414 KBps", _bigger_buffers),
        Claim("The machine beats UnixBench's baselines (index above 10): a sanity check.",
              "UnixBench: the baseline machine scores 10 by definition", _above_baseline("fsbuffer", "fstime", "fsdisk")),
    ],
    rows={"test": "file_copy"},
)


def _published_index(copies: int) -> float:
    values = {1: (1466.1, 2560.3, 4000.9, 7316.2, 423.6),
              16: (2076.9, 1907.1, 3045.7, 4195324.0 / 5800.0 * 10, 1276.1)}[copies]
    return math.exp(sum(math.log(v) for v in values) / len(values))


UNIXBENCH_INDEX = _unixbench_item(
    "unixbench-index", "System Benchmarks Index Score", "the geometric mean of the tests' indexes",
    "Each test's result over its baseline x 10, combined by a geometric mean (the partial index of "
    "execl, the three file copies and process creation), with 1 copy and with one copy per CPU.",
    numbers=[
        Number("partial index, 1 copy", _published_index(1), "index", _index_of("one"), provenance=_TRANSLATED),
        Number("partial index, one copy per CPU", _published_index(16), "index", _index_of("many"), "16 copies",
               compare=False, provenance=_TRANSLATED),
    ],
    claims=[
        Claim("Every test beats UnixBench's baseline system (index above 10): a sanity check.",
              "UnixBench: the baseline machine scores 10 in every test", _above_baseline()),
        Claim("With one copy per CPU the index is higher than with one copy.",
              "the published run: execl 1466 -> 2077, process creation 424 -> 1276 index",
              _index_more_copies),
    ],
)


