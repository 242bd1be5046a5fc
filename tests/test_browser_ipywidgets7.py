"""The lab's widgets in a real browser under ipywidgets 7.7.1, Colab's version (issue 28, item 6).

Classic Notebook 6.5 (from `make compat`'s Colab-like venv) with the nbextension of widgetsnbextension
3.6.1, the one released with ipywidgets 7.7.1, in headless Chromium: start-here (the bricks) and beginner_2 (the
explorer) run top to bottom, every widget renders with no "Error displaying widget", and a key
press on a slider changes the figure. Screenshots go to test-artifacts/.

It needs that venv (built by `make compat`, several GB), so it runs there, not in CI or `make test`:
`make compat` runs it after the notebooks, with COMPAT_BROWSER=1; without that it is skipped, saying
so. `COMPAT_COLAB_PYTHON` names another Python holding ipywidgets 7 and notebook 6.

Why 3.6.1 and not the venv's own 3.6.10 (Colab's list pins it beside ipywidgets 7.7.1, but Colab draws widgets
with its own front end, not this one): 3.6.10's page, from ipywidgets 7.8, cannot make ipywidgets 7.7.1's
Output model ("n._deserialize_state is not a function"), so every widget holding an Output, the lab's among
them, shows nothing; measured here. pip downloads the 3.6.1 wheel (a few hundred kB) into the test's folder
and the Notebook reads its nbextension first (JUPYTER_PATH); the kernel keeps the venv's ipywidgets 7.7.1.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.browser_support import CHROMIUM, ROOT, chromium, free_port, stop, widget_output_count

pytestmark = pytest.mark.browser

COLAB_PYTHON = Path(os.environ.get("COMPAT_COLAB_PYTHON", "/tmp/gradient-accumulation-lab-compat/colab/bin/python"))
ARTIFACTS = ROOT / "test-artifacts"
NOTEBOOKS = {"00_start_here": "the bricks", "beginner_2_watch_a_model_learn": "the explorer"}
NBEXTENSION = "widgetsnbextension==3.6.1"  # released with ipywidgets 7.7.1

if os.environ.get("COMPAT_BROWSER") != "1":
    pytest.skip("runs under `make compat` only (COMPAT_BROWSER=1): it needs make compat's Colab-like venv "
                "(ipywidgets 7.7.1, notebook 6.5; several GB, not built in CI)", allow_module_level=True)
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: the browser tests need Debian's chromium", allow_module_level=True)
if not COLAB_PYTHON.exists():
    pytest.skip(f"needs make compat's Colab-like venv ({COLAB_PYTHON}: ipywidgets 7.7.1, notebook 6.5), which "
                "only `make compat` builds (several GB, not in CI); `make compat` runs this test",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need the playwright package")


def _version(module: str) -> str:
    done = subprocess.run([str(COLAB_PYTHON), "-c", f"import {module}; print({module}.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def notebook_server(tmp_path_factory):
    """Classic Notebook from the Colab-like venv on copies of the two notebooks; yields (base url, token)."""
    versions = {m: _version(m) for m in ("ipywidgets", "notebook", "widgetsnbextension")}
    assert versions["ipywidgets"].startswith("7.") and versions["notebook"].startswith("6."), versions
    work = tmp_path_factory.mktemp("notebook6")
    fetched = subprocess.run([str(COLAB_PYTHON), "-m", "pip", "download", "--no-deps", "-q", "-d", str(work / "wheel"),
                              NBEXTENSION], capture_output=True, text=True, timeout=300)
    assert fetched.returncode == 0, f"pip download {NBEXTENSION}: {fetched.stderr[-1000:]}"
    (wheel,) = (work / "wheel").glob("widgetsnbextension-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(work / "wheel")
    (share,) = (work / "wheel").glob("widgetsnbextension-*.data/data/share/jupyter")
    versions["widgetsnbextension (the page's)"] = NBEXTENSION.split("==")[1]
    root = work / "root" / "notebooks"
    root.mkdir(parents=True)
    for stem in NOTEBOOKS:
        (root / f"{stem}.ipynb").write_bytes((ROOT / "notebooks" / f"{stem}.ipynb").read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["JUPYTER_PATH"] = str(share)  # its nbextensions/jupyter-js-widgets before the venv's
    env["PATH"] = f"{COLAB_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[name] = str(work / name.lower())
    port, token = free_port(), secrets.token_hex(16)
    command = [str(COLAB_PYTHON), "-m", "notebook", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--port-retries=0", f"--NotebookApp.token={token}", f"--notebook-dir={work / 'root'}",
               "--NotebookApp.disable_check_xsrf=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = work / "notebook.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"notebook exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as response:
                    json.loads(response.read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"notebook did not answer in 90 s:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield base, token, versions
    finally:
        stop(process)


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


# Widget views made by this run and those that failed (ipywidgets 7's text for a view it cannot make).
_STATUS_JS = """() => {
  const outputs = [...document.querySelectorAll('#notebook .output_subarea')]
      .filter(o => !o.parentElement.closest('.widget-output'));
  const failed = o => (o.textContent || '').includes('Error displaying widget');
  return {views: outputs.filter(o => o.querySelector('.jupyter-widgets') && !failed(o)).length,
          errors: outputs.filter(failed).map(o => o.textContent.trim().slice(0, 300))};
}"""
_DONE_JS = """() => Jupyter.notebook.get_cells().every(c => c.cell_type !== 'code' || !c.get_text().trim()
    || (typeof c.input_prompt_number === 'number')) && Jupyter.notebook.kernel_busy === false"""
_IMAGE_JS = "root => [...root.querySelectorAll('img')].map(i => i.src).join('|')"


@pytest.mark.parametrize("stem", NOTEBOOKS, ids=list(NOTEBOOKS))
def test_the_widgets_render_under_ipywidgets_7_and_a_key_changes_the_figure(notebook_server, browser, stem):
    base, token, versions = notebook_server
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    console: list[tuple[str, str]] = []
    page.on("console", lambda m: console.append((m.type, m.text)))
    try:
        page.goto(f"{base}/notebooks/notebooks/{stem}.ipynb?token={token}")
        page.wait_for_function("() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel "
                               "&& Jupyter.notebook.kernel.is_connected()", timeout=120_000)
        # The widget manager, once it has asked the kernel for its widgets (7.7's control comm, else one by one),
        # draws every widget output again: one drawn before that is removed. Run the cells after it.
        deadline = time.monotonic() + 60
        while not any("jupyter.widget.control" in text for _, text in console) and time.monotonic() < deadline:
            page.wait_for_timeout(250)
        page.wait_for_timeout(2000)
        page.evaluate("() => { Jupyter.notebook.clear_all_output(); Jupyter.notebook.execute_all_cells(); }")
        page.wait_for_timeout(1000)
        page.wait_for_function(_DONE_JS, timeout=300_000, polling=500)
        tracebacks = page.evaluate("() => [...document.querySelectorAll('.output_error')].map(e => e.textContent.slice(-500))")
        assert tracebacks == [], f"{stem}: a cell raised under ipywidgets {versions['ipywidgets']}"
        expected = widget_output_count(ROOT / "notebooks" / f"{stem}.ipynb")
        deadline = time.monotonic() + 60
        while (status := page.evaluate(_STATUS_JS))["views"] < expected and not status["errors"]:
            if time.monotonic() > deadline:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"ipywidgets{versions['ipywidgets']}_{stem}_failed.png"), full_page=True)
            assert time.monotonic() < deadline, (f"{stem}: {status['views']} of {expected} widgets rendered under "
                                                 f"{versions}; the page's console errors: {[t for k, t in console if k == 'error'][:6]}")
            page.wait_for_timeout(250)
        assert status["errors"] == [] and status["views"] >= expected, status

        widget = page.locator("#notebook .output_subarea .jupyter-widgets").filter(
            has=page.locator(".ui-slider-handle")).first  # the first widget with a slider: bricks or explorer
        widget.scroll_into_view_if_needed()
        before = widget.evaluate(_IMAGE_JS)
        handle = widget.locator(".ui-slider-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"([root, before]) => ({_IMAGE_JS})(root) !== before",
                               arg=[widget.element_handle(), before], timeout=30_000)
        ARTIFACTS.mkdir(exist_ok=True)
        widget.screenshot(path=str(ARTIFACTS / f"ipywidgets{versions['ipywidgets']}_{stem}.png"))
        assert errors == [], errors  # uncaught exceptions in the page
    finally:
        page.close()
