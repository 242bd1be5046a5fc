"""The book site (`make site`), built once per run (conftest.py): 16 pages in the tiers' order, every picture the
notebooks hold on its page and no empty widget <script>, every internal link and anchor resolving, offline."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.site.pages import WIDGET_MIME, Page, broken_links

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.slow  # builds the site (about 30 s of CPU)


def notebook_pictures(path: Path) -> list[tuple[str | None, bool]]:
    """(alt, is a widget output) of each picture a notebook's outputs hold: a PNG or an <img> in HTML."""
    pictures = []
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            alts = Page(data.get("text/html", ""), outputs=True).output_alts
            if not alts and any(k.startswith("image/") for k in data):
                alts = [None]
            pictures += [(alt, WIDGET_MIME in data) for alt in alts]
    return pictures


def test_every_notebook_is_a_page_in_the_tiers_order(built_site):
    pages = [link[:-5] for link in Page.read(built_site / "index.html").links if link.endswith(".html")]
    stems = [p.stem for p in NOTEBOOKS]
    assert len(stems) == 16 and all((built_site / f"{stem}.html").is_file() for stem in stems)
    in_order = [stem for stem in dict.fromkeys(pages) if stem in stems]
    assert in_order == stems, "the book's contents list the notebooks in another order than start, beginner, ..."


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_picture_is_on_the_page_and_no_widget_is_an_empty_script(built_site, path):
    page = Page.read(built_site / f"{path.stem}.html")
    pictures = notebook_pictures(path)
    assert page.widget_scripts == 0, f"{path.stem}: widget outputs left as empty <script> tags"
    shown = len(page.output_alts)
    assert shown >= len(pictures), f"{path.stem}: {len(pictures)} pictures in the notebook, {shown} on the page"
    # a widget output may be replaced by its kernel-free block (site/interactive.py): that block draws its own
    missing = [alt for alt, widget in pictures if not widget and alt not in page.output_alts]
    assert missing == [], f"{path.stem}: pictures not on the page: {missing}"
    assert None not in page.output_alts, f"{path.stem}: a picture without a text alternative"


def test_every_internal_link_and_anchor_resolves(built_site):
    assert len(list(built_site.glob("*.html"))) > 16
    assert broken_links(built_site) == []
