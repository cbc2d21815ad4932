"""Is this machine fit to measure? One object per setting: its facts, its verdict, its fix.

:func:`check` reads what makes benchmark numbers move on Linux (frequency
governor and boost, SMT, isolated CPUs, load, steal time, transparent huge
pages and khugepaged, ASLR, perf counters, free memory, the BLAS in use)
and returns a :class:`CheckReport`: the raw facts (a flat dict, stored in
every dataset's metadata) and one :class:`Finding` per subject with a
verdict (``ok``, ``warning``, ``info``) and, where one exists, the command
that fixes it. ``memlab check`` prints it. The subjects are those of
``pyperf system show`` plus what a memory benchmark adds (THP, steal time,
free memory against the largest working set, BLAS kernel overrides).

Each subject is one :class:`Setting` of :data:`SETTINGS` (pyperf's
``Operation`` shape): the machine collectors that read its facts
(:mod:`memlab.machine` owns every ``collect_*``), its judge, and, for the
three settings memlab can tune and undo exactly (performance governor,
boost off, the lowest perf sample rate), the files :func:`tune` writes and
the values :func:`reset` may write back. :func:`collect`, :func:`judge`,
:func:`tune` and :func:`reset` walk that list. Tune and reset need root.

The collectors take a root path, so tests run the check on a fake /proc and
/sys tree. The thresholds a single measurement is judged by live below
this module, in :mod:`memlab.conditions` (re-exported here): a measurement
does not import the tuner.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from memlab.conditions import (
    ON_CPU_MIN_FRACTION,
    STEAL_MAX_FRACTION,
    conditions_warning,
    read_cpu_times,
    steal_fraction,
)
from memlab.files import atomic_write, kind_of_file
from memlab.machine import (
    collect_aslr,
    collect_blas,
    collect_boost,
    collect_counters,
    collect_cpu,
    collect_cpufreq,
    collect_isolation,
    collect_kernel,
    collect_load,
    collect_meminfo,
    collect_perf,
    collect_smt,
    collect_steal,
    collect_thp,
    cpu_dirs,
    path_under,
    read_text,
    selected_choice,
    spin,
)
from memlab.units import format_bytes as _format_bytes

__all__ = [
    "SETTINGS",
    "CheckReport",
    "Finding",
    "ON_CPU_MIN_FRACTION",
    "STEAL_MAX_FRACTION",
    "Setting",
    "TUNABLE_SETTINGS",
    "TuneChange",
    "check",
    "collect",
    "collect_aslr",
    "collect_blas",
    "collect_boost",
    "collect_cpufreq",
    "collect_isolation",
    "collect_load",
    "collect_perf",
    "collect_smt",
    "collect_steal",
    "collect_thp",
    "conditions_warning",
    "judge",
    "largest_bytes",
    "missing_settings",
    "read_cpu_times",
    "reset",
    "steal_fraction",
    "tune",
]

OK, WARNING, INFO = "ok", "warning", "info"

MEMORY_HEADROOM = 0.8
"""A working set above this fraction of the available memory warns: reclaim
or swapping would be timed along with the memory."""

BLAS_KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "GOTOBLAS_CORETYPE")
"""Environment variables that override the kernel or blocking OpenBLAS picks for the CPU."""

_CPU = "/sys/devices/system/cpu"


# --------------------------------------------------------------------------
# verdicts


@dataclass(frozen=True)
class Finding:
    """One subject of the check: its value, a verdict, why, and how to fix it.

    ``verdict`` is ``ok`` (good for measuring), ``warning`` (moves numbers:
    fix it or expect noise) or ``info`` (worth knowing, or not exposed here);
    ``fix`` is a shell command, or "" when there is none.
    """

    name: str
    title: str
    value: str
    verdict: str
    detail: str
    fix: str = ""


def _finding(name: str, title: str, value: Any, verdict: str, detail: str, fix: str = "") -> Finding:
    return Finding(name, title, str(value), verdict, detail, fix)


def _judge_governor(facts: Mapping[str, Any]) -> Finding:
    governors = facts.get("cpufreq_governors")
    title = "CPU frequency governor"
    if not governors:
        return _finding("cpu_governor", title, "not exposed", INFO,
                        "no cpufreq interface: firmware or the hypervisor sets the clock; "
                        "memlab can neither see nor set the governor")
    kinds = sorted(set(governors.values()))
    value = ", ".join(f"{kind} ({sum(1 for g in governors.values() if g == kind)} CPUs)" for kind in kinds)
    if kinds == ["performance"]:
        return _finding("cpu_governor", title, value, OK, "every CPU runs at its highest clock")
    return _finding(
        "cpu_governor", title, value, WARNING,
        "the clock follows the load: the first samples of a point run slower until it ramps up",
        "sudo memlab check --tune   # or: echo performance | sudo tee "
        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
    )


def _judge_boost(facts: Mapping[str, Any]) -> Finding:
    title = "turbo / boost"
    if "boost_enabled" not in facts:
        return _finding("boost", title, "not exposed", INFO,
                        "no intel_pstate/no_turbo or cpufreq/boost file: boost is not controllable here")
    control = facts.get("boost_control", "")
    if not facts["boost_enabled"]:
        return _finding("boost", title, "off", OK, f"the clock does not boost ({control})")
    off = "1" if control.endswith("no_turbo") else "0"
    return _finding(
        "boost", title, "on", WARNING,
        "the boosted clock depends on temperature and on how many cores are busy, "
        "so it differs between runs",
        f"sudo memlab check --tune   # or: echo {off} | sudo tee {control}",
    )


#: The kernel's words in /sys/devices/system/cpu/smt/control that are not words to a reader.
_SMT_CONTROL_WORDS = {
    "notsupported": "not supported by the CPU (or not exposed by the hypervisor)",
    "notimplemented": "not implemented by this kernel's architecture",
    "forceoff": "off (forced at boot)",
}


def _judge_smt(facts: Mapping[str, Any]) -> Finding:
    title = "SMT (hyper-threading)"
    control = facts.get("smt_control")
    if control is None:
        return _finding("smt", title, "not exposed", INFO, "no /sys/devices/system/cpu/smt")
    shown = _SMT_CONTROL_WORDS.get(control, control)
    if control in ("notsupported", "notimplemented") or not facts.get("smt_active", False):
        return _finding("smt", title, f"{shown}, inactive", OK,
                        "no sibling hardware thread shares a core with the measurement")
    return _finding(
        "smt", title, f"{shown}, active", INFO,
        "a sibling hardware thread shares the core's caches and execution units: pin the "
        "measurement (--cpu) to a CPU whose sibling (topology/thread_siblings_list) is idle, "
        "or switch SMT off",
        "echo off | sudo tee /sys/devices/system/cpu/smt/control",
    )


def _judge_isolation(facts: Mapping[str, Any]) -> Finding:
    title = "isolated CPUs"
    parts = [f"{name}={facts[f'cmdline_{name}']}" for name in ("isolcpus", "nohz_full", "rcu_nocbs")
             if f"cmdline_{name}" in facts]
    isolated = facts.get("isolated_cpus") or ""
    value = ", ".join(([f"isolated {isolated}"] if isolated else []) + parts) or "none"
    if isolated:
        return _finding("isolated_cpus", title, value, OK,
                        f"the scheduler keeps other tasks off CPUs {isolated}: measure there "
                        f"with --cpu")
    online = facts.get("cpus_online") or facts.get("cpu_count") or 1
    cpu = max(0, int(online) - 1)
    return _finding(
        "isolated_cpus", title, value, INFO,
        "no CPU is kept free of other tasks, timer ticks and RCU callbacks",
        f"add isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu} to the kernel command line, "
        f"reboot, and measure with --cpu {cpu}",
    )


def _judge_load(facts: Mapping[str, Any]) -> Finding:
    title = "load"
    if "load_1min" not in facts:
        return _finding("load", title, "not exposed", INFO, "no /proc/loadavg")
    cpus = int(facts.get("cpus_online") or facts.get("cpu_count") or 1)
    load = facts["load_1min"]
    runnable = facts.get("runnable_tasks")
    others = None if runnable is None else max(0, runnable - 1)  # minus the reader itself
    value = f"{load:.2f} {facts.get('load_5min', 0):.2f} {facts.get('load_15min', 0):.2f} on {cpus} CPUs"
    if others is not None:
        value += f", {others} other runnable"
    limit = max(cpus - 1.0, 0.5)
    if load > limit or (others is not None and others >= cpus):
        return _finding("load", title, value, WARNING,
                        f"the 1-minute load {load:.2f} leaves no CPU free for the measurement "
                        f"(limit {limit:g}): other tasks will take turns on its CPU",
                        "stop other jobs, or wait until `cat /proc/loadavg` falls")
    return _finding("load", title, value, OK, f"at most {limit:g} CPUs busy: one is free to measure on")


def _judge_steal(facts: Mapping[str, Any]) -> Finding:
    title = "steal time"
    if "steal_fraction" not in facts:
        total = facts.get("steal_total_fraction")
        value = "not measured" + (f" ({total:.2%} since boot)" if total is not None else "")
        return _finding("steal", title, value, INFO,
                        "no steal window was measured (or it saw too few busy clock ticks)")
    steal = facts["steal_fraction"]
    value = f"{steal:.2%} over {facts.get('steal_window_seconds', 0):g} s"
    if "steal_total_fraction" in facts:
        value += f" ({facts['steal_total_fraction']:.2%} since boot)"
    if steal > STEAL_MAX_FRACTION:
        return _finding("steal", title, value, WARNING,
                        f"the hypervisor ran something else for {steal:.1%} of the time this "
                        f"guest's CPUs wanted to run (above {STEAL_MAX_FRACTION:.0%}): samples "
                        f"include time this machine was not running; no command in the guest "
                        f"fixes it (a quieter host or dedicated vCPUs do)")
    return _finding("steal", title, value, OK,
                    f"at most {STEAL_MAX_FRACTION:.0%} of the busy CPU time went to other guests")


def _judge_thp(facts: Mapping[str, Any]) -> Finding:
    title = "transparent huge pages"
    enabled = facts.get("thp_enabled")
    if enabled is None:
        return _finding("thp", title, "not exposed", INFO, "no /sys/kernel/mm/transparent_hugepage")
    value = f"enabled={enabled} defrag={facts.get('thp_defrag', '?')}"
    fix = "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled"
    if enabled == "madvise":
        return _finding("thp", title, value, OK,
                        "huge pages only where asked for: 4k points get 4 KiB pages, "
                        "pages=thp points get huge pages")
    if enabled == "always":
        return _finding("thp", title, value, WARNING,
                        "any large enough anonymous mapping may get huge pages, so a pages=4k "
                        "point may not run on 4 KiB pages", fix)
    return _finding("thp", title, value, WARNING,
                    f"enabled={enabled}: pages=thp points cannot get huge pages", fix)


def _judge_khugepaged(facts: Mapping[str, Any]) -> Finding:
    title = "khugepaged"
    if "khugepaged_defrag" not in facts:
        return _finding("khugepaged", title, "not exposed", INFO,
                        "no /sys/kernel/mm/transparent_hugepage/khugepaged")
    value = (f"defrag={facts['khugepaged_defrag']} pages_to_scan={facts.get('khugepaged_pages_to_scan', '?')} "
             f"scan_sleep_millisecs={facts.get('khugepaged_scan_sleep_millisecs', '?')}")
    if facts["khugepaged_defrag"] and facts.get("thp_enabled") in ("always", "madvise"):
        return _finding(
            "khugepaged", title, value, INFO,
            "the background thread may collapse 4 KiB pages of THP-eligible regions into huge "
            "pages during a run, changing the TLB cost between samples",
            "echo 0 | sudo tee /sys/kernel/mm/transparent_hugepage/khugepaged/defrag",
        )
    return _finding("khugepaged", title, value, OK, "khugepaged does not collapse pages behind a run")


def _judge_aslr(facts: Mapping[str, Any]) -> Finding:
    title = "ASLR"
    aslr = facts.get("aslr")
    if aslr is None:
        return _finding("aslr", title, "not exposed", INFO, "no /proc/sys/kernel/randomize_va_space")
    if aslr == 0:
        return _finding("aslr", title, "off (0)", OK, "the same addresses in every run")
    return _finding(
        "aslr", title, f"on ({aslr})", INFO,
        "addresses change from run to run, so alignment and cache-set effects vary between "
        "runs and land in the spread of a comparison",
        "setarch -R memlab ...   # one run; or: echo 0 | sudo tee /proc/sys/kernel/randomize_va_space",
    )


def _judge_counters(facts: Mapping[str, Any]) -> Finding:
    title = "perf counters"
    paranoid = facts.get("perf_event_paranoid")
    counters = facts.get("counters")
    prefix = f"paranoid={paranoid}" if paranoid is not None else "paranoid=?"
    fix = "echo 1 | sudo tee /proc/sys/kernel/perf_event_paranoid"
    if not counters:
        error = facts.get("counters_error", "the counters were not probed")
        if paranoid is not None and paranoid > 2 and facts.get("euid", 1) != 0:
            return _finding("counters", title, prefix, WARNING,
                            f"perf_event_paranoid={paranoid} forbids counting for unprivileged "
                            f"users; {error}", fix)
        return _finding("counters", title, prefix, INFO, error)
    opened = sorted(name for name, info in counters.items() if info.get("available"))
    missing = {name: info.get("reason", "") for name, info in counters.items()
               if not info.get("available")}
    value = f"{prefix}; open: {' '.join(opened) or 'none'}"
    if not missing:
        return _finding("counters", title, value, OK, "every counter memlab uses opens")
    reasons = sorted(set(missing.values()))
    denied = [r for r in reasons if "EACCES" in r or "EPERM" in r or "permission" in r.lower()]
    detail = f"missing {', '.join(sorted(missing))}: {'; '.join(reasons)}; rows record them in counters_missing"
    if denied:
        return _finding("counters", title, value, WARNING, detail, fix)
    return _finding("counters", title, value, INFO, detail)


def _judge_sample_rate(facts: Mapping[str, Any]) -> Finding:
    title = "perf sample rate"
    rate = facts.get("perf_event_max_sample_rate")
    if rate is None:
        return _finding("perf_sample_rate", title, "not exposed", INFO,
                        "no /proc/sys/kernel/perf_event_max_sample_rate")
    value = f"{rate} samples/s max"
    if facts.get("nmi_watchdog"):
        value += ", NMI watchdog on"
    if rate <= 1:
        return _finding("perf_sample_rate", title, value, OK,
                        "sampling profilers (perf record) cannot interrupt a measurement often")
    return _finding("perf_sample_rate", title, value, INFO,
                    "a sampling profiler running alongside may interrupt measurements this "
                    "often; memlab itself only counts, it never samples",
                    "sudo memlab check --tune   # sets kernel.perf_event_max_sample_rate=1")


def _judge_memory(facts: Mapping[str, Any], planned_bytes: int | None) -> Finding:
    title = "free memory"
    available = facts.get("memory_available_bytes")
    total = facts.get("memory_total_bytes")
    if available is None:
        return _finding("memory", title, "not exposed", INFO, "no MemAvailable in /proc/meminfo")
    value = f"{_format_bytes(available)} available"
    if total:
        value += f" of {_format_bytes(total)}"
    if not planned_bytes:
        return _finding("memory", title, value, INFO, "no planned working set to compare with")
    value += f"; largest planned working set {_format_bytes(planned_bytes)}"
    if planned_bytes > available * MEMORY_HEADROOM:
        return _finding(
            "memory", title, value, WARNING,
            f"the largest working set needs more than {MEMORY_HEADROOM:.0%} of the available "
            f"memory: reclaim or swapping would be timed with it, or the run is killed",
            "free memory (stop other jobs, drop caches: echo 3 | sudo tee /proc/sys/vm/drop_caches) "
            "or plan smaller working sets",
        )
    return _finding("memory", title, value, OK, "the largest working set fits with room to spare")


def _judge_blas(facts: Mapping[str, Any]) -> Finding:
    title = "BLAS"
    environment = facts.get("blas_environment") or {}
    overrides = {k: v for k, v in environment.items() if k in BLAS_KERNEL_VARIABLES}
    env_words = " ".join(f"{k}={v}" for k, v in environment.items())
    if "blas_error" in facts:
        value = "unknown" + (f"; {env_words}" if env_words else "")
        verdict = WARNING if overrides else INFO
        return _finding("blas", title, value, verdict,
                        f"{facts['blas_error']}: the BLAS library and kernel in use are unknown",
                        "pip install threadpoolctl   # or: pip install 'memlab[check]'")
    libraries = facts.get("blas_libraries")
    if libraries is None:
        return _finding("blas", title, "not checked", INFO, "the BLAS was not inspected")
    described = []
    for lib in libraries:
        text = f"{lib.get('internal_api', '?')} {lib.get('version', '')}".strip()
        extra = [f"{lib['architecture']} kernel"] if lib.get("architecture") else []
        if "num_threads" in lib:
            extra.append(f"{lib['num_threads']} threads")
        described.append(text + (f" ({', '.join(extra)})" if extra else ""))
    value = "; ".join(described) or "none loaded"
    if env_words:
        value += f"; environment {env_words}"
    if overrides:
        names = " ".join(f"-u {name}" for name in overrides)
        return _finding(
            "blas", title, value, WARNING,
            f"{', '.join(f'{k}={v}' for k, v in overrides.items())} overrides the kernel OpenBLAS "
            f"would pick for this CPU: BLAS numbers (the matrix family's reference line) "
            f"describe that kernel, not the CPU's best. memlab records it and never changes it",
            f"env {names} memlab ...   # run without the override",
        )
    return _finding("blas", title, value, OK if libraries else INFO,
                    "no environment variable overrides the BLAS kernel choice")


# --------------------------------------------------------------------------
# the settings: what each reads, how it is judged, how it is tuned


#: The governors Linux has, for a CPU that does not list its own (scaling_available_governors).
_KERNEL_GOVERNORS = ("performance", "powersave", "userspace", "ondemand", "conservative", "schedutil")


def _governor_targets(root: str) -> list[tuple[str, str]]:
    return [(f"{_CPU}/{cpu}/cpufreq/scaling_governor", "performance") for cpu in cpu_dirs(root)
            if os.path.exists(path_under(root, f"{_CPU}/{cpu}/cpufreq/scaling_governor"))]


def _governor_values(root: str, file: str) -> tuple[str, ...]:
    available = read_text(root, file.removesuffix("scaling_governor") + "scaling_available_governors")
    return tuple(available.split()) if available else _KERNEL_GOVERNORS


def _boost_targets(root: str) -> list[tuple[str, str]]:
    for path, value in ((f"{_CPU}/intel_pstate/no_turbo", "1"), (f"{_CPU}/cpufreq/boost", "0")):
        if os.path.exists(path_under(root, path)):
            return [(path, value)]
    return []


def _sample_rate_targets(root: str) -> list[tuple[str, str]]:
    path = "/proc/sys/kernel/perf_event_max_sample_rate"
    return [(path, "1")] if os.path.exists(path_under(root, path)) else []


@dataclass(frozen=True)
class Setting:
    """One subject of the machine check (pyperf's ``Operation``): the machine collectors that read
    its facts, its judge, and for a setting memlab tunes, how.

    ``judge(facts, planned_bytes)`` gives the :class:`Finding` named ``name``.
    A tunable setting (``tune_name``, what ``--tune-setting`` takes) has
    ``targets(root)``, the (file, value) pairs :func:`tune` writes that exist
    under ``root``, ``missing``, why it cannot be tuned where there are none,
    and ``values(root, file)``, the values tune could have read from ``file``
    (what :func:`reset` may write back; None: any positive int).
    """

    name: str
    collectors: tuple[Callable[..., None], ...]
    judge: Callable[[Mapping[str, Any], int | None], Finding]
    tune_name: str = ""
    targets: Callable[[str], list[tuple[str, str]]] | None = None
    missing: str = ""
    values: Callable[[str, str], tuple[str, ...] | None] | None = None

    def collect(self, facts: dict, root: str = "/") -> None:
        """Add the facts this setting is judged on to ``facts`` (its collectors, in order)."""
        for collector in self.collectors:
            collector(facts, root=root)

    @property
    def tunable(self) -> bool:
        return bool(self.tune_name)


def _facts_only(judge: Callable[[Mapping[str, Any]], Finding]) -> Callable[[Mapping[str, Any], int | None], Finding]:
    return lambda facts, planned_bytes: judge(facts)


SETTINGS: tuple[Setting, ...] = (
    Setting("cpu_governor", (collect_cpufreq,), _facts_only(_judge_governor), "governor", _governor_targets,
            "no cpufreq scaling_governor under /sys/devices/system/cpu/cpu*/cpufreq", _governor_values),
    Setting("boost", (collect_boost,), _facts_only(_judge_boost), "boost", _boost_targets,
            "neither intel_pstate/no_turbo nor cpufreq/boost under /sys/devices/system/cpu",
            lambda root, file: ("0", "1")),
    Setting("smt", (collect_smt,), _facts_only(_judge_smt)),
    Setting("isolated_cpus", (collect_isolation, collect_load), _facts_only(_judge_isolation)),
    Setting("load", (collect_load,), _facts_only(_judge_load)),
    Setting("steal", (), _facts_only(_judge_steal)),  # collect_steal takes its window: collect() runs it
    Setting("thp", (collect_thp,), _facts_only(_judge_thp)),
    Setting("khugepaged", (collect_thp,), _facts_only(_judge_khugepaged)),
    Setting("aslr", (collect_aslr,), _facts_only(_judge_aslr)),
    Setting("counters", (collect_perf,), _facts_only(_judge_counters)),  # and the C core's probe
    Setting("perf_sample_rate", (collect_perf,), _facts_only(_judge_sample_rate), "perf_sample_rate",
            _sample_rate_targets, "no /proc/sys/kernel/perf_event_max_sample_rate", lambda root, file: None),
    Setting("memory", (collect_meminfo,), _judge_memory),
    Setting("blas", (), _facts_only(_judge_blas)),  # threadpoolctl looks at this process: collect() asks
)
"""Every subject of the machine check, in the order ``memlab check`` prints them."""


def judge(facts: Mapping[str, Any], *, planned_bytes: int | None = None) -> list[Finding]:
    """One :class:`Finding` per setting of :data:`SETTINGS`, from facts as :func:`collect` returns them.

    ``planned_bytes``: the largest working set about to be measured (compared
    with the available memory).

    >>> [f.verdict for f in judge({"thp_enabled": "always", "aslr": 0})][6:9]
    ['warning', 'info', 'ok']
    """
    return [setting.judge(facts, planned_bytes) for setting in SETTINGS]


def collect(
    root: str = "/",
    *,
    steal_window_seconds: float = 0.25,
    counters: bool = True,
    blas: bool = True,
    environ: Mapping[str, str] | None = None,
    wait: Callable[[float], None] = spin,
    steal_since: tuple[float, Mapping[str, Sequence[int]]] | None = None,
) -> dict[str, Any]:
    """Every fact the settings' judges look at, as one flat dict (absent: not exposed here): the
    CPU and kernel (the report's first line), then the collectors of each :data:`SETTINGS` entry.

    Steal is measured over a busy window of ``steal_window_seconds`` (or since
    ``steal_since``); ``counters`` probes the perf events through the C core and
    ``blas`` asks threadpoolctl; both look at this process, so they are skipped
    for a fake ``root``.

    >>> facts = collect(steal_window_seconds=0, counters=False, blas=False)
    >>> "load_1min" in facts
    True
    """
    facts: dict[str, Any] = {}
    collectors: list[Callable[..., None]] = [collect_cpu, collect_kernel]
    for setting in SETTINGS:
        collectors += [c for c in setting.collectors if c not in collectors]
    for collector in collectors:
        collector(facts, root=root)
    collect_steal(facts, root, window_seconds=steal_window_seconds, wait=wait, since=steal_since)
    if root == "/":
        facts["euid"] = os.geteuid()
        if counters:
            collect_counters(facts)
        if blas:
            collect_blas(facts, environ)
    elif blas and environ is not None:
        collect_blas(facts, environ)
    return facts


@dataclass
class CheckReport:
    """The facts :func:`check` collected and the findings it made of them."""

    facts: dict[str, Any]
    findings: list[Finding]
    planned_bytes: int | None = None
    checked_unix: float = field(default_factory=time.time)

    @property
    def warnings(self) -> list[Finding]:
        """The findings whose verdict is ``warning``."""
        return [f for f in self.findings if f.verdict == WARNING]

    def __getitem__(self, name: str) -> Finding:
        for finding in self.findings:
            if finding.name == name:
                return finding
        raise KeyError(f"no finding named {name!r}; known: {', '.join(f.name for f in self.findings)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: ``checked`` (ISO time), ``facts``, ``findings``, ``warnings``."""
        return {
            "checked": datetime.datetime.fromtimestamp(self.checked_unix, datetime.timezone.utc)
            .isoformat(timespec="seconds"),
            "planned_bytes": self.planned_bytes,
            "warnings": [f.name for f in self.warnings],
            "findings": [asdict(f) for f in self.findings],
            "facts": self.facts,
        }

    def format(self) -> str:
        """The report as text: one block per finding, warnings first in the summary line."""
        cpu = self.facts.get("cpu_model", "unknown CPU")
        cpus = self.facts.get("cpus_online") or self.facts.get("cpu_count") or "?"
        kernel = self.facts.get("kernel_release", "?")
        count = len(self.warnings)
        lines = [
            f"memlab check: {cpu}, {cpus} CPUs, kernel {kernel}",
            f"{count} warning{'s' if count != 1 else ''}"
            + (f" ({', '.join(f.name for f in self.warnings)})" if count else "")
            + f", {sum(f.verdict == OK for f in self.findings)} ok, "
            f"{sum(f.verdict == INFO for f in self.findings)} info",
            "",
        ]
        for finding in self.findings:
            label = finding.verdict.upper() if finding.verdict == WARNING else finding.verdict
            lines.append(f"{label:<8} {finding.title:<24} {finding.value}")
            lines.append(f"{'':<8} {'':<24} {finding.detail}")
            if finding.fix:
                lines.append(f"{'':<8} {'':<24} fix: {finding.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def check(
    root: str = "/",
    *,
    planned_bytes: int | None = None,
    steal_window_seconds: float = 0.25,
    counters: bool = True,
    blas: bool = True,
    environ: Mapping[str, str] | None = None,
    wait: Callable[[float], None] = spin,
    steal_since: tuple[float, Mapping[str, Sequence[int]]] | None = None,
) -> CheckReport:
    """Is this machine fit to measure? Collect the facts and judge each subject.

    ``planned_bytes``: the largest working set about to be measured, in
    bytes (compared with the available memory). ``steal_window_seconds``:
    how long to keep a CPU busy while watching /proc/stat for steal time
    (0: not measured); ``steal_since`` = (time.monotonic(), read_cpu_times())
    measures it since then instead, without waiting. Returns a
    :class:`CheckReport`; ``print(report)`` gives what ``memlab check``
    prints, ``report.to_dict()`` what a dataset's metadata stores.

    >>> report = check(steal_window_seconds=0.05)
    >>> {f.verdict for f in report.findings} <= {"ok", "warning", "info"}
    True
    """
    if planned_bytes is not None and (isinstance(planned_bytes, bool) or planned_bytes < 0):
        raise ValueError(f"planned_bytes={planned_bytes!r} must be a non-negative number of bytes")
    if not 0 <= steal_window_seconds <= 60:
        raise ValueError(f"steal_window_seconds={steal_window_seconds} is outside [0, 60]")
    facts = collect(root, steal_window_seconds=steal_window_seconds, counters=counters,
                    blas=blas, environ=environ, wait=wait, steal_since=steal_since)
    return CheckReport(facts, judge(facts, planned_bytes=planned_bytes), planned_bytes)


def largest_bytes(points: Iterable[Mapping[str, Any]]) -> int | None:
    """The largest working set of a list of parameter points, in bytes.

    Looks at the parameters named ``bytes`` or ending in ``_bytes``
    (``working_set_bytes``, ``buffer_bytes``); None when no point has one.

    >>> largest_bytes([{"working_set_bytes": 4096}, {"working_set_bytes": 1 << 30, "npad": 7}])
    1073741824
    >>> largest_bytes([{"npad": 7}]) is None
    True
    """
    sizes = [
        int(value) for point in points for name, value in point.items()
        if (name == "bytes" or name.endswith("_bytes"))
        and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    ]
    return max(sizes) if sizes else None


# --------------------------------------------------------------------------
# tune and reset


TUNABLE_SETTINGS = tuple(setting.tune_name for setting in SETTINGS if setting.tunable)
"""What :func:`tune` changes: the CPU frequency governor (performance), boost
(off) and kernel.perf_event_max_sample_rate (1)."""

DEFAULT_STATE_PATH = "/run/memlab/tuned.json"
"""Where :func:`tune` keeps the values it replaced. /run is emptied at boot,
exactly when the kernel forgets the tuned values too."""


@dataclass(frozen=True)
class TuneChange:
    """One file :func:`tune` or :func:`reset` handled: ``before`` -> ``after``,
    or ``skipped`` with the reason."""

    setting: str
    path: str
    before: str | None
    after: str | None
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.setting:<18} {self.path}: skipped ({self.skipped})"
        return f"{self.setting:<18} {self.path}: {self.before} -> {self.after}"


def _tunable(name: str) -> Setting:
    for setting in SETTINGS:
        if setting.tune_name == name:
            return setting
    raise ValueError(f"setting={name!r} is not one of {', '.join(TUNABLE_SETTINGS)}")


def _targets(name: str, root: str) -> list[tuple[str, str]]:
    """(path, value to write) pairs of one tunable setting that exist under ``root``."""
    return _tunable(name).targets(root)


def missing_settings(root: str = "/") -> dict[str, str]:
    """{setting: why it cannot be tuned here} for the settings this machine does not expose.

    >>> sorted(missing_settings("/nonexistent"))
    ['boost', 'governor', 'perf_sample_rate']
    """
    return {s.tune_name: s.missing for s in SETTINGS if s.tunable and not s.targets(root)}


def _state_file(root: str, state_path: str | None) -> str:
    return state_path if state_path is not None else path_under(root, DEFAULT_STATE_PATH)


#: What a saved setting may be: a governor's name or a number (no path, newline or NUL).
_SAVED_VALUE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: A tune state holds a few lines per CPU: far below this, whatever the machine.
STATE_MAX_BYTES = 1 << 20


def _values_there(root: str, file: str) -> tuple[str, ...] | None:
    """The values tune could have read from tunable ``file`` (what reset may write back there);
    None for a file whose values are any positive int (the sample rate)."""
    for setting in SETTINGS:
        if setting.tunable and any(target == file for target, _ in setting.targets(root)):
            return setting.values(root, file)
    return ()


def _restorable(root: str, file: str, value: str) -> str | None:
    """None if ``value`` is one tune could have read from ``file``, else which values it could."""
    allowed = _values_there(root, file)
    if allowed is None:  # kernel.perf_event_max_sample_rate: an int above 0
        if re.fullmatch(r"[1-9][0-9]{0,9}", value) and int(value) < 1 << 31:
            return None
        return "a positive int below 2^31"
    return None if value in allowed else "one of " + ", ".join(allowed)


def _read_state(path: str) -> str | None:
    """The text of the tune state at ``path`` (None: there is none); ValueError for anything but a
    regular file of at most STATE_MAX_BYTES, found without blocking (a FIFO) or reading without
    end (/dev/zero)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ValueError(f"tune state file {path} cannot be read: {error.strerror or error}; "
                         "check it, then delete it") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"tune state file {path} is {kind_of_file(info.st_mode)}, not a file memlab "
                             "check --tune wrote; give the path of the state file")
        if info.st_size > STATE_MAX_BYTES:
            raise ValueError(f"tune state file {path} is {info.st_size / (1 << 20):.1f} MiB; a tune state is "
                             f"at most {STATE_MAX_BYTES >> 20} MiB: not one memlab check --tune wrote")
        data = b""
        while len(data) <= STATE_MAX_BYTES:
            chunk = os.read(fd, STATE_MAX_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as error:
        raise ValueError(f"tune state file {path} cannot be read: {error.strerror or error}; "
                         "check it, then delete it") from None
    finally:
        os.close(fd)
    if len(data) > STATE_MAX_BYTES:
        raise ValueError(f"tune state file {path} grew past {STATE_MAX_BYTES >> 20} MiB while it was read: "
                         "not one memlab check --tune wrote")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"tune state file {path} cannot be read: not UTF-8 text ({error.reason}); "
                         "check it, then delete it") from None


def _load_state(path: str, root: str) -> dict[str, Any]:
    """The tune state at ``path``; ValueError if it is not one :func:`tune` wrote for this machine.

    ``reset`` writes what the file says as root, so every entry must name a
    file :func:`tune` itself would write (a tunable setting of ``root``) and
    hold a plain value: a state file changed by someone else cannot make a
    root ``memlab check --reset`` write elsewhere or write anything else.
    """
    text = _read_state(path)
    if text is None:
        return {"saved": {}}
    try:
        state = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"tune state file {path} cannot be read: {error}; "
                         f"check it, then delete it") from None
    if not isinstance(state, dict) or not isinstance(state.get("saved"), dict):
        raise ValueError(f"tune state file {path} is not a memlab tune state; check it, then delete it")
    tunable = {file for setting in TUNABLE_SETTINGS for file, _ in _targets(setting, root)}
    for file, value in state["saved"].items():
        if file not in tunable:
            raise ValueError(f"tune state file {path} names {file[:200]!r}, which is not a setting memlab "
                             f"tunes on this machine; check the file, then delete it")
        if not isinstance(value, str) or not _SAVED_VALUE.fullmatch(value):
            raise ValueError(f"tune state file {path} holds {json.dumps(value)[:80]} for {file}, not a "
                             f"setting's value; check the file, then delete it")
        allowed = _restorable(root, file, value)
        if allowed:
            raise ValueError(f"tune state file {path} holds {json.dumps(value)} for {file}, which tune never "
                             f"reads there ({allowed}); check the file, then delete it")
    return state


def _write_state(path: str, state: Mapping[str, Any]) -> None:
    """Write the state atomically (an exclusive, unpredictable temporary file), readable by root only."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    atomic_write(path, json.dumps(state, indent=2, sort_keys=True), mode=0o600)


def _write_setting(root: str, path: str, value: str) -> None:
    with open(path_under(root, path), "w", encoding="utf-8") as handle:
        handle.write(value + "\n")


def _require_root(root: str, action: str) -> None:
    if root == "/" and os.geteuid() != 0:
        raise PermissionError(f"memlab check --{action} needs root: run it with sudo")


def tune(
    root: str = "/",
    *,
    settings: Iterable[str] = TUNABLE_SETTINGS,
    state_path: str | None = None,
) -> list[TuneChange]:
    """Set the performance governor, boost off and perf_event_max_sample_rate=1; save the old values.

    The values replaced are saved in ``state_path`` (default
    ``/run/memlab/tuned.json`` under ``root``) before anything is written;
    tuning twice keeps the values from before the first tune, so
    :func:`reset` always restores the machine's own. A setting the machine
    does not expose is skipped with the reason. Needs root on the real
    root (PermissionError otherwise); a write the kernel refuses raises
    OSError naming the file, after the values written so far are saved.

    Example (shell): ``sudo memlab check --tune``; later ``sudo memlab check --reset``.
    """
    _require_root(root, "tune")
    settings = list(settings)
    for setting in settings:
        if setting not in TUNABLE_SETTINGS:
            raise ValueError(f"setting={setting!r} is not one of {', '.join(TUNABLE_SETTINGS)}")
    path = _state_file(root, state_path)
    state = _load_state(path, root)
    saved: dict[str, str] = state["saved"]
    plan: list[tuple[str, str, str, str]] = []
    changes: list[TuneChange] = []
    missing = missing_settings(root)
    for setting in settings:
        if setting in missing:
            changes.append(TuneChange(setting, "", None, None, skipped=missing[setting]))
            continue
        for file, value in _targets(setting, root):
            current = read_text(root, file)
            if current is None:
                changes.append(TuneChange(setting, file, None, None, skipped="unreadable"))
                continue
            current = selected_choice(current) or current
            if file not in saved and (not _SAVED_VALUE.fullmatch(current) or _restorable(root, file, current)):
                changes.append(TuneChange(setting, file, None, None,
                                          skipped=f"its value {current[:40]!r} is not one reset could restore"))
                continue
            saved.setdefault(file, current)
            plan.append((setting, file, current, value))
    state.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    state["root"] = root
    if plan:
        _write_state(path, state)
    for setting, file, current, value in plan:
        try:
            _write_setting(root, file, value)
        except OSError as error:
            raise OSError(error.errno, f"writing {value} to {file} failed: {error.strerror or error}; "
                          f"the values replaced so far are in {path} (memlab check --reset)") from error
        changes.append(TuneChange(setting, file, current, value))
    return changes


def reset(root: str = "/", *, state_path: str | None = None) -> list[TuneChange]:
    """Write back every value :func:`tune` saved, then delete the state file.

    Returns the changes made (empty when nothing was tuned). A value the
    kernel refuses stays in the state file, so a second reset can retry.

    Example (shell): ``sudo memlab check --reset``
    """
    _require_root(root, "reset")
    path = _state_file(root, state_path)
    state = _load_state(path, root)
    saved: dict[str, str] = state["saved"]
    changes = []
    failures = []
    for file, value in list(saved.items()):
        setting = next((s for s in TUNABLE_SETTINGS if any(t[0] == file for t in _targets(s, root))), "setting")
        current = read_text(root, file)
        try:
            _write_setting(root, file, value)
        except OSError as error:
            failures.append(f"{file}: {error.strerror or error}")
            continue
        del saved[file]
        changes.append(TuneChange(setting, file, selected_choice(current) if current else current, value))
    if saved:
        _write_state(path, state)
        raise OSError(f"could not restore {'; '.join(failures)}; the values are still in {path}")
    if os.path.exists(path):
        os.remove(path)
    return changes
