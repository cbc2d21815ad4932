"""Progress bars: tqdm on a terminal (one line that fits its width), a widget in Jupyter,
nothing in logs or with --quiet, and an overall bar with ETA for the tour and multi-sweep runs."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from memlab import sweep as sweep_module
from memlab.grid import Sweep

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_terminal(args, columns=80, rows=24, timeout=300):
    """Run ``python -m memlab ARGS`` with stderr on a pseudo-terminal of the given size; return what it drew."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns), LINES=str(rows))
    process = subprocess.Popen([sys.executable, "-m", "memlab", *args], stdin=slave, stdout=subprocess.PIPE,
                               stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    stdout, _ = process.communicate(timeout=timeout)
    os.close(master)
    return process.returncode, b"".join(chunks).decode("utf-8", "replace"), stdout.decode()


def screen_lines(drawn: str) -> list[str]:
    """The lines a terminal shows: carriage returns overwrite, escape sequences vanish."""
    lines = []
    for raw in ANSI.sub("", drawn).replace("\r\n", "\n").split("\n"):
        lines.append(raw.split("\r")[-1] if "\r" in raw else raw)
    return lines


#: The command's last line, what was flagged (memlab.cli.FlagTally): not a bar either.
SUMMARY_LINE = re.compile(r"^memlab \w+: (flagged |nothing flagged)")


def bar_frames(drawn: str) -> list[str]:
    """Every state of the bars drawn (lines the machine check's warnings print, and the summary
    of what was flagged, are not bars)."""
    frames = ANSI.sub("", drawn).replace("\n", "\r").split("\r")
    return [f for f in frames if f.strip() and not f.startswith("memlab: warning") and not SUMMARY_LINE.match(f)]


def test_terminal_bar_fits_80_columns_and_does_not_stack(tmp_path):
    code, drawn, stdout = run_in_terminal(["sweep", "region.quick", "--repeat", "1", "--runs", "1", "--out",
                                           str(tmp_path / "r.csv")], columns=80)
    assert code == 0, drawn
    assert "region.quick: 4 rows" in stdout
    frames = bar_frames(drawn)
    assert any("region:quick" in f and "4/4" in f for f in frames), frames
    assert all(len(f) <= 80 for f in frames), max(frames, key=len)
    # One bar redrawn in place: the terminal shows it on one line, not one line per point.
    shown = [line for line in screen_lines(drawn) if "region:quick" in line]
    assert len(shown) == 1, shown


def test_quiet_and_piped_runs_draw_nothing(tmp_path):
    code, drawn, _ = run_in_terminal(["sweep", "calibrate.quick", "--quiet", "--out", str(tmp_path / "c.csv")])
    assert code == 0 and "calibrate:quick" not in drawn
    piped = subprocess.run([sys.executable, "-m", "memlab", "sweep", "calibrate.quick", "--out",
                            str(tmp_path / "d.csv")], capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "calibrate:quick" not in piped.stderr and "it/s" not in piped.stderr


@pytest.mark.slow
def test_tour_has_an_overall_bar_with_eta(tmp_path):
    code, drawn, stdout = run_in_terminal(["tour", "--reduced", "--family", "calibrate", "--family", "region",
                                           "--out", str(tmp_path)], columns=100)
    assert code == 0, drawn
    frames = bar_frames(drawn)
    overall = [f for f in frames if f.startswith("tour")]
    assert overall and "3/3" in overall[-1], overall  # calibrate's one point and region's two
    assert any(re.search(r"<\d\d:\d\d", f) for f in overall), overall  # tqdm's elapsed<remaining
    assert all(len(f) <= 100 for f in frames)
    assert "report ->" in stdout


def test_multi_sweep_runs_get_an_overall_bar(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "from memlab.cli import script_main\n"
        "from memlab.grid import Sweep\n"
        "def sweep(quick=False):\n"
        "    return [Sweep('a', 'calibrate', [{'budget_ns': 2_000_000}], repeat=1, warmup=0, runs=1),\n"
        "            Sweep('b', 'calibrate', [{'budget_ns': 3_000_000}], repeat=1, warmup=0, runs=1)]\n"
        "if __name__ == '__main__':\n"
        "    raise SystemExit(script_main(sweep))\n"
    )
    code, drawn, stdout = run_in_terminal(["sweep", str(script), "--out", str(tmp_path / "out")])
    assert code == 0, drawn
    assert "2 sweeps" in drawn and "2/2" in drawn
    assert "calibrate.a: 1 rows" in stdout and "calibrate.b: 1 rows" in stdout


@pytest.mark.slow
def test_jupyter_gets_a_widget_not_a_quoted_string(tmp_path):
    """In a real Jupyter kernel the bar is tqdm's widget (tqdm.auto), not a string passed to display()."""
    pytest.importorskip("ipywidgets", reason="the notebook extra (ipywidgets) is not installed")
    nbformat = pytest.importorskip("nbformat", reason="the notebook extra (nbformat) is not installed")
    nbclient = pytest.importorskip("nbclient", reason="the notebook extra (nbclient) is not installed")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "from memlab.grid import Sweep\n"
        "from memlab.sweep import run_sweep\n"
        "ds = run_sweep(Sweep('j', 'calibrate', [{'budget_ns': 2_000_000 + i} for i in range(3)],\n"
        "                     repeat=1, warmup=0, runs=1))\n"
        "len(ds)"
    ))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, outputs
    texts = [o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs]
    assert not any("[####" in t or "'calibrate:j" in t for t in texts), texts
    assert any(o.get("data", {}).get("text/plain") == "3" for o in outputs)


def test_estimate_grows_with_points_repeats_and_sample_length():
    one = Sweep("s", "region", [{"region_bytes": 1 << 20}], repeat=2, warmup=0, target_seconds=0.1, runs=1)
    two = Sweep("s", "region", [{"region_bytes": 1 << 20}] * 2, repeat=2, warmup=0, target_seconds=0.1, runs=1)
    longer = Sweep("s", "region", [{"region_bytes": 1 << 20}], repeat=2, warmup=0, target_seconds=1.0, runs=1)
    base = sweep_module.estimate_seconds(one)
    assert base == pytest.approx(2 * 0.1 + sweep_module.POINT_OVERHEAD_SECONDS)
    assert sweep_module.estimate_seconds(two) == pytest.approx(2 * base)
    assert sweep_module.estimate_seconds(longer) > base
    assert sweep_module.estimate_seconds(dataclasses.replace(one, runs=3)) == pytest.approx(3 * base)  # per run
    # a family whose sample length is its own parameter says so (system: duration_s)
    fixed = Sweep("s", "system", [{"test": "spawn", "duration_s": 2.0}], repeat=1, warmup=0, runs=1)
    assert sweep_module.estimate_seconds(fixed) == pytest.approx(2.0 + sweep_module.POINT_OVERHEAD_SECONDS)


def commands_with_progress() -> list[str]:
    """The subcommands that take --no-progress (so draw bars): every one follows the one rule."""
    from memlab import cli

    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return sorted(name for name, sub in action.choices.items()
                  if any(a.dest == "no_progress" for a in sub._actions))


CHEAP_RUNS = {
    "sweep": lambda out: ["sweep", "calibrate.quick", "--out", str(out / "c.csv")],
    "tour": lambda out: ["tour", "--reduced", "--family", "calibrate", "--out", str(out / "t")],
    "reproduce": lambda out: ["reproduce", "table6.1", "--quick", "--out", str(out / "r")],
}


def test_every_command_with_bars_is_covered_here():
    assert sorted(CHEAP_RUNS) == commands_with_progress()


@pytest.mark.parametrize("command", sorted(CHEAP_RUNS))
def test_stderr_into_a_file_gets_no_bar_and_a_terminal_gets_one(command, tmp_path):
    """--help says the bars are off when stderr is not a terminal: reproduce drew them into the
    file all the same (issue 27)."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        done = subprocess.run([sys.executable, "-m", "memlab", *CHEAP_RUNS[command](tmp_path / "file")],
                              stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL, timeout=300)
    text = log.read_text()
    assert done.returncode == 0, text
    assert "\r" not in text and "%|" not in text and "it/s" not in text, text
    code, drawn, _ = run_in_terminal(CHEAP_RUNS[command](tmp_path / "terminal"))
    assert code == 0, drawn
    assert "%|" in drawn or re.search(r"\d+/\d+ \[", drawn), drawn  # a bar, so the first check can fail
