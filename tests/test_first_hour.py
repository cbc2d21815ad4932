"""What a new user meets first: the install's errors, --version, help that lists what a family
takes, "did you mean", and the sweep list."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from memlab import __version__, cli, registry
from memlab.family import check_choice, check_int, check_number, describe_params

ROOT = Path(__file__).resolve().parent.parent


def memlab(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlab", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "100", **env})


# ---- install ----------------------------------------------------------------------------


def test_setup_without_a_compiler_says_what_is_missing_in_one_sentence():
    result = subprocess.run([sys.executable, "setup.py", "--name"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "CC": "/no/such/cc"}, timeout=120)
    assert result.returncode == 1
    message = result.stderr.strip()
    assert "Traceback" not in message and len(message.splitlines()) == 1, message
    assert "needs a C compiler" in message and "'/no/such/cc' was not found" in message
    assert "apt-get install gcc python3-dev" in message and "dnf install gcc python3-devel" in message


def _setup_function(name: str, **namespace):
    """One function of setup.py, compiled alone (importing setup.py would run setup())."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    keep = [node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.Assign)) and
            (getattr(node, "name", None) == name or
             any(getattr(t, "id", "") == "BUILD_PACKAGES" for t in getattr(node, "targets", [])))]
    module = types.ModuleType("setup_part")
    module.__dict__.update(namespace)
    exec(compile(ast.Module(body=keep, type_ignores=[]), "setup.py", "exec"), module.__dict__)
    return getattr(module, name)


def test_setup_without_python_headers_names_the_package(tmp_path, monkeypatch):
    import shlex
    import shutil
    import sysconfig

    fake_sysconfig = types.SimpleNamespace(get_paths=lambda: {"include": str(tmp_path)})
    check = _setup_function("check_build_tools", os=os, shlex=shlex, shutil=shutil, sys=sys,
                            sysconfig=fake_sysconfig)
    monkeypatch.setenv("CC", sys.executable)  # a program that exists: only the headers are missing
    with pytest.raises(SystemExit) as stop:
        check()
    message = str(stop.value.code)
    assert "Python.h is not in" in message and str(tmp_path) in message
    assert "python3-dev" in message and "python3-devel" in message
    real = _setup_function("check_build_tools", os=os, shlex=shlex, shutil=shutil, sys=sys, sysconfig=sysconfig)
    monkeypatch.setenv("CC", "cc")
    if shutil.which("cc") and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        real()  # this machine builds memlab: no complaint


def test_readme_names_the_build_packages_before_the_two_commands():
    text = (ROOT / "README.md").read_text()
    first_command = text.index("python3 -m venv .venv")
    for package in ("gcc", "python3-dev", "python3-devel"):
        assert -1 < text.find(package) < first_command, package
    assert "Debian" in text[:first_command] and "Fedora" in text[:first_command]


# ---- --version, python -m memlab ------------------------------------------------------------


def test_version_and_python_dash_m():
    result = memlab("--version")
    assert result.returncode == 0
    assert result.stdout.startswith(f"memlab {__version__} (Python ")
    assert "core built by" in result.stdout
    assert memlab("--help").stdout.startswith("usage: memlab")


# ---- memlab run FAMILY --help -----------------------------------------------------------------


@pytest.mark.parametrize("name", list(registry.all_families()))
def test_run_help_lists_every_parameter_of_the_params_class(name):
    fam = registry.family(name)
    result = memlab("run", name, "--help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"parameters of {name}" in text
    rows = {line.split()[0]: line for line in text.splitlines()
            if line.startswith("  ") and not line.startswith("   ") and line.split()}
    for field in dataclasses.fields(fam.params_type):
        assert field.name in rows, f"{name}: {field.name} is not listed"
        spec = next(s for s in fam.describe_params() if s.name == field.name)
        assert spec.type.split()[0] in rows[field.name] and spec.default_text in rows[field.name]


def test_describe_params_reads_ranges_choices_units_and_help_from_the_class():
    @dataclass(frozen=True)
    class ToyParams:
        """A toy.

        - ``span_bytes``: how much memory to touch.
        - ``mode``: how to touch it.
        """

        span_bytes: int = 4096
        mode: str = "read"
        ratio: float = 0.5
        cpu: int | None = None

        def __post_init__(self):
            check_int("span_bytes", self.span_bytes, 1024, 1 << 30)
            check_choice("mode", self.mode, ("read", "write"))
            check_number("ratio", self.ratio, 0.0, 1.0, exclusive_minimum=True)
            if self.cpu is not None:
                check_int("cpu", self.cpu, 0, 7)

    specs = {s.name: s for s in describe_params(ToyParams)}
    assert specs["span_bytes"].allowed == "1KiB .. 1GiB" and specs["span_bytes"].unit == "bytes"
    assert specs["span_bytes"].default_text == "4KiB" and specs["span_bytes"].help == "how much memory to touch."
    assert specs["mode"].allowed == "read, write" and specs["mode"].type == "str"
    assert specs["ratio"].allowed == "above 0, up to 1"
    assert specs["cpu"].allowed == "None or 0 .. 7" and specs["cpu"].default_text == "None"


def test_describe_params_falls_back_to_the_module_docstring(monkeypatch):
    """bandwidth's params class says "see the module docstring": the help comes from there."""
    @dataclass(frozen=True)
    class ToyParams:
        """One toy point; see the module docstring for each parameter."""

        pages: str = "4k"
        strict_pages: bool = False

    module = types.ModuleType("toy_family")
    module.__doc__ = ("- ``pages``: ``4k`` or ``thp`` (``strict_pages``: a refused huge page is an error).\n"
                      "- ``other``: not a field.")
    monkeypatch.setitem(sys.modules, "toy_family", module)
    ToyParams.__module__ = "toy_family"
    specs = {s.name: s for s in describe_params(ToyParams)}
    assert specs["pages"].help == "4k or thp (strict_pages: a refused huge page is an error)."
    assert specs["strict_pages"].help == "a refused huge page is an error."  # no stray ")"
    bandwidth = {s.name: s for s in registry.family("bandwidth").describe_params()}
    assert bandwidth["op"].help.startswith("read (load every vector")


# ---- did you mean ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, hint",
    [(["run", "chaes"], "did you mean 'chase'"),
     (["run", "chase", "working_set=1MiB"], "did you mean 'working_set_bytes'"),
     (["run", "chase", "order=randon"], "did you mean 'random'"),
     (["sweep", "chase.quik"], "did you mean 'quick'"),
     (["sweep", "fig3_15_quik"], "did you mean 'fig3_15_quick'"),
     (["tour", "--family", "regoin"], "did you mean 'region'"),
     (["tuor"], "did you mean 'tour'")],
)
def test_unknown_names_suggest_the_closest(args, hint):
    result = memlab(*args)
    assert result.returncode == 2
    assert hint in result.stderr, result.stderr


# ---- sweep --list, help text ----------------------------------------------------------------


def test_sweep_list_gives_points_time_and_description():
    result = memlab("sweep", "--list")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["sweep", "points", "time", "what", "it", "measures"]
    listed = {line.split()[0]: line for line in lines[1:] if line and not line.startswith(" ")}
    for fam in registry.all_families().values():
        for sweep_name in fam.sweeps:
            line = listed[f"{fam.name}.{sweep_name}"]
            words = line.split()
            try:
                fam.sweep(sweep_name)
            except ValueError as error:  # e.g. needs SMT: listed with its description and the reason
                assert words[1:3] == ["-", "-"] and len(words) > 4, line
                flat = " ".join(result.stdout.split())
                assert f"(not on this machine: {' '.join(str(error).split())})" in flat, line
                continue
            assert words[1].isdigit() and int(words[1]) > 0
            assert words[2].startswith("~") and words[3] in ("s", "min", "h")
            assert len(words) > 4, f"{line!r} has no description"
    assert ">>>" not in result.stdout  # docstring examples are not descriptions


def test_sweep_list_names_a_sweep_this_machine_cannot_run_with_the_reason(monkeypatch):
    """A sweep whose factory refuses this machine (fig3_25 without SMT) is listed, not fatal."""
    from memlab import calibrate

    def needs_smt():
        """Two threads on SMT siblings."""
        raise ValueError("placement='smt' needs 2 SMT siblings of one core")

    fam = dataclasses.replace(calibrate.FAMILY, sweeps={**calibrate.FAMILY.sweeps, "needs_smt": needs_smt})
    monkeypatch.setattr(calibrate, "FAMILY", fam)
    flat = " ".join(cli.sweep_listing(width=100).split())
    assert ("calibrate.needs_smt - - Two threads on SMT siblings. (not on this machine: "
            "placement='smt' needs 2 SMT siblings of one core)") in flat
    assert "calibrate.quick 1 ~" in flat  # the others are listed as before


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, f"{path} {name}")
        elif action.option_strings:
            yield path, action


def test_every_option_has_help_text():
    missing = [f"{path} {action.option_strings[0]}" for path, action in _options(cli.build_parser(), "memlab")
               if not action.help or action.help == argparse.SUPPRESS]
    assert not missing, missing


# ---- one exit-code rule for every subcommand ---------------------------------------------------
# 2: the command line is wrong (unknown option or name, a value out of range, an input file that is
# missing or not a dataset); 1: the command ran and failed; 0: done.


def _subcommands() -> list[str]:
    action = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def _last_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("memlab: warning")]
    assert lines and lines[-1].startswith("memlab") and "error:" in lines[-1], err
    return lines[-1]


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_exits_2_on_an_unknown_option(command, capsys):
    assert cli.main([command, "--no-such-option"]) == 2
    line = _last_error_line(capsys.readouterr().err)  # argparse names a missing positional first
    assert "--no-such-option" in line or "arguments are required" in line, line


def test_memlab_without_a_command_lists_them_and_exits_2(capsys):
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert "tour" in captured.out and "name a command" in _last_error_line(captured.err)


BAD_ARGUMENTS = {
    "info": (["info", "--json", "extra"], "unrecognized arguments: extra"),
    "check": (["check", "--tune-setting", "governor"], "--tune-setting needs --tune"),
    "run": (["run"], "memlab run needs a FAMILY"),
    "sweep": (["sweep"], "name a sweep"),
    "compare": (["compare", "{tmp}/absent.csv", "{tmp}/absent2.csv"], "absent.csv"),
    "plot": (["plot", "{tmp}/absent.csv"], "absent.csv"),
    "report": (["report", "{tmp}/absent.csv", "-o", "{tmp}/r.html"], "absent.csv"),
    "merge": (["merge", "{tmp}/r.html", "{tmp}/absent.csv"], "absent.csv"),
    "tour": (["tour", "--family", "chaes", "--out", "{tmp}/tour"], "did you mean 'chase'"),
    "reproduce": (["reproduce", "fig3.51", "--out", "{tmp}/tour"], "item='fig3.51' is not an item"),
}


@pytest.mark.parametrize("command", sorted(BAD_ARGUMENTS))
def test_a_bad_argument_exits_2_with_one_error_line_in_every_subcommand(command, tmp_path, capsys):
    args, words = BAD_ARGUMENTS[command]
    assert cli.main([a.format(tmp=tmp_path) for a in args]) == 2
    assert words in _last_error_line(capsys.readouterr().err)
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "tour").exists()


def test_an_unreadable_dataset_is_a_bad_argument_too(tmp_path, capsys):
    (tmp_path / "junk.csv").write_text("a,b\n1,2\n")
    (tmp_path / "junk.json").write_text("{")  # a sidecar cut short
    for command in (["plot"], ["report", "-o", str(tmp_path / "r.html")], ["merge", str(tmp_path / "r.html")]):
        assert cli.main([*command, str(tmp_path / "junk.csv")]) == 2
        assert "junk" in _last_error_line(capsys.readouterr().err)


def test_a_command_that_runs_and_fails_exits_1(tmp_path, capsys, monkeypatch):
    """An output seen to be unwritable before the work is a bad argument (2); a write that fails
    once the work is done (a full disk) is a failure (1)."""
    pytest.importorskip("matplotlib", reason="plot needs the plot extra")
    import errno

    import plot_fixtures

    plot_fixtures.pipe().save(tmp_path / "pipe.csv")
    assert cli.main(["plot", str(tmp_path / "pipe.csv"), "-o", str(tmp_path / "no-dir" / "fig.png")]) == 2
    assert "no-dir does not exist" in _last_error_line(capsys.readouterr().err)

    def disk_full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(cli, "atomic_write", disk_full)
    assert cli.main(["plot", str(tmp_path / "pipe.csv"), "-o", str(tmp_path / "fig.png")]) == 1
    assert "cannot write" in _last_error_line(capsys.readouterr().err)
    assert not (tmp_path / "fig.png").exists()


# ---- comparison tables ------------------------------------------------------------------------


def test_comparison_table_shows_only_the_parameters_that_vary(tmp_path):
    """A chase dataset has 17 parameters; the table shows the one that varies, the rest once above."""
    from memlab.compare import compare
    from memlab.dataset import Dataset
    from memlab.registry import family

    params = [dataclasses.asdict(family("chase").params(working_set_bytes=size)) for size in (1 << 14, 1 << 20)]
    names = list(params[0])

    def dataset(scale):
        rows = [{"family": "chase", **p, "ns_per_element": 2.0 * scale * (i + 1),
                 "ns_per_element_samples": [2.0 * scale * (i + 1) * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)]}
                for i, p in enumerate(params)]
        return Dataset(rows, {"family": "chase", "param_names": names, "primary_metric": "ns_per_element"})

    dataset(1.0).save(tmp_path / "a.csv")
    dataset(1.5).save(tmp_path / "b.csv")
    text = compare(tmp_path / "a.csv", tmp_path / "b.csv").format()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("family"))
    assert header.split()[:3] == ["family", "working_set_bytes", "baseline"]
    every = next(line for line in lines if line.startswith("every point:"))
    assert "npad=7" in every and "order=random" in every
    assert "working_set_bytes=" not in every
    table = lines[lines.index(header):lines.index(header) + 3]
    assert len(header) < 105, header  # all 17 parameters made it ~330 characters
    assert max(line.index("regression") for line in table[1:]) < 105, table


# ---- quick sweeps still show their phenomenon -------------------------------------------------


@pytest.mark.parametrize("name", ["fig3_15_quick", "fig3_11_quick"])
def test_the_chase_notebooks_quick_sweeps_pass_the_last_cache(name):
    from memlab import chase
    from memlab.machine import cache_sizes

    sweep = registry.family("chase").sweep(name)
    sizes = sorted({p["working_set_bytes"] for p in sweep.points})
    last = max(v for k, v in cache_sizes().items() if k != "L1i") if cache_sizes() else 1 << 23
    assert sizes[-1] > last or sizes[-1] == chase.QUICK_MAX_WORKING_SET_BYTES
    assert sizes[0] <= 4096 and len(sizes) >= 6  # L1, L2 and the steps between are there too


def test_quick_sizes_follow_the_caches_they_are_given():
    from memlab import chase

    assert chase.quick_sizes({"L1d": 32 << 10, "L2": 1 << 20, "L3": 8 << 20})[-1] == 16 << 20
    assert chase.quick_sizes({"L1d": 32 << 10, "L2": 1 << 20, "L3": 6 << 20})[-1] == 8 << 20
    assert chase.quick_sizes({"L3": 4 << 30})[-1] == chase.QUICK_MAX_WORKING_SET_BYTES  # capped
    assert chase.quick_sizes({})[-1] > 1 << 23


# ---- the notebook extra -----------------------------------------------------------------------


def test_the_notebook_extra_brings_a_jupyter_front_end_and_widgets():
    """`pip install '.[notebook]'` must give a working `jupyter lab` (it once gave nbclient only)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {requirement.split(">")[0].split("=")[0].split("[")[0].strip().lower()
             for requirement in extras["notebook"]}
    assert {"jupyterlab", "ipykernel", "ipywidgets", "matplotlib"} <= names, names
    assert ".venv/bin/jupyter lab notebooks/" in (ROOT / "README.md").read_text()


def test_jupyter_lab_starts_its_command_line_where_the_extra_is_installed():
    import importlib.util

    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("the notebook extra (jupyterlab) is not installed here")
    result = subprocess.run([sys.executable, "-m", "jupyterlab", "--version"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip()[:1].isdigit(), result.stderr
