"""Parse a report's HTML strictly enough to catch broken markup and missing images."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

VOID = {"meta", "img", "br", "hr", "link", "input", "source", "wbr"}
# Elements whose end tag HTML lets an author omit; the report closes them anyway.
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ReportParser(HTMLParser):
    """Collects images, headings, table cells and unbalanced tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.images: list[dict] = []
        self.sources: list[dict] = []
        self.headings: list[str] = []
        self.cells: list[str] = []
        self.meta: list[dict] = []
        self.ids: list[str] = []
        self.links: list[str] = []
        self.doctype = ""
        self._text_target: list[str] | None = None
        self._buffer: list[str] = []

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.ids.append(attributes["id"])
        if tag == "img":
            self.images.append(attributes)
        elif tag == "source":
            self.sources.append(attributes)
        elif tag == "meta":
            self.meta.append(attributes)
        elif tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag in ("h1", "h2", "td", "th"):
            self._text_target = self.headings if tag in ("h1", "h2") else self.cells
            self._buffer = []

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        if tag in ("h1", "h2", "td", "th") and self._text_target is not None:
            self._text_target.append("".join(self._buffer).strip())
            self._text_target = None

    def handle_data(self, data):
        if self._text_target is not None:
            self._buffer.append(data)


def parse_report(text: str, allow_external: bool = False) -> ReportParser:
    """Parse; assert the tags balance and every image is an embedded, decodable PNG or SVG.
    Links must stay inside the report, or (``allow_external``) go to an https:// page."""
    parser = ReportParser()
    parser.feed(text)
    parser.close()
    assert parser.doctype.lower() == "doctype html"
    assert not parser.errors, parser.errors
    assert not parser.stack, f"unclosed tags: {parser.stack}"
    for image in parser.images:  # each figure once: a palette PNG or an SVG, whichever is smaller
        source = image.get("src", "")
        assert source.startswith(("data:image/png;base64,", "data:image/svg+xml;base64,")), source[:60]
        data = base64.b64decode(source.split(",", 1)[1], validate=True)
        if source.startswith("data:image/png"):
            assert data.startswith(PNG_MAGIC) and len(data) > 2000
        else:
            assert data.lstrip().startswith(b"<?xml") and b"<svg" in data[:2000] and data.rstrip().endswith(b"</svg>")
        assert image.get("alt")
    assert not parser.sources, "a figure is embedded once (no narrow drawing in a <source>)"
    for link in parser.links:
        if link.startswith("#"):
            assert link[1:] in parser.ids, f"link {link} has no target"
        elif not (allow_external and link.startswith("https://")):
            raise AssertionError(f"the report links outside itself: {link}")
    return parser
