"""Preludes the worker tests run inside a ``python -m memlab.worker`` child (tests/test_worker.py).

Each is ``worker_preludes:NAME`` seen from the child (the test puts this folder on
its PYTHONPATH); each leaves a trace the parent can check.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def note_pid(path: str) -> None:
    """Write this process's pid to ``path`` (the parent checks which process measured)."""
    Path(path).write_text(str(os.getpid()))


def crash(path: str) -> None:
    """Write the pid, then die by SIGSEGV, as a user kernel reading a wild pointer would."""
    note_pid(path)
    os.kill(os.getpid(), signal.SIGSEGV)


def exit_with(path: str, status: int) -> None:
    """Write the pid, then leave at once with ``status`` (no result written)."""
    note_pid(path)
    os._exit(status)


def hang(path: str) -> None:
    """Write the pid (the sign the child started), then sleep far beyond any test's patience."""
    note_pid(path)
    time.sleep(600)


def crash_on_call(path: str, call: int) -> None:
    """Count the calls in ``path`` (one worker after another); die by SIGSEGV on call ``call``
    (from 1): one run of a sweep crashes, the others measure."""
    counter = Path(path)
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    if count == call:
        os.kill(os.getpid(), signal.SIGSEGV)
