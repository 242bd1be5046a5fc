"""A live figure that screen readers can name: `Picture`, an ipywidgets `Image` with a text alternative.

Buttons are named with `widgets.controls.compat.set_tooltip` (or by their own words). A live figure
is an `Image` widget, whose tooltip ipywidgets 8 would make the <img>'s `title` (its text
alternative) — but its front end decides by reading the widget's `description`, which an `Image`
lacks: a tooltip alone makes the view fail ("Error setting state ... reading 'length'") and no
picture shows. `Picture` carries an empty `description`, so the title lands. ipywidgets 7 gives an
`Image` no tooltip: there the readout beside the figure (the same words) is the only text.
"""
from __future__ import annotations

import ipywidgets as W
from traitlets import Unicode

from widgets.controls.compat import set_tooltip


class Picture(W.Image):
    """An `Image` whose tooltip reaches the page as the <img>'s title (use `name_picture`)."""

    description = Unicode("", help="always empty: ipywidgets 8's view reads it before it sets the title").tag(sync=True)


def name_picture(image: Picture, text: str) -> Picture:
    """Give a live figure `text` as its text alternative where ipywidgets can (8); returns the image."""
    if not isinstance(image, Picture):
        raise TypeError(f"image must be a widgets.controls.names.Picture, got {type(image).__name__}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must say what the picture shows, got {text!r}")
    if image.has_trait("tooltip"):
        set_tooltip(image, text)
    return image
