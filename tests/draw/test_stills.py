"""`still`: a smaller PNG of the same picture, shown with its words."""
import io

import pytest
from matplotlib.figure import Figure
from PIL import Image

from widgets.draw.stills import Still, img_html, quantized, still


def _figure() -> Figure:
    figure = Figure(figsize=(4, 3), dpi=72)
    ax = figure.subplots()
    ax.plot([0, 1, 2], [0, 1, 4], marker="o", label="a line")
    ax.legend()
    return figure


def test_smaller_than_the_full_png_and_the_same_size_in_pixels():
    figure = _figure()
    full = io.BytesIO()
    figure.savefig(full, format="png")
    small = still(figure, "a line").png
    assert len(small) < len(full.getvalue())
    assert Image.open(io.BytesIO(small)).size == Image.open(io.BytesIO(full.getvalue())).size


def test_a_still_shows_its_picture_with_its_words():
    figure = Figure(figsize=(2, 1))
    figure.subplots().plot([0, 1], [0, 1])
    picture = still(figure, 'a line from 0 to 1 "rising" <fast>')
    assert isinstance(picture, Still) and picture.png.startswith(b"\x89PNG")
    bundle = picture._repr_mimebundle_()
    assert bundle["text/plain"] == repr(picture) == 'a line from 0 to 1 "rising" <fast>'
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,')
    assert 'alt="a line from 0 to 1 &quot;rising&quot; &lt;fast&gt;"' in bundle["text/html"]  # escaped, whole
    assert len(quantized(picture.png)) <= len(picture.png) * 1.1
    assert img_html(picture.png, picture.alt) == bundle["text/html"]
    with pytest.raises(ValueError, match="alt"):
        still(figure, "  ")
