"""tools/install_cell.py puts the install cell first (after the badge row) in a copy of a real notebook,
once, brings its repository and tag up to date, and --check tells which notebooks lack it."""
from __future__ import annotations

import importlib.util
import shutil
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
    shutil.copy2(ROOT / "notebooks" / "00_start_here.ipynb", notebook)
    before = nbformat.read(notebook, as_version=4)
    assert tool("--check", str(notebook)).returncode == 1

    assert tool(str(notebook)).returncode == 0
    assert tool(str(notebook)).stdout == ""  # a second run changes nothing
    after = nbformat.read(notebook, as_version=4)
    assert len(after.cells) == len(before.cells) + 1
    first = next(c for c in after.cells if c.cell_type == "code")
    assert first.source == hosts.cell_source() and first.metadata.tags == ["lab-install"] and not first.outputs
    assert after.cells.index(first) == 0 and [c.source for c in after.cells[1:]] == [c.source for c in before.cells]
    assert tool("--check", str(notebook)).returncode == 0

    assert tool("--repository", "ada/lab", "--tag", "v9", str(notebook)).returncode == 0
    assert next(c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code").source == \
        hosts.cell_source("ada/lab", "v9")
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
