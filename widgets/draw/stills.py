"""Still pictures for notebooks: a figure as a small PNG, for places where nothing needs to move,
shown with its text alternative (`still`).

Line plots use a handful of colours, so a 64-colour palette PNG looks the same as the full-colour
one at a fraction of the bytes; executed notebooks stay light to open, on GitHub too.
"""
from __future__ import annotations

import base64
import html
import io

import matplotlib.figure
from PIL import Image


def compact_png(figure: matplotlib.figure.Figure, colours: int = 64) -> bytes:
    """The figure as PNG bytes, palette-quantised to at most `colours` colours (2 to 256)."""
    if not isinstance(figure, matplotlib.figure.Figure):
        raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    if isinstance(colours, bool) or not isinstance(colours, int) or not 2 <= colours <= 256:
        raise ValueError(f"colours must be a whole number from 2 to 256, got {colours!r}")
    full = io.BytesIO()
    figure.savefig(full, format="png")
    return quantized(full.getvalue(), colours)


def quantized(png: bytes, colours: int = 64) -> bytes:
    """PNG bytes re-encoded with a palette of at most `colours` colours: the same picture, a few times smaller."""
    small = io.BytesIO()
    Image.open(io.BytesIO(bytes(png))).convert("RGB").quantize(colours).save(small, format="PNG", optimize=True)
    return small.getvalue()


def img_html(png: bytes, alt: str) -> str:
    """An HTML <img> holding `png` inline, with `alt` as its text alternative.

    JupyterLab's image renderer ignores an output's metadata, so an `image/png` output can carry no
    text alternative; an HTML output can, and JupyterLab, nbviewer and VS Code show it before a PNG.
    nbval masks the inline data (tests/nbval_sanitize.cfg) and compares the alt text.
    """
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must say what the picture shows, got {alt!r}")
    data = base64.b64encode(bytes(png)).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt.strip(), quote=True)}"/>'


class Still:
    """A still picture with its text alternative, for a notebook cell to show: an HTML <img alt=...>
    for the page, and the same alt as the text (what nbval compares, and what a text-only reader sees)."""

    def __init__(self, png: bytes, alt: str):
        self.png, self.alt = bytes(png), alt.strip()
        self._html = img_html(self.png, self.alt)

    def __repr__(self) -> str:
        return self.alt

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._html, "text/plain": self.alt}


def still(figure: matplotlib.figure.Figure, alt: str, colours: int = 64) -> Still:
    """`figure` in the lab's style (`widgets.draw.style.apply_style`: text 11 pt or more) as a compact
    PNG, shown with `alt`: what the picture shows, with the key numbers its cell prints."""
    from widgets.draw.style import apply_style

    return Still(compact_png(apply_style(figure), colours), alt)
