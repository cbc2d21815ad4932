"""memlab.system: exact counts, files never left behind, clear errors, the index."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from memlab import _core, system

REPO = Path(__file__).resolve().parent.parent


def one(test, **params):
    return system.run(test=test, repeat=1, warmup=0, **params).samples[0]


def assert_no_children():
    """Every process this test process started has been reaped."""
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


@contextlib.contextmanager
def sigint_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


# ---- exact counts --------------------------------------------------------------


@pytest.mark.parametrize("copies", [1, 2])
def test_spawn_fixed_iterations_reaps_every_child(copies):
    sample = one("spawn", iterations=40, copies=copies)
    assert sample["loops"] == 40 * copies
    assert sample["children_reaped"] == 40 * copies
    assert sample["loops_per_s"] > 0
    assert_no_children()


@pytest.mark.parametrize("copies", [1, 2])
def test_execl_fixed_iterations_counts_every_exec(copies):
    sample = one("execl", iterations=25, copies=copies)
    assert sample["loops"] == 25 * copies
    assert sample["execs_per_s"] == sample["loops_per_s"]
    assert_no_children()


def test_file_copy_fixed_iterations_copies_the_bytes_intact(tmp_path):
    # 4 KiB file, 1 KiB buffers: 10 buffers wrap the file twice and a half
    sample = one("file_copy", iterations=10, buffer_bytes=1024, max_blocks=4, directory=str(tmp_path))
    assert sample["loops"] == 10
    assert sample["GB_per_s"] * sample["elapsed_ns"] == pytest.approx(10 * 1024)
    assert sample["verified_bytes"] == 4096
    assert sample["mismatched_bytes"] == 0
    assert os.listdir(tmp_path) == []


def test_file_copy_partial_pass_verifies_the_prefix(tmp_path):
    sample = one("file_copy", iterations=3, buffer_bytes=256, max_blocks=500, copies=2,
                 directory=str(tmp_path))
    assert sample["loops"] == 6
    assert sample["verified_bytes"] == 2 * 3 * 256
    assert sample["mismatched_bytes"] == 0


def test_duration_runs_report_rates_and_unixbench_index():
    m = system.spawn(duration_s=0.1, repeat=2, warmup=0)
    for sample in m.samples:
        assert "result" not in sample and system.unixbench_metric("spawn") == "loops_per_s"
        assert sample["index"] == pytest.approx(sample["loops_per_s"] / 126.0 * 10)
        assert 0.1e9 <= sample["elapsed_ns"] < 5e9
        assert sample["children_reaped"] == sample["loops"]
    m = system.execl(duration_s=0.1, copies=2, repeat=1, warmup=0)
    assert m.median("index") == pytest.approx(m.median("execs_per_s") / 43.0 * 10)


def test_file_copy_presets_and_index(tmp_path):
    m = system.file_copy(preset="fsdisk", duration_s=0.1, directory=tmp_path, repeat=1, warmup=0)
    sample = m.samples[0]
    assert m.params["buffer_bytes"] == 4096 and m.params["max_blocks"] == 8000
    assert sample["KB_per_s"] == pytest.approx(sample["loops_per_s"] * 4)
    assert sample["index"] == pytest.approx(sample["KB_per_s"] / 5800.0 * 10)
    assert sample["mismatched_bytes"] == 0
    # no UnixBench baseline for other sizes: no index, still a result
    m = system.file_copy(buffer_bytes=512, max_blocks=64, duration_s=0.05, directory=tmp_path,
                         repeat=1, warmup=0)
    assert "index" not in m.samples[0] and m.median("KB_per_s") > 0


# ---- files never left behind, errors ---------------------------------------------


@pytest.mark.ctrl_c
def test_file_copy_interrupted_leaves_nothing(tmp_path):
    # KeyboardInterrupt, not the copy's natural end after its 20 s
    with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
        system.file_copy(preset="fsbuffer", duration_s=20, directory=tmp_path, repeat=1, warmup=0)
    assert os.listdir(tmp_path) == []
    assert_no_children()


@pytest.mark.ctrl_c
def test_spawn_interrupted_kills_and_reaps_workers():
    with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
        system.spawn(duration_s=20, copies=2, repeat=1, warmup=0)
    assert_no_children()


def test_file_copy_killed_process_leaves_no_file(tmp_path):
    code = ("import memlab.system as s, sys; "
            "s.file_copy(preset='fsbuffer', duration_s=30, directory=sys.argv[1], repeat=1, warmup=0)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)])
    try:
        time.sleep(1.5)
        assert child.poll() is None
        assert os.listdir(tmp_path) == []  # unnamed while in use
    finally:
        child.kill()
        child.wait()
    assert os.listdir(tmp_path) == []


@contextlib.contextmanager
def tmpfs(tmp_path, options):
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "memlab-test", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_file_copy_unwritable_directory_is_oserror(tmp_path):
    if os.geteuid() == 0:
        with tmpfs(tmp_path, "ro,size=64k") as directory, pytest.raises(OSError) as info:
            one("file_copy", iterations=5, directory=str(directory))
        assert info.value.errno == errno.EROFS
    else:
        directory = tmp_path / "locked"
        directory.mkdir(mode=0o500)
        with pytest.raises(OSError) as info:
            one("file_copy", iterations=5, directory=str(directory))
        assert info.value.errno == errno.EACCES
    assert "directory=" in str(info.value) and str(directory) in str(info.value)


@pytest.mark.parametrize("bad, code", [("missing", errno.ENOENT), ("file", errno.ENOTDIR)])
def test_file_copy_missing_directory_is_oserror(tmp_path, bad, code):
    target = tmp_path / "nothing-here"
    if bad == "file":
        target.write_text("x")
    with pytest.raises(OSError) as info:
        one("file_copy", iterations=5, directory=str(target))
    assert info.value.errno == code


def test_file_copy_full_disk_while_writing_the_source(tmp_path):
    with tmpfs(tmp_path, "size=256k") as directory:
        with pytest.raises(OSError) as info:
            one("file_copy", iterations=5, buffer_bytes=256, max_blocks=500, directory=str(directory))
        assert info.value.errno == errno.ENOSPC
        assert "source file" in str(info.value)
        assert os.listdir(directory) == []
        assert os.statvfs(directory).f_bfree == os.statvfs(directory).f_blocks  # space given back


def test_file_copy_full_disk_while_copying(tmp_path):
    # the 500 KiB source fits in 768 KiB, its copy does not
    with tmpfs(tmp_path, "size=768k") as directory:
        with pytest.raises(OSError) as info:
            one("file_copy", duration_s=5, buffer_bytes=256, max_blocks=500, directory=str(directory))
        assert info.value.errno == errno.ENOSPC
        assert "write" in str(info.value)
        assert os.listdir(directory) == []
        assert_no_children()


def test_file_copy_file_size_limit_is_oserror(tmp_path):
    # RLIMIT_FSIZE works for any user; CPython ignores SIGXFSZ, so write() fails with EFBIG
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100 * 1024, hard))
    try:
        with pytest.raises(OSError) as info:
            one("file_copy", iterations=5, buffer_bytes=256, max_blocks=500, directory=str(tmp_path))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert info.value.errno == errno.EFBIG
    assert os.listdir(tmp_path) == []


# ---- the helper program ------------------------------------------------------------


def test_helper_is_installed_next_to_the_package():
    path = system.helper_path()
    assert path.parent == Path(system.__file__).resolve().parent / "_bin"
    assert os.access(path, os.X_OK)


def test_missing_helper_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(system, "__file__", str(tmp_path / "system.py"))
    with pytest.raises(FileNotFoundError, match="reinstall memlab"):
        system.helper_path()
    with pytest.raises(FileNotFoundError):
        system.execl(iterations=1)


def core_config(**changes):
    config = {"test": "spawn", "duration_s": 0.1, "iterations": 1, "copies": 1,
              "buffer_bytes": 1024, "max_blocks": 2000, "directory": b"\0",
              "helper": os.fsencode(str(system.helper_path())) + b"\0"}
    config.update(changes)
    return config


def test_c_core_checks_the_helper(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"not a program")
    plain.chmod(0o644)
    with pytest.raises(OSError, match="not an executable"):
        _core.Kernel("system", core_config(helper=os.fsencode(str(plain)) + b"\0"))
    plain.chmod(0o755)  # executable bits but no program: the worker's exec fails
    with _core.Kernel("system", core_config(helper=os.fsencode(str(plain)) + b"\0")) as kernel:
        with pytest.raises(OSError, match="exec of the helper") as info:
            kernel.measure(target_ns=0, counters=False)
    assert info.value.errno == errno.ENOEXEC
    assert_no_children()
    with pytest.raises(ValueError, match="absolute path"):
        _core.Kernel("system", core_config(helper=b"memlab_system_helper\0"))
    with pytest.raises(ValueError, match="one NUL byte"):
        _core.Kernel("system", core_config(helper=b"/bin/true"))
    with pytest.raises(ValueError, match="must not be empty"):
        _core.Kernel("system", core_config(helper=b"\0"))


def test_c_core_checks_file_copy_sizes(tmp_path):
    config = core_config(test="file_copy", buffer_bytes=8192, max_blocks=4,
                         directory=os.fsencode(str(tmp_path)) + b"\0")
    with pytest.raises(ValueError, match="buffer_bytes=8192 is above the file size"):
        _core.Kernel("system", config)


def _can_build_wheels_here() -> bool:
    import importlib.util

    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    return importlib.util.find_spec("wheel") is not None or (major, minor) >= (70, 1)


@pytest.mark.slow
def test_helper_found_after_a_regular_install(tmp_path):
    """Not only in the source tree: a wheel install (pip install .) carries it."""
    target = tmp_path / "site"
    if _can_build_wheels_here():
        # pip install . without fetching build dependencies again
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(REPO)],
                       check=True, capture_output=True)
    else:
        # the same build_ext a wheel build runs, into a build directory
        subprocess.run([sys.executable, "setup.py", "--quiet", "build", "--build-base",
                        str(tmp_path / "build"), "--build-lib", str(target)],
                       cwd=REPO, check=True, capture_output=True)
    assert os.access(target / "memlab" / "_bin" / "memlab_system_helper", os.X_OK)
    # every module and subpackage (memlab.catalogue) and the kernel header travel too: an editable
    # install, as the test run's own, would hide one the package configuration leaves out
    shipped = sorted(str(path.relative_to(REPO)) for pattern in ("memlab/**/*.py", "memlab/include/*.h")
                     for path in REPO.glob(pattern) if "__pycache__" not in path.parts)
    assert "memlab/catalogue/core.py" in shipped and "memlab/include/memlab_kernel.h" in shipped
    assert [name for name in shipped if not (target / name).is_file()] == []
    code = ("import memlab.system as s; m = s.execl(iterations=3, repeat=1, warmup=0); "
            "print(s.helper_path()); print(int(m.samples[0]['loops']))")
    env = dict(os.environ, PYTHONPATH=str(target))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)
    helper, loops = done.stdout.split()
    assert Path(helper).is_relative_to(target)
    assert loops == "3"


# ---- parameters --------------------------------------------------------------------


@pytest.mark.parametrize("params, name", [
    ({"duration_s": 0}, "duration_s"),
    ({"duration_s": -1.0}, "duration_s"),
    ({"duration_s": float("nan")}, "duration_s"),
    ({"copies": 0}, "copies"),
    ({"copies": 1000}, "copies"),
    ({"buffer_bytes": 0}, "buffer_bytes"),
    ({"buffer_bytes": -256}, "buffer_bytes"),
    ({"max_blocks": 0}, "max_blocks"),
    ({"buffer_bytes": 4096, "max_blocks": 2}, "buffer_bytes"),
    ({"iterations": -1}, "iterations"),
    ({"test": "dhrystone"}, "test"),
    ({"directory": 5}, "directory"),
])
def test_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=name):
        system.SystemParams(**params)


def test_bad_arguments_of_the_functions():
    with pytest.raises(ValueError, match="duration_s"):
        system.spawn(duration_s=0)
    with pytest.raises(ValueError, match="copies"):
        system.execl(copies=0)
    with pytest.raises(ValueError, match="buffer_bytes"):
        system.file_copy(buffer_bytes=0)
    with pytest.raises(ValueError, match="preset"):
        system.file_copy(preset="fsfast")


# ---- UnixBench's index ------------------------------------------------------------


def row(test, copies, index, rate=1.0, **extra):
    return {"family": "system", "test": test, "copies": copies, "index": index,
            system.unixbench_metric(test): rate, **extra}


def test_index_is_the_geometric_mean_of_the_tests():
    rows = [row("spawn", 1, 100.0), row("execl", 1, 400.0),
            row("file_copy", 1, 1000.0, buffer_bytes=256, max_blocks=500),
            row("file_copy", 1, 1e9, buffer_bytes=300, max_blocks=500),  # no baseline: ignored
            row("spawn", 2, 50.0), row("spawn", 2, 200.0)]           # a test twice: geometric mean
    assert system.index(rows, copies=1) == pytest.approx((100 * 400 * 1000) ** (1 / 3))
    assert system.index(rows, copies=2) == pytest.approx(100.0)
    assert system.index_by_copies(rows) == pytest.approx({1: (4e7) ** (1 / 3), 2: 100.0})
    with pytest.raises(ValueError, match="copies=\\[1, 2\\]"):
        system.index(rows)
    with pytest.raises(ValueError, match="copies=3"):
        system.index(rows, copies=3)
    with pytest.raises(ValueError, match="no row"):
        system.index([row("spawn", 1, math.nan)])


def test_index_of_a_real_run_and_its_report():
    from memlab.dataset import Dataset

    measurements = [system.spawn(duration_s=0.05, repeat=1, warmup=0),
                    system.execl(duration_s=0.05, repeat=1, warmup=0)]
    dataset = Dataset([m.to_row() for m in measurements])
    expected = math.sqrt(measurements[0].median("index") * measurements[1].median("index"))
    assert system.index(dataset) == pytest.approx(expected)
    assert system.index(measurements) == pytest.approx(expected)
    text = system.report(dataset)
    assert "Process Creation" in text and "Execl Throughput" in text
    assert f"{expected:.1f}" in text.splitlines()[-1]


def test_unixbench_tables():
    assert {t.baseline for t in system.UNIXBENCH_TESTS.values()} == {43.0, 126.0, 3960.0, 1655.0, 5800.0}
    assert system.FILE_COPY_PRESETS == {"fstime": {"buffer_bytes": 1024, "max_blocks": 2000},
                                        "fsbuffer": {"buffer_bytes": 256, "max_blocks": 500},
                                        "fsdisk": {"buffer_bytes": 4096, "max_blocks": 8000}}


def test_quick_sweep_is_declared():
    sweep = system.FAMILY.sweep("quick")
    assert len(sweep.points) == 5
    assert {p["test"] for p in sweep.points} == set(system.TESTS)


def test_default_directory_is_the_temporary_directory():
    config = system._to_core(system.SystemParams(test="file_copy"))
    assert config["directory"] == os.fsencode(os.path.abspath(tempfile.gettempdir())) + b"\0"
