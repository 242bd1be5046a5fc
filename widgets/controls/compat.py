"""ipywidgets 7 (Colab) and 8 (`make lab`): the one place where the lab's widgets meet their differences
(display, tooltips, titles, a live figure's text alternative)."""
from __future__ import annotations

from typing import Sequence

import ipywidgets as W
from traitlets import Unicode

IPYWIDGETS_MAJOR = int(W.__version__.split(".")[0])


class Displayed:
    """Mix in before the ipywidgets base (`class X(Displayed, W.VBox)`): 7 displays through `_ipython_display_`,
    never asking `_repr_mimebundle_` where the lab's widgets add their PNG and their line for nbval; 8 needs nothing."""

    if IPYWIDGETS_MAJOR < 8:
        _ipython_display_ = None  # IPython skips a None here and asks _repr_mimebundle_, as under 8

        def _repr_mimebundle_(self, **kwargs):
            """What ipywidgets 8's `Widget._repr_mimebundle_` returns: the repr, and the view."""
            plaintext = repr(self)
            if len(plaintext) > 110:
                plaintext = plaintext[:110] + "…"
            data = {"text/plain": plaintext}
            if self._view_name is not None:
                data["application/vnd.jupyter.widget-view+json"] = {
                    "version_major": 2, "version_minor": 0, "model_id": self._model_id}
                self._handle_displayed()  # 7's on_displayed callbacks (a Box's tell its children)
            return data

        def close(self):
            """As 8 does: a closed widget shows as its repr only."""
            super().close()
            self._repr_mimebundle_ = None


def set_tooltip(widget: W.DOMWidget, text: str) -> W.DOMWidget:
    """`widget` with `text` as its tooltip (an icon button's name): 8's `tooltip`, 7's `description_tooltip`."""
    setattr(widget, "tooltip" if widget.has_trait("tooltip") else "description_tooltip", text)
    return widget


def set_titles(container: W.Box, titles: Sequence[str]) -> W.Box:
    """`container` (an Accordion or a Tab) with `titles` on its pages: 8 takes `titles=`, 7 only `set_title`."""
    for index, title in enumerate(titles):
        container.set_title(index, title)
    return container


class Picture(W.Image):
    """An `Image` whose tooltip reaches the page as the <img>'s title under 8 (use `name_picture`): 8's view reads
    `description`, which an Image lacks, before it sets the title (the view fails, no picture shows)."""

    description = Unicode("", help="always empty: ipywidgets 8's view reads it before it sets the title").tag(sync=True)


def name_picture(image: Picture, text: str) -> Picture:
    """Give a live figure `text` as its text alternative where ipywidgets can (8); returns the image."""
    if image.has_trait("tooltip"):
        image.tooltip = text
    return image
