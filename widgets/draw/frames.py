"""Plumbing every widget shares: the palette, fast PNG frames, the static fallback, callback errors
shown under the widget. Torch-free: a widget that trains nothing (the bricks) pays no torch import."""
from __future__ import annotations

import base64
import io
from collections import OrderedDict
from contextlib import contextmanager

import matplotlib.artist
import matplotlib.axes
import matplotlib.figure
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from widgets.draw.stills import img_html, quantized
from widgets.draw.style import LINE_COLOURS

# Okabe-Ito: distinguishable under the common colour-vision deficiencies; its hues darkened where
# needed to reach 3:1 against white, the bar for lines and shapes (`widgets.draw.style`).
OKABE_ITO = LINE_COLOURS


def check_ax(ax: object, name: str = "ax") -> matplotlib.axes.Axes:
    """`ax` itself when it is a matplotlib Axes (what every drawing function draws onto), else a TypeError."""
    if not isinstance(ax, matplotlib.axes.Axes):
        raise TypeError(f"{name} must be a matplotlib Axes, got {type(ax).__name__}")
    return ax


@contextmanager
def errors_shown_in(output, what: str):
    """Run a widget callback's body, writing an exception into `output` so the widget stays live; success clears it."""
    output.outputs = ()
    try:
        yield
    except Exception as error:  # a callback must never take the widget down
        output.append_stdout(f"Could not update {what}: {type(error).__name__}: {error}\n")


def with_static_fallback(bundle, png: bytes, text: str):
    """Add a PNG, as an <img> whose alt is `text` and as itself, and `text` to a widget's mimebundle.

    A page without a kernel (a saved notebook, nbviewer) shows the <img>, hosts without HTML the PNG;
    nbval compares the text and the alt (tests/nbval_sanitize.cfg masks the inline data).
    """
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    png = quantized(png)  # saved twice, as the PNG and in the HTML: a palette keeps the notebook light
    data["image/png"] = base64.b64encode(png).decode("ascii")
    data["text/html"] = img_html(png, text)
    data["text/plain"] = text
    return bundle


class FastCanvas:
    """PNG frames of a figure whose `moving` artists change; the rest is drawn once per set of axis limits.

    Matplotlib's blitting recipe on the Agg canvas: text costs most to draw, so while the axis limits
    are ones seen recently a frame pastes their cached background and draws only the moving artists.
    """

    CACHED_BACKGROUNDS = 10  # one RGBA frame per set of axis limits recently seen

    def __init__(self, figure: matplotlib.figure.Figure, moving: list[matplotlib.artist.Artist]):
        self.figure = figure
        self.canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
        self.moving = list(moving)
        for artist in self.moving:
            artist.set_animated(True)  # skipped by canvas.draw(), drawn by hand in `png`
        self._backgrounds: OrderedDict[tuple, object] = OrderedDict()  # axis limits -> cached pixels
        self.full_redraws = 0

    def png(self, full: bool = False) -> bytes:
        """One frame as PNG bytes; `full` redraws everything (new limits do too)."""
        return png_bytes(self.rgba(full))

    def rgba(self, full: bool = False):
        """One frame as an RGBA array (height x width x 4), for a widget that puts several side by side."""
        limits = tuple((ax.get_xlim(), ax.get_ylim()) for ax in self.figure.axes)
        if full or limits not in self._backgrounds:
            self.canvas.draw()
            self._backgrounds[limits] = self.canvas.copy_from_bbox(self.figure.bbox)
            self.full_redraws += 1
            if len(self._backgrounds) > self.CACHED_BACKGROUNDS:
                self._backgrounds.popitem(last=False)
        else:
            self.canvas.restore_region(self._backgrounds[limits])
        self._backgrounds.move_to_end(limits)
        for artist in self.moving:
            artist.axes.draw_artist(artist)
        return np.array(self.canvas.buffer_rgba())  # a copy: the canvas draws the next frame in place


def png_bytes(rgba) -> bytes:
    """An RGBA array as PNG bytes (RGB, quick compression: a frame is sent once and soon replaced)."""
    buffer = io.BytesIO()
    Image.fromarray(rgba[..., :3]).save(buffer, format="png", compress_level=1)
    return buffer.getvalue()
