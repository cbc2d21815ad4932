"""Draw every standard figure of a folder of datasets, and the report as a browser shows it.

Run: python docs/figures/gallery.py TOUR_FOLDER OUT_FOLDER

For each dataset ``TOUR_FOLDER/<name>.csv`` it writes ``OUT_FOLDER/<name>.png``
(the figure as the report embeds it) and ``<name>-narrow.png`` (the drawing
the report gives screens up to 640 px wide). When Playwright and a Chromium
are installed (``chromium`` on the PATH, or MEMLAB_CHROMIUM) it also writes
``OUT_FOLDER/<name>-390px.png`` and ``<name>-1366px.png``: the report's
section for that dataset as a phone (390 px wide) and a laptop (1366 px) show
it, to judge the type size and the tables at those widths. Used to review
figures before and after a change.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from memlab import chart, plot, report
from memlab.dataset import Dataset


def main(folder: str, out: str) -> int:
    src, dst = Path(folder), Path(out)
    dst.mkdir(parents=True, exist_ok=True)
    paths = sorted(src.glob("*.csv"))
    for path in paths:
        try:
            fig = plot.figure(Dataset.load(path))
        except ValueError as error:  # a family whose result is a number or a table
            print(f"{path.stem}: {error}")
            continue
        (dst / f"{path.stem}.png").write_bytes(chart.to_png(fig))
        narrow = getattr(chart, "narrow", None)  # the phone drawing (absent before it existed)
        if narrow is not None:
            (dst / f"{path.stem}-narrow.png").write_bytes(chart.to_png(narrow(fig)))
        print(dst / f"{path.stem}.png")
    html_path = dst / "report.html"
    report.write_report(paths, html_path, title="gallery", command="gallery")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("playwright is not installed: no browser screenshots", file=sys.stderr)
        return 0
    chromium = shutil.which(os.environ.get("MEMLAB_CHROMIUM", "chromium"))
    if chromium is None:
        print("no Chromium on the PATH (apt-get install chromium): no browser screenshots", file=sys.stderr)
        return 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for width in (390, 1366):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(html_path.resolve().as_uri())
            sections = page.locator("section[id^=s]")
            for index in range(sections.count()):
                section = sections.nth(index)
                name = paths[index].stem
                section.screenshot(path=str(dst / f"{name}-{width}px.png"))
            page.locator("#machine").screenshot(path=str(dst / f"machine-{width}px.png"))
            page.close()
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
