"""MkDocs hooks of the documentation site (mkdocs.yml).

- The home page is README.md, its links made relative to docs/: README links to
  the pages as ``docs/x.md`` (right on GitHub and in a clone), in the site the
  pages are at the top.
- A page's link to a file of the tree outside docs/ (``../experiments/fig3_10.py``,
  ``../notebooks/chase.ipynb``) points at a copy of that file in the site, under
  ``repo/``: the site stays whole without the network, and ``--strict`` still
  fails on a link whose file does not exist.
- A link to a notebook (``../notebooks/chase.ipynb``) points at its executed page
  (``notebooks/chase.md``, docs/hooks/notebooks.py), which links to the file; at
  the copy of the file when the build left the page out.
- Doctest lines in docstrings and pages (``>>> ...`` and their output, up to a
  blank line) are shown as Python code, not read as Markdown (where ``[1]``
  would be a reference link).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.structure.files import File, Files

_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
#: Where copies of the tree's files outside docs/ live in the site.
REPO_FOLDER = "repo"
#: The tree's notebooks, executed into pages of the site's folder of the same name.
NOTEBOOKS_FOLDER = "notebooks"


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _docs(config) -> Path:
    return Path(config["docs_dir"]).resolve()


def _outside_target(page_uri: str, link: str, root: Path, docs: Path) -> str | None:
    """The tree path (relative to the root) a page's link names outside docs/, or None."""
    if _EXTERNAL.match(link) or link.startswith("/"):
        return None
    target = (docs / posixpath.dirname(page_uri) / link).resolve()
    try:
        target.relative_to(docs)
        return None
    except ValueError:
        pass
    try:
        return target.relative_to(root).as_posix()
    except ValueError:
        return None


def _is_notebook(tree_path: str) -> bool:
    return tree_path.startswith(f"{NOTEBOOKS_FOLDER}/") and tree_path.endswith(".ipynb")


def _rewrite(markdown: str, page_uri: str, root: Path, docs: Path, found: set[str] | None = None,
             pages: set[str] = frozenset()) -> str:
    def replace(match: re.Match) -> str:
        link = match.group(2)
        if page_uri == "index.md" and link.startswith("docs/"):
            link = link[len("docs/"):]
        else:
            outside = _outside_target(page_uri, link, root, docs)
            depth = page_uri.count("/")
            notebook_page = outside.removesuffix(".ipynb") + ".md" if outside is not None else ""
            if outside is not None and _is_notebook(outside) and notebook_page in pages:
                link = "../" * depth + notebook_page
            elif outside is not None and (root / outside).is_file():
                if found is not None:
                    found.add(outside)
                link = "../" * depth + f"{REPO_FOLDER}/{outside}"
        return match.group(1) + link + (match.group(3) or "") + match.group(4)

    return _LINK.sub(replace, markdown)


def _readme(config) -> str:
    return (_root(config) / "README.md").read_text(encoding="utf-8")


def on_config(config):
    config.markdown_extensions.append(DoctestExtension())
    return config


def on_files(files: Files, config) -> Files:
    root, docs = _root(config), _docs(config)
    files.append(File.generated(config, "index.md", content=_readme(config)))
    found: set[str] = set()
    _rewrite(_readme(config), "index.md", root, docs, found)
    for page in docs.rglob("*.md"):
        _rewrite(page.read_text(encoding="utf-8"), page.relative_to(docs).as_posix(), root, docs, found)
    for path in sorted(found):
        files.append(File.generated(config, f"{REPO_FOLDER}/{path}", abs_src_path=str(root / path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    pages = {file.src_uri for file in files.documentation_pages()}
    return _rewrite(markdown, page.file.src_uri, _root(config), _docs(config), pages=pages)


class DoctestBlocks(Preprocessor):
    """Fence every doctest block that is not already code (in a fence or indented)."""

    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence = None
        index = 0
        while index < len(lines):
            line = lines[index]
            stripped = line.lstrip()
            if fence is None and stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
            elif fence is not None and stripped.startswith(fence):
                fence = None
            elif fence is None and line.startswith(">>>"):
                block = []
                while index < len(lines) and lines[index].strip():
                    block.append(lines[index])
                    index += 1
                out += ["", "```pycon", *block, "```", ""]
                continue
            out.append(line)
            index += 1
        return out


class DoctestExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Python-Markdown's name)
        md.preprocessors.register(DoctestBlocks(md), "memlab_doctest_blocks", 27)
