"""A test run (`pytest notebooks/x.ipynb` too, hence here) writes only into a throw-away folder, its kernels included."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# variable -> path under the session's folder. Set even when the caller has set one: a learner
# who exported LAB_PROGRESS_FILE to keep their progress elsewhere must not see tests write there.
REDIRECTED = {
    "LAB_PROGRESS_FILE": "lab/progress.json",  # widgets/lab/progress.py; else ~/.gradient-accumulation-lab
    "JUPYTER_CONFIG_DIR": "jupyter/config",  # else ~/.jupyter
    "JUPYTER_DATA_DIR": "jupyter/data",  # else ~/.local/share/jupyter
    "JUPYTER_RUNTIME_DIR": "jupyter/runtime",  # kernel connection files; else ~/.local/share/jupyter/runtime
    "IPYTHONDIR": "ipython",  # the kernel's profile and history; else ~/.ipython
    "MPLCONFIGDIR": "matplotlib",  # config and font cache; else ~/.config/matplotlib, ~/.cache/matplotlib
    # temporary files, gloo's rendezvous folders included: each of xdist's test processes sees only its own.
    # Not in a single process (the room's tests): another user must reach what they put in the system's /tmp.
    "TMPDIR": "tmp",
}

_session: dict = {}


def pytest_configure(config):
    folder = Path(tempfile.mkdtemp(prefix="lab-test-home-"))
    _session["folder"] = folder
    redirected = {name: relative for name, relative in REDIRECTED.items()
                  if name != "TMPDIR" or "PYTEST_XDIST_WORKER" in os.environ}
    _session["before"] = {name: os.environ.get(name) for name in redirected}
    for name, relative in redirected.items():
        path = folder / relative
        (path.parent if name == "LAB_PROGRESS_FILE" else path).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(path)
    tempfile.tempdir = os.environ.get("TMPDIR")
    # A fresh MPLCONFIGDIR has no font cache: the first kernel to import matplotlib would build it
    # and print "Matplotlib is building the font cache" on stderr, which nbval compares. Build it
    # once here, in a child process (this process keeps matplotlib out of sys.modules).
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pytest_collection_modifyitems(items):
    # nbval's cells: `make test`'s second CPU leg selects them with the rounding tests, `-m "notebook or rounding"`
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker("notebook")


def pytest_unconfigure(config):
    folder = _session.pop("folder", None)
    if folder is None:
        return
    for name, value in _session.pop("before").items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tempfile.tempdir = None
    shutil.rmtree(folder, ignore_errors=True)
