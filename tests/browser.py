"""A real browser for the report's tests: Debian's headless Chromium, driven by Playwright.

No browser is downloaded: Playwright launches the system's Chromium
(``executable_path``). .ci/run installs it (``apt-get install chromium``)
when it is missing; elsewhere the tests that need it skip with the reason.
"""

from __future__ import annotations

import os
import shutil

#: Where a Chromium may be, in order; MEMLAB_CHROMIUM overrides.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> tuple[str | None, str]:
    """(path of a Chromium and Playwright to drive it, "") or (None, why not).

    >>> path, reason = find_chromium()
    """
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return None, "Playwright's Python package is not installed (it is in memlab's test extra)"
    wanted = os.environ.get("MEMLAB_CHROMIUM")
    if wanted:
        found = shutil.which(wanted)
        if found is None:
            return None, f"MEMLAB_CHROMIUM={wanted!r} is not an executable"
        return found, ""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found, ""
    return None, ("no Chromium on this machine (looked for " + ", ".join(CANDIDATES) +
                  "); install Debian's with `apt-get install chromium`, as .ci/run does")


def launch(playwright, path: str):
    """The system Chromium, headless (no sandbox: CI runs as root)."""
    return playwright.chromium.launch(executable_path=path, headless=True,
                                      args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
