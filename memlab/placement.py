"""Where a family's threads run: the one chooser below the families.

A family asks this module for the CPUs of its measuring threads and hands the
list to the C core, which only pins the threads to them and checks them
(``ml_thread_start_pinned``); the topology is read here, from sysfs
(:func:`memlab.machine.cpu_topology`, :func:`memlab.machine.caches_shared_by`).
One vocabulary (:data:`PLACEMENTS`):

- ``cores``: distinct physical cores, filling one package before the next;
- ``spread``: distinct CPUs, one per core first (as ``cores``), then the
  cores' other SMT siblings (the chase's walking threads, share's threads:
  as many threads as this process has CPUs);
- ``smt``: the SMT siblings of one core;
- ``sockets``: one thread per package;
- ``one_cpu``: every thread on one CPU (the first this process may use);
- ``unpinned``: -1 for every thread (the scheduler places them);
- or an explicit list of CPUs, one per thread.

The pipe families' ``two_cpus`` is ``smt`` where one core has two usable
siblings, else ``cores`` (:data:`ALIASES`). :func:`facts` says what chosen
CPUs share (SMT core, package, cache level), as rows record it, and
:func:`nodes_of` which NUMA nodes they are on; :func:`spread` starts the
``spread`` order at a given CPU and :func:`beside` finds a second CPU for one
thread (its SMT sibling where there is one: the chase's helper).

``cpu=`` of :meth:`memlab.family.Family.run` means "every measuring thread on
that one CPU"; a family that cannot do that raises :class:`CpuNotApplicable`
(:func:`cpu_not_applicable`), one ValueError for all.

>>> choose("unpinned", 2)
[-1, -1]
>>> len(set(choose("one_cpu", 3)))
1
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from memlab import machine

__all__ = [
    "PLACEMENTS",
    "ALIASES",
    "CpuNotApplicable",
    "allowed_cpus",
    "beside",
    "check_cpu",
    "choose",
    "cpu_not_applicable",
    "facts",
    "nodes_of",
    "spread",
]

#: The placements :func:`choose` knows (an explicit list of CPUs is the sixth kind).
PLACEMENTS = ("cores", "smt", "sockets", "spread", "one_cpu", "unpinned")
#: Other families' words for a placement, and the one :func:`choose` reads them as.
ALIASES = {"two_cpus": ("smt", "cores")}


class CpuNotApplicable(ValueError):
    """``cpu=`` asked of a family that cannot put every measuring thread on one CPU."""


def cpu_not_applicable(family: str, cpu: Any, why: str) -> CpuNotApplicable:
    """The one error for ``cpu=`` where it does not apply (``why``: how the family places its threads).

    >>> str(cpu_not_applicable("loaded", 0, "the chaser and each load thread get a core each"))
    'cpu=0 does not apply to loaded: the chaser and each load thread get a core each'
    """
    return CpuNotApplicable(f"cpu={cpu!r} does not apply to {family}: {why}")


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on, ascending."""
    return sorted(os.sched_getaffinity(0))


def _format_cpus(cpus: Iterable[int]) -> str:
    cpus = sorted(cpus)
    return ",".join(str(c) for c in cpus[:16]) + ("..." if len(cpus) > 16 else "")


def check_cpu(cpu: Any, *, name: str = "cpu", allowed: Iterable[int] | None = None) -> int:
    """``cpu`` as a CPU number this process may use, else ValueError naming ``name``.

    >>> check_cpu(allowed_cpus()[0]) == allowed_cpus()[0]
    True
    """
    usable = set(allowed_cpus() if allowed is None else allowed)
    if isinstance(cpu, bool) or not isinstance(cpu, int):
        raise ValueError(f"{name}={cpu!r} must be an integer CPU number")
    if cpu not in usable:
        raise ValueError(f"{name}={cpu} is not among the CPUs this process may use [{_format_cpus(usable)}]")
    return cpu


def choose(placement: str | Sequence[int], count: int, *, allowed: Iterable[int] | None = None,
           root: str = "/") -> list[int]:
    """CPUs for ``count`` threads placed as ``placement`` says (:data:`PLACEMENTS`, an
    :data:`ALIASES` word, or a list of CPUs). Only CPUs in ``allowed`` (default: this process's
    affinity) are used; a placement the machine cannot give raises ValueError saying why.

    >>> choose([0], 1, allowed={0})
    [0]
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count={count!r} must be a positive number of threads")
    usable = set(allowed_cpus() if allowed is None else allowed)
    if not isinstance(placement, str):
        cpus = list(placement)
        if len(cpus) != count:
            raise ValueError(f"placement={cpus!r} names {len(cpus)} CPUs for {count} threads")
        return [check_cpu(cpu, name="placement", allowed=usable) for cpu in cpus]
    if placement in ALIASES:
        first, fallback = ALIASES[placement]
        try:
            return choose(first, count, allowed=usable, root=root)
        except ValueError:
            return choose(fallback, count, allowed=usable, root=root)
    if placement not in PLACEMENTS:
        known = ", ".join(map(repr, PLACEMENTS + tuple(ALIASES)))
        raise ValueError(f"placement={placement!r} is not one of {known} or a list of CPUs")
    if placement == "unpinned":
        return [-1] * count
    if not usable:
        raise ValueError("this process may use no CPU")
    if placement == "one_cpu":
        return [min(usable)] * count
    if count > len(usable):
        raise ValueError(f"placement={placement!r} with {count} threads: this process may use only "
                         f"{len(usable)} CPUs ({_format_cpus(usable)})")
    if placement == "spread":
        return spread(count, allowed=usable, root=root)
    return _from_topology(placement, count, usable, root)


def spread(count: int, first: int | None = None, *, allowed: Iterable[int] | None = None,
           root: str = "/") -> list[int]:
    """``count`` distinct CPUs: ``first`` (default: the first CPU of ``cores``), then one CPU of
    each core not yet used, package by package, then the used cores' other SMT siblings. ValueError
    when this process may use fewer CPUs, or ``first`` is not one of them.

    >>> spread(1, allowed={0})
    [0]
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count={count!r} must be a positive number of threads")
    usable = set(allowed_cpus() if allowed is None else allowed)
    if first is not None:
        check_cpu(first, name="first", allowed=usable)
    if count > len(usable):
        raise ValueError(f"{count} threads on distinct CPUs: this process may use only {len(usable)} "
                         f"({_format_cpus(usable)})")
    by_package, _ = _cores_by_package(usable, root)
    cores = [cpus for package in sorted(by_package) for cpus in by_package[package]]
    if first is not None:  # first's core first, the others in their order
        cores.sort(key=lambda cpus: first not in cpus)
        cores[0] = [first] + [cpu for cpu in cores[0] if cpu != first]
    order = [cpus[rank] for rank in range(max(len(cpus) for cpus in cores)) for cpus in cores if rank < len(cpus)]
    return order[:count]


def beside(cpu: int, *, allowed: Iterable[int] | None = None, root: str = "/") -> int:
    """A second CPU for a thread working beside one on ``cpu``: an SMT sibling of ``cpu`` this
    process may use, else the first other CPU it may use. ValueError when there is none.

    >>> beside(0, allowed={0, 1}, root="/nonexistent")
    1
    """
    usable = set(allowed_cpus() if allowed is None else allowed)
    others = sorted(usable - {cpu})
    if not others:
        raise ValueError(f"a thread beside CPU {cpu} needs a second CPU; this process may use "
                         f"{_format_cpus(usable)} only")
    siblings = next((c["siblings"] for c in machine.cpu_topology(root) if c["cpu"] == cpu), ())
    return next((c for c in others if c in siblings), others[0])


def _cores_by_package(usable: set[int], root: str) -> tuple[dict[int, list[list[int]]], list[dict[str, Any]]]:
    topology = [c for c in machine.cpu_topology(root) if c["cpu"] in usable]
    if not topology:  # no sysfs: every usable CPU is a core of package 0
        topology = [{"cpu": cpu, "package": 0, "core_id": cpu, "siblings": (cpu,)} for cpu in sorted(usable)]
    cores: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    for c in topology:
        cores.setdefault((c["package"], c["siblings"]), []).append(c["cpu"])
    by_package: dict[int, list[list[int]]] = {}
    for (package, _), cpus in sorted(cores.items(), key=lambda item: (item[0][0], min(item[1]))):
        by_package.setdefault(package, []).append(sorted(cpus))
    return by_package, topology


def _from_topology(placement: str, count: int, usable: set[int], root: str) -> list[int]:
    by_package, topology = _cores_by_package(usable, root)
    if placement == "smt":
        cores = [cpus for package in sorted(by_package) for cpus in by_package[package]]
        for cpus in cores:
            if len(cpus) >= count:
                return cpus[:count]
        widest = max(len(cpus) for cpus in cores)
        reason = ("this machine has no SMT (one thread per core)" if widest == 1 and
                  all(len(c["siblings"]) == 1 for c in topology)
                  else f"the most usable siblings on one core is {widest}")
        raise ValueError(f"placement='smt' needs {count} SMT siblings of one core: {reason}")
    if placement == "sockets":
        if len(by_package) < count:
            raise ValueError(f"placement='sockets' needs {count} packages (sockets): the CPUs this "
                             f"process may use are on {len(by_package)}")
        return [by_package[package][0][0] for package in sorted(by_package)[:count]]
    for package in sorted(by_package):  # cores: one package if it has enough
        if len(by_package[package]) >= count:
            return [cpus[0] for cpus in by_package[package][:count]]
    every = [cpus[0] for package in sorted(by_package) for cpus in by_package[package]]
    if len(every) < count:
        raise ValueError(f"placement='cores' needs {count} distinct cores: the CPUs this process may "
                         f"use ({_format_cpus(usable)}) are on {len(every)}")
    return every[:count]


def facts(cpus: Sequence[int], root: str = "/") -> dict[str, float]:
    """What sysfs says the pinned CPUs of ``cpus`` share (-1, unpinned, is left out), as rows
    record it: ``smt_siblings`` (1: all on one core), ``same_package`` (1: all in one package) and
    ``shared_cache_level`` (the lowest data or unified cache level all use; 0: none). Empty when
    none is pinned.

    >>> facts([-1, -1])
    {}
    """
    pinned = sorted({cpu for cpu in cpus if cpu >= 0})
    if not pinned:
        return {}
    topology = {c["cpu"]: c for c in machine.cpu_topology(root)}
    known = [topology.get(cpu) for cpu in pinned]
    shared = machine.caches_shared_by(pinned, root)
    return {
        "smt_siblings": float(all(known) and all(cpu in known[0]["siblings"] for cpu in pinned)),
        "same_package": float(all(known) and len({c["package"] for c in known}) == 1),
        "shared_cache_level": float(shared[0]["level"]) if shared else 0.0,
    }


def nodes_of(cpus: Sequence[int], root: str = "/") -> list[int]:
    """The NUMA nodes the pinned CPUs of ``cpus`` are on (node 0 where sysfs has none).

    >>> nodes_of([-1])
    []
    """
    pinned = {cpu for cpu in cpus if cpu >= 0}
    return sorted(node["node"] for node in machine.numa_nodes(root=root) if pinned & set(node["cpus"]))
