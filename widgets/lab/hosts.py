"""Where the lab runs (Colab, Kaggle, VS Code, a Jupyter front end) and its install on Colab and Kaggle; stdlib only."""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from importlib import metadata
from typing import Callable, Mapping, Sequence

DISTRIBUTION = "gradient-accumulation-lab"
# A placeholder until the lab is published (README, "Colab, Kaggle, VS Code").
REPOSITORY = "gradient-accumulation-lab/gradient-accumulation-lab"
# The hosted runtimes, by the variable each sets in its kernels' environment.
HOSTED = {"COLAB_RELEASE_TAG": "Colab", "KAGGLE_KERNEL_RUN_TYPE": "Kaggle"}
VSCODE = ("VSCODE_PID", "VSCODE_CWD")  # set for what VS Code starts, its notebook kernels included
NEVER = ("torch", "numpy", "ipykernel", "ipywidgets")  # the runtime's own: PURE holds none (tests/lab)
# What the lab needs beyond what Colab and Kaggle ship, pure Python, at requirements.txt's versions.
PURE = {"tqdm": "4.70.1", "accelerate": "1.15.0", "pytorch-lightning": "2.6.6",
        "lightning-utilities": "0.15.3", "torchmetrics": "1.9.0"}
# The server a kernel's parent process runs, by a word of its command line (argv[:4], file names).
FRONT_ENDS = (("voila", "Voilà"), ("jupyterhub-singleuser", "JupyterLab"), ("jupyter-lab", "JupyterLab"),
              ("jupyterlab", "JupyterLab"), ("jupyter-notebook", "Jupyter Notebook"),
              ("notebook", "Jupyter Notebook"), ("nbclassic", "Jupyter Notebook"))


def detect(environ: Mapping[str, str] = os.environ, server_argv: Sequence[str] = ()) -> str:
    """'Colab', 'Kaggle', the Jupyter front end the server command line `server_argv` runs ('JupyterLab', ...,
    'Jupyter'), 'VS Code', or 'Python' (none: a shell, a test run)."""
    for variable, host in HOSTED.items():
        if variable in environ:
            return host
    # The server before VS Code: a JupyterLab started in VS Code's terminal inherits its variables.
    words = {re.sub(r"\.(exe|py)$", "", re.split(r"[\\/]", part)[-1].lower()) for part in server_argv[:4]}
    for word, name in FRONT_ENDS:
        if word in words:
            return name
    if any("jupyter" in word for word in words):
        return "Jupyter"
    return "VS Code" if any(variable in environ for variable in VSCODE) else "Python"


# --- the install on a hosted runtime ----------------------------------------------------------------

def lab_requirement(repository: str = REPOSITORY, tag: str | None = None) -> str:
    """The lab's package from its repository at `tag` (default: v + this lab's version), for pip."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+", repository):
        raise ValueError(f"repository must be OWNER/NAME as on GitHub, got {repository!r}")
    tag = tag or f"v{metadata.version(DISTRIBUTION)}"
    if not re.fullmatch(r"[A-Za-z0-9_.\-/]+", tag):
        raise ValueError(f"tag must be a git tag or branch name, got {tag!r}")
    return f"{DISTRIBUTION} @ git+https://github.com/{repository}@{tag}"


def version_of(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def install_missing(run: Callable = subprocess.run, installed: Callable[[str], str | None] = version_of) -> list[str]:
    """Install PURE's packages this runtime lacks (--no-deps: present ones stay as they are); on Colab switch on
    ipywidgets 8's manager."""
    needed = [f"{name}=={version}" for name, version in PURE.items() if installed(name) is None]
    if needed:
        done = run([sys.executable, "-m", "pip", "install", "--no-deps", *needed], check=False)
        if done.returncode:
            raise RuntimeError(f"pip could not install {', '.join(needed)} (exit status {done.returncode}); on Kaggle, "
                               "switch Internet on (Settings > Internet), then run this cell again")
        importlib.invalidate_caches()
    added = f"added {', '.join(needed)}" if needed else "nothing else was missing"
    print(f"The lab {installed(DISTRIBUTION)} is installed ({added}); torch, numpy, ipykernel and ipywidgets "
          "are this runtime's own.")
    colab = sys.modules.get("google.colab")  # loaded in every Colab kernel, absent elsewhere
    if colab is not None and (installed("ipywidgets") or "").startswith("8"):
        colab.output.enable_custom_widget_manager()
        print("Colab: its widget manager for ipywidgets 8 is on for this session.")
    return needed


# The first code cell of every notebook; elsewhere than Colab and Kaggle the lab is installed already.
# Every line fits 100 characters: IPython puts `{{lab}}` into the %pip line, so no line scrolls sideways.
CELL = '''\
# On Colab or Kaggle this installs the lab beside their own torch and widgets (Kaggle: Internet on).
# Anywhere else the lab is installed already, and this cell only says so.
import os
if os.environ.keys() & {hosted}:
    lab = "{source}"
    %pip install --no-deps "{distribution} @ git+https://github.com/{{lab}}"
    from widgets.lab.hosts import install_missing; install_missing()
else:
    print("Not on Colab or Kaggle: nothing to install.")'''


def cell_source(repository: str = REPOSITORY, tag: str | None = None) -> str:
    """The install cell's source, installing the lab from `repository` at `tag`."""
    hosted = "{" + ", ".join(repr(v) for v in HOSTED) + "}"
    source = lab_requirement(repository, tag).split("github.com/", 1)[1]  # checks both: OWNER/NAME@TAG
    return CELL.format(hosted=hosted, source=source, distribution=DISTRIBUTION)


# The badge row above every notebook, at the tag the install cell installs (notebook and package of one release).
BADGES = (
    ("Open In Colab", "https://colab.research.google.com/assets/colab-badge.svg",
     "https://colab.research.google.com/github/{repository}/blob/{tag}/notebooks/{name}"),
    ("Open In Kaggle", "https://kaggle.com/static/images/open-in-kaggle.svg",
     "https://kaggle.com/kernels/welcome?src=https://github.com/{repository}/blob/{tag}/notebooks/{name}"),
    ("Launch on Binder", "https://mybinder.org/badge_logo.svg",
     "https://mybinder.org/v2/gh/{repository}/{tag}?urlpath=lab/tree/notebooks/{name}"),
)


# The one advice on how to run, under every notebook's badges (the lessons' own prose never gives another).
HOW_TO_RUN = ("Run the cells in order with **Shift + Enter**, or all at once with **Run All**; "
              "where a cell asks for your guess, its answer waits until you commit one.")


def badge_source(name: str, repository: str = REPOSITORY, tag: str | None = None) -> str:
    """The badge row (markdown) of the notebook `notebooks/<name>`, opening it from `repository` at `tag`."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+\.ipynb", name):
        raise ValueError(f"name must be a notebook's file name, got {name!r}")
    requirement = lab_requirement(repository, tag)  # checks both
    tag = requirement.rsplit("@", 1)[1]
    return " ".join(f"[![{alt}]({image})]({link.format(repository=repository, tag=tag, name=name)})"
                    for alt, image, link in BADGES) + "\n\n" + HOW_TO_RUN
