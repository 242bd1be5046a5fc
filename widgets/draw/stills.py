"""Still pictures for notebooks: a figure as a small PNG, for places where nothing needs to move.

Line plots use a handful of colours, so a 64-colour palette PNG looks the same as the full-colour
one at a fraction of the bytes; executed notebooks stay light to open, on GitHub too.
"""
from __future__ import annotations

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
    full.seek(0)
    small = io.BytesIO()
    Image.open(full).convert("RGB").quantize(colours).save(small, format="PNG", optimize=True)
    return small.getvalue()
