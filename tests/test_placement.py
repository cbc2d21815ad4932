"""memlab.placement: the one chooser of CPUs for a family's threads, its facts, and ``cpu=``.

The topologies are fake sysfs trees, so that every placement is checked on
any host; what this host can give is checked only where it has it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memlab import bandwidth as bw
from memlab import core_to_core, loaded, pipe, placement
from memlab.family import Family
from memlab.placement import CpuNotApplicable, choose

CPUS = sorted(os.sched_getaffinity(0))
FAST = dict(repeat=1, warmup=0, target_seconds=0.005)


def make_sysfs(root: Path, cores: list[tuple[int, int, list[int]]]) -> None:
    """A fake /sys CPU topology: (package, core_id, cpus of the core) per core."""
    cpus = sorted(cpu for _, _, members in cores for cpu in members)
    base = root / "sys/devices/system/cpu"
    base.mkdir(parents=True)
    (base / "online").write_text(f"0-{max(cpus)}\n")
    for package, core, members in cores:
        for cpu in members:
            topology = base / f"cpu{cpu}/topology"
            topology.mkdir(parents=True)
            (topology / "physical_package_id").write_text(f"{package}\n")
            (topology / "core_id").write_text(f"{core}\n")
            (topology / "thread_siblings_list").write_text(",".join(map(str, members)) + "\n")


def test_placements_on_a_two_socket_smt_machine(tmp_path):
    # two packages of two cores with two threads each: CPUs 0,4 / 1,5 / 2,6 / 3,7
    make_sysfs(tmp_path, [(0, 0, [0, 4]), (0, 1, [1, 5]), (1, 0, [2, 6]), (1, 1, [3, 7])])
    every = set(range(8))
    place = lambda p, n, allowed=every: choose(p, n, allowed=allowed, root=str(tmp_path))  # noqa: E731
    assert place("smt", 2) == [0, 4]
    assert place("cores", 2) == [0, 1]            # one package while it has enough cores
    assert place("cores", 3) == [0, 1, 2]         # then the next
    assert place("sockets", 2) == [0, 2]
    assert place("unpinned", 3) == [-1, -1, -1]
    assert place("smt", 2, {1, 2, 5}) == [1, 5]
    with pytest.raises(ValueError, match="placement='smt' needs 3 SMT siblings of one core: the most"):
        place("smt", 3)
    with pytest.raises(ValueError, match="placement='sockets' needs 3 packages"):
        place("sockets", 3)
    with pytest.raises(ValueError, match="placement='cores' needs 3 distinct cores: .* are on 2"):
        place("cores", 3, {0, 4, 1})
    with pytest.raises(ValueError, match="placement='smt' needs 2 SMT siblings .* the most usable"):
        place("smt", 2, {0, 1, 2})
    with pytest.raises(ValueError, match="this process may use only 2 CPUs"):
        place("cores", 3, {0, 1})


def test_spread_takes_a_core_each_first_then_siblings_and_beside_prefers_the_sibling(tmp_path):
    # the chase's walking threads and share's threads: as many as there are CPUs, cores first
    make_sysfs(tmp_path, [(0, 0, [0, 4]), (0, 1, [1, 5]), (1, 0, [2, 6]), (1, 1, [3, 7])])
    root, every = str(tmp_path), set(range(8))
    assert choose("spread", 4, allowed=every, root=root) == [0, 1, 2, 3]
    assert choose("spread", 6, allowed=every, root=root) == [0, 1, 2, 3, 4, 5]
    assert placement.spread(3, first=5, allowed=every, root=root) == [5, 0, 2]  # 5's core is used: its sibling last
    assert placement.spread(5, first=5, allowed=every, root=root) == [5, 0, 2, 3, 1]
    assert placement.spread(2, allowed={4, 5}, root=root) == [4, 5]
    with pytest.raises(ValueError, match="3 threads on distinct CPUs: this process may use only 2"):
        placement.spread(3, allowed={0, 4}, root=root)
    with pytest.raises(ValueError, match="first=9 is not among the CPUs"):
        placement.spread(1, first=9, allowed=every, root=root)
    # the helper beside the walking thread: its SMT sibling, else another CPU
    assert placement.beside(1, allowed=every, root=root) == 5
    assert placement.beside(1, allowed={1, 2, 3}, root=root) == 2
    with pytest.raises(ValueError, match="a thread beside CPU 1 needs a second CPU"):
        placement.beside(1, allowed={1}, root=root)


def test_placements_on_a_machine_without_smt(tmp_path):
    make_sysfs(tmp_path, [(0, 0, [0]), (0, 1, [1])])
    with pytest.raises(ValueError, match="this machine has no SMT"):
        choose("smt", 2, allowed={0, 1}, root=str(tmp_path))
    assert choose("smt", 1, allowed={0, 1}, root=str(tmp_path)) == [0]


def test_one_cpu_puts_every_thread_on_the_first_allowed_cpu():
    assert choose("one_cpu", 3, allowed={5, 2, 7}) == [2, 2, 2]
    assert choose("one_cpu", 4) == [CPUS[0]] * 4  # more threads than CPUs: they take turns


def test_an_explicit_list_is_checked_against_the_allowed_cpus():
    assert choose([3, 1], 2, allowed={1, 3}) == [3, 1]
    with pytest.raises(ValueError, match=r"placement=\[3\] names 1 CPUs for 2 threads"):
        choose([3], 2, allowed={3})
    with pytest.raises(ValueError, match=r"placement=4 is not among the CPUs this process may use \[1,3\]"):
        choose([1, 4], 2, allowed={1, 3})
    with pytest.raises(ValueError, match="placement='everywhere' is not one of 'cores', 'smt'"):
        choose("everywhere", 1)
    with pytest.raises(ValueError, match="count=0 must be a positive number"):
        choose("cores", 0)


def test_pipes_two_cpus_is_smt_where_a_core_has_two_siblings_else_cores(tmp_path):
    make_sysfs(tmp_path, [(0, 0, [0, 2]), (0, 1, [1, 3])])
    assert choose("two_cpus", 2, allowed={0, 1, 2, 3}, root=str(tmp_path)) == [0, 2]
    assert choose("two_cpus", 2, allowed={0, 1}, root=str(tmp_path)) == [0, 1]  # no sibling usable


def test_pipe_placements_are_the_choosers():
    if len(CPUS) < 2:
        with pytest.raises(ValueError, match="placement='two_cpus' needs two CPUs"):
            pipe.placement_cpus("two_cpus")
    else:
        assert list(pipe.placement_cpus("two_cpus")) == choose("two_cpus", 2)
    assert list(pipe.placement_cpus("one_cpu")) == choose("one_cpu", 2)


def test_facts_say_what_the_chosen_cpus_share(tmp_path):
    make_sysfs(tmp_path, [(0, 0, [0, 4]), (0, 1, [1, 5]), (1, 0, [2, 6])])
    cache = tmp_path / "sys/devices/system/cpu/cpu0/cache/index0"
    cache.mkdir(parents=True)
    for name, text in (("level", 3), ("type", "Unified"), ("size", "32768K"), ("shared_cpu_list", "0-1,4-5")):
        (cache / name).write_text(f"{text}\n")
    root = str(tmp_path)
    assert placement.facts([0, 4], root) == {"smt_siblings": 1.0, "same_package": 1.0, "shared_cache_level": 3.0}
    assert placement.facts([0, 1], root) == {"smt_siblings": 0.0, "same_package": 1.0, "shared_cache_level": 3.0}
    assert placement.facts([0, 2], root) == {"smt_siblings": 0.0, "same_package": 0.0, "shared_cache_level": 0.0}
    assert placement.facts([0, -1], root) == placement.facts([0], root)  # an unpinned thread is left out
    assert placement.facts([-1, -1], root) == {}
    # core_to_core's rows record the facts of their pair
    assert core_to_core.relation(0, 4, root=root) == placement.facts([0, 4], root)


def test_nodes_of_reads_the_nodes_the_cpus_are_on(tmp_path):
    base = tmp_path / "sys/devices/system/node"
    for node, cpus in ((0, "0-1"), (1, "2-3")):
        (base / f"node{node}").mkdir(parents=True)
        (base / f"node{node}/cpulist").write_text(cpus + "\n")
        (base / f"node{node}/distance").write_text("10 20\n" if node == 0 else "20 10\n")
    (base / "has_memory").write_text("0-1\n")
    (base / "online").write_text("0-1\n")
    assert placement.nodes_of([0, 3], root=str(tmp_path)) == [0, 1]
    assert placement.nodes_of([1], root=str(tmp_path)) == [0]


# ---- cpu=: every measuring thread on that one CPU, or one refusal -------------------------


@pytest.mark.parametrize("family, params", [(loaded, dict(load_threads=0, working_set_bytes=1 << 16,
                                                          load_working_set_bytes=1 << 16)),
                                            (core_to_core, dict(cpu_a=0, cpu_b=1))])
def test_a_family_that_cannot_put_its_threads_on_one_cpu_refuses_cpu_with_one_error(family, params):
    with pytest.raises(CpuNotApplicable, match=f"cpu=0 does not apply to {family.FAMILY.name}: "):
        family.run(cpu=0, **params, **FAST)
    assert issubclass(CpuNotApplicable, ValueError)


def test_cpu_is_checked_before_a_family_runs():
    with pytest.raises(ValueError, match="cpu=4096 is not among the CPUs this process may use"):
        bw.run(working_set_bytes=1 << 14, cpu=4096, **FAST)
    with pytest.raises(ValueError, match="cpu=True must be an integer CPU number"):
        bw.run(working_set_bytes=1 << 14, cpu=True, **FAST)


def test_a_family_says_what_cpu_does_in_it():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class NoParams:
        pass

    with pytest.raises(ValueError, match="one_cpu='somewhere' is not one of"):
        Family("f", NoParams, one_cpu="somewhere")
    with pytest.raises(ValueError, match="one_cpu='refused' needs one_cpu_refusal"):
        Family("f", NoParams, one_cpu="refused")
    assert {bw.FAMILY.one_cpu, loaded.FAMILY.one_cpu, core_to_core.FAMILY.one_cpu} == {"workers", "refused"}
    assert type(bw.FAMILY) is type(loaded.FAMILY) is type(core_to_core.FAMILY) is Family
