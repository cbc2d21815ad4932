"""Small datasets shaped like each family's rows (Measurement.to_row), for plot and report tests.

They are built here, not measured, so the figures can be tested whether or
not a family has been merged; the values follow the seeds' shapes.
"""

from __future__ import annotations

import random

from memlab.dataset import Dataset
from memlab.measure import Measurement

KiB, MiB = 1 << 10, 1 << 20

MACHINE = {
    "cpu_model": "Fixture CPU",
    "caches": [
        {"level": 1, "type": "Data", "size_bytes": 32 * KiB, "line_bytes": 64},
        {"level": 1, "type": "Instruction", "size_bytes": 32 * KiB, "line_bytes": 64},
        {"level": 2, "type": "Unified", "size_bytes": 512 * KiB, "line_bytes": 64},
        {"level": 3, "type": "Unified", "size_bytes": 32 * MiB, "line_bytes": 64},
    ],
    "kernel_release": "6.1.0-fixture",
    "memory_total_bytes": 16 << 30,
}


def row(family: str, params: dict, primary: str, metrics: dict, spread: float = 0.05,
        samples: int = 3, seed: int = 0, facts: dict | None = None) -> dict:
    """A dataset row as Measurement.to_row() makes it: medians, stats and raw samples."""
    rng = random.Random(seed)
    sample_dicts = []
    for index in range(samples):
        factor = 1.0 + spread * (index - (samples - 1) / 2) / max(1, samples - 1) * 2
        sample_dicts.append({name: value * factor * (1 + rng.uniform(-1e-3, 1e-3)) if index != samples // 2
                             else value for name, value in metrics.items()})
    measurement = Measurement(
        family=family,
        params=dict(params),
        samples=sample_dicts,
        counters=[{"page_faults": 10.0}] * samples,
        counters_missing={"cycles": "event not supported (ENOENT)"},
        counters_scope="user+kernel",
        warmup_samples=[],
        primary_metric=primary,
        facts=dict(facts or {}),
    )
    return measurement.to_row()


def dataset(family: str, rows: list[dict], param_names: list[str], primary: str, sweep: str = "quick") -> Dataset:
    return Dataset(rows, {
        "family": family,
        "sweep": sweep,
        "description": f"fixture of {family}",
        "param_names": param_names,
        "primary_metric": primary,
        "repeat": 3,
        "machine": MACHINE,
        "machine_id": "fixture00000",
        "memlab_version": "0.1.0",
        "command": "pytest",
    })


def chase() -> Dataset:
    names = ["working_set_bytes", "npad", "order"]
    rows = []
    for order in ("sequential", "random"):
        for npad in (0, 7):
            for exponent in range(10, 27, 2):
                size = 1 << exponent
                level = 1.3 if size <= 32 * KiB else 4.0 if size <= 512 * KiB else 12.0 if size <= 32 * MiB else 90.0
                ns = level if order == "random" else min(level, 2.0 + npad * 0.3)
                rows.append(row("chase", {"working_set_bytes": size, "npad": npad, "order": order},
                                "ns_per_element", {"ns_per_element": ns, "cycles_per_element": ns * 3.3}))
    return dataset("chase", rows, names, "ns_per_element")


PIPE_RUNGS = (
    ("write", "read", False, False, 3.5),
    ("vmsplice", "read", False, False, 12.7),
    ("vmsplice", "splice", False, False, 32.8),
    ("vmsplice", "splice", True, False, 51.0),
    ("vmsplice", "splice", True, True, 62.5),
)


def pipe() -> Dataset:
    names = ["writer", "reader", "buffer_bytes", "pipe_size_bytes", "total_bytes", "huge_pages", "busy_loop",
             "touch_pages", "verify", "vmsplice_sections", "writer_cpu", "reader_cpu", "timeout_s"]
    rows = []
    for writer_cpu, reader_cpu in ((0, 1), (0, 0)):
        for writer, reader, huge, busy, rate in PIPE_RUNGS:
            if busy and writer_cpu == reader_cpu:
                continue
            params = {"writer": writer, "reader": reader, "buffer_bytes": 256 * KiB, "pipe_size_bytes": 256 * KiB,
                      "total_bytes": None, "huge_pages": huge, "busy_loop": busy, "touch_pages": True,
                      "verify": False, "vmsplice_sections": None, "writer_cpu": writer_cpu,
                      "reader_cpu": reader_cpu, "timeout_s": 60.0}
            scale = 1.0 if writer_cpu != reader_cpu else 0.6
            rows.append(row("pipe", params, "GiB_per_s", {"GiB_per_s": rate * scale, "ns_per_buffer": 1e5 / rate}))
    return dataset("pipe", rows, names, "GiB_per_s")


def pipe_latency() -> Dataset:
    names = ["message_bytes", "round_trips", "busy_loop", "ping_cpu", "pong_cpu", "timeout_s"]
    rows = []
    for ping, pong, busy, ns in ((0, 1, False, 14000.0), (0, 1, True, 1800.0), (0, 0, False, 7600.0)):
        params = {"message_bytes": 1, "round_trips": 0, "busy_loop": busy, "ping_cpu": ping, "pong_cpu": pong,
                  "timeout_s": 60.0}
        rows.append(row("pipe_latency", params, "ns_per_round_trip",
                        {"ns_per_round_trip": ns, "round_trips": 1e9 / ns}))
    return dataset("pipe_latency", rows, names, "ns_per_round_trip")


def clear_order() -> Dataset:
    names = ["region_bytes", "pages", "order", "method", "extent_bytes", "target_subpage", "seed", "check"]
    rows = []
    for extent in (4096, 2 * MiB):
        for order in ("sequential", "kernel"):
            for index, method in enumerate(("memset", "rep_stosb", "vector", "nontemporal")):
                rate = 10.0 + index * 2 + (3 if order == "sequential" else 0) + (1 if extent > 4096 else 0)
                params = {"region_bytes": 64 * MiB, "pages": "thp", "order": order, "method": method,
                          "extent_bytes": extent, "target_subpage": 0, "seed": 1, "check": False}
                rows.append(row("clear_order", params, "GB_per_s",
                                {"GB_per_s": rate, "ns_per_subpage": 4096 / rate, "huge_fraction": 1.0}))
    return dataset("clear_order", rows, names, "GB_per_s")


def clear_fault() -> Dataset:
    names = ["region_bytes", "pages", "populate", "touch_offset", "pause_s", "strict_pages"]
    rows = []
    for pages in ("4k", "thp"):
        for populate in ("touch", "map_populate", "madvise_populate_write"):
            params = {"region_bytes": 64 * MiB, "pages": pages, "populate": populate, "touch_offset": "first",
                      "pause_s": 0.0, "strict_pages": False}
            rate = 2.0 if pages == "4k" else 8.0
            used = "madvise_populate_write" if pages == "thp" and populate == "map_populate" else populate
            rows.append(row("clear_fault", params, "GB_per_s",
                            {"GB_per_s": rate, "faults_per_page": 1.0 if populate == "touch" else 0.0,
                             "huge_fraction": 0.0 if pages == "4k" else 1.0},
                            facts={"pages_requested": pages, "pages_obtained": pages,
                                   "populate_requested": populate, "populate_used": used}))
    return dataset("clear_fault", rows, names, "GB_per_s")


MATRIX_GFLOPS = {"naive": 0.3, "transposed": 1.4, "tiled": 1.8, "tiled_sse2": 2.6, "tiled_simd": 3.4, "blas": 40.0}


def matrix() -> Dataset:
    names = ["n", "variant", "tile", "isa", "seed"]
    rows = []
    for variant, gflops in MATRIX_GFLOPS.items():
        tile = {"tiled": 8, "tiled_sse2": 8, "tiled_simd": 256}.get(variant)
        seconds = 2 * 128**3 / gflops / 1e9
        rows.append(row("matrix", {"n": 128, "variant": variant, "tile": tile, "isa": "auto", "seed": 0},
                        "GFLOP_per_s", {"GFLOP_per_s": gflops, "seconds": seconds, "max_abs_error": 1e-14}))
    return dataset("matrix", rows, names, "GFLOP_per_s")


def matrix_init() -> Dataset:
    names = ["n", "order", "stores"]
    rows = [
        row("matrix_init", {"n": 1000, "order": order, "stores": stores}, "GB_per_s",
            {"GB_per_s": rate, "seconds": 4e6 / rate / 1e9, "wrong_elements": 0.0})
        for order, stores, rate in (("row", "normal", 8.0), ("row", "nontemporal", 9.0),
                                    ("column", "normal", 1.0), ("column", "nontemporal", 0.4))
    ]
    return dataset("matrix_init", rows, names, "GB_per_s")


def system() -> Dataset:
    names = ["test", "duration_s", "iterations", "copies", "buffer_bytes", "max_blocks"]
    rows = []
    for test, buffer_bytes, max_blocks, result in (("spawn", 1024, 2000, 1260.0), ("execl", 1024, 2000, 430.0),
                                                   ("file_copy", 256, 500, 165500.0),
                                                   ("file_copy", 1024, 2000, 396000.0),
                                                   ("file_copy", 4096, 8000, 580000.0)):
        params = {"test": test, "duration_s": 0.5, "iterations": 0, "copies": 1,
                  "buffer_bytes": buffer_bytes, "max_blocks": max_blocks}
        baseline = {"spawn": 126.0, "execl": 43.0, 256: 1655.0, 1024: 3960.0, 4096: 5800.0}[
            test if test != "file_copy" else buffer_bytes]
        metrics = {"loops_per_s": result, "index": result / baseline * 10}
        if test == "file_copy":
            metrics = {"loops_per_s": result * 1024 / buffer_bytes, "KB_per_s": result,
                       "index": result / baseline * 10}
        rows.append(row("system", params, "loops_per_s", metrics))
    return dataset("system", rows, names, "loops_per_s")


def share() -> Dataset:
    """Figures 6.10/6.11's shape: time per thread by threads, per placement, plain and atomic."""
    names = ["threads", "disp_longs", "atomic", "atomic_op"]
    rows = []
    for op in ("plain", "lock_add"):
        for threads in (1, 2, 3, 4):
            for disp in (0, 1, 8):
                per_thread = 1.5 * (3 if op != "plain" else 1) * (1 if disp == 8 or threads == 1 else 2 * threads)
                rows.append(row("share", {"threads": threads, "disp_longs": disp, "atomic": op != "plain",
                                          "atomic_op": op}, "ns_per_increment",
                                {"ns_per_increment": per_thread / threads, "ns_per_increment_per_thread": per_thread}))
    return dataset("share", rows, names, "ns_per_increment")


def share_atomic_ops() -> Dataset:
    """Figure 6.12's shape: every atomic form on one counter, 1 and 4 threads."""
    names = ["threads", "disp_longs", "atomic", "atomic_op"]
    cost = {"lock_add": 1.0, "add_fetch": 1.1, "fetch_add": 1.0, "cas": 3.2, "sync_add_and_fetch": 1.1,
            "sync_fetch_and_add": 1.0, "sync_cas": 3.2}
    rows = [row("share", {"threads": threads, "disp_longs": 0, "atomic": True, "atomic_op": op}, "ns_per_increment",
                {"ns_per_increment": 5.0 * c, "ns_per_increment_per_thread": 5.0 * c * threads})
            for threads in (1, 4) for op, c in cost.items()]
    return dataset("share", rows, names, "ns_per_increment", sweep="atomic_ops")


def bandwidth() -> Dataset:
    names = ["working_set_bytes", "op", "threads"]
    plateaus = {"read": (100.0, 60.0, 30.0, 8.0), "write": (60.0, 20.0, 12.0, 4.0),
                "copy": (45.0, 18.0, 10.0, 3.0)}
    rows = []
    for op, (l1, l2, l3, dram) in plateaus.items():
        for k in range(10, 28, 2):
            size = 1 << k
            value = l1 if size <= 32 * KiB else l2 if size <= 512 * KiB else l3 if size <= 32 * MiB else dram
            rows.append(row("bandwidth", {"working_set_bytes": size, "op": op, "threads": 1}, "bytes_per_cycle",
                            {"bytes_per_cycle": value, "GB_per_s": value * 3.0, "cpu_fraction": 0.98}))
    return dataset("bandwidth", rows, names, "bytes_per_cycle")


def calibrate() -> Dataset:
    return dataset("calibrate", [row("calibrate", {"budget_ns": 50_000_000}, "core_GHz", {"core_GHz": 3.3})],
                   ["budget_ns"], "core_GHz")


def region() -> Dataset:
    """4 KiB and THP pages as asked, and a hugetlb request the kernel served with 4 KiB pages."""
    names = ["region_bytes", "pages", "populate", "strict_pages"]
    rows = []
    for pages in ("4k", "thp", "hugetlb-2m"):
        for populate in ("touch", "madvise_populate_write"):
            obtained = "4k" if pages == "hugetlb-2m" else pages
            rows.append(row("region", {"region_bytes": 64 * MiB, "pages": pages, "populate": populate,
                                       "strict_pages": False}, "GB_per_s",
                            {"GB_per_s": 1.0 if obtained == "4k" else 3.0,
                             "huge_fraction": 0.0 if obtained == "4k" else 1.0},
                            facts={"pages_requested": pages, "pages_obtained": obtained,
                                   "populate_requested": populate, "populate_used": populate}))
    return dataset("region", rows, names, "GB_per_s")


def unknown() -> Dataset:
    """A family memlab.plot has no figure for: the generic figure is used."""
    names = ["size_bytes", "mode"]
    rows = [row("newfamily", {"size_bytes": 1 << e, "mode": mode}, "ns_per_thing", {"ns_per_thing": e * 1.0})
            for mode in ("a", "b") for e in range(10, 16)]
    return dataset("newfamily", rows, names, "ns_per_thing")


ALL = {
    "chase": chase,
    "pipe": pipe,
    "pipe_latency": pipe_latency,
    "clear_order": clear_order,
    "clear_fault": clear_fault,
    "matrix": matrix,
    "matrix_init": matrix_init,
    "system": system,
    "share": share,
    "bandwidth": bandwidth,
    "calibrate": calibrate,
    "region": region,
    "newfamily": unknown,
}
