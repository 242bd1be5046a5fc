"""The notebooks' links resolve where they are read in JupyterLab: a notebook named exists, and an anchor is an
`<a id=...>` or a heading of that notebook (the site resolves the same links: test_site.py)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

from tests.site.pages import markdowns

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PARSER = MarkdownIt("commonmark")
HTML_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')


def links_and_anchors(path: Path) -> tuple[list[str], set[str]]:
    """The notebook's link targets, and the anchors JupyterLab gives it: each <a id>, each heading's text (as
    rendered: no backticks) with its spaces as '-' (JupyterLab keeps the case)."""
    links, anchors = [], set()
    for _, text in markdowns(path):
        anchors.update(HTML_ANCHOR.findall(text))
        tokens = PARSER.parse(text)
        for i, token in enumerate(tokens):
            if token.type == "heading_open":
                text = "".join(t.content for t in tokens[i + 1].children if t.type in ("text", "code_inline"))
                anchors.add(text.replace(" ", "-"))
            for child in token.children or []:
                if child.type == "link_open":
                    links.append(child.attrs["href"])
    return links, anchors


ANCHORS = {path.name: links_and_anchors(path)[1] for path in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_link_to_a_notebook_and_anchor_resolves(path):
    broken = []
    for link in links_and_anchors(path)[0]:
        parts = urlsplit(link)
        if parts.scheme or link.startswith("//"):
            continue
        name = Path(unquote(parts.path)).name if parts.path else path.name
        if parts.path and not (path.parent / unquote(parts.path)).exists():
            broken.append(f"{link}: no such file")
        elif parts.fragment and parts.fragment not in ANCHORS.get(name, set()):
            broken.append(f"{link}: no anchor {parts.fragment!r} in {name}")
    assert broken == [], f"{path.stem}: " + "; ".join(broken)


def test_the_check_sees_an_html_anchor_and_a_heading():
    links, anchors = links_and_anchors(ROOT / "notebooks" / "developer_3_bug_gallery.ipynb")
    assert {"loss_not_divided", "forget_final_step"} <= anchors and "#loss_not_divided" in links
    assert any(a.startswith("1.-The-loss") for a in anchors)
