"""The notebooks: stored without outputs, quick by default, and each runs top to bottom.

A notebook names the families it needs in its metadata (``memlab.families``),
or the kernel files it writes and measures (``memlab.kernel_files``:
notebooks/own_kernel.ipynb); it is skipped, with the reason, while one of the
families is not registered in memlab/registry.py (a family whose branch has
not been merged yet).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlab import catalogue
from memlab.registry import all_families

nbformat = pytest.importorskip("nbformat", reason="the notebook extra (nbformat) is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra (nbclient) is not installed")
pytest.importorskip("ipykernel", reason="the notebook extra (ipykernel) is not installed")
pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["bandwidth.ipynb", "chase.ipynb", "clearing.ipynb", "matrix.ipynb", "own_kernel.ipynb", "pipes.ipynb",
            "system.ipynb"]
CELL_TIMEOUT_S = 600


def load(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def test_one_notebook_per_family_is_there():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_is_stored_clean_and_quick(name):
    nb = load(name)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a code cell has stored outputs"
            assert cell.execution_count is None, f"{name}: a code cell has an execution count"
    parameters = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1, f"{name}: needs exactly one cell tagged 'parameters'"
    assert "FULL = False" in parameters[0].source.splitlines(), f"{name}: must be stored in quick mode"
    assert nb.metadata["memlab"]["families"] or nb.metadata["memlab"].get("kernel_files"), (
        f"{name}: metadata.memlab.families is empty (and it names no kernel_files)")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[-1].cell_type == "markdown"


@pytest.mark.slow
# A whole notebook is the suite's longest test (the chase notebook took 89 s at load
# average 5 on a 2-vCPU VM, pytest --durations): 600 s keeps 5x above it.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom_in_quick_mode(name, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path / "cache"))  # a kernel file's builds stay in the test's folder
    nb = load(name)
    registered = set(all_families())
    missing = [f for f in nb.metadata["memlab"]["families"] if f not in registered]
    if missing:
        families = f"famil{'ies' if len(missing) > 1 else 'y'} {', '.join(missing)}"
        pytest.skip(f"{name} needs the {families}, not registered in memlab/registry.py "
                    "(its branch is not merged yet)")
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    images = [
        output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    figures = sum(1 for cell in nb.cells if cell.cell_type == "code" and "plot.figure(" in cell.source)
    assert len(images) == figures, f"{name}: {figures} figures drawn but {len(images)} images shown"
    assert not (tmp_path / "results").exists(), "quick mode must not write results/"


def _section_of(nb, index: int) -> str:
    """The heading (first line) of the "## " section that holds cell ``index``."""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            return cell.source.splitlines()[0]
    return ""


def test_every_catalogue_item_has_a_section_in_its_notebook():
    """A code cell judges the item (the source's numbers beside this machine's, the verdicts) in a
    section whose heading names the figure or table (its number, or its label)."""
    for entry in catalogue.ITEMS:
        nb = load(Path(entry.notebook).name)
        judging = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                   and re.search(rf'(reproduce|judge)\("{re.escape(entry.key)}"[,)]', c.source)]
        assert judging, f"{entry.notebook} never judges {entry.key}"
        numbers = [word for word in entry.label.replace("-", " ").split() if any(ch.isdigit() for ch in word)]
        token = numbers[0] if numbers else entry.label
        heading = _section_of(nb, judging[0])
        assert token.lower() in heading.lower(), (
            f"{entry.notebook}: {entry.key} is judged under {heading!r}, which does not name {token!r}")
