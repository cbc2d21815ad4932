"""Each C family's parameter table holds the defaults (``ml_param``'s default): the Python params
classes and the table must agree, on defaults and on ranges, for every family with both.

A Python default that depends on the machine (a thread count from the CPUs this process may
use) has no C default; a fixed one must be the table's. A Python range may be narrower than
the C one (the C core checks again what only it can know), never wider.
"""

from __future__ import annotations

import dataclasses

import numpy
import pytest

from memlab import _core, chase, registry
from memlab.family import param_rules

C_FAMILIES = _core.families()
#: Choices the Python side runs itself, never handing them to the C family.
PYTHON_ONLY_CHOICES = {("matrix", "variant"): {"blas"}}  # numpy's BLAS, timed in Python
WITH_CORE = sorted(name for name, family in registry.all_families().items() if family.core)


def python_config(family) -> dict:
    params = family.params_type()
    return dict(family.to_core(params) if family.to_core else dataclasses.asdict(params))


@pytest.mark.parametrize("name", WITH_CORE)
def test_every_fixed_python_default_is_the_c_tables(name):
    family = registry.family(name)
    table = {p["name"]: p for p in C_FAMILIES[family.core]["params"]}
    config = python_config(family)
    fields = {f.name: f for f in dataclasses.fields(family.params_type)}
    checked = 0
    for param, spec in table.items():
        if spec["kind"] == "buffer":
            assert "default" not in spec, f"{name}: buffer {param} has a default"
            continue
        fixed = param in fields and fields[param].default not in (dataclasses.MISSING, None)
        if not fixed:
            continue  # machine-dependent (None: chosen when run) or computed by to_core: Python owns it
        assert "default" in spec, f"{name}: {param} has the fixed Python default {config[param]!r}, the table none"
        assert spec["default"] == config[param] and type(spec["default"]) is type(config[param]), \
            f"{name}: {param} defaults to {config[param]!r} in Python, {spec['default']!r} in C"
        checked += 1
    assert checked or not fields


@pytest.mark.parametrize("name", WITH_CORE)
def test_python_ranges_lie_within_the_c_tables(name):
    family = registry.family(name)
    table = {p["name"]: p for p in C_FAMILIES[family.core]["params"]}
    for param, rule in param_rules(family.params_type).items():
        spec = table.get(param)
        if spec is None:
            continue
        if rule["kind"] == "int" and spec["kind"] == "int":
            low, high = rule["minimum"], rule["maximum"]  # None: checked otherwise (a message of its own)
            assert low is None or spec["min"] <= low, f"{name}: {param} takes from {low} in Python, {spec['min']} in C"
            assert high is None or high <= spec["max"], f"{name}: {param} takes to {high} in Python, {spec['max']} in C"
        elif rule["kind"] == "choice" and spec["kind"] == "choice":
            python_only = PYTHON_ONLY_CHOICES.get((name, param), set())
            assert set(rule["choices"]) - python_only <= set(spec["choices"]), f"{name}: {param} choices"


@pytest.mark.parametrize("name", sorted(C_FAMILIES))
def test_every_c_default_is_a_value_its_parameter_takes(name):
    for spec in C_FAMILIES[name]["params"]:
        if "default" not in spec:
            continue
        value = spec["default"]
        if spec["kind"] == "int":
            assert spec["min"] <= value <= spec["max"], (name, spec)
        elif spec["kind"] == "float":
            assert spec["min"] <= value <= spec["max"], (name, spec)
        elif spec["kind"] == "choice":
            assert value in spec["choices"], (name, spec)
        else:
            assert spec["kind"] == "bool" and isinstance(value, bool), (name, spec)


def test_an_absent_key_takes_the_tables_default_and_a_required_one_is_still_refused():
    # every chase parameter has a default: one key is enough, and the list is the default's
    with _core.Kernel("chase", {"working_set_bytes": 1 << 14}) as kernel:
        sample = kernel.measure(target_ns=1_000_000, counters=False)
    assert sample["metrics"]["element_bytes"] == 64  # npad=7 by default: 8 words
    full = chase._to_core(chase.ChaseParams(working_set_bytes=1 << 14))
    with _core.Kernel("chase", full) as kernel:
        assert kernel.measure(target_ns=1_000_000, counters=False)["metrics"]["element_bytes"] == 64
    # an optional buffer absent is empty: the chase's CPU list (a lone walking thread unpinned)
    assert {p["name"]: p for p in C_FAMILIES["chase"]["params"]}["cpus"] == {
        "name": "cpus", "kind": "buffer", "optional": True}
    with pytest.raises(ValueError, match="threads=2 need a CPU each: cpus lists them"):
        _core.Kernel("chase", {"working_set_bytes": 1 << 14, "threads": 2})
    # a buffer has no default: still required
    with pytest.raises(ValueError, match="missing parameter 'times' for team_metrics"):
        _core.Kernel("team_metrics", {})
    with pytest.raises(ValueError, match="unknown parameter 'npadd' for chase"):
        _core.Kernel("chase", {"npadd": 7})
    assert _core.Kernel("team_metrics", {"times": numpy.zeros(3, dtype=numpy.uint64)}) is not None
