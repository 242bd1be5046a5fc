"""The explorer and the bricks on the built site (conftest.py's `built_site`), in Chromium with no kernel and no
network: moving K, the mistake and the trips changes the picture and the readout to the state drawn ahead for that
setting, and each control is found by its name; what the controls add to a page stays within its budget (the
page's whole weight, theme included, is printed)."""
from __future__ import annotations

import base64
import json
import re

import pytest

from tests.browser_support import CHROMIUM, chromium
from widgets.core.mistakes import MISTAKES
from widgets.lessons.beginner_1 import make_bricks_widget
from widgets.lessons.beginner_2 import make_accumulation_explorer

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # builds the site, then drives Chromium

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium)",
                allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="the browser tests need the playwright package")

EXPLORER_PAGE = "beginner_2_watch_a_model_learn"
BRICKS_PAGES = ("00_start_here", "beginner_1_carrying_bricks")
# Bytes the controls add to a page: their HTML and every picture they can show (0.7-0.8 MB). The theme's shared
# files weigh 2.5 MB on a first visit (fontawesome.js 1.6 MB), so the three pages weigh 3.2-3.3 MB in all then.
ADDED_BUDGET = 1_000_000


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


class StaticPage:
    """One built page opened from disk (file://), every http(s) request refused; the script's errors, the local
    files that failed to load and the bytes of everything it loaded are kept."""

    def __init__(self, browser, html_dir, stem: str):
        self.html_dir = html_dir
        self.page = browser.new_page(viewport={"width": 1366, "height": 768})
        self.errors: list[str] = []
        self.loaded: dict[str, int] = {}
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.errors.append(f"{r.url}: {r.failure}")
                     if r.url.startswith("file:") else None)
        self.page.on("requestfinished", lambda r: self.loaded.setdefault(r.url.split("?")[0], len(r.response().body())))
        self.page.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline: the badges' images
        self.page.goto((html_dir / f"{stem}.html").as_uri())
        self.block = self.page.locator(".lab-static")
        self.img = self.block.locator("img")
        self.data = json.loads(self.block.locator("script[type='application/json']").text_content())

    def picture(self) -> bytes:
        """The picture as the page shows it, once its file has loaded."""
        self.page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=self.img.element_handle())
        return self.img.screenshot()

    def readout(self) -> str:
        return self.block.locator(".lab-static-readout").text_content()

    def shows(self, *setting) -> bool:
        """Whether the picture, its words and the readout are the builder's state for `setting` (the controls' values
        in order)."""
        state = self.data["states"]["|".join(json.dumps(value) for value in setting)]
        src = self.img.get_attribute("src")
        if src.startswith("data:image/png;base64,"):  # the start, inline so that it shows without the script
            shown = base64.b64decode(src.split(",", 1)[1]) == (self.html_dir / self.data["prefix"] / state["png"]).read_bytes()
        else:
            shown = src.endswith("/" + state["png"])
        readout = self.page.evaluate("html => Object.assign(document.createElement('div'), {innerHTML: html}).textContent",
                                     state["readout"])
        return shown and self.img.get_attribute("alt") == state["alt"] and self.readout() == readout

    def control(self, name: str):
        """A control found by its name, as a screen reader announces it."""
        return self.block.get_by_label(name, exact=True)

    def press(self, name: str, key: str, times: int = 1) -> None:
        self.control(name).focus()
        for _ in range(times):
            self.page.keyboard.press(key)

    def close(self) -> None:
        self.page.close()
        assert not self.errors, self.errors


def test_moving_the_explorers_k_and_mistake_changes_the_picture(browser, built_site):
    words = {name: c.description for name, c in make_accumulation_explorer().controls.items()}
    page = StaticPage(browser, built_site, EXPLORER_PAGE)
    start = page.picture()
    assert page.shows(4, 2, "")
    page.press(words["accumulation_steps"], "ArrowRight")  # K 4 -> 8
    assert page.block.locator("output").first.inner_text() == "8"
    assert page.shows(8, 2, "") and page.picture() != start
    at_8, words_at_8 = page.picture(), page.readout()
    page.control(words["mistake"]).select_option(label=MISTAKES["loss_not_divided"].label)
    assert page.shows(8, 2, "loss_not_divided") and page.picture() != at_8 and page.readout() != words_at_8
    page.control(words["micro_batch_size"]).select_option(label="32")
    assert page.shows(8, 32, "loss_not_divided")
    page.close()


@pytest.mark.parametrize("stem", BRICKS_PAGES)
def test_moving_the_bricks_trips_changes_the_picture(browser, built_site, stem):
    words = {name: c.description for name, c in make_bricks_widget().controls.items()}
    page = StaticPage(browser, built_site, stem)
    start = page.picture()
    assert page.shows(0, 4, False)
    page.press(words["trip"], "ArrowRight")
    assert page.shows(1, 4, False) and page.picture() != start
    page.press(words["trip"], "End")  # the slider ends at K, as the widget's does
    assert page.shows(4, 4, False)
    built = page.picture()
    page.control(words["divided"]).check()
    assert page.shows(4, 4, True) and page.picture() != built
    page.press(words["accumulation_steps"], "ArrowLeft", times=2)  # K 4 -> 2 pulls the trips done down to 2
    assert page.shows(2, 2, True) and page.block.locator("output").first.inner_text() == "2"
    page.close()


@pytest.mark.parametrize("stem", (EXPLORER_PAGE, *BRICKS_PAGES))
def test_a_page_with_every_picture_it_can_show_stays_within_budget(browser, built_site, stem):
    page = StaticPage(browser, built_site, stem)
    page.page.wait_for_load_state("networkidle")
    pictures = {built_site / page.data["prefix"] / s["png"] for s in page.data["states"].values()}
    block = len(page.block.evaluate("b => b.outerHTML").encode())
    added = block + sum(p.stat().st_size for p in pictures)
    total = sum(page.loaded.values()) + sum(p.stat().st_size for p in pictures if p.as_uri() not in page.loaded)
    print(f"{stem}: {total / 1e6:.2f} MB with everything it loads and every picture its controls can show; the "
          f"controls add {added / 1e6:.2f} MB ({len(pictures)} pictures)")
    assert added <= ADDED_BUDGET
    page.close()
