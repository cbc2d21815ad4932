"""One run of one point measured in a fresh Python process, the way pyperf spawns its workers.

What changes between runs of a point (the physical pages its region got,
where its lines fall in the caches, the state a long-lived interpreter
accumulates: the allocator's arenas, imported modules, a warmed BLAS) is
sampled best when each run starts from nothing. :func:`measure_run` starts
``python -m memlab.worker`` with a request (the family, the point, the
measuring options, the run's index and an optional prelude), waits for it
and returns the run's rows; the child imports memlab, runs the prelude,
measures the point once with ``Family.run`` and writes its result to a file
the parent reads.

The parent survives whatever the child does: a child killed by a signal,
one that exits non-zero or raises, and one that outlives ``timeout_seconds``
(killed then) become a :class:`WorkerFailed` naming what happened
(``"killed by SIGSEGV"``, ``"timed out after 5 s"``), with the tail of the
child's stderr. The child runs in its own process group; the parent kills
the whole group on a timeout and on Ctrl-C (KeyboardInterrupt in the
parent), and reaps it before going on: no orphan is left.

A *prelude* (``"module:function"`` and a JSON object of keyword arguments)
runs in the child before the point is measured: what registers a user
kernel's family there (``memlab.registry``), or a test's way to make a
child crash on purpose.

>>> result = measure_run("calibrate", {"budget_ns": 5_000_000}, {"repeat": 1, "warmup": 0}, run=2)
>>> [row["run"] for row in result.rows], result.pid != os.getpid()
([2], True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Mapping, Sequence

from memlab.dataset import RUN_COLUMN, context_column
from memlab.registry import family as get_family

__all__ = [
    "KILL_GRACE_SECONDS",
    "RunResult",
    "WorkerFailed",
    "check_prelude",
    "measure_run",
    "run_request",
]

KILL_GRACE_SECONDS = 1.0
"""After Ctrl-C the child gets SIGINT and this long to end by itself (its
family's own interrupt checks) before SIGKILL."""

STDERR_TAIL_CHARACTERS = 2000
"""How much of a failed child's stderr its :class:`WorkerFailed` keeps."""


class WorkerFailed(RuntimeError):
    """A worker process that gave no result: killed by a signal, exited non-zero, raised, or timed
    out. ``reason`` says which in a few words (``"killed by SIGSEGV"``), ``stderr`` holds the tail
    of what the child wrote there.

    >>> str(WorkerFailed("chase", {"working_set_bytes": 4096}, 1, "was killed by SIGSEGV"))
    'chase working_set_bytes=4096 run 1: the worker process was killed by SIGSEGV'
    """

    def __init__(self, family: str, point: Mapping[str, Any], run: int, reason: str, stderr: str = "") -> None:
        self.family, self.point, self.run, self.reason, self.stderr = family, dict(point), run, reason, stderr
        where = " ".join(f"{k}={v}" for k, v in point.items())
        super().__init__(f"{family} {where} run {run}: the worker process {reason}".replace("  ", " "))


@dataclasses.dataclass
class RunResult:
    """What one worker measured: its rows (one per run, ``run`` set), the measurement's conditions
    warning ("" when none), the child's pid and the parent's wall seconds around it."""

    rows: list[dict[str, Any]]
    warning: str
    pid: int
    seconds: float


# --------------------------------------------------------------------------
# the request


def check_prelude(prelude: str | None, prelude_args: Mapping[str, Any] | None = None) -> None:
    """ValueError unless ``prelude`` is None or ``"module:function"`` and ``prelude_args`` a JSON object.

    >>> check_prelude("memlab.worker:check_prelude", {"prelude": None})
    >>> check_prelude("no_colon")
    Traceback (most recent call last):
    ...
    ValueError: prelude='no_colon' must be 'module:function' (an importable module and a function in it)
    """
    if prelude is None:
        if prelude_args:
            raise ValueError("prelude_args needs a prelude ('module:function')")
        return
    module, _, function = prelude.partition(":") if isinstance(prelude, str) else ("", "", "")
    if not module or not function.isidentifier():
        raise ValueError(f"prelude={prelude!r} must be 'module:function' (an importable module and a function in it)")
    if prelude_args is not None:
        if not isinstance(prelude_args, Mapping):
            raise ValueError(f"prelude_args={prelude_args!r} must be a dict of keyword arguments")
        try:
            json.dumps(dict(prelude_args), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"prelude_args={prelude_args!r} must be JSON (strings, numbers, lists, dicts): "
                             f"{error}") from None


def run_request(family: str, point: Mapping[str, Any], options: Mapping[str, Any] | None = None, *,
                run: int = 0, prelude: str | None = None,
                prelude_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON request a worker reads: ``family``, ``point``, ``options`` (``Family.run``'s
    keywords), ``run``, ``prelude`` and ``prelude_args``; ValueError for what JSON cannot carry.

    >>> run_request("calibrate", {"budget_ns": 5}, run=1)["run"]
    1
    """
    check_prelude(prelude, prelude_args)
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        raise ValueError(f"run={run!r} must be a whole number from 0")
    request = {"family": family, "point": dict(point), "options": dict(options or {}), "run": run,
               "prelude": prelude, "prelude_args": dict(prelude_args or {})}
    try:
        json.dumps(request)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the point or options of {family} cannot go to a worker as JSON: {error}") from None
    return request


# --------------------------------------------------------------------------
# the parent's side


def measure_run(
    family: str,
    point: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
    *,
    run: int = 0,
    prelude: str | None = None,
    prelude_args: Mapping[str, Any] | None = None,
    timeout_seconds: float | None = None,
    python: str | None = None,
) -> RunResult:
    """Measure run ``run`` of one point of ``family`` in a fresh ``python -m memlab.worker``.

    ``options`` go to ``Family.run`` (repeat, warmup, cpu, target_seconds and
    a sweep's options); ``prelude`` (``"module:function"``) is called in the
    child with ``prelude_args`` as keywords before measuring. The result's
    rows carry the ``run`` index and ``context_worker_pid``. A child that
    dies, fails or outlives ``timeout_seconds`` (None: no limit) is a
    :class:`WorkerFailed`; Ctrl-C here kills and reaps the child, then
    raises KeyboardInterrupt. ``python``: the interpreter (default this one).

    >>> measure_run("calibrate", {"budget_ns": 5_000_000}, {"repeat": 1, "warmup": 0}).rows[0]["family"]
    'calibrate'
    """
    if timeout_seconds is not None and not (isinstance(timeout_seconds, (int, float))
                                            and not isinstance(timeout_seconds, bool) and timeout_seconds > 0):
        raise ValueError(f"timeout_seconds={timeout_seconds!r} must be a positive number of seconds (or None)")
    request = run_request(family, point, options, run=run, prelude=prelude, prelude_args=prelude_args)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memlab-worker-") as folder:
        request_path, result_path = Path(folder, "request.json"), Path(folder, "result.json")
        request_path.write_text(json.dumps(request))
        with open(Path(folder, "stderr"), "w+b") as stderr:
            child = subprocess.Popen(
                [python or sys.executable, "-m", "memlab.worker", str(request_path), str(result_path)],
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=_child_environment(),
                start_new_session=True,  # its own group: a timeout or Ctrl-C ends it and its children
            )
            status = _wait(child, timeout_seconds)
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace")[-STDERR_TAIL_CHARACTERS:]
        result = _read_result(result_path)
    if status is None:
        raise WorkerFailed(family, point, run, f"timed out after {_seconds_text(timeout_seconds)} (killed)", tail)
    if result is not None and "error" in result:
        raise WorkerFailed(family, point, run, f"raised {result['error']}", tail)
    if status < 0:
        raise WorkerFailed(family, point, run, f"was killed by {_signal_name(-status)}", tail)
    if status != 0 or result is None:
        raise WorkerFailed(family, point, run, f"exited with status {status} and no result", tail)
    return RunResult(result["rows"], result.get("warning", ""), child.pid, time.monotonic() - started)


def _wait(child: subprocess.Popen, timeout_seconds: float | None) -> int | None:
    """The child's exit status (negative: the signal), None when it timed out (then killed)."""
    try:
        return child.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        _kill_group(child, signal.SIGKILL)
        child.wait()
        return None
    except BaseException:  # Ctrl-C (or anything else) here: end the child before going on
        _kill_group(child, signal.SIGINT)
        try:
            child.wait(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(child, signal.SIGKILL)
        child.wait()
        raise


def _kill_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _child_environment() -> dict[str, str]:
    """This environment, with the folder holding this memlab first on the path: the child imports
    the same memlab as the parent (a worktree, an editable install)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _seconds_text(seconds: float | None) -> str:
    return f"{seconds:g} s"


# --------------------------------------------------------------------------
# the child's side


def run_prelude(prelude: str | None, prelude_args: Mapping[str, Any] | None = None) -> None:
    """Import ``module`` of ``"module:function"`` and call the function with ``prelude_args``."""
    if not prelude:
        return
    module_name, _, function_name = prelude.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    function(**dict(prelude_args or {}))


def serve(request: Mapping[str, Any]) -> dict[str, Any]:
    """What a worker does with a request: the prelude, one ``Family.run``, the row with its run
    index and this process's pid."""
    run_prelude(request.get("prelude"), request.get("prelude_args"))
    measurement = get_family(request["family"]).run(dict(request["point"]), **dict(request.get("options") or {}))
    row = {**measurement.to_row(), RUN_COLUMN: int(request.get("run", 0)),
           context_column("worker_pid"): os.getpid()}
    return {"rows": [row], "warning": measurement.conditions_warning}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memlab.worker REQUEST.json RESULT.json``: serve one request, write its result.

    An exception is written as the result's ``error`` (its type and message)
    and the exit status is 1.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m memlab.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request_path, result_path = args
    try:
        result = serve(json.loads(Path(request_path).read_text()))
        status = 0
    except Exception as error:  # the parent names it; the traceback goes to stderr for its tail
        traceback.print_exc()
        result, status = {"error": f"{type(error).__name__}: {error}"}, 1
    partial = Path(result_path + ".partial")
    partial.write_text(json.dumps(result, default=_plain))
    partial.replace(result_path)
    return status


def _plain(value: Any) -> Any:
    """What json cannot write as it is (numpy numbers), as a plain number or text."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
