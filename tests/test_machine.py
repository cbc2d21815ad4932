"""Machine facts: present on this Linux machine, absent (not errors) in an empty tree."""

import ast
import os
import platform
import re
from pathlib import Path

import pytest

import memlab
from memlab import machine


def write(root, path, text):
    full = root / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


@pytest.fixture
def fake_root(tmp_path):
    write(tmp_path, "/proc/cpuinfo",
          "processor\t: 0\nmodel name\t: Fake CPU 9000\ncpu MHz\t\t: 3000.000\n"
          "flags\t\t: fpu sse2 avx2 avx512f hypervisor\n\nprocessor\t: 1\nmodel name\t: Other\n")
    write(tmp_path, "/sys/devices/system/cpu/online", "0-3\n")
    write(tmp_path, "/sys/devices/system/cpu/present", "0-3,6\n")
    cache = "/sys/devices/system/cpu/cpu0/cache"
    for index, (level, kind, size, ways, shared) in enumerate(
        [(1, "Data", "48K", 12, "0"), (1, "Instruction", "32K", 8, "0"), (2, "Unified", "2048K", 16, "0-1"),
         (3, "Unified", "36M", 12, "0-3")]
    ):
        write(tmp_path, f"{cache}/index{index}/level", f"{level}\n")
        write(tmp_path, f"{cache}/index{index}/type", f"{kind}\n")
        write(tmp_path, f"{cache}/index{index}/size", f"{size}\n")
        write(tmp_path, f"{cache}/index{index}/coherency_line_size", "64\n")
        write(tmp_path, f"{cache}/index{index}/ways_of_associativity", f"{ways}\n")
        write(tmp_path, f"{cache}/index{index}/shared_cpu_list", f"{shared}\n")
    write(tmp_path, "/proc/sys/kernel/osrelease", "6.1.0-fake\n")
    write(tmp_path, "/etc/os-release", 'NAME="Fake"\nPRETTY_NAME="Fake Linux 1"\n')
    write(tmp_path, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(tmp_path, "/sys/kernel/mm/transparent_hugepage/defrag", "[always] defer madvise never\n")
    write(tmp_path, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "16\n")
    write(tmp_path, "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "12\n")
    write(tmp_path, "/proc/sys/fs/pipe-max-size", "1048576\n")
    write(tmp_path, "/proc/sys/kernel/perf_event_paranoid", "2\n")
    write(tmp_path, "/proc/meminfo", "MemTotal:        2048 kB\nMemFree: 1 kB\nMemAvailable:    1024 kB\n")
    write(tmp_path, "/proc/sys/kernel/hostname", "fakehost\n")
    return str(tmp_path)


def test_fake_tree_is_read_exactly(fake_root):
    facts = machine.collect(include_core=False, root=fake_root)
    assert facts["cpu_model"] == "Fake CPU 9000"
    assert facts["cpu_count"] == 5 and facts["cpu_online"] == "0-3"
    assert "cpus_allowed" not in facts  # this process's affinity says nothing about a fake tree
    assert facts["cpu_flags_simd"] == ["sse2", "avx2", "avx512f"]
    assert facts["cpuinfo_mhz"] == 3000.0
    assert facts["caches"][0] == {
        "level": 1, "type": "Data", "size_bytes": 48 * 1024, "line_bytes": 64, "ways": 12, "shared_cpu_list": "0",
    }
    assert facts["caches"][3]["size_bytes"] == 36 << 20
    assert facts["cache_line_bytes"] == 64
    assert facts["kernel_release"] == "6.1.0-fake" and facts["os"] == "Fake Linux 1"
    assert facts["virtualization"] == "hypervisor"
    assert facts["thp_enabled"] == "madvise" and facts["thp_defrag"] == "always"
    assert facts["hugetlb_pools"] == {
        "hugepages-2048kB": {"page_bytes": 2 << 20, "nr_hugepages": 16, "free_hugepages": 12}
    }
    assert facts["pipe_max_size_bytes"] == 1 << 20 and facts["perf_event_paranoid"] == 2
    assert facts["memory_total_bytes"] == 2 << 20 and facts["memory_available_bytes"] == 1 << 20
    assert facts["hostname"] == "fakehost"
    assert machine.cache_sizes(facts) == {"L1d": 48 << 10, "L1i": 32 << 10, "L2": 2 << 20, "L3": 36 << 20}
    assert machine.cache_sizes(root=fake_root)["L3"] == 36 << 20


def test_empty_tree_gives_absent_keys_not_errors(tmp_path):
    facts = machine.collect(include_core=False, root=str(tmp_path))
    for key in ("cpu_model", "cpu_count", "caches", "kernel_release", "thp_enabled", "hugetlb_pools",
                "pipe_max_size_bytes", "memory_total_bytes", "virtualization", "hostname", "cpu_flags_simd"):
        assert key not in facts
    assert facts["python_version"] == platform.python_version()
    assert machine.cache_sizes(facts) == {}
    assert len(machine.machine_id(facts)) == 12
    assert "machine id" in machine.format_facts(facts)


def test_partial_and_malformed_files_are_skipped(tmp_path):
    write(tmp_path, "/sys/devices/system/cpu/cpu0/cache/index0/level", "1\n")
    write(tmp_path, "/sys/devices/system/cpu/cpu0/cache/index0/size", "lots\n")
    write(tmp_path, "/proc/sys/fs/pipe-max-size", "not a number\n")
    write(tmp_path, "/sys/kernel/mm/transparent_hugepage/enabled", "never\n")
    facts = machine.collect(include_core=False, root=str(tmp_path))
    assert facts["caches"] == [{"level": 1}]
    assert "pipe_max_size_bytes" not in facts
    assert facts["thp_enabled"] == "never"


@pytest.mark.skipif(not os.path.isdir("/sys/devices/system/cpu"), reason="needs Linux sysfs")
def test_facts_present_on_this_machine():
    facts = machine.collect(include_core=False)
    assert facts["cpu_count"] >= 1
    assert facts["kernel_release"] == platform.release()
    assert facts["memory_total_bytes"] > facts.get("memory_available_bytes", 0) > 0
    assert facts["python_version"] == platform.python_version()
    import numpy

    assert facts["numpy_version"] == numpy.__version__
    if os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
        sizes = machine.cache_sizes(facts)
        assert sizes["L1d"] >= 4096
        assert all(cache["line_bytes"] in (32, 64, 128, 256) for cache in facts["caches"])
    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        assert facts["thp_enabled"] in ("always", "madvise", "never")
    if os.path.exists("/proc/sys/fs/pipe-max-size"):
        assert facts["pipe_max_size_bytes"] >= 4096


def test_populate_write_support_is_a_fact_of_the_running_kernel_only(fake_root):
    facts = machine.collect(include_core=False)
    assert facts["madvise_populate_write"] is machine.populate_write_supported()
    release = tuple(int(part) for part in re.findall(r"\d+", platform.release())[:2])
    if release >= (5, 14):
        assert facts["madvise_populate_write"] is True
    assert "madvise_populate_write" not in machine.collect(include_core=False, root=fake_root)


def test_machine_id_is_stable_and_sensitive():
    facts = {"cpu_model": "A", "cpu_count": 2, "kernel_release": "6.1", "memory_total_bytes": 1 << 30}
    assert machine.machine_id(facts) == machine.machine_id(dict(reversed(list(facts.items()))))
    assert machine.machine_id(facts) != machine.machine_id({**facts, "cpu_count": 4})
    assert machine.machine_id({**facts, "hostname": "other"}) == machine.machine_id(facts)


def test_format_facts_lists_what_is_known(fake_root):
    text = machine.format_facts(machine.collect(include_core=False, root=fake_root))
    assert "Fake CPU 9000" in text
    assert "L3 Unified" in text and "36 MiB" in text
    assert "THP enabled       madvise" in text
    assert "16 reserved, 12 free" in text


def test_core_facts_are_guarded(monkeypatch):
    def refused():
        raise RuntimeError("no build information")

    monkeypatch.setattr(machine, "counters_probe", lambda: {
        "cycles": {"available": False, "reason": "ENOENT"},
        "page_faults": {"available": True, "reason": ""}})
    monkeypatch.setattr(machine, "build_info", refused)  # the fact is left out, not an error
    facts = machine.collect(include_core=True, root="/nonexistent")
    assert facts["counters"]["cycles"] == {"available": False, "reason": "ENOENT"}
    assert "core_build" not in facts
    text = machine.format_facts(facts)
    assert "page_faults" in text and "missing" in text and "cycles: ENOENT" in text


def test_core_build_reads_as_words_and_every_label_keeps_its_space():
    facts = {"cpu_model": "A", "core_build": {"cflags": "-O2", "compiler": "gcc-compatible 12.2.0",
                                              "compiler_family": "gcc"},
             "counters": {"dtlb_load_misses": {"available": True, "reason": ""}}}
    text = machine.format_facts(facts)
    assert "core compiler     gcc 12.2.0" in text.splitlines()
    assert "core cflags       -O2" in text.splitlines()
    assert "compiler_family" not in text and "gcc-compatible" not in text
    clang = {"compiler": "gcc-compatible Debian Clang 14.0.6", "compiler_family": "clang"}
    assert machine.compiler_name(clang) == "Debian Clang 14.0.6"
    assert machine.compiler_name({}) == "unknown"
    facts["core_build"]["sanitizer_runtime"] = "asan"  # a label wider than the column keeps its space
    assert "core sanitizer runtime asan" in machine.format_facts(facts).splitlines()


def test_cpus_allowed_is_this_process_affinity():
    assert machine.collect(include_core=False)["cpus_allowed"] == len(os.sched_getaffinity(0))


def test_no_module_imports_a_private_name_of_machine():
    """memlab.machine owns the machine facts: its file helpers and collectors are public, and no
    other module reaches into its private names (the machine check did, six of them)."""
    package = Path(memlab.__file__).parent
    reaching = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "memlab.machine":
                reaching += [(path.name, alias.name) for alias in node.names if alias.name.startswith("_")]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                    isinstance(node.value, ast.Name) and node.value.id == "machine" and path.stem != "machine":
                reaching.append((path.name, node.attr))
    assert reaching == []
    collectors = {name for name in machine.__all__ if name.startswith("collect_")}
    assert {"collect_cpufreq", "collect_steal", "collect_blas", "collect_thp"} <= collectors
    assert all(callable(getattr(machine, name)) for name in collectors)
