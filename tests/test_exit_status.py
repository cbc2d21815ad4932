"""One exit-status rule for every subcommand, walked as a table (memlab.cli.EXIT_STATUS).

0 done; 2 a bad argument or an input that cannot be read; 1 the kernel
refused or a measurement failed (compare: a regression; tour: a family
failed); 130 interrupted; 143 terminated (SIGTERM). Never a traceback. The table must name every
subcommand the parser has, so that a new one cannot escape the rule.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import memlab.export
import memlab.family
import memlab.plot
from memlab import cli, machine
from memlab.dataset import Dataset

STATUSES = {"ok": 0, "usage": 2, "input": 2, "failed": 1, "interrupted": 130}


def subcommands() -> set[str]:
    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return set(action.choices)


def metric_rows(scale: float) -> list[dict]:
    rows = []
    for size in (4096, 8192, 16384):
        samples = [scale * size / 4096 * (1 + 0.001 * i) for i in range(9)]
        rows.append({"family": "chase", "working_set_bytes": size, "ns_per_element": samples[4],
                     "ns_per_element_min": samples[0], "ns_per_element_max": samples[-1],
                     "ns_per_element_samples": samples, "repeat": 9})
    return rows


@pytest.fixture
def files(tmp_path):
    meta = {"family": "chase", "param_names": ["working_set_bytes"], "primary_metric": "ns_per_element"}
    Dataset(metric_rows(1.0), meta).save(tmp_path / "base.csv")
    Dataset(metric_rows(2.0), meta).save(tmp_path / "slow.csv")
    (tmp_path / "corrupt.csv").write_text('family,n\nf,"1\n')
    (tmp_path / "corrupt.json").write_text('{"format": "memlab-dataset", "format_version": 1, "machine": 3}')
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "tiny.py").write_text(
        "from memlab.grid import Sweep\n"
        "def sweep(quick=False):\n"
        "    return Sweep('tiny', 'calibrate', [{'budget_ns': 1_000_000}], repeat=1, warmup=0)\n")
    return tmp_path


def boom(exception: BaseException) -> Callable:
    def raise_it(*args, **kwargs):
        raise exception
    return raise_it


def in_measure(exception):
    return lambda mp: mp.setattr(memlab.family, "measure", boom(exception))


@dataclass
class Case:
    argv: Callable[[Path], list[str]] | None  # None: the status cannot happen, for the reason given
    patch: Callable | None = None
    reason: str = ""


INTERRUPT = KeyboardInterrupt()
REFUSED = OSError(errno.EPERM, "perf_event_open refused")

TABLE: dict[str, dict[str, Case]] = {
    "info": {
        "ok": Case(lambda d: ["info", "--no-calibrate", "--json"]),
        "usage": Case(lambda d: ["info", "--bogus"]),
        "input": Case(None, reason="reads no input"),
        "failed": Case(None, reason="measures only the clock, which cannot be refused"),
        "interrupted": Case(lambda d: ["info", "--no-calibrate"],
                            lambda mp: mp.setattr(machine, "collect", boom(INTERRUPT))),
    },
    "check": {
        "ok": Case(lambda d: ["check", "--json", "--steal-window", "0.01"]),
        "usage": Case(lambda d: ["check", "--steal-window", "１"]),
        "input": Case(lambda d: ["check", "--working-set", "lots"]),
        "failed": Case(lambda d: ["check", "--tune", "--state", str(d / "state.json")],
                       lambda mp: mp.setattr(cli, "tune", boom(PermissionError("needs root")))),
        "interrupted": Case(lambda d: ["check"], lambda mp: mp.setattr(cli, "machine_check", boom(INTERRUPT))),
    },
    "run": {
        "ok": Case(lambda d: ["run", "calibrate", "budget_ns=1000000", "--repeat", "1", "--warmup", "0"]),
        "usage": Case(lambda d: ["run", "calibrate", "budget_ns=1"]),
        "input": Case(lambda d: ["run", "calibrate", "--repeat", "1", "--out", str(d / "corrupt.csv")]),
        "failed": Case(lambda d: ["run", "calibrate", "--repeat", "1"], in_measure(REFUSED)),
        "interrupted": Case(lambda d: ["run", "calibrate", "--repeat", "1"], in_measure(INTERRUPT)),
    },
    "sweep": {
        "ok": Case(lambda d: ["sweep", str(d / "tiny.py"), "--out", str(d / "o"), "--no-progress"]),
        "usage": Case(lambda d: ["sweep", "nosuch.sweep"]),
        "input": Case(lambda d: ["sweep", str(d / "tiny.py"), "--out", str(d / "corrupt.csv"), "--no-progress"]),
        "failed": Case(lambda d: ["sweep", str(d / "tiny.py"), "--out", str(d / "f"), "--no-progress"],
                       in_measure(MemoryError("no memory for the state"))),
        "interrupted": Case(lambda d: ["sweep", str(d / "tiny.py"), "--out", str(d / "i"), "--no-progress"],
                            in_measure(INTERRUPT)),
    },
    "merge": {
        "ok": Case(lambda d: ["merge", str(d / "m.csv"), str(d / "base.csv")]),
        "usage": Case(lambda d: ["merge", str(d / "a_file" / "m.csv"), str(d / "base.csv")]),
        "input": Case(lambda d: ["merge", str(d / "m.csv"), str(d / "base.csv"), str(d / "corrupt.csv")]),
        "failed": Case(lambda d: ["merge", str(d / "m.csv"), str(d / "base.csv")],
                       lambda mp: mp.setattr(Dataset, "save", boom(OSError(errno.ENOSPC, "no space left")))),
        "interrupted": Case(lambda d: ["merge", str(d / "m.csv"), str(d / "base.csv")],
                            lambda mp: mp.setattr(Dataset, "save", boom(INTERRUPT))),
    },
    "export": {
        "ok": Case(lambda d: ["export", str(d / "base.csv"), "--format", "json", "--out", str(d / "e.json")]),
        "usage": Case(lambda d: ["export", str(d / "base.csv"), "--format", "xml"]),
        "input": Case(lambda d: ["export", str(d / "corrupt.csv"), "--format", "csv-long"]),
        "failed": Case(lambda d: ["export", str(d / "base.csv"), "--format", "json", "--out", str(d / "e.json")],
                       lambda mp: mp.setattr(memlab.export, "atomic_write",
                                             boom(OSError(errno.ENOSPC, "no space left")))),
        "interrupted": Case(lambda d: ["export", str(d / "base.csv"), "--format", "json"],
                            lambda mp: mp.setattr(memlab.export, "export", boom(INTERRUPT))),
    },
    "compare": {
        "ok": Case(lambda d: ["compare", str(d / "base.csv"), str(d / "base.csv")]),
        "usage": Case(lambda d: ["compare", str(d / "base.csv"), str(d / "slow.csv"), "--alpha", "x"]),
        "input": Case(lambda d: ["compare", str(d / "base.csv"), str(d / "absent.csv")]),
        "failed": Case(lambda d: ["compare", str(d / "base.csv"), str(d / "slow.csv")]),  # a regression
        "interrupted": Case(lambda d: ["compare", str(d / "base.csv"), str(d / "base.csv")],
                            lambda mp: mp.setattr(cli, "compare", boom(INTERRUPT))),
    },
    "plot": {
        "ok": Case(lambda d: ["plot", str(d / "base.csv"), "-o", str(d / "b.png"), "--dpi", "20"]),
        "usage": Case(lambda d: ["plot", str(d / "base.csv"), "--dpi", "10000"]),
        "input": Case(lambda d: ["plot", str(d / "corrupt.csv"), "-o", str(d / "c.png")]),
        "failed": Case(lambda d: ["plot", str(d / "base.csv"), "-o", str(d / "b.png")],
                       lambda mp: mp.setattr(cli, "require_matplotlib", boom(ImportError("no matplotlib")))),
        "interrupted": Case(lambda d: ["plot", str(d / "base.csv"), "-o", str(d / "b.png")],
                            lambda mp: mp.setattr(memlab.plot, "figure", boom(INTERRUPT))),
    },
    "report": {
        "ok": Case(lambda d: ["report", str(d / "base.csv"), "-o", str(d / "r.html")]),
        "usage": Case(lambda d: ["report", str(d / "base.csv"), "-o", str(d)]),
        "input": Case(lambda d: ["report", str(d / "corrupt.csv"), "-o", str(d / "r.html")]),
        "failed": Case(None, reason="measures nothing; a figure that cannot be drawn is a note in the report"),
        "interrupted": Case(lambda d: ["report", str(d / "base.csv"), "-o", str(d / "r.html")],
                            lambda mp: mp.setattr(cli, "write_report", boom(INTERRUPT))),
    },
    "reproduce": {
        "ok": Case(lambda d: ["reproduce", "--list", "--quick"]),
        "usage": Case(lambda d: ["reproduce", "fig3.51", "--out", str(d / "r")]),
        "input": Case(None, reason="reads no dataset: it measures into --out afresh"),
        "failed": Case(lambda d: ["reproduce", "--quick", "--no-progress", "--out", str(d / "r")],
                       lambda mp: mp.setattr(cli, "reproduce", boom(REFUSED))),
        "interrupted": Case(lambda d: ["reproduce", "--quick", "--no-progress", "--out", str(d / "r")],
                            lambda mp: mp.setattr(cli, "reproduce", boom(INTERRUPT))),
    },
    "tour": {
        "ok": Case(lambda d: ["tour", "--family", "calibrate", "--reduced", "--no-progress", "--out", str(d / "t")]),
        "usage": Case(lambda d: ["tour", "--out", str(d / "a_file")]),
        "input": Case(lambda d: ["tour", "--resume", "--family", "calibrate", "--reduced", "--no-progress",
                                 "--out", str(d)],
                      lambda mp: None, reason="resuming over a corrupt dataset"),
        "failed": Case(lambda d: ["tour", "--family", "calibrate", "--reduced", "--no-progress", "--out", str(d / "f")],
                       in_measure(REFUSED)),
        "interrupted": Case(lambda d: ["tour", "--family", "calibrate", "--reduced", "--no-progress",
                                       "--out", str(d / "i")], in_measure(INTERRUPT)),
    },
}


def test_the_table_names_every_subcommand_and_every_status():
    assert set(TABLE) == subcommands(), "a subcommand was added or removed: give it its rows in TABLE"
    for name, cases in TABLE.items():
        assert set(cases) == set(STATUSES), name
        for status, case in cases.items():
            assert case.argv is not None or case.reason, (name, status)


@pytest.mark.parametrize("name, status", [(n, s) for n in sorted(TABLE) for s in STATUSES
                                          if TABLE[n][s].argv is not None])
def test_exit_status(name, status, files, monkeypatch, capsys):
    case = TABLE[name][status]
    if name == "tour" and status == "input":
        (files / "calibrate.csv").write_text('family,budget_ns\ncalibrate,"1\n')  # a stray quote
    if case.patch is not None:
        case.patch(monkeypatch)
    code = cli.main(case.argv(files))
    captured = capsys.readouterr()
    assert code == STATUSES[status], (name, status, captured.err[-600:])
    assert "Traceback" not in captured.err
    if code in (1, 2) and name != "compare":
        assert captured.err.strip(), "an error says why"


def test_a_bug_is_one_line_too_and_MEMLAB_DEBUG_shows_the_traceback(monkeypatch, capsys):
    monkeypatch.setattr(machine, "collect", boom(TypeError("unhashable type: 'list'")))
    assert cli.main(["info", "--no-calibrate"]) == 1
    err = capsys.readouterr().err
    assert "internal error, a bug in memlab: TypeError: unhashable type" in err and "Traceback" not in err
    monkeypatch.setenv("MEMLAB_DEBUG", "1")
    with pytest.raises(TypeError):
        cli.main(["info", "--no-calibrate"])


@pytest.mark.ctrl_c
def test_a_second_ctrl_c_while_interrupted_is_printed_changes_nothing(monkeypatch, capsys):
    if sys.platform != "linux":
        pytest.skip("signals")
    printed = []

    def print_with_a_second_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # raises KeyboardInterrupt here unless SIGINT is ignored
        printed.append(args)

    monkeypatch.setattr(memlab.family, "measure", boom(KeyboardInterrupt()))
    monkeypatch.setattr(cli, "print", print_with_a_second_ctrl_c, raising=False)
    assert cli.main(["run", "calibrate", "--repeat", "1"]) == 130
    assert printed and "interrupted" in printed[0][0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored afterwards


def threads_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def test_ctrl_c_in_a_real_run_is_one_line_and_exit_130(tmp_path):
    """SIGINT to a real `memlab run` measuring share with a thousand unpinned threads."""
    child = subprocess.Popen(
        [sys.executable, "-m", "memlab", "run", "share", "threads=1024", "placement=unpinned", "increments=1000000000",
         "--repeat", "1", "--warmup", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while threads_of(child.pid) < 16 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the kernel is starting its threads
    child.send_signal(signal.SIGINT)
    try:
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err


def test_sigterm_stops_a_real_run_that_ignores_ctrl_c_in_one_line_with_exit_143(tmp_path):
    """A run a script started in the background inherits SIGINT ignored; SIGTERM still stops it
    the way Ctrl-C would: its rows on disk, one line, no traceback, exit 143."""
    out = tmp_path / "c.csv"
    many = tmp_path / "many.py"  # thousands of 1 ms points: it is still measuring when SIGTERM comes
    many.write_text("from memlab.grid import Sweep\n"
                    "def sweep(quick=False):\n"
                    "    return Sweep('many', 'calibrate', [{'budget_ns': 1_000_000 + i} for i in range(20000)],\n"
                    "                 repeat=1, warmup=0)\n")
    child = subprocess.Popen(
        ["bash", "-c", f"trap '' INT; exec {sys.executable} -m memlab sweep {many} --no-progress --out {out}"],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().count("\n") >= 2) and child.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.02)  # until a row is on disk
    ignored = int(Path(f"/proc/{child.pid}/status").read_text().split("SigIgn:")[1].split()[0], 16)
    child.send_signal(signal.SIGTERM)
    try:
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert ignored & (1 << (signal.SIGINT - 1)), "the run was started with SIGINT ignored"
    assert child.returncode == cli.EXIT_STATUS["terminated"] == 143, err
    assert "Traceback" not in err and "terminated (SIGTERM)" in err
    assert Dataset.load(out).rows  # what it measured is on disk and reads back


def test_sigterm_handler_is_put_back_and_an_ignored_sigterm_stays_ignored(monkeypatch, capsys):
    if sys.platform != "linux":
        pytest.skip("signals")
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(memlab.family, "measure", boom(cli.Terminated()))
    assert cli.main(["run", "calibrate", "--repeat", "1"]) == 143
    assert "terminated (SIGTERM)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before
    seen = []
    monkeypatch.setattr(memlab.family, "measure", lambda *a, **k: seen.append(signal.getsignal(signal.SIGTERM)) or
                        boom(KeyboardInterrupt())())
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        assert cli.main(["run", "calibrate", "--repeat", "1"]) == 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIG_IGN]  # told to ignore it: memlab does not take it over


@pytest.mark.parametrize("kind", ["file", "fifo", "proc"])
def test_reproduce_out_that_cannot_be_a_folder_is_one_line_and_exit_2(kind, tmp_path, capsys):
    """It was exit 1 and a raw FileExistsError / FileNotFoundError (issue 27)."""
    out = {"file": tmp_path / "a_file", "fifo": tmp_path / "a_fifo", "proc": Path("/proc/memlab-reproduce")}[kind]
    if kind == "file":
        out.write_text("x")
    elif kind == "fifo":
        os.mkfifo(out)
    code = cli.main(["reproduce", "table6.1", "--quick", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"memlab: error: --out {out}"), err
    assert "Traceback" not in err
