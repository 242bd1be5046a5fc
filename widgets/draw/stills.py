"""Still pictures for notebooks: a figure as a small palette PNG, shown with its text alternative.

Line plots use a handful of colours, so 64 keep the picture and cut the bytes: executed notebooks
stay light to open, on GitHub too.
"""
from __future__ import annotations

import base64
import html
import io

import matplotlib.figure
from PIL import Image


def compact_png(figure: matplotlib.figure.Figure, colours: int = 64) -> bytes:
    """The figure as PNG bytes, palette-quantised to at most `colours` colours (2 to 256)."""
    full = io.BytesIO()
    figure.savefig(full, format="png")
    return quantized(full.getvalue(), colours)


def quantized(png: bytes, colours: int = 64) -> bytes:
    """PNG bytes re-encoded with a palette of at most `colours` colours: the same picture, a few times smaller."""
    small = io.BytesIO()
    Image.open(io.BytesIO(bytes(png))).convert("RGB").quantize(colours).save(small, format="PNG", optimize=True)
    return small.getvalue()


def img_html(png: bytes, alt: str) -> str:
    """An HTML <img> holding `png` inline, `alt` its text alternative (an `image/png` output can carry none).

    nbval masks the inline data (tests/nbval_sanitize.cfg) and compares the alt text.
    """
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must say what the picture shows, got {alt!r}")
    data = base64.b64encode(bytes(png)).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt.strip(), quote=True)}"/>'


class Still:
    """A still picture with its text alternative: an <img alt=...> for the page, the alt as its text."""

    def __init__(self, png: bytes, alt: str):
        self.png, self.alt = bytes(png), alt.strip()
        self._html = img_html(self.png, self.alt)

    def __repr__(self) -> str:
        return self.alt

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._html, "text/plain": self.alt}


def still(figure: matplotlib.figure.Figure, alt: str, colours: int = 64) -> Still:
    """`figure` in the lab's style as a compact PNG, shown with `alt`: what it shows, with its key numbers."""
    from widgets.draw.style import apply_style

    return Still(compact_png(apply_style(figure), colours), alt)
