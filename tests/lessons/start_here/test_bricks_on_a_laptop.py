"""start-here's bricks on a laptop (issue 36 point 7), in JupyterLab in headless Chromium at 1366x768 beside the file
browser: no label of the widget is cut, and at the last trip, with the bricks scrolled to the top, the picture and
the sentence under it lie within the notebook's visible area (a band of empty picture pushed the sentence off it)."""
from __future__ import annotations

import re
import time

import pytest

from tests.browser_support import CHROMIUM, ROOT, LabPage, chromium, jupyterlab

pytestmark = pytest.mark.browser
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: the browser tests need Debian's chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need the playwright package")

PAGE = ROOT / "notebooks" / "00_start_here.ipynb"
SCROLL_AREA = ".jp-WindowedPanel-outer"  # the notebook's scrolling area in JupyterLab 4

_LAYOUT_JS = """([root, selector]) => {
    const area = root.closest(selector).getBoundingClientRect();
    const parts = [...root.querySelectorAll('img.widget-image, .widget-html-content')];
    const outside = parts.filter(el => { const b = el.getBoundingClientRect();
        return b.top < area.top - 1 || b.bottom > area.bottom + 1 || b.right > area.right + 1; })
        .map(el => el.className);
    const cut = [...root.querySelectorAll('label, .widget-label, button')]
        .filter(el => el.offsetWidth && el.scrollWidth > el.clientWidth + 1).map(el => el.textContent.trim());
    return {outside, cut, parts: parts.length};
}"""


def test_the_bricks_and_their_sentence_fit_a_laptop_screen(tmp_path):
    with jupyterlab(tmp_path, [PAGE]) as server, chromium() as browser:
        lab = LabPage(browser.new_page(viewport={"width": 1366, "height": 768}), server)
        lab.page.evaluate("async () => { window.jupyterapp.shell.activateById('filebrowser'); }")
        lab.open(PAGE.relative_to(ROOT).as_posix())
        assert lab.run_all()
        lab.wait_for_kernel_idle(PAGE.name)
        assert not lab.wait_for_widgets(1)["errors"]
        bricks = lab.top_level_widgets().first
        image = bricks.locator("img.widget-image")
        for _ in range(4):  # to the wall: the longest sentence
            bricks.get_by_role("button", name="next trip").click()
        sync_api.expect(image).to_have_attribute("title", re.compile("ONE wall"), timeout=20_000)
        bricks.evaluate("el => el.scrollIntoView({block: 'start'})")
        time.sleep(0.5)
        where = lab.page.evaluate(_LAYOUT_JS, [bricks.element_handle(), SCROLL_AREA])
        assert where["parts"] == 2 and where["outside"] == [] and where["cut"] == [], where
        lab.close_all()
