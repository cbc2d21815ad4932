"""The one process runner (csrc/children.c): one policy for every family that uses it.

Each case runs a family whose samples fork worker processes (the pipe
transfer, the pipe ping-pong, UnixBench's spawn and file copy) in a Python
process of its own session, as a terminal would, and checks the policy from
outside: a worker holds none of the parent's descriptors, Ctrl-C sent to the
whole process group stops the run with KeyboardInterrupt and leaves no
worker, and a worker dies with its parent.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

START = """
import os, sys
marker_read, marker_write = os.pipe()
os.set_inheritable(marker_write, True)  # would even survive an exec
print(os.readlink(f"/proc/self/fd/{marker_write}"), flush=True)
"""

CASES = {
    "pipe": "from memlab import pipe\n"
            "pipe.run(total_bytes=1 << 44, timeout_s=120, repeat=1, warmup=0, counters=False)",
    "pipe_latency": "from memlab import pipe\n"
                    "pipe.latency(round_trips=1 << 40, timeout_s=120, repeat=1, warmup=0, counters=False)",
    "system_spawn": "from memlab import system\n"
                    "system.spawn(duration_s=120, copies=2, repeat=1, warmup=0)",
    "system_file_copy": "from memlab import system\n"
                        "system.file_copy(buffer_bytes=1024, max_blocks=256, duration_s=120, copies=2,\n"
                        "                 directory=sys.argv[1], repeat=1, warmup=0)",
}


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:
            pass
    return found


def descriptors(pid: int) -> list[str]:
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return links


def ended(pid: int) -> bool:
    """Gone, or a zombie its new parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def start_case(case: str, tmp_path) -> tuple[subprocess.Popen, str, list[int]]:
    script = START + CASES[case]
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    marker = process.stdout.readline().strip()
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and process.poll() is None:
        workers = children_of(process.pid)
        if len(workers) >= 2:
            break
        time.sleep(0.01)
    if len(workers) < 2:
        process.kill()
        _, errors = process.communicate()
        pytest.fail(f"{case}: no two workers appeared: {errors[-2000:]}")
    return process, marker, workers


def check_no_inherited_descriptors(workers: list[int], marker: str) -> None:
    for pid in workers:
        try:
            links = descriptors(pid)
        except OSError:
            continue  # ended meanwhile
        assert marker not in links, (pid, links)
        assert len(links) <= 8, (pid, links)  # stdio, its own ends, the reports, the start pipes


@pytest.mark.parametrize("case", sorted(CASES))
def test_ctrl_c_to_the_process_group_stops_the_run_and_every_worker(case, tmp_path):
    process, marker, workers = start_case(case, tmp_path)
    try:
        time.sleep(0.2)
        check_no_inherited_descriptors(workers, marker)
        started = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
        _, errors = process.communicate(timeout=30)
        assert time.monotonic() - started < 10
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "KeyboardInterrupt" in errors, errors[-2000:]
    assert all(ended(pid) for pid in workers)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_workers_die_with_their_parent(case, tmp_path):
    process, marker, workers = start_case(case, tmp_path)
    time.sleep(0.2)
    check_no_inherited_descriptors(workers, marker)
    process.kill()
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(ended(pid) for pid in workers):
        time.sleep(0.02)
    assert all(ended(pid) for pid in workers), [textwrap.shorten(open(f"/proc/{p}/status").read(), 200)
                                               for p in workers if not ended(p)]
