"""The documentation points only at files that exist.

Every relative link in README.md and docs/*.md (``[text](target)``, with or
without a ``#fragment``) must name a file or folder of the tree, and no page
may name the project's internal planning files or the source documents by
their internal names: the sources are cited by title, author and URL.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXTERNAL = ("http://", "https://", "mailto:")
INTERNAL_NAMES = re.compile(r"EXPERIMENTS\.md|DESIGN\.md|STYLE\.md|\bseeds?/|\bseed \d{3}\b")
#: A path of the tree named in the prose (``memlab/report.py``, ``experiments/fig3_10.py``).
TREE_PATH = re.compile(r"(?<![\w/.])((?:memlab|experiments|csrc|docs|notebooks|tests|\.ci)/[\w./-]*\w)")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (examples there may name the reader's own files)."""
    return re.sub(r"```.*?```", "", page.read_text(), flags=re.S)


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page)) if not target.startswith(EXTERNAL)]


def test_the_pages_exist():
    assert (ROOT / "README.md").is_file() and len(PAGES) > 3


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_has_a_target(page):
    missing = []
    for target in relative_links(page):
        path = target.split("#", 1)[0]
        if not path:
            continue  # a link within the page
        if not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to files not in the tree: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_path_named_in_the_prose_exists(page):
    missing = sorted({path for path in TREE_PATH.findall(prose(page)) if not (ROOT / path).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names files not in the tree: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_page_names_internal_files(page):
    found = sorted(set(INTERNAL_NAMES.findall(page.read_text())))
    assert not found, f"{page.relative_to(ROOT)} names {found}: cite the public sources instead"


def test_the_link_checker_finds_a_missing_target(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [the guide](docs/nothing.md#part), [web](https://example.org), [here](#top)\n"
                    "```\n[not a link](nowhere.md)\n```\n")
    assert relative_links(page) == ["docs/nothing.md#part", "#top"]
    page.write_text("the module `memlab/nothing.py` and memlab/report.py\n")
    assert TREE_PATH.findall(prose(page)) == ["memlab/nothing.py", "memlab/report.py"]


def test_the_readme_opens_with_the_reproduce_and_the_test_commands():
    first_block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S).group(1)
    assert first_block.splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install '.[plot]' && .venv/bin/memlab reproduce --quick "
        "--out memlab-reproduce",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q",
    ]


def test_the_readme_lists_every_subcommand():
    from memlab.cli import build_parser

    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    block = re.search(r"## The command line\n+```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S).group(1)
    listed = {line.split()[1] for line in block.splitlines() if line.startswith("memlab ")}
    assert set(action.choices) <= listed, sorted(set(action.choices) - listed)
    assert "memlab compare before.csv after.csv" in block  # two datasets, not only --by-machine


def test_the_site_has_every_page_and_the_readme_names_its_command():
    """mkdocs.yml's nav names every page of docs/ (a page left out is not in the site), every API
    page it names exists and it has the section the notebook pages fill; README says how to build
    the site. index.md (README) and gallery.md are made by the hooks (docs/hooks/)."""
    config = (ROOT / "mkdocs.yml").read_text()
    named = set(re.findall(r":\s*([\w/-]+\.md)\s*$", config, flags=re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    generated = {"index.md", "gallery.md"}
    assert pages | generated == named, (sorted(pages - named), sorted(named - pages - generated))
    assert re.search(r"^  - Notebooks: \[\]$", config, flags=re.M), "the nav's Notebooks section is gone"
    assert ".venv/bin/mkdocs build --strict" in (ROOT / "README.md").read_text()
