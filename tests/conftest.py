"""Shared fixtures: facts about this machine that decide skips."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

pytest.register_assert_rewrite("process_guard")
import process_guard  # noqa: E402
from hugetlb_pool import Pool
from memlab import _core, machine
from memlab.sweep import load_script

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"

# SIGINT deliverable however the run was started; every test leaves the process as it found it.
pytest_plugins = ["process_guard"]


@pytest.fixture(scope="session", autouse=True)
def memlab_cache_directory(tmp_path_factory):
    """memlab's per-machine cache (tiled_simd's searched blocks) in this session's own
    directory, never the user's; child interpreters inherit it. Restored at the end."""
    before = os.environ.get("MEMLAB_CACHE_DIR")
    directory = tmp_path_factory.mktemp("memlab-cache")
    os.environ["MEMLAB_CACHE_DIR"] = str(directory)
    yield directory
    if before is None:
        os.environ.pop("MEMLAB_CACHE_DIR", None)
    else:
        os.environ["MEMLAB_CACHE_DIR"] = before


CTRL_C_DEADLINE_S = 30
"""How long a test that sends Ctrl-C waits for it: far beyond any prompt stop, far below the
60 s sample it interrupts, so a SIGINT that never arrives fails the test instead of hanging it."""


def interrupt_measure(kernel, after_s: float = 0.3) -> None:
    """Ctrl-C (SIGINT to this process) ``after_s`` into a 60 s sample of ``kernel``, which must
    stop with KeyboardInterrupt before its deadline (CTRL_C_DEADLINE_S). The kernel is closed
    either way; a sample that ends otherwise fails the test saying what it waited for."""
    timer = threading.Timer(after_s, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        measure_expecting_ctrl_c(kernel, after_s)
    finally:
        timer.cancel()
        timer.join()
        kernel.close()


def measure_expecting_ctrl_c(kernel, after_s: float, target_ns: int = 60 * 10**9) -> None:
    """One long sample of ``kernel`` that a SIGINT sent ``after_s`` in must stop: fails the test
    when the sample reaches its deadline or ends by itself instead."""
    try:
        kernel.measure(target_ns=target_ns, counters=False, deadline_ns=CTRL_C_DEADLINE_S * 10**9)
    except KeyboardInterrupt:
        return
    except TimeoutError:
        pytest.fail(f"waited {CTRL_C_DEADLINE_S} s for the SIGINT sent {after_s} s into the {kernel.family} "
                    "sample to stop it; the sample ran to its deadline instead", pytrace=False)
    pytest.fail(f"the {kernel.family} sample ended without the KeyboardInterrupt of the SIGINT sent "
                f"{after_s} s into it", pytrace=False)


def memlab_thread_count(settle: bool = True) -> int:
    """How many of this process's threads memlab's core started (they carry its name).

    ``settle``: give threads that were just joined up to 2 s to leave /proc (pthread_join
    returns when a thread's exit wakes it, a moment before the kernel removes the thread from
    /proc/self/task): a thread still running after that counts."""
    return process_guard.memlab_thread_count(settle)


def experiment(name: str) -> ModuleType:
    """An experiment script of experiments/ loaded as a module (its sweep(), table(), ...)."""
    return load_script(EXPERIMENTS / f"{name}.py")


def python_with_hidden_features(script: str, hidden: str) -> str:
    """Run script in a fresh interpreter whose C core hides CPU features; its stdout.

    MEMLAB_HIDE_CPU_FEATURES is the core's test hook (csrc/core.c): the kernels
    choose their ISA as on a CPU without the hidden features.
    """
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MEMLAB_HIDE_CPU_FEATURES": hidden})
    assert result.returncode == 0, result.stderr
    return result.stdout


def _probe() -> dict:
    return _core.counters_probe()


@pytest.fixture(scope="session")
def counters_probe() -> dict:
    return _probe()


def hardware_counters_available() -> bool:
    return _probe()["cycles"]["available"]


def hugetlb_free_pages(page_kib: int) -> int:
    try:
        with open(f"/sys/kernel/mm/hugepages/hugepages-{page_kib}kB/free_hugepages") as handle:
            return int(handle.read())
    except OSError:
        return 0


def thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as handle:
            text = handle.read()
    except OSError:
        return "unavailable"
    return text[text.index("[") + 1 : text.index("]")]


def vmstat(name: str) -> int:
    """One counter of /proc/vmstat (0 where the kernel does not have it)."""
    try:
        with open("/proc/vmstat") as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except OSError:
        pass
    return 0


def _thp_fallbacks() -> int:
    return vmstat("thp_fault_fallback") + vmstat("thp_fault_fallback_charge")


@contextlib.contextmanager
def thp_fallbacks_during():
    """Count the kernel's refusals of huge pages at fault time while the block runs.

    Yields a function returning that count so far (system-wide: another
    process's refusals count too, which can only turn a failure into a skip).
    """
    start = _thp_fallbacks()
    yield lambda: _thp_fallbacks() - start


def skip_if_thp_refused(fraction: float, refused: int, wanted: float = 1.0) -> None:
    """Skip with the reason when fewer huge pages than wanted came and the kernel said it refused some."""
    if fraction < wanted and refused > 0:
        pytest.skip(f"the kernel fell back to 4 KiB pages {refused} times while this ran "
                    f"(thp_fault_fallback in /proc/vmstat): fragmented memory, huge fraction {fraction:.2f}")


def require_populate_write() -> None:
    if not machine.populate_write_supported():
        pytest.skip(f"MADV_POPULATE_WRITE needs Linux 5.14+ (this kernel: {platform.release()})")


HUGETLB_2M_POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"


def read_pool() -> int:
    with open(HUGETLB_2M_POOL) as handle:
        return int(handle.read())


@contextlib.contextmanager
def hugetlb_2m_reserved(wanted: int = 4):
    """Reserve 2 MiB hugetlb pages (root only) and give them back on exit.

    Yields the number of free pages, or raises pytest.skip with the reason.
    A reservation is recorded in a marker first (tests/hugetlb_pool.py), so
    that one left by a killed run is undone by the next reservation.
    """
    if hugetlb_free_pages(2048) >= wanted:
        yield hugetlb_free_pages(2048)
        return
    if os.geteuid() != 0 or not os.access(HUGETLB_2M_POOL, os.W_OK):
        pytest.skip("no 2 MiB hugetlb pages reserved and not root: cannot reserve any")
    with Pool(HUGETLB_2M_POOL).reserved(wanted):
        if hugetlb_free_pages(2048) < wanted:
            pytest.skip("the kernel could not reserve 2 MiB hugetlb pages (memory fragmented)")
        yield hugetlb_free_pages(2048)


def pytest_sessionstart(session):
    """Give back the hugetlb pages a killed earlier run left reserved."""
    if os.geteuid() == 0 and os.access(HUGETLB_2M_POOL, os.W_OK):
        Pool(HUGETLB_2M_POOL).restore_abandoned()


@pytest.fixture
def reserved_hugetlb_2m():
    """A few 2 MiB hugetlb pages for one test; skips with the reason where impossible."""
    with hugetlb_2m_reserved() as free:
        yield free
