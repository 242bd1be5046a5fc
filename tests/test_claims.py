"""Every number a notebook's prose states is printed by a cell of that notebook.

A number typed into a markdown cell goes stale the day the code changes; a printed one cannot.
For each notebook, every number in its markdown must appear, as the same token, in some output of
the same notebook (stream, text/plain, text/markdown or text/html). What need not be printed:
years and arXiv numbers of references, list and heading numbering, URLs, version pins, numbers
inside names (`float32`, `researcher_1`: the NUMBER pattern skips them), inline code (it quotes
what a code cell sets), and the short per-notebook ALLOWED lists below, each
with the reason (mostly definitions such as "K = 4" that the next cell sets in code).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# A number as prose writes it: 8, -0.81, 1.19e-07, 3.49e+09, 2.5%, 1,024. Not part of a name.
NUMBER = re.compile(r"(?<![\w.\-])[-−]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?%?(?![\w])(?!\.\d)")
NOT_CLAIMS = [
    re.compile(r"https?://\S+|\]\([^)]*\)"),                    # links
    re.compile(r"arXiv:\s*\d{4}\.\d{4,5}(v\d+)?", re.I),         # arXiv ids
    re.compile(r"(?<![\d.,])\b(?:19[5-9]\d|20[0-3]\d)[a-z]?\b(?![.,]\d)"),  # years (citations, dates)
    re.compile(r"^\s*(?:#+\s*)?\d+[.)]\s", re.M),                # numbered lists and headings
    re.compile(r"\b\d+(?:\.\d+){2,}\b"),                          # version numbers (2.13.0)
    re.compile(r"\$[^$]+\$"),                                     # maths: symbols, not measurements
    re.compile(r"`[^`\n]+`"),                                      # inline code: quotes what a code cell sets
]

# notebook stem -> {number as typed: why it need not be printed}
ALLOWED: dict[str, dict[str, str]] = {
    "developer_2_training_loop": {
        "2.0": "the torch release whose zero_grad default became set_to_none=True: a dated fact, not a measurement",
    },
}


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def prose_numbers(markdown: str) -> set[str]:
    """The numbers a markdown text states as claims (see module docstring for what is skipped)."""
    for pattern in NOT_CLAIMS:
        markdown = pattern.sub(" ", markdown)
    return {m.group().replace("−", "-") for m in NUMBER.finditer(markdown)}


def output_numbers(cells: list[dict]) -> set[str]:
    """Every number token printed by any output of the notebook."""
    found: set[str] = set()
    for cell in cells:
        for output in cell.get("outputs", []):
            texts = [_text(output.get("text"))]
            data = output.get("data", {})
            texts += [_text(data.get(kind)) for kind in ("text/plain", "text/markdown", "text/html")]
            for text in texts:
                found |= {m.group().replace("−", "-") for m in NUMBER.finditer(text)}
    return found


def unprinted_numbers(notebook: Path) -> dict[str, list[str]]:
    """{number: [the first words of each markdown cell stating it]} for numbers no output prints."""
    cells = json.loads(notebook.read_text())["cells"]
    printed = output_numbers(cells) | set(ALLOWED.get(notebook.stem, {}))
    missing: dict[str, list[str]] = {}
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        text = _text(cell["source"])
        for number in sorted(prose_numbers(text) - printed):
            missing.setdefault(number, []).append(" ".join(text.split())[:60])
    return missing


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_number_in_the_prose_is_printed(notebook):
    missing = unprinted_numbers(notebook)
    assert not missing, (
        f"{notebook.name}: numbers in markdown that no output of the notebook prints "
        f"(print them, or add them to ALLOWED with a reason): {missing}"
    )


def test_allow_lists_give_reasons_and_are_still_needed():
    for stem, allowed in ALLOWED.items():
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        assert path.exists(), f"ALLOWED names a notebook that does not exist: {stem}"
        cells = json.loads(path.read_text())["cells"]
        prose = set().union(*(prose_numbers(_text(c["source"])) for c in cells if c["cell_type"] == "markdown"))
        for number, reason in allowed.items():
            assert len(reason) > 10, f"{stem}: say why {number} need not be printed"
            assert number in prose, f"{stem}: {number} is allowed but no markdown states it any more"
            # a timing cell (its output ignored by nbval) may print any number on a given run
            steady = [c for c in cells if "NBVAL_IGNORE_OUTPUT" not in _text(c["source"])]
            assert number not in output_numbers(steady), f"{stem}: {number} is printed now; drop it from ALLOWED"


def test_the_check_catches_a_typed_number():
    assert prose_numbers("The error is 3.49e+09, about 12% of 1,024 examples (Goyal et al., 2017).") == {
        "3.49e+09", "12%", "1,024"}
    assert prose_numbers("float32 and bf16 with `researcher_1`; see arXiv:1706.02677 and torch 2.13.0.") == set()
