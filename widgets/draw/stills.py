"""Still pictures for notebooks: a figure as a small palette PNG, shown with its text alternative. Line plots use a
handful of colours, so 64 keep the picture and cut the bytes: executed notebooks stay light to open, on GitHub too."""
from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass

import matplotlib.figure
from PIL import Image


def quantized(png: bytes, colours: int = 64) -> bytes:
    """PNG bytes re-encoded with a palette of at most `colours` colours: the same picture, a few times smaller."""
    small = io.BytesIO()
    Image.open(io.BytesIO(bytes(png))).convert("RGB").quantize(colours).save(small, format="PNG", optimize=True)
    return small.getvalue()


def img_html(png: bytes, alt: str) -> str:
    """An HTML <img> holding `png` inline, `alt` its text alternative (an `image/png` output can carry none); nbval
    masks the inline data (tests/nbval_sanitize.cfg) and compares the alt."""
    data = base64.b64encode(bytes(png)).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt.strip(), quote=True)}"/>'


@dataclass(frozen=True)
class Still:
    """A still picture with its text alternative: an <img alt=...> for the page, the alt as its text."""

    png: bytes
    alt: str

    def __repr__(self) -> str:
        return self.alt

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": img_html(self.png, self.alt), "text/plain": self.alt}


def still(figure: matplotlib.figure.Figure, alt: str, colours: int = 64) -> Still:
    """`figure` in the lab's style as a compact PNG, shown with `alt`: what it shows, with its key numbers."""
    from widgets.draw.style import apply_style

    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must say what the picture shows, got {alt!r}")
    full = io.BytesIO()
    apply_style(figure).savefig(full, format="png")
    return Still(quantized(full.getvalue(), colours), alt.strip())
