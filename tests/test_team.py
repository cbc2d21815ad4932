"""The one thread team (csrc/team.c): one policy for every family that uses it.

Each case is a family whose samples run two threads of a team (bandwidth's
workers, loaded's load threads beside the chaser, the chase's second walker,
the chase's helper, share's incrementers, core_to_core's two sides). From
outside, for every one: a sample joins every thread it started, Ctrl-C stops
the sample and joins them too, a thread that cannot start leaves none
behind, and the three metrics the team writes keep their one definition
(``ml_team_metrics``, held to its twin ``memlab.twins.team_metrics``).
"""

from __future__ import annotations

import array
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import interrupt_measure, memlab_thread_count
from memlab import _core, chase, twins

CPUS = sorted(os.sched_getaffinity(0))


def chase_config(**params) -> dict:
    """The chase's C config with the CPUs memlab.placement chose (the C family only pins to them)."""
    return dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 16, **params)))


#: family -> (kernel, config, the metric prefix of its team, the name a thread that cannot start is given)
CASES = {
    "bandwidth": ("bandwidth", lambda: dict(
        working_set_bytes=1 << 16, op="read", width="auto", stores="normal", threads=2,
        cpus=array.array("i", [-1, -1]), shared=True, pages="4k", strict_pages=False,
        background_op="none", background_working_set_bytes=4096, check=False), "", "worker 1 of 2 (unpinned): "),
    "loaded": ("loaded", lambda: dict(
        working_set_bytes=1 << 16, pages="4k", load_threads=2, load_op="read", load_working_set_bytes=1 << 16,
        delay_ns=0, load_chunk_bytes=0, cpus=array.array("i", [-1, -1, -1])), "load_", "worker 1 of 2"),
    "chase_threads": ("chase", lambda: chase_config(threads=2), "", None),
    "chase_helper": ("chase", lambda: chase_config(helper_thread=True), None, None),
    "share": ("share", lambda: dict(threads=2, disp_longs=8, atomic=True, atomic_op="lock_add", increments=0,
                                    cpus=array.array("i", [-1, -1])), "", "thread 1 of 2"),
    "core_to_core": ("core_to_core", lambda: dict(cpu_a=CPUS[0], cpu_b=CPUS[-1], method="cas", lines=4), "",
                     f"the cpu_a thread on CPU {CPUS[0]}: " if CPUS else "the cpu_a thread"),
}


def tasks() -> int:
    """memlab's own threads (named by the core): a library's thread ending mid-test is not counted."""
    return memlab_thread_count()


def needs_cpus(case: str) -> None:
    if case in ("chase_threads", "chase_helper", "core_to_core") and len(CPUS) < 2:
        pytest.skip(f"{case} needs two CPUs; this process may use {len(CPUS)}")


@pytest.mark.parametrize("case", CASES)
def test_a_sample_joins_every_thread_and_reports_the_team_metrics(case):
    needs_cpus(case)
    family, config, prefix, _ = CASES[case]
    before = tasks()
    with _core.Kernel(family, config()) as kernel:
        sample = kernel.measure(target_ns=20_000_000, counters=False)
        assert tasks() == before, "a thread of the team outlived its sample"
    if prefix is None:
        return  # the helper does not measure: no team metrics
    metrics = sample["metrics"]
    mean, lowest, overlap = (metrics[prefix + name] for name in
                             ("cpu_fraction", "lowest_cpu_fraction", "overlap_fraction"))
    # the definition's order: every thread at once <= the least-run thread <= the mean thread
    assert 0.0 <= overlap <= lowest + 1e-9 <= mean + 2e-9
    assert 0.0 < mean <= 1.02  # CPU time over wall time of the same stretch (clock granularity)


@pytest.mark.ctrl_c
@pytest.mark.parametrize("case", CASES)
def test_ctrl_c_stops_the_team_and_joins_it(case):
    needs_cpus(case)
    family, config, _, _ = CASES[case]
    config = config()
    if family == "share":
        config["increments"] = 1 << 40  # runs until stopped
    before = tasks()
    kernel = _core.Kernel(family, config)
    interrupt_measure(kernel)  # KeyboardInterrupt well before the sample's 30 s deadline
    assert tasks() == before


NPROC = textwrap.dedent("""
    import array, json, os, resource, sys
    from memlab import _core
    family = sys.argv[1]
    config = {key: array.array("i", value) if isinstance(value, list) else value
              for key, value in json.loads(sys.argv[2]).items()}
    kernel = _core.Kernel(family, config)
    if os.getuid() == 0:  # root ignores RLIMIT_NPROC: become nobody first
        os.setgid(65534)
        os.setuid(65534)
    uid = os.getuid()
    mine = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/status") as status:
                    mine += any(l.startswith("Uid:") and int(l.split()[1]) == uid for l in status)
        except OSError:
            pass
    # room for one more thread: the team's first starts, its second cannot
    resource.setrlimit(resource.RLIMIT_NPROC, (mine + 1, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
    print("threads before:", len(os.listdir("/proc/self/task")))
    try:
        kernel.measure(target_ns=10**8, counters=False)
        print("measured")
    except (MemoryError, OSError) as error:
        print("refused:", error)
    # a thread just joined leaves /proc/self/task a moment after pthread_join returns
    import time
    deadline = time.monotonic() + 2
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    print("threads after:", len(os.listdir("/proc/self/task")))
    kernel.close()
""")


@pytest.mark.parametrize("case", [case for case, (_, _, _, name) in CASES.items() if name])
def test_a_thread_that_cannot_start_leaves_no_thread_behind(case):
    needs_cpus(case)
    family, config, _, name = CASES[case]
    config = {key: (list(value) if isinstance(value, array.array) else value) for key, value in config().items()}
    result = subprocess.run([sys.executable, "-c", NPROC, family, json.dumps(config)], capture_output=True,
                            text=True, timeout=120)
    if "Operation not permitted" in result.stderr:
        pytest.skip("cannot become an unprivileged user here to make thread creation fail")
    assert result.returncode == 0, result.stderr
    if "measured" in result.stdout:
        pytest.skip("the limit on threads still left room for the team here")
    assert f"refused: cannot start {name}" in result.stdout
    counts = dict(re.findall(r"threads (before|after): (\d+)", result.stdout))
    assert counts["before"] == counts["after"], result.stdout


# ---- the one definition: C against its twin -----------------------------------------------

RUN = st.tuples(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9)).map(
    lambda t: (t[0], t[0] + t[1], t[2]))


def c_team_metrics(times: list[tuple[int, int, int]]) -> dict[str, float]:
    words = numpy.array([value for run in times for value in run], dtype=numpy.uint64)
    with _core.Kernel("team_metrics", {"times": words}) as kernel:
        metrics = kernel.measure(target_ns=1, counters=False)["metrics"]
    return {name: metrics[name] for name in ("cpu_fraction", "lowest_cpu_fraction", "overlap_fraction")}


@settings(max_examples=200, deadline=None)
@given(st.lists(RUN, min_size=1, max_size=8))
def test_the_team_metrics_are_their_twin(times):
    ours, twin = c_team_metrics(times), twins.team_metrics(times)
    for name, value in twin.items():
        assert math.isclose(ours[name], value, rel_tol=1e-12, abs_tol=1e-12), (name, ours, twin)


def test_the_definition_on_runs_worked_by_hand():
    # two threads over 0..100 ns, on their CPUs 90 and 80 ns: away 10 + 20 of the span at worst
    assert c_team_metrics([(0, 100, 90), (0, 100, 80)]) == pytest.approx(
        {"cpu_fraction": 0.85, "lowest_cpu_fraction": 0.8, "overlap_fraction": 0.7})
    # the second starts late: it was away for its first half, though on its CPU all its run
    assert c_team_metrics([(0, 100, 100), (50, 100, 50)])["overlap_fraction"] == pytest.approx(0.5)
    # taking turns on one CPU: never together
    assert c_team_metrics([(0, 100, 50), (0, 100, 50)])["overlap_fraction"] == 0.0
    # one thread: its CPU fraction is all three
    assert c_team_metrics([(0, 100, 40)]) == pytest.approx(
        {"cpu_fraction": 0.4, "lowest_cpu_fraction": 0.4, "overlap_fraction": 0.4})


def test_times_that_are_not_triples_are_refused():
    with pytest.raises(ValueError, match="times holds 4 numbers: three"):
        _core.Kernel("team_metrics", {"times": numpy.zeros(4, dtype=numpy.uint64)})
