"""Shared fixtures: facts about this machine that decide skips."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import ModuleType

import pytest

from memlab import _core
from memlab.sweep import load_script

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


def experiment(name: str) -> ModuleType:
    """An experiment script of experiments/ loaded as a module (its sweep(), table(), ...)."""
    return load_script(EXPERIMENTS / f"{name}.py")


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


HUGETLB_2M_POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"


def read_pool() -> int:
    with open(HUGETLB_2M_POOL) as handle:
        return int(handle.read())


@contextlib.contextmanager
def hugetlb_2m_reserved(wanted: int = 4):
    """Reserve 2 MiB hugetlb pages (root only) and restore the pool on exit.

    Yields the number of free pages, or raises pytest.skip with the reason.
    """
    if hugetlb_free_pages(2048) >= wanted:
        yield hugetlb_free_pages(2048)
        return
    if os.geteuid() != 0 or not os.access(HUGETLB_2M_POOL, os.W_OK):
        pytest.skip("no 2 MiB hugetlb pages reserved and not root: cannot reserve any")
    previous = read_pool()
    try:
        with open(HUGETLB_2M_POOL, "w") as handle:
            handle.write(str(previous + wanted))
        if hugetlb_free_pages(2048) < wanted:
            pytest.skip("the kernel could not reserve 2 MiB hugetlb pages (memory fragmented)")
        yield hugetlb_free_pages(2048)
    finally:
        with open(HUGETLB_2M_POOL, "w") as handle:
            handle.write(str(previous))


@pytest.fixture
def reserved_hugetlb_2m():
    """A few 2 MiB hugetlb pages for one test; skips with the reason where impossible."""
    with hugetlb_2m_reserved() as free:
        yield free
