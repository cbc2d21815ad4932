"""memlab's version: the installed distribution's, or a marker for a source tree."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("memlab")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.1.0+source"
