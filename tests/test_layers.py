"""The package's layering is a contract: import-linter checks it, and imports stay at module level.

docs/architecture.md draws the layers; pyproject.toml's [tool.importlinter]
states them. These tests run the contract on the package, show that it
rejects an upward import, check that every module is placed in a layer,
and that no function imports a memlab module (or anything but an optional
dependency) behind the reader's back.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memlab"
PYPROJECT = ROOT / "pyproject.toml"

#: Optional dependencies (extras) a function may import when it needs them.
OPTIONAL_DEPENDENCIES = {"matplotlib", "PIL", "pandas", "IPython", "threadpoolctl", "distributed", "pyarrow"}


def modules() -> dict[str, Path]:
    """Every top-level module of the package by dotted name (the package itself left out); a
    subpackage (memlab/catalogue/) counts as one module, its ``__init__.py``."""
    found = {f"memlab.{path.stem}": path for path in sorted(PACKAGE.glob("*.py")) if path.stem != "__init__"}
    found |= {f"memlab.{path.parent.name}": path for path in sorted(PACKAGE.glob("*/__init__.py"))}
    return found


def source_files() -> dict[str, Path]:
    """Every Python file of the package by dotted name, the modules inside subpackages included."""
    found = dict(modules())
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        found |= {f"memlab.{init.parent.name}.{path.stem}": path for path in sorted(init.parent.glob("*.py"))
                  if path.stem != "__init__"}
    return found


def layers() -> list[list[str]]:
    """The package's layers: the contract over memlab's top-level modules (not a subpackage's own)."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers" and not c.get("containers")]
    return [[name.strip() for name in layer.replace(":", "|").split("|")] for layer in contract["layers"]]


def test_every_subpackage_module_is_placed_in_its_container_contract():
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        container = f"memlab.{init.parent.name}"
        (contract,) = [c for c in config["contracts"] if container in c.get("containers", [])]
        placed = sorted(name.strip() for layer in contract["layers"] for name in layer.split("|"))
        assert placed == sorted(p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"), container


def lint(pyproject: Path, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if pythonpath is not None:
        env = {"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"}
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(pyproject)!r}, no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_every_module_is_placed_in_a_layer():
    placed = [name for layer in layers() for name in layer]
    assert len(placed) == len(set(placed)), "a module is listed twice"
    assert sorted(placed) == sorted(modules()), (
        "every memlab module belongs in exactly one layer of pyproject.toml's [tool.importlinter] "
        "(a module left out could import anything, cycles included)"
    )


def test_the_layers_contract_is_kept():
    pytest.importorskip("importlinter", reason="import-linter (the test extra) is not installed")
    result = lint(PYPROJECT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("low, high", [("grid", "sweep"), ("chase", "registry"), ("dataset", "plot"),
                                       ("pipe", "clear")])
def test_the_contract_rejects_an_import_running_up_or_across(tmp_path, low, high):
    """A copy of the package with one forbidden import added breaks the contract."""
    pytest.importorskip("importlinter", reason="import-linter (the test extra) is not installed")
    copy = tmp_path / "memlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "_bin", "__pycache__"))
    target = copy / f"{low}.py"
    target.write_text(target.read_text() + f"\nimport memlab.{high}  # an upward or sideways import\n")
    result = lint(PYPROJECT, tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"memlab.{low} is not allowed to import memlab.{high}" in result.stdout


def test_the_catalogue_contract_rejects_one_source_module_importing_another(tmp_path):
    """Inside memlab/catalogue/ a source module (pipes) may import claims and core, not another source."""
    pytest.importorskip("importlinter", reason="import-linter (the test extra) is not installed")
    copy = tmp_path / "memlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "_bin", "__pycache__"))
    target = copy / "catalogue" / "pipes.py"
    target.write_text(target.read_text() + "\nimport memlab.catalogue.clearing  # a sideways import\n")
    result = lint(PYPROJECT, tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "memlab.catalogue.pipes is not allowed to import memlab.catalogue.clearing" in result.stdout


def _function_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement inside a function or method body."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                found.extend((inner.lineno, alias.name) for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom):
                found.append((inner.lineno, "." * inner.level + (inner.module or "")))
    return sorted(set(found))


@pytest.mark.parametrize("name", sorted(source_files()))
def test_no_function_level_import_but_optional_dependencies(name):
    path = source_files()[name]
    hidden = [(line, module) for line, module in _function_imports(path)
              if module.split(".")[0] not in OPTIONAL_DEPENDENCIES]
    assert not hidden, (
        f"{path.name} imports inside functions: {hidden}; import at the top of the module "
        "(only optional dependencies such as matplotlib may be imported where they are needed)"
    )


def test_the_function_level_import_check_finds_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef f():\n    from memlab import sweep\n    import matplotlib\n")
    assert _function_imports(sample) == [(4, "memlab"), (5, "matplotlib")]


@pytest.mark.parametrize("name", sorted(source_files()))
def test_modules_import_submodules_not_the_package(name):
    """``from memlab import X`` names a module; nothing reaches back up into memlab/__init__.py."""
    tree = ast.parse(source_files()[name].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "memlab":
            for alias in node.names:
                assert f"memlab.{alias.name}" in modules(), (
                    f"{name} imports {alias.name!r} from the memlab package itself (line {node.lineno})")
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name != "memlab", f"{name} imports the memlab package itself (line {node.lineno})"
