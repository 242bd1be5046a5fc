"""`FastCanvas`: a blitted frame has the pixels of a full redraw, limits seen before are not redrawn, and a frame's PNG
holds exactly its pixels."""
import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from widgets.draw.style import FastCanvas, png_bytes


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


def test_every_frame_equals_a_full_redraw_and_seen_limits_blit(two_panels):
    figure, axes, lines = two_panels
    canvas = FastCanvas(figure, list(lines))
    canvas.png()
    for panel, top, data in ((0, 10, [0, 2, 3, 1]), (1, 9000, [0, 100, 400, 9000]), (0, 10, [1, 1, 1, 1])):
        axes[panel].set_ylim(-1, top)  # wider tick labels than before: the old ones must be gone
        lines[panel].set_ydata(data)
        frame = canvas.png()
        assert int(np.abs(_pixels(frame) - _pixels(canvas.png(full=True))).max()) == 0, (panel, top)
    redraws = canvas.full_redraws
    axes[1].set_ylim(-1, 9000)  # both panels' limits seen before: their background is pasted
    lines[1].set_ydata([5, 5, 5, 5])
    frame = canvas.png()
    assert canvas.full_redraws == redraws
    assert int(np.abs(_pixels(frame) - _pixels(canvas.png(full=True))).max()) == 0


def test_a_frame_is_a_valid_png_of_exactly_its_pixels(two_panels):
    figure, _, lines = two_panels
    rgba = FastCanvas(figure, list(lines)).rgba()
    png = png_bytes(rgba)
    Image.open(io.BytesIO(png)).verify()  # every chunk's CRC, and the stream's end
    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == "RGB" and image.size == (rgba.shape[1], rgba.shape[0])
        assert np.array_equal(np.asarray(image), rgba[..., :3])
