"""A live figure that screen readers can name: `Picture`, an ipywidgets `Image` with a text alternative.

ipywidgets 8 makes an Image's tooltip the <img>'s title, but its view reads `description` first, which
an Image lacks (without it the view fails and no picture shows). ipywidgets 7 gives an Image no tooltip.
"""
from __future__ import annotations

import ipywidgets as W
from traitlets import Unicode


class Picture(W.Image):
    """An `Image` whose tooltip reaches the page as the <img>'s title (use `name_picture`)."""

    description = Unicode("", help="always empty: ipywidgets 8's view reads it before it sets the title").tag(sync=True)


def name_picture(image: Picture, text: str) -> Picture:
    """Give a live figure `text` as its text alternative where ipywidgets can (8); returns the image."""
    if image.has_trait("tooltip"):
        image.tooltip = text
    return image
