"""MkDocs hook: every notebook of notebooks/ executed at build time, a page with its outputs.

Each ``notebooks/<name>.ipynb`` becomes the page ``notebooks/<name>.md`` of the site:
executed top to bottom by nbclient in a temporary folder (so nothing is written
into the tree; the notebooks' quick mode writes no results/ anyway), converted by
nbconvert to Markdown, its figures PNG files beside the page. The pages fill the
nav section named :data:`NAV_SECTION` (``Notebooks: []`` in mkdocs.yml), in file
name order, each titled by its first heading: a notebook added to notebooks/ is
in the site without a list to keep.

How much each notebook measures (``MEMLAB_DOCS_NOTEBOOKS``):

- ``reduced`` (the default): every sweep a notebook runs through
  ``memlab.sweep.run_sweep`` is first thinned by :func:`thin_sweep`: its x axis
  (the numeric parameter of most values) to :data:`REDUCED_VALUES` values with every
  combination of the others at each, one sample of at most 20 ms per point and no
  progress bar; the page says so above its first cell. The six notebooks then take
  about three minutes on a 2-vCPU VM at load 8-9 (the chase notebook 76 s against 139 s
  as stored, matrix 23 s against 29 s).
- ``quick``: the notebooks as they are stored (their quick sweeps, minutes).

``MEMLAB_DOCS_ONLY_NOTEBOOKS=matrix,pipes`` executes only those notebooks and
leaves the others out of the site (a quicker build while editing pages; the
test of the site builds so); the build log names what it left out.

A notebook names the families it needs (``metadata.memlab.families``); the build
fails naming the one that is not registered, and a cell that raises fails it with
the cell and its traceback (nbclient's CellExecutionError).

A link of a notebook's Markdown cells is written relative to notebooks/: one to a
page of docs/ becomes a link to that page, one to another file of the tree a link
to its copy under ``repo/`` (as docs/hooks/readme.py does for the pages).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import posixpath
import re
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from nbconvert import MarkdownExporter

from memlab.registry import all_families

#: The folder of the tree holding the notebooks, and of the site holding their pages.
NOTEBOOKS_FOLDER = "notebooks"
#: The nav section of mkdocs.yml the notebook pages fill.
NAV_SECTION = "Notebooks"
#: Where copies of the tree's files outside docs/ live in the site (docs/hooks/readme.py's).
REPO_FOLDER = "repo"
MODE_VARIABLE = "MEMLAB_DOCS_NOTEBOOKS"
MODES = ("reduced", "quick")
ONLY_VARIABLE = "MEMLAB_DOCS_ONLY_NOTEBOOKS"
#: Values of a sweep's x axis kept in the reduced mode (every other parameter's kept whole).
REDUCED_VALUES = 5
#: One cell may take this long before the build fails (the longest quick cell: a minute).
CELL_TIMEOUT_S = 600

REDUCED_TARGET_SECONDS = 0.02


def thin_sweep(sweep, values: int = REDUCED_VALUES, target_seconds: float = REDUCED_TARGET_SECONDS):
    """A small copy of ``sweep`` that keeps its curves: of the numeric parameter with the most
    distinct values (the x axis: a working set, a size) at most ``values`` values spread over it,
    the ends kept, with every combination of the other parameters at each (a parameter of names,
    a variant or an order, is never thinned: a figure's bars stay whole); one sample of at most
    ``target_seconds`` per point, no warm-up.

    Unlike ``memlab.tour.reduce_sweep``, which keeps a few points of the whole list, the pairs a
    figure compares (first word against last word at one size) stay together.

    >>> from memlab.grid import Sweep, grid
    >>> small = thin_sweep(Sweep("s", "chase", grid(order=["a", "b"], working_set_bytes=range(10))), 3)
    >>> [(p["order"], p["working_set_bytes"]) for p in small.points]
    [('a', 0), ('a', 4), ('a', 9), ('b', 0), ('b', 4), ('b', 9)]
    """
    if values < 2:
        raise ValueError(f"values={values} is below the minimum 2")
    if not target_seconds > 0:
        raise ValueError(f"target_seconds={target_seconds} must be above 0")
    distinct: dict = {}
    for point in sweep.points:
        for name, value in point.items():
            seen = distinct.setdefault(name, [])
            if value not in seen:
                seen.append(value)
    numeric = {name: seen for name, seen in distinct.items()
               if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)}
    points = sweep.points
    if numeric:
        axis = max(numeric, key=lambda name: len(numeric[name]))
        axis_values = numeric[axis]
        if len(axis_values) > values:
            last = len(axis_values) - 1
            kept = [axis_values[round(i * last / (values - 1))] for i in range(values)]
            points = [point for point in sweep.points if point.get(axis) in kept]
    target = target_seconds if sweep.target_seconds is None else min(sweep.target_seconds, target_seconds)
    return dataclasses.replace(sweep, points=points, repeat=1, warmup=0, target_seconds=target)


def reduce_cell() -> str:
    """The cell run first in the reduced mode (not shown): every run_sweep of the notebook thinned."""
    return "\n".join([
        "import dataclasses",
        "",
        "import memlab.sweep as _memlab_sweep",
        "",
        f"REDUCED_VALUES = {REDUCED_VALUES}",
        f"REDUCED_TARGET_SECONDS = {REDUCED_TARGET_SECONDS}",
        "",
        inspect.getsource(thin_sweep),
        "_memlab_run_sweep = _memlab_sweep.run_sweep",
        "",
        "",
        "def _thinned_run_sweep(sweep, *args, **kwargs):",
        "    kwargs.setdefault('progress', False)",
        "    return _memlab_run_sweep(thin_sweep(sweep), *args, **kwargs)",
        "",
        "",
        "_memlab_sweep.run_sweep = _thinned_run_sweep",
    ])


log = logging.getLogger("mkdocs.hooks.notebooks")

_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_HEADING = re.compile(r"^#\s+(.+)$", re.M)


def mode() -> str:
    """The execution mode of this build (``MEMLAB_DOCS_NOTEBOOKS``, default ``reduced``)."""
    value = os.environ.get(MODE_VARIABLE, "reduced")
    if value not in MODES:
        raise PluginError(f"{MODE_VARIABLE}={value!r} is not one of {', '.join(MODES)}")
    return value


def notebooks(root: Path) -> list[Path]:
    """Every notebook of notebooks/, by name; only those ``MEMLAB_DOCS_ONLY_NOTEBOOKS`` names if set."""
    found = sorted((root / NOTEBOOKS_FOLDER).glob("*.ipynb"))
    only = [name.strip() for name in os.environ.get(ONLY_VARIABLE, "").split(",") if name.strip()]
    if not only:
        return found
    names = [path.stem for path in found]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise PluginError(f"{ONLY_VARIABLE} names {', '.join(unknown)}, not notebooks of "
                          f"{NOTEBOOKS_FOLDER}/ (those are {', '.join(names)})")
    left_out = [name for name in names if name not in only]
    if left_out:
        log.info(f"notebooks: {', '.join(left_out)} left out of the site ({ONLY_VARIABLE})")
    return [path for path in found if path.stem in only]


def title(nb) -> str:
    """The notebook's first Markdown heading of level 1 (its file name without one)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = _HEADING.search(cell.source)
            if found:
                return found.group(1).strip()
    return ""


def _check_families(path: Path, nb) -> None:
    wanted = nb.metadata.get("memlab", {}).get("families", [])
    missing = [name for name in wanted if name not in all_families()]
    if missing:
        raise PluginError(f"{path.name} needs the families {', '.join(missing)}, not registered in "
                          "memlab/registry.py")


def execute(path: Path, run_mode: str):
    """The notebook at ``path`` executed in a temporary folder (reduced first if asked)."""
    nb = nbformat.read(path, as_version=4)
    _check_families(path, nb)
    if run_mode == "reduced":
        nb.cells.insert(0, nbformat.v4.new_code_cell(reduce_cell()))
    with tempfile.TemporaryDirectory(prefix="memlab-docs-notebook-") as folder:
        client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                         resources={"metadata": {"path": folder}})
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as error:
            raise PluginError(f"{path.name} failed when executed for the site:\n{error}") from error
    if run_mode == "reduced":
        del nb.cells[0]
    return nb


def _note(name: str, run_mode: str) -> str:
    source = f"[{name}.ipynb](../{REPO_FOLDER}/{NOTEBOOKS_FOLDER}/{name}.ipynb)"
    if run_mode == "reduced":
        how = (f"with every sweep thinned to {REDUCED_VALUES} values of its x axis and one sample of "
               f"{REDUCED_TARGET_SECONDS * 1000:.0f} ms per point, so the figures show the curves' shapes, "
               "not numbers to quote, and the verdicts are judged on those few points")
    else:
        how = "in its quick mode, as it is stored"
    return (f"*This page is the notebook {source}, executed when this site was built, on the machine "
            f"whose facts the first cell prints, {how}. Run it (`jupyter lab notebooks/`) for this "
            "machine's own numbers.*\n")


def _with_note(markdown: str, note: str) -> str:
    """The note after the page's first heading (the title stays first)."""
    found = _HEADING.search(markdown)
    if not found:
        return note + "\n" + markdown
    end = found.end()
    return markdown[:end] + "\n\n" + note + markdown[end:]


def rewrite_links(markdown: str, page_uri: str, root: Path, docs: Path, found: set[str]) -> str:
    """A notebook's links (relative to notebooks/) made right for its page at ``page_uri``."""
    depth = page_uri.count("/")

    def replace(match: re.Match) -> str:
        link = match.group(2)
        if _EXTERNAL.match(link) or link.startswith("/"):
            return match.group(0)
        target = (root / NOTEBOOKS_FOLDER / link).resolve()
        try:
            inside_docs = target.relative_to(docs).as_posix()
        except ValueError:
            inside_docs = None
        if inside_docs is not None:
            link = "../" * depth + inside_docs
        else:
            try:
                tree_path = target.relative_to(root).as_posix()
            except ValueError:
                return match.group(0)
            if tree_path.startswith(f"{NOTEBOOKS_FOLDER}/") and tree_path.endswith(".ipynb"):
                link = "../" * depth + posixpath.splitext(tree_path)[0] + ".md"
            elif (root / tree_path).is_file():
                found.add(tree_path)
                link = "../" * depth + f"{REPO_FOLDER}/{tree_path}"
        return match.group(1) + link + (match.group(3) or "") + match.group(4)

    return _LINK.sub(replace, markdown)


def render(path: Path, run_mode: str, root: Path, docs: Path, found: set[str]) -> tuple[str, str, dict]:
    """``path`` executed and converted: its title, its page's Markdown and its images by site path."""
    nb = execute(path, run_mode)
    name = path.stem
    markdown, resources = MarkdownExporter().from_notebook_node(
        nb, resources={"unique_key": name, "output_files_dir": f"{name}_files"})
    page_uri = f"{NOTEBOOKS_FOLDER}/{name}.md"
    markdown = markdown.replace("![png](", "![a figure the notebook drew](")
    markdown = _with_note(rewrite_links(markdown, page_uri, root, docs, found), _note(name, run_mode))
    images = {f"{NOTEBOOKS_FOLDER}/{file}": data for file, data in resources.get("outputs", {}).items()}
    return title(nb) or name, markdown, images


def _fill_nav(config, entries: list[dict]) -> None:
    nav = config["nav"]
    sections = [item for item in nav or [] if isinstance(item, dict) and NAV_SECTION in item]
    if len(sections) != 1:
        raise PluginError(f"mkdocs.yml's nav needs one section '{NAV_SECTION}: []' for the notebooks")
    sections[0][NAV_SECTION] = entries


def on_files(files: Files, config) -> Files:
    root = Path(config["config_file_path"]).resolve().parent
    docs = Path(config["docs_dir"]).resolve()
    run_mode = mode()
    entries = []
    found: set[str] = set()
    for path in notebooks(root):
        started = time.monotonic()
        name, markdown, images = render(path, run_mode, root, docs, found)
        log.info(f"notebooks: {path.name} executed ({run_mode}) in {time.monotonic() - started:.0f} s")
        page_uri = f"{NOTEBOOKS_FOLDER}/{path.stem}.md"
        files.append(File.generated(config, page_uri, content=markdown))
        for uri, data in images.items():
            files.append(File.generated(config, uri, content=data))
        found.add(path.relative_to(root).as_posix())
        entries.append({name: page_uri})
    for tree_path in sorted(found):
        uri = f"{REPO_FOLDER}/{tree_path}"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(root / tree_path)))
    _fill_nav(config, entries)
    return files
