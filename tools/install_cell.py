"""Put the badge row and the install cell (widgets/lab/hosts.py) at the top of notebooks, or check they are there.

    python tools/install_cell.py                          # every notebook: insert, or bring up to date
    python tools/install_cell.py --repository OWNER/NAME --tag v0.2.0   # after a fork or a release
    python tools/install_cell.py --check                  # exit status 1 if a notebook lacks it or differs

A notebook that gains the cell must be executed again (its execution counts move).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from widgets.lab.hosts import REPOSITORY, badge_source, cell_source

ROOT = Path(__file__).resolve().parents[1]
TAG, BADGES = "lab-install", "lab-badges"


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _put(nb: nbformat.NotebookNode, tag: str, cell: nbformat.NotebookNode, index: int) -> bool:
    """The cell tagged `tag` at `index` with `cell`'s source: inserted, moved or brought up to date;
    whether `nb` changed."""
    current = [c for c in nb.cells if tag in _tags(c)]
    if current and nb.cells.index(current[0]) == index and current[0].source == cell.source:
        return False
    if current:
        nb.cells.remove(current[0])
        current[0].source = cell.source
        cell = current[0]  # keeps its outputs and id
    nb.cells.insert(index, cell)
    return True


def place(nb: nbformat.NotebookNode, source: str, badges: str | None = None) -> bool:
    """Put the badge row (`badges`, when given) first and the install cell (`source`) right after it;
    whether `nb` changed."""
    changed = False
    if badges is not None:
        changed = _put(nb, BADGES, nbformat.v4.new_markdown_cell(badges, metadata={"tags": [BADGES]}), 0)
    row = [i for i, c in enumerate(nb.cells) if BADGES in _tags(c)]
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [TAG]})
    return _put(nb, TAG, cell, row[0] + 1 if row else 0) or changed


def is_placed(nb: nbformat.NotebookNode, source: str, badges: str | None = None) -> bool:
    """The notebook's first code cell is the install cell, with this source; with `badges`, the first
    cell is the badge row with that source and the install cell follows it."""
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    if first is None or TAG not in _tags(first) or first.source != source:
        return False
    return badges is None or (BADGES in _tags(nb.cells[0]) and nb.cells[0].source == badges and nb.cells[1] is first)


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
        badges = badge_source(path.name, args.repository, args.tag)
        if args.check:
            if not is_placed(nb, source, badges):
                wrong.append(path)
        elif place(nb, source, badges):
            nbformat.write(nb, path)
            print(f"{path}: badge row and install cell written (execute the notebook again if they are new there)")
    for path in wrong:
        print(f"{path}: no badge row first and install cell after it, or other sources (python tools/install_cell.py)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
