"""Property tests over every family's parameters (hypothesis).

For every registered family: small valid values measure (one short sample);
a hostile value in any one parameter is refused with a ValueError naming that
parameter, or is accepted as the value it equals (48.0 is 48, numpy integers
are integers) and then stored as a plain Python value; no other exception,
ever. The run options (repeat, warmup, target_seconds, counters, cpu) alike.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memlab import bandwidth, machine
from memlab.family import Family
from memlab.registry import all_families

HUNT = os.environ.get("MEMLAB_HYPOTHESIS_EXAMPLES")
EXAMPLES = int(HUNT) if HUNT else 25
SETTINGS = dict(deadline=None, derandomize=HUNT is None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
KiB, MiB = 1 << 10, 1 << 20
CPUS = sorted(os.sched_getaffinity(0))
POPULATE = ["touch", "map_populate"] + (["madvise_populate_write"] if machine.populate_write_supported() else [])


def maybe(strategy):
    return st.one_of(st.none(), strategy)


#: Small valid values of every parameter of every family (pages that need a reservation, and
#: ISAs this CPU may lack, left out: their refusal is tested where each family is).
VALID = {
    "calibrate": dict(budget_ns=st.integers(1_000_000, 3_000_000)),
    "region": dict(region_bytes=st.integers(1, 64).map(lambda n: n * 4 * KiB), pages=st.sampled_from(["4k", "thp"]),
                   populate=st.sampled_from(["none", *POPULATE]), strict_pages=st.just(False)),
    "chase": dict(working_set_bytes=st.integers(1, 64).map(lambda n: n * 4 * KiB), npad=st.sampled_from([0, 1, 7, 15]),
                  order=st.sampled_from(["sequential", "random", "random_blocks"]), block_pages=st.integers(1, 4),
                  work_cycles=st.integers(0, 4), prefetch_distance=st.integers(0, 4), chains=st.integers(1, 4),
                  seed=st.integers(0, 2**63 - 1), laps=st.integers(1, 3), check=st.booleans(),
                  helper_thread=st.booleans() if len(CPUS) > 1 else st.just(False),
                  helper_distance=st.integers(1, 64), pages=st.sampled_from(["4k", "thp"])),
    "pipe": dict(writer=st.sampled_from(["write", "vmsplice"]), reader=st.sampled_from(["read", "splice"]),
                 buffer_bytes=st.integers(1, 64).map(lambda n: n * 4 * KiB), pipe_size_bytes=maybe(st.sampled_from([4096, 65536])),
                 total_bytes=st.integers(1, 16).map(lambda n: n * 64 * KiB), touch_pages=st.booleans(),
                 verify=st.booleans(), writer_cpu=maybe(st.sampled_from(CPUS)), reader_cpu=maybe(st.sampled_from(CPUS)),
                 timeout_s=st.just(60.0)),
    "pipe_latency": dict(message_bytes=st.integers(1, 4096), round_trips=st.integers(1, 200),
                         ping_cpu=maybe(st.sampled_from(CPUS)), pong_cpu=maybe(st.sampled_from(CPUS))),
    "clear_fault": dict(region_bytes=st.integers(1, 4).map(lambda n: n * 2 * MiB), pages=st.sampled_from(["4k", "thp"]),
                        populate=st.sampled_from(POPULATE), touch_offset=st.sampled_from(["first", "middle", "last"]),
                        pause_s=st.just(0.0), strict_pages=st.just(False)),
    "clear_order": dict(region_bytes=st.integers(1, 4).map(lambda n: n * 2 * MiB), pages=st.sampled_from(["4k", "thp"]),
                        order=st.sampled_from(["sequential", "kernel", "reverse", "random"]),
                        method=st.sampled_from(["memset", "rep_stosb", "vector", "nontemporal"]),
                        extent_bytes=st.sampled_from([4 * KiB, 64 * KiB, 2 * MiB]), target_subpage=st.integers(0, 511),
                        seed=st.integers(0, 2**63 - 1), check=st.booleans()),
    "matrix": dict(n=st.integers(1, 48), variant=st.sampled_from(["naive", "transposed", "tiled", "tiled_simd", "blas"]),
                   tile=maybe(st.integers(1, 48)), isa=st.sampled_from(["auto", "scalar"]), seed=st.integers(0, 2**32)),
    "matrix_init": dict(n=st.integers(1, 96), order=st.sampled_from(["row", "column"]),
                        stores=st.sampled_from(["normal", "nontemporal"])),
    "system": dict(test=st.sampled_from(["spawn", "execl", "file_copy"]), duration_s=st.just(0.005),
                   copies=st.integers(1, 2), iterations=st.integers(1, 3), buffer_bytes=st.sampled_from([256, 1024, 4096]),
                   max_blocks=st.integers(8, 64)),
    "share": dict(threads=st.integers(1, 8), disp_longs=st.integers(0, 16), atomic=st.booleans(),
                  atomic_op=st.sampled_from([None, "lock_add", "fetch_add", "cas", "plain"]),
                  increments=st.integers(1, 10_000), placement=st.just("unpinned")),
    "bandwidth": dict(working_set_bytes=st.integers(1, 64).map(lambda n: n * 2 * 64 * 8),
                      op=st.sampled_from(["read", "write", "copy"]),
                      width=st.sampled_from(["auto", "scalar", *bandwidth.supported_widths()]),
                      stores=st.sampled_from(["normal", "nontemporal"]), threads=st.integers(1, min(2, len(CPUS))),
                      placement=st.sampled_from(["cores", "unpinned"]), shared=st.booleans(),
                      pages=st.sampled_from(["4k", "thp"]), background_op=st.sampled_from(["none", "read", "copy"]),
                      background_working_set_bytes=st.integers(1, 16).map(lambda n: n * 4 * KiB),
                      check=st.booleans()),
    # two CPUs of this process (one CPU: every point has cpu_a == cpu_b, refused naming both)
    "core_to_core": dict(cpu_a=st.sampled_from(CPUS), cpu_b=st.sampled_from(CPUS),
                         method=st.sampled_from(["cas", "store"]), lines=st.integers(1, 32)),
    "loaded": dict(working_set_bytes=st.integers(1, 64).map(lambda n: n * 4 * KiB), pages=st.sampled_from(["4k", "thp"]),
                   load_threads=st.integers(0, len(CPUS) - 1), load_op=st.sampled_from(["read", "write", "copy", "add"]),
                   load_working_set_bytes=st.integers(1, 4).map(lambda n: n * 64 * KiB),
                   delay_ns=st.integers(0, 10_000), load_chunk_bytes=st.integers(0, 64).map(lambda n: n * 1024)),
    "tlb": dict(working_set_bytes=st.integers(4, 64).map(lambda n: n * 64), seed=st.integers(0, 2**63 - 1)),
}

#: Values no parameter takes (each is tried in every parameter).
HOSTILE = st.one_of(
    st.text(max_size=8), st.binary(max_size=4), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1), st.none(), st.booleans(),
    st.integers(-(2**80), 2**80), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([np.int64(-1), np.int64(2**62), np.float64(0.5), np.float64(float("nan")), np.bool_(True),
                     np.uint64(2**64 - 1), np.str_("random"), complex(1, 1), object(), "１０", "4096 ", "0x10"]),
)


def families() -> dict[str, Family]:
    return all_families()


def test_every_family_has_valid_values_declared_here():
    assert set(VALID) == set(families()), (
        "a family was added or renamed: give its parameters small valid values in VALID"
    )
    for name, fam in families().items():
        unknown = set(VALID[name]) - set(fam.param_names)
        assert not unknown, f"{name}: VALID names parameters it does not have: {unknown}"


def plain(value) -> bool:
    return value is None or type(value) in (bool, int, float, str)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_values_measure(name):
    fam = families()[name]

    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(st.fixed_dictionaries(VALID[name]))
    def measure(point):
        try:
            params = fam.params(point)
        except ValueError as error:  # a combination the family rules out (e.g. busy ends on one CPU)
            assert any(f"{field}=" in str(error) for field in fam.param_names), error
            return
        assert all(plain(v) for v in dataclasses.asdict(params).values())
        m = fam.run(params, repeat=1, warmup=0, target_seconds=0.001)
        row = m.to_row()
        assert row["family"] == name and row["repeat"] == 1
        assert all(plain(row[field]) for field in fam.param_names)

    measure()


@pytest.mark.parametrize("name", sorted(VALID))
def test_hostile_values_are_refused_naming_the_parameter(name):
    fam = families()[name]

    @settings(max_examples=EXAMPLES * 4, **SETTINGS)
    @given(st.sampled_from(fam.param_names), HOSTILE)
    def construct(field, value):
        try:
            params = fam.params({field: value})
        except ValueError as error:
            assert f"{field}=" in str(error) or f"{field} " in str(error), (field, value, str(error))
            return
        stored = getattr(params, field)
        assert plain(stored), (field, value, stored)  # accepted: as the plain value it equals
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
            assert stored == value or (isinstance(stored, float) and math.isnan(stored)), (field, value, stored)

    construct()


@pytest.mark.parametrize("name", sorted(VALID))
def test_integral_floats_and_numpy_integers_are_integers(name):
    """Grids built with np.arange or a CSV give 48.0 and np.int64(48): both are the integer 48."""
    fam = families()[name]
    defaults = fam.defaults()
    for field in fam.param_names:
        value = defaults.get(field)
        if type(value) is not int:
            continue
        for given_as in (float(value), np.int64(value)):
            params = fam.params({field: given_as})
            assert type(getattr(params, field)) is int and getattr(params, field) == value


def _number_above(value, limit: float) -> bool:
    try:
        return float(value) > limit
    except (TypeError, ValueError, OverflowError):
        return False


def test_unknown_parameters_are_refused_naming_them():
    for fam in families().values():
        with pytest.raises(ValueError, match="unknown parameter 'nope'"):
            fam.params({"nope": 1})


@settings(max_examples=EXAMPLES * 4, **SETTINGS)
@given(st.sampled_from(["repeat", "warmup", "target_seconds", "counters", "cpu"]), HOSTILE)
def test_hostile_run_options_are_refused_naming_them(option, value):
    fam = families()["calibrate"]
    expensive = (option in ("repeat", "warmup") and isinstance(value, (int, np.integer))
                 and not isinstance(value, (bool, np.bool_)) and value > 3)
    assume(not expensive and not (option == "target_seconds" and _number_above(value, 0.01)))
    try:
        m = fam.run({"budget_ns": 1_000_000}, **{"repeat": 1, "warmup": 0, "target_seconds": 0.0, option: value})
    except ValueError as error:
        assert f"{option}=" in str(error), (option, value, str(error))
        return
    assert len(m.samples) >= 1
