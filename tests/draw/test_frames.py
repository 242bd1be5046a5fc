"""`FastCanvas`: every way of making a frame gives the pixels of a full redraw."""
import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from widgets.draw.frames import FastCanvas


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


@pytest.fixture
def two_panels():
    figure = Figure(figsize=(8, 3), dpi=72)
    figure.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.88, wspace=0.25)
    left, right = figure.subplots(1, 2)
    a = left.plot([0, 1, 2, 3], [0, 1, 4, 9], marker="o", label="a")[0]
    b = right.plot([0, 1, 2, 3], [3, 1, 2, 0], linestyle="--", label="b")[0]
    for ax, name in ((left, "pile"), (right, "loss")):
        ax.set_title(name)
        ax.set_ylabel(f"{name} (units)")
        ax.legend(loc="upper left")
    return figure, (left, right), (a, b)


@pytest.mark.parametrize("panel", [0, 1])
def test_one_panel_rescaled_is_redrawn_alone_and_exactly(two_panels, panel):
    figure, axes, lines = two_panels
    canvas = FastCanvas(figure, list(lines))
    canvas.png()
    assert canvas.full_redraws == 1
    lines[panel].set_ydata([0, 100, 400, 9000])
    axes[panel].set_ylim(-50, 10_000)  # wider tick labels than before: the old ones must be erased
    partial = canvas.png()
    assert canvas.full_redraws == 1, "only one panel changed: no full redraw"
    assert int(np.abs(_pixels(partial) - _pixels(canvas.png(full=True))).max()) == 0


def test_one_panel_then_the_other_rescaled_stay_exact(two_panels):
    """The right panel's labels grow to the left; a later redraw of the left panel must not erase them."""
    figure, axes, lines = two_panels
    canvas = FastCanvas(figure, list(lines))
    canvas.png()
    for panel, top in ((1, 123_456), (0, 98_765), (1, 10), (0, 10)):
        axes[panel].set_ylim(-1, top)
        partial = canvas.png()
        assert int(np.abs(_pixels(partial) - _pixels(canvas.png(full=True))).max()) == 0, (panel, top)
        canvas._backgrounds.clear()  # forget the full redraw's frame: the next one is partial again
        canvas.png()


def test_both_panels_rescaled_take_a_full_redraw(two_panels):
    figure, axes, lines = two_panels
    canvas = FastCanvas(figure, list(lines))
    canvas.png()
    for ax in axes:
        ax.set_ylim(0, 50)
    canvas.png()
    assert canvas.full_redraws == 2


def test_deferred_boxes_are_read_in_idle_time_and_then_allow_a_one_panel_redraw(two_panels):
    figure, axes, lines = two_panels
    canvas = FastCanvas(figure, list(lines))
    canvas.defer_boxes = True
    canvas.png()
    axes[0].set_ylim(-5, 50)
    canvas.png()  # the boxes of the first frame were never read: a full redraw
    assert canvas.full_redraws == 2
    assert canvas.remember_boxes_now() and not canvas.remember_boxes_now()  # read once, for the frame shown
    axes[0].set_ylim(-5, 5_000)
    partial = canvas.png()
    assert canvas.full_redraws == 2, "the boxes read in idle time let one panel be redrawn alone"
    assert int(np.abs(_pixels(partial) - _pixels(canvas.png(full=True))).max()) == 0
    axes[1].set_ylim(0, 7)  # the limits moved on before idle time came: nothing is read for them
    assert not canvas.remember_boxes_now()
