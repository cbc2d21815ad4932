"""The chase's layout, thread and placement modes: each walks what it claims, and says where it ran."""

from __future__ import annotations

import array
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlab import _core, chase

USABLE = sorted(os.sched_getaffinity(0))
NODE_ROOT = Path("/sys/devices/system/node")


def one_sample(**params):
    """One kept sample, no warm-up, short: for correctness, not timing."""
    return chase.run(repeat=1, warmup=0, target_seconds=0.005, **params).samples[0]


def core_config(**overrides):
    return dict(chase._to_core(chase.ChaseParams(**overrides)))


def needs_cpus(count):
    if len(USABLE) < count:
        pytest.skip(f"needs {count} usable CPUs; this process may use {len(USABLE)}")


def cpu_list(text):
    cpus = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def smt_siblings(cpu):
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    return cpu_list(path.read_text()) if path.exists() else {cpu}


def nodes_with_memory():
    path = NODE_ROOT / "has_memory"
    return sorted(cpu_list(path.read_text())) if path.exists() else [0]


# ---- every mode walks every element once per lap -------------------------------

MODES = [
    dict(npad=1, misalign_bytes=4, op="inc"),
    dict(npad=7, misalign_bytes=60),
    dict(npad=7, pointer_word=7),
    dict(npad=7, pointer_word=3, order="random"),
    dict(npad=7, element_distance=3, order="random"),
    dict(npad=7, element_distance=64, order="sequential", working_set_bytes=64 * 16),
    dict(npad=15, op="addnextlast"),
    dict(npad=15, op="addpair", pair_word=8),
    dict(element_bytes=128, order="random_blocks", block_pages=2, chains=3),
    dict(memory_node=0),
    dict(walk_cpu=USABLE[-1]),
    dict(threads=2, npad=15, order="sequential"),
    dict(threads=2, thread_lists="own", op="inc"),
    dict(threads=2, thread_lists="own", chains=3, op="addnextlast", npad=3),
    dict(threads=2, order="random", op="addnextlast", npad=15, misalign_bytes=8),
]


def mode_id(mode):
    return "-".join(f"{k}={v}" for k, v in mode.items())


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
def test_every_mode_visits_every_element_once_per_lap(mode):
    needs_cpus(mode.get("threads", 1))
    params = dict(dict(working_set_bytes=40_000, seed=5), **mode)
    values = one_sample(**params, check=True, laps=3)
    elements = chase.element_count(params)
    per_thread = elements // (mode.get("threads", 1) if mode.get("thread_lists") == "own" else 1)
    assert values["elements"] == elements
    assert values["check_visits_fewest"] == values["check_visits_most"] == values["check_laps"] == 2
    assert values["check_elements_visited"] == per_thread
    assert values["check_back_at_start"] == 1
    assert values["check_bad_pointers"] == 0 and values["check_outside_chain"] == 0
    assert values["laps"] == 3 and values["end_at_start"] == 1


@pytest.mark.parametrize("mode", [m for m in MODES if m.get("op", "follow") != "inc"
                                  and "memory_node" not in m and "walk_cpu" not in m], ids=mode_id)
def test_c_list_equals_the_python_reference(mode):
    needs_cpus(mode.get("threads", 1))
    params = dict(dict(working_set_bytes=40_000, seed=9), **mode)
    traced = chase.trace(params, laps=0)
    assert traced["successors"].tolist() == chase.reference_successors(params)


OP_CASES = [(op, npad) for op in ("addnextlast", "addpair", "inc") for npad in (1, 2, 15)
            if not (op == "addpair" and npad < 2)]  # addpair needs a second pad word


@pytest.mark.parametrize("op,npad", OP_CASES)
def test_new_ops_change_memory_as_defined(op, npad):
    params = dict(op=op, npad=npad, order="random", working_set_bytes=8 << 10, chains=2,
                  pair_word=max(2, npad))
    traced = chase.trace(params, laps=3)
    assert traced["pad0"].tolist() == chase.reference_pad0(params, traced["successors"].tolist(), laps=3)
    assert traced["positions"] == traced["walk_starts"] == traced["chain_starts"]


def test_own_lists_change_memory_as_defined_per_thread():
    needs_cpus(2)
    params = dict(op="addnext0", npad=1, threads=2, thread_lists="own", chains=2, working_set_bytes=8 << 10)
    traced = chase.trace(params, laps=2)
    assert len(traced["chain_starts"]) == 4 and traced["walk_starts"] == traced["chain_starts"]
    assert traced["pad0"].tolist() == chase.reference_pad0(params, traced["successors"].tolist(), laps=2)


def test_a_shared_list_spreads_the_threads_along_it():
    needs_cpus(2)
    params = dict(threads=2, order="random", npad=7, working_set_bytes=64 << 10)
    traced = chase.trace(params, laps=1)
    successors = traced["successors"].tolist()
    start, other = traced["walk_starts"]
    index, steps = start, 0
    while index != other:
        index, steps = successors[index], steps + 1
    assert steps == len(successors) // 2
    assert traced["positions"] == traced["walk_starts"]


# ---- layouts: the addresses are what the parameters say -------------------------

def straddles(offset, width=8):
    return offset // chase.LINE_BYTES != (offset + width - 1) // chase.LINE_BYTES


def test_misaligned_elements_straddle_cache_lines():
    aligned = chase.trace(npad=1, order="sequential", working_set_bytes=4096, laps=0)
    shifted = chase.trace(npad=1, order="sequential", working_set_bytes=4096, laps=0, misalign_bytes=4)
    assert aligned["base_line_offset"] == shifted["base_line_offset"] == 0
    offsets = shifted["element_offsets"].tolist()
    assert offsets == [4 + 16 * i for i in range(len(offsets))]
    assert not any(straddles(o + 8) for o in aligned["element_offsets"].tolist())
    pad0_split = [straddles(o + 8) for o in offsets]  # pad[0] is the element's second word
    assert sum(pad0_split) == len(offsets) // 4 and pad0_split[3] and not pad0_split[0]
    line_element = chase.trace(npad=7, order="random", working_set_bytes=4096, laps=0, misalign_bytes=60)
    assert all(straddles(o) for o in line_element["element_offsets"].tolist())  # every next pointer


def test_elements_keep_exactly_the_asked_distance():
    for distance in (1, 2, 63, 64, 65, 128):
        traced = chase.trace(npad=7, order="sequential", working_set_bytes=64 * 16, laps=0,
                             element_distance=distance)
        offsets = traced["element_offsets"].tolist()
        assert len(offsets) == 16
        assert {b - a for a, b in zip(offsets, offsets[1:])} == {distance * 64}
        assert traced["successors"].tolist() == [(i + 1) % 16 for i in range(16)]
    values = one_sample(npad=7, order="sequential", working_set_bytes=64 * 16, element_distance=64, laps=1)
    assert values["stride_bytes"] == 4096 and values["memory_bytes"] == 16 * 4096


def test_the_pointer_sits_in_the_asked_word():
    # check=True follows every pointer and requires it to land on its element's pointer word
    for word in (0, 3, 7):
        values = one_sample(npad=7, pointer_word=word, working_set_bytes=64 << 10, check=True, laps=1)
        assert values["check_bad_pointers"] == 0 and values["check_visits_fewest"] == 2
    traced = chase.trace(npad=7, pointer_word=7, order="sequential", working_set_bytes=4096, laps=0)
    assert traced["successors"].tolist()[:3] == [1, 2, 3]
    assert traced["pad0"].tolist()[:3] == [1, 2, 3]  # pad[0] stays word 1, pad words start distinct


def test_element_bytes_sets_npad():
    assert chase.ChaseParams(element_bytes=128).npad == 15
    assert chase.ChaseParams(element_bytes=128, npad=15).npad == 15
    assert chase.ChaseParams().npad == 7 and chase.ChaseParams(npad=0).element_bytes == 0
    values = one_sample(element_bytes=128, working_set_bytes=64 << 10, laps=1)
    assert values["element_bytes"] == 128 and values["elements"] == 512


# ---- threads ---------------------------------------------------------------------

def test_threads_run_on_distinct_cpus_one_per_core_first():
    needs_cpus(2)
    values = one_sample(threads=2, working_set_bytes=1 << 20, npad=15, order="sequential")
    cpus = {values["thread_0_cpu"], values["thread_1_cpu"]}
    assert len(cpus) == 2 and cpus <= set(USABLE)
    assert values["thread_0_cpu"] == values["walk_cpu_used"]
    separate_cores = any(not (smt_siblings(a) & smt_siblings(b)) for a in USABLE for b in USABLE if a < b)
    assert values["thread_cores"] == (2 if separate_cores else 1)
    assert values["cpus_usable"] == len(USABLE)
    assert values["threads_walked"] == 2, "the sample started before every thread walked"
    assert 0 < values["ns_per_element"] <= values["slowest_thread_ns_per_element"] * 1.0001
    assert values["ns_per_element"] <= values["mean_thread_ns_per_element"] * 1.0001
    # a share of the sample: how much depends on what else the machine runs, so only its range
    assert 0 <= values["overlap_fraction"] <= 1


def test_walk_cpu_pins_the_walking_thread():
    for cpu in USABLE[:2]:
        values = one_sample(walk_cpu=cpu, laps=1)
        assert values["walk_cpu_used"] == cpu
    assert os.sched_getaffinity(0) == set(USABLE), "the process affinity was not restored"


def test_more_threads_than_cpus_is_a_value_error_naming_threads():
    with pytest.raises(ValueError, match=rf"threads={len(USABLE) + 1} needs as many CPUs; "
                                         rf"this process may use {len(USABLE)}"):
        one_sample(threads=len(USABLE) + 1)


def test_an_unusable_walk_cpu_is_a_value_error():
    unusable = next(c for c in range(1024) if c not in USABLE)
    with pytest.raises(ValueError, match=f"walk_cpu={unusable} is not among the CPUs this process may run on"):
        one_sample(walk_cpu=unusable)
    # the C family checks the list it receives again
    with pytest.raises(ValueError, match=rf"cpus\[0\]={unusable} is not a CPU this process may use"):
        _core.Kernel("chase", dict(core_config(), cpus=array.array("i", [unusable])))


def test_python_chooses_the_cpus_and_the_c_family_pins_to_them():
    needs_cpus(2)
    # walk_cpu first, then the others (memlab.placement.spread); the row says where each ran
    config = core_config(threads=2, walk_cpu=USABLE[-1], laps=1)
    assert list(config["cpus"]) == chase.thread_cpus(chase.ChaseParams(threads=2, walk_cpu=USABLE[-1]))
    assert config["cpus"][0] == USABLE[-1] and len(set(config["cpus"])) == 2
    with _core.Kernel("chase", config) as kernel:
        metrics = kernel.measure(target_ns=1_000_000, counters=False)["metrics"]
    assert [metrics["thread_0_cpu"], metrics["thread_1_cpu"]] == list(config["cpus"])
    # a list in the other order pins the other way round: C does not choose
    config["cpus"] = array.array("i", reversed(config["cpus"]))
    with _core.Kernel("chase", config) as kernel:
        metrics = kernel.measure(target_ns=1_000_000, counters=False)["metrics"]
    assert [metrics["thread_0_cpu"], metrics["thread_1_cpu"]] == list(config["cpus"])
    assert metrics["walk_cpu_used"] == config["cpus"][0]
    assert os.sched_getaffinity(0) == set(USABLE), "the process affinity was not restored"


def test_run_cpu_is_the_walking_threads_cpu_and_refuses_where_it_cannot_be():
    cpu = USABLE[-1]
    m = chase.run(working_set_bytes=1 << 16, laps=1, repeat=1, warmup=0, cpu=cpu)
    assert m.samples[0]["walk_cpu_used"] == cpu and m.context["cpu"] == cpu
    assert os.sched_getaffinity(0) == set(USABLE)
    needs_cpus(2)
    with pytest.raises(ValueError, match="cpu=0 does not apply to chase: its 2 walking threads need a CPU each"):
        chase.run(threads=2, cpu=0, repeat=1, warmup=0)
    with pytest.raises(ValueError, match=f"cpu={USABLE[0]} and walk_cpu={USABLE[1]} both place the walking thread"):
        chase.run(walk_cpu=USABLE[1], cpu=USABLE[0], repeat=1, warmup=0)


def test_a_thread_that_cannot_start_fails_cleanly_and_leaves_no_thread():
    needs_cpus(2)
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("under AddressSanitizer the capped address space stops the sanitizer itself")
    # In a child whose address space is capped, the worker's stack cannot be mapped.
    script = textwrap.dedent("""
        import os, resource
        from memlab import _core, chase
        config = chase._to_core(chase.ChaseParams(threads=2, working_set_bytes=1 << 16))
        kernel = _core.Kernel("chase", config)
        print("tasks", len(os.listdir("/proc/self/task")))
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 10), resource.RLIM_INFINITY))
        try:
            kernel.measure(target_ns=1_000_000, counters=False)
            print("measured")
        except MemoryError as error:
            print("MemoryError:", error)
        print("tasks", len(os.listdir("/proc/self/task")))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if lines[1] == "measured":
        pytest.skip("the capped address space still had room for a thread stack here")
    assert lines[1].startswith("MemoryError: cannot start walking thread 1 of threads=2")
    assert lines[0] == lines[2], "a thread outlived the failed start"


def test_threads_and_helper_thread_do_not_mix():
    with pytest.raises(ValueError, match="helper_thread=True needs threads=1"):
        chase.ChaseParams(threads=2, helper_thread=True)
    with pytest.raises(ValueError, match="helper_thread=1 needs threads=1"):
        _core.Kernel("chase", dict(core_config(), threads=2, helper_thread=True))


# ---- the helper thread's placement ------------------------------------------------

def test_the_helper_goes_to_the_smt_sibling_when_there_is_one_and_says_so():
    needs_cpus(2)
    cpu = USABLE[0]
    siblings = (smt_siblings(cpu) & set(USABLE)) - {cpu}
    values = one_sample(helper_thread=True, walk_cpu=cpu, npad=15, work_cycles=50, laps=1)
    assert values["walk_cpu_used"] == cpu
    assert values["smt_sibling_available"] == (1 if siblings else 0)
    if siblings:
        assert values["helper_cpu"] in siblings and values["helper_on_smt_sibling"] == 1
    else:
        assert values["helper_cpu"] != cpu and values["helper_on_smt_sibling"] == 0


# ---- NUMA placement ------------------------------------------------------------------

@pytest.mark.parametrize("node", nodes_with_memory())
def test_memory_bound_to_a_node_is_on_that_node(node):
    values = one_sample(memory_node=node, working_set_bytes=4 << 20, laps=1, check=True)
    assert values["memory_node_checked"] == node
    assert values["memory_policy_bound"] == 1  # get_mempolicy(MPOL_F_ADDR): MPOL_BIND to {node}
    assert values["pages_on_memory_node_fraction"] == 1.0  # move_pages: every page queried is there
    assert values["numa_nodes"] == len(nodes_with_memory())
    assert values["check_visits_fewest"] == 2


def test_hugetlb_pages_bound_to_a_node_are_on_that_node(reserved_hugetlb_2m):
    node = nodes_with_memory()[0]
    values = one_sample(memory_node=node, pages="hugetlb-2m", strict_pages=True, working_set_bytes=2 << 20,
                        laps=1, check=True)
    assert values["pages_granted_hugetlb"] == 1 and values["memory_policy_bound"] == 1
    assert values["pages_on_memory_node_fraction"] == 1.0 and values["check_visits_fewest"] == 2


def test_default_placement_is_reported_against_the_walking_node():
    values = one_sample(working_set_bytes=1 << 20, laps=1)
    assert "memory_policy_bound" not in values
    assert 0 <= values["pages_on_memory_node_fraction"] <= 1
    if len(nodes_with_memory()) == 1:
        assert values["pages_on_memory_node_fraction"] == 1.0 and values["numa_distance"] == 10


def test_a_node_without_memory_is_a_value_error_naming_memory_node():
    missing = next(n for n in range(1024) if n not in nodes_with_memory())
    with pytest.raises(ValueError, match=rf"memory_node={missing} is not a NUMA node with memory"):
        one_sample(memory_node=missing)


# ---- bad input -------------------------------------------------------------------------

BAD = [
    (dict(element_bytes=12), "element_bytes=12 is not a multiple of 8"),
    (dict(element_bytes=-8), "element_bytes=-8 is below the minimum 0"),
    (dict(element_bytes=128, npad=7), "element_bytes=128 means npad=15, not npad=7"),
    (dict(op="addpair", npad=7, pair_word=8), "pair_word=8, which must be in 2..7"),
    (dict(op="addpair", npad=1), r"pair_word=2, which must be in 2..1"),
    (dict(pair_word=1), "pair_word=1 is below the minimum 2"),
    (dict(op="addnextlast", npad=0), "op=addnextlast needs npad >= 1"),
    (dict(pointer_word=-1), "pointer_word=-1 is below the minimum 0"),
    (dict(pointer_word=8, npad=7), "pointer_word=8 is outside the element's words 0..7"),
    (dict(pointer_word=1, op="inc"), "pointer_word=1 needs op=follow"),
    (dict(pointer_word=1, prefetch_distance=2), "pointer_word=1 needs op=follow without prefetch"),
    (dict(misalign_bytes=64), "misalign_bytes=64 is above the maximum 63"),
    (dict(misalign_bytes=-1), "misalign_bytes=-1 is below the minimum 0"),
    (dict(element_distance=0), "element_distance=0 is below the minimum 1"),
    (dict(element_distance=2, layout="page_per_element"), "element_distance=2 needs layout=packed"),
    (dict(threads=0), "threads=0 is below the minimum 1"),
    (dict(threads=65), "threads=65 is above the maximum 64"),
    (dict(thread_lists="mine"), "thread_lists='mine' is not one of"),
    (dict(walk_cpu=-2), "walk_cpu=-2 is below the minimum -1"),
    (dict(memory_node=-2), "memory_node=-2 is below the minimum -1"),
    (dict(memory_node=1024), "memory_node=1024 is above the maximum 1023"),
]


@pytest.mark.parametrize("params,message", BAD, ids=[m for _, m in BAD])
def test_bad_new_parameters_raise_value_error_naming_them(params, message):
    with pytest.raises(ValueError, match=message):
        chase.ChaseParams(**params)


C_BAD = [
    (dict(op="addpair", npad=7, pair_word=9), "pair_word=9, which must be in 2..7"),
    (dict(pointer_word=9, npad=7), "pointer_word=9 is outside"),
    (dict(pointer_word=2, op="addnext0"), "pointer_word=2 needs op=follow"),
    (dict(misalign_bytes=64), "misalign_bytes"),
    (dict(element_distance=3, layout="page_per_element"), "element_distance=3 needs layout=packed"),
    (dict(threads=65), "threads"),
    (dict(thread_lists="mine"), "thread_lists"),
    (dict(memory_node=-5), "memory_node"),
    (dict(cpus=array.array("i", [-2])), r"cpus\[0\]=-2 is not a CPU this process may use"),
    (dict(cpus=array.array("i", [0, 0])), "cpus holds 2 CPUs; 1 are needed"),
    (dict(cpus=array.array("q", [0])), r"cpus has items of 8 bytes; int32 \(4\) is required"),
    (dict(threads=2, cpus=array.array("i", [])), "threads=2 need a CPU each: cpus lists them"),
    (dict(helper_thread=True, cpus=array.array("i", [-1, -1])), r"cpus\[0\]=-1 is not a CPU"),
]


@pytest.mark.parametrize("params,message", C_BAD, ids=[m for _, m in C_BAD])
def test_the_c_boundary_checks_the_new_parameters_again(params, message):
    with pytest.raises(ValueError, match=message):
        _core.Kernel("chase", dict(core_config(), **params))
