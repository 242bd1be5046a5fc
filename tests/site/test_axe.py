"""axe-core (bundled by axe-playwright-python, as tests/test_browser.py uses it) on three built pages in Chromium:
start-here and beginner_2 (their widgets as kernel-free blocks) and developer_3 (tables, pictures, anchors); no
serious or critical violation, the theme's own parts included."""
from __future__ import annotations

import json
import re

import pytest

from tests.browser_support import CHROMIUM, ROOT, chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium (.ci/run does it)", allow_module_level=True)
axe = pytest.importorskip("axe_playwright_python.sync_playwright", reason="needs axe-playwright-python")

PAGES = ["00_start_here", "beginner_2_watch_a_model_learn", "developer_3_bug_gallery"]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.mark.parametrize("stem", PAGES)
def test_a_built_page_passes_axe_core(built_site, browser, stem):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        page.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline: the badges and MathJax's CDN
        page.goto((built_site / f"{stem}.html").as_uri(), wait_until="load")
        results = axe.Axe().run(page, options={"resultTypes": ["violations"]})
    finally:
        page.close()
    violations = results.response["violations"]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"axe_site_{stem}.json").write_text(json.dumps(violations, indent=1)[:200_000])
    serious = [f"{v['id']} ({v['impact']}): {v['help']}, {len(v['nodes'])} node(s), e.g. {v['nodes'][0]['html'][:160]}"
               for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == [], f"{stem}:\n" + "\n".join(serious)
