"""The projector view in a real browser: Voila serves present/explorer.ipynb, headless Chromium looks.

It renders both widgets with no code on the page, in large type; a preset from the address is
shown; a key press on a slider changes the picture; the console stays clean. And in JupyterLab,
from a kernel that the lab's server started, `widgets.doctor()` says "all good" and names JupyterLab.

Without a browser (marked slow): `make present` hands a preset's name to no shell; a bad name
stops present/serve.py before Voila starts; the page needs the token the printed URL carries; a
kernel no page is connected to is culled in seconds; SIGTERM and SIGHUP stop Voila and its kernels.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import nbformat
import psutil
import pytest

from tests.browser_support import CHROMIUM, ROOT, LabPage, chromium, free_port, jupyterlab, stop

try:
    from playwright import sync_api
except ImportError:
    sync_api = None

PAGE = "present/explorer.ipynb"
ARTIFACTS = ROOT / "test-artifacts"
FONT_AWESOME = "https://cdn.jsdelivr.net/npm/@fortawesome/**"


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    """Voila serving the page on loopback with a token; yields the page's URL (with the token)."""
    pytest.importorskip("voila", reason="the projector view needs voila (requirements.txt)")
    work = tmp_path_factory.mktemp("voila")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(work / "runtime"), "LAB_PRESET": ""}
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
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium; "
                    ".ci/run does it)")
    if sync_api is None:
        pytest.skip("the browser tests need the playwright package")
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium() as browser:
        yield browser


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


@pytest.mark.browser
def test_the_page_renders_both_widgets_without_code_in_large_type(browser, voila):
    page, errors = open_page(browser, voila)
    try:
        sync_api.expect(page.locator("label.widget-label", has_text="mistake").first).to_be_visible(timeout=60_000)
        assert page.locator("img.widget-image").count() >= 2  # the explorer's figure and the bricks'
        assert page.locator(".jp-CodeCell .jp-InputArea-editor, .CodeMirror, .cm-editor").count() == 0
        text = page.inner_text("body")  # the one call on the page is the explorer's own, for learners to copy
        assert "import" not in text and text.count("make_accumulation_explorer") == 1
        sync_api.expect(page.locator(".explorer-call")).to_contain_text("make_accumulation_explorer()")
        size = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.widget-slider .widget-label')).fontSize)")
        assert size >= 20, f"slider labels are {size}px"
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("healthy")
        page.screenshot(path=str(ARTIFACTS / "present_explorer.png"))
        assert errors == [], errors
    finally:
        page.close()


@pytest.mark.browser
def test_a_preset_in_the_address_is_shown_and_a_key_press_changes_the_picture(browser, voila):
    page, errors = open_page(browser, voila + "&preset=forgot-to-divide")
    try:
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("forgot-to-divide")
        assert page.locator(".widget-dropdown select").first.input_value() == "loss not divided by K"
        sync_api.expect(page.locator(".explorer-readout").first).to_contain_text("4× too big ✗")
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


@pytest.mark.browser
def test_settings_in_the_address_are_shown_and_a_bad_one_shows_the_default_and_says_why(browser, voila):
    page, errors = open_page(browser, voila + "&accumulation_steps=8&mistake=loss_not_divided")
    try:
        sync_api.expect(page.locator(".explorer-call")).to_contain_text(
            'make_accumulation_explorer(accumulation_steps=8, mistake="loss_not_divided")')
        assert errors == [], errors
    finally:
        page.close()
    page, errors = open_page(browser, voila + "&accumulation_steps=99&mistake=loss_not_divided")
    try:
        sync_api.expect(page.locator(".projector-caption")).to_contain_text("accumulation_steps must be from 1 to 16")
        assert page.locator(".widget-dropdown select").first.input_value() == "none: the correct loop"
        assert errors == [], errors
    finally:
        page.close()


@pytest.mark.browser
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
                sync_api.expect(output).to_contain_text("widgets.doctor on JupyterLab: all good", timeout=120_000)
                assert lab.console_errors() == []
                lab.close_all()
            finally:
                page.close()
    finally:
        notebook.unlink(missing_ok=True)


# --- without a browser: the launcher ----------------------------------------------------------------

PAYLOADS = ['healthy"; touch {m}; echo "', "healthy'; touch {m}; echo '", "healthy`touch {m}`", "healthy$(touch {m})",
            "$(shell touch {m})", "healthy\\\"; touch {m}; echo \\\""]


@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS)
def test_make_present_hands_a_pasted_name_to_no_shell(tmp_path, payload):
    """`make present PRESET='<pasted>'`: the text arrives whole in $LAB_PRESET and nothing in it runs.
    (A stand-in for the venv's python records what it was given; `-o install` skips the install.)"""
    marker = tmp_path / "ran"
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python", "voila"):  # voila: what the recipe called before it went through present/serve.py
        (fake / name).write_text('#!/bin/sh\nprintf "%s" "$LAB_PRESET" > "$RECORD.preset"\n')
        (fake / name).chmod(0o755)
    text = payload.format(m=marker)
    env = {**os.environ, "RECORD": str(tmp_path / "got")}
    done = subprocess.run(["make", "-s", "-o", "install", "present", f"BIN={fake}", f"PRESET={text}"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert not marker.exists(), f"the pasted text ran a command: {done.stdout}{done.stderr}"
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "got.preset").read_text() == text


def _serve(tmp_path, *args, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "present/serve.py", *args], cwd=ROOT, text=True,
                            env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "LAB_PRESET": "",
                                 **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _url(process: subprocess.Popen, timeout: float = 120) -> str:
    """The token URL serve.py prints once Voila answers."""
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen.append(line)
        if line.startswith("    http://127.0.0.1:") and "token=" in line:  # ours; Voila's own hides the token
            return line.strip()
        assert line or process.poll() is None, "".join(seen)[-3000:]
    raise AssertionError("no URL within the timeout:\n" + "".join(seen)[-3000:])


def _kernels(process: subprocess.Popen) -> list[psutil.Process]:
    try:
        tree = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    kernels = []
    for p in tree:
        try:
            if "ipykernel" in " ".join(p.cmdline()):
                kernels.append(p)
        except psutil.NoSuchProcess:  # ZombieProcess too: a kernel just culled, not yet reaped
            continue
    return kernels


def _end(process: subprocess.Popen, tree: list[psutil.Process]) -> None:
    """Whatever happened in the test: nothing it started stays (Voila runs in a session of its own,
    so the launcher is asked first, then everything it started is killed)."""
    if process.poll() is None:
        tree = tree + psutil.Process(process.pid).children(recursive=True)
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    process.stdout.close()


@pytest.mark.slow
def test_a_bad_preset_stops_before_voila_starts(tmp_path):
    process = _serve(tmp_path, LAB_PRESET='healthy"; id; echo "')
    try:
        output, _ = process.communicate(timeout=60)
        assert process.returncode != 0
        assert "no preset named" in output and "Nothing was started" in output
        assert "Voila" not in output and "Voilà" not in output
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 302 to the login page is the answer


def _get(url: str) -> int:
    """The status of one GET that runs no JavaScript (curl, an <img src>, a crawler)."""
    try:
        with urllib.request.build_opener(_NoRedirect).open(url, timeout=180) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.slow
def test_the_page_needs_its_token_and_kernels_no_page_uses_are_culled(tmp_path):
    pytest.importorskip("voila", reason="the projector view needs voila (requirements.txt)")
    process = _serve(tmp_path, "--cull-idle-s", "3", "--cull-interval-s", "1", LAB_PRESET="forgot-to-divide")
    tree: list[psutil.Process] = []
    try:
        url = _url(process)
        base = url.split("?")[0]
        assert _get(base) in (302, 403) and _get(base + "?token=wrong") in (302, 403)
        assert _kernels(process) == []  # no token, no kernel
        assert _get(url) == 200 and _get(url) == 200  # two GETs that run no JavaScript: two kernels
        tree = psutil.Process(process.pid).children(recursive=True)
        assert 1 <= len(_kernels(process)) <= 2
        deadline = time.monotonic() + 30
        while _kernels(process):
            assert time.monotonic() < deadline, "kernels no page is connected to were not culled within 30 s"
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        gone, alive = psutil.wait_procs(tree, timeout=20)  # Voila, and any kernel it still had
        assert alive == [], alive
    finally:
        _end(process, tree)


@pytest.mark.slow
def test_sighup_stops_voila(tmp_path):
    """The terminal closed: the launcher stops Voila instead of leaving it serving."""
    pytest.importorskip("voila", reason="the projector view needs voila (requirements.txt)")
    process = _serve(tmp_path)
    tree: list[psutil.Process] = []
    try:
        _url(process)
        tree = psutil.Process(process.pid).children(recursive=True)
        assert any("voila" in " ".join(p.cmdline()) for p in tree)
        process.send_signal(signal.SIGHUP)
        process.wait(30)
        gone, alive = psutil.wait_procs(tree, timeout=20)
        assert alive == [], alive
    finally:
        _end(process, tree)


@pytest.mark.slow
def test_views_past_the_kernel_cap_get_a_page_that_says_so_and_start_nothing(tmp_path):
    """Five page views at once with --max-kernels 2: two kernels, and three pages saying the view is full."""
    pytest.importorskip("voila", reason="the projector view needs voila (requirements.txt)")
    from concurrent.futures import ThreadPoolExecutor

    process = _serve(tmp_path, "--max-kernels", "2")
    tree: list[psutil.Process] = []
    try:
        url = _url(process)

        def view(_):
            try:
                with urllib.request.urlopen(url, timeout=180) as response:
                    return response.status, response.read().decode(errors="replace")
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode(errors="replace")

        with ThreadPoolExecutor(5) as pool:
            views = list(pool.map(view, range(5)))
        tree = psutil.Process(process.pid).children(recursive=True)
        assert sorted(status for status, _ in views) == [200, 200, 503, 503, 503]
        assert all("At most 2 kernels run here at once" in page and "close one" in page
                   for status, page in views if status == 503)
        assert len(_kernels(process)) == 2
    finally:
        _end(process, tree)
