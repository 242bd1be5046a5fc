"""No notebook holds the same cell twice: a pasted duplicate shows a reader the same text once more."""
import json
from collections import Counter
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
LONG = 80  # characters: shorter cells (`ex.b_simple.hint()`, a bare name) may repeat on purpose


def repeated_cells(cells: list[dict]) -> list[str]:
    """The first words of each cell source longer than LONG characters that appears more than once."""
    sources = Counter("".join(cell["source"]).strip() for cell in cells)
    return [" ".join(text.split())[:60] for text, n in sources.items() if n > 1 and len(text) > LONG]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_cell_appears_twice(notebook):
    assert not repeated_cells(json.loads(notebook.read_text())["cells"]), notebook.name


def test_the_check_catches_a_duplicate():
    text = "When accumulation does shorten the time: that count takes a micro-step as the whole cost of training."
    cells = [{"source": [text]}, {"source": ["x = 1"]}, {"source": [text + "\n"]}, {"source": ["x = 1"]}]
    assert repeated_cells(cells) == [text[:60]]
