"""site/build.py's changes to a page, and the site checks themselves, on small made-up cases (no build)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

from tests.site.pages import Page, broken_links

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("site_build", ROOT / "site" / "build.py")
build = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

WIDGET = {build.WIDGET: {"model_id": "abc", "version_major": 2, "version_minor": 0}}


def output(**data):
    return nbformat.v4.new_output("display_data", data=data)


def test_a_widget_output_keeps_its_picture_and_loses_its_view():
    picture = output(**WIDGET, **{"image/png": "iVBOR", "text/html": '<img alt="a"/>', "text/plain": "W: a"})
    question = output(**WIDGET, **{"text/html": "<p><b>Predict first.</b></p>", "text/plain": "Prediction: ..."})
    plain = output(**{"text/plain": "loss 1.0"})
    kept = build.page_outputs([picture, question, plain], None)
    assert [sorted(o.data) for o in kept] == [["image/png", "text/html", "text/plain"], ["text/html", "text/plain"],
                                              ["text/plain"]]


def test_a_progress_bar_saved_at_zero_is_left_out_but_a_widget_with_words_is_not():
    bar = output(**WIDGET, **{"text/plain": "updates:   0%|          | 0/150 [00:00<?, ?it/s]"})
    words = output(**WIDGET, **{"text/plain": "Bricks: trip 0 of 4, 50% of the wall"})
    assert build.page_outputs([bar, words], None) == [output(**{"text/plain": words.data["text/plain"]})]


def test_the_kernel_free_block_replaces_the_widget_output_once():
    outputs = [output(**{"text/plain": "before"}), output(**WIDGET, **{"text/plain": "W"}), output(**WIDGET)]
    kept = build.page_outputs(outputs, "<div>block</div>")
    assert [o.data for o in kept] == [{"text/plain": "before"}, {"text/html": "<div>block</div>"}]


def test_anchors_and_heading_links_become_what_myst_resolves():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(s) for s in (
        '<a id="loss_not_divided"></a>\n## 1. The loss is not divided', "## DDP: one all-reduce per update",
        "## The `train` loop", "## Notes", "## Notes")])
    headings = {"developer_3": build.heading_ids(nb)}
    assert headings["developer_3"] == {"1.-The-loss-is-not-divided": "1-the-loss-is-not-divided",
                                       "DDP:-one-all-reduce-per-update": "ddp-one-all-reduce-per-update",
                                       "The-train-loop": "the-train-loop", "Notes": "notes"}
    anchors = build.html_anchors({"developer_3": nb})
    assert anchors == {"loss_not_divided"}
    text = ("<a id=\"loss_not_divided\"></a>\n## 1.\n[a](#loss_not_divided) [b](developer_3.ipynb#loss_not_divided) "
            "[c](#DDP:-one-all-reduce-per-update) [d](developer_3.ipynb#The-train-loop) [e](#nowhere) "
            "[f](https://example.org/#Notes)")
    assert build.with_targets(text, "developer_3", anchors, headings) == (
        "(loss_not_divided)=\n## 1.\n[a](#loss_not_divided) [b](#loss_not_divided) "
        "[c](#ddp-one-all-reduce-per-update) [d](developer_3.ipynb#the-train-loop) [e](#nowhere) "
        "[f](https://example.org/#Notes)")


@pytest.mark.parametrize("hub", ["https://hub.example.org", "http://10.0.0.5:8000/", "https://uni.edu/jupyter"])
def test_a_hub_address_is_taken(hub):
    assert build.check_hub(hub) == hub.rstrip("/")


@pytest.mark.parametrize("hub", ["hub.example.org", "javascript:alert(1)", "https://", "https://h/?a=1",
                                 "https://h/x y", 'https://h/"><script>', "$(shell id)", "ftp://h"])
def test_anything_else_is_refused_naming_hub(hub):
    with pytest.raises(ValueError, match="HUB must be"):
        build.check_hub(hub)


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.html").write_text('<h2 id="here">x</h2><a href="b.html#there">1</a><a href="#here">2</a>'
                                     '<a href="c.html">3</a><img src="https://x.org/i.png"><a href="#gone">4</a>')
    (tmp_path / "b.html").write_text('<span id="there"></span><a href="a.html#here">5</a><a href="a.html#hers">6</a>')
    assert broken_links(tmp_path) == ["a.html: #gone (no such anchor)", "a.html: c.html (no such file)",
                                      "b.html: a.html#hers (no such anchor)"]


def test_a_page_counts_pictures_in_outputs_and_empty_widget_scripts():
    page = Page('<img src="logo.png"><div class="cell_output"><div><img src="p.png" alt="the pile"></div>'
                '<img src="q.png"></div><script type="application/vnd.jupyter.widget-view+json">{}</script>')
    assert page.output_alts == ["the pile", None] and page.widget_scripts == 1


def test_the_badge_row_and_the_install_cell_stay_off_the_page():
    spec = importlib.util.spec_from_file_location("install_cell", ROOT / "tools" / "install_cell.py")
    install_cell = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install_cell)
    assert build.HOSTED_ONLY == {install_cell.TAG, install_cell.BADGES}
    nb = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    page = build.for_the_page(nb, "00_start_here", {}, set(), {"00_start_here": {}})
    assert [c.id for c in page.cells] == [c.id for c in nb.cells[2:]]
