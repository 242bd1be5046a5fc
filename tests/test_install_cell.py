"""tools/install_cell.py puts the badge row first and the install cell after it in a copy of a real notebook,
once, brings their repository and tag up to date, and --check tells which notebooks lack them; every
committed notebook has both, and its install cell never installs the runtime's own packages."""
from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
from pathlib import Path

import nbformat
import pytest

from widgets.lab import hosts

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("install_cell", ROOT / "tools" / "install_cell.py")
install_cell = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(install_cell)


@pytest.fixture
def tool(capsys):
    def run(*args: str) -> subprocess.CompletedProcess:
        status = install_cell.main(list(args))
        return subprocess.CompletedProcess(args, status, capsys.readouterr().out)
    return run


def test_the_cell_goes_first_once_and_follows_the_repository(tmp_path, tool):
    notebook = tmp_path / "start.ipynb"
    before = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    before.cells = [c for c in before.cells if not {"lab-badges", "lab-install"} & set(c.metadata.get("tags", []))]
    nbformat.write(before, notebook)  # start-here as it was before the tool
    assert tool("--check", str(notebook)).returncode == 1

    assert tool(str(notebook)).returncode == 0
    assert tool(str(notebook)).stdout == ""  # a second run changes nothing
    after = nbformat.read(notebook, as_version=4)
    assert len(after.cells) == len(before.cells) + 2
    badges, first = after.cells[0], next(c for c in after.cells if c.cell_type == "code")
    assert badges.source == hosts.badge_source("start.ipynb") and badges.metadata.tags == ["lab-badges"]
    assert first.source == hosts.cell_source() and first.metadata.tags == ["lab-install"] and not first.outputs
    assert after.cells.index(first) == 1 and [c.source for c in after.cells[2:]] == [c.source for c in before.cells]
    assert tool("--check", str(notebook)).returncode == 0

    assert tool("--repository", "ada/lab", "--tag", "v9", str(notebook)).returncode == 0
    cells = nbformat.read(notebook, as_version=4).cells
    assert cells[1].source == hosts.cell_source("ada/lab", "v9")
    assert "github.com/ada/lab/blob/v9/notebooks/start.ipynb" in cells[0].source and len(cells) == len(after.cells)
    assert tool("--check", str(notebook)).returncode == 1  # not the default repository any more


def test_the_cell_follows_the_badge_row(tmp_path, tool):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("[Open in Colab](...)", metadata={"tags": ["lab-badges"]}),
                nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("print(1)")]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert tool(str(path)).returncode == 0
    cells = nbformat.read(path, as_version=4).cells
    assert [c.metadata.get("tags", []) for c in cells] == [["lab-badges"], ["lab-install"], [], []]
    assert cells[0].source == hosts.badge_source("x.ipynb")  # the row brought up to date


def test_the_badges_open_this_notebook_on_each_host():
    row = hosts.badge_source("beginner_1_carrying_bricks.ipynb", "ada/lab", "v2.0.0")
    links = re.findall(r"\]\((https://[^)]+)\)\]\((https://[^)]+)\)", row)
    assert [image.rsplit("/", 1)[1] for image, _ in links] == ["colab-badge.svg", "open-in-kaggle.svg", "badge_logo.svg"]
    assert [link for _, link in links] == [
        "https://colab.research.google.com/github/ada/lab/blob/v2.0.0/notebooks/beginner_1_carrying_bricks.ipynb",
        "https://kaggle.com/kernels/welcome?src=https://github.com/ada/lab/blob/v2.0.0/notebooks/"
        "beginner_1_carrying_bricks.ipynb",
        "https://mybinder.org/v2/gh/ada/lab/v2.0.0?urlpath=lab/tree/notebooks/beginner_1_carrying_bricks.ipynb"]
    with pytest.raises(ValueError, match="name must be a notebook's file name"):
        hosts.badge_source("../x.ipynb)")


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_opens_with_the_badges_and_the_install_cell(path):
    nb = nbformat.read(path, as_version=4)
    assert install_cell.is_placed(nb, hosts.cell_source(), hosts.badge_source(path.name)), \
        f"{path.name}: python tools/install_cell.py, then execute it again"
    pips = [line.strip() for line in nb.cells[1].source.splitlines() if "pip install" in line]
    assert len(pips) == 1 and "--no-deps" in pips[0].split()
    named = {re.match(r"[A-Za-z0-9_.\-]+", word)[0].lower() for word in shlex.split(pips[0])[2:] if word[0] != "-"}
    assert named == {hosts.DISTRIBUTION} and not named & set(hosts.NEVER)
    assert [o.get("text") for o in nb.cells[1].outputs] == ["Not on Colab or Kaggle: nothing to install.\n"]
