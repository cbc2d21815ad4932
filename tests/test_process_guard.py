"""The suite's guard on its own process (tests/process_guard.py), driven through real pytest
runs in subprocesses (pytester): SIGINT restored when the run inherits it as ignored, the
ctrl_c tests skipped with the reason when it cannot be, and a test that leaves the process
changed failing with what changed."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

import process_guard
from process_guard import Allowance, ProcessState, differences, restore_inherited_sigint

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

CTRL_C_TEST = """
    import os, signal, threading
    import pytest

    @pytest.mark.ctrl_c
    def test_sigint_reaches_python():
        timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                timer.join()  # the signal lands here
                threading.Event().wait(5)  # (or here, when it came late)
        finally:
            timer.cancel()
            timer.join()
"""

# Started as a shell starts a background command: SIGINT ignored, kept through exec.
IGNORING_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[1:]])")


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester project whose conftest loads the guard; PYTHONPATH finds it in a subprocess."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest('pytest_plugins = ["process_guard"]\n')
    return pytester


def run_ignoring_sigint(pytester, *args):
    return pytester.run(sys.executable, "-c", IGNORING_SIGINT, "-p", "no:cacheprovider", "-rs", *args,
                        timeout=120)


# ---- SIGINT ----------------------------------------------------------------------------


def test_sigint_inherited_as_ignored_is_restored_and_the_header_says_so(suite):
    suite.makepyfile(test_ctrl_c=CTRL_C_TEST)
    result = run_ignoring_sigint(suite)
    result.stdout.fnmatch_lines(["SIGINT: inherited as ignored*restored to Python's default handler*",
                                 "*1 passed*"])
    assert result.ret == 0


def test_under_quiet_output_the_restored_sigint_is_still_said(suite):
    suite.makepyfile(test_ctrl_c=CTRL_C_TEST)
    result = run_ignoring_sigint(suite, "-q")
    result.stdout.fnmatch_lines(["SIGINT: inherited as ignored*restored to Python's default handler*",
                                 "*1 passed*"])


def test_without_the_guard_a_run_started_in_the_background_never_sees_sigint(pytester):
    # The control: the failure the guard exists for (and bounded: the test waits 5 s at most).
    pytester.makepyfile(test_ctrl_c=CTRL_C_TEST)
    result = run_ignoring_sigint(pytester)
    result.stdout.fnmatch_lines(["*DID NOT RAISE*KeyboardInterrupt*", "*1 failed*"])


def test_when_sigint_cannot_be_restored_the_ctrl_c_tests_skip_with_the_reason(suite):
    suite.makeconftest(textwrap.dedent("""
        import signal
        real = signal.signal
        def refusing(signum, handler):
            if signum == signal.SIGINT:
                raise ValueError("signal only works in main thread of the main interpreter")
            return real(signum, handler)
        signal.signal = refusing
        pytest_plugins = ["process_guard"]
    """))
    suite.makepyfile(test_ctrl_c=textwrap.dedent(CTRL_C_TEST) + "\n\ndef test_other():\n    pass\n")
    result = run_ignoring_sigint(suite)
    result.stdout.fnmatch_lines([
        "SIGINT: ignored: SIGINT was inherited as ignored and cannot be restored here (signal only works*"
        "the tests marked ctrl_c are skipped",
        "SKIPPED*ignored: SIGINT was inherited as ignored and cannot be restored here*",
        "*1 passed, 1 skipped*",
    ])


def test_restoring_sigint_reports_each_case():
    calls = []
    assert restore_inherited_sigint(lambda s: signal.default_int_handler, lambda s, h: calls.append(h)) == "python"
    assert calls == []
    assert restore_inherited_sigint(lambda s: signal.SIG_IGN, lambda s, h: calls.append(h)) == "restored"
    assert calls == [signal.default_int_handler]

    def refuse(signum, handler):
        raise ValueError("not the main thread")

    status = restore_inherited_sigint(lambda s: signal.SIG_IGN, refuse)
    assert status == "ignored: SIGINT was inherited as ignored and cannot be restored here (not the main thread)"
    assert process_guard.sigint_header(status).endswith("the tests marked ctrl_c are skipped")


def test_this_run_delivers_sigint():
    # however this suite was started, the guard left SIGINT to Python
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---- what a test leaves behind -------------------------------------------------------------

LEAKY = """
    import os, signal, subprocess, threading, time
    import pytest

    def test_clean():
        read, write = os.pipe()
        os.close(read)
        os.close(write)

    def test_leaves_a_descriptor():
        global KEPT
        KEPT = os.pipe()

    def test_changes_the_sigterm_handler():
        signal.signal(signal.SIGTERM, lambda *a: None)

    def test_sigterm_was_put_back():
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    def test_blocks_a_signal():
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])

    def test_the_mask_was_put_back():
        assert signal.SIGUSR2 not in signal.pthread_sigmask(signal.SIG_BLOCK, [])

    def test_keeps_an_event_loop():
        import asyncio
        global LOOP
        LOOP = asyncio.new_event_loop()  # as a library keeps one for the process: allowed

    def test_leaves_a_zombie():
        child = subprocess.Popen(["true"])
        while open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        child.returncode = 0  # Popen forgets it: nothing reaps it now
        global ZOMBIE
        ZOMBIE = child.pid

"""


def test_a_test_that_changes_the_process_fails_with_what_changed(suite):
    suite.makepyfile(test_leaky=LEAKY)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    out = result.stdout.str()
    result.assert_outcomes(passed=8, errors=4)
    assert "test_clean" not in out.split("short test summary")[-1]
    result.stdout.fnmatch_lines_random([
        "*test_leaves_a_descriptor did not leave the process as it found it:",
        "*descriptor * left open: pipe:[[]*[]]",
        "*the SIGTERM handler changed: <Handlers.SIG_DFL: 0> -> <function*",
        "*the main thread's signal mask changed: {} -> {SIGUSR2}",
        "*child process * not reaped (a zombie): true",
    ])


def test_a_memlab_thread_left_running_fails_the_test(suite):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs for a two-thread walk")
    suite.makepyfile(test_thread=textwrap.dedent("""
        import threading, time
        from memlab import _core, chase

        def test_leaves_a_walker_running():
            config = dict(chase._to_core(chase.ChaseParams(working_set_bytes=1 << 16, threads=2)))
            kernel = _core.Kernel("chase", config)
            threading.Thread(target=kernel.measure, daemon=True,
                             kwargs=dict(target_ns=5 * 10**9, counters=False, deadline_ns=5 * 10**9)).start()
            time.sleep(0.5)
    """))
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*memlab thread(s) still running: thread ids [[]*[]]*"])


def test_a_changed_cpu_affinity_fails_the_test_and_is_put_back(suite):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the affinity cannot be narrowed")
    suite.makepyfile(test_affinity=textwrap.dedent("""
        import os
        ALL = os.sched_getaffinity(0)

        def test_narrows():
            os.sched_setaffinity(0, {min(ALL)})

        def test_put_back():
            assert os.sched_getaffinity(0) == ALL
    """))
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the CPU affinity changed: [[]*[]] -> [[]*[]]"])


def state(**changes) -> ProcessState:
    base = dict(signal_mask=frozenset(), handlers={sig: signal.SIG_DFL for sig in process_guard.HANDLED_SIGNALS},
                memlab_threads=frozenset(), descriptors={0: "/dev/pts/0"}, children={}, affinity=frozenset({0}))
    return ProcessState(**{**base, **changes})


def test_the_allowlist_lets_through_only_what_it_names():
    before = state()
    font_cache = state(descriptors={0: "/dev/pts/0", 5: "/root/.cache/matplotlib/fontlist-v390.json"})
    assert differences(before, font_cache) == []
    other = state(descriptors={0: "/dev/pts/0", 5: "/root/notes.txt"})
    assert differences(before, other) == ["descriptor 5 left open: /root/notes.txt"]
    tracker = state(children={41: "S /usr/bin/python3 -c from multiprocessing.resource_tracker import main;main(7)"})
    assert differences(before, tracker) == []
    sleeper = state(children={42: "S sleep 30"})
    assert differences(before, sleeper) == ["child process 42 still running: sleep 30"]
    # a descriptor explained by a library's own bookkeeping (the resource tracker's pipe)
    assert differences(before, state(descriptors={0: "/dev/pts/0", 9: "pipe:[7]"}), explained_fds={9}) == []
    # and an allowance is exact about its kind
    only_children = (Allowance("child", "fontlist", "an allowance for children only"),)
    assert differences(before, font_cache, allowed=only_children) == [
        "descriptor 5 left open: /root/.cache/matplotlib/fontlist-v390.json"]


def test_a_marked_test_may_leave_what_its_mark_names_and_nothing_else(suite):
    suite.makepyfile(test_marked=textwrap.dedent("""
        import socket
        import pytest

        pytestmark = pytest.mark.process_guard_allows("descriptor", r"^socket:", "a pool the library keeps")
        KEPT = []

        def test_keeps_a_socket_pair():
            KEPT.append(socket.socketpair())

        def test_keeps_a_pipe():
            import os
            KEPT.append(os.pipe())

        @pytest.mark.process_guard_allows("descriptor", "x", "")
        def test_an_allowance_without_a_reason():
            pass
    """))
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines_random(["*descriptor * left open: pipe:[[]*[]]",
                                        "*the kind is 'descriptor' or 'child' and the reason is said*"])
    assert "socket:[" not in result.stdout.str()


def test_every_allowance_says_why():
    assert process_guard.ALLOWED and all(a.reason and a.kind in ("descriptor", "child")
                                         for a in process_guard.ALLOWED)
