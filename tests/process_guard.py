"""The suite's guard on its own process (a pytest plugin, loaded by conftest.py).

Two duties:

- **Ctrl-C reaches the tests however pytest was started.** A command that a
  non-interactive shell starts in the background (``bash -c 'pytest &'``,
  ``nohup``, many batch systems) inherits SIGINT as *ignored*, and CPython
  keeps it so: every test that sends itself SIGINT would then wait for a
  signal that never comes. At configure time the plugin gives SIGINT back to
  Python's default handler and says so in pytest's header; only if that fails
  are the tests marked ``ctrl_c`` skipped, with the reason.
- **Every test leaves the process as it found it.** An autouse fixture takes
  a snapshot before and after each test: the main thread's signal mask, the
  SIGINT, SIGTERM and SIGCHLD handlers, memlab's own threads (named
  ``memlab._core.THREAD_NAME`` by the core), the descriptors, the child
  processes and the CPU affinity. A test that changes one of them fails in
  its teardown with what changed; handlers, mask and affinity are put back so
  that the next test starts clean. What is allowed to stay is listed in
  ``ALLOWED`` (each entry says why).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from memlab import _core

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)

SIGINT_STATUS = pytest.StashKey[str]()
"""How SIGINT stood when the run began: "python" (already Python's default handler, or a
handler someone set), "restored" (inherited as ignored, given back) or "ignored: WHY"."""


def restore_inherited_sigint(getsignal: Callable = signal.getsignal,
                             setsignal: Callable = signal.signal) -> str:
    """Give SIGINT back to Python's default handler if this process inherited it as ignored.

    Returns "python" when nothing needed doing, "restored" when it was done, and
    "ignored: <reason>" when SIGINT is ignored and could not be restored.

    >>> restore_inherited_sigint(lambda s: signal.SIG_IGN, lambda s, h: None)
    'restored'
    """
    if getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return "python"
    try:
        setsignal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError, RuntimeError) as error:
        return f"ignored: SIGINT was inherited as ignored and cannot be restored here ({error})"
    return "restored"


def sigint_header(status: str) -> str:
    """The line pytest prints in its header about SIGINT."""
    if status == "restored":
        return ("SIGINT: inherited as ignored (started in the background by a non-interactive "
                "shell?); restored to Python's default handler for this run")
    if status.startswith("ignored"):
        return f"SIGINT: {status}; the tests marked ctrl_c are skipped"
    return "SIGINT: Python's handler"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ctrl_c: sends SIGINT to this process (skipped, with the reason, "
                                       "when SIGINT cannot be delivered)")
    config.addinivalue_line("markers", "process_guard_allows(kind, pattern, reason): this test may leave a "
                                       "descriptor or child process matching pattern, for the reason given")
    config.stash[SIGINT_STATUS] = restore_inherited_sigint()


def pytest_report_header(config: pytest.Config) -> str:
    return sigint_header(config.stash.get(SIGINT_STATUS, "python"))


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under -q pytest prints no header: a SIGINT that was not Python's is said all the same."""
    status = session.config.stash.get(SIGINT_STATUS, "python")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if status != "python" and reporter is not None and session.config.get_verbosity() < 0:
        reporter.write_line(sigint_header(status))


def pytest_runtest_setup(item: pytest.Item) -> None:
    status = item.config.stash.get(SIGINT_STATUS, "python")
    if item.get_closest_marker("ctrl_c") and status.startswith("ignored"):
        pytest.skip(status)


# ---- the snapshot -----------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessState:
    """What a test must leave as it found it."""

    signal_mask: frozenset[int]
    handlers: dict[int, object]
    memlab_threads: frozenset[int]  # thread ids
    descriptors: dict[int, str]  # fd -> what it points at
    children: dict[int, str]  # pid -> "state cmdline"
    affinity: frozenset[int]


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def memlab_threads() -> frozenset[int]:
    """This process's threads that memlab's core started (by their name)."""
    tids = set()
    for tid in os.listdir("/proc/self/task"):
        if _read(f"/proc/self/task/{tid}/comm").strip() == _core.THREAD_NAME:
            tids.add(int(tid))
    return frozenset(tids)


SETTLE_S = 2.0
"""How long a thread that was just joined may take to leave /proc/self/task."""


def memlab_thread_count(settle: bool = True) -> int:
    """memlab's threads now; with ``settle``, after giving just-joined threads up to
    SETTLE_S to leave /proc (pthread_join returns a moment before the kernel removes the
    thread: only a thread that is still there after that counts)."""
    count = len(memlab_threads())
    deadline = time.monotonic() + SETTLE_S
    while settle and count and time.monotonic() < deadline:
        time.sleep(0.01)
        count = len(memlab_threads())
    return count


def descriptors() -> dict[int, str]:
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the directory's own descriptor, gone by now
            pass
    return found


def children() -> dict[int, str]:
    """This process's child processes, each as "STATE cmdline" (STATE Z: not reaped)."""
    me = os.getpid()
    pids: set[int] = set()
    listed = [_read(f"/proc/self/task/{tid}/children") for tid in os.listdir("/proc/self/task")]
    if any(listed) or os.path.exists(f"/proc/self/task/{me}/children"):
        for text in listed:
            pids.update(int(pid) for pid in text.split())
    else:  # a kernel without CONFIG_PROC_CHILDREN: every process's parent
        for name in filter(str.isdigit, os.listdir("/proc")):
            stat = _read(f"/proc/{name}/stat")
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == me:
                pids.add(int(name))
    found = {}
    for pid in pids:
        stat = _read(f"/proc/{pid}/stat")
        state = stat[stat.rfind(")") + 2 :].split()[:1] or ["?"]
        command = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
        found[pid] = f"{state[0]} {command or _read(f'/proc/{pid}/comm').strip() or '(gone)'}"
    return found


def snapshot() -> ProcessState:
    return ProcessState(
        signal_mask=frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        handlers={sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS},
        memlab_threads=memlab_threads(),
        descriptors=descriptors(),
        children=children(),
        affinity=frozenset(os.sched_getaffinity(0)),
    )


# ---- what may stay ------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowance:
    """Something a test may leave behind: a descriptor or a child process whose description
    matches ``pattern``, for the reason given."""

    kind: str  # "descriptor" or "child"
    pattern: str
    reason: str
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "regex", re.compile(self.pattern))

    def allows(self, kind: str, description: str) -> bool:
        return kind == self.kind and self.regex.search(description) is not None


def _resource_tracker_fd() -> set[int]:
    """multiprocessing's resource tracker keeps one pipe end open for the life of the process."""
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    fd = getattr(getattr(tracker, "_resource_tracker", None), "_fd", None)
    return {fd} if isinstance(fd, int) else set()


def _event_loop_fds() -> set[int]:
    """The descriptors of the asyncio event loops still open in this process (their selector and
    self-pipe): the loop a library keeps for the life of the process, as Dask's client does and
    jupyter_client's run_sync. Looked for only when a test left a descriptor unexplained."""
    if "asyncio" not in sys.modules:
        return set()
    import asyncio
    import gc

    fds: set[int] = set()
    for thing in gc.get_objects():
        if isinstance(thing, asyncio.AbstractEventLoop) and not thing.is_closed():
            selector = getattr(thing, "_selector", None)
            for owner in (selector, getattr(thing, "_ssock", None), getattr(thing, "_csock", None)):
                try:
                    fds.add(owner.fileno())
                except (AttributeError, OSError, ValueError):
                    pass
    return fds


def _holders(target: str) -> str:
    """The other processes holding a pipe or socket (by its inode), for the failure message."""
    if not target.startswith(("pipe:", "socket:")):
        return ""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        if int(name) == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{name}/fd/{fd}") == target for fd in os.listdir(f"/proc/{name}/fd")):
                command = _read(f"/proc/{name}/cmdline").replace("\0", " ").strip()[:120]
                found.append(f"pid {name} {command}")
        except OSError:
            pass
    return f"; its other end is held by {', '.join(found)}" if found else ""


ALLOWED: tuple[Allowance, ...] = (
    Allowance("descriptor", r"/matplotlib/.*\.(json|cache)$|fontlist|/matplotlib/mpl-data/fonts/",
              "matplotlib keeps its font cache and the font files it has drawn with open for the process"),
    Allowance("descriptor", r"^/dev/(u?random|null)$", "read-only devices libraries keep open"),
    Allowance("child", r"^\S+ .*multiprocessing\.(resource_tracker|forkserver)",
              "multiprocessing starts its resource tracker or fork server once per process"),
)


def differences(before: ProcessState, after: ProcessState,
                allowed: tuple[Allowance, ...] = ALLOWED,
                explained_fds: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """What ``after`` has that ``before`` did not, one sentence each (empty: unchanged)."""
    found = []
    if after.signal_mask != before.signal_mask:
        found.append(f"the main thread's signal mask changed: {_signals(before.signal_mask)} -> "
                     f"{_signals(after.signal_mask)}")
    for sig in HANDLED_SIGNALS:
        if after.handlers[sig] is not before.handlers[sig] and after.handlers[sig] != before.handlers[sig]:
            found.append(f"the {signal.Signals(sig).name} handler changed: {before.handlers[sig]!r} -> "
                         f"{after.handlers[sig]!r}")
    new_threads = after.memlab_threads - before.memlab_threads
    if new_threads:
        found.append(f"{len(new_threads)} memlab thread(s) still running: thread ids "
                     f"{sorted(new_threads)}")
    for fd, target in sorted(after.descriptors.items()):
        if before.descriptors.get(fd) == target or fd in explained_fds:
            continue
        if any(allowance.allows("descriptor", target) for allowance in allowed):
            continue
        was = f" (was {before.descriptors[fd]})" if fd in before.descriptors else ""
        found.append(f"descriptor {fd} left open: {target}{was}{_holders(target)}")
    for pid, description in sorted(after.children.items()):
        if pid in before.children or any(allowance.allows("child", description) for allowance in allowed):
            continue
        state, _, command = description.partition(" ")
        what = "not reaped (a zombie)" if state == "Z" else "still running"
        found.append(f"child process {pid} {what}: {command}")
    if after.affinity != before.affinity:
        found.append(f"the CPU affinity changed: {sorted(before.affinity)} -> {sorted(after.affinity)}")
    return found


def _signals(mask: frozenset[int]) -> str:
    return "{" + ", ".join(sorted(signal.Signals(s).name for s in mask)) + "}"


def put_back(before: ProcessState) -> None:
    """Restore what can be restored without touching a test's resources: handlers, mask, affinity."""
    for sig, handler in before.handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, before.signal_mask)
    os.sched_setaffinity(0, before.affinity)


def marked_allowances(item: pytest.Item) -> tuple[Allowance, ...]:
    """What the test's ``process_guard_allows`` marks (its own, its class's, its module's) allow."""
    allowances = []
    for mark in item.iter_markers("process_guard_allows"):
        kind, pattern, reason = mark.args
        if kind not in ("descriptor", "child") or not reason:
            raise ValueError(f"process_guard_allows({kind!r}, {pattern!r}, {reason!r}): the kind is 'descriptor' "
                             "or 'child' and the reason is said")
        allowances.append(Allowance(kind, pattern, reason))
    return tuple(allowances)


@pytest.fixture(autouse=True)
def _leaves_the_process_as_it_found_it(request):
    allowed = ALLOWED + marked_allowances(request.node)
    before = snapshot()
    tracker_before = _resource_tracker_fd()
    yield
    after = snapshot()
    if after.memlab_threads - before.memlab_threads:  # a thread just joined may still be in /proc
        memlab_thread_count(settle=True)
        after = snapshot()
    explained = _resource_tracker_fd() - tracker_before
    changed = differences(before, after, allowed, explained_fds=explained)
    if changed:  # only then look for what a library keeps open for the life of the process
        changed = differences(before, after, allowed, explained_fds=explained | _event_loop_fds())
    if changed:
        put_back(before)
        pytest.fail(f"{request.node.nodeid} did not leave the process as it found it:\n  "
                    + "\n  ".join(changed), pytrace=False)
