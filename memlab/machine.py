"""What machine this is: CPU, caches, kernel, memory settings, software versions.

:func:`collect` gathers the facts into one flat dict. Each source has its own
small ``collect_*`` function that adds keys to that dict; a file the machine
does not have (no sysfs cache directory, no hugetlb pools, no permission)
leaves its key absent instead of raising. Every collector takes ``root`` (the
file-system root, ``"/"`` normally) so tests can point it at a fake tree.

Example::

    >>> facts = collect(include_core=False)
    >>> print(format_facts(facts))  # doctest: +SKIP

Test hook: the environment variable ``MEMLAB_FAKE_FINGERPRINT`` (see
:data:`FAKE_FINGERPRINT_ENV`), a JSON object of facts, replaces those facts
in what :func:`collect` returns, so that tests can make one machine look like
several (the fleet tests give each Dask worker its own). It is for tests
only: a dataset measured under it records the fake facts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import hashlib
import json
import mmap
import os
import platform
import re
import shutil
import socket
import subprocess
import time
from importlib import metadata
from typing import Any, Callable, Mapping, Sequence

import numpy

from memlab._core import build_info, counters_probe, cpu_features
from memlab.conditions import STAT_FIELDS, busy_and_steal, read_cpu_times, steal_fraction
from memlab.units import format_bytes

__all__ = [
    "BLAS_VARIABLE_NAMES",
    "BLAS_VARIABLE_PREFIXES",
    "COLLECTORS",
    "FAKE_FINGERPRINT_ENV",
    "cache_sizes",
    "caches_shared_by",
    "collect",
    "compiler_name",
    "FINGERPRINT_FACTS",
    "collect_aslr",
    "collect_blas",
    "collect_boost",
    "collect_caches",
    "collect_core",
    "collect_counters",
    "collect_cpu",
    "collect_cpufreq",
    "collect_isolation",
    "collect_kernel",
    "collect_load",
    "collect_memory_settings",
    "collect_meminfo",
    "collect_perf",
    "collect_smt",
    "collect_software",
    "collect_steal",
    "collect_thp",
    "collect_topology",
    "collect_tsc",
    "collect_virtualization",
    "cpu_dirs",
    "cpu_list_count",
    "cpu_topology",
    "fake_facts",
    "fingerprint",
    "fingerprint_id",
    "format_facts",
    "hidden_cpu_features",
    "identity",
    "list_dir",
    "machine_id",
    "numa_nodes",
    "parse_cpu_list",
    "parse_size",
    "path_under",
    "populate_write_supported",
    "read_int",
    "read_text",
    "selected_choice",
    "smt_siblings",
    "spin",
]

_CPU = "/sys/devices/system/cpu"
_THP = "/sys/kernel/mm/transparent_hugepage"

SIMD_FLAGS = (
    "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "amx_tile", "asimd", "sve", "sve2",
)


# --------------------------------------------------------------------------
# file helpers: every read returns None when the fact is unavailable


def path_under(root: str, path: str) -> str:
    """``path`` (absolute, as on this machine) under the file-system root ``root``.

    >>> path_under("/tmp/fake", "/proc/stat")
    '/tmp/fake/proc/stat'
    """
    return os.path.join(root, path.lstrip("/"))


def read_text(root: str, path: str) -> str | None:
    """The text of ``path`` under ``root``, stripped; None when it cannot be read.

    >>> read_text("/", "/nonexistent/file") is None
    True
    """
    try:
        with open(path_under(root, path), encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def read_int(root: str, path: str) -> int | None:
    """The integer ``path`` under ``root`` holds; None when unreadable or not an integer."""
    text = read_text(root, path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def list_dir(root: str, path: str) -> list[str]:
    """The sorted names in directory ``path`` under ``root``; [] when it cannot be listed."""
    try:
        return sorted(os.listdir(path_under(root, path)))
    except OSError:
        return []


def selected_choice(text: str | None) -> str | None:
    """The selected value of a sysfs choice file: ``always [madvise] never`` -> ``madvise``.

    >>> selected_choice("always [madvise] never")
    'madvise'
    """
    if text is None:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text


_path, _read, _read_int, _listdir, _bracketed = path_under, read_text, read_int, list_dir, selected_choice


def parse_size(text: str) -> int | None:
    """Bytes in a sysfs/meminfo size such as ``32K``, ``1024 kB`` or ``8M``.

    >>> parse_size("32K"), parse_size("1024 kB"), parse_size("4096")
    (32768, 1048576, 4096)
    """
    match = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)[Bb]?\s*", text or "")
    if not match:
        return None
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


def _cpuinfo(root: str) -> dict[str, str]:
    """Fields of the first processor block of /proc/cpuinfo."""
    text = _read(root, "/proc/cpuinfo")
    fields: dict[str, str] = {}
    if text is None:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, sep, value = line.partition(":")
        if sep:
            fields.setdefault(name.strip(), value.strip())
    return fields


def parse_cpu_list(text: str | None) -> list[int] | None:
    """The CPUs of a sysfs list such as ``0-3,6`` (None if it does not parse).

    >>> parse_cpu_list("0-2,6")
    [0, 1, 2, 6]
    """
    if not text:
        return None
    cpus: list[int] = []
    try:
        for part in text.strip().split(","):
            low, _, high = part.partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        return None
    return cpus


def cpu_list_count(text: str | None) -> int | None:
    """Number of CPUs in a list such as ``0-3,6`` (None if it does not parse).

    >>> cpu_list_count("0-3,6")
    5
    """
    cpus = parse_cpu_list(text)
    return None if cpus is None else len(cpus)


_cpu_list_count = cpu_list_count


def cpu_dirs(root: str = "/") -> list[str]:
    """The ``cpuN`` directories of /sys/devices/system/cpu under ``root``, in CPU order."""
    names = [n for n in list_dir(root, _CPU) if re.fullmatch(r"cpu\d+", n)]
    return sorted(names, key=lambda n: int(n[3:]))


# --------------------------------------------------------------------------
# collectors: each adds the keys it can find to ``facts``


def collect_cpu(facts: dict, root: str = "/") -> None:
    """cpu_model, cpu_count, cpu_online, cpu_flags_simd, cpuinfo_mhz from /proc and /sys;
    cpu_vendor, cpu_family, cpu_model_number, cpu_stepping and cpu_microcode (the CPU's identity,
    which :mod:`memlab.machine_model` reads) from /proc/cpuinfo; for this machine also
    cpus_allowed, the CPUs this process may run on (its affinity, as taskset or a container's
    cpuset narrows it)."""
    info = _cpuinfo(root)
    model = info.get("model name") or info.get("Model") or info.get("cpu model")
    if model:
        facts["cpu_model"] = model
    if info.get("vendor_id"):
        facts["cpu_vendor"] = info["vendor_id"]
    for key, field in (("cpu_family", "cpu family"), ("cpu_model_number", "model"), ("cpu_stepping", "stepping")):
        if (info.get(field) or "").isdigit():
            facts[key] = int(info[field])
    if info.get("microcode"):
        facts["cpu_microcode"] = info["microcode"]
    online = _read(root, "/sys/devices/system/cpu/online")
    if online:
        facts["cpu_online"] = online
    present = _cpu_list_count(_read(root, "/sys/devices/system/cpu/present"))
    if present is None and root == "/":
        present = os.cpu_count()
    if present:
        facts["cpu_count"] = present
    if root == "/":
        facts["cpus_allowed"] = len(os.sched_getaffinity(0))
    flags = (info.get("flags") or info.get("Features") or "").split()
    if flags:
        facts["cpu_flags_simd"] = [flag for flag in SIMD_FLAGS if flag in flags]
    mhz = info.get("cpu MHz")
    if mhz:
        try:
            facts["cpuinfo_mhz"] = float(mhz)
        except ValueError:
            pass


def collect_tsc(facts: dict, root: str = "/") -> None:
    """tsc_mhz: the TSC frequency the kernel calibrated, from sysfs or the boot log.

    Only present when the kernel exposes it (``tsc_khz`` via sysfs on some
    kernels, or a readable ``tsc: Refined TSC clocksource calibration`` line).
    """
    khz = _read_int(root, "/sys/devices/system/cpu/cpu0/tsc_freq_khz")
    if khz:
        facts["tsc_mhz"] = khz / 1000.0
        return
    text = _read(root, "/sys/devices/system/clocksource/clocksource0/current_clocksource")
    if text:
        facts["clocksource"] = text


def collect_caches(facts: dict, root: str = "/") -> None:
    """caches: one dict per cache of CPU 0 (level, type, size_bytes, line_bytes, ways, shared_cpu_list)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    caches = []
    for entry in _listdir(root, base):
        if not entry.startswith("index"):
            continue
        directory = f"{base}/{entry}"
        cache: dict[str, Any] = {}
        level = _read_int(root, f"{directory}/level")
        if level is not None:
            cache["level"] = level
        kind = _read(root, f"{directory}/type")
        if kind:
            cache["type"] = kind
        size = parse_size(_read(root, f"{directory}/size") or "")
        if size is not None:
            cache["size_bytes"] = size
        line = _read_int(root, f"{directory}/coherency_line_size")
        if line is not None:
            cache["line_bytes"] = line
        ways = _read_int(root, f"{directory}/ways_of_associativity")
        if ways is not None:
            cache["ways"] = ways
        shared = _read(root, f"{directory}/shared_cpu_list")
        if shared:
            cache["shared_cpu_list"] = shared
        if cache:
            caches.append(cache)
    if caches:
        caches.sort(key=lambda c: (c.get("level", 0), c.get("type", "")))
        facts["caches"] = caches
        lines = {c["line_bytes"] for c in caches if "line_bytes" in c}
        if len(lines) == 1:
            facts["cache_line_bytes"] = lines.pop()


MADV_POPULATE_WRITE = 23


@functools.cache
def populate_write_supported() -> bool:
    """Whether this kernel has madvise(MADV_POPULATE_WRITE) (Linux 5.14+).

    Probed once on one anonymous page: EINVAL means the kernel does not know
    the advice.

    >>> isinstance(populate_write_supported(), bool)
    True
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    size = mmap.PAGESIZE
    address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                        mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return False
    try:
        result = libc.madvise(address, size, MADV_POPULATE_WRITE)
        error = ctypes.get_errno()
    finally:
        libc.munmap(address, size)
    return result == 0 or error not in (errno.EINVAL, errno.ENOSYS)


def collect_kernel(facts: dict, root: str = "/") -> None:
    """kernel_release and os (from /proc or, on the real root, uname);
    madvise_populate_write (whether the running kernel has it) on the real root."""
    release = _read(root, "/proc/sys/kernel/osrelease")
    if release is None and root == "/":
        release = platform.release() or None
    if release:
        facts["kernel_release"] = release
    os_name = None
    text = _read(root, "/etc/os-release")
    if text:
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.partition("=")[2].strip().strip('"')
    if os_name is None and root == "/":
        os_name = platform.system() or None
    if os_name:
        facts["os"] = os_name
    if root == "/":
        facts["madvise_populate_write"] = populate_write_supported()


def _detect_virt(option: str) -> str | None:
    try:
        result = subprocess.run(
            ["systemd-detect-virt", option], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None


def collect_virtualization(facts: dict, root: str = "/") -> None:
    """virtualization (the hypervisor, or "none") and container, if any.

    Uses ``systemd-detect-virt --vm/--container`` when present, else
    /sys/hypervisor/type, else the cpuinfo ``hypervisor`` flag.
    """
    if root == "/" and shutil.which("systemd-detect-virt"):
        container = _detect_virt("--container")
        if container and container != "none":
            facts["container"] = container
        vm = _detect_virt("--vm")
        if vm:
            facts["virtualization"] = vm
            return
    kind = _read(root, "/sys/hypervisor/type")
    if kind:
        facts["virtualization"] = kind
        return
    flags = (_cpuinfo(root).get("flags") or "").split()
    if flags:
        facts["virtualization"] = "hypervisor" if "hypervisor" in flags else "none"


def collect_memory_settings(facts: dict, root: str = "/") -> None:
    """thp_enabled, thp_defrag, hugetlb pools, pipe_max_size_bytes, perf_event_paranoid."""
    thp = "/sys/kernel/mm/transparent_hugepage"
    for name in ("enabled", "defrag"):
        value = _bracketed(_read(root, f"{thp}/{name}"))
        if value:
            facts[f"thp_{name}"] = value
    pools = {}
    for entry in _listdir(root, "/sys/kernel/mm/hugepages"):
        match = re.fullmatch(r"hugepages-(\d+)kB", entry)
        if not match:
            continue
        directory = f"/sys/kernel/mm/hugepages/{entry}"
        pool: dict[str, int] = {"page_bytes": int(match.group(1)) * 1024}
        for field in ("nr_hugepages", "free_hugepages"):
            value = _read_int(root, f"{directory}/{field}")
            if value is not None:
                pool[field] = value
        pools[entry] = pool
    if pools:
        facts["hugetlb_pools"] = pools
    for key, path in (
        ("pipe_max_size_bytes", "/proc/sys/fs/pipe-max-size"),
        ("perf_event_paranoid", "/proc/sys/kernel/perf_event_paranoid"),
    ):
        value = _read_int(root, path)
        if value is not None:
            facts[key] = value


def collect_meminfo(facts: dict, root: str = "/") -> None:
    """memory_total_bytes and memory_available_bytes from /proc/meminfo."""
    text = _read(root, "/proc/meminfo")
    if text is None:
        return
    for line in text.splitlines():
        name, _, value = line.partition(":")
        key = {"MemTotal": "memory_total_bytes", "MemAvailable": "memory_available_bytes"}.get(name)
        if key:
            size = parse_size(value)
            if size is not None:
                facts[key] = size


def collect_software(facts: dict, root: str = "/") -> None:
    """python_version, numpy_version, memlab_version (if installed), hostname."""
    facts["python_version"] = platform.python_version()
    facts["python_implementation"] = platform.python_implementation()
    facts["numpy_version"] = numpy.__version__
    try:
        facts["memlab_version"] = metadata.version("memlab")
    except Exception:  # PackageNotFoundError, or broken metadata
        pass
    hostname = _read(root, "/proc/sys/kernel/hostname")
    if hostname is None and root == "/":
        hostname = socket.gethostname() or None
    if hostname:
        facts["hostname"] = hostname


def collect_core(facts: dict) -> None:
    """counters and core_build from the C extension."""
    try:
        facts["counters"] = dict(counters_probe())
    except (AttributeError, OSError, RuntimeError):
        pass
    try:
        facts["core_build"] = dict(build_info())
    except (AttributeError, OSError, RuntimeError):
        pass
    try:
        facts["cpu_features_used"] = dict(cpu_features())
    except (AttributeError, OSError, RuntimeError):
        pass
    hidden = hidden_cpu_features()
    if hidden:
        facts["cpu_features_hidden"] = hidden


#: What MEMLAB_HIDE_CPU_FEATURES may name (csrc/core.c, ml_cpu_supports).
CPU_FEATURES = ("sse2", "avx2", "avx512f")


def hidden_cpu_features(environ: Mapping[str, str] | None = None) -> list[str]:
    """The CPU features the MEMLAB_HIDE_CPU_FEATURES test hook hides, checked.

    The C core's kernels then behave as on a CPU without them (hiding one
    hides every wider one): an AVX-512 host runs its AVX2 paths. Unknown
    names are a ValueError, not silently ignored.

    >>> hidden_cpu_features({"MEMLAB_HIDE_CPU_FEATURES": "avx512f"})
    ['avx512f']
    """
    text = (os.environ if environ is None else environ).get("MEMLAB_HIDE_CPU_FEATURES", "")
    names = [name.strip() for name in text.replace(" ", ",").split(",") if name.strip()]
    unknown = [name for name in names if name not in CPU_FEATURES]
    if unknown:
        raise ValueError(f"MEMLAB_HIDE_CPU_FEATURES names {', '.join(unknown)}; "
                         f"it may hide {', '.join(CPU_FEATURES)}")
    return names


def collect_topology(facts: dict, root: str = "/") -> None:
    """numa_nodes (node, cpus, has_memory, distances) and smt_threads_per_core, from sysfs."""
    nodes = []
    with_memory = _read(root, "/sys/devices/system/node/has_memory")
    memory_nodes = set(parse_cpu_list(with_memory) or []) if with_memory else None
    for entry in sorted(_listdir(root, "/sys/devices/system/node"), key=lambda e: (len(e), e)):
        if not re.fullmatch(r"node\d+", entry):
            continue
        node = int(entry[4:])
        distances = (_read(root, f"/sys/devices/system/node/{entry}/distance") or "").split()
        nodes.append({
            "node": node,
            "cpus": _read(root, f"/sys/devices/system/node/{entry}/cpulist") or "",
            "has_memory": node in memory_nodes if memory_nodes is not None else True,
            "distances": [int(d) for d in distances if d.isdigit()],
        })
    if nodes:
        facts["numa_nodes"] = nodes
    siblings = _read(root, "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    if siblings:
        facts["smt_threads_per_core"] = len(parse_cpu_list(siblings) or [])


# --------------------------------------------------------------------------
# collectors of the settings and conditions the machine check judges (memlab.check):
# frequency, boost, SMT, isolation, load, steal, THP, ASLR, perf, counters, BLAS

BLAS_VARIABLE_PREFIXES = ("OPENBLAS_", "GOTOBLAS_", "MKL_", "BLIS_", "NVPL_")
BLAS_VARIABLE_NAMES = ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES")
_THREADPOOLCTL_SETS = ("KMP_DUPLICATE_LIB_OK",)


def collect_cpufreq(facts: dict, root: str = "/") -> None:
    """cpufreq_governors ({"cpu0": "performance", ...}), cpufreq_driver, cpufreq_available_governors."""
    governors = {}
    for cpu in cpu_dirs(root):
        governor = _read(root, f"{_CPU}/{cpu}/cpufreq/scaling_governor")
        if governor:
            governors[cpu] = governor
            if "cpufreq_driver" not in facts:
                driver = _read(root, f"{_CPU}/{cpu}/cpufreq/scaling_driver")
                if driver:
                    facts["cpufreq_driver"] = driver
                available = _read(root, f"{_CPU}/{cpu}/cpufreq/scaling_available_governors")
                if available:
                    facts["cpufreq_available_governors"] = available.split()
    if governors:
        facts["cpufreq_governors"] = governors


def collect_boost(facts: dict, root: str = "/") -> None:
    """boost_enabled (bool) and boost_control (the sysfs file that says so).

    intel_pstate exposes ``intel_pstate/no_turbo`` (1: turbo off); acpi-cpufreq
    and amd-pstate expose ``cpufreq/boost`` (1: boost on).
    """
    no_turbo = _read_int(root, f"{_CPU}/intel_pstate/no_turbo")
    if no_turbo is not None:
        facts["boost_enabled"] = no_turbo == 0
        facts["boost_control"] = f"{_CPU}/intel_pstate/no_turbo"
        return
    boost = _read_int(root, f"{_CPU}/cpufreq/boost")
    if boost is not None:
        facts["boost_enabled"] = boost == 1
        facts["boost_control"] = f"{_CPU}/cpufreq/boost"


def collect_smt(facts: dict, root: str = "/") -> None:
    """smt_control (on, off, forceoff, notsupported, notimplemented) and smt_active (bool)."""
    control = _read(root, f"{_CPU}/smt/control")
    if control:
        facts["smt_control"] = control
    active = _read_int(root, f"{_CPU}/smt/active")
    if active is not None:
        facts["smt_active"] = active == 1


def _cmdline_options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for word in text.split():
        if word == "--":
            break  # what follows belongs to init
        name, _, value = word.partition("=")
        options.setdefault(name, value)
    return options


def collect_isolation(facts: dict, root: str = "/") -> None:
    """isolated_cpus and nohz_full_cpus (from sysfs) and the kernel command line's
    isolcpus, nohz_full, rcu_nocbs (as cmdline_<name>)."""
    for key, name in (("isolated_cpus", "isolated"), ("nohz_full_cpus", "nohz_full")):
        value = _read(root, f"{_CPU}/{name}")
        if value is not None and value != "(null)":
            facts[key] = value
    cmdline = _read(root, "/proc/cmdline")
    if cmdline is None:
        return
    options = _cmdline_options(cmdline)
    for name in ("isolcpus", "nohz_full", "rcu_nocbs"):
        if name in options:
            facts[f"cmdline_{name}"] = options[name]


def collect_load(facts: dict, root: str = "/") -> None:
    """load_1min, load_5min, load_15min, runnable_tasks, total_tasks (/proc/loadavg), cpus_online."""
    text = _read(root, "/proc/loadavg")
    if text:
        parts = text.split()
        try:
            facts["load_1min"], facts["load_5min"], facts["load_15min"] = map(float, parts[:3])
            running, _, total = parts[3].partition("/")
            facts["runnable_tasks"], facts["total_tasks"] = int(running), int(total)
        except (ValueError, IndexError):
            pass
    online = _cpu_list_count(_read(root, f"{_CPU}/online"))
    if online:
        facts["cpus_online"] = online


def spin(seconds: float) -> None:
    """Keep this CPU busy for ``seconds``, so that steal (which needs a runnable
    virtual CPU) can show."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def collect_steal(
    facts: dict,
    root: str = "/",
    *,
    window_seconds: float = 0.25,
    wait: Callable[[float], None] = spin,
    since: tuple[float, Mapping[str, Sequence[int]]] | None = None,
) -> None:
    """steal_fraction over a busy window of ``window_seconds`` (all CPUs),
    steal_window_seconds, and steal_total_fraction (since boot).

    The default ``wait`` spins on this CPU: an idle guest shows no steal
    however busy the host is, because steal only accrues while a virtual
    CPU wants to run. ``since`` = (time.monotonic(), read_cpu_times()) taken
    earlier makes the window the time since then, without waiting (a
    sweep's end check covers the whole sweep this way).
    """
    before = read_cpu_times(root)
    if "cpu" not in before:
        return
    busy, steal = busy_and_steal((0,) * len(STAT_FIELDS), before["cpu"])
    if busy > 0:
        facts["steal_total_fraction"] = round(steal / busy, 6)
    if since is not None:
        started, before = since
        window_seconds = round(time.monotonic() - started, 3)
    elif window_seconds <= 0:
        return
    else:
        wait(window_seconds)
    value = steal_fraction(before, read_cpu_times(root))
    if value is not None:
        facts["steal_fraction"] = value
        facts["steal_window_seconds"] = window_seconds


def collect_thp(facts: dict, root: str = "/") -> None:
    """thp_enabled, thp_defrag, thp_shmem_enabled, and khugepaged_<setting>
    (defrag, pages_to_scan, scan_sleep_millisecs, max_ptes_none)."""
    for name in ("enabled", "defrag", "shmem_enabled"):
        value = _bracketed(_read(root, f"{_THP}/{name}"))
        if value:
            facts[f"thp_{name}"] = value
    for name in ("defrag", "pages_to_scan", "scan_sleep_millisecs", "max_ptes_none"):
        value = _read_int(root, f"{_THP}/khugepaged/{name}")
        if value is not None:
            facts[f"khugepaged_{name}"] = value


def collect_aslr(facts: dict, root: str = "/") -> None:
    """aslr: /proc/sys/kernel/randomize_va_space (0 off, 1 stack/mmap, 2 also the heap)."""
    value = _read_int(root, "/proc/sys/kernel/randomize_va_space")
    if value is not None:
        facts["aslr"] = value


def collect_perf(facts: dict, root: str = "/") -> None:
    """perf_event_paranoid, perf_event_max_sample_rate, perf_cpu_time_max_percent, nmi_watchdog."""
    for key in ("perf_event_paranoid", "perf_event_max_sample_rate",
                "perf_cpu_time_max_percent", "nmi_watchdog"):
        value = _read_int(root, f"/proc/sys/kernel/{key}")
        if value is not None:
            facts[key] = value


def collect_counters(facts: dict) -> None:
    """counters: {event: {"available": bool, "reason": str, ...}} from the C core's probe."""
    try:
        facts["counters"] = {name: dict(info) for name, info in counters_probe().items()}
    except (AttributeError, OSError, RuntimeError) as error:
        facts["counters_error"] = f"{type(error).__name__}: {error}"


def collect_blas(facts: dict, environ: Mapping[str, str] | None = None) -> None:
    """blas_libraries (threadpoolctl's view of the loaded BLAS) and blas_environment.

    blas_environment records every OPENBLAS_*, GOTOBLAS_*, MKL_*, BLIS_*,
    NVPL_* and OMP_* thread variable as set; memlab never changes them.
    Without threadpoolctl, ``blas_error`` says so.
    """
    environ = os.environ if environ is None else environ
    variables = {
        name: value for name, value in environ.items()
        if name.startswith(BLAS_VARIABLE_PREFIXES) or name in BLAS_VARIABLE_NAMES
    }
    facts["blas_environment"] = dict(sorted(variables.items()))
    untouched = {name: os.environ.get(name) for name in _THREADPOOLCTL_SETS}
    try:
        import threadpoolctl
    except ImportError:
        facts["blas_error"] = "threadpoolctl is not installed"
        return
    finally:
        # threadpoolctl sets KMP_DUPLICATE_LIB_OK when imported; the check
        # leaves the environment as it found it.
        for name, value in untouched.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    libraries = []
    for info in threadpoolctl.threadpool_info():
        if info.get("user_api") != "blas":
            continue
        libraries.append({
            key: info[key] for key in
            ("internal_api", "version", "architecture", "num_threads", "threading_layer", "filepath")
            if info.get(key) is not None
        })
    facts["blas_libraries"] = libraries


COLLECTORS: tuple[Callable[..., None], ...] = (
    collect_cpu,
    collect_topology,
    collect_tsc,
    collect_caches,
    collect_kernel,
    collect_virtualization,
    collect_memory_settings,
    collect_meminfo,
    collect_software,
)


# --------------------------------------------------------------------------
# public API


def collect(include_core: bool = True, root: str = "/") -> dict:
    """All machine facts as one dict; a fact the machine does not expose is absent.

    With ``include_core``, adds ``counters``
    ({event: {"available": bool, "reason": str}}) and ``core_build``.

    >>> facts = collect(include_core=False)
    >>> "python_version" in facts
    True
    """
    facts: dict[str, Any] = {}
    for collector in COLLECTORS:
        collector(facts, root=root)
    if include_core:
        collect_core(facts)
    if root == "/":
        facts.update(fake_facts())
    return facts


FAKE_FINGERPRINT_ENV = "MEMLAB_FAKE_FINGERPRINT"
"""Test hook: a JSON object of machine facts (``{"hostname": "node-a", "cpu_model":
"Fake CPU A"}``) that :func:`collect` reports instead of the real ones. The fleet
tests give each Dask worker of one machine a different fingerprint with it."""


def fake_facts(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The facts the test hook :data:`FAKE_FINGERPRINT_ENV` fakes ({} when unset or empty).

    A value that is not a JSON object is a ValueError naming the variable.

    >>> fake_facts({"MEMLAB_FAKE_FINGERPRINT": '{"cpu_model": "Fake CPU"}'})
    {'cpu_model': 'Fake CPU'}
    """
    text = (os.environ if environ is None else environ).get(FAKE_FINGERPRINT_ENV, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{FAKE_FINGERPRINT_ENV}={text!r} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{FAKE_FINGERPRINT_ENV}={text!r} must be a JSON object of machine facts")
    return value


def numa_nodes(facts: dict | None = None, root: str = "/") -> list[dict[str, Any]]:
    """NUMA nodes with their CPUs (a list), memory flag and distances; one node 0 if sysfs has none.

    >>> numa_nodes({"numa_nodes": [{"node": 0, "cpus": "0-1", "has_memory": True, "distances": [10]}]})
    [{'node': 0, 'cpus': [0, 1], 'has_memory': True, 'distances': [10]}]
    """
    if facts is None or "numa_nodes" not in facts:
        facts = {}
        collect_topology(facts, root=root)
    nodes = facts.get("numa_nodes") or [
        {"node": 0, "cpus": f"0-{(os.cpu_count() or 1) - 1}", "has_memory": True, "distances": [10]}]
    return [dict(node, cpus=parse_cpu_list(node["cpus"]) or []) for node in nodes]


def smt_siblings(cpu: int, root: str = "/") -> list[int]:
    """The hardware threads sharing ``cpu``'s core (itself included), from sysfs.

    >>> 0 in smt_siblings(0)
    True
    """
    for entry in cpu_topology(root):
        if entry["cpu"] == cpu:
            return list(entry["siblings"])
    return [cpu]


def cache_sizes(facts: dict | None = None, root: str = "/") -> dict[str, int]:
    """Cache sizes in bytes by name: ``{"L1d": ..., "L1i": ..., "L2": ..., "L3": ...}``.

    >>> cache_sizes({"caches": [{"level": 1, "type": "Data", "size_bytes": 32768}]})
    {'L1d': 32768}
    """
    if facts is None:
        facts = {}
        collect_caches(facts, root=root)
    sizes: dict[str, int] = {}
    suffix = {"Data": "d", "Instruction": "i"}
    for cache in facts.get("caches", []):
        if "level" not in cache or "size_bytes" not in cache:
            continue
        name = f"L{cache['level']}{suffix.get(cache.get('type', ''), '')}"
        sizes.setdefault(name, cache["size_bytes"])
    return sizes


# --------------------------------------------------------------------------
# topology: which CPUs share a core, a package, a cache (memlab.placement chooses from it)

def cpu_topology(root: str = "/") -> list[dict[str, Any]]:
    """One dict per online CPU: ``cpu``, ``package``, ``core_id`` and ``siblings``
    (the CPUs of its core, itself included, as a tuple), from sysfs.

    A CPU whose topology files are missing counts as a core and a package of
    its own only when no CPU has them (package 0, core = the CPU).

    >>> [c["cpu"] for c in cpu_topology()] == sorted(c["cpu"] for c in cpu_topology())
    True
    """
    online = parse_cpu_list(_read(root, "/sys/devices/system/cpu/online"))
    if online is None:
        online = list(range(os.cpu_count() or 1)) if root == "/" else []
    topology = []
    for cpu in online:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        package = _read_int(root, f"{base}/physical_package_id")
        core = _read_int(root, f"{base}/core_id")
        siblings = parse_cpu_list(_read(root, f"{base}/core_cpus_list")
                                  or _read(root, f"{base}/thread_siblings_list"))
        topology.append({
            "cpu": cpu,
            "package": package if package is not None and package >= 0 else 0,
            "core_id": core if core is not None else cpu,
            "siblings": tuple(siblings) if siblings else (cpu,),
        })
    return topology


def caches_shared_by(cpus: list[int], root: str = "/") -> list[dict[str, Any]]:
    """The caches (level, type, size_bytes) every CPU of ``cpus`` shares, smallest level first.

    >>> caches_shared_by([])
    []
    """
    if not cpus:
        return []
    wanted = set(cpus)
    base = f"/sys/devices/system/cpu/cpu{cpus[0]}/cache"
    shared = []
    for entry in sorted(_listdir(root, base)):
        if not entry.startswith("index"):
            continue
        members = parse_cpu_list(_read(root, f"{base}/{entry}/shared_cpu_list"))
        size = parse_size(_read(root, f"{base}/{entry}/size") or "")
        level = _read_int(root, f"{base}/{entry}/level")
        kind = _read(root, f"{base}/{entry}/type")
        if members is None or size is None or level is None or kind == "Instruction":
            continue
        if wanted <= set(members):
            shared.append({"level": level, "type": kind, "size_bytes": size})
    return sorted(shared, key=lambda c: c["level"])


def machine_id(facts: dict) -> str:
    """A short stable id (12 hex digits) of cpu_model, cpu_count, kernel_release and memory_total_bytes.

    >>> len(machine_id({"cpu_model": "Example CPU", "cpu_count": 2}))
    12
    """
    parts = [str(facts.get(key, "")) for key in ("cpu_model", "cpu_count", "kernel_release", "memory_total_bytes")]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:12]


FINGERPRINT_FACTS = ("cpu_model", "cpu_count", "kernel_release", "memory_total_GiB")
"""The stable facts that say which machine measured: they change when the
hardware, the VM size or the kernel change, not from one run to the next
(unlike the measured clock, the free memory or the load)."""


def fingerprint(facts: dict) -> dict[str, Any]:
    """The machine's stable identity out of its facts: CPU model, CPU count, kernel, memory.

    Memory is ``memory_total_GiB`` rounded to a whole GiB, so that the few MiB
    a kernel reserves differently between boots do not make a new machine.
    Facts the machine does not expose are absent. Baselines record this
    dict; a comparison against a baseline with another fingerprint warns.

    >>> fingerprint({"cpu_model": "Example CPU", "cpu_count": 2, "kernel_release": "6.1.0",
    ...              "memory_total_bytes": 25_100_000_000, "cpuinfo_mhz": 2100.0})
    {'cpu_model': 'Example CPU', 'cpu_count': 2, 'kernel_release': '6.1.0', 'memory_total_GiB': 23}
    """
    result: dict[str, Any] = {}
    for key in ("cpu_model", "cpu_count", "kernel_release"):
        if facts.get(key) not in (None, ""):
            result[key] = facts[key]
    if facts.get("memory_total_GiB") is not None:
        result["memory_total_GiB"] = facts["memory_total_GiB"]
    elif isinstance(facts.get("memory_total_bytes"), (int, float)):
        result["memory_total_GiB"] = int(round(facts["memory_total_bytes"] / 2**30))
    return result


def fingerprint_id(print_: Mapping[str, Any]) -> str:
    """A short id (12 hex digits) of a fingerprint (:func:`fingerprint`): equal fingerprints, equal ids.

    >>> fingerprint_id({"cpu_model": "Example CPU", "cpu_count": 2})
    'c4e459e1b89d'
    """
    text = json.dumps({key: print_[key] for key in sorted(print_)}, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def identity(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Which machine measured, as rows and metadata record it: the host's name, its
    fingerprint (:func:`fingerprint`) and the fingerprint's id.

    Two hosts of one kind (a cluster's identical nodes) share a fingerprint
    and differ by ``host``; one host after a kernel upgrade keeps its ``host``
    and gets a new fingerprint.

    >>> identity({"hostname": "node-a", "cpu_model": "Example CPU", "cpu_count": 2})
    {'host': 'node-a', 'fingerprint_id': 'c4e459e1b89d', 'fingerprint': {'cpu_model': 'Example CPU', 'cpu_count': 2}}
    """
    print_ = fingerprint(dict(facts))
    return {"host": str(facts.get("hostname") or ""), "fingerprint_id": fingerprint_id(print_),
            "fingerprint": print_}


def format_facts(facts: dict) -> str:
    """Human-readable text of the facts, for ``memlab info``.

    >>> print(format_facts({"cpu_model": "Example CPU"}).splitlines()[1])
    cpu               Example CPU
    """
    lines = [f"{'machine id':<18}{machine_id(facts)}"]

    def add(label: str, value: Any) -> None:
        lines.append(f"{label:<17} {value}")  # a label of 18 or more still gets its space

    if "cpu_model" in facts:
        add("cpu", facts["cpu_model"])
    if "cpu_vendor" in facts:
        add("cpu identity", f"{facts['cpu_vendor']} family {facts.get('cpu_family', '?')} model "
            f"{facts.get('cpu_model_number', '?')} stepping {facts.get('cpu_stepping', '?')} microcode "
            f"{facts.get('cpu_microcode', '?')}")
    if "container" in facts:
        add("container", facts["container"])
    if "cpu_count" in facts:
        add("cpus", f"{facts['cpu_count']} (online {facts.get('cpu_online', '?')})")
    if "cpu_flags_simd" in facts:
        add("simd", " ".join(facts["cpu_flags_simd"]) or "-")
    if "smt_threads_per_core" in facts:
        add("smt", f"{facts['smt_threads_per_core']} thread(s) per core")
    for node in facts.get("numa_nodes", []):
        memory = "memory" if node.get("has_memory") else "no memory"
        add(f"numa node {node['node']}", f"cpus {node.get('cpus') or '-'}, {memory}, "
            f"distances {' '.join(map(str, node.get('distances', []))) or '?'}")
    for key, label in (("cpuinfo_mhz", "cpuinfo MHz"), ("tsc_mhz", "TSC MHz"), ("clocksource", "clocksource")):
        if key in facts:
            add(label, facts[key])
    for cache in facts.get("caches", []):
        name = f"L{cache.get('level', '?')} {cache.get('type', '')}".strip()
        detail = [format_bytes(cache["size_bytes"])] if "size_bytes" in cache else []
        if "ways" in cache:
            detail.append(f"{cache['ways']}-way")
        if "line_bytes" in cache:
            detail.append(f"{cache['line_bytes']} B lines")
        if "shared_cpu_list" in cache:
            detail.append(f"cpus {cache['shared_cpu_list']}")
        add(name, ", ".join(detail))
    for key, label in (
        ("kernel_release", "kernel"),
        ("os", "os"),
        ("virtualization", "virtualization"),
        ("thp_enabled", "THP enabled"),
        ("thp_defrag", "THP defrag"),
    ):
        if key in facts:
            add(label, facts[key])
    for name, pool in facts.get("hugetlb_pools", {}).items():
        add(f"hugetlb {format_bytes(pool['page_bytes'])}",
            f"{pool.get('nr_hugepages', '?')} reserved, {pool.get('free_hugepages', '?')} free")
    for key, label in (("pipe_max_size_bytes", "pipe max size"),
                       ("memory_total_bytes", "memory total"),
                       ("memory_available_bytes", "memory available")):
        if key in facts:
            add(label, format_bytes(facts[key]))
    for key, label in (
        ("perf_event_paranoid", "perf paranoid"),
        ("python_version", "python"),
        ("numpy_version", "numpy"),
        ("memlab_version", "memlab"),
        ("hostname", "hostname"),
    ):
        if key in facts:
            add(label, facts[key])
    counters = facts.get("counters")
    if counters:
        available = sorted(name for name, info in counters.items() if info.get("available"))
        add("counters", " ".join(available) or "none")
        for name, info in sorted(counters.items()):
            if not info.get("available"):
                add("  missing", f"{name}: {info.get('reason', '')}")
    clock = facts.get("core_clock")
    if clock and "core_GHz" in clock:
        add("core clock", f"{clock['core_GHz']:.3f} GHz measured by a dependent add chain "
            f"(imul cross-check {clock.get('imul_GHz', float('nan')):.3f} GHz)")
    build = dict(facts.get("core_build") or {})
    if build:
        add("core compiler", compiler_name(build))
        build.pop("compiler", None), build.pop("compiler_family", None)
        for key, value in sorted(build.items()):
            add(f"core {key.replace('_', ' ')}", value)
    return "\n".join(lines)


def compiler_name(build: Mapping[str, Any]) -> str:
    """The compiler that built the C core, in words, from ``memlab._core.build_info()``.

    >>> compiler_name({"compiler": "gcc-compatible 12.2.0", "compiler_family": "gcc"})
    'gcc 12.2.0'
    >>> compiler_name({"compiler": "gcc-compatible Debian Clang 14.0.6", "compiler_family": "clang"})
    'Debian Clang 14.0.6'
    """
    version = str(build.get("compiler") or "unknown").removeprefix("gcc-compatible ")
    family = str(build.get("compiler_family") or "")
    if not family or family == "other" or family.lower() in version.lower():
        return version
    return f"{family} {version}"
