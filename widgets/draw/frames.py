"""Plumbing shared by every widget: the palette, fast PNG frames, the static fallback, and
callback errors shown under the widget.

Torch-free, so that widgets which train nothing (the bricks) do not pay torch's import.
"""
from __future__ import annotations

import base64
import io
import math
from collections import OrderedDict
from contextlib import contextmanager

import matplotlib.artist
import matplotlib.axes
import matplotlib.figure
import matplotlib.patches
from matplotlib.transforms import Bbox
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
    """Run a widget callback's body; an exception is written into `output` (an ipywidgets
    `Output`) instead of escaping, so the widget stays live. A success clears the last error."""
    output.outputs = ()
    try:
        yield
    except Exception as error:  # a callback must never take the widget down
        output.append_stdout(f"Could not update {what}: {type(error).__name__}: {error}\n")


def with_static_fallback(bundle, png: bytes, text: str):
    """Add a PNG and one deterministic line of text to a widget's mimebundle.

    JupyterLab with a kernel renders the live widget; without one (a saved notebook, nbviewer)
    it shows the PNG as an HTML <img> whose alt is `text`, the text alternative (an `image/png`
    output can hold none that reaches the page); hosts that show no HTML show the plain PNG.
    nbval compares the text and the alt (it skips images and widget views; the inline PNG data
    is masked by tests/nbval_sanitize.cfg).
    """
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    png = quantized(png)  # saved twice, as the PNG and in the HTML: a palette keeps the notebook light
    data["image/png"] = base64.b64encode(png).decode("ascii")
    data["text/html"] = img_html(png, text)
    data["text/plain"] = text
    return bundle


class FastCanvas:
    """PNG frames of a figure whose `moving` artists change: the rest is drawn once and cached.

    This is matplotlib's blitting recipe on the Agg canvas. Text is what costs most to draw;
    while the axis limits are ones seen recently, a frame only pastes the background cached for
    them and draws the moving lines. New limits (or `full=True`) redraw everything and cache it;
    `prepare` does that ahead of time, while a widget is idle, for limits it expects to need.
    """

    CACHED_BACKGROUNDS = 10  # one per set of axis limits recently seen or prepared; each is one RGBA frame

    def __init__(self, figure: matplotlib.figure.Figure, moving: list[matplotlib.artist.Artist]):
        if not isinstance(figure, matplotlib.figure.Figure):
            raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
        if not all(isinstance(a, matplotlib.artist.Artist) and a.axes is not None for a in moving):
            raise TypeError("moving must be a list of artists drawn on the figure's axes")
        self.figure = figure
        self.canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
        self.moving = list(moving)
        for artist in self.moving:
            artist.set_animated(True)  # skipped by canvas.draw(), drawn by hand below
        self._backgrounds: OrderedDict[tuple, object] = OrderedDict()  # axis limits -> cached pixels
        self._tight_boxes: dict[tuple, dict] = {}  # axis limits -> each Axes' extent, labels included
        self.full_redraws = 0
        # Reading each Axes' extent after a full draw (what lets a later frame redraw one Axes alone)
        # costs about a quarter of that draw. With `defer_boxes`, a frame leaves it for
        # `remember_boxes_now`, which a widget calls in its idle time; `prepare` reads it at once.
        self.defer_boxes = False
        self._boxes_pending: tuple | None = None

    def _current_limits(self) -> tuple:
        return tuple((ax.get_xlim(), ax.get_ylim()) for ax in self.figure.axes)

    def png(self, full: bool = False) -> bytes:
        """One frame as PNG bytes."""
        limits = self._current_limits()
        background = None if full else self._backgrounds.get(limits)
        if background is None:
            self._draw_background(limits, full, boxes=not self.defer_boxes)
        else:
            self._backgrounds.move_to_end(limits)
            self.canvas.restore_region(background)
        for artist in self.moving:
            artist.axes.draw_artist(artist)
        return self._encode()

    def prepare(self) -> bool:
        """Draw and cache the background for the current axis limits, unless cached: what a frame
        at these limits would otherwise draw first. No frame is made. Returns whether it drew."""
        limits = self._current_limits()
        if limits in self._backgrounds:
            return False
        self._draw_background(limits, full=False)
        return True

    def remember_boxes_now(self) -> bool:
        """Read the Axes' extents a deferred frame left unread (`defer_boxes`), while the figure still
        has that frame's limits. Returns whether it read them."""
        limits, self._boxes_pending = self._boxes_pending, None
        if limits is None or limits != self._current_limits() or limits not in self._backgrounds:
            return False
        self._read_boxes(limits)
        return True

    def _draw_background(self, limits: tuple, full: bool, boxes: bool = True) -> None:
        """Draw everything but the moving artists into the canvas (one Axes, or all) and cache it;
        after a full draw, read each Axes' extent (`boxes`), or leave that for `remember_boxes_now`."""
        background = None if full else self._redraw_one_axes(limits)
        if background is None:
            self.canvas.draw()
            background = self.canvas.copy_from_bbox(self.figure.bbox)
            if boxes:
                self._read_boxes(limits)
            else:
                self._boxes_pending = limits
            self.full_redraws += 1
        self._backgrounds[limits] = background
        self._backgrounds.move_to_end(limits)
        if len(self._backgrounds) > self.CACHED_BACKGROUNDS:
            self._backgrounds.popitem(last=False)

    def _redraw_one_axes(self, limits: tuple):
        """When only one Axes has new limits (a slider moved one panel's scale), start from a cached
        background where the others match and redraw just that Axes: half the text of a full draw.
        For Axes side by side in one row; returns None (then: a full draw) for any other layout."""
        axes = self.figure.axes
        if self.figure.texts or self.figure.legends or self.figure.images or not self._one_row(axes):
            return None  # figure-level artists, or a grid, could overlap any region
        for old_limits in reversed(self._backgrounds):
            changed = [i for i, (a, b) in enumerate(zip(old_limits, limits)) if a != b]
            if len(old_limits) == len(limits) and len(changed) == 1 and old_limits in self._tight_boxes:
                break
        else:
            return None
        boxes, i = self._tight_boxes[old_limits], changed[0]
        # The free column around the Axes, between its neighbours' extents (tick labels included):
        # its new labels, wider or narrower, land there, and nothing else is drawn there.
        left = max([math.ceil(boxes[j].x1) + 2 for j in boxes if boxes[j].x1 <= boxes[i].x0] or [0])
        right = min([math.floor(boxes[j].x0) - 2 for j in boxes if boxes[j].x0 >= boxes[i].x1]
                    or [math.ceil(self.figure.bbox.x1)])
        if left > boxes[i].x0 - 2 or right < boxes[i].x1 + 2:
            return None  # the panels nearly touch: their anti-aliased edges would mix, draw them all
        region = Bbox([[left, 0], [right + 1, math.ceil(self.figure.bbox.y1)]])  # whole pixels, both ends in
        self.canvas.restore_region(self._backgrounds[old_limits])
        renderer = self.canvas.get_renderer()
        blank = matplotlib.patches.Rectangle(region.p0, region.width, region.height, transform=None,
                                             facecolor=self.figure.get_facecolor(), edgecolor="none",
                                             antialiased=False)
        blank.set_figure(self.figure)
        blank.draw(renderer)
        axes[i].draw(renderer)  # skips the animated (moving) artists, like canvas.draw()
        self._tight_boxes[limits] = {**boxes, i: region}  # neighbours unchanged; this one stays in its column
        return self.canvas.copy_from_bbox(self.figure.bbox)

    @staticmethod
    def _one_row(axes: list) -> bool:
        """Are these Axes side by side in one row, none overlapping another?"""
        boxes = sorted((ax.get_position().x0, ax.get_position().x1, ax.get_position().y0, ax.get_position().y1)
                       for ax in axes)
        return len(boxes) > 1 and all(a[1] <= b[0] and a[2:] == b[2:] for a, b in zip(boxes, boxes[1:]))

    def _read_boxes(self, limits: tuple) -> None:
        """Each Axes' extent, labels included, as the canvas last drew it at `limits`."""
        renderer = self.canvas.get_renderer()
        self._remember_boxes(limits, {i: ax.get_tightbbox(renderer) for i, ax in enumerate(self.figure.axes)})

    def _remember_boxes(self, limits: tuple, boxes: dict) -> None:
        self._tight_boxes[limits] = boxes
        if len(self._tight_boxes) > 4 * self.CACHED_BACKGROUNDS:
            self._tight_boxes.pop(next(iter(self._tight_boxes)))

    def _encode(self) -> bytes:
        width, height = self.canvas.get_width_height()
        frame = Image.frombuffer("RGBA", (width, height), self.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        frame.convert("RGB").save(buffer, format="png", compress_level=1)
        return buffer.getvalue()
