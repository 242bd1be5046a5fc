"""The notebooks in a real browser: JupyterLab served from this test, driven in headless Chromium.

nbval proves the kernel side; this proves what a learner sees: every widget renders (no "Error
displaying widget", no console error), the explorer answers the keyboard with a new figure and
readout, and choosing a mistake flips its verdict. At a laptop's 1366×768, start-here's first
widget and the first developer notebook's correct loop sit within the first two screens. It also times key press -> new figure for the
explorer and for a bare one-slider widget (the round-trip floor), in the same page, and writes
both to test-artifacts/browser_latency.json. Screenshots go to test-artifacts/ as well.

Accessibility (issue 26, README "Accessibility"): axe-core on the output areas of four notebooks, a
keyboard-only walk to the explorer's K slider, the explorer within one 1366x768 screen beside the file
browser (drawer closed and open), and the bricks' push K times too strong with the mistake.
"""
from __future__ import annotations

import json
import re
import os
import platform
import statistics
import time
import warnings

import pytest

from tests.browser_support import (
    CHROMIUM,
    ROOT,
    LabPage,
    chromium,
    jupyterlab,
    widget_notebooks,
    widget_output_count,
)

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium; "
        ".ci/run does it)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need the playwright package")

ARTIFACTS = ROOT / "test-artifacts"
FIXTURE = ROOT / "tests" / "browser" / "round_trip_floor.ipynb"
NOTEBOOKS = widget_notebooks(ROOT / "notebooks")
# Opened at a laptop's size to see what the first screens hold (developer_1 has no widget).
FIRST_SCREENS = [ROOT / "notebooks" / "00_start_here.ipynb", ROOT / "notebooks" / "developer_1_proving_equivalence.ipynb"]
LATENCY_BUDGET = 1.3  # explorer / bare-slider round trip, first visits and revisits (issue: <= 1.3x)
PRESSES = 24  # per widget for the latency medians (the issue asks for >= 20)
# The accumulation explorer's signature on the page: its readout (other widgets, e.g. the bricks,
# have an accumulation_steps slider too).
EXPLORER_READOUT = ".explorer-readout"
LAPTOP = {"width": 1366, "height": 768}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on copies of the widget notebooks and the fixture, with Chromium on it."""
    ARTIFACTS.mkdir(exist_ok=True)
    work = tmp_path_factory.mktemp("jupyterlab")
    copies = list(dict.fromkeys(NOTEBOOKS + FIRST_SCREENS + [FIXTURE]))
    with jupyterlab(work, copies) as server, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield LabPage(page, server)


@pytest.fixture(autouse=True)
def fresh_tab(lab):
    """Each test starts with no notebook open and no kernel running, whatever the last one left."""
    yield
    lab.close_all()


def relative(path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def open_and_run_all(lab: LabPage, path) -> dict:
    """Open a notebook, Run All, wait for its widgets; fail on any widget error."""
    lab.open(relative(path))
    assert lab.run_all(), f"{path.name}: Run All stopped at a cell that raised:\n" + "\n".join(lab.error_outputs())
    lab.wait_for_kernel_idle(path.name)
    expected = widget_output_count(path)
    status = lab.wait_for_widgets(expected)
    assert not status["errors"], f"{path.name}: {status['errors']}; browser console: {lab.console_errors()[-3:]}"
    assert status["views"] >= expected and not status["loading"], (
        f"{path.name}: {status['views']} of {expected} widgets rendered, {status['loading']} still loading"
    )
    return status


def screenshot(lab: LabPage, path) -> None:
    first = lab.top_level_widgets().first
    if first.count():
        first.scroll_into_view_if_needed()
    lab.page.screenshot(path=str(ARTIFACTS / f"{path.stem}.png"))


class Explorer:
    """Locators for one explorer on the page: its sliders, mistake menu, figure and readout."""

    def __init__(self, lab: LabPage, root):
        self.lab, self.root = lab, root
        self.image = root.locator("img.widget-image")
        self.readout = root.locator(".explorer-readout .widget-html-content")

    def open_drawers(self) -> None:
        """Open every collapsed section (the settings some mistakes need), so all its sliders can be reached."""
        headers = self.root.locator(".jupyter-widget-Collapse-header")
        for i in range(headers.count()):
            if headers.nth(i).locator("xpath=following-sibling::*[1]").get_attribute("class").count("lm-mod-hidden"):
                headers.nth(i).click()

    def sliders(self) -> list[str]:
        """Labels of the visible sliders, top to bottom."""
        labels = self.root.locator(".widget-slider:visible > label.widget-label")
        return [labels.nth(i).inner_text().strip() for i in range(labels.count())]

    def handle(self, label: str):
        slider = self.root.locator(".widget-slider", has=self.lab.page.locator("label.widget-label", has_text=label))
        return slider.locator(".noUi-handle")

    def value(self, label: str) -> float:
        return float(self.handle(label).get_attribute("aria-valuenow"))

    def effective_batch_text(self) -> str:
        """The readout's first line for the sliders' K and b, in the voice this explorer speaks."""
        K, b = int(self.value("accumulation_steps K")), int(self.value("micro_batch_size b"))
        if "effective_batch_size" in self.readout.inner_text():
            return f"effective_batch_size = K x b = {K} x {b} = {K * b}"
        return f"each update: {K} micro-batches of {b} = {K * b} examples"

    def mistake_menu(self):
        return self.root.locator(".widget-dropdown", has=self.lab.page.locator("label", has_text="mistake")).locator(
            "select")

    def press(self, label: str) -> None:
        """One notch on a slider (up, or down at its top): the value, the figure's bytes and the
        readout's effective batch size must all follow."""
        handle = self.handle(label)
        at_top = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        value, picture = self.value(label), self.lab.image_hash(self.image)
        ms = self.lab.press_and_time(handle, "ArrowLeft" if at_top else "ArrowRight", self.image)
        assert self.value(label) != value, f"{label}: the key press did not move the slider"
        assert ms is not None, f"{label}: the figure did not change within 20 s of the key press"
        assert self.lab.image_hash(self.image) != picture, f"{label}: a new image arrived with the same pixels"
        sync_api.expect(self.readout).to_contain_text(self.effective_batch_text())


def explorers(lab: LabPage) -> list[Explorer]:
    roots = lab.top_level_widgets().filter(has=lab.page.locator(EXPLORER_READOUT))
    return [Explorer(lab, roots.nth(i)) for i in range(roots.count())]


def assert_every_slider_widget_responds(lab: LabPage, name: str, timeout: float = 20) -> int:
    """Press a key on the first slider of each top-level widget; what it shows must change."""
    roots = lab.top_level_widgets()
    checked = 0
    for i in range(roots.count()):
        root = roots.nth(i)
        handles = root.locator(".noUi-handle")
        if not handles.count() or not root.locator("img, canvas, .widget-html-content").count():
            continue
        handle = handles.first
        at_top = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        root.scroll_into_view_if_needed()
        before = lab.fingerprint(root)
        handle.focus()
        lab.page.keyboard.press("ArrowLeft" if at_top else "ArrowRight")
        deadline = time.monotonic() + timeout
        while lab.fingerprint(root) == before:
            assert time.monotonic() < deadline, f"{name}: widget {i} did not change within {timeout} s of a key press"
            time.sleep(0.1)
        checked += 1
    return checked


def press_sequence(handle_value: float, low: float, high: float, step: float, presses: int) -> list[str]:
    """ArrowRight up to the slider's top, then ArrowLeft: every press moves the value."""
    keys, value = [], handle_value
    direction = "ArrowRight"
    for _ in range(presses):
        if direction == "ArrowRight" and value + step > high + 1e-9:
            direction = "ArrowLeft"
        elif direction == "ArrowLeft" and value - step < low - 1e-9:
            direction = "ArrowRight"
        keys.append(direction)
        value += step if direction == "ArrowRight" else -step
    return keys


def time_presses(lab: LabPage, handle, image, presses: int) -> tuple[list[float], list[bool]]:
    """Latencies of `presses` key presses up and down a slider, and whether each press reached
    a value not seen before in the sequence (for the explorer: a run not in its cache)."""
    low, high = float(handle.get_attribute("aria-valuemin")), float(handle.get_attribute("aria-valuemax"))
    value = float(handle.get_attribute("aria-valuenow"))
    seen, samples, first_visit = {value}, [], []
    for key in press_sequence(value, low, high, 1.0, presses):
        since = len(lab.console)
        ms = lab.press_and_time(handle, key, image)
        if ms is None:  # what the page showed, for a failure seen once under load and never reproduced
            lab.page.screenshot(path=str(ARTIFACTS / "press_timed_out.png"))
            now = handle.get_attribute("aria-valuenow")
            raise AssertionError(f"the figure did not change within 20 s of {key} ({value:g} -> {now}); browser "
                                 f"console since the press: {lab.console[since:]}")
        value = float(handle.get_attribute("aria-valuenow"))
        samples.append(ms)
        first_visit.append(value not in seen)
        seen.add(value)
    return samples, first_visit


def test_explorer_answers_the_keyboard_and_is_timed_against_the_floor(lab):
    """The fixture notebook: choosing a mistake flips the verdict, the two latencies, then every slider."""
    since = len(lab.console)
    status = open_and_run_all(lab, FIXTURE)
    assert status["views"] == 2
    (explorer,) = explorers(lab)
    sync_api.expect(explorer.readout).to_contain_text("allclose: True")

    # At the starting settings (no clipping: clipping to a small norm would hide this mistake).
    explorer.mistake_menu().select_option(label="loss not divided by K")
    sync_api.expect(explorer.readout).to_contain_text("allclose: False")
    explorer.mistake_menu().select_option(label="none: the correct loop")
    sync_api.expect(explorer.readout).to_contain_text("allclose: True")

    # Timed at the starting settings: K from 4 up to 16 and back down to 4.
    floor = lab.panel().locator(".round-trip-floor")
    bare, _ = time_presses(lab, floor.locator(".noUi-handle"), floor.locator("img.widget-image"), PRESSES)
    live, cold = time_presses(lab, explorer.handle("accumulation_steps K"), explorer.image, PRESSES)

    explorer.open_drawers()
    labels = explorer.sliders()
    assert {"accumulation_steps K", "micro_batch_size b", "learning_rate"} <= set(labels), labels
    for label in labels:
        explorer.press(label)
    sync_api.expect(explorer.readout).to_contain_text("effective_batch_size = K x b = 5 x 9 = 45")
    screenshot(lab, FIXTURE)

    assert lab.console_errors(since) == [], "console errors"

    ratio = round(statistics.median(live) / statistics.median(bare), 2)
    result = {
        "command": "python -m pytest tests/test_browser.py",
        "what": "key press on a slider handle -> the figure's <img> has loaded a new PNG, in headless Chromium; "
                "the accumulation_steps slider goes up to its top and back down",
        "presses": PRESSES,
        "bare_one_slider_ms": summary(bare),
        "explorer_ms": summary(live),
        "explorer_first_visit_ms": summary([ms for ms, c in zip(live, cold) if c]),
        "explorer_revisit_ms": summary([ms for ms, c in zip(live, cold) if not c]),
        "explorer_over_bare": ratio,
        # the explorer's issue asks for <= 1.3 x on both, first visits (a run not kept) and revisits
        "first_visit_over_bare": round(statistics.median([ms for ms, c in zip(live, cold) if c]) / statistics.median(bare), 2),
        "revisit_over_bare": round(statistics.median([ms for ms, c in zip(live, cold) if not c]) / statistics.median(bare), 2),
        "budget": f"explorer median <= {LATENCY_BUDGET} x bare median",
        "within_budget": ratio <= LATENCY_BUDGET,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    (ARTIFACTS / "browser_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"\nkey press -> figure changed, median of {PRESSES}: explorer {result['explorer_ms']['median']} ms, "
        f"bare one-slider {result['bare_one_slider_ms']['median']} ms (x{ratio})"
    )
    # Timing on a shared 2-core machine is too noisy to fail the suite on; the budget is reported.
    if ratio > LATENCY_BUDGET:
        warnings.warn(f"explorer latency is {ratio} x the bare round trip (budget {LATENCY_BUDGET} x)", stacklevel=1)


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "max": round(ordered[-1], 1),
        "samples": [round(s, 1) for s in samples],
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_widget_notebook_renders_and_its_explorers_respond(lab, path):
    """Every notebook with a widget output: Run All renders every widget without an error."""
    since = len(lab.console)
    open_and_run_all(lab, path)
    screenshot(lab, path)
    assert_every_slider_widget_responds(lab, path.name)
    for explorer in explorers(lab):
        explorer.root.scroll_into_view_if_needed()
        explorer.press("accumulation_steps K")
    assert lab.console_errors(since) == [], f"{path.name}: console errors"



# The notebook's scroll area in JupyterLab 4 (windowed notebook), and where an element sits in it,
# in screens (the scroll area's own height) from the notebook's top.
_SCREENS_JS = """(element, selector) => {
    const area = element.closest(selector);
    const box = element.getBoundingClientRect(), top = area.getBoundingClientRect().top;
    const y = box.top - top + area.scrollTop;
    return {top: y / area.clientHeight, bottom: (y + box.height) / area.clientHeight, screen: area.clientHeight};
}"""
SCROLL_AREA = ".jp-WindowedPanel-outer"


def screens(lab: LabPage, element) -> dict:
    """Where `element` sits, in screens from the top of the notebook (the page scrolled to the top first)."""
    lab.page.evaluate("s => document.querySelectorAll(s).forEach(a => { a.scrollTop = 0; })", SCROLL_AREA)
    return element.evaluate(_SCREENS_JS, SCROLL_AREA)


@pytest.mark.parametrize("stem, what", [("00_start_here", "the first widget"),
                                        ("developer_1_proving_equivalence", "the correct loop")])
def test_the_first_thing_to_touch_sits_within_the_first_two_screens_of_a_laptop(lab, stem, what):
    """At 1366x768, after Run All: start-here's first widget, the first developer notebook's loop."""
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    lab.page.set_viewport_size(LAPTOP)
    try:
        if widget_output_count(path):
            open_and_run_all(lab, path)
        else:
            lab.open(relative(path))
            assert lab.run_all(), "\n".join(lab.error_outputs())
            lab.wait_for_kernel_idle(path.name)
        if what == "the first widget":
            element = lab.top_level_widgets().first
        else:
            element = lab.panel().locator(".jp-CodeCell", has_text="def train(model, optimizer").first
        element.wait_for(timeout=60_000)
        where = screens(lab, element)
        lab.page.screenshot(path=str(ARTIFACTS / f"{stem}_1366x768.png"))
        assert where["bottom"] <= 2, f"{stem}: {what} ends {where['bottom']:.2f} screens down ({where})"
    finally:
        lab.page.set_viewport_size({"width": 1280, "height": 900})


# --- issue 26: the explorer fits a laptop, and the output areas pass axe-core ------------------------------

def _with_file_browser(lab: LabPage) -> None:
    """1366x768 with JupyterLab's file browser open beside the notebook, as a learner first sees it."""
    lab.page.set_viewport_size(LAPTOP)
    lab.page.evaluate("async () => { window.jupyterapp.shell.activateById('filebrowser'); }")
    lab.page.locator("#filebrowser").wait_for(state="visible")


_OUTSIDE_JS = """([root, selector]) => {
    // Parts of `root` that do not lie wholly inside the notebook's visible scroll area, and labels cut short.
    const area = root.closest(selector).getBoundingClientRect();
    const parts = {controls: '.widget-slider:not(.lm-mod-hidden *), .widget-dropdown', plots: 'img.widget-image',
                   verdict: '.explorer-readout'};
    const outside = [];
    for (const [what, css] of Object.entries(parts)) {
        for (const el of root.querySelectorAll(css)) {
            const box = el.getBoundingClientRect();
            if (!box.height) continue;  // in a closed drawer
            if (box.top < area.top - 1 || box.bottom > area.bottom + 1 || box.left < area.left - 1 || box.right > area.right + 1)
                outside.push(`${what}: ${Math.round(box.left)},${Math.round(box.top)}-${Math.round(box.right)},${Math.round(box.bottom)}`
                             + ` outside ${Math.round(area.left)},${Math.round(area.top)}-${Math.round(area.right)},${Math.round(area.bottom)}`);
        }
    }
    const cut = [...root.querySelectorAll('label.widget-label, .jupyter-widget-Collapse-header, button')]
        .filter(el => el.offsetWidth && el.scrollWidth > el.clientWidth + 1).map(el => el.textContent.trim());
    return {outside, cut, height: root.getBoundingClientRect().height, area: area.height};
}"""


def test_the_explorer_fits_one_laptop_screen_with_the_file_browser_open(lab):
    """beginner_2's explorer, scrolled to its top: its controls, both plots and the verdict lie within the
    notebook's visible area at 1366x768 beside the file browser, with its drawer closed and open; no label cut."""
    path = ROOT / "notebooks" / "beginner_2_watch_a_model_learn.ipynb"
    try:
        _with_file_browser(lab)
        open_and_run_all(lab, path)
        (explorer,) = explorers(lab)
        for drawer in ("closed", "open"):
            if drawer == "open":
                explorer.open_drawers()
            explorer.root.evaluate("el => el.scrollIntoView({block: 'start'})")
            time.sleep(0.5)
            where = lab.page.evaluate(_OUTSIDE_JS, [explorer.root.element_handle(), SCROLL_AREA])
            lab.page.screenshot(path=str(ARTIFACTS / f"explorer_1366x768_drawer_{drawer}.png"))
            assert where["outside"] == [], f"drawer {drawer}: {where}"
            assert where["cut"] == [], f"drawer {drawer}: labels cut: {where['cut']}"
    finally:
        lab.page.set_viewport_size({"width": 1280, "height": 900})
        lab.page.evaluate("() => window.jupyterapp.shell.collapseLeft()")


# What the widgets' Python API cannot reach (README, "Accessibility"): a slider's handle (noUiSlider's
# <div role="slider">) gets no accessible name from ipywidgets 8, its label is not tied to it. Only that
# rule on those nodes is set aside; any other unnamed input still fails.
KNOWN_LIMITS = {("aria-input-field-name", True)}
AXE_NOTEBOOKS = ["00_start_here", "beginner_1_carrying_bricks", "beginner_2_watch_a_model_learn",
                 "developer_3_bug_gallery"]


@pytest.mark.parametrize("stem", AXE_NOTEBOOKS)
def test_the_output_areas_pass_axe_core(lab, stem):
    """axe-core (bundled by axe-playwright-python: nothing downloaded) on the notebook's output areas after
    Run All: no serious or critical violation. JupyterLab's own toolbar and editors are not this project's."""
    axe = pytest.importorskip("axe_playwright_python.sync_playwright", reason="needs axe-playwright-python")
    open_and_run_all(lab, ROOT / "notebooks" / f"{stem}.ipynb")
    panel = lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    context = {"include": [[f"#{panel} .jp-OutputArea"]]}
    results = axe.Axe().run(lab.page, context=context, options={"resultTypes": ["violations"]})
    serious = []
    for v in results.response["violations"]:
        nodes = [n for n in v["nodes"] if (v["id"], "noUi-handle" in n["html"]) not in KNOWN_LIMITS]
        if v["impact"] in ("serious", "critical") and nodes:
            serious.append(f"{v['id']} ({v['impact']}): {v['help']} — {len(nodes)} node(s), e.g. {nodes[0]['html'][:160]}")
    (ARTIFACTS / f"axe_{stem}.json").write_text(json.dumps(results.response["violations"], indent=1)[:200_000])
    assert serious == [], f"{stem}:\n" + "\n".join(serious)


_ACTIVE_JS = """() => {
    const el = document.activeElement;
    const label = el.closest('.widget-slider')?.querySelector('label.widget-label')?.textContent.trim() || '';
    const name = (el.getAttribute('aria-label') || el.textContent || el.getAttribute('title') || '').trim();
    return {tag: el.tagName, handle: el.classList.contains('noUi-handle'), label, name,
            button: el.tagName === 'BUTTON' || el.getAttribute('role') === 'button'};
}"""


def test_a_keyboard_walk_reaches_k_and_every_button_on_the_way_has_a_name(lab):
    """From the top of the explorer's output, Tab until the K slider's handle has focus (every button passed
    must have a name), then the arrow keys change K and the readout follows."""
    open_and_run_all(lab, ROOT / "notebooks" / "beginner_2_watch_a_model_learn.ipynb")
    (explorer,) = explorers(lab)
    explorer.root.evaluate("el => { el.setAttribute('tabindex', '-1'); el.focus(); }")
    unnamed, reached = [], None
    for _ in range(40):
        lab.page.keyboard.press("Tab")
        active = lab.page.evaluate(_ACTIVE_JS)
        if active["button"] and not active["name"]:
            unnamed.append(active)
        if active["handle"] and active["label"] == "accumulation_steps K":
            reached = active
            break
    assert reached, "Tab never reached the accumulation_steps K slider"
    assert unnamed == [], f"buttons without a name: {unnamed}"
    before, text = explorer.value("accumulation_steps K"), explorer.readout.inner_text()
    lab.page.keyboard.press("ArrowRight")
    sync_api.expect(explorer.readout).not_to_have_text(text, timeout=20_000)
    assert explorer.value("accumulation_steps K") == before + 1
    sync_api.expect(explorer.readout).to_contain_text(explorer.effective_batch_text())
    # the bricks' buttons too: the walk through start-here's first widget names every button
    lab.close_all()
    open_and_run_all(lab, ROOT / "notebooks" / "00_start_here.ipynb")
    root = lab.top_level_widgets().first
    buttons = root.locator("button")
    names = [buttons.nth(i).evaluate("b => (b.getAttribute('aria-label') || b.textContent || b.title).trim()")
             for i in range(buttons.count())]
    assert names and all(names), f"start-here's first widget has a button without a name: {names}"


def test_the_bricks_push_is_k_times_longer_with_the_mistake(lab):
    """beginner_1's bricks in the page: at the last trip, ticking "forget to divide" makes the picture's text
    alternative say the push is K times too strong (its drawn length: tests/lessons/beginner_1/test_controls.py)."""
    open_and_run_all(lab, ROOT / "notebooks" / "beginner_1_carrying_bricks.ipynb")
    root = lab.top_level_widgets().filter(has=lab.page.locator("label", has_text="forget to divide")).first
    root.scroll_into_view_if_needed()
    image = root.locator("img.widget-image")
    K = int(float(root.locator(".widget-slider", has=lab.page.locator("label", has_text="trips (accumulation_steps K)"))
                  .locator(".noUi-handle").get_attribute("aria-valuenow")))
    trip = root.locator(".widget-slider", has=lab.page.locator("label", has_text="trips done")).locator(".noUi-handle")
    trip.focus()
    lab.page.keyboard.press("End")
    sync_api.expect(image).to_have_attribute("title", re.compile("wall"), timeout=20_000)
    divided = image.get_attribute("title")
    box = root.locator("input[type=checkbox]")
    box.check()
    sync_api.expect(image).not_to_have_attribute("title", divided, timeout=20_000)
    assert f"{K} times too strong" in image.get_attribute("title")
    lab.page.screenshot(path=str(ARTIFACTS / "bricks_forgot_to_divide.png"))
