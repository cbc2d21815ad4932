"""The notebooks: stored without outputs, quick by default, and each runs top to bottom.

A notebook names the families it needs in its metadata (``memlab.families``);
it is skipped, with the reason, while one of them is not registered in
memlab/registry.py (a family whose branch has not been merged yet).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.registry import all_families

nbformat = pytest.importorskip("nbformat", reason="the notebook extra (nbformat) is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra (nbclient) is not installed")
pytest.importorskip("ipykernel", reason="the notebook extra (ipykernel) is not installed")
pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["bandwidth.ipynb", "chase.ipynb", "clearing.ipynb", "matrix.ipynb", "pipes.ipynb", "system.ipynb"]
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
    assert nb.metadata["memlab"]["families"], f"{name}: metadata.memlab.families is empty"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[-1].cell_type == "markdown"


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom_in_quick_mode(name, tmp_path):
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
