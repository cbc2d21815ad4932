"""The C core against its Python twins (memlab.twins), bit for bit.

C is reached through the helper families that hand back what it computed:
chase_trace and chase (check=1) for the list and its visiting order,
clear_kernel_order and clear_plan for the clearing orders, pipe_pattern for
the pipe check's byte pattern. Inputs are drawn by hypothesis.
"""

from __future__ import annotations

import array
import doctest

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab import _core, chase, clear, twins

MiB = 1 << 20
SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def test_the_twins_own_examples_hold():
    result = doctest.testmod(twins)
    assert result.attempted > 10 and result.failed == 0


def test_splitmix64_matches_the_published_sequence():
    # Steele, Lea and Flood's generator seeded with 0 (the reference outputs)
    state, outputs = 0, []
    for _ in range(3):
        state, value = twins.splitmix64(state)
        outputs.append(value)
    assert outputs == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


# ---- the pointer chase ---------------------------------------------------------------

chase_lists = st.fixed_dictionaries({
    "working_set_bytes": st.integers(1024, 48 << 10),
    "npad": st.sampled_from([0, 1, 3, 7, 15]),
    "order": st.sampled_from(chase.ORDERS),
    "block_pages": st.integers(1, 3),
    "layout": st.sampled_from(chase.LAYOUTS),
    "chains": st.integers(1, 4),
    "seed": st.integers(0, 2**63 - 1),
}).filter(lambda p: p["working_set_bytes"] // (8 * (p["npad"] + 1)) >= p["chains"])


def core_config(params: dict) -> dict:
    return chase._to_core(chase.FAMILY.params(params))


@SETTINGS
@given(chase_lists)
def test_chase_list_matches_the_twin(params):
    traced = chase.trace(dict(params, laps=0))
    n = chase.element_count(chase.FAMILY.params(params))
    stride = 8 * (params["npad"] + 1)
    if params["layout"] == "page_per_element":
        stride = -(-stride // 4096) * 4096
    block = max(1, params["block_pages"] * 4096 // stride)
    expected = twins.chase_successors(n, params["chains"], params["order"], block, params["seed"])
    assert traced["successors"].tolist() == expected


@SETTINGS
@given(chase_lists)
def test_chase_visiting_order_matches_the_twin(params):
    # chase_verify hashes the order in which its walk meets the elements
    with _core.Kernel("chase", dict(core_config(params), laps=1, check=True)) as kernel:
        metrics = kernel.measure(target_ns=0, counters=False)["metrics"]
    successors = chase.reference_successors(params)
    assert metrics["check_order_hash"] == twins.chase_order_hash(successors, params["chains"])
    chain = len(successors) // params["chains"]
    for c in range(params["chains"]):
        lap = twins.chase_visit_order(successors, c * chain, chain)
        assert sorted(lap) == list(range(c * chain, (c + 1) * chain))
        assert successors[lap[-1]] == c * chain


@SETTINGS
@given(chase_lists, st.sampled_from(["inc", "addnext0", "addnextlast"]), st.integers(1, 3))
def test_chase_pad0_after_the_walk_matches_the_twin(params, op, laps):
    params = dict(params, npad=max(1, params["npad"]), op=op, laps=laps)
    traced = chase.trace(params)
    successors = traced["successors"].tolist()
    assert traced["pad0"].tolist() == twins.chase_pad0(successors, params["chains"], op, laps, params["npad"])


def test_chase_twin_random_is_one_cycle_and_blocks_are_local():
    successors = twins.chase_successors(4096, 1, "random", seed=9)
    assert twins.chase_visit_order(successors, 0, 4097)[-1] == 0
    assert len(set(twins.chase_visit_order(successors, 0, 4096))) == 4096
    blocks = twins.chase_successors(4096, 1, "random_blocks", block_elements=64, seed=9)
    walk = twins.chase_visit_order(blocks, 0, 4096)
    assert [e // 64 for e in walk] == sorted(e // 64 for e in walk)


# ---- page clearing ---------------------------------------------------------------------

def c_kernel_order(n: int, target: int) -> list[int]:
    out = array.array("I", bytes(4 * n))
    with _core.Kernel("clear_kernel_order", {"n_subpages": n, "target": target, "out": out}) as kernel:
        kernel.measure(target_ns=0, counters=False)
    return out.tolist()


@SETTINGS
@given(st.integers(1, 1024).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_kernel_order_matches_the_twin(case):
    n, target = case
    assert c_kernel_order(n, target) == twins.kernel_order(n, target)


extents = st.one_of(st.sampled_from([4096 << k for k in range(10)]), st.integers(1, 4).map(lambda k: k * 2 * MiB))


@SETTINGS
@given(st.integers(1, 4).map(lambda k: k * 2 * MiB), extents, st.sampled_from(twins.CLEAR_ORDERS),
       st.integers(0, 511), st.integers(0, 2**63 - 1))
def test_clear_plan_matches_the_twin_for_every_order(region, extent, order, target, seed):
    if extent > region:
        extent = region
    got = clear.clear_plan(region, order, extent_bytes=extent, target_subpage=target, seed=seed)
    assert got == twins.clear_plan(region, order, extent, target, seed)
    assert sorted(got) == list(range(0, region, extent))


def test_clear_twin_orders_within_a_chunk():
    rng = twins.SplitMix64(1)
    assert twins.clear_unit_order(8, "sequential", 3, rng) == list(range(8))
    assert twins.clear_unit_order(8, "reverse", 3, rng) == list(range(7, -1, -1))
    assert twins.clear_unit_order(8, "kernel", 5, rng) == [0, 1, 2, 7, 3, 6, 4, 5]
    shuffled = twins.clear_unit_order(512, "random", 0, rng)
    assert sorted(shuffled) == list(range(512)) and shuffled != list(range(512))


# ---- the pipe check's byte pattern ---------------------------------------------------------

def c_pattern_fill(stream_offset: int, length: int) -> bytes:
    data = bytearray(length)
    config = {"action": "fill", "stream_offset": stream_offset, "data": data}
    with _core.Kernel("pipe_pattern", config) as kernel:
        kernel.measure(target_ns=0, counters=False)
    return bytes(data)


def c_pattern_check(data: bytes, stream_offset: int) -> tuple[int, int]:
    config = {"action": "check", "stream_offset": stream_offset, "data": bytearray(data)}
    with _core.Kernel("pipe_pattern", config) as kernel:
        metrics = kernel.measure(target_ns=0, counters=False)["metrics"]
    return int(metrics["verify_errors"]), int(metrics["first_bad_offset"])


stream_offsets = st.one_of(st.integers(0, 64), st.integers(0, 1 << 46))


@SETTINGS
@given(stream_offsets, st.integers(0, 20000))
def test_pipe_pattern_fill_matches_the_twin(stream_offset, length):
    assert c_pattern_fill(stream_offset, length) == twins.pipe_pattern(stream_offset, length)


@SETTINGS
@given(stream_offsets, st.integers(1, 12000), st.data())
def test_pipe_pattern_check_counts_what_the_twin_counts(stream_offset, length, data):
    good = bytearray(twins.pipe_pattern(stream_offset, length))
    positions = data.draw(st.lists(st.integers(0, length - 1), max_size=40, unique=True))
    for position in positions:
        good[position] ^= data.draw(st.integers(1, 255))
    expected = twins.pipe_pattern_errors(bytes(good), stream_offset)
    assert expected == (len(positions), stream_offset + min(positions) if positions else -1)
    assert c_pattern_check(bytes(good), stream_offset) == expected


def test_pipe_pattern_catches_shifted_and_repeated_bytes():
    stream = twins.pipe_pattern(1000, 4096)
    assert c_pattern_check(stream, 1000) == (0, -1)
    shifted = twins.pipe_pattern(1001, 4096)
    errors, first = c_pattern_check(shifted, 1000)
    assert errors > 4000 and first == 1000
    # a buffer half sent twice: byte 0 of every word repeats each 256 words
    # (256 * STEP ends in a zero byte), the other seven differ
    repeated = stream[:2048] + stream[:2048]
    errors, first = c_pattern_check(repeated, 1000)
    assert (errors, first) == twins.pipe_pattern_errors(repeated, 1000)
    assert errors == 2048 * 7 // 8 and first == 1000 + 2048 + 1  # 3048 is a word's byte 0


def test_pipe_pattern_twin_follows_its_definition():
    for stream_offset in (0, 7, 8, 4093, (1 << 40) + 3):
        assert twins.pipe_pattern(stream_offset, 24) == bytes(
            twins.pipe_pattern_byte(p) for p in range(stream_offset, stream_offset + 24))


def test_pipe_pattern_family_refuses_bad_buffers():
    with pytest.raises(ValueError, match="items of 8 bytes; expected 1"):
        _core.Kernel("pipe_pattern", {"action": "fill", "stream_offset": 0,
                                      "data": numpy.zeros(4, dtype=numpy.uint64)})
    with pytest.raises(ValueError, match="action=fill needs a writable data buffer"):
        _core.Kernel("pipe_pattern", {"action": "fill", "stream_offset": 0, "data": bytes(8)})
    with pytest.raises(ValueError, match="stream_offset=-1 is below the minimum 0"):
        _core.Kernel("pipe_pattern", {"action": "check", "stream_offset": -1, "data": bytes(8)})
