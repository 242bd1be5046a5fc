"""Put the install cell (widgets/lab/hosts.py, `cell_source`) at the top of notebooks, or check it is there.

    python tools/install_cell.py                          # every notebook: insert, or bring up to date
    python tools/install_cell.py --repository OWNER/NAME --tag v0.2.0   # after a fork or a release
    python tools/install_cell.py --check                  # exit status 1 if a notebook lacks it or differs

The cell is the notebook's first code cell, tagged `lab-install`: it goes right after a markdown cell
tagged `lab-badges` (the Open in Colab / Kaggle / Binder row) where there is one, else first. Run with
the lab's Python (.venv/bin/python). A notebook that gains the cell must be executed again
(benchmarks/execute_notebooks.py): its cells' execution counts move. Changing only the repository or
the tag changes no output (off Colab and Kaggle the cell prints the same line).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from widgets.lab.hosts import REPOSITORY, cell_source

ROOT = Path(__file__).resolve().parents[1]
TAG, BADGES = "lab-install", "lab-badges"


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def place(nb: nbformat.NotebookNode, source: str) -> bool:
    """Insert the install cell into `nb` or bring its source up to date; whether `nb` changed."""
    current = [c for c in nb.cells if TAG in _tags(c)]
    if current:
        if current[0].source == source:
            return False
        current[0].source = source
        return True
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [TAG]})
    badges = [i for i, c in enumerate(nb.cells) if BADGES in _tags(c)]
    nb.cells.insert(badges[0] + 1 if badges else 0, cell)
    return True


def is_placed(nb: nbformat.NotebookNode, source: str) -> bool:
    """The notebook's first code cell is the install cell, with this source."""
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    return first is not None and TAG in _tags(first) and first.source == source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    parser.add_argument("--repository", default=REPOSITORY, help="OWNER/NAME on GitHub (default: the placeholder)")
    parser.add_argument("--tag", default=None, help="the git tag or branch to install (default: v + the version)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where the cell is missing or differs")
    args = parser.parse_args(argv)
    source = cell_source(args.repository, args.tag)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    wrong = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if args.check:
            if not is_placed(nb, source):
                wrong.append(path)
        elif place(nb, source):
            nbformat.write(nb, path)
            print(f"{path}: install cell written (execute the notebook again if it is new there)")
    for path in wrong:
        print(f"{path}: no install cell as its first code cell, or another source (python tools/install_cell.py)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
