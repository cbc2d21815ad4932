"""The bandwidth family: kernels checked word by word against numpy, the checking
mode, placement from the topology, bad input, Ctrl-C, threads never left behind,
and the kernels' machine code (unrolled, the right width, the right stores)."""

from __future__ import annotations

import array
import math
import os
import re
import shlex
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import interrupt_measure, memlab_thread_count, python_with_hidden_features, thp_mode
from disasm import function_instructions, function_lines, mnemonic_and_operands, packed_instructions, widest_loop
from memlab import _core, machine, plot
from memlab import bandwidth as bw
from memlab.dataset import Dataset
from memlab.placement import CpuNotApplicable, choose
from memlab.registry import all_families
from memlab.report import build_report, ReportItem

CPUS = sorted(os.sched_getaffinity(0))
FAST = {"repeat": 1, "warmup": 0, "target_seconds": 0.01}
STEP = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
WIDTHS = list(bw.VECTOR_BYTES)


def needs_width(width: str) -> None:
    reason = bw.width_support()[width]
    if reason:
        pytest.skip(f"width={width}: {reason}")


def two_cpus() -> None:
    if len(CPUS) < 2:
        pytest.skip(f"needs two CPUs; this process may use {len(CPUS)}")


def threads_now() -> int:
    return memlab_thread_count()


# ---- the kernels against numpy ------------------------------------------------------

SIZES = [64, 128, 64 * 9, 4096 + 3 * 64, 1 << 16]
CHUNKS = [0, 192, 4096 + 64]


def guarded(words: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random array with 64 guard words before and after the view handed to the kernel."""
    whole = bw.aligned_array(words + 128)
    whole[:] = rng.integers(0, 2**63, size=whole.size, dtype=np.uint64)
    return whole, whole[64 : 64 + words]


def assert_guards_unchanged(whole: np.ndarray, before: np.ndarray) -> None:
    """The 64 guard words on each side of the view are as they were."""
    np.testing.assert_array_equal(whole[:64], before[:64])
    np.testing.assert_array_equal(whole[-64:], before[-64:])


def kernel_cases(*, stores: bool):
    """Run a kernel test for every width, size and chunking (and store kind, for the stores' tests)."""
    marks = [pytest.mark.parametrize("width", WIDTHS), pytest.mark.parametrize("size", SIZES),
             pytest.mark.parametrize("chunk_bytes", CHUNKS)]
    if stores:
        marks.append(pytest.mark.parametrize("stores", bw.STORES))

    def mark(test):
        for each in [*marks, pytest.mark.build]:  # as decorators listed bottom-up: ids width-size-chunk[-stores]
            test = each(test)
        return test
    return mark


@kernel_cases(stores=False)
def test_sum_twin_of_the_read_adds_every_word_once_per_pass(width, size, chunk_bytes):
    needs_width(width)
    rng = np.random.default_rng(size)
    whole, view = guarded(size // 8, rng)
    expected = int(view.sum(dtype=np.uint64)) * 3 & MASK64
    assert bw.run_pass("sum", view, width=width, passes=3, chunk_bytes=chunk_bytes) == expected
    before = whole.copy()
    assert bw.run_pass("read", view, width=width, passes=2, chunk_bytes=chunk_bytes) == 0
    np.testing.assert_array_equal(whole, before)  # a read changes nothing


@kernel_cases(stores=True)
def test_write_stores_the_value_into_exactly_its_words(width, size, chunk_bytes, stores):
    needs_width(width)
    rng = np.random.default_rng(size + 1)
    whole, view = guarded(size // 8, rng)
    before = whole.copy()
    value = 0xF00DFACE12345678
    bw.run_pass("write", dst=view, width=width, stores=stores, value=value, passes=2,
                chunk_bytes=chunk_bytes)
    assert (view == value).all()
    assert_guards_unchanged(whole, before)


@kernel_cases(stores=True)
def test_copy_makes_dst_equal_src_and_touches_nothing_else(width, size, chunk_bytes, stores):
    needs_width(width)
    rng = np.random.default_rng(size + 2)
    src_whole, src = guarded(size // 8, rng)
    dst_whole, dst = guarded(size // 8, rng)
    src_before, dst_before = src_whole.copy(), dst_whole.copy()
    bw.run_pass("copy", src, dst, width=width, stores=stores, chunk_bytes=chunk_bytes)
    np.testing.assert_array_equal(dst, src)
    np.testing.assert_array_equal(src_whole, src_before)
    assert_guards_unchanged(dst_whole, dst_before)


@kernel_cases(stores=False)
def test_add_adds_src_into_dst_once_per_pass_and_touches_nothing_else(width, size, chunk_bytes):
    """The 2:1 read/write mix: dst += src (64-bit words, wrapping), src left as it was."""
    needs_width(width)
    rng = np.random.default_rng(size + 3)
    src_whole, src = guarded(size // 8, rng)
    dst_whole, dst = guarded(size // 8, rng)
    src[:] |= np.uint64(1 << 63)  # sums wrap past 2**64
    dst[:] |= np.uint64(1 << 63)
    src_before, dst_before = src_whole.copy(), dst_whole.copy()
    assert bw.run_pass("add", src, dst, width=width, passes=3, chunk_bytes=chunk_bytes) == 0
    np.testing.assert_array_equal(dst, dst_before[64:-64] + np.uint64(3) * src_before[64:-64])
    np.testing.assert_array_equal(src_whole, src_before)
    assert_guards_unchanged(dst_whole, dst_before)


@pytest.mark.build
@pytest.mark.parametrize("op, passes", [("read", 3), ("write", 2), ("copy", 1), ("add", 5)])
def test_bytes_done_counts_the_bytes_passed_over_read_and_written_as_the_table_says(op, passes):
    """A known-size run: bytes_done is passes x buffer, whatever the chunks; the traffic table
    (bytes read, written per byte passed) is the one the C core uses for the loaded family."""
    words = 4096 // 8 + 24
    src, dst = bw.aligned_array(words), bw.aligned_array(words)
    config = {"op": op, "width": "scalar", "stores": "normal", "src": src, "dst": dst, "value": 7,
              "passes": passes, "chunk_bytes": 192}
    with _core.Kernel("bandwidth_pass", config) as kernel:
        metrics = kernel.measure(target_ns=0, counters=False)["metrics"]
    assert metrics["bytes_done"] == passes * words * 8
    assert metrics["chunks"] >= passes * words * 8 // 192
    assert bw.BYTES_READ_WRITTEN == {"read": (1, 0), "write": (0, 1), "copy": (1, 1), "add": (2, 1)}


@pytest.mark.build
def test_run_pass_refuses_misaligned_or_odd_buffers():
    words = bw.aligned_array(32)
    with pytest.raises(ValueError, match="src must start on a 64-byte boundary"):
        bw.run_pass("sum", words[1:9])
    with pytest.raises(ValueError, match="src holds 40 bytes; a positive multiple of 64"):
        bw.run_pass("sum", words[:5])
    with pytest.raises(ValueError, match="dst holds 128 bytes; it must match src"):
        bw.run_pass("copy", words[:8], words[16:32])
    readonly = bw.aligned_array(8)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="dst must be a C-contiguous, writable buffer"):
        bw.run_pass("write", dst=readonly)
    with pytest.raises(ValueError, match="op='read' makes no stores|a read makes no stores"):
        bw.run_pass("read", words[:8], stores="nontemporal")
    with pytest.raises(ValueError, match="op='fill' is not one of"):
        bw.run_pass("fill", words[:8])
    with pytest.raises(ValueError, match="add reads every line it writes"):
        bw.run_pass("add", words[:8], words[16:24], stores="nontemporal")
    with pytest.raises(ValueError, match="dst holds 128 bytes; it must match src"):
        bw.run_pass("add", words[:8], words[16:32])
    with pytest.raises(ValueError, match="op='add' needs dst"):
        bw.run_pass("add", words[:8])


@pytest.mark.parametrize("options, error", [
    ({"value": 1 << 64}, r"value=18446744073709551616 is above the maximum 18446744073709551615"),
    ({"value": "x"}, r"value='x' must be an integer"),
    ({"passes": 0}, r"passes=0 is below the minimum 1"),
    ({"passes": True}, r"passes=True must be an integer"),
    ({"passes": 1 << 40}, r"passes=1099511627776 over 64 bytes .* above the maximum 68719476736"),
    ({"chunk_bytes": -64}, r"chunk_bytes=-64 is below the minimum 0"),
    ({"stores": None}, r"stores=None is not one of"),
])
def test_run_pass_refuses_bad_options_naming_them(options, error):
    """A value beyond 64 bits was wrapped silently (2**64 wrote zeros); a huge passes ran for hours
    without a way to stop it."""
    words = bw.aligned_array(8)
    with pytest.raises(ValueError, match=error):
        bw.run_pass("write" if "value" in options else "sum", words, words, **options)


def test_run_pass_writes_any_64_bit_pattern():
    words = bw.aligned_array(8)
    bw.run_pass("write", dst=words, value=(1 << 64) - 1)
    assert (words == np.uint64((1 << 64) - 1)).all()
    bw.run_pass("write", dst=words, value=-2)  # a negative int64: its two's complement
    assert (words == np.uint64((1 << 64) - 2)).all()


def test_aligned_array_refuses_counts_beyond_the_largest_working_set():
    with pytest.raises(ValueError, match=r"count=\d+ is above the maximum"):
        bw.aligned_array(1 << 60)


# ---- the family's checking mode -------------------------------------------------------


def pattern_sum(words: int) -> int:
    """What the check's two passes over the source pattern (word i = (i + 1) * STEP) sum to."""
    return 2 * (STEP * (words * (words + 1) // 2)) & MASK64


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("op, stores", [("read", "normal"), ("write", "normal"), ("write", "nontemporal"),
                                        ("copy", "normal"), ("copy", "nontemporal")])
@pytest.mark.build
def test_check_mode_finds_every_op_touched_exactly_its_bytes(op, stores, width):
    needs_width(width)
    size = (1 << 15) + 3 * 128
    m = bw.run(working_set_bytes=size, op=op, stores=stores, width=width, check=True, **FAST)
    assert m.median("check_errors") == 0
    assert m.median("check_wrong_words") == 0 and m.median("check_guard_damage") == 0
    per_pass = size // 2 if op == "copy" else size
    assert m.median("check_bytes") == 2 * per_pass
    assert m.median("vector_bytes") == bw.VECTOR_BYTES[width]
    if op == "read":
        assert m.median("check_sum_low52") == pattern_sum(size // 8) & ((1 << 52) - 1)


@pytest.mark.parametrize("op", bw.OPS)
def test_a_copy_maps_its_halves_apart(op):
    """A copy's source and destination halves are two mappings, each with its two 4 KiB guards (a
    copy between two buffers, not between the halves of one region a power of two apart); the other
    ops map one region."""
    size = 1 << 16
    m = bw.run(working_set_bytes=size, op=op, pages="4k", check=True, **FAST)
    mappings = 2 if op == "copy" else 1
    assert m.median("mappings_per_set") == mappings
    assert m.median("memory_bytes") == size + mappings * 2 * 4096
    assert m.median("check_errors") == 0 and m.median("check_guard_damage") == 0


@pytest.mark.build
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("op", bw.OPS)
def test_two_threads_check_every_working_set(op, shared):
    two_cpus()
    size = 1 << 16
    m = bw.run(working_set_bytes=size, op=op, threads=2, shared=shared, check=True, **FAST)
    assert m.median("check_errors") == 0
    sets = 1 if shared else 2
    assert m.median("working_sets") == sets
    assert m.median("check_bytes") == 2 * sets * (size // 2 if op == "copy" else size)


def test_metrics_hang_together():
    m = bw.run(working_set_bytes=1 << 16, op="copy", repeat=2, warmup=0, target_seconds=0.02)
    ghz = m.context["core_GHz"]
    for sample in m.samples:
        assert sample["bytes_per_cycle"] == pytest.approx(sample["GB_per_s"] / ghz, rel=1e-3)
        assert sample["traffic_GB_per_s"] == pytest.approx(2 * sample["GB_per_s"])
        assert 0 < sample["cpu_fraction"] <= 1.05
        assert 0 <= sample["overlap_fraction"] <= 1
        assert sample["bytes_per_pass"] == (1 << 15)
        assert sample["passes"] > 0
    assert m.primary_metric == "bytes_per_cycle"


def test_setup_reads_the_filled_set_once_before_any_sample():
    """The settling read (see docs/bandwidth.md) runs once per set and is timed apart from the fill."""
    m = bw.run(working_set_bytes=1 << 20, op="read", repeat=2, warmup=0, target_seconds=0.01)
    first = m.samples[0]
    assert first["settle_ns"] > 0 and first["fill_ns"] > 0
    assert {s["settle_ns"] for s in m.samples} == {first["settle_ns"]}


def test_threads_run_where_the_placement_put_them():
    two_cpus()
    cpus = choose("cores", 2)
    m = bw.run(working_set_bytes=1 << 14, threads=2, placement="cores", **FAST)
    assert [m.median("ran_on_cpu_0"), m.median("ran_on_cpu_1")] == cpus
    assert m.median("threads") == 2


def test_cpu_option_pins_a_one_thread_run():
    cpu = CPUS[-1]
    m = bw.run(working_set_bytes=1 << 14, cpu=cpu, **FAST)
    assert m.median("ran_on_cpu_0") == cpu
    assert m.to_row()["context_cpu"] == cpu
    assert sorted(os.sched_getaffinity(0)) == CPUS  # the calling thread was never pinned
    with pytest.raises(ValueError, match="cpu=4096 is not among the CPUs this process may use"):
        bw.run(working_set_bytes=1 << 14, cpu=4096, **FAST)


def test_cpu_option_refuses_two_threads_on_one_cpu():
    with pytest.raises(CpuNotApplicable, match="cpu=.* does not apply to bandwidth: its 2 workers need a CPU each"):
        bw.run(working_set_bytes=1 << 14, threads=2, cpu=CPUS[0], **FAST)


def test_background_worker_runs_beside_the_measured_thread():
    two_cpus()
    m = bw.run(working_set_bytes=1 << 14, op="read", background_op="write",
               background_working_set_bytes=1 << 18, **FAST)
    assert m.median("background_GB_per_s") > 0
    assert m.median("background_bytes_per_cycle") > 0
    assert m.median("ran_on_cpu_0") != m.median("ran_on_cpu_1")


def test_thp_pages_report_their_coverage():
    if thp_mode() == "never" or thp_mode() == "unavailable":
        pytest.skip(f"transparent huge pages are {thp_mode()} here")
    m = bw.run(working_set_bytes=8 << 20, pages="thp", **FAST)
    assert 0 <= m.median("huge_page_fraction") <= 1
    m4k = bw.run(working_set_bytes=8 << 20, pages="4k", **FAST)
    assert m4k.median("huge_page_fraction") == 0


def test_hugetlb_pages_are_used_when_reserved(reserved_hugetlb_2m):
    m = bw.run(working_set_bytes=2 << 20, op="write", pages="hugetlb-2m", strict_pages=True,
               check=True, **FAST)
    assert m.median("pages_granted_hugetlb") == 1
    assert m.median("check_errors") == 0


# ---- widths and placements the machine cannot give -----------------------------------


@pytest.mark.build
def test_widths_are_reported_with_a_reason_for_each_missing_one():
    support = bw.width_support()
    assert list(support) == WIDTHS and support["scalar"] is None
    assert bw.widest_width() == bw.supported_widths()[-1]
    m = bw.run(working_set_bytes=1 << 12, **FAST)
    assert m.median("vector_bytes") == bw.VECTOR_BYTES[bw.widest_width()]
    missing = [w for w, reason in support.items() if reason]
    if not missing:
        pytest.skip("this CPU runs every width the kernels have (the refusal is shown with a hidden one)")
    for width in missing:
        assert support[width]
        with pytest.raises(ValueError, match=f"width='{width}' cannot run here: "):
            bw.BandwidthParams(width=width)


HIDE = {"avx512": "avx512f", "avx2": "avx2", "sse2": "sse2"}
NARROWER = {"avx512": "avx2", "avx2": "sse2", "sse2": "scalar"}


@pytest.mark.build
@pytest.mark.parametrize("width", ["avx512", "avx2", "sse2"])
def test_a_hidden_width_is_refused_and_auto_takes_the_next_narrower(width):
    # MEMLAB_HIDE_CPU_FEATURES: this host plays a CPU without the width, whatever it really has
    needs_width(width)
    script = textwrap.dedent(f"""
        from memlab import bandwidth as bw
        fast = dict(repeat=1, warmup=0, target_seconds=0.001)
        print("support:", bw.width_support()[{width!r}])
        try:
            bw.run(working_set_bytes=4096, width={width!r}, **fast)
        except ValueError as error:
            print("refused:", error)
        print("auto:", bw.run(working_set_bytes=4096, check=True, **fast).median("vector_bytes"))
    """)
    out = python_with_hidden_features(script, HIDE[width])
    assert f"refused: width={width!r} cannot run here: this CPU has no" in out, out
    assert f"(this CPU runs {', '.join(list(bw.VECTOR_BYTES)[:list(bw.VECTOR_BYTES).index(width)])})" in out, out
    assert f"auto: {float(bw.VECTOR_BYTES[NARROWER[width]])}" in out, out


def test_two_smt_siblings_share_a_core():
    try:
        cpus = choose("smt", 2)
    except ValueError as error:
        pytest.skip(str(error))
    m = bw.run(working_set_bytes=1 << 14, threads=2, placement="smt", **FAST)
    ran = [int(m.median("ran_on_cpu_0")), int(m.median("ran_on_cpu_1"))]
    assert ran == cpus
    siblings = {c["cpu"]: c["siblings"] for c in machine.cpu_topology()}
    assert ran[1] in siblings[ran[0]]


def test_caches_shared_by_reads_the_shared_cpu_lists(tmp_path):
    base = tmp_path / "sys/devices/system/cpu/cpu0/cache"
    for index, (level, kind, size, shared) in enumerate(
            [(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"), (2, "Unified", "2048K", "0"),
             (3, "Unified", "32768K", "0-3")]):
        directory = base / f"index{index}"
        directory.mkdir(parents=True)
        for name, text in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (directory / name).write_text(f"{text}\n")
    assert machine.caches_shared_by([0, 2], root=str(tmp_path)) == [
        {"level": 3, "type": "Unified", "size_bytes": 32 << 20}]
    assert [c["level"] for c in machine.caches_shared_by([0], root=str(tmp_path))] == [1, 2, 3]


# ---- bad parameters -------------------------------------------------------------------


@pytest.mark.parametrize("params, message", [
    ({"working_set_bytes": 32}, r"working_set_bytes=32 is below the minimum 64 \(one cache line"),
    ({"working_set_bytes": 1000}, "working_set_bytes=1000 must be a multiple of 64"),
    ({"working_set_bytes": 192, "op": "copy"}, "working_set_bytes=192: copy .* multiple of 128"),
    ({"working_set_bytes": 1.5}, "working_set_bytes=1.5 must be an integer"),
    ({"op": "scan"}, "op='scan' is not one of 'read', 'write', 'copy'"),
    ({"width": "avx1024"}, "width='avx1024' is not one of"),
    ({"stores": "streaming"}, "stores='streaming' is not one of"),
    ({"op": "read", "stores": "nontemporal"}, "stores='nontemporal' applies to write and copy"),
    ({"threads": 0}, "threads=0 is below the minimum 1"),
    ({"threads": len(CPUS) + 1}, f"threads={len(CPUS) + 1} is more than the {len(CPUS)} CPUs"),
    ({"threads": len(CPUS), "background_op": "read"}, "plus the background worker is more than"),
    ({"placement": "numa"}, "placement='numa' is not one of 'cores', 'smt', 'sockets', 'spread', 'unpinned'"),
    ({"pages": "1g"}, "pages='1g' is not one of"),
    ({"background_op": "scan"}, "background_op='scan' is not one of"),
    ({"background_op": "copy", "background_working_set_bytes": 64},
     "background_working_set_bytes=64: copy .* multiple of 128"),
    ({"shared": "yes"}, "shared='yes' must be True or False"),
    ({"nonsense": 1}, "unknown parameter 'nonsense'"),
])
def test_bad_parameters_are_value_errors_naming_them(params, message):
    with pytest.raises(ValueError, match=message):
        bw.run(params, **FAST)


def core_config(**overrides):
    config = {"working_set_bytes": 4096, "op": "read", "width": "auto", "stores": "normal", "threads": 1,
              "cpus": array.array("i", [-1]), "shared": True, "pages": "4k", "strict_pages": False,
              "background_op": "none", "background_working_set_bytes": 4096, "check": False}
    config.update(overrides)
    return config


@pytest.mark.parametrize("overrides, message", [
    ({"working_set_bytes": 100}, "working_set_bytes=100 must be a multiple of 64"),
    ({"cpus": array.array("i", [-1, -1])}, "cpus holds 2 CPUs; threads=1 needs 1"),
    ({"cpus": array.array("h", [-1])}, "cpus has items of 2 bytes; int32"),
    ({"cpus": array.array("i", [4096])}, r"cpus\[0\]=4096 is not a CPU this process may use"),
    ({"op": "read", "stores": "nontemporal"}, "a read makes no stores"),
    ({"threads": 1024, "cpus": array.array("i", [-1] * 1024)}, "threads=1024 is more than the"),
])
def test_the_c_core_checks_what_python_checks(overrides, message):
    with pytest.raises(ValueError, match=message):
        _core.Kernel("bandwidth", core_config(**overrides))


def test_two_workers_on_one_cpu_are_refused():
    two_cpus()
    with pytest.raises(ValueError, match=r"cpus\[1\]=.* is also cpus\[0\]"):
        _core.Kernel("bandwidth", core_config(threads=2, cpus=array.array("i", [CPUS[0], CPUS[0]])))


def test_working_sets_larger_than_memory_are_memory_errors():
    with pytest.raises(MemoryError, match="working set"):
        bw.run(working_set_bytes=1 << 45, **FAST)


def test_strict_hugetlb_without_pages_is_an_os_error():
    from conftest import hugetlb_free_pages

    if hugetlb_free_pages(2048) > 0:
        pytest.skip("2 MiB hugetlb pages are reserved here: the refusal cannot be shown")
    with pytest.raises(OSError, match="hugetlb"):
        bw.run(working_set_bytes=1 << 20, pages="hugetlb-2m", strict_pages=True, **FAST)
    m = bw.run(working_set_bytes=1 << 20, pages="hugetlb-2m", **FAST)
    assert m.median("pages_granted_hugetlb") == 0


# ---- Ctrl-C and threads ------------------------------------------------------------------


@pytest.mark.ctrl_c
def test_ctrl_c_stops_every_thread_promptly():
    threads = min(2, len(CPUS))
    before = threads_now()
    kernel = _core.Kernel("bandwidth", core_config(
        working_set_bytes=1 << 20, threads=threads, cpus=array.array("i", [-1] * threads)))
    interrupt_measure(kernel)  # KeyboardInterrupt well before the sample's 30 s deadline
    assert threads_now() == before


# A worker that cannot start leaves no thread behind: tests/test_team.py, for every team.


def test_a_sample_shorter_than_a_thread_start_still_has_a_rate():
    # A 1 ns target: the team is told to stop before the scheduler has run its workers (on a
    # loaded machine that happens at 30 ms too); every worker still moves one chunk, so the
    # sample has bytes and a rate instead of no units (a KeyError on bytes_per_cycle later).
    # Every worker runs its body, even one the stop reached before it did: a skipped body was
    # a thread with no CPU (ran_on_cpu -1) and no window of its own in the sample (seen under a
    # two-process hog, test_threads_run_where_the_placement_put_them).
    threads = min(2, len(CPUS))
    with _core.Kernel("bandwidth", core_config(op="write", working_set_bytes=1 << 20, threads=threads,
                                               cpus=array.array("i", [-1] * threads))) as kernel:
        samples = [kernel.measure(target_ns=1, counters=False) for _ in range(50)]
    assert all(s["units"] > 0 and s["bytes"] > 0 for s in samples)
    for s in samples:
        assert all(s["metrics"][f"ran_on_cpu_{i}"] >= 0 for i in range(threads)), s["metrics"]
        assert s["metrics"]["GB_per_s_slowest_thread"] > 0, s["metrics"]


# ---- the machine code of the kernels --------------------------------------------------

REGISTER = {"scalar": None, "sse2": "xmm", "avx2": "ymm", "avx512": "zmm"}
KERNELS = [(kind, width) for width in WIDTHS
           for kind in ("read", "sum", "write", "write_nt", "copy", "copy_nt", "add")]


def disassemble(function: str) -> list[tuple[int, str]]:
    if "-fsanitize" in _core.build_info().get("cflags", ""):
        pytest.skip("a sanitizer build: its kernels carry the sanitizer's checks and calls")
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is not installed")
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", f"--disassemble={function}", _core.__file__],
                          capture_output=True, text=True, check=False).stdout
    body = text.split(f"<{function}>:", 1)
    if len(body) < 2:
        pytest.skip(f"{function} is not in the symbol table (stripped build)")
    lines = []
    for line in body[1].splitlines():
        address, _, instruction = line.partition(":\t")
        if instruction and re.fullmatch(r"\s*[0-9a-f]+", address):
            lines.append((int(address, 16), instruction.strip()))
    return lines


def backward_target(address: int, instruction: str) -> int | None:
    jump = re.match(r"j\w+\s+([0-9a-f]+)\b", instruction)
    return int(jump.group(1), 16) if jump and int(jump.group(1), 16) <= address else None


def main_loop(lines: list[tuple[int, str]]) -> list[str]:
    """The innermost loop (a backward branch with none inside) holding the most memory accesses."""
    best: list[str] = []
    for index, (address, instruction) in enumerate(lines):
        target = backward_target(address, instruction)
        if target is None:
            continue
        body = [(a, text) for a, text in lines[:index] if a >= target]
        if any(backward_target(a, text) is not None for a, text in body):
            continue  # an outer loop
        texts = [text for _, text in body] + [instruction]
        if sum("(" in text for text in texts) > sum("(" in text for text in best):
            best = texts
    return best


@pytest.mark.build
@pytest.mark.parametrize("kind, width", KERNELS, ids=[f"{k}_{w}" for k, w in KERNELS])
def test_kernel_main_loop_is_unrolled_at_its_width(kind, width):
    lines = disassemble(f"{kind}_{width}")
    assert not any(text.startswith("call") for _, text in lines), "the kernel calls a function"
    loop = main_loop(lines)
    memory = [text for text in loop if "(" in text and not text.startswith(("lea", "nop", "cs nop"))]
    others = [text for text in loop if text not in memory and not text.startswith(("nop", "cs nop"))]
    per_vector = 2 if kind.startswith(("copy", "add")) else 1  # add: a load and an add-with-load, or
    assert len(memory) >= 8 * per_vector, f"main loop of {kind}_{width}: {loop}"  # an add into memory
    if kind == "add":  # the adds (with their operands in registers) are its work, nothing else
        others = [text for text in others if not re.match(r"v?p?add\w*\s+[^$]", text)]
    if kind != "sum":  # the measured kernels: the loop's own work is a pointer bump and a branch
        assert len(others) <= 4, f"main loop of {kind}_{width} has {len(others)} other instructions: {others}"
    register = REGISTER[width]
    for text in memory:
        uses = re.findall(r"%([xyz]mm)\d+", text)
        if register is None:
            assert not uses, f"{kind}_scalar uses a vector register: {text}"
        else:
            assert uses and set(uses) == {register}, f"{kind}_{width}: {text}"
    stores = [text for text in memory if re.search(r",\s*-?(0x[0-9a-f]+)?\(%", text)]
    streaming = [text for text in stores if text.startswith(("movnt", "vmovnt"))]
    if kind.endswith("_nt"):
        assert streaming and len(streaming) == len(stores), f"{kind}_{width}: {stores}"
        assert any(text == "sfence" for _, text in lines)
    else:
        assert not streaming
    if kind in ("read", "sum"):
        assert not stores, f"{kind}_{width} stores: {stores}"
    if kind == "add":  # one store per vector, each an add's result
        assert len(stores) >= 8, f"add_{width} stores: {stores}"
        adds = [text for text in loop if re.match(r"v?p?add\w*\s+[^$]", text)]
        assert len(adds) >= 8, f"add_{width} adds: {loop}"
    if kind == "read":  # only loads: nothing done with the data
        assert all(text.split()[0] in ("mov", "movdqa", "vmovdqa", "vmovdqa64", "movaps", "vmovaps")
                   for text in memory), memory


@pytest.mark.build
@pytest.mark.parametrize("width", ["scalar", "sse2"])
def test_add_stays_at_its_width(width):
    """add_scalar has no packed arithmetic (compilers merge neighbouring scalar adds into vector
    ones if let), add_sse2 only 16-byte lanes: no ymm/zmm register, every packed op a paddq."""
    if "-fsanitize" in _core.build_info().get("cflags", ""):
        pytest.skip("a sanitizer build: its kernels carry the sanitizer's checks and calls")
    instructions = function_instructions(_core.__file__, f"add_{width}")
    if instructions is None:
        pytest.skip(f"objdump is missing or add_{width} is not in the symbol table (stripped build)")
    packed = packed_instructions(instructions)
    if width == "scalar":
        assert packed == [], packed
    else:
        assert packed and all(mnemonic_and_operands(line)[0] in ("paddq", "vpaddq") for line in packed), packed


def _compiler_accepts(compiler: str, flag: str, folder) -> bool | None:
    """Whether ``compiler`` (a command line) compiles an empty program with ``flag``; None when absent."""
    command = shlex.split(compiler)
    if not command or shutil.which(command[0]) is None:
        return None
    source = folder / "probe.c"
    source.write_text("int main(void) { return 0; }\n")
    return subprocess.run([*command, flag, "-c", str(source), "-o", str(folder / "probe.o")],
                          capture_output=True).returncode == 0


@pytest.mark.build
def test_the_build_aligns_loops_where_its_compiler_takes_the_flag(tmp_path):
    """setup.py adds -falign-loops=64 exactly when the compiler that built the core accepts it."""
    info = _core.build_info()
    accepts = _compiler_accepts(info["cc"], "-falign-loops=64", tmp_path)
    if accepts is None:
        pytest.skip(f"the compiler that built the core ({info['cc']!r}) is not on PATH here")
    assert ("-falign-loops=64" in info["cflags"].split()) == accepts, info["cflags"]


@pytest.mark.build
@pytest.mark.parametrize("function", [f"{op}_{width}" for op in ("read", "sum", "write", "copy", "add")
                                      for width in ("scalar", "sse2", "avx2", "avx512")]
                         + [f"{op}_nt_{width}" for op in ("write", "copy") for width in ("sse2", "avx2", "avx512")])
def test_every_kernel_main_loop_starts_a_64_byte_line(function):
    """A kernel's main loop (the unrolled one) starts on a 64-byte boundary, whatever place the
    linker gave the function: where the L1d read's loop started inside its line changed its rate
    by up to 8% (docs/parity.md). gcc leaves its short head and tail loops 16-byte aligned."""
    if "-falign-loops=64" not in _core.build_info()["cflags"].split():
        pytest.skip("this core was built without -falign-loops=64 (its compiler refused the flag)")
    lines = function_lines(_core.__file__, function)
    if lines is None:
        pytest.skip(f"objdump is missing or {function} is not in the symbol table (stripped build)")
    loop = widest_loop(lines)
    assert loop, f"{function} has no loop"
    assert loop[0] % 64 == 0, f"{function}'s main loop starts at {loop[0]:#x}"


# ---- sweeps, figure, report -----------------------------------------------------------------


def test_sizes_run_from_1_kib_past_the_largest_cache():
    sizes = bw.sizes()
    assert sizes[0] == 1024 and sizes == sorted(set(sizes))
    assert all(size % 128 == 0 for size in sizes)
    cap = 1 << bw._memory_cap_log2()
    largest = bw._largest_cache_bytes()
    assert sizes[-1] == min(cap, max(1 << 28, 1 << math.ceil(math.log2(4 * largest))))
    quick = bw.sizes(quick=True)
    assert len(quick) == 4 and quick[-1] == min(cap, max(1 << 26, 1 << math.ceil(math.log2(2 * largest))))


def test_every_named_sweep_builds_or_says_why_not():
    family = all_families()["bandwidth"]
    for name in family.sweeps:
        try:
            sweep = family.sweep(name)
        except ValueError as error:
            assert "smt" in name or "fig3_25" in name or len(CPUS) < 2, (name, error)
            continue
        assert sweep.family == "bandwidth" and sweep.name == name
        for point in sweep.points:
            family.params(point)  # every point is valid here


def test_fig3_31_gives_the_background_half_the_shared_cache():
    two_cpus()
    sweep = all_families()["bandwidth"].sweep("fig3_31_quick")
    cpus = choose("cores", 2)
    shared = [c for c in machine.caches_shared_by(cpus) if c["level"] >= 2]
    expected = (shared[0]["size_bytes"] if shared else bw._largest_cache_bytes()) // 2 // 128 * 128
    assert {p["background_working_set_bytes"] for p in sweep.points} == {expected}
    assert {(p["op"], p["background_op"]) for p in sweep.points} == {
        (a, b) for a in ("read", "write") for b in ("none", "read", "write")}  # "none": the control


def test_the_quick_sweep_measures_and_draws(tmp_path):
    pytest.importorskip("matplotlib")
    from memlab.sweep import run_sweep
    from memlab.tour import reduce_sweep

    sweep = reduce_sweep(all_families()["bandwidth"].sweep("quick"), max_points=3)
    ds = run_sweep(sweep, tmp_path / "bw.csv", progress=False)
    assert len(ds) == 3 and all(row["bytes_per_cycle"] > 0 for row in ds.rows)
    fig = plot.figure(Dataset.load(tmp_path / "bw.csv"))
    assert fig.axes[0].get_xscale() == "log"
    html = build_report([ReportItem("bandwidth", ds)])
    assert bw.CAPTION.split(":")[0] in html


def test_figure_marks_the_caches_and_gives_gb_per_s():
    pytest.importorskip("matplotlib")
    from plot_fixtures import bandwidth as fixture

    fig = plot.figure(fixture())
    ax = fig.axes[0]
    labels = [text.get_text() for text in ax.texts]
    assert any(label.startswith("L1d") for label in labels)
    assert any(label.startswith("L2") for label in labels)
    assert len(ax.get_lines()) >= 3  # read, write, copy (plus the cache markers)
    assert any("GB/s" in other.get_ylabel() for other in fig.axes[0].child_axes)


# ---- the L1d port limit (memlab.machine_model's table) ---------------------------------

def _facts(vendor: str, family: int, model: int, l1d_bytes: int | None) -> dict:
    facts = {"cpu_vendor": vendor, "cpu_family": family, "cpu_model_number": model}
    if l1d_bytes is not None:
        facts["caches"] = [{"level": 1, "type": "Data", "size_bytes": l1d_bytes},
                           {"level": 2, "type": "Unified", "size_bytes": 1 << 20}]
    return facts


ZEN4 = _facts("AuthenticAMD", 25, 17, 32 << 10)
SAPPHIRE_RAPIDS = _facts("GenuineIntel", 6, 0x8F, 48 << 10)
UNKNOWN_CPU = _facts("GenuineIntel", 6, 1, 32 << 10)


@pytest.mark.parametrize("facts, op, vector_bytes, expected", [
    (ZEN4, "read", 64, 64), (ZEN4, "read", 16, 32), (ZEN4, "write", 64, 32), (ZEN4, "copy", 64, 32),
    (SAPPHIRE_RAPIDS, "read", 64, 128), (SAPPHIRE_RAPIDS, "read", 16, 48),
    (SAPPHIRE_RAPIDS, "write", 64, 64), (SAPPHIRE_RAPIDS, "copy", 32, 64),
])
def test_port_limit_is_the_machine_models_at_l1d_sizes(facts, op, vector_bytes, expected):
    l1d = facts["caches"][0]["size_bytes"]
    for size in (1 << 10, l1d // 2, l1d):
        assert bw.port_limit_bytes_per_cycle(op, vector_bytes, size, facts) == expected
    model = bw.machine_model.core_model(facts)
    assert expected == model.l1d_bytes_per_cycle(op, vector_bytes)


@pytest.mark.parametrize("facts, size, threads, placement, why", [
    (ZEN4, (32 << 10) + 128, 1, "cores", "larger than the L1d"),
    (SAPPHIRE_RAPIDS, 1 << 20, 1, "cores", "larger than the L1d"),
    (UNKNOWN_CPU, 16 << 10, 1, "cores", "a CPU the model does not list"),
    (_facts("AuthenticAMD", 25, 17, None), 16 << 10, 1, "cores", "no L1d size in the facts"),
    ({}, 16 << 10, 1, "cores", "no facts at all"),
    (ZEN4, 16 << 10, 2, "smt", "two threads share one core's ports"),
    (ZEN4, 16 << 10, 2, "unpinned", "two threads may share one core"),
])
def test_port_limit_is_absent_where_it_does_not_apply(facts, size, threads, placement, why):
    assert bw.port_limit_bytes_per_cycle("read", 64, size, facts, threads, placement) is None, why


def test_two_threads_on_their_own_cores_keep_the_limit():
    assert bw.port_limit_bytes_per_cycle("write", 64, 16 << 10, ZEN4, 2, "cores") == 32


@pytest.mark.parametrize("facts", [ZEN4, SAPPHIRE_RAPIDS], ids=["zen4", "sapphire_rapids"])
def test_rows_carry_the_fraction_of_the_port_limit(monkeypatch, facts):
    monkeypatch.setattr(bw, "host_facts", lambda: facts)
    m = bw.run(working_set_bytes=16 << 10, op="copy", repeat=2, warmup=0, target_seconds=0.01)
    model = bw.machine_model.core_model(facts)
    for sample in m.samples:
        limit = model.l1d_bytes_per_cycle("copy", int(sample["vector_bytes"]))
        assert sample["port_limit_bytes_per_cycle"] == limit
        assert sample["fraction_of_port_limit"] == pytest.approx(sample["on_cpu_bytes_per_cycle"] / limit)
    row = m.to_row()
    assert row["fraction_of_port_limit"] == pytest.approx(m.median("fraction_of_port_limit"))


@pytest.mark.parametrize("facts, size", [(UNKNOWN_CPU, 16 << 10), (ZEN4, 1 << 20)],
                         ids=["unknown_cpu", "beyond_l1d"])
def test_rows_leave_the_fraction_out_rather_than_zero(monkeypatch, facts, size):
    monkeypatch.setattr(bw, "host_facts", lambda: facts)
    m = bw.run(working_set_bytes=size, op="read", repeat=1, warmup=0, target_seconds=0.01)
    assert "fraction_of_port_limit" not in m.samples[0]
    assert "port_limit_bytes_per_cycle" not in m.samples[0]
    assert "fraction_of_port_limit" not in m.to_row()
