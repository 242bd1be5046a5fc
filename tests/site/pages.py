"""What the site tests read: a built page's ids, links and pictures; a notebook's markdown."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
EXTERNAL = re.compile(r"^(https?:|mailto:|data:|javascript:|//)")


class Page(HTMLParser):
    """An HTML page (or, with `outputs`, one output's HTML): `ids` (id and name attributes), `links` (href and src),
    `output_alts` (the alt of each <img> in a cell's output, None where it has none), `widget_scripts` (widget-view
    <script> tags)."""

    def __init__(self, html: str, outputs: bool = False):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.output_alts: list[str | None] = []
        self.widget_scripts = 0
        self._divs: list[bool] = [outputs]  # for each open <div>: is it a cell's output?
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.update(v for k, v in attrs.items() if k in ("id", "name") and v)
        self.links += [v for k, v in attrs.items() if k in ("href", "src") and v]
        if tag == "div":
            self._divs.append("cell_output" in (attrs.get("class") or "").split())
        elif tag == "img" and any(self._divs):
            self.output_alts.append(attrs.get("alt"))
        elif tag == "script" and attrs.get("type") == WIDGET_MIME:
            self.widget_scripts += 1

    @classmethod
    def read(cls, path: Path) -> Page:
        return cls(path.read_text(encoding="utf-8"))

    def handle_endtag(self, tag):
        if tag == "div" and len(self._divs) > 1:
            self._divs.pop()


def markdowns(path: Path) -> list[tuple[int, str]]:
    """(cell index, text) of a notebook's markdown: its markdown cells and its markdown outputs (developer_3's
    mistakes table is one)."""
    found = []
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "markdown":
            found.append((i, cell.source))
        else:
            found += [(i, out.data["text/markdown"]) for out in cell.get("outputs", [])
                      if "text/markdown" in out.get("data", {})]
    return found


def broken_links(folder: Path) -> list[str]:
    """Each link of the pages in `folder` (not below: _static holds the theme's templates) to a file that is not
    there, or to an anchor its page does not have; the web's addresses are not followed (offline)."""
    pages = {path: Page.read(path) for path in folder.glob("*.html")}
    broken = []
    for path, page in pages.items():
        for link in page.links:
            if EXTERNAL.match(link):
                continue
            parts = urlsplit(link)
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.name}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in (
                    pages.get(target) or Page.read(target)).ids:
                broken.append(f"{path.name}: {link} (no such anchor)")
    return sorted(set(broken))
