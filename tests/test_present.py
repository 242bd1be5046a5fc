"""The projector view in a real browser: Voila serves present/explorer.ipynb, headless Chromium looks.

It renders both widgets with no code on the page, in large type; a preset from the address is
shown; a key press on a slider changes the picture; the console stays clean. And in JupyterLab,
from a kernel that the lab's server started, `widgets.doctor()` says "all good".
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import socket
import time
from pathlib import Path

import nbformat
import pytest

from browser_support import CHROMIUM, CHROMIUM_ARGS, ROOT, LabPage, free_port, jupyterlab, stop

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium; "
                ".ci/run does it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need the playwright package")
pytest.importorskip("voila", reason="the projector view needs voila (requirements.txt)")

PAGE = "present/explorer.ipynb"
ARTIFACTS = ROOT / "test-artifacts"
FONT_AWESOME = "https://cdn.jsdelivr.net/npm/@fortawesome/**"


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    """Voila serving the page on loopback with a token; yields the page's URL (with the token)."""
    work = tmp_path_factory.mktemp("voila")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(work / "runtime"), "LAB_PRESET": "", "LAB_STATE": ""}
    command = [sys.executable, "-m", "voila", PAGE, "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
               f"--token={token}"]
    log = work / "voila.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"voila exited:\n{log.read_text()[-3000:]}"
            try:  # a connection only: a GET of the page would run the notebook
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"voila did not answer:\n{log.read_text()[-3000:]}"
                time.sleep(0.5)
        yield f"{base}?token={token}"
    finally:
        stop(process)


@pytest.fixture(scope="module")
def browser():
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Voila's lab template links Font Awesome from a CDN (the icons of widget buttons); this machine,
    # like an offline classroom, cannot reach it, and the page works without it: answer empty here.
    page.route(FONT_AWESOME, lambda route: route.fulfill(status=200, content_type="text/css", body=""))
    page.goto(url, timeout=180_000)
    page.locator("img.widget-image").first.wait_for(timeout=180_000)
    page.locator(".widget-slider").first.wait_for(timeout=60_000)
    return page, errors


def test_the_page_renders_both_widgets_without_code_in_large_type(browser, voila):
    page, errors = open_page(browser, voila)
    try:
        sync_api.expect(page.locator("text=bug: loss not divided by K")).to_be_visible(timeout=60_000)
        assert page.locator("img.widget-image").count() >= 2  # the explorer's figure and the bricks'
        assert page.locator(".jp-CodeCell .jp-InputArea-editor, .CodeMirror, .cm-editor").count() == 0
        assert "import" not in page.inner_text("body") and "make_accumulation_explorer" not in page.inner_text("body")
        size = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.widget-slider .widget-label')).fontSize)")
        assert size >= 20, f"slider labels are {size}px"
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("healthy")
        page.screenshot(path=str(ARTIFACTS / "present_explorer.png"))
        assert errors == [], errors
    finally:
        page.close()


def test_a_preset_in_the_address_is_shown_and_a_key_press_changes_the_picture(browser, voila):
    page, errors = open_page(browser, voila + "&preset=forgot-to-divide")
    try:
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("forgot-to-divide")
        box = page.locator("label.widget-label-basic", has_text="bug: loss not divided by K").locator("input")
        assert box.is_checked()
        sync_api.expect(page.locator(".widget-html-content").first).to_contain_text("allclose: False")
        image = page.locator("img.widget-image").first
        before = image.get_attribute("src")
        slider = page.locator(".widget-slider", has=page.locator("label.widget-label", has_text="accumulation_steps K"))
        handle = slider.locator(".noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        deadline = time.monotonic() + 60
        while image.get_attribute("src") == before:
            assert time.monotonic() < deadline, "the figure did not change within 60 s of the key press"
            time.sleep(0.1)
        assert float(handle.get_attribute("aria-valuenow")) == 5
        assert errors == [], errors
    finally:
        page.close()


def test_a_bad_code_shows_the_default_and_says_why(browser, voila):
    page, errors = open_page(browser, voila + "&state=GA1-2004-WB")
    try:
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("mistyped or cut short")
        assert not page.locator("label.widget-label-basic", has_text="bug: loss not divided by K").locator("input").is_checked()
        assert errors == [], errors
    finally:
        page.close()


def test_doctor_says_all_good_in_a_kernel_started_by_jupyterlab(tmp_path, browser):
    """The start-here cell, run in JupyterLab in Chromium: the kernel's parent is the lab's server."""
    notebook = ROOT / "test-artifacts" / "doctor_check.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import widgets\nwidgets.doctor()")]
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(nb, notebook)
    try:
        with jupyterlab(tmp_path, [notebook]) as server:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            try:
                lab = LabPage(page, server)
                lab.open("test-artifacts/doctor_check.ipynb")
                assert lab.run_all()
                lab.wait_for_kernel_idle("doctor_check.ipynb")
                output = lab.panel().locator(".jp-OutputArea-output").first
                sync_api.expect(output).to_contain_text("widgets.doctor: all good", timeout=120_000)
                assert lab.console_errors() == []
                lab.close_all()
            finally:
                page.close()
    finally:
        notebook.unlink(missing_ok=True)
