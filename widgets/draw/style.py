"""The lab's figures: one style (text of at least `FONT_PT` at `DPI`, 2x for the projector; colours that pass
WCAG 2.1 AA), verdicts in those colours, and how a figure becomes pixels (`FastCanvas`, PNG, the static fallback).
Torch-free: a widget that trains nothing (the bricks) pays no torch import."""
from __future__ import annotations

import base64
import html
import struct
import zlib
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterable

import matplotlib.artist
import matplotlib.axes
import matplotlib.figure
import matplotlib.legend
import matplotlib.text
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from widgets.draw.stills import img_html, quantized

DPI = 100  # the screen: a figure shown at its natural width keeps its text at its point size
PROJECTOR_DPI = 2 * DPI  # the projector view: the same figure, twice the pixels, not blurred when enlarged
FONT_PT = 11  # the smallest text in any figure
TITLE_PT = 12
MAX_INCHES = 20  # a figure's largest side: new_figure refuses more before anything is drawn

# Okabe-Ito (Okabe & Ito 2008): distinguishable under the common colour-vision deficiencies. Each hue is darkened
# until its contrast on white reaches 3:1 (OKABE_ITO: lines and shapes) and 4.5:1 (TEXT_COLOURS: text), WCAG 2.1 AA;
# tests/draw/test_style.py recomputes them from the published colours.
OKABE_ITO = ("#0072B2", "#C58800", "#009E73", "#CC79A7", "#229DE2", "#D55E00", "#A1960D", "#000000")
TEXT_COLOURS = ("#0072B2", "#9C6C00", "#008762", "#BC4F8B", "#187CB5", "#C35600", "#80770A", "#000000")
RIGHT_TEXT, WRONG_TEXT = TEXT_COLOURS[2], TEXT_COLOURS[5]  # "✓ Correct" / "✗ Not this time"
MUTED_TEXT = "#595959"  # grey text for captions: 7:1 on white


def legend_below(ax: matplotlib.axes.Axes, ncols: int = 3, gap_pt: float = 36, **kwargs) -> matplotlib.legend.Legend:
    """A legend `gap_pt` points under the Axes (below its tick labels and x label), off the data."""
    options = dict(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=ncols, fontsize=FONT_PT, frameon=False,
                   borderaxespad=gap_pt / FONT_PT, handlelength=1.6, handletextpad=0.4, columnspacing=0.9)
    return ax.legend(**{**options, **kwargs})


def log_gap_axes(ax: matplotlib.axes.Axes, xlabel: str, ylabel: str, scale_note: str) -> matplotlib.legend.Legend:
    """Finish a plot of relative gradient gaps: log y axis, labels, a dotted line at 1e-7 (`scale_note`), legend below."""
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.axhline(1e-7, color="grey", lw=0.8, ls=":", label=f"1e-7: {scale_note}")
    return legend_below(ax, ncols=2)


def apply_style(figure: matplotlib.figure.Figure) -> matplotlib.figure.Figure:
    """Raise every text of a drawn `figure` to at least `FONT_PT`; returns the figure."""
    for ax in figure.axes:
        ax.tick_params(labelsize=FONT_PT)  # also for ticks made later, when the limits change
        ax.title.set_fontsize(max(ax.title.get_fontsize(), TITLE_PT))
    for text in figure.findobj(matplotlib.text.Text):
        if text.get_fontsize() < FONT_PT:
            text.set_fontsize(FONT_PT)
    return figure


def new_figure(width: float, height: float, dpi: int = DPI, layout: str | None = "constrained") -> matplotlib.figure.Figure:
    """A plain Figure (no pyplot, nothing leaks) with a canvas; a live widget passes `layout=None` to fix its Axes."""
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value <= MAX_INCHES:
            raise ValueError(f"{name} must be a number of inches from 0.5 to {MAX_INCHES}, got {value!r}")
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not DPI // 2 <= dpi <= 2 * PROJECTOR_DPI:
        raise ValueError(f"dpi must be a whole number from {DPI // 2} to {2 * PROJECTOR_DPI}, got {dpi!r}")
    figure = matplotlib.figure.Figure(figsize=(width, height), dpi=dpi, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def freeze_layout(figure: matplotlib.figure.Figure) -> matplotlib.figure.Figure:
    """Lay `figure` out once, then keep those places: a `FastCanvas`'s cached backgrounds need Axes that stay put."""
    figure.canvas.draw()
    figure.set_layout_engine("none")
    return figure


# A verdict in a readout: bold colour (4.5:1 on white) and also ✓ or ✗, never colour alone.
_MARKS = {": True": (RIGHT_TEXT, " ✓"), ": False": (WRONG_TEXT, " ✗")}


def verdict_list_html(lines: Iterable[str], verdicts: tuple[str, ...]) -> str:
    """`lines` as a <ul>; each "<verdict>: True/False" of `verdicts`, and a line ending on ✓ or ✗, coloured."""
    items = []
    for line in lines:
        text = html.escape(line)
        for verdict in verdicts:
            for value, (colour, mark) in _MARKS.items():
                said = html.escape(verdict + value)
                text = text.replace(said, f"<b style='color:{colour}'>{said}{mark}</b>")
        for mark, colour in ((" ✓", RIGHT_TEXT), (" ✗", WRONG_TEXT)):  # a plain line ends on its mark
            if text.endswith(mark) and not text.endswith(f"{mark}</b>"):
                text = f"{text[:-1]}<b style='color:{colour}'>{mark.strip()}</b>"
        items.append(f"<li>{text}</li>")
    return "<ul style='margin:0'>" + "".join(items) + "</ul>"


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
    """Add `png`, as itself and as an <img> whose alt is `text`, and `text` to a widget's mimebundle: what a page
    without a kernel shows (a saved notebook, nbviewer), and what nbval compares."""
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    png = quantized(png)  # saved twice, as the PNG and in the HTML: a palette keeps the notebook light
    data["image/png"] = base64.b64encode(png).decode("ascii")
    data["text/html"] = img_html(png, text)
    data["text/plain"] = text
    return bundle


class FastCanvas:
    """PNG frames of a figure whose `moving` artists change, by matplotlib's blitting recipe on the Agg canvas: text
    costs most to draw, so while the axis limits are ones seen recently a frame pastes their cached background."""

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
    """An RGBA array (height x width x 4) as PNG bytes: RGB, quick deflate, no row filter (a frame is sent once
    and soon replaced). Written here because Pillow tries every row filter on each RGB row, which took twice
    the CPU of the deflate itself on a live frame; the pixels are the same, and so is the size."""
    height, width = rgba.shape[:2]
    rows = np.empty((height, 1 + 3 * width), np.uint8)
    rows[:, 0] = 0  # each row starts with its filter type: 0, none
    rows[:, 1:] = rgba[..., :3].reshape(height, -1)  # RGB, the alpha channel dropped
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB, not interlaced
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 1)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: its length, its type, the data, and the CRC of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))
