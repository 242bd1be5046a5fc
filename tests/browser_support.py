"""Helpers for `test_browser.py`: a throw-away JupyterLab server and a few page actions.

The server runs on loopback with a random token and a free port, in temporary settings,
workspace and runtime directories, on a *copy* of the notebooks (Run All in a browser would
otherwise autosave outputs and widget state into the committed files). It is stopped by PID.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # we run as root in a container; the sandbox needs user namespaces
    "--disable-gpu",
    "--disable-dev-shm-usage",  # /dev/shm is small in containers
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# Console errors that are not the notebooks' fault: a substring of the message -> why it is
# harmless. Only errors and uncaught exceptions are checked (not debug/info/warning), and a clean
# run logs none (JupyterLab 4.6, Chromium 156, untrusted copies of the notebooks), so the list is
# empty. Add an entry only with its reason.
BENIGN_CONSOLE: dict[str, str] = {}


# The badge row's images (tools/install_cell.py: Open in Colab / Kaggle / Binder).
BADGE_SITES = re.compile(r"^https://(colab\.research\.google\.com|kaggle\.com|mybinder\.org)/")
EMPTY_SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/>"

# A new user's settings, minus the "get Jupyter news?" toast that would cover the screenshots.
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false"}}


def widget_output_count(path: Path) -> int:
    """How many widget views the notebook's saved outputs hold (each should render live)."""
    nb = nbformat.read(path, as_version=4)
    return sum(WIDGET_MIME in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


def widget_notebooks(folder: Path) -> list[Path]:
    """Notebooks under `folder` whose saved outputs include a widget view."""
    paths = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return [p for p in paths if widget_output_count(p)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A running JupyterLab: `url(path)` opens a file, `shutdown_kernels()` frees the CPU."""

    def __init__(self, process: subprocess.Popen, port: int, token: str, root: Path, log: Path):
        self.process, self.port, self.token, self.root, self.log = process, port, token, root, log

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, relative: str) -> str:
        return f"{self.base}/lab/tree/{relative}?token={self.token}"

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(f"{self.base}/api/{path}", method=method)
        request.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Delete every session and kernel, so the next notebook has both cores to itself."""
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")
        for kernel in self.api("kernels"):
            self.api(f"kernels/{kernel['id']}", method="DELETE")


@contextmanager
def jupyterlab(work: Path, notebooks: list[Path], timeout: float = 90):
    """Copy `notebooks` into `work/root` and serve it with JupyterLab; yields a `LabServer`.

    The copies keep their path relative to the repository (notebooks/x.ipynb stays so), so
    anything a notebook opens relative to itself is found the same way.
    """
    root = work / "root"
    for path in notebooks:
        target = root / path.resolve().relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    env = dict(os.environ)
    for name in ("JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR", "JUPYTER_RUNTIME_DIR"):
        env[name] = str(work / name.lower())
        Path(env[name]).mkdir(parents=True, exist_ok=True)
    for plugin, settings in LAB_SETTINGS.items():
        path = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",  # no announcements feed fetched from the internet
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands, await Run All
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = work / "jupyterlab.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, env=env, cwd=root, stdout=log_file, stderr=subprocess.STDOUT)
    server = LabServer(process, port, token, root, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                server.api("status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not answer in {timeout} s:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield server
    finally:
        stop(process)


@contextmanager
def chromium():
    """Debian's Chromium, driven by playwright, for one `with` block; closed on the way out, also on error.
    playwright is imported here: a test module that cannot import it skips before calling this."""
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def stop(process: subprocess.Popen, grace: float = 15) -> None:
    """SIGTERM by PID (the server then shuts its kernels down), SIGKILL if it hangs."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(5)


# --- in the page -------------------------------------------------------------------------------

# Top-level widget views of the current notebook (not views nested in an Output widget), and any
# that are still loading or failed. A failure shows either as the text "Error displaying widget"
# (no model, no view) or, in ipywidgets 8, as an error icon (`.jupyter-widgets-error-widget`:
# a view class that did not load, e.g. a kernel/frontend version mismatch). JupyterLab renders
# saved widget outputs of an untrusted notebook as their image/png fallback, so only outputs made
# by this run are counted.
_WIDGET_STATUS_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget.node;
  const outputs = [...panel.querySelectorAll('.jp-OutputArea-output')]
      .filter(o => !o.parentElement.closest('.widget-output'));
  const text = o => o.textContent || '';
  const failed = o => text(o).includes('Error displaying widget') || o.querySelector('.jupyter-widgets-error-widget');
  return {
    views: outputs.filter(o => o.querySelector(':scope > .jupyter-widgets') && !failed(o)).length,
    loading: outputs.filter(o => text(o).startsWith('Loading widget')).length,
    errors: outputs.filter(failed).map(o => text(o).trim() || 'a widget error icon (the reason is in the browser console)'),
  };
}"""

# SHA-256 of some bytes, as hex (a helper pasted into the two scripts below).
_SHA_JS = """const sha = async bytes => {
    const digest = await crypto.subtle.digest('SHA-256', bytes);
    return [...new Uint8Array(digest)].map(x => x.toString(16).padStart(2, '0')).join('');
  };"""

# The PNG an <img> shows, hashed: "the figure changed" means these bytes changed.
_IMAGE_HASH_JS = "async img => { " + _SHA_JS + " return sha(await (await fetch(img.src)).arrayBuffer()); }"

# What a learner sees of one widget, as a string: the bytes of its pictures (<img> and <canvas>)
# and the text of its HTML and Output parts. Slider readouts are left out: they change by
# themselves when a key is pressed, whether the callback works or not.
_FINGERPRINT_JS = "async root => { " + _SHA_JS + """
  const parts = [];
  for (const img of root.querySelectorAll('img')) {
    parts.push(await sha(await (await fetch(img.src)).arrayBuffer()));
  }
  for (const canvas of root.querySelectorAll('canvas')) {
    parts.push(await sha(new TextEncoder().encode(canvas.toDataURL())));
  }
  for (const el of root.querySelectorAll('.widget-html-content, .widget-output')) {
    parts.push(el.textContent);
  }
  return parts.join('|');
}"""

# Arm a stopwatch on `img`: it starts at the next keydown anywhere in the page and stops when the
# <img> has loaded a new src. `window.__roundTrip` resolves to the milliseconds, or null on timeout.
_ARM_JS = """([img, timeoutMs]) => {
  window.__roundTrip = new Promise(resolve => {
    let t0 = null;
    document.addEventListener('keydown', () => { t0 = performance.now(); }, {capture: true, once: true});
    const observer = new MutationObserver(() => {
      observer.disconnect();
      img.addEventListener('load', () => resolve(performance.now() - (t0 ?? performance.now())), {once: true});
    });
    observer.observe(img, {attributes: true, attributeFilter: ['src']});
    setTimeout(() => { observer.disconnect(); resolve(null); }, timeoutMs);
  });
}"""


class LabPage:
    """One Chromium page with JupyterLab loaded once; notebooks are opened and closed in it."""

    def __init__(self, page, server: LabServer):
        self.page, self.server = page, server
        self.console: list[tuple[str, str]] = []
        page.on("console", lambda m: self.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        # The badge row atop every notebook shows images from these sites; answered here with an empty
        # picture, so that a machine offline logs no failed load and nothing leaves it.
        page.route(BADGE_SITES, lambda route: route.fulfill(status=200, content_type="image/svg+xml", body=EMPTY_SVG))
        page.goto(f"{server.base}/lab?token={server.token}")
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=120_000)
        page.evaluate("async () => { await window.jupyterapp.restored; window.jupyterapp.shell.collapseLeft(); }")

    def console_errors(self, since: int = 0) -> list[str]:
        """Error messages logged since index `since`, minus the documented benign ones."""
        return [
            text for kind, text in self.console[since:]
            if kind in ("error", "pageerror") and not any(key in text for key in BENIGN_CONSOLE)
        ]

    def open(self, relative: str, timeout: float = 120) -> None:
        """Open a notebook and wait until the *status bar* says its kernel is idle.

        The toolbar's kernel indicator turns idle before the kernel's websocket is connected;
        the status bar item only reads "| Idle" once the session is really usable.
        """
        self.page.evaluate("async p => { await window.jupyterapp.commands.execute('docmanager:open', {path: p}); }", relative)
        name = relative.rsplit("/", 1)[-1]
        status = self.page.locator(f'#jp-main-statusbar span[title="Change kernel for {name}"]')
        status.filter(has_text="| Idle").wait_for(timeout=timeout * 1000)

    def run_all(self) -> bool:
        """Run > Run All Cells; returns False if a cell raised (Run All stops there)."""
        return self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def error_outputs(self) -> list[str]:
        """Tracebacks shown in the current notebook (the tail of each)."""
        return self.page.evaluate(
            """() => [...window.jupyterapp.shell.currentWidget.node.querySelectorAll(
                 '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
               .map(o => o.textContent.slice(-800))"""
        )

    def wait_for_kernel_idle(self, name: str, timeout: float = 120) -> None:
        status = self.page.locator(f'#jp-main-statusbar span[title="Change kernel for {name}"]')
        status.filter(has_text="| Idle").wait_for(timeout=timeout * 1000)

    def widget_status(self) -> dict:
        return self.page.evaluate(_WIDGET_STATUS_JS)

    def wait_for_widgets(self, expected: int, timeout: float = 60) -> dict:
        """Poll until `expected` widget views are on screen and none is still loading."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.widget_status()
            if status["errors"] or (status["views"] >= expected and not status["loading"]):
                return status
            if time.monotonic() > deadline:
                return status
            time.sleep(0.25)

    def close_all(self) -> None:
        """Save (the temporary copy) and close every tab, then stop the kernels (also after a failure)."""
        self.page.evaluate(
            "async () => { const c = window.jupyterapp.commands;"
            " await c.execute('docmanager:save-all'); await c.execute('application:close-all'); }"
        )
        self.server.shutdown_kernels()

    def image_hash(self, img) -> str:
        return img.evaluate(_IMAGE_HASH_JS)

    def fingerprint(self, root) -> str:
        return root.evaluate(_FINGERPRINT_JS)

    def panel(self):
        """Locator of the notebook in the current tab (other tabs may still hold widgets)."""
        return self.page.locator(f"#{self.page.evaluate('() => window.jupyterapp.shell.currentWidget.id')}")

    def top_level_widgets(self):
        """Locator of the current notebook's top-level widget views (nested ones are parts of these)."""
        return self.panel().locator(".jp-OutputArea-output > .jupyter-widgets")

    def press_and_time(self, handle, key: str, img, timeout_ms: int = 20_000) -> float | None:
        """Focus a slider handle, press `key`, return ms until `img` shows a new picture (None: never)."""
        img_handle = img.element_handle()
        self.page.evaluate(_ARM_JS, [img_handle, timeout_ms])
        handle.focus()
        self.page.keyboard.press(key)
        return self.page.evaluate("() => window.__roundTrip")
