"""The report in a real browser (headless Chromium): no console errors, every image decodes,
no horizontal overflow at a laptop's 1366 px and a phone's 390 px, every table-of-contents link
lands on its section, and phones get the narrow drawing of each figure."""

from __future__ import annotations

import pytest

import plot_fixtures as fixtures
from browser import find_chromium, launch
from memlab import report

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

WIDTHS = (1366, 390)


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
        width: img.naturalWidth, complete: img.complete, narrow: img.currentSrc !== img.src}))""")
    assert len(images) >= 9
    assert all(image["complete"] and image["width"] > 0 for image in images), images
    # A phone gets each figure's narrow drawing, a laptop the wide one.
    assert all(image["narrow"] == (width <= report.NARROW_SCREEN_PX) for image in images), images

    overflow = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1], f"the page is {overflow[0]} px wide in a {overflow[1]} px window"

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
