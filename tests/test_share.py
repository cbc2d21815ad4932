"""memlab.share: exact counts for atomic increments, lost updates reported, errors."""

from __future__ import annotations

import array
import os

import pytest

from memlab import _core, placement, share
from memlab.dataset import Dataset
from conftest import interrupt_measure, memlab_thread_count

# Compiled kernels whose instructions depend on the -march level of the build.
pytestmark = pytest.mark.build

CPUS = len(os.sched_getaffinity(0))
THREADS = min(2, CPUS)


def one(**params):
    return share.run(repeat=1, warmup=0, **params).samples[0]


@pytest.mark.parametrize("disp", [0, 1, 8, 16])
def test_atomic_increments_end_with_exactly_threads_times_n(disp):
    sample = one(threads=THREADS, disp_longs=disp, atomic=True, increments=200_000)
    assert sample["final_count"] == THREADS * 200_000
    assert sample["expected_count"] == THREADS * 200_000
    assert sample["lost_updates"] == 0
    assert sample["increments_per_thread"] == 200_000


@pytest.mark.parametrize("disp", [1, 2, 8])
def test_plain_increments_of_own_counters_lose_nothing(disp):
    # distinct counters, even in one cache line: coherence keeps every update
    sample = one(threads=THREADS, disp_longs=disp, atomic=False, increments=300_000)
    assert sample["final_count"] == THREADS * 300_000
    assert sample["lost_updates"] == 0


def test_plain_increments_of_one_counter_report_lost_updates():
    sample = one(threads=THREADS, disp_longs=0, atomic=False, increments=2_000_000)
    expected = THREADS * 2_000_000
    assert sample["expected_count"] == expected
    assert 1 <= sample["final_count"] <= expected
    assert sample["lost_updates"] == expected - sample["final_count"]
    assert sample["lost_fraction"] == pytest.approx(sample["lost_updates"] / expected)


def test_units_and_per_thread_time():
    sample = one(threads=THREADS, disp_longs=8, atomic=True, increments=100_000)
    assert sample["ns_per_increment"] == pytest.approx(sample["elapsed_ns"] / (THREADS * 100_000))
    assert sample["ns_per_increment_per_thread"] == pytest.approx(sample["elapsed_ns"] / 100_000)
    assert sample["pinned"] == 1


def test_adaptive_increments_reach_the_target():
    m = share.run(threads=1, disp_longs=0, atomic=True, increments=0, repeat=2, warmup=0,
                  target_seconds=0.02)
    for sample in m.samples:
        n = sample["increments_per_thread"]
        assert n >= 1
        assert sample["final_count"] == n
        assert sample["elapsed_ns"] >= 0.02e9 / 4


def test_unpinned_threads_may_outnumber_cpus():
    sample = one(threads=CPUS + 2, disp_longs=8, atomic=True, increments=20_000, placement="unpinned")
    assert sample["final_count"] == (CPUS + 2) * 20_000
    assert sample["pinned"] == 0


def test_pinning_more_threads_than_cpus_is_valueerror():
    with pytest.raises(ValueError, match=f"threads={CPUS + 1} is above the {CPUS} CPUs"):
        share.ShareParams(threads=CPUS + 1, placement="spread")
    # the C core checks the CPU list it receives: one per thread, each usable, none twice
    usable = sorted(os.sched_getaffinity(0))
    config = {"threads": CPUS + 1, "disp_longs": 8, "atomic": True, "atomic_op": "lock_add", "increments": 10,
              "cpus": array.array("i", usable + usable[:1])}
    with pytest.raises(ValueError, match=rf"cpus\[{CPUS}\]={usable[0]} is also cpus\[0\]"):
        _core.Kernel("share", config)
    with pytest.raises(ValueError, match=f"cpus holds {CPUS} CPUs; {CPUS + 1} are needed"):
        _core.Kernel("share", dict(config, cpus=array.array("i", usable)))
    with pytest.raises(ValueError, match="missing parameter 'cpus' for share"):
        _core.Kernel("share", {k: v for k, v in config.items() if k != "cpus"})


def test_the_old_pin_is_taken_as_placement_and_old_rows_load_with_it(tmp_path):
    for old, new in ((True, "spread"), (False, "unpinned"), ("false", "unpinned"), ("True", "spread")):
        with pytest.warns(DeprecationWarning, match="share: parameter pin= is now placement=") as caught:
            assert share.FAMILY.params(threads=1, pin=old).placement == new
        assert len(caught) == 1
    with pytest.raises(ValueError, match="pin= and placement= are one parameter of share"):
        share.FAMILY.params(pin=True, placement="spread")
    # a file written before the rename: its pin column loads as placement, and runs again as it did
    Dataset([{"family": "share", "threads": 1, "pin": False, "t": 1.0, "t_samples": [1.0]}],
            {"family": "share", "param_names": ["threads", "pin"]}).save(tmp_path / "old.csv")
    loaded = Dataset.load(tmp_path / "old.csv")
    assert loaded.param_names == ["threads", "placement"] and "pin" not in loaded.rows[0]
    row = {name: loaded.rows[0][name] for name in loaded.param_names}
    assert share.FAMILY.params(row).placement == "unpinned"


def test_python_chooses_the_cpus_and_the_c_family_pins_to_them():
    usable = sorted(os.sched_getaffinity(0))
    assert share.thread_cpus(share.ShareParams(threads=THREADS)) == placement.choose("spread", THREADS)
    assert share.thread_cpus(share.ShareParams(threads=CPUS + 1, placement="unpinned")) == [-1] * (CPUS + 1)
    if CPUS >= 2:  # any placement of memlab.placement's: the list is the chooser's
        assert share.thread_cpus(share.ShareParams(threads=2, placement="cores")) == placement.choose("cores", 2)
    config = {"threads": 1, "disp_longs": 8, "atomic": True, "atomic_op": "lock_add", "increments": 10_000,
              "cpus": array.array("i", [usable[-1]])}
    with _core.Kernel("share", config) as kernel:
        metrics = kernel.measure(target_ns=1_000_000, counters=False)["metrics"]
    assert metrics["pinned"] == 1 and metrics["final_count"] == 10_000
    m = share.run(threads=1, increments=10_000, repeat=1, warmup=0, cpu=usable[-1])
    assert m.context["cpu"] == usable[-1] and m.median("pinned") == 1
    if CPUS >= 2:
        with pytest.raises(ValueError, match=f"cpu={usable[0]} does not apply to share: its 2 threads need a CPU each"):
            share.run(threads=2, cpu=usable[0], repeat=1, warmup=0)


@pytest.mark.parametrize("params, name", [
    ({"threads": 0}, "threads"),
    ({"disp_longs": -1}, "disp_longs"),
    ({"disp_longs": 1 << 21}, "disp_longs"),
    ({"increments": -5}, "increments"),
    ({"atomic": "yes"}, "atomic"),
    ({"placement": "numa"}, "placement='numa' is not one of 'spread', 'cores'"),
    ({"placement": "one_cpu"}, "placement='one_cpu' is not one of"),
])
def test_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=name):
        share.ShareParams(**params)


def test_penalty_is_a_ratio_with_spread():
    a = share.run(threads=1, disp_longs=1, increments=50_000, repeat=3, warmup=0)
    b = share.run(threads=1, disp_longs=8, increments=50_000, repeat=3, warmup=0)
    p = share.penalty(a, b)
    assert p["ratio_min"] <= p["ratio"] <= p["ratio_max"]
    assert share.penalty(a, a)["ratio"] == 1.0
    with pytest.raises(ValueError, match="metric"):
        share.penalty(a, b, metric="nothing")


def test_interleaved_penalty_alternates_and_pairs_rounds():
    p = share.false_sharing_penalty(threads=1, increments=20_000, rounds=3, warmup=0,
                                    metric="cpu_ns_per_increment")
    assert p["rounds"] == 3
    assert p["ratio_min"] <= p["paired_ratio_median"] <= p["ratio_max"]
    assert p["ratio"] > 0 and p["ratio_of_fastest"] > 0
    with pytest.raises(ValueError, match="rounds"):
        share.false_sharing_penalty(rounds=0)


def test_on_cpu_time_is_reported():
    sample = one(threads=THREADS, disp_longs=8, atomic=True, increments=100_000)
    assert 0 < sample["cpu_ns_per_increment"]
    # on-CPU time of all threads cannot exceed threads x wall time (plus clock granularity)
    assert sample["cpu_ns_per_increment"] <= sample["ns_per_increment"] * THREADS * 1.05 + 1
    assert 0 < sample["mean_threads_on_cpu"] <= THREADS * 1.05


def test_quick_sweep_is_declared():
    sweep = share.FAMILY.sweep("quick")
    assert {p["disp_longs"] for p in sweep.points} == {0, 1, 8}


def test_a_thousand_unpinned_threads_start_together_and_count_exactly():
    """They wait for the start asleep (before: spinning, 15 s on two CPUs); every increment lands."""
    sample = one(threads=1024, disp_longs=1, atomic=True, increments=1000, placement="unpinned")
    assert sample["final_count"] == 1024 * 1000 and sample["lost_updates"] == 0


def test_counters_beyond_the_available_memory_are_refused_before_allocating():
    """threads=1024 disp=2^20 zeroes 8 GiB; with less memory than that the kernel says so."""
    import subprocess
    import sys

    if "-fsanitize=address" in _core.build_info()["cflags"]:
        pytest.skip("AddressSanitizer reserves terabytes of address space: a capped one cannot start it")

    code = (
        "import resource; from memlab import _core\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "try:\n"
        "    _core.Kernel('share', {'threads': 1024, 'disp_longs': 1 << 20, 'atomic': True, 'atomic_op': 'lock_add',"
        " 'increments': 1,"
        " 'cpus': __import__('array').array('i', [-1] * 1024)})\n"
        "except MemoryError as error:\n"
        "    print('MemoryError:', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MemoryError:" in result.stdout, result.stderr
    assert "1024 threads" in result.stdout or "available" in result.stdout


def test_the_memory_check_refuses_what_memavailable_cannot_hold(tmp_path):
    """The check itself (not the allocation): run where /proc/meminfo says 1 GiB is available."""
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to show the kernel a smaller MemAvailable")
    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal:        2097152 kB\nMemFree:         1048576 kB\nMemAvailable:    1048576 kB\n")
    code = ("from memlab import _core\n"
            "try:\n"
            "    _core.Kernel('share', {'threads': 1024, 'disp_longs': 1 << 20, 'atomic': True, 'atomic_op': 'lock_add',"
        " 'increments': 1,"
            " 'cpus': __import__('array').array('i', [-1] * 1024)})\n"
            "except MemoryError as error:\n"
            "    print('MemoryError:', error)\n")
    script = f"mount --bind {fake} /proc/meminfo && exec {sys.executable} -c \"$0\""
    result = subprocess.run(["unshare", "-m", "sh", "-c", script, code], capture_output=True, text=True,
                            timeout=120)
    if "mount" in result.stderr or result.returncode not in (0, 1):
        pytest.skip(f"cannot bind-mount a fake /proc/meminfo here: {result.stderr.strip()[:200]}")
    assert "MemoryError: the counters (threads - 1) x disp longs apart needs" in result.stdout, result.stderr
    assert "of memory is available" in result.stdout


@pytest.mark.ctrl_c
def test_ctrl_c_while_threads_are_created_stops_promptly():
    before = memlab_thread_count()
    kernel = _core.Kernel("share", {"threads": 1024, "disp_longs": 8, "atomic": True, "atomic_op": "lock_add",
                                    "increments": 1 << 40, "cpus": array.array("i", [-1] * 1024)})
    interrupt_measure(kernel, after_s=0.2)  # KeyboardInterrupt well before the sample's 30 s deadline
    assert memlab_thread_count() == before


# ---- figure 6.12: the atomic increment forms -----------------------------------------


@pytest.mark.parametrize("op", share.ATOMIC_OPS)
@pytest.mark.parametrize("disp", [0, 1, 8])
def test_every_atomic_form_counts_exactly(op, disp):
    sample = one(threads=THREADS, disp_longs=disp, atomic=True, atomic_op=op, increments=100_000)
    assert sample["final_count"] == THREADS * 100_000
    assert sample["lost_updates"] == 0
    if op != "lock_add":
        # on one counter the threads together were handed 0 .. 2n-1 (1 .. 2n) once each
        assert sample["returned_values_exact"] == 1
    else:
        assert "returned_values_exact" not in sample


@pytest.mark.parametrize("op", share.ATOMIC_OPS)
def test_atomic_forms_stay_exact_with_more_threads_than_cpus(op):
    # preempted mid-loop, threads interleave at random points: an atomic form still loses nothing
    threads = CPUS + 2
    sample = one(threads=threads, disp_longs=0, atomic=True, atomic_op=op, increments=30_000, placement="unpinned")
    assert sample["final_count"] == threads * 30_000
    assert sample.get("returned_values_exact", 1) == 1


@pytest.mark.parametrize("op", ["cas", "sync_cas"])
def test_compare_and_swap_reports_its_retries(op):
    sample = one(threads=1, disp_longs=0, atomic=True, atomic_op=op, increments=50_000)
    assert sample["cas_failures_per_increment"] == 0  # alone, a swap never finds the counter changed
    sample = one(threads=THREADS, disp_longs=0, atomic=True, atomic_op=op, increments=50_000)
    assert sample["cas_failures_per_increment"] >= 0


def test_plain_increments_read_as_atomic_op_plain():
    assert share.ShareParams(atomic=False).atomic_op == "plain"
    assert share.ShareParams(atomic=True).atomic_op == "lock_add"
    assert share.ShareParams(atomic_op="cas").atomic_op == "cas"
    with pytest.raises(ValueError, match="atomic_op='cas' needs atomic=True"):
        share.ShareParams(atomic=False, atomic_op="cas")
    with pytest.raises(ValueError, match="atomic_op='plain' needs atomic=False"):
        share.ShareParams(atomic=True, atomic_op="plain")
    with pytest.raises(ValueError, match="atomic_op='xadd' is not one of"):
        share.ShareParams(atomic_op="xadd")
    # the C core refuses the same mismatches
    config = {"threads": 1, "disp_longs": 8, "increments": 10, "cpus": array.array("i", [-1])}
    with pytest.raises(ValueError, match="atomic_op=cas needs atomic=True"):
        _core.Kernel("share", dict(config, atomic=False, atomic_op="cas"))
    with pytest.raises(ValueError, match="atomic_op=plain needs atomic=False"):
        _core.Kernel("share", dict(config, atomic=True, atomic_op="plain"))


def _symbol(name):
    from disasm import function_instructions
    instructions = function_instructions(_core.__file__, name)
    if instructions is None:
        pytest.skip(f"objdump or the symbol {name} is missing (a stripped build)")
    return instructions


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 instruction names")
@pytest.mark.parametrize("function, instruction", [
    ("lock_add_increments", "lock add"),
    ("add_fetch_increments", "lock xadd"),
    ("fetch_add_increments", "lock xadd"),
    ("sync_add_and_fetch_increments", "lock xadd"),
    ("sync_fetch_and_add_increments", "lock xadd"),
    ("cas_increments", "lock cmpxchg"),
    ("sync_cas_increments", "lock cmpxchg"),
])
def test_each_form_compiles_to_the_instruction_the_source_names(function, instruction):
    locked = [line.split()[1] for line in _symbol(function) if line.startswith("lock ")]
    # exactly one kind of locked instruction in the loop: the form's own
    assert {mnemonic.rstrip("lq") for mnemonic in locked} == {instruction.split()[1]}, locked


def test_compare_forms_interleaves_and_pairs_rounds():
    result = share.compare_forms(threads=1, forms=("fetch_add", "cas"), base="fetch_add", rounds=3,
                                 increments=20_000, warmup=0)
    assert set(result) == {"fetch_add", "cas"}
    assert result["fetch_add"]["ratio"] == 1.0
    for r in result.values():
        assert r["min"] <= r["median"] <= r["max"] and r["rounds"] == 3
        assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"]
    with pytest.raises(ValueError, match="atomic_op='plain' is not one of"):
        share.compare_forms(forms=("plain",))


# ---- figures 6.10/6.11: threads on x ---------------------------------------------------


def test_false_sharing_sweep_runs_threads_one_to_the_cpus_per_placement():
    sweep = share.FAMILY.sweep("false_sharing")
    assert sorted({p["threads"] for p in sweep.points}) == list(range(1, min(4, CPUS) + 1))
    assert {p["disp_longs"] for p in sweep.points} >= {0, 1, 8}
    assert {p["atomic"] for p in sweep.points} == {False, True}
    quick = share.FAMILY.sweep("false_sharing_quick")
    assert sorted({p["threads"] for p in quick.points}) == share.thread_counts()


def test_atomic_ops_sweep_has_every_form_on_one_counter():
    sweep = share.FAMILY.sweep("atomic_ops")
    assert {p["atomic_op"] for p in sweep.points} == set(share.ATOMIC_OPS)
    assert {p["disp_longs"] for p in sweep.points} == {0}
    assert {p["threads"] for p in sweep.points} == {1, min(4, CPUS)}


def test_sharing_ratios_and_placements():
    from memlab.dataset import Dataset
    rows = [{"family": "share", "threads": t, "disp_longs": d, "atomic": True, "atomic_op": "lock_add",
             "ns_per_increment_per_thread": v} for t, d, v in ((2, 1, 9.0), (2, 8, 3.0), (3, 1, 5.0))]
    assert share.sharing_ratios(Dataset(rows)) == {("lock_add", 2): 3.0}
    # rows written before atomic_op existed read their form from atomic
    old = [{k: v for k, v in r.items() if k != "atomic_op"} for r in rows]
    assert share.sharing_ratios(Dataset(old)) == {("lock_add", 2): 3.0}
    assert share.counter_position(2) == "one cache line, 2 longs apart"
    assert share.counter_position(16) == "a line each, 16 longs apart"
    with pytest.raises(ValueError, match="disp_longs"):
        share.counter_position(-1)
