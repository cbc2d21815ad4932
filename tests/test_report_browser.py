"""The report in a real browser (headless Chromium): no console errors, every image decodes,
no horizontal scrolling at laptops' 1366 and 1280 px and a phone's 390 px (each figure is embedded
once and scaled to the width), every table-of-contents link lands on its section, and a reproduce
report leads with its summary, its links land, and each item's figure is titled as its item."""

from __future__ import annotations

import re

import pytest

import plot_fixtures as fixtures
from browser import find_chromium, launch
from memlab import catalogue, report
from memlab.reproduce import ReproduceResult, Task, judge, write_results

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

WIDTHS = (1366, 1280, 390)


def test_find_chromium_says_why_when_there_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to find
    monkeypatch.delenv("MEMLAB_CHROMIUM", raising=False)
    path, reason = find_chromium()
    if "Playwright" in reason:
        pytest.skip(reason)
    assert path is None
    assert "no Chromium on this machine" in reason and "apt-get install chromium" in reason
    monkeypatch.setenv("MEMLAB_CHROMIUM", "no-such-browser")
    assert find_chromium() == (None, "MEMLAB_CHROMIUM='no-such-browser' is not an executable")


@pytest.fixture(scope="module")
def chromium():
    path, reason = find_chromium()
    if path is None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright, path)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    items = [report.ReportItem(name, dataset=make()) for name, make in fixtures.ALL.items()]
    items.append(report.ReportItem("failed family", error="OSError: [Errno 12] Cannot allocate memory"))
    path = tmp_path_factory.mktemp("report") / "report.html"
    report.write_report(items, path, command="memlab report fixtures/*.csv")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_report_in_chromium(chromium, report_file, width):
    page = chromium.new_page(viewport={"width": width, "height": 900})
    problems = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(report_file.as_uri())
    page.wait_for_load_state("load")
    assert problems == []

    images = page.evaluate("""() => Array.from(document.images).map(img => ({
        width: img.naturalWidth, complete: img.complete, shown: img.getBoundingClientRect().width}))""")
    assert len(images) >= 9
    assert all(image["complete"] and image["width"] > 0 for image in images), images
    assert all(0 < image["shown"] <= width for image in images), images  # scaled to the window
    _no_horizontal_scrolling(page)

    targets = page.evaluate("() => Array.from(document.querySelectorAll('nav a')).map(a => a.getAttribute('href'))")
    assert len(targets) == len(fixtures.ALL) + 2  # every dataset, the failed family, the machine
    for href in targets:
        page.click(f'nav a[href="{href}"]')
        landed = page.evaluate("""(id) => {
            const target = document.getElementById(id);
            const box = target ? target.getBoundingClientRect() : null;
            return {tag: target && target.tagName, hash: location.hash, top: box && box.top,
                    bottom: document.documentElement.scrollHeight - window.scrollY - window.innerHeight};
        }""", href[1:])
        assert landed["tag"] == "SECTION" and landed["hash"] == href, landed
        # At the top of the window, or the page is scrolled as far as it goes.
        assert abs(landed["top"]) <= 2 or landed["bottom"] <= 2, (href, landed)
    page.close()


def _no_horizontal_scrolling(page) -> None:
    overflow = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1], f"the page is {overflow[0]} px wide in a {overflow[1]} px window"


@pytest.fixture(scope="module")
def reproduce_report(tmp_path_factory):
    """A reproduce report of figures 3.15 and 3.16 sharing one dataset (their quick sweeps measure the
    same points) and of the clearing extents, on fixture data: what ``memlab reproduce`` writes."""
    shared = fixtures.chase()
    shared.metadata["sweep"] = "fig3_15_quick"
    extents = fixtures.clear_order()
    extents.metadata["sweep"] = "clear_order_quick"
    entries = [catalogue.item(key) for key in ("fig3.15", "fig3.16", "clear-extent")]
    out = tmp_path_factory.mktemp("reproduce")
    result = ReproduceResult(out=out, quick=True,
                             tasks=[Task(None, None, entries[:2]), Task(None, None, entries[2:])],
                             items=[judge(entries[0], shared), judge(entries[1], shared), judge(entries[2], extents)])
    return write_results(result, command="memlab reproduce --quick")


#: A figure number as a heading ("Figure 3.16") or a figure's title ("Fig. 3.16", "Figs. 7.1-7.3") writes it.
FIGURE_NUMBER = re.compile(r"\bFig(?:ure|s?\.)\s*(\d+\.\d+)")


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_a_reproduce_report_leads_with_its_summary_and_titles_each_figure_as_its_item(chromium, reproduce_report,
                                                                                    width):
    page = chromium.new_page(viewport={"width": width, "height": 900})
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(reproduce_report.as_uri())
    page.wait_for_load_state("load")
    assert problems == []
    _no_horizontal_scrolling(page)
    order = page.evaluate("() => Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert order[0] == "summary" and len(order) == 5  # the summary, three items, the machine
    counts = page.evaluate("""() => Array.from(document.querySelectorAll('#summary .counts .count'))
        .map(c => { const box = c.getBoundingClientRect(); return [box.left, box.right]; })""")
    assert counts and all(0 <= left and right <= width for left, right in counts), counts  # on screen
    links = page.evaluate("() => Array.from(document.querySelectorAll('#summary a')).map(a => a.getAttribute('href'))")
    assert links and all(page.evaluate("(id) => document.getElementById(id) !== null", h[1:]) for h in links)
    figures = page.evaluate("""() => Array.from(document.querySelectorAll('section')).filter(s => s.querySelector('img'))
        .map(s => [s.querySelector('h2').textContent, s.querySelector('img').alt])""")
    assert len(figures) == 3, figures
    for heading, title in figures:
        wanted = FIGURE_NUMBER.findall(heading)
        shown = FIGURE_NUMBER.findall(title)
        assert not shown or shown == wanted, f"the section {heading!r} shows a figure titled {title!r}"
    assert "3.16" in figures[1][1] and "3.15" in figures[0][1]
    if width >= 1280:  # the source's numbers beside this machine's read whole on a laptop, unscrolled
        cut = page.evaluate("""() => Array.from(document.querySelectorAll('div.scroll'))
            .filter(d => d.querySelector('th') && d.querySelector('th').textContent === 'quantity')
            .map(d => [d.scrollWidth, d.clientWidth])""")
        assert cut and all(scroll <= client + 1 for scroll, client in cut), cut
    page.close()
