"""The documentation site: the notebooks executed into pages, the figure gallery, the build.

docs/hooks/notebooks.py executes every notebooks/*.ipynb into a page and
docs/hooks/gallery.py draws every family's standard figure from the datasets of
docs/figures/data/; the slow test builds the whole site with ``mkdocs build
--strict`` in a temporary folder (one notebook executed, to keep it short: .ci/run
builds them all) and reads what it wrote.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.grid import Sweep, grid
from memlab.registry import all_families

ROOT = Path(__file__).resolve().parent.parent
HOOKS = ROOT / "docs" / "hooks"
DATA = ROOT / "docs" / "figures" / "data"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _needs_the_docs_extra():
    for module in ("mkdocs", "mkdocstrings", "nbconvert", "nbclient", "nbformat", "ipykernel", "matplotlib"):
        pytest.importorskip(module, reason=f"the docs extra ({module}) is not installed: pip install -e '.[docs]'")


def _hook(name: str):
    _needs_the_docs_extra()
    spec = importlib.util.spec_from_file_location(f"memlab_docs_hook_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_family_has_a_gallery_dataset():
    missing = [name for name in all_families() if not (DATA / f"{name}.csv").is_file()
               or not (DATA / f"{name}.json").is_file()]
    assert not missing, (f"no gallery dataset in docs/figures/data/ for {missing}: measure it with "
                         f"memlab tour --family NAME --out docs/figures/data")


def test_thin_sweep_keeps_every_pair_at_fewer_sizes():
    notebooks = _hook("notebooks")
    sweep = Sweep("s", "chase", grid(pointer_word=[0, 7], working_set_bytes=[1 << k for k in range(10, 20)]),
                  repeat=5, warmup=2, target_seconds=0.5)
    small = notebooks.thin_sweep(sweep, values=3)
    sizes = sorted({p["working_set_bytes"] for p in small.points})
    assert sizes == [1 << 10, 1 << 14, 1 << 19]  # the ends kept, one between (round(4.5) is 4)
    assert sorted((p["pointer_word"], p["working_set_bytes"]) for p in small.points) == sorted(
        (word, size) for word in (0, 7) for size in sizes)
    assert (small.repeat, small.warmup, small.target_seconds) == (1, 0, notebooks.REDUCED_TARGET_SECONDS)
    assert sweep.points == grid(pointer_word=[0, 7], working_set_bytes=[1 << k for k in range(10, 20)])
    variants = Sweep("v", "matrix", grid(variant=list("abcdefg"), n=[128, 1000]))
    assert notebooks.thin_sweep(variants, values=3).points == variants.points  # names are never thinned
    flags = Sweep("f", "chase", grid(check=[False, True], npad=[0, 1, 3, 7, 15]))
    assert [p["npad"] for p in notebooks.thin_sweep(flags, values=3).points] == [0, 3, 15, 0, 3, 15]
    short = Sweep("t", "calibrate", [{"budget_ns": 10**7}, {"budget_ns": 2 * 10**7}])
    assert notebooks.thin_sweep(short, values=3).points == short.points
    with pytest.raises(ValueError, match="values=1 is below the minimum 2"):
        notebooks.thin_sweep(sweep, values=1)
    with pytest.raises(ValueError, match="target_seconds=0 must be above 0"):
        notebooks.thin_sweep(sweep, target_seconds=0)


def test_the_reduce_cell_defines_what_it_calls():
    notebooks = _hook("notebooks")
    namespace: dict = {}
    exec(compile(notebooks.reduce_cell(), "reduce_cell", "exec"), namespace)  # the cell as the kernel runs it
    import memlab.sweep

    try:
        assert memlab.sweep.run_sweep is namespace["_thinned_run_sweep"]
        assert namespace["thin_sweep"](Sweep("s", "calibrate", [{"budget_ns": 10**7}])).repeat == 1
    finally:
        memlab.sweep.run_sweep = namespace["_memlab_run_sweep"]


def test_the_notebook_settings_refuse_what_they_do_not_know(monkeypatch):
    notebooks = _hook("notebooks")
    from mkdocs.exceptions import PluginError

    monkeypatch.setenv("MEMLAB_DOCS_NOTEBOOKS", "full")
    with pytest.raises(PluginError, match=r"MEMLAB_DOCS_NOTEBOOKS='full' is not one of reduced, quick"):
        notebooks.mode()
    monkeypatch.setenv("MEMLAB_DOCS_NOTEBOOKS", "quick")
    assert notebooks.mode() == "quick"
    monkeypatch.setenv("MEMLAB_DOCS_ONLY_NOTEBOOKS", "matrix, nothing")
    with pytest.raises(PluginError, match=r"names nothing, not notebooks of notebooks/ \(those are .*matrix"):
        notebooks.notebooks(ROOT)
    monkeypatch.setenv("MEMLAB_DOCS_ONLY_NOTEBOOKS", "matrix")
    assert [p.name for p in notebooks.notebooks(ROOT)] == ["matrix.ipynb"]
    monkeypatch.delenv("MEMLAB_DOCS_ONLY_NOTEBOOKS")
    assert [p.name for p in notebooks.notebooks(ROOT)] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_a_notebooks_links_point_into_the_site():
    notebooks = _hook("notebooks")
    found: set[str] = set()
    markdown = ("[the chase](../docs/chase.md#npad), [a script](../experiments/fig3_10.py), "
                "[another notebook](pipes.ipynb), [the web](https://example.org/a.md), [gone](../nothing.py)")
    rewritten = notebooks.rewrite_links(markdown, "notebooks/chase.md", ROOT, ROOT / "docs", found)
    assert rewritten == ("[the chase](../chase.md#npad), [a script](../repo/experiments/fig3_10.py), "
                         "[another notebook](../notebooks/pipes.md), [the web](https://example.org/a.md), "
                         "[gone](../nothing.py)")
    assert found == {"experiments/fig3_10.py"}


def test_the_gallery_has_a_section_per_family_and_names_those_without_data(tmp_path):
    gallery = _hook("gallery")
    data = tmp_path / "figures" / "data"
    data.mkdir(parents=True)
    for name in ("calibrate", "region"):
        for suffix in (".csv", ".json"):
            shutil.copy(DATA / f"{name}{suffix}", data)
    markdown, images, missing = gallery.page(tmp_path)
    assert missing == [name for name in all_families() if name not in ("calibrate", "region")]
    assert list(images) == ["gallery/region.png"] and images["gallery/region.png"].startswith(PNG_MAGIC)
    assert "## calibrate" in markdown and "**Core clock" in markdown  # a number, not a figure: its headline
    assert "memlab sweep region.quick --out region.csv\nmemlab plot region.csv" in markdown
    assert "[region.csv](figures/data/region.csv)" in markdown


def _tree_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.slow
@pytest.mark.timeout(600)  # one notebook executed (20 s at load 8 on a 2-vCPU VM) and every page built
def test_the_site_builds_strictly_with_a_notebook_page_and_the_gallery(tmp_path):
    _needs_the_docs_extra()
    site = tmp_path / "site"
    before = {folder: _tree_files(ROOT / folder) for folder in ("docs", "notebooks")}
    top_before = {p.name for p in ROOT.iterdir()}
    env = dict(os.environ, MEMLAB_DOCS_ONLY_NOTEBOOKS="matrix")
    env.pop("MEMLAB_DOCS_NOTEBOOKS", None)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "matrix.ipynb executed (reduced)" in done.stderr

    page = (site / "notebooks" / "matrix" / "index.html").read_text()
    assert "executed when this site was built" in page
    shown = re.findall(r'<img alt="a figure the notebook drew" src="([^"]+)"', page)
    notebook = (ROOT / "notebooks" / "matrix.ipynb").read_text()
    assert len(shown) == notebook.count("plot.figure(") and shown
    for src in shown:
        assert (site / "notebooks" / "matrix" / src).resolve().read_bytes().startswith(PNG_MAGIC)
    assert "The source&rsquo;s numbers beside this machine&rsquo;s" in page or \
        "The source's numbers beside this machine's" in page  # judge()'s table, as HTML
    assert (site / "repo" / "notebooks" / "matrix.ipynb").is_file()

    gallery = (site / "gallery" / "index.html").read_text()
    for name, family in all_families().items():
        assert f'id="{name}"' in gallery, name
        if family.has_figure:
            assert (site / "gallery" / f"{name}.png").read_bytes().startswith(PNG_MAGIC), name
            assert f'src="{name}.png"' in gallery, name
        assert (site / "figures" / "data" / f"{name}.csv").is_file(), name

    home = (site / "index.html").read_text()
    assert 'href="notebooks/matrix/"' in home and 'href="gallery/"' in home  # both in the nav
    reproduce = (site / "reproduce" / "index.html").read_text()
    assert 'href="../notebooks/matrix/"' in reproduce  # a notebook's link goes to its page
    assert 'href="../repo/notebooks/chase.ipynb"' in reproduce  # one left out: to the file

    assert {folder: _tree_files(ROOT / folder) for folder in before} == before, "the build wrote into the tree"
    assert {p.name for p in ROOT.iterdir()} == top_before
