"""Every picture a committed notebook shows has a text alternative that reaches the page.

JupyterLab's image renderer ignores an output's metadata, so an `image/png` output can carry no
text alternative. Each picture is therefore also (or only) an HTML <img> with an `alt` (JupyterLab,
nbviewer and VS Code show HTML before a PNG), and that alt says what the picture shows with at least
one number the cell prints, and differs from every other picture's. The alt is also the output's
`text/plain`, which nbval compares on every CPU, so its numbers are checked as printed numbers are.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
INLINE_PNG = re.compile(r"<img\b[^>]*\bsrc=\"data:image/png;base64,")
IMG = re.compile(r"<img\b[^>]*>")
ALT = re.compile(r"\balt=\"([^\"]*)\"")
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def pictures(path: Path):
    """(cell index, alt or None, the cell's printed text) for each PNG the notebook shows."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        outputs = cell.get("outputs", [])
        printed = "\n".join(_text(o.get("text")) + _text(o.get("data", {}).get("text/plain")) for o in outputs)
        for output in outputs:
            data = output.get("data", {})
            page = _text(data.get("text/html"))
            if "image/png" not in data and not INLINE_PNG.search(page):
                continue
            imgs = [tag for tag in IMG.findall(page) if "data:image/png" in tag]
            alts = [ALT.search(tag) for tag in imgs]
            yield i, (html.unescape(alts[0].group(1)) if len(imgs) == 1 and alts[0] else None), printed, data


def all_pictures():
    return [(path.name, *picture) for path in NOTEBOOKS for picture in pictures(path)]


def test_the_notebooks_show_pictures():
    assert len(all_pictures()) >= 30  # the 32 PNGs of the issue, give or take a rewrite


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_picture_has_a_text_alternative_with_a_printed_number(path):
    problems = []
    for i, alt, printed, data in pictures(path):
        if not alt or not alt.strip():
            problems.append(f"cell {i}: no <img alt=...> in a text/html output beside the PNG")
            continue
        numbers = NUMBER.findall(alt)
        if not numbers:
            problems.append(f"cell {i}: the alt holds no number: {alt[:80]!r}")
        elif not any(n in NUMBER.findall(printed) for n in numbers):
            problems.append(f"cell {i}: no number of the alt is printed by the cell: {alt[:80]!r}")
        if _text(data.get("text/plain")).strip() != alt.strip() and not _text(data.get("text/plain")).endswith(alt):
            problems.append(f"cell {i}: the text/plain (what nbval compares) is not the alt")
    assert problems == [], f"{path.name}:\n" + "\n".join(problems)


def test_no_two_pictures_share_a_text_alternative():
    seen: dict[str, str] = {}
    for name, i, alt, _, _ in all_pictures():
        if alt:
            assert alt not in seen, f"{name} cell {i} and {seen[alt]} say the same: {alt[:80]!r}"
            seen[alt] = f"{name} cell {i}"
