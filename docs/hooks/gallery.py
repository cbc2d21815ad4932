"""MkDocs hook: the gallery page, every family's standard figure drawn when the site is built.

The figures are drawn from datasets committed in docs/figures/data/ (one
``<family>.csv`` and its ``.json`` sidecar per family, measured by ``memlab tour``,
which runs every family's quick sweep), not measured at build time: the build
stays deterministic and takes seconds, and the figures are real measurements
whose machine and load the page names. The page ``gallery.md`` has one section
per family registered in memlab/registry.py, in the registry's order: the
figure exactly as ``memlab plot`` draws it (``memlab.plot.figure``), or the
family's headline and table where its result is a number or a table
(calibrate, system), the family's caption, the commands that make it, and a
link to the data. A registered family without a dataset here is a warning,
so ``mkdocs build --strict`` fails and names the command that measures it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.structure.files import File, Files

from memlab import chart, plot
from memlab.dataset import Dataset
from memlab.registry import all_families

#: The gallery page of the site, and the folder of its images.
PAGE = "gallery.md"
IMAGES_FOLDER = "gallery"
#: Where the datasets live, relative to docs/.
DATA_FOLDER = "figures/data"

log = logging.getLogger("mkdocs.hooks.gallery")

INTRO = """\
# Figure gallery

Every family's standard figure: what `memlab plot DATASET` draws, and what the
report and the notebooks show beside the data. They are drawn when this site
is built from datasets kept in the repository (`docs/figures/data/`, linked
under each figure), which `memlab tour` measured: every family's quick sweep,
about a minute and a half in all. They were measured on a shared 2-CPU virtual
machine under load, so read them for the figures' form, not for numbers to
quote; each section names the machine and the load average, and
`memlab report DATASET` lists the measurements that machine flagged.
"""


def _markdown_table(header: list[str], cells: list[list[str]]) -> str:
    def line(values):
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(row) for row in cells)])


def _machine(ds: Dataset) -> str:
    machines = ds.metadata.get("machines") or [{}]
    facts = machines[0].get("facts", {})
    identity = " ".join(str(facts[key]) for key in ("cpu_vendor",) if key in facts)
    if "cpu_family" in facts and "cpu_model_number" in facts:
        identity += f" family {facts['cpu_family']} model {facts['cpu_model_number']}"
    cpus = facts.get("cpu_count")
    return f"{facts.get('cpu_model', 'an unnamed CPU')} ({identity.strip()}{f', {cpus} CPUs' if cpus else ''})"


def _load(ds: Dataset) -> str:
    """The load average the machine check found when the sweep started ("" if it did not say)."""
    for finding in (ds.metadata.get("check_start") or {}).get("findings", []):
        if finding.get("name") == "load":
            return f", load {finding.get('value', '').split(' on ')[0]}"
    return ""


def section(name: str, family, ds: Dataset, data_uri: str) -> tuple[str, bytes | None]:
    """The gallery's section of one family (Markdown) and its figure's PNG (None without one)."""
    sweep = ds.metadata.get("sweep", "quick")
    if sweep not in family.sweeps:  # a sweep's own name may differ from its key (pipe's quick)
        sweep = "quick"
    stem = Path(data_uri).name.removesuffix(".csv")
    lines = [f"## {name}", ""]
    png = None
    if family.has_figure:
        figure = plot.figure(ds)
        png = chart.to_png(figure)
        figure.clear()
        alt = f"{name}: the standard figure of its {sweep} sweep"
        lines += [f"![{alt}]({IMAGES_FOLDER}/{name}.png)", ""]
        commands = [f"memlab sweep {name}.{sweep} --out {stem}.csv", f"memlab plot {stem}.csv"]
    else:
        if family.headline is not None:
            lines += [f"**{family.headline(ds)}**", ""]
        if family.table is not None:
            header, cells = family.table(ds)
            lines += [_markdown_table(header, cells), ""]
        commands = [f"memlab sweep {name}.{sweep} --out {stem}.csv", f"memlab report {stem}.csv"]
    caption = family.caption_for(ds)
    if caption:
        lines += [caption, ""]
    created = str(ds.metadata.get("created", ""))[:10]
    points = f"{len(ds.rows)} point{'s' if len(ds.rows) != 1 else ''}"
    lines += [f"The data: [{stem}.csv]({data_uri}), {points} measured {created} on "
              f"{_machine(ds)}{_load(ds)}. The commands that make it:", "", "```sh", *commands, "```", ""]
    return "\n".join(lines), png


def page(docs: Path) -> tuple[str, dict[str, bytes], list[str]]:
    """The gallery's Markdown, its images by site path, and the families without a dataset."""
    parts = [INTRO]
    images: dict[str, bytes] = {}
    missing = []
    for name, family in all_families().items():
        data = docs / DATA_FOLDER / f"{name}.csv"
        if not data.is_file():
            missing.append(name)
            continue
        text, png = section(name, family, Dataset.load(data), f"{DATA_FOLDER}/{name}.csv")
        parts.append(text)
        if png is not None:
            images[f"{IMAGES_FOLDER}/{name}.png"] = png
    return "\n".join(parts), images, missing


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"]).resolve()
    markdown, images, missing = page(docs)
    for name in missing:
        log.warning(f"gallery: no dataset of the family {name} in docs/{DATA_FOLDER}/ (measure it: "
                    f"memlab tour --family {name} --out docs/{DATA_FOLDER})")
    files.append(File.generated(config, PAGE, content=markdown))
    for uri, png in images.items():
        files.append(File.generated(config, uri, content=png))
    return files
