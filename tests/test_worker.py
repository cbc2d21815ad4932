"""The worker process (memlab/worker.py): one run of one point in a fresh Python child, its
failures named, its timeout and Ctrl-C ending it without an orphan."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from memlab import worker
from memlab.dataset import RUN_COLUMN, context_column

TESTS = Path(__file__).resolve().parent
QUICK = {"repeat": 2, "warmup": 0}
POINT = {"budget_ns": 2_000_000}


@pytest.fixture
def preludes(monkeypatch):
    """The child finds tests/worker_preludes.py as ``worker_preludes``."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    return "worker_preludes"


def gone(pid: int) -> bool:
    """Whether ``pid`` is no longer a process (reaped: not even a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_in_a_worker_returns_its_row_with_the_run_index(tmp_path, preludes):
    note = tmp_path / "pid"
    result = worker.measure_run("calibrate", POINT, QUICK, run=3, prelude=f"{preludes}:note_pid",
                                prelude_args={"path": str(note)})
    [row] = result.rows
    assert row["family"] == "calibrate" and row[RUN_COLUMN] == 3
    assert row["repeat"] == 2 and len(row["core_GHz_samples"]) == 2
    assert int(note.read_text()) == result.pid == row[context_column("worker_pid")] != os.getpid()
    assert gone(result.pid)


def test_each_run_is_a_fresh_process():
    pids = {worker.measure_run("calibrate", POINT, QUICK, run=r).pid for r in range(2)}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_child_killed_by_a_signal_is_a_failure_naming_it(tmp_path, preludes):
    note = tmp_path / "pid"
    with pytest.raises(worker.WorkerFailed, match="killed by SIGSEGV") as caught:
        worker.measure_run("calibrate", POINT, QUICK, run=1, prelude=f"{preludes}:crash",
                           prelude_args={"path": str(note)})
    assert caught.value.reason == "was killed by SIGSEGV" and caught.value.run == 1
    assert str(caught.value).startswith("calibrate budget_ns=2000000 run 1: ")
    assert gone(int(note.read_text()))


def test_a_child_exiting_non_zero_is_a_failure_with_its_status(tmp_path, preludes):
    with pytest.raises(worker.WorkerFailed, match="exited with status 7 and no result"):
        worker.measure_run("calibrate", POINT, QUICK, prelude=f"{preludes}:exit_with",
                           prelude_args={"path": str(tmp_path / "pid"), "status": 7})


def test_an_exception_in_the_child_is_a_failure_naming_it():
    with pytest.raises(worker.WorkerFailed, match="raised ValueError: .*budget_ns") as caught:
        worker.measure_run("calibrate", {"budget_ns": -1}, QUICK)
    assert "Traceback" in caught.value.stderr


def test_a_prelude_that_cannot_be_imported_is_a_failure():
    with pytest.raises(worker.WorkerFailed, match="raised ModuleNotFoundError"):
        worker.measure_run("calibrate", POINT, QUICK, prelude="memlab_no_such_module:setup")


def test_a_timeout_kills_the_child(tmp_path, preludes):
    note = tmp_path / "pid"
    with pytest.raises(worker.WorkerFailed, match=r"timed out after 2 s \(killed\)"):
        worker.measure_run("calibrate", POINT, QUICK, prelude=f"{preludes}:hang",
                           prelude_args={"path": str(note)}, timeout_seconds=2)
    # on a loaded machine the child may still be importing memlab when its time is up: then
    # it never wrote its pid, and the process guard's check of children is the proof
    assert not note.exists() or gone(int(note.read_text()))


@pytest.mark.ctrl_c
def test_ctrl_c_in_the_parent_stops_and_reaps_the_child(tmp_path, preludes):
    note = tmp_path / "pid"

    def interrupt_once_started() -> None:
        deadline = time.monotonic() + 30
        while not note.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt_once_started)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            worker.measure_run("calibrate", POINT, QUICK, prelude=f"{preludes}:hang",
                               prelude_args={"path": str(note)}, timeout_seconds=60)
    finally:
        sender.join()
    assert gone(int(note.read_text()))


@pytest.mark.parametrize("kwargs, message", [
    ({"prelude": "no_function"}, "prelude='no_function' must be 'module:function'"),
    ({"prelude": "m:not an identifier"}, "must be 'module:function'"),
    ({"prelude_args": {"x": 1}}, "prelude_args needs a prelude"),
    ({"prelude": "m:f", "prelude_args": [1]}, r"prelude_args=\[1\] must be a dict"),
    ({"prelude": "m:f", "prelude_args": {"x": object()}}, "must be JSON"),
    ({"run": -1}, "run=-1 must be a whole number from 0"),
    ({"timeout_seconds": 0}, "timeout_seconds=0 must be a positive number"),
])
def test_bad_requests_are_refused_before_a_child_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        worker.measure_run("calibrate", POINT, QUICK, **kwargs)


def test_the_worker_command_says_its_usage():
    assert worker.main([]) == 2
